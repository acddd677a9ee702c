//! What a run tells the outside while it works (the console lines, the live dashboard, a test) and
//! how the outside steers it (stop now, finish after the current cell, skip the current cell). The
//! runner never knows who listens.
//!
//! A leaf crate: a display depends on this and on `sm-core`, not on the benchmark (its HTTP client
//! and tokenizers). Everything here is typed; text is made only by [`RunEvent`]'s `Display`.

mod controls;
mod event;
mod severity;

use std::time::{Duration, Instant};

use sm_core::record::{DecodeCell, PrefillRow, RunRecord};
pub use sm_core::scheduler::SchedulerState;

/// The pause the runner leaves between two cells (the server settles; not part of any cell's
/// time). Here, so that the run and the dashboard's estimate of what is left use the same one.
pub const IDLE_GAP: Duration = Duration::from_millis(500);

pub use controls::{ControlHandle, Controls, controls};
pub use event::{RunEvent, WarmupFailure, WarmupStage};
pub use severity::Severity;

/// What the run is doing now.
#[derive(Debug, Clone, PartialEq)]
pub enum Step {
    /// Making prompts of exact length.
    Sizing,
    /// The JIT warm-up request and the hidden warm-up cell.
    Warmup,
    /// A prefill row of `context` tokens; `index` counts from 1. `label` is only for showing: a
    /// listener finds the row by `context`.
    Prefill { context: u64, label: String, index: usize, total: usize, started: Instant },
    /// The cache-warming scout before the decode cell (`context`, `concurrency`).
    Scout { context: u64, label: String, concurrency: u32 },
    /// Streams are starting; `waiting_for` says what readiness still lacks
    /// (e.g. "running 6/8", "queue 2", "waiting for streams 7/8").
    Ramp { context: u64, label: String, concurrency: u32, waiting_for: String },
    /// The window is open.
    Measuring { context: u64, label: String, concurrency: u32, started: Instant, window: Duration },
    /// Streams are cancelled; waiting for the server to become idle.
    Drain { context: u64, label: String, concurrency: u32 },
    /// A load phase (issue 17) measures one of its steps: a rate level, a burst, a mixed-prefill
    /// probe, a session turn. `what` names the step ("4 req/s at 8K"); `length` is how long it is
    /// planned to take, where known.
    Phase { kind: sm_core::phases::PhaseKind, what: String, started: Instant, length: Option<Duration> },
}

/// A sample taken every poll (250 ms) while a decode cell runs.
#[derive(Debug, Clone, PartialEq)]
pub struct LiveSample {
    pub at: Instant,
    /// Output tokens received in this cell so far.
    pub tokens: u64,
    pub streams_with_token: usize,
    pub concurrency: u32,
    /// Medians over what arrived so far in this cell.
    pub ttft_ms_p50: Option<f64>,
    /// The wait for the first answer token, once a request answered after thinking.
    pub ttfa_ms_p50: Option<f64>,
    /// The wait for the first tool call, once a call came (a run with tools).
    pub ttftc_ms_p50: Option<f64>,
    pub tbt_ms_p50: Option<f64>,
    pub server: Option<SchedulerState>,
}

/// Where progress goes. Every method has a default so a listener implements
/// only what it shows.
pub trait Reporter: Send + Sync {
    /// The plan is known (the record holds the plan and the over-capacity cells).
    fn start(&self, _record: &RunRecord) {}
    fn step(&self, _step: &Step) {}
    fn live(&self, _sample: &LiveSample) {}
    fn event(&self, _event: &RunEvent) {}
    fn prefill_done(&self, _row: &PrefillRow) {}
    fn cell_done(&self, _cell: &DecodeCell) {}
    /// The run ended; the record is final.
    fn finish(&self, _record: &RunRecord) {}
}

pub struct NoReport;
impl Reporter for NoReport {}
