//! What the dashboard knows about the run: filled by the reporter callbacks,
//! read by the drawing code. Plain data so that a test can build any moment of a
//! run and render it.

use std::collections::{BTreeMap, VecDeque};
use std::time::{Duration, Instant};

use sm_core::record::{CellStatus, DecodeCell, PrefillRow, RunRecord, RunStatus, ServerInfo};
use sm_progress::{IDLE_GAP, LiveSample, RunEvent, Severity, Step, WarmupFailure, WarmupStage};

/// Events kept for the log panel; older ones are in run.json anyway.
const MAX_EVENTS: usize = 200;
/// Live tok/s samples kept for the sparkline (4 a second: two minutes).
const MAX_RATES: usize = 480;
/// The live rate is measured over about this span, so one late chunk does not make it jump.
const RATE_SPAN: Duration = Duration::from_secs(1);
/// Before any cell finished, a cell is guessed to take its window plus this
/// (scout, ramp-up, drain, idle gap).
const CELL_OVERHEAD: Duration = Duration::from_secs(10);
/// Before any prefill row finished, a row is guessed to take this long.
const PREFILL_GUESS: Duration = Duration::from_secs(5);

/// An event as the Events pane shows it: when, how much it matters, its plain line.
#[derive(Debug, Clone, PartialEq)]
pub struct LoggedEvent {
    /// Seconds since the dashboard started.
    pub at_s: f64,
    pub severity: Severity,
    pub text: String,
}

/// What a key asked the run to do; shown in the help line until the run has done it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Notice {
    /// The first Ctrl-C.
    StopNow,
    /// `q`.
    FinishAfterCell,
    /// `s`: cleared when the skipped cell is done.
    SkipCell,
}

impl Notice {
    pub fn text(self) -> &'static str {
        match self {
            Notice::StopNow => "Ctrl-C: stopping now and writing what was measured (Ctrl-C again aborts at once)",
            Notice::FinishAfterCell => "q: finishing the current cell, then writing the files and stopping",
            Notice::SkipCell => "s: skipping the current cell",
        }
    }
}

#[derive(Debug, Clone)]
pub struct State {
    pub started: Instant,
    pub server: Option<ServerInfo>,
    /// Matrix rows: (context, label) in plan order.
    pub contexts: Vec<(u64, String)>,
    /// Matrix columns.
    pub concurrency: Vec<u32>,
    /// The load phases the run measures (issue 17), in the order they run.
    pub phases: Vec<sm_core::phases::PhaseKind>,
    pub window: Duration,
    /// Decode cells that will be measured (not over capacity).
    pub planned_cells: usize,
    pub over_capacity: usize,
    pub planned_prefill: usize,
    /// Prefill rows: (context, label) in plan order.
    pub prefill_plan: Vec<(u64, String)>,
    /// Finished cells, over-capacity ones included.
    pub cells: BTreeMap<(u64, u32), DecodeCell>,
    pub prefill: Vec<PrefillRow>,
    pub step: Option<Step>,
    pub step_since: Instant,
    /// The decode cell being measured: (context, concurrency, since).
    pub current: Option<(u64, u32, Instant)>,
    /// While the hidden warm-up cell runs (from [`RunEvent::DecodeWarmupStarted`] to the event that
    /// ends it, whatever its outcome): its steps are not a measured cell.
    pub warmup_cell: bool,
    pub live: Option<LiveSample>,
    /// Recent (at, tokens) of this cell, for the live rate.
    pub recent: VecDeque<(Instant, u64)>,
    /// Live total tok/s of this cell, one per sample.
    pub rates: VecDeque<f64>,
    pub events: VecDeque<LoggedEvent>,
    /// Measured wall time of each decode cell finished in this session.
    pub cell_times: Vec<Duration>,
    pub prefill_times: Vec<Duration>,
    /// What a key press asked for, shown until the run acts on it.
    pub notice: Option<Notice>,
    pub finished: Option<RunStatus>,
}

impl State {
    pub fn new(now: Instant) -> State {
        State {
            started: now,
            server: None,
            contexts: Vec::new(),
            concurrency: Vec::new(),
            window: Duration::from_secs(30),
            planned_cells: 0,
            over_capacity: 0,
            planned_prefill: 0,
            prefill_plan: Vec::new(),
            cells: BTreeMap::new(),
            prefill: Vec::new(),
            step: None,
            step_since: now,
            current: None,
            warmup_cell: false,
            live: None,
            recent: VecDeque::new(),
            rates: VecDeque::new(),
            events: VecDeque::new(),
            cell_times: Vec::new(),
            prefill_times: Vec::new(),
            notice: None,
            finished: None,
            phases: Vec::new(),
        }
    }

    /// A run of load phases only: no matrix, cells or prefill rows.
    pub fn phases_only(&self) -> bool {
        !self.phases.is_empty() && self.contexts.is_empty()
    }

    pub fn start(&mut self, record: &RunRecord) {
        self.server = Some(record.server.clone());
        self.window = Duration::from_secs_f64(record.settings.duration_s.max(0.0));
        self.concurrency = record.settings.concurrency.clone();
        let plan = sm_core::plan::PlanSummary::of(&record.plan);
        self.contexts = plan.decode_rows;
        self.prefill_plan = plan.prefill_planned.iter().map(|p| (p.context, p.label.clone())).collect();
        // with --repeats each cell is measured that many times: the ETA and progress count measurements
        self.planned_cells = plan.decode_planned * record.settings.repeats.unwrap_or(1).max(1) as usize;
        self.over_capacity = plan.over_capacity.len();
        if self.contexts.is_empty() {
            // a record without a plan (older schema): the settings still name the rows
            self.contexts =
                record.settings.contexts.iter().map(|&c| (c, sm_core::context::label(sm_core::Tokens(c)))).collect();
            self.planned_cells = self.contexts.len() * self.concurrency.len();
        }
        self.phases = record.phases.kinds();
        if !record.settings.matrix {
            // a run of load phases only: no matrix to draw, no cells or rows to count down
            self.contexts.clear();
            self.concurrency.clear();
            self.prefill_plan.clear();
            self.planned_cells = 0;
        }
        self.planned_prefill = self.prefill_plan.len();
        for cell in &record.decode {
            self.cells.insert((cell.context, cell.concurrency), cell.clone());
        }
        self.prefill = record.prefill.clone();
    }

    pub fn step(&mut self, step: &Step, now: Instant) {
        if let Step::Scout { context, concurrency, .. } = step {
            self.current = if self.warmup_cell { None } else { Some((*context, *concurrency, now)) };
            self.live = None;
            self.recent.clear();
            self.rates.clear();
        }
        let same_kind = self.step.as_ref().is_some_and(|s| std::mem::discriminant(s) == std::mem::discriminant(step));
        if !same_kind {
            self.step_since = now;
        }
        self.step = Some(step.clone());
    }

    pub fn live(&mut self, sample: &LiveSample) {
        if self.recent.back().is_some_and(|&(_, t)| sample.tokens < t) {
            self.recent.clear();
        }
        self.recent.push_back((sample.at, sample.tokens));
        while self.recent.len() > 2 && self.recent[1].0 + RATE_SPAN <= sample.at {
            self.recent.pop_front();
        }
        if let (Some(&(t0, n0)), Some(&(t1, n1))) = (self.recent.front(), self.recent.back()) {
            let dt = t1.saturating_duration_since(t0).as_secs_f64();
            if dt > 0.0 {
                self.rates.push_back((n1 - n0) as f64 / dt);
                if self.rates.len() > MAX_RATES {
                    self.rates.pop_front();
                }
            }
        }
        self.live = Some(sample.clone());
    }

    pub fn event(&mut self, event: &RunEvent, now: Instant) {
        match event {
            RunEvent::DecodeWarmupStarted { .. } => self.warmup_cell = true,
            // done, skipped or stopped, failed: each ends the warm-up cell
            RunEvent::DecodeWarmupDone
            | RunEvent::DecodeWarmupSkipped { .. }
            | RunEvent::WarmupFailed(WarmupFailure { stage: WarmupStage::DecodeCell(_), .. })
                if self.warmup_cell =>
            {
                self.warmup_cell = false;
                // the warm-up's steps say nothing about the cells to come
                self.current = None;
                self.live = None;
            }
            _ => {}
        }
        let t = now.saturating_duration_since(self.started).as_secs_f64();
        self.events.push_back(LoggedEvent { at_s: t, severity: event.severity(), text: event.to_string() });
        if self.events.len() > MAX_EVENTS {
            self.events.pop_front();
        }
    }

    pub fn prefill_done(&mut self, row: &PrefillRow, now: Instant) {
        if let Some(Step::Prefill { started, .. }) = &self.step {
            self.prefill_times.push(now.saturating_duration_since(*started));
        }
        self.prefill.push(row.clone());
    }

    pub fn cell_done(&mut self, cell: &DecodeCell, now: Instant) {
        // a skipped cell ends early and would make the rest of the run look shorter
        if let Some((_, _, since)) = self.current.take()
            && cell.status() != CellStatus::Skipped
        {
            self.cell_times.push(now.saturating_duration_since(since));
        }
        self.cells.insert((cell.context, cell.concurrency), cell.clone());
        // the skip or finish the key asked for has happened
        if self.notice == Some(Notice::SkipCell) {
            self.notice = None;
        }
    }

    pub fn finish(&mut self, record: &RunRecord) {
        self.finished = Some(record.status);
        self.current = None;
        self.warmup_cell = false;
    }

    /// Cells measured (or skipped, or failed) out of those planned, resumed ones included; the
    /// capacity search's cells are not the plan's.
    /// Measurements of the plan's cells done: a cell measured by `--repeats` counts each repeat.
    pub fn cells_done(&self) -> usize {
        let planned = self.cells.values().filter(|c| c.status() != CellStatus::OverCapacity && !c.searched);
        planned.map(|c| c.repeats.len().max(1)).sum()
    }

    pub fn prefill_done_count(&self) -> usize {
        self.prefill.len().min(self.planned_prefill)
    }

    /// Fraction of the run's work done, weighting a prefill row like a cell.
    pub fn progress(&self) -> f64 {
        let total = self.planned_cells + self.planned_prefill;
        if total == 0 {
            return if self.finished.is_some() { 1.0 } else { 0.0 };
        }
        let done = self.cells_done().min(self.planned_cells) + self.prefill_done_count();
        done as f64 / total as f64
    }

    /// Wall time a decode cell takes: measured in this run, else the window plus overhead.
    pub fn per_cell(&self) -> Duration {
        mean(&self.cell_times).map_or(self.window + CELL_OVERHEAD, |d| d + IDLE_GAP)
    }

    /// Time left for the whole run, or None once it ended.
    pub fn eta(&self, now: Instant) -> Option<Duration> {
        if self.finished.is_some() {
            return None;
        }
        let per_cell = self.per_cell();
        let cells_left = self.planned_cells.saturating_sub(self.cells_done()) as u32;
        let mut left = per_cell * cells_left;
        if let Some((_, _, since)) = self.current {
            left = left.saturating_sub(now.saturating_duration_since(since).min(per_cell));
        }
        let per_row = mean(&self.prefill_times).unwrap_or(PREFILL_GUESS);
        let rows_left = self.planned_prefill.saturating_sub(self.prefill_done_count()) as u32;
        left += per_row * rows_left;
        if let Some(Step::Prefill { started, .. }) = &self.step {
            left = left.saturating_sub(now.saturating_duration_since(*started).min(per_row));
        }
        Some(left)
    }

    /// Time left for the prefill row in progress, from the prompt rate measured so far.
    pub fn prefill_eta(&self, context: u64, started: Instant, now: Instant) -> Option<Duration> {
        let (tokens, secs) = self
            .prefill
            .iter()
            .filter_map(|r| Some((r.prompt_tokens? as f64, r.ttft_ms? / 1000.0)))
            .fold((0.0, 0.0), |(n, s), (rn, rs)| (n + rn, s + rs));
        if tokens <= 0.0 || secs <= 0.0 {
            return None;
        }
        let expected = Duration::from_secs_f64(context as f64 / (tokens / secs));
        Some(expected.saturating_sub(now.saturating_duration_since(started)))
    }

    /// Live total tok/s of the cell in progress.
    pub fn live_rate(&self) -> Option<f64> {
        self.rates.back().copied()
    }
}

fn mean(d: &[Duration]) -> Option<Duration> {
    (!d.is_empty()).then(|| d.iter().sum::<Duration>() / d.len() as u32)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testdata::record;

    #[test]
    fn plan_gives_rows_columns_and_counts() {
        let mut s = State::new(Instant::now());
        s.start(&record());
        assert_eq!(s.contexts.iter().map(|(_, l)| l.as_str()).collect::<Vec<_>>(), ["8K", "64K"]);
        assert_eq!(s.concurrency, [1, 4, 16]);
        assert_eq!((s.planned_cells, s.over_capacity, s.planned_prefill), (5, 1, 2));
        assert_eq!(s.cells_done(), 0);
    }

    /// The current cell and the prefill row are found by their context: the label a step carries
    /// is only shown, and may be written otherwise than the plan's ("max (65536)" for "64K").
    #[test]
    fn steps_are_matched_by_context_not_by_label() {
        let t0 = Instant::now();
        let mut s = State::new(t0);
        s.start(&record());
        s.step(&Step::Scout { context: 65536, label: "max (65536)".into(), concurrency: 4 }, t0);
        assert_eq!(s.current.map(|(c, n, _)| (c, n)), Some((65536, 4)));
        s.prefill = vec![row()];
        let started = t0 + Duration::from_secs(1);
        s.step(&Step::Prefill { context: 65536, label: "max (65536)".into(), index: 2, total: 2, started }, started);
        // 8192 tokens took 100 ms: 65536 take 800 ms
        let eta = s.prefill_eta(65536, started, started).expect("an ETA from the 8K row's rate");
        assert!((eta.as_secs_f64() - 0.8).abs() < 1e-6, "{eta:?}");
    }

    #[test]
    fn eta_uses_the_window_until_a_cell_is_measured_then_the_measured_time() {
        let t0 = Instant::now();
        let mut s = State::new(t0);
        s.start(&record());
        s.prefill = vec![row(), row()];
        // 5 cells × (10 s window + 10 s)
        assert_eq!(s.eta(t0), Some(Duration::from_secs(100)));
        s.step(&Step::Scout { context: 8192, label: "8K".into(), concurrency: 1 }, t0);
        let cell = DecodeCell { context: 8192, concurrency: 1, status: Some(CellStatus::Valid), ..Default::default() };
        s.cell_done(&cell, t0 + Duration::from_secs(4));
        assert_eq!(s.cells_done(), 1);
        // 4 cells × (4 s + 0.5 s idle gap)
        assert_eq!(s.eta(t0 + Duration::from_secs(4)), Some(Duration::from_secs(18)));
        assert!((s.progress() - 3.0 / 7.0).abs() < 1e-9);
    }

    /// With `--repeats 3` the plan is three passes: each repeat of a cell is one measurement done.
    #[test]
    fn repeats_count_as_measurements() {
        let t0 = Instant::now();
        let mut s = State::new(t0);
        let mut r = record();
        r.settings.repeats = Some(3);
        s.start(&r);
        assert_eq!(s.planned_cells, 15, "5 cells × 3 passes");
        let once = DecodeCell { context: 8192, concurrency: 1, status: Some(CellStatus::Valid), ..Default::default() };
        s.cell_done(&once, t0 + Duration::from_secs(4));
        assert_eq!(s.cells_done(), 1);
        let twice = DecodeCell { repeats: vec![Default::default(); 2], ..once };
        s.cell_done(&twice, t0 + Duration::from_secs(8));
        assert_eq!(s.cells_done(), 2, "the same cell again, now with two repeats");
    }

    /// A capacity search's cells come after the plan: they do not count as the plan's cells done.
    #[test]
    fn searched_cells_are_not_the_plans() {
        let t0 = Instant::now();
        let mut s = State::new(t0);
        s.start(&record());
        let valid = |concurrency, searched| DecodeCell {
            context: 8192,
            concurrency,
            status: Some(CellStatus::Valid),
            searched,
            ..Default::default()
        };
        s.cell_done(&valid(1, false), t0);
        s.cell_done(&valid(8, true), t0);
        assert_eq!(s.cells_done(), 1);
    }

    #[test]
    fn live_rate_follows_the_token_count() {
        let t0 = Instant::now();
        let mut s = State::new(t0);
        for i in 0..8u64 {
            let sample = LiveSample {
                at: t0 + Duration::from_millis(250 * i),
                tokens: 100 * i,
                streams_with_token: 4,
                concurrency: 4,
                ttft_ms_p50: None,
                ttfa_ms_p50: None,
                ttftc_ms_p50: None,
                tbt_ms_p50: None,
                server: None,
            };
            s.live(&sample);
        }
        let rate = s.live_rate().unwrap();
        assert!((rate - 400.0).abs() < 1e-6, "{rate}");
    }

    /// A warm-up that fails (or is skipped, or stopped) ends like one that succeeds: the next cell is
    /// a measured one, shown and timed as such. Driven by the typed events the runner sends.
    #[test]
    fn the_warm_up_state_ends_whatever_the_warm_up_did() {
        let failed = |status| {
            RunEvent::WarmupFailed(WarmupFailure { stage: WarmupStage::DecodeCell(status), reason: "HTTP 500".into() })
        };
        let endings = [
            failed(CellStatus::Error),
            failed(CellStatus::Loop),
            RunEvent::DecodeWarmupSkipped { reason: "skipped by the user".into() },
            RunEvent::DecodeWarmupDone,
        ];
        for end in endings {
            let t0 = Instant::now();
            let mut s = State::new(t0);
            s.start(&record());
            s.event(&RunEvent::DecodeWarmupStarted { at: "64K".into(), window: Duration::from_secs(3) }, t0);
            s.step(&Step::Scout { context: 65536, label: "64K".into(), concurrency: 1 }, t0);
            assert!(s.warmup_cell && s.current.is_none(), "the warm-up cell is not a measured one");
            s.event(&end, t0);
            assert!(!s.warmup_cell, "still in the warm-up after: {end}");
            s.step(&Step::Scout { context: 8192, label: "8K".into(), concurrency: 1 }, t0 + Duration::from_secs(1));
            let current = s.current.map(|(c, n, _)| (c, n));
            assert_eq!(current, Some((8192, 1)), "the first measured cell is the current one after: {end}");
            let cell =
                DecodeCell { context: 8192, concurrency: 1, status: Some(CellStatus::Valid), ..Default::default() };
            s.cell_done(&cell, t0 + Duration::from_secs(5));
            assert_eq!(s.cell_times, [Duration::from_secs(4)], "the measured cell is timed for the ETA after: {end}");
            assert_eq!(s.events.back().map(|e| e.text.as_str()), Some(end.to_string().as_str()), "the log shows it");
        }
    }

    /// The warm-up request failing is not the warm-up cell ending: a warm-up cell in progress stays one.
    #[test]
    fn a_failed_warm_up_request_does_not_end_the_warm_up_cell() {
        let t0 = Instant::now();
        let mut s = State::new(t0);
        s.start(&record());
        s.event(&RunEvent::DecodeWarmupStarted { at: "64K".into(), window: Duration::from_secs(3) }, t0);
        let request = WarmupFailure { stage: WarmupStage::Request, reason: "HTTP 500".into() };
        s.event(&RunEvent::WarmupFailed(request), t0);
        assert!(s.warmup_cell);
        s.step(&Step::Scout { context: 65536, label: "64K".into(), concurrency: 1 }, t0);
        assert!(s.current.is_none(), "the warm-up cell is not a measured one");
    }

    fn row() -> PrefillRow {
        PrefillRow {
            context: 8192,
            label: "8K".into(),
            prompt_tokens: Some(8192),
            ttft_ms: Some(100.0),
            prompt_tok_s: Some(81920.0),
            cached_tokens: Some(0),
            status: CellStatus::Valid,
            reason: None,
            telemetry: Default::default(),
        }
    }
}
