//! `--repeats N` (methodology §12.4): the matrix is measured in N interleaved passes, so that a
//! slow drift of the server shows as repeats that disagree rather than as one smooth matrix. Each
//! pass after the first folds its measurement into the cell already in the record: the main
//! figures become the repeats' means, their intervals cover both the repeats' own noise and their
//! spread, and the cell is flagged when the repeats disagree beyond their intervals.

use sm_core::answer;
use sm_core::precision::{self, Interval};
use sm_core::record::{CellIntervals, CellStatus, DecodeCell, Repeat};
use sm_core::slo::Slo;

use super::round3;

/// How many times the record's cell has been measured (a cell measured once keeps no repeats).
pub(super) fn measured(cell: &DecodeCell) -> u32 {
    cell.repeats.len().max(1) as u32
}

/// Whether pass `pass` (1-based) still has to measure a cell the record holds: only valid cells
/// are repeated — a cell that failed is retried with `--retry-failed`, not averaged.
pub(super) fn wanted(cell: Option<&DecodeCell>, pass: u32) -> bool {
    match cell {
        None => true,
        Some(c) => pass > 1 && !c.searched && c.status() == CellStatus::Valid && measured(c) < pass,
    }
}

/// One measurement's main figures.
fn repeat_of(dc: &DecodeCell) -> Repeat {
    Repeat {
        total_tok_s: dc.total_tok_s,
        per_request_tok_s: dc.per_request_tok_s,
        ttft_ms_p50: dc.ttft_ms.p50,
        ttft_ms_p90: dc.ttft_ms.p90,
        tbt_ms_p50: dc.tbt_ms.p50,
        tbt_ms_p99: dc.tbt_ms.p99,
        measured_s: dc.measured_s,
        goodput_tok_s: dc.goodput_tok_s,
        // a repeat keeps the figures it averages, and only their intervals
        ci: dc.ci.map(|ci| CellIntervals {
            ttfa_ms_p50: None,
            ttfa_ms_p90: None,
            ttftc_ms_p50: None,
            ttftc_ms_p90: None,
            ..ci
        }),
        reason: (dc.status() != CellStatus::Valid)
            .then(|| dc.reason.clone().unwrap_or_else(|| dc.status().word().to_string())),
    }
}

/// Folds `new`, another measurement of `cell`, into it.
pub(super) fn merge(cell: &mut DecodeCell, new: &DecodeCell, slo: &Slo, cost_per_hour: Option<f64>) {
    // the flag said for the repeats so far, found by what the cell says (`repeats_agree`) and
    // not by reading its warnings: it is replaced by the one for all the repeats below
    let stale = disagree_warning(cell);
    if cell.repeats.is_empty() {
        cell.repeats.push(repeat_of(cell));
    }
    cell.repeats.push(repeat_of(new));
    let n = cell.repeats.len();
    match &cell.repeats[n - 1].reason {
        Some(reason) => cell.warnings.push(format!("repeat {n} has no figures: {reason}")),
        None => cell.warnings.extend(new.warnings.iter().map(|w| format!("repeat {n}: {w}"))),
    }
    combine(cell, slo, cost_per_hour);
    cell.warnings.retain(|w| Some(w) != stale.as_ref());
    cell.warnings.extend(disagree_warning(cell));
}

/// One main figure across the repeats that have it: its mean and interval, and each repeat's
/// value with its interval (for the agreement test).
struct Across {
    mean: f64,
    ci: Option<Interval>,
    each: Vec<(f64, Interval)>,
}

fn across(repeats: &[Repeat], figure: impl Fn(&Repeat) -> (Option<f64>, Option<Interval>)) -> Option<Across> {
    let pairs: Vec<(f64, Option<Interval>)> =
        repeats.iter().map(&figure).filter_map(|(v, i)| v.map(|v| (v, i))).collect();
    let values: Vec<f64> = pairs.iter().map(|p| p.0).collect();
    if values.is_empty() {
        return None;
    }
    let mean = values.iter().sum::<f64>() / values.len() as f64;
    let each: Vec<(f64, Interval)> = pairs.iter().filter_map(|&(v, i)| i.map(|i| (v, i))).collect();
    // the repeats as independent estimates of one mean: √Σh² / n, with each repeat's wider side
    let pooled = (each.len() == pairs.len()).then(|| {
        let h2: f64 = each.iter().map(|(v, i)| (i.hi - v).max(v - i.lo).powi(2)).sum();
        let h = h2.sqrt() / pairs.len() as f64;
        Interval { lo: mean - h, hi: mean + h }
    });
    // the repeats' own spread, which catches what no single window sees (drift between passes)
    let spread = precision::mean_interval(&values).map(|(_, i)| i);
    let ci = match (pooled, spread) {
        (Some(a), Some(b)) => Some(Interval { lo: a.lo.min(b.lo), hi: a.hi.max(b.hi) }),
        (a, b) => a.or(b),
    };
    Some(Across { mean, ci: ci.map(|i| i.rounded(3)), each })
}

/// One main figure of a repeat, with its interval.
type Pick<'a> = &'a dyn Fn(&Repeat) -> (Option<f64>, Option<Interval>);

/// The cell's main figures, intervals, agreement and judgement from its repeats. The figures a
/// repeat does not keep (TTFT p99, TBT p90, chunk gaps, …) stay those of the first measurement.
fn combine(cell: &mut DecodeCell, slo: &Slo, cost_per_hour: Option<f64>) {
    let ci = |r: &Repeat| r.ci.unwrap_or_default();
    let figures: [Pick; 6] = [
        &|r| (r.total_tok_s, ci(r).total_tok_s),
        &|r| (r.per_request_tok_s, ci(r).per_request_tok_s),
        &|r| (r.ttft_ms_p50, ci(r).ttft_ms_p50),
        &|r| (r.ttft_ms_p90, ci(r).ttft_ms_p90),
        &|r| (r.tbt_ms_p50, ci(r).tbt_ms_p50),
        &|r| (r.tbt_ms_p99, ci(r).tbt_ms_p99),
    ];
    let [total, per_request, ttft50, ttft90, tbt50, tbt99] = figures.map(|f| across(&cell.repeats, f));
    let mean = |a: &Option<Across>| a.as_ref().map(|a| round3(a.mean));
    let interval = |a: &Option<Across>| a.as_ref().and_then(|a| a.ci);
    (cell.total_tok_s, cell.per_request_tok_s) = (mean(&total), mean(&per_request));
    (cell.ttft_ms.p50, cell.ttft_ms.p90) = (mean(&ttft50), mean(&ttft90));
    (cell.tbt_ms.p50, cell.tbt_ms.p99) = (mean(&tbt50), mean(&tbt99));
    cell.ci = Some(CellIntervals {
        total_tok_s: interval(&total),
        per_request_tok_s: interval(&per_request),
        ttft_ms_p50: interval(&ttft50),
        ttft_ms_p90: interval(&ttft90),
        tbt_ms_p50: interval(&tbt50),
        tbt_ms_p99: interval(&tbt99),
        // TTFA and TTFTC are not figures repeats average: their intervals are each measurement's
        ..CellIntervals::default()
    });
    cell.measured_s = Some(round3(cell.repeats.iter().filter_map(|r| r.measured_s).sum()));
    let goodput: Vec<f64> = cell.repeats.iter().filter_map(|r| r.goodput_tok_s).collect();
    cell.goodput_tok_s = (!goodput.is_empty()).then(|| round3(goodput.iter().sum::<f64>() / goodput.len() as f64));
    if let Ok(j) = slo.judge_summary(&answer::summary(cell)) {
        (cell.slo_met, cell.slo_bounds) = (Some(j.met), j.bounds);
    }
    cell.usd_per_million_tokens =
        cost_per_hour.and_then(|usd| answer::usd_per_million_tokens(usd, cell.total_tok_s.unwrap_or(0.0)));
    let verdicts = [&total, &tbt50].map(|a| a.as_ref().and_then(|a| precision::repeats_agree(&a.each)));
    cell.repeats_agree = verdicts.iter().flatten().copied().reduce(|a, b| a && b);
}

/// The warning a cell whose repeats disagree carries, made from its repeats; none when they agree.
fn disagree_warning(cell: &DecodeCell) -> Option<String> {
    if cell.repeats_agree != Some(false) {
        return None;
    }
    let shown: Vec<String> =
        cell.repeats.iter().map(|r| r.total_tok_s.map_or("–".to_string(), |v| format!("{v:.0}"))).collect();
    Some(format!(
        "{DISAGREE} (total tok/s {}): the server was not stationary — thermal throttling, background load or another client?",
        shown.join(", ")
    ))
}

const DISAGREE: &str = "the repeats disagree beyond their intervals";

#[cfg(test)]
mod tests {
    use super::*;
    use sm_core::record::Percentiles;

    fn measured_cell(total: f64, tbt: f64, h_pct: f64) -> DecodeCell {
        let i = |v: f64| Some(Interval { lo: v * (1.0 - h_pct / 100.0), hi: v * (1.0 + h_pct / 100.0) });
        DecodeCell {
            status: Some(CellStatus::Valid),
            total_tok_s: Some(total),
            per_request_tok_s: Some(1000.0 / tbt),
            tbt_ms: Percentiles { p50: Some(tbt), p99: Some(tbt * 1.2), ..Percentiles::default() },
            measured_s: Some(5.0),
            ci: Some(CellIntervals { total_tok_s: i(total), tbt_ms_p50: i(tbt), ..CellIntervals::default() }),
            ..DecodeCell::default()
        }
    }

    #[test]
    fn steady_repeats_average_and_agree() {
        let slo: Slo = "tok_s>=50".parse().unwrap();
        let mut cell = measured_cell(1000.0, 10.0, 1.0);
        merge(&mut cell, &measured_cell(1004.0, 10.02, 1.0), &slo, Some(3.6));
        merge(&mut cell, &measured_cell(998.0, 9.99, 1.0), &slo, Some(3.6));
        assert_eq!(cell.repeats.len(), 3);
        assert_eq!(measured(&cell), 3);
        assert!((cell.total_tok_s.unwrap() - 1000.667).abs() < 1e-9);
        assert_eq!(cell.measured_s, Some(15.0));
        assert_eq!(cell.repeats_agree, Some(true));
        let ci = cell.ci.unwrap().total_tok_s.unwrap();
        assert!(ci.contains(1000.667) && ci.hi - ci.lo < 20.0, "{ci:?}");
        assert_eq!(cell.slo_met, Some(true), "judged again on the means");
        assert_eq!(cell.usd_per_million_tokens, answer::usd_per_million_tokens(3.6, 1000.667));
        assert!(cell.warnings.is_empty(), "{:?}", cell.warnings);
    }

    #[test]
    fn drifting_repeats_are_flagged_and_their_interval_covers_the_spread() {
        let slo = Slo::default();
        let mut cell = measured_cell(1000.0, 10.0, 0.5);
        merge(&mut cell, &measured_cell(950.0, 10.5, 0.5), &slo, None);
        merge(&mut cell, &measured_cell(900.0, 11.0, 0.5), &slo, None);
        assert_eq!(cell.repeats_agree, Some(false));
        assert!(
            cell.warnings.iter().any(|w| w.starts_with(DISAGREE) && w.contains("1000, 950, 900")),
            "{:?}",
            cell.warnings
        );
        let ci = cell.ci.unwrap().total_tok_s.unwrap();
        assert!(ci.lo < 900.0 && ci.hi > 1000.0, "the t-interval of the spread: {ci:?}");
        // a fourth, steady again: the flag is said once
        merge(&mut cell, &measured_cell(900.0, 11.0, 0.5), &slo, None);
        assert_eq!(cell.warnings.iter().filter(|w| w.starts_with(DISAGREE)).count(), 1);
    }

    #[test]
    fn a_failed_repeat_is_said_and_not_averaged() {
        let slo = Slo::default();
        let mut cell = measured_cell(1000.0, 10.0, 1.0);
        let failed =
            DecodeCell { status: Some(CellStatus::Error), reason: Some("HTTP 503".into()), ..DecodeCell::default() };
        merge(&mut cell, &failed, &slo, None);
        assert_eq!(cell.total_tok_s, Some(1000.0));
        assert_eq!(cell.repeats_agree, None, "one repeat with figures");
        assert!(cell.warnings.iter().any(|w| w == "repeat 2 has no figures: HTTP 503"));
        assert_eq!(measured(&cell), 2, "a failed repeat still counts as done: a resume does not loop on it");
    }

    #[test]
    fn which_cells_a_pass_measures() {
        let valid = measured_cell(1.0, 1.0, 1.0);
        assert!(wanted(None, 1) && wanted(None, 2));
        assert!(!wanted(Some(&valid), 1));
        assert!(wanted(Some(&valid), 2));
        let err = DecodeCell { status: Some(CellStatus::Error), ..DecodeCell::default() };
        assert!(!wanted(Some(&err), 2), "a failed cell is not repeated");
        let searched = DecodeCell { searched: true, ..valid.clone() };
        assert!(!wanted(Some(&searched), 2));
    }
}
