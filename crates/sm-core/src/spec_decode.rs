//! Speculative decoding over a cell's window (methodology §14.2): the engine's cumulative counters
//! read at the window's start and end, and the figures their differences give.

use serde::{Deserialize, Serialize};

/// The engine's cumulative speculative-decoding counters at one scrape.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct SpecCounters {
    /// Verification steps that checked drafts (`vllm:spec_decode_num_drafts`).
    pub drafts: f64,
    /// Draft tokens proposed (`vllm:spec_decode_num_draft_tokens`).
    pub draft_tokens: f64,
    /// Draft tokens the target model accepted (`vllm:spec_decode_num_accepted_tokens`).
    pub accepted: f64,
}

/// The figures of one window.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct SpecDecode {
    /// Mean tokens per verification step: 1 + accepted ÷ drafts.
    #[schemars(range(min = 1))]
    pub acceptance_length: f64,
    /// Share of draft tokens accepted, 0 to 1: accepted ÷ draft tokens.
    #[schemars(range(min = 0, max = 1))]
    pub acceptance_rate: f64,
    /// Verification steps in the window.
    #[schemars(range(min = 1))]
    pub drafts: u64,
    /// Draft tokens accepted in the window.
    pub accepted: u64,
}

impl SpecDecode {
    /// The window's figures from the counters at its start and end; `None` when the engine did not
    /// speculate in it (no drafts) or a counter went backwards (the server restarted).
    pub fn between(start: SpecCounters, end: SpecCounters) -> Option<SpecDecode> {
        let drafts = end.drafts - start.drafts;
        let draft_tokens = end.draft_tokens - start.draft_tokens;
        let accepted = end.accepted - start.accepted;
        if !(drafts > 0.0 && draft_tokens > 0.0 && accepted >= 0.0 && accepted <= draft_tokens) {
            return None;
        }
        Some(SpecDecode {
            acceptance_length: 1.0 + accepted / drafts,
            acceptance_rate: accepted / draft_tokens,
            drafts: drafts.round() as u64,
            accepted: accepted.round() as u64,
        })
    }
}

impl std::fmt::Display for SpecDecode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "speculative decoding: {:.1} tokens per step (acceptance {:.0} %)",
            self.acceptance_length,
            self.acceptance_rate * 100.0
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn c(drafts: f64, draft_tokens: f64, accepted: f64) -> SpecCounters {
        SpecCounters { drafts, draft_tokens, accepted }
    }

    #[test]
    fn figures_are_the_window_differences() {
        let s = SpecDecode::between(c(100.0, 400.0, 50.0), c(600.0, 2400.0, 850.0)).unwrap();
        assert_eq!((s.drafts, s.accepted), (500, 800));
        assert!((s.acceptance_length - 2.6).abs() < 1e-12);
        assert!((s.acceptance_rate - 0.4).abs() < 1e-12);
        assert_eq!(s.to_string(), "speculative decoding: 2.6 tokens per step (acceptance 40 %)");
    }

    #[test]
    fn no_drafts_or_a_reset_gives_nothing() {
        assert_eq!(SpecDecode::between(c(5.0, 20.0, 3.0), c(5.0, 20.0, 3.0)), None);
        assert_eq!(SpecDecode::between(c(500.0, 2000.0, 900.0), c(10.0, 40.0, 5.0)), None);
    }
}
