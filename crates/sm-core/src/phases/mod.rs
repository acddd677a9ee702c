//! The load phases of a run beside the decode matrix (issue 17, methodology §13): open-loop
//! arrivals at a rate, bursts, a new user under load (mixed prefill) and multi-turn sessions. Each
//! phase that ran has its own section of `run.json` under `phases`; a record without any (every
//! record before schema 1.3) reads as before.

use serde::{Deserialize, Serialize};

pub mod answers;
pub mod burst;
pub mod mixed;
pub mod rate;
pub mod replay;
pub mod sessions;

/// Which phase a figure, a request or a progress step belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PhaseKind {
    Rate,
    Burst,
    MixedPrefill,
    Sessions,
    Replay,
}

impl PhaseKind {
    /// The name as run.json, requests.jsonl and the CSV file names write it.
    pub fn name(self) -> &'static str {
        match self {
            PhaseKind::Rate => "rate",
            PhaseKind::Burst => "burst",
            PhaseKind::MixedPrefill => "mixed_prefill",
            PhaseKind::Sessions => "sessions",
            PhaseKind::Replay => "replay",
        }
    }

    /// The name a person reads (page headings, the dashboard).
    pub fn title(self) -> &'static str {
        match self {
            PhaseKind::Rate => "Arrivals at a rate",
            PhaseKind::Burst => "Bursts",
            PhaseKind::MixedPrefill => "A new user under load",
            PhaseKind::Sessions => "Multi-turn sessions",
            PhaseKind::Replay => "Your traffic (replay)",
        }
    }
}

impl std::fmt::Display for PhaseKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.title())
    }
}

/// The sections of the phases that ran; each `None` where that phase did not.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Phases {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rate: Option<rate::RatePhase>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub burst: Option<burst::BurstPhase>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mixed_prefill: Option<mixed::MixedPrefillPhase>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sessions: Option<sessions::SessionsPhase>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replay: Option<replay::ReplayPhase>,
}

impl Phases {
    pub fn is_empty(&self) -> bool {
        self.kinds().is_empty()
    }

    /// Whether some unit of a phase ended in an error: a rate level, a burst, a mixed-prefill
    /// level, or a conversation that a failed turn or a lost server ended. Like an errored decode
    /// cell, it makes `run` exit 2, so a script sees that part of what it asked for is missing.
    pub fn errored(&self) -> bool {
        let rate = self.rate.iter().flat_map(|p| &p.levels).any(|l| l.status == rate::LevelStatus::Error);
        let burst = self.burst.as_ref().is_some_and(burst::BurstPhase::errored);
        let mixed = self.mixed_prefill.iter().flat_map(|p| &p.levels).any(|l| l.error.is_some());
        let sessions = self
            .sessions
            .iter()
            .flat_map(|p| &p.sessions)
            .any(|s| matches!(s.status, sessions::SessionStatus::Failed | sessions::SessionStatus::ServerLost));
        let replay = self.replay.as_ref().is_some_and(replay::ReplayPhase::errored);
        rate || burst || mixed || sessions || replay
    }

    /// The phases that have a section, in the order they run.
    pub fn kinds(&self) -> Vec<PhaseKind> {
        let present = [
            (PhaseKind::Rate, self.rate.is_some()),
            (PhaseKind::Burst, self.burst.is_some()),
            (PhaseKind::MixedPrefill, self.mixed_prefill.is_some()),
            (PhaseKind::Sessions, self.sessions.is_some()),
            (PhaseKind::Replay, self.replay.is_some()),
        ];
        present.into_iter().filter_map(|(k, p)| p.then_some(k)).collect()
    }
}

/// `--prompts FILE.jsonl` as the record keeps it: never the content, only what identifies it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct PromptsFileInfo {
    /// The file's name without its directories (a path can name a user).
    pub name: String,
    /// FNV-1a 64-bit hash of the file's bytes, hex ([`crate::record::fnv1a64`]).
    pub hash: String,
    /// How many prompts (non-empty lines) it holds.
    #[schemars(range(min = 1))]
    pub prompts: u64,
}
