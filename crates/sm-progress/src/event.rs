//! The events of a run: one typed value per thing that happened, so a listener `match`es on what
//! happened instead of reading a sentence. `Display` gives the line `--progress plain` prints and
//! run.json's `events` keep (docs/dashboard.md documents them; scripts grep them).

use std::fmt;
use std::time::Duration;

use sm_core::record::{CellStatus, Percentiles, PromptSource, RunStatus};
use sm_core::secrets::scrub;
use sm_core::units::plural;

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
    /// A mixed-prefill probe (methodology §13.3) was measured; `level` is `CTX@BG` as shown.
    MixedProbeDone {
        level: String,
        probe: usize,
        ttft_ms: f64,
        slowdown: Option<f64>,
        before_tok_s: Option<f64>,
        during_tok_s: Option<f64>,
        stall_ms: Option<f64>,
    },
    /// A mixed-prefill step failed: `what` names it (the idle reference, probe N, the level).
    MixedPrefillFailed { level: String, what: String, reason: String },
    /// The sessions phase starts `users` conversations of `turns` turns (`to_run` of them new).
    SessionsStarted { users: u32, turns: u32, to_run: u32 },
    /// The sessions phase ended: turns answered and failed, and the prefix-cache hit rate.
    SessionsDone { completed: u64, failed: u64, cache_hit_pct: Option<f64> },
    /// The sessions phase could not run.
    SessionsSkipped { reason: String },
    /// A rate level (`--request-rate`, methodology §13.1) ended: measured, or why not.
    RateLevelDone(Box<sm_core::phases::rate::RateLevel>),
    /// A time scale of a replayed trace (`--replay`, methodology §13.5) ended: measured, or why not.
    ReplayLevelDone { time_scale: f64, level: Box<sm_core::phases::rate::RateLevel> },
    /// A rate level's window holds more requests than one level sends: only the first `max` go.
    RateWindowCut { rate: String, label: String, max: u64 },
    /// A burst (`--burst`) completed; `what` names it ("1K × 4"), times in ms from when it was due.
    BurstDone { what: String, e2e_p50_ms: f64, last_ms: f64, tok_s: f64 },
    /// A burst did not run, or a request of it failed.
    BurstEnded { what: String, status: CellStatus, reason: String },
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
            MixedProbeDone { level, probe, ttft_ms, slowdown, before_tok_s, during_tok_s, stall_ms } => {
                write!(f, "mixed prefill {level} probe {probe}: TTFT {ttft_ms:.0} ms")?;
                if let Some(x) = slowdown {
                    write!(f, " ({x:.2}× idle)")?;
                }
                if let (Some(b), Some(d)) = (before_tok_s, during_tok_s) {
                    write!(f, ", background {b:.0} → {d:.0} tok/s")?;
                }
                match stall_ms {
                    Some(ms) => write!(f, ", longest stall {ms:.0} ms"),
                    None => Ok(()),
                }
            }
            MixedPrefillFailed { level, what, reason } => write!(f, "mixed prefill {level}: {what} failed: {reason}"),
            RateLevelDone(level) => rate_level(f, level),
            ReplayLevelDone { time_scale, level } => {
                write!(f, "replay at {time_scale}× its recorded speed: ")?;
                rate_level(f, level)
            }
            RateWindowCut { rate, label, max } => write!(
                f,
                "rate {rate} req/s at {label}: the window holds more than {max} requests; the level sends the first {max}"
            ),
            BurstDone { what, e2e_p50_ms, last_ms, tok_s } => write!(
                f,
                "burst {what} done: end-to-end p50 {e2e_p50_ms:.0} ms, last completion {last_ms:.0} ms, {tok_s:.1} tok/s"
            ),
            BurstEnded { what, status, reason } => write!(f, "burst {what} {}: {reason}", status.word()),
            ServerGone { wait } => write!(
                f,
                "server did not come back within {:.0} s; stopping (everything measured is kept; --resume continues later)",
                wait.as_secs_f64()
            ),
            SessionsStarted { users, turns, to_run } => {
                let (users, turns) = (plural(u64::from(*users), "user"), plural(u64::from(*turns), "turn"));
                let to_run = plural(u64::from(*to_run), "conversation");
                write!(f, "sessions: {users} × {turns} started ({to_run} to hold)")
            }
            SessionsDone { completed, failed, cache_hit_pct } => {
                write!(f, "sessions done: {} answered, {failed} failed", plural(*completed, "turn"))?;
                match cache_hit_pct {
                    Some(p) => write!(f, ", {p:.1} % of prompt tokens from the prefix cache"),
                    None => f.write_str(", the server reported no cached tokens"),
                }
            }
            SessionsSkipped { reason } => write!(f, "sessions skipped: {reason}"),
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
            MixedProbeDone { level, probe, ttft_ms, slowdown, before_tok_s, during_tok_s, stall_ms } => {
                MixedProbeDone {
                    level: s(level),
                    probe: *probe,
                    ttft_ms: *ttft_ms,
                    slowdown: *slowdown,
                    before_tok_s: *before_tok_s,
                    during_tok_s: *during_tok_s,
                    stall_ms: *stall_ms,
                }
            }
            MixedPrefillFailed { level, what, reason } => {
                MixedPrefillFailed { level: s(level), what: s(what), reason: s(reason) }
            }
            SessionsSkipped { reason } => SessionsSkipped { reason: s(reason) },
            RateLevelDone(level) => {
                let mut l = level.clone();
                l.label = s(&l.label);
                l.reason = l.reason.as_ref().map(s);
                RateLevelDone(l)
            }
            ReplayLevelDone { time_scale, level } => {
                let mut l = level.clone();
                l.label = s(&l.label);
                l.reason = l.reason.as_ref().map(s);
                ReplayLevelDone { time_scale: *time_scale, level: l }
            }
            RateWindowCut { rate, label, max } => RateWindowCut { rate: rate.clone(), label: s(label), max: *max },
            BurstDone { what, e2e_p50_ms, last_ms, tok_s } => {
                BurstDone { what: s(what), e2e_p50_ms: *e2e_p50_ms, last_ms: *last_ms, tok_s: *tok_s }
            }
            BurstEnded { what, status, reason } => BurstEnded { what: s(what), status: *status, reason: s(reason) },
            RunStarted
            | RunResumed
            | SessionsStarted { .. }
            | SessionsDone { .. }
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

/// A rate level in one line: `rate 4 req/s at 1K: 12/12 completed, achieved 3.9 req/s, TTFT …`.
fn rate_level(f: &mut fmt::Formatter<'_>, l: &sm_core::phases::rate::RateLevel) -> fmt::Result {
    use sm_core::phases::rate::LevelStatus;
    write!(f, "rate {} req/s at {}", l.rate, l.label)?;
    if l.status != LevelStatus::Measured {
        return write!(f, ": {}", l.reason.as_deref().unwrap_or("not measured"));
    }
    let c = &l.counts;
    write!(f, ": {}/{} completed", c.completed, c.scheduled)?;
    if let Some(a) = l.achieved_rps {
        write!(f, ", achieved {a:.2} req/s")?;
    }
    if let Some(Percentiles { p50: Some(p50), p99, .. }) = l.ttft_ms {
        write!(f, ", TTFT p50 {p50:.0} ms")?;
        if let Some(p99) = p99 {
            write!(f, " p99 {p99:.0} ms")?;
        }
    }
    if let Some(max) = l.send_lag_ms.filter(|_| c.late > 0).and_then(|lag| lag.max) {
        write!(f, ", {} late (send lag max {max:.0} ms)", c.late)?;
    }
    match l.verdict() {
        Some(sm_core::phases::rate::Saturation::Saturated) => f.write_str(", saturated")?,
        Some(sm_core::phases::rate::Saturation::Unknown) => f.write_str(", saturation unknown")?,
        _ => {}
    }
    let note = l.note().to_string();
    if !note.is_empty() {
        write!(f, " — {note}")?;
    }
    Ok(())
}

#[cfg(test)]
mod tests;
