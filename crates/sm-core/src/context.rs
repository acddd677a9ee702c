//! Fitting requested contexts to the model (methodology §1.2).
//!
//! `room = max_model_len − output_tokens − 64`. A context that fits is kept; one
//! that misses by at most 10 % is trimmed to `room`; anything else is skipped.
//! At `max_model_len` 262,144 with 4,096 output tokens a requested 256K is measured at 257,984
//! tokens; its row keeps the name the user asked for, `256K`, and views show the count beside
//! it: `256K (257,984)` ([`shown`]).

use crate::Tokens;

/// Tokens kept free besides the output, for the chat template's slack.
pub const MODEL_LEN_MARGIN: u64 = 64;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Fit {
    Kept(Tokens),
    Trimmed { requested: Tokens, to: Tokens, reason: String },
    Skipped { requested: Tokens, reason: String },
}

impl Fit {
    /// The context that will be measured, if any.
    pub fn context(&self) -> Option<Tokens> {
        match self {
            Fit::Kept(t) | Fit::Trimmed { to: t, .. } => Some(*t),
            Fit::Skipped { .. } => None,
        }
    }
}

pub fn fit_context(requested: Tokens, output_tokens: Tokens, max_model_len: Option<Tokens>) -> Fit {
    let Some(mml) = max_model_len else {
        return Fit::Kept(requested);
    };
    let room = mml.0.saturating_sub(output_tokens.0 + MODEL_LEN_MARGIN);
    if requested.0 <= room {
        Fit::Kept(requested)
    } else if room > 0 && room as f64 >= 0.9 * requested.0 as f64 {
        Fit::Trimmed {
            requested,
            to: Tokens(room),
            reason: format!("trimmed to {} tokens by max_model_len {}", Tokens(room), mml),
        }
    } else {
        Fit::Skipped {
            requested,
            reason: format!(
                "context {} + {} output tokens exceeds max_model_len {}",
                label(requested),
                output_tokens,
                mml
            ),
        }
    }
}

/// The page's label of a context: `floor(ctx / 1024)` followed by `K`, or the
/// plain number under 1,024.
pub fn label(ctx: Tokens) -> String {
    if ctx.0 >= 1024 { format!("{}K", ctx.0 / 1024) } else { ctx.0.to_string() }
}

/// A context's label as every view prints it: the label (the name of what the user asked for,
/// `256K`) with the exact token count beside it whenever the label does not already say it:
/// `256K (257,984)` for a 256K row trimmed by the model's limit, `9K (10,000)`; `8K` stays `8K`.
/// `context` 0 (a skipped row, never measured) has no count.
pub fn shown(label: &str, context: u64) -> String {
    let named = match label.strip_suffix('K') {
        Some(k) => k.parse::<u64>().ok().and_then(|k| k.checked_mul(1024)),
        None => label.parse::<u64>().ok(),
    };
    if context == 0 || named == Some(context) { label.to_string() } else { format!("{label} ({})", Tokens(context)) }
}

#[cfg(test)]
mod tests {
    use super::*;

    const K: u64 = 1024;

    #[test]
    fn published_page_251k() {
        let fit = fit_context(Tokens(256 * K), Tokens(4096), Some(Tokens(262_144)));
        assert_eq!(fit.context(), Some(Tokens(257_984)));
        assert_eq!(shown(&label(Tokens(256 * K)), fit.context().unwrap().0), "256K (257,984)");
        let kept = fit_context(Tokens(128 * K), Tokens(4096), Some(Tokens(262_144)));
        assert_eq!(kept, Fit::Kept(Tokens(131_072)));
        // a prefill row (1 output token) of 256K is measured at 262,079 tokens and still named 256K
        let prefill = fit_context(Tokens(256 * K), Tokens(1), Some(Tokens(262_144)));
        assert_eq!(prefill.context(), Some(Tokens(262_079)));
        assert_eq!(shown("256K", 262_079), "256K (262,079)");
    }

    #[test]
    fn reference_tool_cases() {
        let mml = Some(Tokens(131_072));
        assert_eq!(fit_context(Tokens(128 * K), Tokens(2048), mml).context(), Some(Tokens(131_072 - 2048 - 64)));
        let small = Some(Tokens(65_536));
        assert!(matches!(fit_context(Tokens(128 * K), Tokens(2048), small), Fit::Skipped { .. }));
        assert_eq!(fit_context(Tokens(64 * K), Tokens(2048), small).context(), Some(Tokens(65_536 - 2048 - 64)));
    }

    #[test]
    fn unknown_limit_keeps_everything() {
        assert_eq!(fit_context(Tokens(1 << 30), Tokens(1), None), Fit::Kept(Tokens(1 << 30)));
    }

    #[test]
    fn labels() {
        assert_eq!(label(Tokens(8192)), "8K");
        assert_eq!(label(Tokens(1000)), "1000");
        assert_eq!(label(Tokens(257_984)), "251K");
    }

    #[test]
    fn shown_labels_add_the_count_where_the_label_does_not_say_it() {
        assert_eq!(shown("8K", 8 * K), "8K");
        assert_eq!(shown("1000", 1000), "1000");
        // kept, but "9K" alone would not say how many tokens
        assert_eq!(shown(&label(Tokens(10_000)), 10_000), "9K (10,000)");
        assert_eq!(shown("64K", 65_536 - 2048 - 64), "64K (63,424)");
        assert_eq!(shown("1000", 950), "1000 (950)");
        // the reference tool's page: its 251K row was 251 × 1,024 tokens
        assert_eq!(shown("251K", 257_024), "251K");
        // a skipped row has no context; an odd imported label keeps its text and gets the count
        assert_eq!(shown("128K", 0), "128K");
        assert_eq!(shown("long", 5), "long (5)");
    }
}
