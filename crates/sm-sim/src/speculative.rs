//! A profile's optional `[speculative]` table: speculative decoding, in the standard model. Each
//! decode step of a sequence verifies `draft_tokens` (K) drafted tokens; each is accepted with
//! probability `acceptance` (p) until the first rejection, and the step emits the accepted ones plus
//! the target model's own token. Tokens per step are therefore 1 + A with
//! P(A ≥ a) = p^a (a ≤ K), whose mean is (1 − p^(K+1)) / (1 − p). The draw is a pure function of
//! (seed, request id, step), so the trace's per-request `drafts` and `accepted` are the truth the
//! engine's counters are checked against.

use toml::{Table, Value};

use crate::natural::{mix, unit};

/// Largest accepted `draft_tokens`: real engines speculate a handful of tokens.
pub const MAX_DRAFT_TOKENS: u32 = 64;
const KEYS: &[&str] = &["draft_tokens", "acceptance", "seed"];

#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Speculative {
    /// K: draft tokens verified per step (1 to [`MAX_DRAFT_TOKENS`]).
    pub draft_tokens: u32,
    /// p: probability that each draft token is accepted, given the previous one was; 0 to 1.
    pub acceptance: f64,
    pub seed: u64,
}

/// A `[speculative]` value out of range; which one it is, so that the caller can name the key or
/// flag it came from without reading the message.
#[derive(Debug, Clone, Copy, PartialEq, thiserror::Error)]
pub enum SpeculativeError {
    #[error("draft_tokens must be from 1 to {MAX_DRAFT_TOKENS}, got {0}")]
    DraftTokens(u32),
    #[error("acceptance must be a probability from 0 to 1, got {0}")]
    Acceptance(f64),
}

impl Speculative {
    /// Checks K and p; the caller names the key or flag they came from.
    pub fn new(draft_tokens: u32, acceptance: f64, seed: u64) -> Result<Self, SpeculativeError> {
        if !(1..=MAX_DRAFT_TOKENS).contains(&draft_tokens) {
            return Err(SpeculativeError::DraftTokens(draft_tokens));
        }
        if !(acceptance.is_finite() && (0.0..=1.0).contains(&acceptance)) {
            return Err(SpeculativeError::Acceptance(acceptance));
        }
        Ok(Self { draft_tokens, acceptance, seed })
    }

    /// Draft tokens accepted at decode step `step` of request `id`: 0 to K.
    pub fn accepted(&self, id: u64, step: u64) -> u32 {
        let mut x = mix(self.seed ^ mix(id ^ mix(step)));
        let mut a = 0;
        while a < self.draft_tokens {
            x = mix(x);
            if unit(x) >= self.acceptance {
                break;
            }
            a += 1;
        }
        a
    }

    /// Expected tokens per step, (1 − p^(K+1)) / (1 − p), and K + 1 at p = 1.
    pub fn mean_tokens_per_step(&self) -> f64 {
        let p = self.acceptance;
        if p >= 1.0 {
            f64::from(self.draft_tokens) + 1.0
        } else {
            (1.0 - p.powi(self.draft_tokens as i32 + 1)) / (1.0 - p)
        }
    }

    /// Reads `[speculative]`; an unknown key is an error.
    pub(crate) fn from_table(t: &Table) -> Result<Speculative, String> {
        if let Some(k) = t.keys().find(|k| !KEYS.contains(&k.as_str())) {
            return Err(format!("speculative.{k}: unknown key (known: {})", KEYS.join(", ")));
        }
        let k = match t.get("draft_tokens") {
            Some(Value::Integer(i)) if *i >= 0 => u32::try_from(*i).unwrap_or(u32::MAX),
            None => return Err("speculative.draft_tokens: missing (draft tokens per step, ≥ 1)".into()),
            Some(v) => return Err(format!("speculative.draft_tokens: expected an integer ≥ 1, got {v:?}")),
        };
        let p = match t.get("acceptance") {
            Some(Value::Float(f)) => *f,
            Some(Value::Integer(i)) => *i as f64,
            None => return Err("speculative.acceptance: missing (acceptance probability, 0 to 1)".into()),
            Some(v) => return Err(format!("speculative.acceptance: expected a number, got {v:?}")),
        };
        let seed = match t.get("seed") {
            None => 0,
            Some(Value::Integer(i)) if *i >= 0 => *i as u64,
            Some(v) => return Err(format!("speculative.seed: must be an integer ≥ 0, got {v:?}")),
        };
        Self::new(k, p, seed).map_err(|e| format!("speculative.{e}"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_per_step_follow_the_standard_model() {
        for (k, p) in [(3, 0.6), (5, 0.8), (1, 0.3), (4, 0.0), (2, 1.0)] {
            let s = Speculative::new(k, p, 7).unwrap();
            let n = 40_000u64;
            let mut hist = vec![0u64; k as usize + 1];
            for i in 0..n {
                hist[s.accepted(i % 97, i / 97) as usize] += 1;
            }
            let mean = hist.iter().enumerate().map(|(a, c)| (a as f64 + 1.0) * *c as f64).sum::<f64>() / n as f64;
            let want = s.mean_tokens_per_step();
            assert!((mean - want).abs() < 0.03 * want, "K={k} p={p}: mean {mean}, want {want}");
            // P(A = a) = p^a (1 − p) below K, p^K at K
            for (a, c) in hist.iter().enumerate() {
                let pa = if a as u32 == k { p.powi(a as i32) } else { p.powi(a as i32) * (1.0 - p) };
                let got = *c as f64 / n as f64;
                assert!((got - pa).abs() < 0.01, "K={k} p={p} a={a}: {got} vs {pa}");
            }
        }
    }

    #[test]
    fn table_is_validated() {
        let t = |s: &str| Speculative::from_table(&toml::from_str::<Table>(s).unwrap());
        assert_eq!(t("draft_tokens = 4\nacceptance = 0.5\nseed = 3").unwrap(), Speculative::new(4, 0.5, 3).unwrap());
        assert!(t("draft_tokens = 0\nacceptance = 0.5").unwrap_err().contains("draft_tokens"));
        assert!(t("draft_tokens = 2\nacceptance = 1.5").unwrap_err().contains("acceptance"));
        assert!(t("draft_tokens = 2\nacceptance = 0.5\nk = 1").unwrap_err().contains("unknown key"));
    }

    #[test]
    fn an_out_of_range_value_says_which_it_is() {
        for k in [0, MAX_DRAFT_TOKENS + 1] {
            assert_eq!(Speculative::new(k, 0.5, 0), Err(SpeculativeError::DraftTokens(k)));
        }
        for p in [-0.1, 1.01, f64::NAN, f64::INFINITY] {
            assert!(matches!(Speculative::new(2, p, 0), Err(SpeculativeError::Acceptance(_))), "{p}");
        }
        // K is checked first: both wrong names the draft tokens
        assert_eq!(Speculative::new(0, 2.0, 0), Err(SpeculativeError::DraftTokens(0)));
    }
}
