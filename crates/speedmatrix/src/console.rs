//! Progress for logs and pipes: `--progress plain` prints one line per event,
//! prefixed with the seconds since the run started, so CI logs and `nohup` files
//! can be read and grepped; `--progress quiet` prints nothing until the summary.
//!
//! Besides the runner's own events it says where the run is: the plan, the start
//! and end of the prefill phase and of the decode matrix, when a cell's window
//! opens, a ramp-up that keeps waiting, and the hidden decode warm-up by name.
//! The format is documented in docs/dashboard.md; tests and scripts grep it.

use std::io::Write;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use sm_bench::{LiveSample, Reporter, RunEvent, Step, WarmupFailure, WarmupStage};
use sm_core::plan::PlanSummary;
use sm_core::record::{CellStatus, DecodeCell, PrefillRow, RunRecord};
use sm_core::units::plural;

use crate::table;

/// A ramp-up still waiting after this long gets a line, and another every `RAMP_REPEAT`.
const RAMP_FIRST: Duration = Duration::from_secs(10);
const RAMP_REPEAT: Duration = Duration::from_secs(30);
/// Continuation lines line up with the text after the `[    12.3s] ` stamp.
const INDENT: &str = "           ";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    Plain,
    Quiet,
}

pub struct Console {
    mode: Mode,
    start: Instant,
    inner: Mutex<Inner>,
}

/// What earlier callbacks said, to turn steps into phase lines; behind the same lock as the output
/// so that lines come out in order.
struct Inner {
    out: std::io::Stdout,
    /// Decode cells and prefill rows left to measure in this session.
    cells_left: usize,
    rows_left: usize,
    prefill: Phase,
    decode: Phase,
    /// Between the decode warm-up's start and its end: the cell then is not measured.
    warmup: bool,
    cell: Option<CellProgress>,
}

/// Outcomes of a phase's rows or cells so far; `None` before it started.
#[derive(Default)]
struct Phase {
    started: bool,
    ended: bool,
    outcomes: Vec<CellStatus>,
}

/// The decode cell in progress.
struct CellProgress {
    /// "cell 8K × 4" or "decode warm-up 64K × 1".
    who: String,
    started: Instant,
    /// When the streams started (the first ramp-up step; the server is drained before that).
    ramp_since: Option<Instant>,
    /// The ramp-up's latest reason, and when a line last said it was still waiting.
    ramp: Option<(String, Option<Instant>)>,
}

impl Console {
    pub fn new(mode: Mode) -> Console {
        let inner = Inner {
            out: std::io::stdout(),
            cells_left: 0,
            rows_left: 0,
            prefill: Phase::default(),
            decode: Phase::default(),
            warmup: false,
            cell: None,
        };
        Console { mode, start: Instant::now(), inner: Mutex::new(inner) }
    }

    fn inner(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn line(&self, inner: &mut Inner, text: &str) {
        if self.mode == Mode::Quiet {
            return;
        }
        let t = self.start.elapsed().as_secs_f64();
        let text = sm_core::secrets::scrub(text);
        for (i, l) in text.lines().enumerate() {
            // a closed terminal or pipe must not stop the run
            let _ = if i == 0 { writeln!(inner.out, "[{t:8.1}s] {l}") } else { writeln!(inner.out, "{INDENT}{l}") };
        }
        let _ = inner.out.flush();
    }

    fn end_prefill(&self, inner: &mut Inner) {
        if inner.prefill.started && !inner.prefill.ended {
            inner.prefill.ended = true;
            let text = format!("prefill phase done: {}", inner.prefill.summary("row"));
            self.line(inner, &text);
        }
    }

    fn end_decode(&self, inner: &mut Inner) {
        if inner.decode.started && !inner.decode.ended {
            inner.decode.ended = true;
            let word = if inner.decode.outcomes.len() >= inner.cells_left { "done" } else { "stopped" };
            let text = format!(
                "decode matrix {word}: {} of {} measured ({})",
                inner.decode.outcomes.len(),
                plural(inner.cells_left as u64, "cell"),
                inner.decode.counts()
            );
            self.line(inner, &text);
        }
    }
}

impl Phase {
    fn summary(&self, unit: &str) -> String {
        format!("{} ({})", plural(self.outcomes.len() as u64, unit), self.counts())
    }

    /// "3 valid, 1 error".
    fn counts(&self) -> String {
        let mut counts: Vec<(CellStatus, usize)> = Vec::new();
        for &o in &self.outcomes {
            match counts.iter_mut().find(|(s, _)| *s == o) {
                Some((_, n)) => *n += 1,
                None => counts.push((o, 1)),
            }
        }
        if counts.is_empty() {
            return "none".into();
        }
        counts.iter().map(|(s, n)| format!("{n} {}", s.word())).collect::<Vec<_>>().join(", ")
    }
}

/// The plan line and, under it, each cell that will not run and why.
fn plan_text(record: &RunRecord) -> (String, usize, usize) {
    let plan = PlanSummary::of(&record.plan);
    let done = record.decode.iter().filter(|c| c.status() != CellStatus::OverCapacity && !c.searched).count();
    let cells_left = plan.decode_planned.saturating_sub(done);
    let rows = plan.prefill_planned.len();
    let rows_left = rows.saturating_sub(record.prefill.len());
    let s = &record.settings;
    let windows = match (s.precision_pct, s.min_duration_s) {
        (Some(pct), Some(min)) => format!("windows until ±{pct} % ({min}–{} s)", s.duration_s),
        _ => format!("{} s windows", s.duration_s),
    };
    let times = s.repeats.filter(|&n| n > 1).map_or(String::new(), |n| format!(", each cell {n} times"));
    let phases: Vec<&str> = record.phases.kinds().into_iter().map(|k| k.name()).collect();
    let mut text = if s.matrix {
        format!(
            "plan: {} to measure, {} over capacity, {}, {windows}{times}",
            plural(plan.decode_planned as u64, "decode cell"),
            plan.over_capacity.len(),
            plural(rows as u64, "prefill row"),
        )
    } else {
        format!("plan: the load phases only ({}); no decode matrix (--matrix adds it)", phases.join(", "))
    };
    if s.matrix && !phases.is_empty() {
        text.push_str(&format!("; then the load phases: {}", phases.join(", ")));
    }
    if done > 0 || rows_left < rows {
        let (cells, rows) = (plural(done as u64, "cell"), plural((rows - rows_left) as u64, "row"));
        text.push_str(&format!(" ({cells} and {rows} already measured)"));
    }
    if let Some(slo) = &record.settings.slo {
        let search = if record.settings.find_capacity { "; then a capacity search" } else { "" };
        text.push_str(&format!("\nservice level: {slo}{search}"));
    }
    for p in &plan.over_capacity {
        text.push_str(&format!(
            "\nover capacity: {} × {}: {}",
            sm_core::context::shown(&p.label, p.context),
            p.concurrency,
            p.reason.as_deref().unwrap_or("")
        ));
    }
    for p in &plan.skipped {
        let label = sm_core::context::shown(&p.label, p.context);
        text.push_str(&format!("\nnot run: {} {label}: {}", p.kind, p.reason.as_deref().unwrap_or("")));
    }
    // a run of phases only has no cells or rows to count down
    if !s.matrix {
        return (text, 0, 0);
    }
    (text, cells_left, rows_left)
}

impl Reporter for Console {
    fn start(&self, record: &RunRecord) {
        let (text, cells_left, rows_left) = plan_text(record);
        let mut inner = self.inner();
        (inner.cells_left, inner.rows_left) = (cells_left, rows_left);
        self.line(&mut inner, &text);
    }

    fn step(&self, step: &Step) {
        let mut inner = self.inner();
        let inner = &mut *inner;
        match step {
            Step::Prefill { .. } => {
                if !inner.prefill.started {
                    inner.prefill.started = true;
                    let text = format!("prefill phase started: {} to measure", plural(inner.rows_left as u64, "row"));
                    self.line(inner, &text);
                }
                return;
            }
            Step::Sizing => return,
            _ => {}
        }
        // anything after the prefill rows ends their phase
        if !matches!(step, Step::Warmup) || inner.prefill.started {
            self.end_prefill(inner);
        }
        match step {
            Step::Scout { .. } if !inner.warmup && !inner.decode.started => {
                inner.decode.started = true;
                let text = format!("decode matrix started: {} to measure", plural(inner.cells_left as u64, "cell"));
                self.line(inner, &text);
            }
            Step::Ramp { waiting_for, .. } => {
                if let Some(cell) = &mut inner.cell {
                    cell.ramp_since.get_or_insert_with(Instant::now);
                    let said = cell.ramp.take().and_then(|(_, said)| said);
                    cell.ramp = Some((waiting_for.clone(), said));
                }
            }
            Step::Measuring { started, window, .. } => {
                if let Some(cell) = &mut inner.cell {
                    cell.ramp = None;
                    let ramp = started.saturating_duration_since(cell.ramp_since.unwrap_or(cell.started)).as_secs_f64();
                    let text = format!(
                        "{} window open after {ramp:.1} s ramp-up ({:.0} s window)",
                        cell.who,
                        window.as_secs_f64()
                    );
                    self.line(inner, &text);
                }
            }
            _ => {}
        }
    }

    fn live(&self, sample: &LiveSample) {
        let mut inner = self.inner();
        let Some(cell) = &mut inner.cell else { return };
        let Some((reason, said)) = &mut cell.ramp else { return };
        let waited = sample.at.saturating_duration_since(cell.ramp_since.unwrap_or(cell.started));
        let due = match said {
            None => waited >= RAMP_FIRST,
            Some(at) => sample.at.saturating_duration_since(*at) >= RAMP_REPEAT,
        };
        if due {
            *said = Some(sample.at);
            let text = format!("{} ramp-up still waiting after {:.0} s: {reason}", cell.who, waited.as_secs_f64());
            self.line(&mut inner, &text);
        }
    }

    fn event(&self, event: &RunEvent) {
        let mut inner = self.inner();
        let inner = &mut *inner;
        match event {
            RunEvent::DecodeWarmupStarted { .. } => inner.warmup = true,
            RunEvent::DecodeWarmupDone
            | RunEvent::DecodeWarmupSkipped { .. }
            | RunEvent::WarmupFailed(WarmupFailure { stage: WarmupStage::DecodeCell(_), .. })
                if inner.warmup =>
            {
                inner.warmup = false;
                let cell = inner.cell.take();
                if *event == RunEvent::DecodeWarmupDone
                    && let Some(cell) = cell
                {
                    self.line(inner, &format!("{} done (not measured)", cell.who));
                    return;
                }
            }
            RunEvent::CellStarted { cell, concurrency } => {
                let (who, line) = if inner.warmup {
                    let who = format!("decode warm-up {cell} × {concurrency}");
                    (who.clone(), format!("{who} started (not measured)"))
                } else {
                    (format!("cell {cell} × {concurrency}"), event.to_string())
                };
                inner.cell = Some(CellProgress { who, started: Instant::now(), ramp_since: None, ramp: None });
                self.line(inner, &line);
                return;
            }
            // finished cells and rows get their own, fuller line from cell_done and prefill_done
            RunEvent::CellDone { .. }
            | RunEvent::CellEnded { .. }
            | RunEvent::PrefillDone { .. }
            | RunEvent::PrefillFailed { .. } => return,
            RunEvent::RunEnded(_) => {
                // the run's last line comes after the phases it ends
                self.end_prefill(inner);
                self.end_decode(inner);
            }
            // the capacity search follows the matrix: its cells are not the matrix's
            RunEvent::CapacitySearch { .. } => self.end_decode(inner),
            _ => {}
        }
        self.line(inner, &event.to_string());
    }

    fn prefill_done(&self, row: &PrefillRow) {
        let mut inner = self.inner();
        inner.prefill.started = true;
        inner.prefill.outcomes.push(row.status);
        self.line(&mut inner, &table::prefill_line(row));
    }

    fn cell_done(&self, cell: &DecodeCell) {
        let mut inner = self.inner();
        inner.cell = None;
        // a search's cells and a cell's second and later repeats are not cells of the plan
        if !cell.searched && cell.repeats.len() <= 1 {
            inner.decode.outcomes.push(cell.status());
        }
        self.line(&mut inner, &table::cell_line(cell));
    }

    fn finish(&self, _record: &RunRecord) {
        let mut inner = self.inner();
        self.end_prefill(&mut inner);
        self.end_decode(&mut inner);
    }
}
