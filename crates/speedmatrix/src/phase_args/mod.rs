//! The flags of the load phases (issue 17) and their resolution into [`PhaseConfig`]: which
//! phases run, with which settings, and whether the decode matrix runs beside them. Each phase's
//! flags live in its own module; on `--resume` a phase not named by a flag is taken from the
//! run.json it recorded.

use std::path::PathBuf;
use std::sync::Arc;

use anyhow::Result;
use sm_bench::{PhaseConfig, PromptFile};
use sm_core::record::RunRecord;

mod burst;
mod mixed;
mod rate;
mod replay;
mod sessions;
mod unused;

pub(crate) use burst::BurstArgs;
pub(crate) use mixed::MixedArgs;
pub(crate) use rate::RateArgs;
pub(crate) use replay::ReplayArgs;
pub(crate) use sessions::SessionsArgs;
pub(crate) use unused::{MatrixFlags, unused};

#[derive(Debug, Default, clap::Args)]
pub struct PhaseArgs {
    /// With a load phase flag (--request-rate, --burst, --mixed-prefill, --sessions): measure the
    /// decode matrix too (by default a run with a phase measures only its phases).
    #[arg(long)]
    pub(crate) matrix: bool,
    /// Prompts to send in place of synthetic text, one JSON object per line: {"prompt": "…"} or
    /// {"messages": [...]}, optionally with "max_tokens". Used by the rate, burst and session phases;
    /// only its name and hash are recorded.
    #[arg(long, value_name = "FILE.jsonl")]
    pub(crate) prompts: Option<PathBuf>,
    #[command(flatten)]
    pub(crate) rate: RateArgs,
    #[command(flatten)]
    pub(crate) burst: BurstArgs,
    #[command(flatten)]
    pub(crate) mixed: MixedArgs,
    #[command(flatten)]
    pub(crate) sessions: SessionsArgs,
    #[command(flatten)]
    pub(crate) replay: ReplayArgs,
}

impl PhaseArgs {
    /// The phases to run: from the flags, else (on resume) from the record's sections.
    /// `find_capacity`: `--find-capacity`, which a replay searches its time scale with.
    pub(crate) fn resolve(&self, resumed: Option<&RunRecord>, find_capacity: bool) -> Result<PhaseConfig> {
        let (cap, drain) = (self.rate.max_concurrency, self.rate.drain_max);
        let replay = if self.rate.given() {
            // the rate phase's own cap and drain are its; a replay beside it takes the defaults
            self.replay.resolve(resumed, find_capacity, None, None)?
        } else {
            self.replay.resolve(resumed, find_capacity, cap, drain)?
        };
        let mut config = PhaseConfig {
            rate: self.rate.resolve(resumed, self.replay.given())?,
            burst: self.burst.resolve(resumed)?,
            mixed_prefill: self.mixed.resolve(resumed)?,
            sessions: self.sessions.resolve(resumed)?,
            replay,
            ..PhaseConfig::default()
        };
        // a resumed run's phases come from its record, not from a flag
        let any = self.any() || !config.kinds().is_empty();
        config.matrix = match resumed {
            _ if self.matrix => true,
            Some(old) if !any => old.settings.matrix,
            // a resumed run keeps its matrix; phases are added
            Some(old) => old.settings.matrix,
            None => !any,
        };
        anyhow::ensure!(
            !self.matrix || any,
            "--matrix goes with a load phase (--request-rate, --burst, --mixed-prefill or --sessions): without one the matrix runs anyway"
        );
        if let Some(path) = &self.prompts {
            anyhow::ensure!(
                any,
                "--prompts is used by the load phases: add --request-rate, --burst or --sessions (the decode matrix sends prompts of exact length)"
            );
            config.prompts_file = Some(Arc::new(PromptFile::load(path)?));
        }
        Ok(config)
    }

    /// Whether any phase flag was given (the built-in engine then skips its demo matrix).
    pub(crate) fn any(&self) -> bool {
        self.rate.given() || self.burst.given() || self.mixed.given() || self.sessions.given() || self.replay.given()
    }
}
