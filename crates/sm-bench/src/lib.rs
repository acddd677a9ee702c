//! Measurement: everything between a discovered server and a finished record.
//!
//! * [`prompt`] and [`sizing`] — prompts of exact length.
//! * [`scout`] — the prefill request (`max_tokens: 1`).
//! * [`request`] — one streamed request, logged chunk by chunk.
//! * [`cell`] — the sustained-decode cell: workers, readiness, window, cancel, drain.
//! * [`window`] — the window accounting: every figure of a cell, from timestamps; [`tokens`] —
//!   which tokens each chunk carried; [`verdict`] — valid, or why not.
//! * [`loopguard`] — the exact-repetition guard.
//! * [`server`] — scheduler scrapes and the drain barrier.
//! * [`health`] — whether the client itself was the bottleneck.
//! * [`runner`] — the run in order; [`journal`] — `run.json`, written atomically;
//!   [`resume`] — continuing an interrupted run; [`progress`] — the runner's side of the run protocol
//!   (`sm-progress`: what a run reports and how it is steered).

pub mod cell;
pub mod health;
pub mod journal;
pub mod loopguard;
pub mod progress;
pub mod prompt;
pub mod request;
pub mod resume;
pub mod runner;
pub mod scout;
pub mod server;
pub mod sizing;
pub mod tokenizer;
pub mod tokens;
pub mod verdict;
pub mod window;

pub use progress::{
    ControlHandle, Controls, LiveSample, NoReport, Reporter, RunEvent, Step, WarmupFailure, WarmupStage, controls,
};
pub use runner::{RunConfig, RunError, run};
