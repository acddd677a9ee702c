//! Re-judging a stored run under another SLO (methodology §11.3), only where the figures the run
//! stored answer every bound exactly: no figure is read off another (a tok/s p10 is not 1000 over
//! the TBT p90, which percentiles between two requests do not keep), none is interpolated.

use std::fmt;

use crate::answer::{Capacity, capacities};
use crate::record::{CellStatus, DecodeCell, RunRecord};
use crate::slo::{Bound, BoundCheck, BoundName, Figure, Slo};

/// Where a run's bound figures came from, which says whether its judged bounds were measured.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Measured {
    /// Each cell's `slo_bounds` values are percentiles over its requests, as the run measured them.
    Requests,
    /// The cells were judged after the fact from their summaries: their `slo_bounds` were read
    /// off the summaries (a tok/s pNN from a TBT percentile), so only the summaries count.
    Summaries,
}

/// A bound the run's stored figures cannot answer exactly, and what the run did store.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unanswerable {
    /// The bound's key, e.g. `ttft_p90`.
    pub bound: String,
    /// The percentiles of that figure a cell stored, e.g. `["p50"]`.
    pub stored: Vec<String>,
}

impl fmt::Display for Unanswerable {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.stored.as_slice() {
            [] => write!(f, "cannot answer {} (the run stored no such figure)", self.bound),
            [one] => write!(f, "cannot answer {} (the run stored {one} only)", self.bound),
            many => write!(f, "cannot answer {} (the run stored {} only)", self.bound, many.join(", ")),
        }
    }
}

/// The figures of `figure` that `cell` stored exactly, by percentile.
fn stored(cell: &DecodeCell, figure: Figure, measured: Measured) -> Vec<(u8, f64)> {
    let summary: Vec<(u8, Option<f64>)> = match figure {
        Figure::Ttft => vec![(50, cell.ttft_ms.p50), (90, cell.ttft_ms.p90), (99, cell.ttft_ms.p99)],
        // stored only where a request of the cell thought: not read off TTFT (an older record's
        // TTFT may be a thinking token's); its percentiles are over the requests that answered,
        // so, as TTFTC's, the bound's figure only where every ended request answered
        Figure::Ttfa if cell.no_answer.is_none_or(|n| n == 0) => {
            vec![(50, cell.ttfa_ms.p50), (90, cell.ttfa_ms.p90), (99, cell.ttfa_ms.p99)]
        }
        Figure::Ttfa => vec![],
        // stored only where the cell's requests carried tools; its percentiles are over the
        // requests that called, so they are the bound's figure only where every completed request
        // called (the bound counts one that never called as waiting forever)
        Figure::Ttftc if cell.no_tool_call.is_none_or(|n| n == 0) => {
            vec![(50, cell.ttftc_ms.p50), (90, cell.ttftc_ms.p90), (99, cell.ttftc_ms.p99)]
        }
        Figure::Ttftc => vec![],
        Figure::Tbt => vec![(50, cell.tbt_ms.p50), (90, cell.tbt_ms.p90), (99, cell.tbt_ms.p99)],
        // the cell's per-request tok/s is the median of its requests' own speeds
        Figure::TokS => vec![(50, cell.per_request_tok_s)],
    };
    let mut out: Vec<(u8, f64)> = summary.into_iter().filter_map(|(p, v)| v.map(|v| (p, v))).collect();
    if measured == Measured::Requests {
        for check in &cell.slo_bounds {
            if let (BoundName::Key(k), Some(v)) = (&check.bound, check.value)
                && k.figure == figure
                && !out.iter().any(|(p, _)| *p == k.percentile)
            {
                out.push((k.percentile, v));
            }
        }
    }
    out.sort_by_key(|(p, _)| *p);
    out
}

/// The figure at `bound`'s percentile that `cell` stored exactly, or what it stored instead.
fn value(cell: &DecodeCell, bound: &Bound, measured: Measured) -> Result<f64, Unanswerable> {
    let have = stored(cell, bound.figure, measured);
    have.iter().find(|(p, _)| *p == bound.percentile).map(|(_, v)| *v).ok_or_else(|| Unanswerable {
        bound: bound.key().to_string(),
        stored: have.iter().map(|(p, _)| format!("p{p}")).collect(),
    })
}

/// `record`'s capacity answer under `slo`, from its valid cells' stored figures, by the same
/// [`capacities`] the run used; `Err` names the first bound a valid cell cannot answer exactly.
pub fn rejudge(record: &RunRecord, slo: &Slo, measured: Measured) -> Result<Vec<Capacity>, Unanswerable> {
    let mut judged = record.clone();
    for cell in judged.decode.iter_mut().filter(|c| c.status() == CellStatus::Valid) {
        let bounds = slo
            .bounds
            .iter()
            .map(|b| {
                let v = value(cell, b, measured)?;
                Ok(BoundCheck { bound: b.key().into(), limit: b.limit, value: Some(v), holds: b.holds(v) })
            })
            .collect::<Result<Vec<_>, _>>()?;
        cell.slo_met = Some(bounds.iter().all(|b| b.holds));
        cell.slo_bounds = bounds;
    }
    judged.settings.slo = Some(slo.clone());
    Ok(capacities(&judged))
}

#[cfg(test)]
mod tests;
