//! The events of a run: one typed value per thing that happened, so a listener `match`es on what
//! happened instead of reading a sentence. `Display` gives the line `--progress plain` prints and
//! run.json's `events` keep (docs/dashboard.md documents them; scripts grep them).

use std::fmt;
use std::time::Duration;

use sm_core::record::{CellStatus, PromptSource, RunStatus};
use sm_core::secrets::scrub;

/// Something the run did, in the order it did it.
#[derive(Debug, Clone, PartialEq)]
pub enum RunEvent {
    /// A fresh run starts measuring.
    RunStarted,
    /// An interrupted run continues; its finished cells are kept.
    RunResumed,
    /// `--retry-failed`: cells and prefill rows that failed or were skipped are measured again.
    Retrying { cells: usize, rows: usize },
    /// The run ended with this status.
    RunEnded(RunStatus),
    /// Prompts could not be made: the run fails.
    SizingFailed { reason: String },
    /// How prompt lengths are made exact.
    PromptsSizedBy(PromptSource),
    /// Something the prompt sizing noticed and the user should know.
    SizingNote(String),
    /// The one short JIT warm-up request answered.
    WarmupRequestDone,
    /// A warm-up failed; the run goes on and the first measured cell carries a warning.
    WarmupFailed(WarmupFailure),
    /// The hidden decode warm-up cell starts, at the context `at`, for `window`.
    DecodeWarmupStarted { at: String, window: Duration },
    /// The hidden decode warm-up cell ended well.
    DecodeWarmupDone,
    /// The hidden decode warm-up cell did not run, or was skipped or stopped while it ran.
    DecodeWarmupSkipped { reason: String },
    /// A prefill row starts; `row` is its shown label ("8K", "max (131072)").
    PrefillStarted { row: String },
    /// A prefill row was measured.
    PrefillDone { row: String, prompt_tok_s: f64, ttft_ms: f64, note: Option<String> },
    /// A prefill row failed.
    PrefillFailed { row: String, reason: String },
    /// A decode cell's streams start; `cell` is its shown context.
    CellStarted { cell: String, concurrency: u32 },
    /// A decode cell was measured.
    CellDone { label: String, concurrency: u32, total_tok_s: f64, per_request_tok_s: f64, ttft_ms: f64 },
    /// A decode cell ended without figures (error, loop, skipped).
    CellEnded { label: String, concurrency: u32, status: CellStatus, reason: String },
    /// The server stopped answering; the run waits up to `wait` for it.
    ServerLost { wait: Duration },
    /// The server answers again after `after`.
    ServerBack { after: Duration },
    /// The server did not come back within `wait`: the run stops.
    ServerGone { wait: Duration },
    /// A notice from outside the runner (the first signal's), shown where progress goes.
    Notice(String),
    /// `--find-capacity` measures `concurrency` at `label` next: the answer lies between the
    /// passing level `pass` and `stop` (the failing level, or `None` while searching upward).
    CapacitySearch { label: String, concurrency: u32, pass: u32, stop: Option<u32> },
}

/// Which warm-up failed, and why.
#[derive(Debug, Clone, PartialEq)]
pub struct WarmupFailure {
    pub stage: WarmupStage,
    pub reason: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WarmupStage {
    /// The JIT warm-up request.
    Request,
    /// The hidden decode warm-up cell, which ended with this status.
    DecodeCell(CellStatus),
}

impl fmt::Display for WarmupFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.stage {
            WarmupStage::Request => write!(f, "the warm-up request failed: {}", self.reason),
            WarmupStage::DecodeCell(s) => write!(f, "the decode warm-up failed ({}): {}", s.word(), self.reason),
        }
    }
}

impl fmt::Display for RunEvent {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        use RunEvent::*;
        match self {
            RunStarted => f.write_str("run started"),
            RunResumed => f.write_str("run resumed: finished cells are kept"),
            Retrying { cells, rows } => {
                write!(f, "measuring again {cells} cell(s) and {rows} prefill row(s) that failed or were skipped")
            }
            RunEnded(RunStatus::Interrupted) => f.write_str("run interrupted: finished cells are kept"),
            RunEnded(RunStatus::Failed) => f.write_str("run failed"),
            RunEnded(_) => f.write_str("run complete"),
            SizingFailed { reason } => write!(f, "cannot size prompts: {reason}"),
            PromptsSizedBy(source) => write!(f, "prompt lengths by {source}"),
            SizingNote(note) | Notice(note) => f.write_str(note),
            WarmupRequestDone => f.write_str("warm-up request done"),
            WarmupFailed(failure) => write!(f, "{failure}; the run goes on"),
            DecodeWarmupStarted { at, window } => {
                write!(f, "decode warm-up at {at} for {:.0} s", window.as_secs_f64())
            }
            DecodeWarmupDone => f.write_str("decode warm-up done"),
            DecodeWarmupSkipped { reason } => write!(f, "decode warm-up skipped: {reason}"),
            PrefillStarted { row } => write!(f, "prefill {row} started"),
            PrefillDone { row, prompt_tok_s, ttft_ms, note } => {
                write!(f, "prefill {row} done: {prompt_tok_s:.0} prompt tok/s, TTFT {ttft_ms:.0} ms")?;
                match note {
                    Some(n) => write!(f, " ({n})"),
                    None => Ok(()),
                }
            }
            PrefillFailed { row, reason } => write!(f, "prefill {row} failed: {reason}"),
            CellStarted { cell, concurrency } => write!(f, "cell {cell} × {concurrency} started"),
            CellDone { label, concurrency, total_tok_s, per_request_tok_s, ttft_ms } => write!(
                f,
                "cell {label} × {concurrency} done: {total_tok_s:.1} tok/s total, {per_request_tok_s:.1} tok/s per request, TTFT {ttft_ms:.0} ms"
            ),
            CellEnded { label, concurrency, status, reason } => {
                write!(f, "cell {label} × {concurrency} {}: {reason}", status.word())
            }
            ServerLost { wait } => {
                write!(f, "server stopped responding; waiting up to {:.0} s for it to come back", wait.as_secs_f64())
            }
            ServerBack { after } => write!(f, "server is back after {:.0} s; continuing", after.as_secs_f64()),
            CapacitySearch { label, concurrency, pass, stop: Some(stop) } => write!(
                f,
                "capacity search at {label}: {pass} users meet the SLO, {stop} do not; measuring {concurrency}"
            ),
            CapacitySearch { label, concurrency, pass, stop: None } => {
                write!(f, "capacity search at {label}: {pass} users meet the SLO; measuring {concurrency}")
            }
            ServerGone { wait } => write!(
                f,
                "server did not come back within {:.0} s; stopping (everything measured is kept; --resume continues later)",
                wait.as_secs_f64()
            ),
        }
    }
}

impl RunEvent {
    /// The event with every text that came from outside (a server's error, a label, a path) run
    /// through the secrets scrubber ([`sm_core::secrets`]), so no listener is handed a secret.
    pub fn scrubbed(&self) -> RunEvent {
        let s = |t: &String| scrub(t).into_owned();
        use RunEvent::*;
        match self {
            SizingFailed { reason } => SizingFailed { reason: s(reason) },
            SizingNote(note) => SizingNote(s(note)),
            Notice(note) => Notice(s(note)),
            WarmupFailed(w) => WarmupFailed(WarmupFailure { stage: w.stage, reason: s(&w.reason) }),
            DecodeWarmupStarted { at, window } => DecodeWarmupStarted { at: s(at), window: *window },
            DecodeWarmupSkipped { reason } => DecodeWarmupSkipped { reason: s(reason) },
            PrefillStarted { row } => PrefillStarted { row: s(row) },
            PrefillDone { row, prompt_tok_s, ttft_ms, note } => {
                PrefillDone { row: s(row), prompt_tok_s: *prompt_tok_s, ttft_ms: *ttft_ms, note: note.as_ref().map(s) }
            }
            PrefillFailed { row, reason } => PrefillFailed { row: s(row), reason: s(reason) },
            CellStarted { cell, concurrency } => CellStarted { cell: s(cell), concurrency: *concurrency },
            CellDone { label, concurrency, total_tok_s, per_request_tok_s, ttft_ms } => CellDone {
                label: s(label),
                concurrency: *concurrency,
                total_tok_s: *total_tok_s,
                per_request_tok_s: *per_request_tok_s,
                ttft_ms: *ttft_ms,
            },
            CellEnded { label, concurrency, status, reason } => {
                CellEnded { label: s(label), concurrency: *concurrency, status: *status, reason: s(reason) }
            }
            CapacitySearch { label, concurrency, pass, stop } => {
                CapacitySearch { label: s(label), concurrency: *concurrency, pass: *pass, stop: *stop }
            }
            RunStarted
            | RunResumed
            | Retrying { .. }
            | RunEnded(_)
            | PromptsSizedBy(_)
            | WarmupRequestDone
            | DecodeWarmupDone
            | ServerLost { .. }
            | ServerBack { .. }
            | ServerGone { .. } => self.clone(),
        }
    }
}

#[cfg(test)]
mod tests;
