//! Measurement: everything between a discovered server and a finished record. Its modules are
//! private; what the binary and the tests use is re-exported below.
//!
//! * `prompt` and `sizing` — prompts of exact length.
//! * `scout` — the prefill request (`max_tokens: 1`).
//! * `request` — one streamed request, logged chunk by chunk into a `request_log`.
//! * `cell` — the sustained-decode cell: workers, readiness, window, cancel, drain; `live` —
//!   what its streams share while they run, one shard per stream (nothing per token is shared).
//! * `adaptive` — when a `--precision` window may end, and what its intervals claim.
//! * `window` — the window accounting: every figure of a cell, from timestamps; `tokens` —
//!   which tokens each chunk carried; `verdict` — valid, or why not.
//! * `loopguard` — the exact-repetition guard.
//! * `server` — scheduler scrapes and the drain barrier.
//! * `health` — whether the client itself was the bottleneck.
//! * `streams` — a cell's streams; `open_loop` — a rate level's requests, each sent at its due
//!   time; `ranks` — a cell's streams and a level's schedule spread over several processes.
//! * `runner` — the run in order; `journal` — `run.json`, written atomically;
//!   `resume` — continuing an interrupted run; `progress` — the runner's side of the run protocol
//!   (`sm-progress`: what a run reports and how it is steered).

mod adaptive;
mod burst;
mod cancel;
mod cell;
mod gpu_sampler;
mod health;
mod journal;
mod live;
mod loopguard;
mod nvml;
mod open_loop;
mod progress;
mod prompt;
mod prompt_file;
mod ranks;
mod request;
mod request_log;
mod requests;
mod resume;
mod runner;
pub mod sampler;
mod scout;
mod server;
mod sizing;
mod spec_note;
mod streams;
mod telemetry;
mod tokenizer;
mod tokens;
mod verdict;
mod window;

// The library's whole surface; its modules stay private.
pub use cell::{CellTiming, Precision};
pub use gpu_sampler::{GPU_INTERVAL, GpuReader};
pub use journal::{Journal, JournalError, RUN_FILE, remove_held_locks};
pub use nvml::LocalGpus;
pub use progress::{
    ControlHandle, Controls, IDLE_GAP, LiveSample, NoReport, Reporter, RunEvent, Step, WarmupFailure, WarmupStage,
    controls,
};
pub use prompt_file::{FilePrompt, PromptFile, PromptFileError};
pub use ranks::{RankError, RankGroup, Served, serve as serve_rank, share};
pub use runner::{
    BurstConfig, MixedLevelSpec, MixedPrefillConfig, PhaseConfig, RateConfig, RunConfig, RunError, SessionsConfig, run,
};
pub use tokenizer::LocalTokenizer;
