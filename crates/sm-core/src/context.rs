//! Fitting requested contexts to the model (methodology §1.2).
//!
//! `room = max_model_len − output_tokens − 64`. A context that fits is kept; one
//! that misses by at most 10 % is trimmed to `room`; anything else is skipped.
//! At `max_model_len` 262,144 with 4,096 output tokens a requested 256K is measured at 257,984
//! tokens; its row keeps the name the user asked for, `256K`, and views show the count beside
//! it: `256K (257,984)` ([`shown`], the one function that names a context on every page, in the
//! CSV and the terminal). A context's identity is its row kind (prefill or decode) and its exact
//! tokens: 256K names both the decode row at 257,984 tokens and the prefill row at 262,079. A
//! filter finds a context by its name or its tokens ([`ContextQuery`]); a comparison pairs the
//! nearest contexts of one kind within 1 % ([`pair`]).

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

/// Two contexts of one kind are paired by a comparison when they differ by at most this share of
/// the larger: the reference tool's `251K` row (257,024 tokens) and speedmatrix's 256K fitted to
/// the model (257,984) are one context measured by two tools (methodology §12.5).
pub const PAIR_WITHIN: f64 = 0.01;

/// The contexts of two runs (of one row kind), paired for a comparison: each context of `a` with
/// the nearest of `b` within [`PAIR_WITHIN`], each used once, the closest pairs first; a context
/// with no partner stands alone. Ascending by tokens.
pub fn pair(a: &[u64], b: &[u64]) -> Vec<(Option<u64>, Option<u64>)> {
    let dedup = |v: &[u64]| {
        let mut v = v.to_vec();
        v.sort_unstable();
        v.dedup();
        v
    };
    let (a, b) = (dedup(a), dedup(b));
    let mut near: Vec<(u64, usize, usize)> = Vec::new();
    for (i, &x) in a.iter().enumerate() {
        for (j, &y) in b.iter().enumerate() {
            let gap = x.abs_diff(y);
            if (gap as f64) <= PAIR_WITHIN * x.max(y) as f64 {
                near.push((gap, i, j));
            }
        }
    }
    near.sort_unstable();
    let (mut a_to, mut b_taken) = (vec![None; a.len()], vec![false; b.len()]);
    for (_, i, j) in near {
        if a_to[i].is_none() && !b_taken[j] {
            a_to[i] = Some(b[j]);
            b_taken[j] = true;
        }
    }
    let mut out: Vec<(Option<u64>, Option<u64>)> = a.iter().zip(a_to).map(|(&x, y)| (Some(x), y)).collect();
    out.extend(b.iter().zip(b_taken).filter(|(_, taken)| !taken).map(|(&y, _)| (None, Some(y))));
    out.sort_by_key(|(x, y)| x.or(*y));
    out
}

/// Two paired contexts as one name: the one name where both runs show the same, else both, the
/// baseline's first: `256K (257,984) ≈ 251K`.
pub fn shown_pair(a: &str, b: &str) -> String {
    if a == b { a.to_string() } else { format!("{a} ≈ {b}") }
}

/// A context as a filter names it (the site's `?context=`): the name it was asked as (`256K`,
/// `256k`, `1M`: the label [`label`] gives those tokens), its exact tokens (`257984`, `257,984`),
/// or both as [`shown`] prints them (`256K (257,984)`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ContextQuery {
    pub label: Option<String>,
    pub tokens: Option<u64>,
}

impl ContextQuery {
    /// The query `text` asks for, or why it is not one.
    pub fn parse(text: &str) -> Result<ContextQuery, String> {
        let text = text.trim();
        let bad = || {
            format!(
                "context must be a context's name or its exact tokens, e.g. 32K, 262144 or \"256K (257,984)\", not \
                 \"{text}\""
            )
        };
        let (name, count) = match text.strip_suffix(')').and_then(|t| t.split_once('(')) {
            Some((name, count)) => (name.trim(), Some(count.trim())),
            None => (text, None),
        };
        let exact = |t: &str| -> Option<u64> {
            let digits = t.replace([',', '_'], "");
            digits.bytes().all(|b| b.is_ascii_digit()).then(|| digits.parse().ok()).flatten().filter(|&n| n > 0)
        };
        let query = match count {
            Some(count) => ContextQuery { label: Self::name(name), tokens: exact(count) },
            None if name.ends_with(['k', 'K', 'm', 'M']) => ContextQuery { label: Self::name(name), tokens: None },
            None => ContextQuery { label: None, tokens: exact(name) },
        };
        let whole = match count {
            Some(_) => query.label.is_some() && query.tokens.is_some(),
            None => query.label.is_some() || query.tokens.is_some(),
        };
        if whole { Ok(query) } else { Err(bad()) }
    }

    /// `32K`, `32k` and `0.03125M` are all `32K`; a plain number under 1,024 is its own name.
    fn name(text: &str) -> Option<String> {
        crate::units::parse_tokens(text).ok().filter(|t| t.0 > 0).map(label)
    }

    /// Whether the context `label` of `tokens` tokens is the one asked for.
    pub fn matches(&self, label: &str, tokens: u64) -> bool {
        self.label.as_deref().is_none_or(|l| l == label) && self.tokens.is_none_or(|t| t == tokens)
    }

    /// The query as a heading names it: `256K`, `257,984 tokens`, `256K (257,984)`.
    pub fn shown(&self) -> String {
        match (&self.label, self.tokens) {
            (Some(l), Some(t)) => shown(l, t),
            (Some(l), None) => l.clone(),
            (None, Some(t)) => format!("{} tokens", Tokens(t)),
            (None, None) => String::new(),
        }
    }
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
    #[test]
    fn pairs_the_nearest_context_within_one_percent() {
        // the seed replay's 256K fitted to the model with the reference tool's 251K row
        assert_eq!(
            pair(&[8 * K, 257_984], &[8 * K, 257_024]),
            vec![(Some(8 * K), Some(8 * K)), (Some(257_984), Some(257_024))]
        );
        // 128K fitted to a 131,072-token model at 2,048 output tokens (128,960) is 1.6 % short of a
        // plain 128K: two contexts (a filter by the name 128K still finds both)
        assert_eq!(pair(&[131_072 - 2048 - 64], &[128 * K]), vec![(Some(128_960), None), (None, Some(128 * K))]);
        // 2 % apart: two contexts, not one
        assert_eq!(pair(&[100_000], &[102_000]), vec![(Some(100_000), None), (None, Some(102_000))]);
        // each used once, the nearest first: 1,000 takes 1,001, not 995 or 1,005
        assert_eq!(
            pair(&[1000], &[995, 1005, 1001]),
            vec![(None, Some(995)), (Some(1000), Some(1001)), (None, Some(1005))]
        );
        assert_eq!(pair(&[], &[5]), vec![(None, Some(5))]);
    }

    #[test]
    fn a_pair_shows_both_names_where_they_differ() {
        assert_eq!(shown_pair("8K", "8K"), "8K");
        assert_eq!(shown_pair(&shown("256K", 257_984), &shown("251K", 257_024)), "256K (257,984) ≈ 251K");
    }

    #[test]
    fn a_filter_finds_a_context_by_its_name_or_its_tokens() {
        let named = ContextQuery::parse(" 256k ").unwrap();
        assert_eq!(named, ContextQuery { label: Some("256K".into()), tokens: None });
        // the decode row and the prefill row at the maximum were both asked as 256K
        assert!(named.matches("256K", 257_984) && named.matches("256K", 262_079) && !named.matches("251K", 257_024));
        let exact = ContextQuery::parse("257,984").unwrap();
        assert!(exact.matches("256K", 257_984) && !exact.matches("256K", 262_079));
        assert_eq!(ContextQuery::parse("257984").unwrap(), exact);
        // what every page shows is a query too, and finds exactly that row
        let both = ContextQuery::parse(&shown("256K", 262_079)).unwrap();
        assert_eq!(both, ContextQuery { label: Some("256K".into()), tokens: Some(262_079) });
        assert!(both.matches("256K", 262_079) && !both.matches("256K", 257_984));
        assert_eq!(ContextQuery::parse("1M").unwrap().label.as_deref(), Some("1024K"));
        assert_eq!(
            (named.shown(), exact.shown(), both.shown()),
            ("256K".into(), "257,984 tokens".into(), "256K (262,079)".into())
        );
        for bad in ["", "K", "abc", "0", "-5", "256K (x)", "long (5)", "1.5K", "256K ()"] {
            let e = ContextQuery::parse(bad).unwrap_err();
            assert!(e.contains("e.g. 32K"), "{bad}: {e}");
        }
    }
}
