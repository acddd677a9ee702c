//! What the page says about a cell's precision (methodology §12): its figures' 95 % intervals as
//! `value ± half-width`, whether `--precision` was reached, and the spread of `--repeats`. Kept out
//! of the matrix's face (a hover there) and shown in the All-measurements table, where a reader
//! compares figures. A record without any of it (before schema 1.2) shows nothing new.

use sm_core::precision::Interval;
use sm_core::record::{CellIntervals, CellStatus, DecodeCell, RunRecord};

use super::{DecodeIndex, Matrix, PrefillLine};
use crate::format::{self, NONE};

pub const PRECISION: &str = "Precision";
pub const REPEATS: &str = "Repeats";
/// The All-measurements legend of `±`.
pub const PM_NOTE: &str = "± : half-width of the figure's 95 % confidence interval, the larger side where it is not \
symmetric (methodology §12); hover a figure for the interval itself.";
pub const REPEATS_NOTE: &str = "Repeats: how many times the cell was measured (--repeats), interleaved with the other \
cells, and the spread (lowest–highest) of their total tok/s; the figures are the repeats' means.";
pub const DISAGREE_NOTE: &str = "⚠ the repeats disagree beyond their intervals: the server was not stationary \
while the cell was measured (thermal throttling, background load), so its figures describe no single state of it.";
pub const DISAGREE_TIP: &str = "⚠ the repeats disagree beyond their intervals: the server was not stationary";

/// How a figure is printed (the All-measurements table's formats).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unit {
    /// `401.3`
    TokS,
    /// `62 ms` (one decimal under 10 ms)
    Ms,
    /// `9.5 ms`
    Ms1,
}

impl Unit {
    /// Decimals the format prints `x` with.
    fn decimals(self, x: f64) -> i32 {
        match self {
            Unit::Ms if x.abs() >= 10.0 => 0,
            _ => 1,
        }
    }

    /// `x` rounded up (`up`) or down to the decimals it is printed with, so that a printed interval
    /// is never narrower than the real one.
    fn outward(self, x: f64, up: bool) -> f64 {
        let f = 10f64.powi(self.decimals(x));
        if up { (x * f - 1e-9).ceil() / f } else { (x * f + 1e-9).floor() / f }
    }

    fn fmt(self, x: f64) -> String {
        match self {
            Unit::TokS => format::fixed1(x),
            Unit::Ms => format::ms(x),
            Unit::Ms1 => format::ms1(x),
        }
    }
}

/// A figure with its interval, as the page prints it.
#[derive(Debug, Clone, PartialEq)]
pub struct Pm {
    /// `401.3 ± 5.9`, `62 ± 1.5 ms`.
    pub text: String,
    /// `95 % confidence interval 395.5–407.3`, for a hover.
    pub range: String,
}

/// `value ± half-width`, the half-width being the larger side (order-statistic intervals of a
/// percentile are not symmetric; the larger side never overstates the precision), rounded up.
pub fn pm(value: f64, ci: Interval, unit: Unit) -> Pm {
    let half = unit.outward((ci.hi - value).max(value - ci.lo).max(0.0), true);
    let (lo, hi) = (unit.outward(ci.lo, false), unit.outward(ci.hi, true));
    let strip = |s: String| s.strip_suffix(" ms").map(str::to_string).unwrap_or(s);
    let text = match unit {
        Unit::TokS => format!("{} ± {}", unit.fmt(value), unit.fmt(half)),
        // the unit once, after the half-width: `62 ± 1.5 ms`
        Unit::Ms | Unit::Ms1 => format!("{} ± {}", strip(unit.fmt(value)), unit.fmt(half)),
    };
    let range = match unit {
        Unit::TokS => format!("95 % confidence interval {}–{}", unit.fmt(lo), unit.fmt(hi)),
        Unit::Ms | Unit::Ms1 => format!("95 % confidence interval {}–{}", strip(unit.fmt(lo)), unit.fmt(hi)),
    };
    Pm { text, range }
}

/// The repeats of a cell: how many, how many gave figures, and their total tok/s's range.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Spread {
    pub n: usize,
    pub total_tok_s: Option<(f64, f64)>,
}

/// A valid cell's precision facts; `None` when its record has none.
#[derive(Debug, Clone, PartialEq)]
pub struct CellPrecision {
    pub ci: CellIntervals,
    pub met: Option<bool>,
    pub repeats: Option<Spread>,
    pub agree: Option<bool>,
    /// Total and per-request tok/s with their intervals, where they have one.
    pub total: Option<Pm>,
    pub per_request: Option<Pm>,
    /// The lines a hover adds after the tok/s: the latencies with their intervals, the precision
    /// verdict, the repeats.
    pub tip: Vec<String>,
}

impl CellPrecision {
    pub fn disagree(&self) -> bool {
        self.agree == Some(false)
    }

    /// The text of the Repeats column: `3: 395.1–407.3`, flagged `⚠` when they disagree.
    pub fn repeats_text(&self) -> String {
        let Some(r) = self.repeats else {
            return NONE.to_string();
        };
        let flag = if self.disagree() { "⚠ " } else { "" };
        match r.total_tok_s {
            Some((lo, hi)) => format!("{flag}{}: {}–{}", r.n, format::fixed1(lo), format::fixed1(hi)),
            None => format!("{flag}{}", r.n),
        }
    }
}

pub(super) fn cell_precision(cell: &DecodeCell) -> Option<CellPrecision> {
    if cell.status() != CellStatus::Valid {
        return None;
    }
    let totals: Vec<f64> = cell.repeats.iter().filter_map(|r| r.total_tok_s).collect();
    let repeats = (!cell.repeats.is_empty()).then(|| Spread {
        n: cell.repeats.len(),
        total_tok_s: (!totals.is_empty()).then(|| {
            (
                totals.iter().copied().fold(f64::INFINITY, f64::min),
                totals.iter().copied().fold(f64::NEG_INFINITY, f64::max),
            )
        }),
    });
    let ci = cell.ci.unwrap_or_default();
    let with = |v: Option<f64>, i: Option<Interval>| Some(pm(v?, i?, Unit::TokS));
    let mut p = CellPrecision {
        ci,
        met: cell.precision_met,
        repeats,
        agree: cell.repeats_agree,
        total: with(cell.total_tok_s, ci.total_tok_s),
        per_request: with(cell.per_request_tok_s, ci.per_request_tok_s),
        tip: Vec::new(),
    };
    let empty = p.ci == CellIntervals::default() && p.met.is_none() && p.repeats.is_none() && p.agree.is_none();
    if empty {
        return None;
    }
    p.tip = tip_lines(cell, &p);
    Some(p)
}

/// The All-measurements columns whose figures have intervals: (column of [`super::COLUMNS`], the
/// figure, its interval, its unit).
type Figures = [(usize, Option<f64>, Option<Interval>, Unit); 4];

fn figures(cell: &DecodeCell, ci: &CellIntervals) -> Figures {
    [
        (4, cell.total_tok_s, ci.total_tok_s, Unit::TokS),
        (5, cell.per_request_tok_s, ci.per_request_tok_s, Unit::TokS),
        (6, cell.ttft_ms.p50, ci.ttft_ms_p50, Unit::Ms),
        (7, cell.tbt_ms.p50, ci.tbt_ms_p50, Unit::Ms1),
    ]
}

/// What a precision column's cell says: fine, or a problem the page flags (a precision missed,
/// repeats that disagree).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MarkKind {
    Plain,
    Flag,
}

/// One cell of a precision column: its text, and its kind, which picks how the page marks it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mark {
    pub text: String,
    pub kind: MarkKind,
}

impl Mark {
    fn new(text: String, flagged: bool) -> Mark {
        Mark { text, kind: if flagged { MarkKind::Flag } else { MarkKind::Plain } }
    }
}

/// Precision columns, rows and legend of the All-measurements table.
#[derive(Debug, Default)]
pub struct Table {
    /// `Precision` when a cell measured towards `--precision`, `Repeats` when one was repeated.
    pub columns: Vec<&'static str>,
    /// A row per measurement, in the order of [`super::measurements`].
    pub rows: Vec<Vec<Mark>>,
    /// Per measurement: `(column, figure ± half-width)` for the figures with an interval.
    pub pm: Vec<Vec<(usize, Pm)>>,
    /// What the marks mean, for the marks the table shows.
    pub notes: Vec<String>,
}

pub(super) fn table(prefill: &[PrefillLine], matrix: &Matrix, record: &RunRecord) -> Table {
    let decode = DecodeIndex::new(record);
    let mut cells: Vec<Option<(&DecodeCell, CellPrecision)>> = prefill.iter().map(|_| None).collect();
    for shown in matrix.shown() {
        cells.push(decode.get(shown.context, shown.concurrency).and_then(|d| Some((d, cell_precision(d)?))));
    }
    let shown = || cells.iter().flatten();
    let any_met = shown().any(|(_, p)| p.met.is_some());
    let any_repeats = shown().any(|(_, p)| p.repeats.is_some());
    let mut t = Table::default();
    t.columns.extend(any_met.then_some(PRECISION));
    t.columns.extend(any_repeats.then_some(REPEATS));
    for cell in &cells {
        let mut row = Vec::new();
        let mut pms = Vec::new();
        if let Some((d, p)) = cell {
            for (col, value, ci, unit) in figures(d, &p.ci) {
                if let (Some(v), Some(ci)) = (value, ci) {
                    pms.push((col, pm(v, ci, unit)));
                }
            }
        }
        let p = cell.as_ref().map(|(_, p)| p);
        if any_met {
            row.push(match p.and_then(|p| p.met) {
                Some(true) => Mark::new("✓".to_string(), false),
                Some(false) => Mark::new("✗".to_string(), true),
                None => Mark::new(NONE.to_string(), false),
            });
        }
        if any_repeats {
            row.push(
                p.map_or_else(|| Mark::new(NONE.to_string(), false), |p| Mark::new(p.repeats_text(), p.disagree())),
            );
        }
        t.rows.push(row);
        t.pm.push(pms);
    }
    if t.pm.iter().any(|r| !r.is_empty()) {
        t.notes.push(PM_NOTE.to_string());
    }
    if any_met {
        t.notes.push(precision_note(record));
    }
    if any_repeats {
        t.notes.push(REPEATS_NOTE.to_string());
    }
    if shown().any(|(_, p)| p.disagree()) {
        t.notes.push(DISAGREE_NOTE.to_string());
    }
    t
}

/// The legend of the Precision column, with the run's target and windows where it has them.
fn precision_note(record: &RunRecord) -> String {
    let s = &record.settings;
    let target = s.precision_pct.map_or_else(|| "the precision asked for".to_string(), |p| format!("±{p} %"));
    let window = if s.duration_s > 0.0 { format!(" ({})", format::secs_setting(s.duration_s)) } else { String::new() };
    format!(
        "Precision: ✓ total tok/s and TBT p50 were within {target} (--precision) when the window ended; ✗ they \
         were not (the longest window{window} ended first), and the ± say how far they got."
    )
}

/// The lines a matrix cell's hover adds: its other figures with their intervals, the precision
/// verdict and the repeats.
fn tip_lines(cell: &DecodeCell, p: &CellPrecision) -> Vec<String> {
    let mut lines = Vec::new();
    let figs: Vec<String> = [
        ("TTFT p50", cell.ttft_ms.p50, p.ci.ttft_ms_p50, Unit::Ms),
        ("TTFT p90", cell.ttft_ms.p90, p.ci.ttft_ms_p90, Unit::Ms),
        ("TBT p50", cell.tbt_ms.p50, p.ci.tbt_ms_p50, Unit::Ms1),
        ("TBT p99", cell.tbt_ms.p99, p.ci.tbt_ms_p99, Unit::Ms1),
    ]
    .into_iter()
    .filter_map(|(name, v, ci, unit)| Some(format!("{name} {}", pm(v?, ci?, unit).text)))
    .collect();
    if !figs.is_empty() {
        lines.push(figs.join(", "));
    }
    match p.met {
        Some(true) => lines.push("reached the precision asked for".into()),
        Some(false) => lines.push("did not reach the precision asked for within the longest window".into()),
        None => {}
    }
    if p.repeats.is_some() {
        lines.push(format!("repeats: {} (total tok/s)", p.repeats_text().trim_start_matches("⚠ ")));
    }
    if p.disagree() {
        lines.push(DISAGREE_TIP.into());
    }
    lines
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pm_prints_the_larger_side_in_the_figures_format() {
        let p = pm(401.3, Interval { lo: 395.5, hi: 407.25 }, Unit::TokS);
        assert_eq!(p.text, "401.3 ± 6.0");
        assert_eq!(p.range, "95 % confidence interval 395.5–407.3");
        let p = pm(61.5, Interval { lo: 60.5, hi: 63.0 }, Unit::Ms);
        assert_eq!((p.text.as_str(), p.range.as_str()), ("62 ± 1.5 ms", "95 % confidence interval 60–63 ms"));
        let p = pm(1156.0, Interval { lo: 1100.0, hi: 1170.0 }, Unit::Ms);
        assert_eq!(p.text, "1,156 ± 56 ms");
        assert_eq!(pm(9.5, Interval { lo: 9.25, hi: 9.75 }, Unit::Ms1).text, "9.5 ± 0.3 ms");
        // an interval that does not hold its figure (a window's percentile against batch values)
        assert_eq!(pm(10.0, Interval { lo: 10.5, hi: 11.0 }, Unit::Ms1).text, "10.0 ± 1.0 ms");
    }
}
