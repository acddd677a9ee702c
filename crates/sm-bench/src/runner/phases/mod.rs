//! The load phases (issue 17, methodology §13), run after the decode matrix (or alone, when the
//! user asked only for them) in the order of [`PhaseKind`]: rates, bursts, mixed prefill, sessions.
//! Each writes its section of the record as it goes, so that an interrupted run keeps what the
//! phase finished and a resume goes on from there.

use sm_core::phases::PhaseKind;
use sm_core::plan::Plan;
use sm_core::record::RunStatus;

use super::prompts::Prompts;
use super::{RunError, Runner};
use crate::prompts::prompt_file::PromptFile;

pub(crate) mod answers;
pub(crate) mod bodies;
pub(crate) mod burst;
pub(crate) mod drain;
mod mixed;
pub(crate) mod open_loop;
mod rate;
mod replay;
mod send;
mod sessions;

pub use burst::BurstConfig;
pub use mixed::{MixedLevelSpec, MixedPrefillConfig};
pub use rate::RateConfig;
pub use replay::{MAX_REQUESTS as MAX_REPLAY_REQUESTS, ReplayConfig, Trace, TraceError};
pub use sessions::SessionsConfig;

/// What the run measures besides prefill rows: the decode matrix and the load phases asked for.
#[derive(Debug, Clone)]
pub struct PhaseConfig {
    /// Whether the decode matrix runs (the default; off when only phases were asked for).
    pub matrix: bool,
    pub rate: Option<RateConfig>,
    pub burst: Option<BurstConfig>,
    pub mixed_prefill: Option<MixedPrefillConfig>,
    pub sessions: Option<SessionsConfig>,
    /// `--replay FILE`: a recorded trace, replayed.
    pub replay: Option<ReplayConfig>,
    /// `--prompts FILE.jsonl`: the phases that take prompts send these instead of synthetic text.
    pub prompts_file: Option<std::sync::Arc<PromptFile>>,
}

impl Default for PhaseConfig {
    fn default() -> Self {
        PhaseConfig {
            matrix: true,
            rate: None,
            burst: None,
            mixed_prefill: None,
            sessions: None,
            replay: None,
            prompts_file: None,
        }
    }
}

impl PhaseConfig {
    /// The phases asked for, in the order they run.
    pub fn kinds(&self) -> Vec<PhaseKind> {
        let mut kinds = Vec::new();
        if self.rate.is_some() {
            kinds.push(PhaseKind::Rate);
        }
        if self.burst.is_some() {
            kinds.push(PhaseKind::Burst);
        }
        if self.mixed_prefill.is_some() {
            kinds.push(PhaseKind::MixedPrefill);
        }
        if self.sessions.is_some() {
            kinds.push(PhaseKind::Sessions);
        }
        if self.replay.is_some() {
            kinds.push(PhaseKind::Replay);
        }
        kinds
    }
}

impl Runner<'_> {
    /// Gives every phase asked for its section, with its settings and nothing measured yet, before
    /// anything is measured: a run stopped before a phase began still records it, so `--resume`
    /// (which takes a phase's settings from its section) runs it.
    pub(super) fn declare_phases(&mut self) {
        let phases = self.settings.phases.clone();
        if let Some(c) = &phases.rate {
            self.declare_rate(c);
        }
        if let Some(c) = &phases.burst {
            self.declare_burst(c);
        }
        if let Some(c) = &phases.mixed_prefill {
            self.declare_mixed_prefill(c);
        }
        if let Some(c) = &phases.sessions {
            self.declare_sessions(c);
        }
        if let Some(c) = &phases.replay {
            self.declare_replay(c);
        }
    }

    /// Runs every phase asked for. `Some(status)` when the run cannot go on (stopped, or the server
    /// went away and did not come back).
    pub(super) async fn phases(&mut self, plan: &Plan, prompts: &Prompts) -> Result<Option<RunStatus>, RunError> {
        for kind in self.settings.phases.kinds() {
            if self.halted() {
                return Ok(Some(RunStatus::Interrupted));
            }
            let stop = match kind {
                PhaseKind::Rate => self.rate_phase(plan, prompts).await?,
                PhaseKind::Burst => self.burst_phase(plan, prompts).await?,
                PhaseKind::MixedPrefill => self.mixed_prefill_phase(plan, prompts).await?,
                PhaseKind::Sessions => self.sessions_phase(plan, prompts).await?,
                PhaseKind::Replay => self.replay_phase(prompts).await?,
            };
            if stop.is_some() {
                return Ok(stop);
            }
        }
        Ok(None)
    }
}
