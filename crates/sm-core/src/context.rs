//! Fitting requested contexts to the model (methodology §1.2).
//!
//! `room = max_model_len − output_tokens − 64`. A context that fits is kept; one
//! that misses by at most 10 % is trimmed to `room`; anything else is skipped.
//! This is why 256K becomes 251K at `max_model_len` 262,144 with 4,096 output tokens.

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

#[cfg(test)]
mod tests {
    use super::*;

    const K: u64 = 1024;

    #[test]
    fn published_page_251k() {
        let fit = fit_context(Tokens(256 * K), Tokens(4096), Some(Tokens(262_144)));
        assert_eq!(fit.context(), Some(Tokens(257_984)));
        assert_eq!(label(fit.context().unwrap()), "251K");
        let kept = fit_context(Tokens(128 * K), Tokens(4096), Some(Tokens(262_144)));
        assert_eq!(kept, Fit::Kept(Tokens(131_072)));
        // a prefill row (1 output token) of 256K becomes 255K
        let prefill = fit_context(Tokens(256 * K), Tokens(1), Some(Tokens(262_144)));
        assert_eq!(prefill.context(), Some(Tokens(262_079)));
        assert_eq!(label(Tokens(262_079)), "255K");
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
}
