//! The capacity answer (methodology §11.3): per decode context, the most simultaneous users whose
//! cell meets the SLO, what stopped it from being more, and which level a capacity search
//! measures next. Pure functions over a record's cells.

use crate::Tokens;
use crate::capacity::{CapacityRule, Limits, over_capacity_reason};
pub use crate::capacity_answer::{BoundedBy, Capacity};
use crate::record::{CellStatus, DecodeCell, RunRecord};
use crate::slo::{BoundName, Slo, SummaryFigures};

/// What the server can hold for one context: the largest concurrency that fits, and why not one
/// more. `None` when neither the KV budget nor `max_num_seqs` is known.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FitLimit {
    pub max: u32,
    pub by: ServerLimit,
}

/// The two limits of the server that can bound the answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ServerLimit {
    KvCache,
    MaxNumSeqs,
}

impl From<ServerLimit> for BoundedBy {
    fn from(b: ServerLimit) -> BoundedBy {
        match b {
            ServerLimit::KvCache => BoundedBy::KvCache,
            ServerLimit::MaxNumSeqs => BoundedBy::MaxNumSeqs,
        }
    }
}

/// The largest concurrency the plan's over-capacity rule lets run at `ctx`.
pub fn fit_limit(rule: CapacityRule, limits: &Limits, ctx: Tokens, max_tokens: Tokens) -> Option<FitLimit> {
    if limits.kv_budget.is_none() && limits.max_num_seqs.is_none() {
        return None;
    }
    let fits = |c: u32| over_capacity_reason(rule, limits, ctx, max_tokens, c).is_none();
    if !fits(1) {
        let by = if limits.max_num_seqs == Some(0) { ServerLimit::MaxNumSeqs } else { ServerLimit::KvCache };
        return Some(FitLimit { max: 0, by });
    }
    // the rule is monotone in the concurrency: bisect for the last level that fits
    let (mut lo, mut hi) = (1u32, limits.max_num_seqs.map_or(1 << 24, |m| m.saturating_add(1)));
    while hi - lo > 1 {
        let mid = lo + (hi - lo) / 2;
        if fits(mid) { lo = mid } else { hi = mid }
    }
    let by = if limits.max_num_seqs == Some(lo) { ServerLimit::MaxNumSeqs } else { ServerLimit::KvCache };
    Some(FitLimit { max: lo, by })
}

/// A level of one context as the answer sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Level {
    Pass,
    /// Valid, but this bound failed.
    Fail(BoundName),
    /// Over capacity: never run.
    Unfit,
    /// Error, loop, skipped, or valid without a judgement.
    Unmeasured,
}

/// How a decode cell counts for the answer.
pub fn level(cell: &DecodeCell) -> Level {
    match cell.status() {
        CellStatus::Valid => match cell.slo_met {
            Some(true) => Level::Pass,
            Some(false) => {
                Level::Fail(cell.slo_bounds.iter().find(|b| !b.holds).map_or(BoundName::Whole, |b| b.bound.clone()))
            }
            None => Level::Unmeasured,
        },
        CellStatus::OverCapacity => Level::Unfit,
        CellStatus::Error | CellStatus::Loop | CellStatus::Skipped => Level::Unmeasured,
    }
}

/// Where a context's levels leave the answer: the last passing level below the first that did
/// not pass, and that level with what it was.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Bracket {
    /// The largest level passing with every level below it passing too (0: none).
    pub pass: u32,
    /// The first measured level above `pass` that did not pass.
    pub stop: Option<(u32, Level)>,
}

/// Brackets the answer from `(concurrency, level)` pairs in any order.
pub fn bracket(levels: &[(u32, Level)]) -> Bracket {
    let mut sorted: Vec<&(u32, Level)> = levels.iter().collect();
    sorted.sort_by_key(|(c, _)| *c);
    let mut pass = 0;
    for (c, level) in sorted {
        if *level == Level::Pass {
            pass = *c;
        } else {
            return Bracket { pass, stop: Some((*c, level.clone())) };
        }
    }
    Bracket { pass, stop: None }
}

/// The answer for one context from its levels and what the server can hold.
pub fn answer(levels: &[(u32, Level)], fit: Option<FitLimit>) -> (u32, BoundedBy, Option<u32>) {
    let b = bracket(levels);
    let lowest = levels.iter().map(|(c, _)| *c).min();
    let bounded_by = match (&b.stop, fit) {
        (Some((_, Level::Fail(_))), _) if b.pass == 0 && lowest == Some(1) => BoundedBy::None,
        (Some((_, Level::Fail(bound))), _) => BoundedBy::Slo(bound.clone()),
        (Some((_, Level::Unmeasured)), _) => BoundedBy::Unmeasured,
        (Some((_, Level::Unfit)), Some(f)) => f.by.into(),
        (Some((_, Level::Unfit)), None) => BoundedBy::KvCache,
        (None, Some(f)) if b.pass >= f.max => f.by.into(),
        (None, _) => BoundedBy::MatrixTop,
        (Some((_, Level::Pass)), _) => unreachable!("a bracket never stops at a passing level"),
    };
    let failed = b.stop.as_ref().filter(|(_, l)| matches!(l, Level::Fail(_) | Level::Unmeasured)).map(|(c, _)| *c);
    (b.pass, bounded_by, failed)
}

/// How close a capacity search gets: the answer is known once the passing and the failing level
/// are at most `max(1, 5 % of the passing level)` apart.
pub fn tolerance(pass: u32) -> u32 {
    (pass / 20).max(1)
}

/// The next level a capacity search measures for one context, or `None` when the answer is known
/// to within [`tolerance`] (or cannot be refined: the next level was unmeasurable). `top` is the
/// matrix's largest level: without a known limit the upward search stops at 8 × `top`.
pub fn next_level(levels: &[(u32, Level)], fit: Option<FitLimit>, top: u32) -> Option<u32> {
    let b = bracket(levels);
    let ceiling = match (&b.stop, fit) {
        (_, Some(f)) => f.max,
        (Some((c, Level::Unfit)), None) => c - 1,
        _ => top.saturating_mul(UPWARD_FACTOR),
    };
    match &b.stop {
        Some((_, Level::Unmeasured | Level::Pass)) => None,
        Some((c, Level::Fail(_))) => {
            let hi = (*c).min(ceiling.saturating_add(1));
            (hi > b.pass + tolerance(b.pass)).then(|| b.pass + (hi - b.pass) / 2)
        }
        // no level failed yet: double towards what fits rather than jump to its middle
        Some((_, Level::Unfit)) | None => {
            (b.pass < ceiling).then(|| b.pass.saturating_mul(2).clamp(b.pass + 1, ceiling))
        }
    }
}

/// Without a known KV budget or `max_num_seqs`, the upward search goes no further than this many
/// times the matrix's largest level.
pub const UPWARD_FACTOR: u32 = 8;

/// The capacity answer of every decode context of a record, from its judged cells.
pub fn capacities(record: &RunRecord) -> Vec<Capacity> {
    let limits = record.limits();
    let cost = record.settings.cost_per_hour_usd;
    record
        .settings
        .contexts
        .iter()
        .filter_map(|&ctx| {
            let cells: Vec<&DecodeCell> = record.decode.iter().filter(|c| c.context == ctx).collect();
            let label = cells.first()?.label.clone();
            let levels: Vec<(u32, Level)> = cells.iter().map(|c| (c.concurrency, level(c))).collect();
            let fit =
                fit_limit(record.settings.capacity_rule, &limits, Tokens(ctx), Tokens(record.settings.max_tokens));
            let (max_users, bounded_by, failed_cell) = answer(&levels, fit);
            let cell = (max_users > 0).then_some(max_users);
            let proving = cell.and_then(|c| record.decode_cell(ctx, c));
            Some(Capacity {
                context: ctx,
                label,
                max_users,
                bounded_by,
                cell,
                failed_cell,
                fit_limit: fit.map(|f| f.max),
                usd_per_user_hour: cost.filter(|_| max_users > 0).map(|usd| usd / f64::from(max_users)),
                usd_per_million_tokens: proving.and_then(|c| c.usd_per_million_tokens),
            })
        })
        .collect()
}

/// A cell's summary figures, for judging it without its requests.
pub fn summary(cell: &DecodeCell) -> SummaryFigures {
    SummaryFigures {
        per_request_tok_s: cell.per_request_tok_s,
        ttft_ms: [cell.ttft_ms.p50, cell.ttft_ms.p90, cell.ttft_ms.p99],
        // the stored TTFA is over the requests that answered: the bound's figure only where all did
        ttfa_ms: match cell.no_answer {
            Some(n) if n > 0 => [None; 3],
            _ => [cell.ttfa_ms.p50, cell.ttfa_ms.p90, cell.ttfa_ms.p99],
        },
        // the stored TTFTC is over the requests that called: the bound's figure only where all did
        ttftc_ms: match cell.no_tool_call {
            Some(n) if n > 0 => [None; 3],
            _ => [cell.ttftc_ms.p50, cell.ttftc_ms.p90, cell.ttftc_ms.p99],
        },
        tbt_ms: [cell.tbt_ms.p50, cell.tbt_ms.p90, cell.tbt_ms.p99],
    }
}

/// For a record whose cells were not judged when they were measured (an imported file, a run
/// recorded before SLOs): judges every valid cell from its summary figures against `slo`, records
/// the SLO, and computes `capacity[]`. A record that was judged when measured is left as it is.
/// `Err` names the bounds the summaries cannot give.
pub fn judge_from_summaries(record: &mut RunRecord, slo: &Slo) -> Result<(), Vec<String>> {
    if record.settings.slo.is_some() {
        return Ok(());
    }
    let missing = slo.unjudgeable_from_summary();
    if !missing.is_empty() {
        return Err(missing);
    }
    for cell in record.decode.iter_mut().filter(|c| c.status() == CellStatus::Valid) {
        // a cell whose summary lacks a figure stays unjudged: the answer stops there
        if let Ok(j) = slo.judge_summary(&summary(cell)) {
            cell.slo_met = Some(j.met);
            cell.slo_bounds = j.bounds;
        }
    }
    record.settings.slo = Some(slo.clone());
    record.capacity = capacities(record);
    Ok(())
}

/// Prices every valid cell at the record's `cost_per_hour_usd` (none without it) and computes
/// `capacity[]` again.
pub fn price(record: &mut RunRecord) {
    let cost = record.settings.cost_per_hour_usd;
    for cell in record.decode.iter_mut().filter(|c| c.status() == CellStatus::Valid) {
        cell.usd_per_million_tokens = cost.and_then(|usd| usd_per_million_tokens(usd, cell.total_tok_s.unwrap_or(0.0)));
    }
    record.capacity = capacities(record);
}

/// `--cost-per-hour` over the output tokens of an hour at `total_tok_s`, USD per million, to
/// 1/100 of a cent.
pub fn usd_per_million_tokens(usd_per_hour: f64, total_tok_s: f64) -> Option<f64> {
    (total_tok_s > 0.0).then(|| (usd_per_hour / (total_tok_s * 3600.0) * 1e10).round() / 10_000.0)
}

#[cfg(test)]
mod tests;
