//! Measurement: everything between a discovered server and a finished record. Its modules are
//! private; what the binary and the tests use is re-exported below.
//!
//! * `prompts/` — prompts of exact length: the synthetic text, a `--prompts` file, sizing, the
//!   local tokenizer.
//! * `stream/` — one streamed request, logged chunk by chunk (`request`, `request_log`), which
//!   tokens each chunk carried (`tokens`), the exact-repetition guard (`loopguard`), a cell's
//!   streams and what they share while they run (`streams`, `live`, `cancel`), and the prefill
//!   scout (`max_tokens: 1`).
//! * `cell/` — the sustained-decode cell: workers, readiness, window, cancel, drain; the window
//!   accounting, every figure of a cell from timestamps (`window`); when a `--precision` window may
//!   end (`adaptive`); valid, or why not (`verdict`); whether the client itself was the bottleneck
//!   (`health`); scheduler scrapes and the drain barrier (`server`); speculative decoding
//!   (`spec_note`).
//! * `telemetry/` — the server's `/metrics` and the GPU source over one measured span, and the
//!   periodic sampler both read through (`sampler`, `gpu_sampler`, `nvml`).
//! * `runner` — the run in order, with `runner/phases/` beside it: one folder a load phase (rate,
//!   burst, mixed prefill, sessions), each with its figures, and what open-loop levels share
//!   (`open_loop`, `drain`, `send`); `journal` — `run.json`, written atomically; `resume` —
//!   continuing an interrupted run; `requests` — `requests.jsonl`; `progress` — the runner's side
//!   of the run protocol (`sm-progress`: what a run reports and how it is steered).
//! * `ranks` — a cell's streams and a level's schedule spread over several processes.

mod cell;
mod prompts;
mod ranks;
mod runner;
mod stream;
mod telemetry;

// The library's whole surface; its modules stay private.
pub use cell::{CellTiming, Precision};
pub use prompts::blocks::{Vocabulary, VocabularyError};
pub use prompts::prompt_file::{FilePrompt, PromptFile, PromptFileError};
pub use prompts::tokenizer::LocalTokenizer;
pub use ranks::{RankError, RankGroup, Served, serve as serve_rank, share};
pub use runner::journal::{Journal, JournalError, RUN_FILE, remove_held_locks};
pub use runner::progress::{
    ControlHandle, Controls, IDLE_GAP, LiveSample, NoReport, Reporter, RunEvent, Step, WarmupFailure, WarmupStage,
    controls,
};
pub use runner::{
    BurstConfig, DEFAULT_MAX_TOKENS, DEFAULT_MIN_DURATION, DEFAULT_SERVER_WAIT, DEFAULT_WARMUP, MAX_REPLAY_REQUESTS,
    MixedLevelSpec, MixedPrefillConfig, PhaseConfig, RateConfig, RecordedSettingsError, ReplayConfig, RunError,
    RunSettings, RunStart, SessionsConfig, ToolSet, Trace, TraceError, run,
};
pub use telemetry::gpu_sampler::{GPU_INTERVAL, GpuReader};
pub use telemetry::nvml::LocalGpus;
pub use telemetry::sampler;
