//! What a run tells the outside while it works (the console lines, the live
//! dashboard, a test) and how the outside steers it (stop now, finish after the
//! current cell, skip the current cell). The runner never knows who listens.

use std::time::{Duration, Instant};

use sm_client::discover::SchedulerState;
use sm_core::record::{DecodeCell, PrefillRow, RunRecord};
use tokio::sync::watch;

/// What the run is doing now.
#[derive(Debug, Clone, PartialEq)]
pub enum Step {
    /// Making prompts of exact length.
    Sizing,
    /// The JIT warm-up request and the hidden warm-up cell.
    Warmup,
    /// A prefill row; `index` counts from 1.
    Prefill { label: String, index: usize, total: usize, started: Instant },
    /// The cache-warming scout before a decode cell.
    Scout { label: String, concurrency: u32 },
    /// Streams are starting; `waiting_for` says what readiness still lacks
    /// (e.g. "running 6/8", "queue 2", "waiting for streams 7/8").
    Ramp { label: String, concurrency: u32, waiting_for: String },
    /// The window is open.
    Measuring { label: String, concurrency: u32, started: Instant, window: Duration },
    /// Streams are cancelled; waiting for the server to become idle.
    Drain { label: String, concurrency: u32 },
}

/// The hidden decode warm-up cell (methodology §1): the steps between `Started` and `Ended` are
/// those of a cell that is not measured. `Ended` comes whatever the warm-up's outcome (done,
/// failed, skipped, stopped), so a display can always leave its warm-up state.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WarmupCell {
    Started,
    Ended,
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
    fn warmup_cell(&self, _phase: WarmupCell) {}
    fn event(&self, _text: &str) {}
    fn prefill_done(&self, _row: &PrefillRow) {}
    fn cell_done(&self, _cell: &DecodeCell) {}
    /// The run ended; the record is final.
    fn finish(&self, _record: &RunRecord) {}
}

pub struct NoReport;
impl Reporter for NoReport {}

/// A reporter seen through the secrets scrubber ([`sm_core::secrets`]): the runner talks to its
/// listener only through this, so no event, cell reason or record a server filled reaches the
/// console or the dashboard with a secret in it. A value that cannot be scrubbed is not shown.
pub(crate) struct Scrubbed<'a>(pub &'a dyn Reporter);

impl Reporter for Scrubbed<'_> {
    fn start(&self, record: &RunRecord) {
        if let Ok(r) = sm_core::secrets::scrubbed(record) {
            self.0.start(&r);
        }
    }
    fn step(&self, step: &Step) {
        self.0.step(step);
    }
    fn live(&self, sample: &LiveSample) {
        self.0.live(sample);
    }
    fn event(&self, text: &str) {
        self.0.event(&sm_core::secrets::scrub(text));
    }
    fn prefill_done(&self, row: &PrefillRow) {
        if let Ok(r) = sm_core::secrets::scrubbed(row) {
            self.0.prefill_done(&r);
        }
    }
    fn cell_done(&self, cell: &DecodeCell) {
        if let Ok(c) = sm_core::secrets::scrubbed(cell) {
            self.0.cell_done(&c);
        }
    }
    fn finish(&self, record: &RunRecord) {
        if let Ok(r) = sm_core::secrets::scrubbed(record) {
            self.0.finish(&r);
        }
    }
}

/// The receiving side, held by the runner.
#[derive(Debug, Clone)]
pub struct Controls {
    /// Stop at once: the cell in progress is dropped (Ctrl-C).
    pub stop_now: watch::Receiver<bool>,
    /// Finish the cell in progress, then stop (key `q`).
    pub finish_after_cell: watch::Receiver<bool>,
    /// Each increment skips the cell in progress (key `s`).
    pub skip_cell: watch::Receiver<u64>,
}

/// The sending side, held by whoever steers.
#[derive(Debug, Clone)]
pub struct ControlHandle {
    stop_now: watch::Sender<bool>,
    finish_after_cell: watch::Sender<bool>,
    skip_cell: watch::Sender<u64>,
}

impl ControlHandle {
    pub fn stop_now(&self) {
        let _ = self.stop_now.send(true);
    }
    pub fn finish_after_cell(&self) {
        let _ = self.finish_after_cell.send(true);
    }
    pub fn skip_cell(&self) {
        self.skip_cell.send_modify(|n| *n += 1);
    }
}

pub fn controls() -> (ControlHandle, Controls) {
    let (stop_tx, stop_rx) = watch::channel(false);
    let (finish_tx, finish_rx) = watch::channel(false);
    let (skip_tx, skip_rx) = watch::channel(0);
    (
        ControlHandle { stop_now: stop_tx, finish_after_cell: finish_tx, skip_cell: skip_tx },
        Controls { stop_now: stop_rx, finish_after_cell: finish_rx, skip_cell: skip_rx },
    )
}

impl Controls {
    pub fn stopped(&self) -> bool {
        *self.stop_now.borrow()
    }
    pub fn finishing(&self) -> bool {
        *self.finish_after_cell.borrow()
    }
}
