//! Plain-text views of a record for the console: the decode matrix, the plan,
//! one line per cell.

use sm_core::context::shown;
use sm_core::plan::PlanSummary;
use sm_core::record::{CellStatus, DecodeCell, PlanKind, RunRecord};

/// The line printed when a prefill row finishes.
pub fn prefill_line(row: &sm_core::record::PrefillRow) -> String {
    match (row.status, row.prompt_tok_s, row.ttft_ms) {
        (CellStatus::Valid, Some(tps), Some(ttft)) => format!(
            "prefill {:>5}  {tps:>9.0} prompt tok/s  TTFT {ttft:>8.0} ms  prompt tokens {}  cached {}",
            shown(&row.label, row.context),
            row.prompt_tokens.map_or("?".into(), |n| n.to_string()),
            row.cached_tokens.map_or("?".into(), |n| n.to_string()),
        ),
        (status, _, _) => {
            format!(
                "prefill {:>5}  {}: {}",
                shown(&row.label, row.context),
                status.word(),
                row.reason.as_deref().unwrap_or("")
            )
        }
    }
}

/// The line printed when a cell finishes.
pub fn cell_line(cell: &DecodeCell) -> String {
    let head = format!("decode {:>5} × {:<4}", shown(&cell.label, cell.context), cell.concurrency);
    match cell.status() {
        CellStatus::Valid => {
            let mut s = format!(
                "{head} {:>9.1} tok/s total  {:>7.1} tok/s/request  TTFT {:>7.0} ms  TBT {:>6.2} ms  active {:>5.1}  tokens {}",
                cell.total_tok_s.unwrap_or(0.0),
                cell.per_request_tok_s.unwrap_or(0.0),
                cell.ttft_ms.p50.unwrap_or(0.0),
                cell.tbt_ms.p50.unwrap_or(0.0),
                cell.avg_active.unwrap_or(0.0),
                cell.output_tokens.unwrap_or(0),
            );
            if cell.repeats.len() > 1 {
                let agree = if cell.repeats_agree == Some(false) { ", which disagree" } else { "" };
                s.push_str(&format!("  (mean of {} repeats{agree})", cell.repeats.len()));
            }
            for w in &cell.warnings {
                s.push_str(&format!("\n    warning: {w}"));
            }
            s
        }
        status => format!("{head} {}: {}", status.word(), cell.reason.as_deref().unwrap_or("")),
    }
}

/// The `--dry-run` view: fitted contexts, over-capacity cells with reasons, an estimate.
pub fn plan(record: &RunRecord) -> String {
    let mut lines = Vec::new();
    let s = &record.settings;
    let named = |kind, c: &u64| shown(&sm_core::plan::planned_label(&record.plan, kind, *c), *c);
    let labels: Vec<String> = s.contexts.iter().map(|c| named(PlanKind::Decode, c)).collect();
    lines.push(format!("Decode contexts: {}", labels.join(", ")));
    let prefill: Vec<String> = s.prefill_contexts.iter().map(|c| named(PlanKind::Prefill, c)).collect();
    lines.push(format!("Prefill contexts: {}", prefill.join(", ")));
    lines.push(format!("Concurrency: {}", s.concurrency.iter().map(u32::to_string).collect::<Vec<_>>().join(", ")));
    let plan = PlanSummary::of(&record.plan);
    for p in &plan.skipped {
        lines.push(format!("Skipped {} {}: {}", p.kind, shown(&p.label, p.context), p.reason.as_deref().unwrap_or("")));
    }
    let (runnable, over) = (plan.decode_planned, &plan.over_capacity);
    for p in over {
        let reason = p.reason.as_deref().unwrap_or("");
        lines.push(format!("Over capacity {} × {}: {reason}", shown(&p.label, p.context), p.concurrency));
    }
    // Per cell: the window plus roughly 10 s of scout, ramp-up, readiness and drain; with
    // --precision, between the shortest and the longest window
    let per_cell = |window: f64| runnable as f64 * f64::from(s.repeats.unwrap_or(1)) * (window + 10.0) / 60.0;
    let est = match s.min_duration_s.filter(|_| s.precision_pct.is_some()) {
        Some(min) => format!("{:.0}–{:.0} min", per_cell(min), per_cell(s.duration_s)),
        None => format!("{:.0} min", per_cell(s.duration_s)),
    };
    let times = s.repeats.filter(|&n| n > 1).map_or(String::new(), |n| format!(", each {n} times"));
    lines.push(format!(
        "{} to measure{times}, {} over capacity; estimated {est} (plus prefill)",
        sm_core::units::plural(runnable as u64, "cell"),
        over.len(),
    ));
    lines.join("\n")
}
