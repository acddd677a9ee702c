//! Two runs compared cell by cell (methodology §12.5): for each decode cell both runs measured
//! (matched by concurrency and by context: the nearest context of the other run within 1 %,
//! [`sm_core::context::pair`], so a reference tool's `251K` row meets speedmatrix's 256K fitted to
//! the model), the difference of each main figure in % of the baseline
//! and whether it is beyond the noise of both runs ([`sm_core::precision::differ`]); the cells only
//! one run has; and the capacity answers side by side. `speedmatrix compare` renders it as text,
//! Markdown or JSON ([`render`]) and gates on it ([`gate`]); the site's compare page shows the same
//! marks, from the same data.

pub mod gate;
pub mod render;

use std::collections::BTreeMap;

use sm_core::answer::Capacity;
use sm_core::figures::Figures as _;
use sm_core::precision::{Interval, differ};
use sm_core::record::{CellIntervals, CellStatus, DecodeCell, RunRecord};

/// The main figures of a cell, the ones with 95 % intervals (methodology §12).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Figure {
    TotalTokS,
    PerRequestTokS,
    TtftP50,
    TtftP90,
    TbtP50,
    TbtP99,
    /// A reasoning model's wait for the answer: compared where both cells thought.
    TtfaP50,
    TtfaP90,
    /// A run sent with tools: the wait for the first tool call, compared where both cells' requests
    /// carried tools.
    TtftcP50,
    TtftcP90,
}

impl Figure {
    pub const ALL: [Figure; 10] = [
        Figure::TotalTokS,
        Figure::PerRequestTokS,
        Figure::TtftP50,
        Figure::TtftP90,
        Figure::TbtP50,
        Figure::TbtP99,
        Figure::TtfaP50,
        Figure::TtfaP90,
        Figure::TtftcP50,
        Figure::TtftcP90,
    ];

    /// The name `--fail-on` and the JSON output use.
    pub fn name(self) -> &'static str {
        match self {
            Figure::TotalTokS => "total_tok_s",
            Figure::PerRequestTokS => "per_request_tok_s",
            Figure::TtftP50 => "ttft_p50",
            Figure::TtftP90 => "ttft_p90",
            Figure::TbtP50 => "tbt_p50",
            Figure::TbtP99 => "tbt_p99",
            Figure::TtfaP50 => "ttfa_p50",
            Figure::TtfaP90 => "ttfa_p90",
            Figure::TtftcP50 => "ttftc_p50",
            Figure::TtftcP90 => "ttftc_p90",
        }
    }

    /// The figure as a table's column names it.
    pub fn title(self) -> &'static str {
        match self {
            Figure::TotalTokS => "total tok/s",
            Figure::PerRequestTokS => "per-request tok/s",
            Figure::TtftP50 => "TTFT p50",
            Figure::TtftP90 => "TTFT p90",
            Figure::TbtP50 => "TBT p50",
            Figure::TbtP99 => "TBT p99",
            Figure::TtfaP50 => "TTFA p50",
            Figure::TtfaP90 => "TTFA p90",
            Figure::TtftcP50 => "TTFTC p50",
            Figure::TtftcP90 => "TTFTC p90",
        }
    }

    /// The figure by its `--fail-on` name, or by its run.json field (`ttft_ms_p90`).
    pub fn from_name(name: &str) -> Option<Figure> {
        Figure::ALL.into_iter().find(|f| name == f.name() || name == f.field())
    }

    /// The figure's field in run.json's decode cells.
    pub fn field(self) -> &'static str {
        match self {
            Figure::TotalTokS => "total_tok_s",
            Figure::PerRequestTokS => "per_request_tok_s",
            Figure::TtftP50 => "ttft_ms_p50",
            Figure::TtftP90 => "ttft_ms_p90",
            Figure::TbtP50 => "tbt_ms_p50",
            Figure::TbtP99 => "tbt_ms_p99",
            Figure::TtfaP50 => "ttfa_ms_p50",
            Figure::TtfaP90 => "ttfa_ms_p90",
            Figure::TtftcP50 => "ttftc_ms_p50",
            Figure::TtftcP90 => "ttftc_ms_p90",
        }
    }

    /// The figure's value in a cell, read through the decode cell's figure table
    /// ([`sm_core::figures`]) by its field: one reading of each figure for every output.
    pub fn value(self, c: &DecodeCell) -> Option<f64> {
        DecodeCell::figure(self.field()).and_then(|f| f.of(c))
    }

    /// The requests a percentile of one sample per request needs before a change in it can be
    /// told at all (methodology §12.5): TTFT's (and TTFA's, TTFTC's), as many as its own interval
    /// needs (§12.2: 6 at p50, 36 at p90). The other figures rest on every token of the window and need no count.
    pub fn min_requests(self) -> Option<u64> {
        let p = match self {
            Figure::TtftP50 | Figure::TtfaP50 | Figure::TtftcP50 => 50.0,
            Figure::TtftP90 | Figure::TtfaP90 | Figure::TtftcP90 => 90.0,
            _ => return None,
        };
        sm_core::precision::quantile_min_samples(p).map(|n| n as u64)
    }

    /// Whether `c`'s figure rests on too few requests for a change in it to mean anything: a cell
    /// with intervals that has none for this figure, or one without intervals (an older run, an
    /// import) whose `requests` are fewer than [`Figure::min_requests`].
    pub fn too_few(self, c: &DecodeCell) -> bool {
        let Some(min) = self.min_requests() else { return false };
        match &c.ci {
            Some(ci) => self.interval(ci).is_none(),
            None => c.requests.is_some_and(|n| n < min),
        }
    }

    /// The figure's interval, read through the table of figures with intervals
    /// ([`sm_core::figures::intervals`]), as the site's checks read it.
    pub fn interval(self, ci: &CellIntervals) -> Option<Interval> {
        CellIntervals::figure(self.field()).and_then(|f| (f.interval)(ci))
    }
}

/// Whether a difference can be told from noise.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Significance {
    /// Beyond the 95 % intervals of both runs.
    Significant,
    /// Within them: noise, as far as these two runs can tell.
    WithinNoise,
    /// One of the figures has no interval (a run before speedmatrix.run/1.2, an imported file, or
    /// too few samples): nothing can be said, so it is never called significant.
    NoInterval,
}

impl Significance {
    /// The JSON output's word.
    pub fn name(self) -> &'static str {
        match self {
            Significance::Significant => "significant",
            Significance::WithinNoise => "within_noise",
            Significance::NoInterval => "no_interval",
        }
    }

    /// The mark after a difference, the same in the terminal, Markdown and on the site.
    pub fn mark(self) -> &'static str {
        match self {
            Significance::Significant => "*",
            Significance::WithinNoise => "",
            Significance::NoInterval => "?",
        }
    }

    /// What the mark means, for legends and tooltips.
    pub fn meaning(self) -> &'static str {
        match self {
            Significance::Significant => "significant: beyond the 95 % intervals of both runs",
            Significance::WithinNoise => "within the noise of the two runs",
            Significance::NoInterval => {
                "no interval: a run has none for this figure (recorded before speedmatrix.run/1.2, imported, \
                 or too few samples), so the difference cannot be told from noise"
            }
        }
    }
}

/// One figure of a cell both runs measured.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct FigureDiff {
    pub figure: Figure,
    pub a: f64,
    pub b: f64,
    /// `(b − a) / a` in %; `None` when `a` is 0 or either figure rests on too few requests.
    pub pct: Option<f64>,
    pub significance: Significance,
    /// Either figure rests on too few requests for a change to be told ([`Figure::too_few`]):
    /// no percentage is given.
    pub too_few: bool,
}

/// What became of a decode cell of either run.
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    /// Valid in both: the figures both have.
    Compared(Vec<FigureDiff>),
    /// Measured by both, not valid in at least one.
    NotValid {
        a: CellStatus,
        b: CellStatus,
    },
    OnlyInA(CellStatus),
    OnlyInB(CellStatus),
}

#[derive(Debug, Clone, PartialEq)]
pub struct CellComparison {
    /// A's context (tokens), or B's where A has none.
    pub context: u64,
    /// B's context where it differs from A's (paired within 1 %).
    pub b_context: Option<u64>,
    /// The context as every view names it: `256K (257,984)`, both runs' where they differ
    /// (`256K (257,984) ≈ 251K`, [`sm_core::context::shown_pair`]).
    pub label: String,
    pub concurrency: u32,
    /// The requests each run's cell rests on (`requests`: with a token in the window).
    pub requests: (Option<u64>, Option<u64>),
    pub outcome: Outcome,
}

impl CellComparison {
    /// Valid in A, measured by B and not valid there: a cell the change lost.
    pub fn lost(&self) -> Option<CellStatus> {
        match self.outcome {
            Outcome::NotValid { a: CellStatus::Valid, b } => Some(b),
            _ => None,
        }
    }
}

/// The capacity answers of one context that both runs give.
#[derive(Debug, Clone, PartialEq)]
pub struct CapacityPair {
    pub context: u64,
    pub b_context: Option<u64>,
    /// As [`CellComparison::label`].
    pub label: String,
    pub a: Capacity,
    pub b: Capacity,
}

/// Run B compared with the baseline A.
#[derive(Debug, Clone, PartialEq)]
pub struct Comparison {
    pub cells: Vec<CellComparison>,
    pub capacity: Vec<CapacityPair>,
}

impl Comparison {
    /// The figures a view of this comparison shows: every main figure, and a reasoning model's
    /// TTFA and a run with tools' TTFTC only where some cell compared them (a model that does not
    /// think has no TTFA, a run without tools no TTFTC).
    pub fn figures(&self) -> Vec<Figure> {
        let compared = |f: Figure| self.compared().any(|(_, d)| d.iter().any(|d| d.figure == f));
        let where_compared =
            |f: Figure| matches!(f, Figure::TtfaP50 | Figure::TtfaP90 | Figure::TtftcP50 | Figure::TtftcP90);
        Figure::ALL.into_iter().filter(|&f| !where_compared(f) || compared(f)).collect()
    }

    pub fn compared(&self) -> impl Iterator<Item = (&CellComparison, &[FigureDiff])> {
        self.cells.iter().filter_map(|c| match &c.outcome {
            Outcome::Compared(f) => Some((c, f.as_slice())),
            _ => None,
        })
    }

    /// Whether any compared figure had no interval (the legend then explains `?`).
    pub fn any(&self, s: Significance) -> bool {
        self.compared().any(|(_, f)| f.iter().any(|d| d.significance == s))
    }
}

/// One figure of two valid cells; `None` when either lacks it.
pub fn figure_diff(figure: Figure, a: &DecodeCell, b: &DecodeCell) -> Option<FigureDiff> {
    let (va, vb) = (figure.value(a)?, figure.value(b)?);
    let interval = |c: &DecodeCell| c.ci.as_ref().and_then(|ci| figure.interval(ci));
    let significance = match differ(va, interval(a), vb, interval(b)) {
        Some(true) => Significance::Significant,
        Some(false) => Significance::WithinNoise,
        None => Significance::NoInterval,
    };
    let too_few = figure.too_few(a) || figure.too_few(b);
    let pct = (va != 0.0 && !too_few).then(|| (vb - va) / va.abs() * 100.0);
    Some(FigureDiff { figure, a: va, b: vb, pct, significance, too_few })
}

/// One context across several runs: each run's tokens there (the nearest within 1 % of the
/// first run that has it), and its name on every run's label.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Aligned {
    /// `256K (257,984)`, or each run's name where they differ: `256K (257,984) ≈ 251K`.
    pub name: String,
    /// One per run, in the runs' order.
    pub at: Vec<Option<u64>>,
}

/// The contexts of several runs (`(tokens, label)` per run) lined up for a comparison: the first
/// run's, then each next run's paired with the rows so far ([`sm_core::context::pair`]) or added
/// as rows of their own; ascending by tokens.
pub fn align(runs: &[Vec<(u64, String)>]) -> Vec<Aligned> {
    let mut rows: Vec<(u64, Vec<Option<u64>>)> = Vec::new();
    for (i, run) in runs.iter().enumerate() {
        let anchors: Vec<u64> = rows.iter().map(|r| r.0).collect();
        let mine: Vec<u64> = run.iter().map(|c| c.0).collect();
        for (anchor, x) in sm_core::context::pair(&anchors, &mine) {
            let Some(x) = x else { continue };
            match anchor.and_then(|a| rows.iter_mut().find(|r| r.0 == a)) {
                Some(row) => row.1[i] = Some(x),
                None => {
                    let mut at = vec![None; runs.len()];
                    at[i] = Some(x);
                    rows.push((x, at));
                }
            }
        }
    }
    rows.sort_by_key(|r| r.0);
    rows.into_iter()
        .map(|(_, at)| {
            let mut names: Vec<String> = Vec::new();
            for (run, x) in runs.iter().zip(&at) {
                let Some(x) = x else { continue };
                let label = run.iter().find(|c| c.0 == *x).map_or("", |c| c.1.as_str());
                let name = sm_core::context::shown(label, *x);
                if !names.contains(&name) {
                    names.push(name);
                }
            }
            Aligned { name: names.join(" ≈ "), at }
        })
        .collect()
}

/// A run's decode cells by context, then concurrency (the first of each, as the report's
/// DecodeIndex keeps it).
fn index(r: &RunRecord) -> BTreeMap<u64, BTreeMap<u32, &DecodeCell>> {
    let mut m: BTreeMap<u64, BTreeMap<u32, &DecodeCell>> = BTreeMap::new();
    for c in &r.decode {
        m.entry(c.context).or_default().entry(c.concurrency).or_insert(c);
    }
    m
}

/// The name of a pair of contexts, from either run's label of it.
fn pair_name(a: Option<(&str, u64)>, b: Option<(&str, u64)>) -> String {
    let name = |(label, ctx): (&str, u64)| sm_core::context::shown(label, ctx);
    match (a.map(name), b.map(name)) {
        (Some(a), Some(b)) => sm_core::context::shown_pair(&a, &b),
        (Some(one), None) | (None, Some(one)) => one,
        (None, None) => String::new(),
    }
}

fn cell_outcome(ca: Option<&DecodeCell>, cb: Option<&DecodeCell>) -> Outcome {
    match (ca, cb) {
        (Some(ca), Some(cb)) if ca.status() == CellStatus::Valid && cb.status() == CellStatus::Valid => {
            Outcome::Compared(Figure::ALL.into_iter().filter_map(|f| figure_diff(f, ca, cb)).collect())
        }
        (Some(ca), Some(cb)) => Outcome::NotValid { a: ca.status(), b: cb.status() },
        (Some(ca), None) => Outcome::OnlyInA(ca.status()),
        (None, Some(cb)) => Outcome::OnlyInB(cb.status()),
        (None, None) => unreachable!("a cell comes from one of the runs"),
    }
}

/// B compared with A, cell by cell in context and concurrency order, contexts paired within 1 %.
pub fn compare(a: &RunRecord, b: &RunRecord) -> Comparison {
    let (ia, ib) = (index(a), index(b));
    let contexts = |i: &BTreeMap<u64, _>| i.keys().copied().collect::<Vec<u64>>();
    let mut cells = Vec::new();
    for (xa, xb) in sm_core::context::pair(&contexts(&ia), &contexts(&ib)) {
        let (ra, rb) = (xa.and_then(|x| ia.get(&x)), xb.and_then(|x| ib.get(&x)));
        let mut levels: Vec<u32> = ra.into_iter().chain(rb).flat_map(|r| r.keys().copied()).collect();
        levels.sort_unstable();
        levels.dedup();
        let (fa, fb) = (ra.and_then(|r| r.values().next()), rb.and_then(|r| r.values().next()));
        let label = pair_name(fa.map(|c| (c.label.as_str(), c.context)), fb.map(|c| (c.label.as_str(), c.context)));
        for level in levels {
            let (ca, cb) = (ra.and_then(|r| r.get(&level)).copied(), rb.and_then(|r| r.get(&level)).copied());
            cells.push(CellComparison {
                context: xa.or(xb).unwrap_or_default(),
                b_context: xb.filter(|&x| Some(x) != xa),
                label: label.clone(),
                concurrency: level,
                requests: (ca.and_then(|c| c.requests), cb.and_then(|c| c.requests)),
                outcome: cell_outcome(ca, cb),
            });
        }
    }
    let of = |r: &RunRecord| r.capacity.iter().map(|c| c.context).collect::<Vec<u64>>();
    let capacity = sm_core::context::pair(&of(a), &of(b))
        .into_iter()
        .filter_map(|(xa, xb)| {
            let (xa, xb) = (xa?, xb?);
            let ca = a.capacity.iter().find(|c| c.context == xa)?;
            let cb = b.capacity.iter().find(|c| c.context == xb)?;
            Some(CapacityPair {
                context: ca.context,
                b_context: (cb.context != ca.context).then_some(cb.context),
                label: pair_name(Some((&ca.label, ca.context)), Some((&cb.label, cb.context))),
                a: ca.clone(),
                b: cb.clone(),
            })
        })
        .collect();
    Comparison { cells, capacity }
}

#[cfg(test)]
mod tests;
