//! Two runs compared cell by cell (methodology §12): for each decode cell both runs measured
//! (matched by context and concurrency), the difference of each main figure in % of the baseline
//! and whether it is beyond the noise of both runs ([`sm_core::precision::differ`]); the cells only
//! one run has; and the capacity answers side by side. `speedmatrix compare` renders it as text,
//! Markdown or JSON ([`render`]) and gates on it ([`gate`]); the site's compare page shows the same
//! marks, from the same data.

pub mod gate;
pub mod render;

use std::collections::BTreeMap;

use sm_core::answer::Capacity;
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
}

impl Figure {
    pub const ALL: [Figure; 6] =
        [Figure::TotalTokS, Figure::PerRequestTokS, Figure::TtftP50, Figure::TtftP90, Figure::TbtP50, Figure::TbtP99];

    /// The name `--fail-on` and the JSON output use.
    pub fn name(self) -> &'static str {
        match self {
            Figure::TotalTokS => "total_tok_s",
            Figure::PerRequestTokS => "per_request_tok_s",
            Figure::TtftP50 => "ttft_p50",
            Figure::TtftP90 => "ttft_p90",
            Figure::TbtP50 => "tbt_p50",
            Figure::TbtP99 => "tbt_p99",
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
        }
    }

    pub fn value(self, c: &DecodeCell) -> Option<f64> {
        match self {
            Figure::TotalTokS => c.total_tok_s,
            Figure::PerRequestTokS => c.per_request_tok_s,
            Figure::TtftP50 => c.ttft_ms_p50,
            Figure::TtftP90 => c.ttft_ms_p90,
            Figure::TbtP50 => c.tbt_ms_p50,
            Figure::TbtP99 => c.tbt_ms_p99,
        }
    }

    pub fn interval(self, ci: &CellIntervals) -> Option<Interval> {
        match self {
            Figure::TotalTokS => ci.total_tok_s,
            Figure::PerRequestTokS => ci.per_request_tok_s,
            Figure::TtftP50 => ci.ttft_ms_p50,
            Figure::TtftP90 => ci.ttft_ms_p90,
            Figure::TbtP50 => ci.tbt_ms_p50,
            Figure::TbtP99 => ci.tbt_ms_p99,
        }
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
    /// `(b − a) / a` in %; `None` when `a` is 0.
    pub pct: Option<f64>,
    pub significance: Significance,
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
    pub context: u64,
    pub label: String,
    pub concurrency: u32,
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
    let pct = (va != 0.0).then(|| (vb - va) / va.abs() * 100.0);
    Some(FigureDiff { figure, a: va, b: vb, pct, significance })
}

/// B compared with A, cell by cell in context and concurrency order.
pub fn compare(a: &RunRecord, b: &RunRecord) -> Comparison {
    type Key = (u64, u32);
    fn index(r: &RunRecord) -> BTreeMap<Key, &DecodeCell> {
        // the first of a key, as the report's DecodeIndex keeps it
        let mut m = BTreeMap::new();
        for c in &r.decode {
            m.entry((c.context, c.concurrency)).or_insert(c);
        }
        m
    }
    let (ia, ib) = (index(a), index(b));
    let mut keys: Vec<Key> = ia.keys().chain(ib.keys()).copied().collect();
    keys.sort_unstable();
    keys.dedup();
    let cells = keys
        .into_iter()
        .map(|key| {
            let (ca, cb) = (ia.get(&key), ib.get(&key));
            let label = ca.or(cb).map(|c| c.label.clone()).unwrap_or_default();
            let outcome = match (ca, cb) {
                (Some(ca), Some(cb)) if ca.status() == CellStatus::Valid && cb.status() == CellStatus::Valid => {
                    Outcome::Compared(Figure::ALL.into_iter().filter_map(|f| figure_diff(f, ca, cb)).collect())
                }
                (Some(ca), Some(cb)) => Outcome::NotValid { a: ca.status(), b: cb.status() },
                (Some(ca), None) => Outcome::OnlyInA(ca.status()),
                (None, Some(cb)) => Outcome::OnlyInB(cb.status()),
                (None, None) => unreachable!("a key comes from one of the runs"),
            };
            CellComparison { context: key.0, label, concurrency: key.1, outcome }
        })
        .collect();
    let capacity = a
        .capacity
        .iter()
        .filter_map(|ca| {
            let cb = b.capacity.iter().find(|cb| cb.context == ca.context)?;
            Some(CapacityPair { context: ca.context, label: ca.label.clone(), a: ca.clone(), b: cb.clone() })
        })
        .collect();
    Comparison { cells, capacity }
}

#[cfg(test)]
#[path = "tests.rs"]
mod tests;
