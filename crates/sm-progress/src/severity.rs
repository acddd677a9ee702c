//! How much an event matters to the person watching: a display colours by this, never by the
//! event's text.

use sm_core::phases::rate::LevelStatus;
use sm_core::record::{CellStatus, RunStatus};

use crate::event::RunEvent;

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Severity {
    /// The run goes as planned.
    Info,
    /// Something was not measured or waits (a skipped cell, a lost server that may come back).
    Warning,
    /// Something failed: a cell, a row, a warm-up, the run.
    Error,
}

impl RunEvent {
    pub fn severity(&self) -> Severity {
        use RunEvent::*;
        match self {
            SizingFailed { .. }
            | WarmupFailed(_)
            | PrefillFailed { .. }
            | MixedPrefillFailed { .. }
            | ServerGone { .. }
            | RunEnded(RunStatus::Failed) => Severity::Error,
            CellEnded { status, .. } | BurstEnded { status, .. } => match status {
                CellStatus::Error => Severity::Error,
                _ => Severity::Warning,
            },
            RateLevelDone(level) | ReplayLevelDone { level, .. } => match level.status {
                LevelStatus::Measured => Severity::Info,
                LevelStatus::Skipped => Severity::Warning,
                LevelStatus::Error => Severity::Error,
            },
            SessionsDone { failed, .. } if *failed > 0 => Severity::Warning,
            ServerLost { .. }
            | RunEnded(RunStatus::Interrupted)
            | DecodeWarmupSkipped { .. }
            | SessionsSkipped { .. }
            | RateWindowCut { .. } => Severity::Warning,
            _ => Severity::Info,
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::event::{WarmupFailure, WarmupStage};

    #[test]
    fn failures_are_errors_and_what_was_not_measured_is_a_warning() {
        let failed = WarmupFailure { stage: WarmupStage::Request, reason: "HTTP 500".into() };
        assert_eq!(RunEvent::WarmupFailed(failed).severity(), Severity::Error);
        let ended = |status| RunEvent::CellEnded { label: "8K".into(), concurrency: 4, status, reason: "x".into() };
        assert_eq!(ended(CellStatus::Error).severity(), Severity::Error);
        assert_eq!(ended(CellStatus::Skipped).severity(), Severity::Warning);
        assert_eq!(RunEvent::ServerLost { wait: Duration::from_secs(60) }.severity(), Severity::Warning);
        assert_eq!(RunEvent::RunEnded(RunStatus::Complete).severity(), Severity::Info);
    }

    #[test]
    fn a_word_in_the_text_does_not_make_an_error() {
        // "0 failed" is in the line of sessions that all went well
        let done = RunEvent::SessionsDone { completed: 12, failed: 0, cache_hit_pct: None };
        assert!(done.to_string().contains("failed"));
        assert_eq!(done.severity(), Severity::Info);
        let note = RunEvent::SizingNote("the tokenizer failed to load; counting by usage".into());
        assert_eq!(note.severity(), Severity::Info);
    }
}
