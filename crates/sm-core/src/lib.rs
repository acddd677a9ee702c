//! The vocabulary every other speedmatrix crate speaks.
//!
//! * [`units`] — newtypes for token counts and milliseconds, and the parsers for
//!   `8k,16k` lists and `30s` durations the CLI accepts.
//! * [`figures`] — each record section's figures as one table: name, unit, when carried.
//! * [`stats`] — percentiles exactly as `docs/methodology.md` defines them.
//! * [`context`] — fitting a requested context to the model's `max_model_len`.
//! * [`capacity`] — the over-capacity rule that decides which cells are not run.
//! * [`slo`] — service levels and the judgement of a cell against one.
//! * [`answer`] — the capacity answer per context, and the capacity search's next level
//!   ([`capacity_answer`] holds the answer's types, which the record keeps).
//! * [`precision`] — 95 % confidence intervals, significance of differences, agreement of repeats.
//! * [`phases`] — the sections of the load phases: rates, bursts, mixed prefill, sessions.
//! * [`gpu_telemetry`] — GPU power, energy, clocks and throttling over a cell's window.
//! * [`roofline`], [`model_config`] — the memory-bandwidth bound on a decode cell's tok/s.
//! * [`plan`] — the matrix of cells and the order they are measured in.
//! * [`server_gpus`], [`frontier`] — the server's GPU count (never the client host's), and per
//!   context the per-user tok/s against the tok/s per GPU of each concurrency.
//! * [`record`] — the run record (`speedmatrix.run/1`), the contract with the
//!   report, the site and other tools.
//! * [`redact`] — removing secrets from launch commands and text by their shape.
//! * [`ranks`] — what each client process (rank) of a multi-machine cell drove.
//! * [`secrets`] — the secrets this process was given, scrubbed from every output.
//! * [`tools`] — `--tools FILE.json`: the tool definitions checked, and what the record keeps.
//! * [`replay`] — `--replay FILE`: a recorded trace (Mooncake or timestamped messages) read one
//!   line at a time into requests with their due times; the sender and the prompt builder come later.

pub mod answer;
pub mod capacity;
pub mod capacity_answer;
pub mod context;
pub mod engine;
pub mod figures;
pub mod frontier;
pub mod gpu_telemetry;
pub mod model_config;
pub mod phases;
pub mod plan;
pub mod precision;
pub mod ranks;
pub mod record;
pub mod redact;
pub mod rejudge;
pub mod replay;
pub mod requests;
pub mod roofline;
pub mod roofline_record;
pub mod scheduler;
pub mod secrets;
pub mod server_gpus;
pub mod server_metrics;
pub mod slo;
pub mod spec_decode;
pub mod stats;
pub mod telemetry;
pub mod tools;
pub mod units;

pub use units::{Ms, Tokens};
