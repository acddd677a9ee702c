//! The reference tool's Burst/E2E matrix (`--run-burst`: `burst_results`, cells whose
//! `benchmark_mode` is `burst-e2e`; reference-tool study §2.12 and §5.1) → `phases.burst`
//! (methodology §13.2). A figure the file does not carry stays missing: the send spread and the
//! scheduled time never, the maxima only where the file kept its request samples.

use serde_json::Value;
use sm_core::Tokens;
use sm_core::context::label;
use sm_core::phases::burst::{Burst, BurstPhase};
use sm_core::record::{CellStatus, Percentiles};

use super::value::{bool_at, f64_at, ms_at, str_at, u64_at};

/// The largest burst matrix an imported file may carry, as for the decode grid.
const MAX_BURSTS: usize = 4_096;

/// The burst phase of a reference-tool file, `None` when it has no Burst/E2E cell.
pub fn phase(bench: &Value, md: &Value, tool: &str) -> Option<BurstPhase> {
    let from_results = bench.get("results").and_then(Value::as_array).into_iter().flatten();
    let from_burst = bench.get("burst_results").and_then(Value::as_array).into_iter().flatten();
    let mut bursts: Vec<Burst> = Vec::new();
    let cells = from_burst.chain(from_results.filter(|r| str_at(r, "benchmark_mode") == Some("burst-e2e")));
    for b in cells.filter_map(burst).take(MAX_BURSTS) {
        // a cell both lists carry is one measurement, not two rounds
        if !bursts.iter().any(|o| o.context == b.context && o.concurrency == b.concurrency) {
            bursts.push(b);
        }
    }
    if bursts.is_empty() {
        return None;
    }
    let version = str_at(md, "version").unwrap_or("unknown");
    Some(BurstPhase {
        max_tokens: u64_at(md, "max_tokens").unwrap_or(0),
        ignore_eos: bool_at(md, "ignore_eos").unwrap_or(true),
        rounds: 1,
        imported_from: Some(format!("{tool} {version} (Burst/E2E matrix)")),
        bursts,
    })
}

/// The reference tool's sentinels of `aggregate_tps`, as for decode cells.
fn status_of(tps: Option<f64>, failure: Option<&str>, looped: bool) -> Option<(CellStatus, String)> {
    let text = |t: &str| failure.unwrap_or(t).to_string();
    match tps {
        Some(-1.0) => Some((CellStatus::OverCapacity, text("over capacity (KV cache)"))),
        Some(-2.0) => Some((CellStatus::Skipped, text("skipped by the user"))),
        Some(-3.0) => Some((CellStatus::Loop, text("loop: a stream repeated its text"))),
        Some(t) if t < 0.0 => Some((CellStatus::Error, text("error"))),
        _ if looped => Some((CellStatus::Loop, text("loop: a stream repeated its text"))),
        _ => failure.map(|f| (CellStatus::Error, f.to_string())),
    }
}

fn burst(r: &Value) -> Option<Burst> {
    let context = u64_at(r, "context_tokens")?;
    let concurrency = u32::try_from(u64_at(r, "concurrency")?).ok().filter(|c| *c > 0)?;
    let base =
        Burst { context: Some(context), label: label(Tokens(context)), concurrency, round: 1, ..Burst::default() };
    let tps = f64_at(r, "aggregate_tps");
    if let Some((status, reason)) =
        status_of(tps, str_at(r, "failure_reason"), bool_at(r, "loop_detected") == Some(true))
    {
        let reason =
            str_at(r, "timeout_reason").filter(|_| status == CellStatus::OverCapacity).map_or(reason, str::to_string);
        return Some(Burst { status, reason: Some(reason), ..base });
    }
    let requests = u64_at(r, "request_count_target").filter(|n| *n > 0).or_else(|| u64_at(r, "request_count"))?;
    let completed = u64_at(r, "completed_request_count").unwrap_or(0).min(requests);
    let samples: Vec<&Value> = r.get("request_samples").and_then(Value::as_array).into_iter().flatten().collect();
    // the reference tool's samples: latency only of completed requests, 0 otherwise
    let max_of = |key: &str| {
        samples
            .iter()
            .filter_map(|s| ms_at(s, key))
            .filter(|v| *v > 0.0)
            .fold(None, |m: Option<f64>, v| Some(m.map_or(v, |m| m.max(v))))
    };
    let failed = requests - completed;
    Some(Burst {
        status: if failed == 0 { CellStatus::Valid } else { CellStatus::Error },
        reason: (failed > 0).then(|| format!("{failed} of {requests} requests did not complete")),
        requests,
        completed,
        failed,
        e2e_ms: Percentiles {
            p50: ms_at(r, "request_latency_p50"),
            p90: ms_at(r, "request_latency_p90"),
            max: max_of("latency"),
            ..Percentiles::default()
        },
        // the reference tool's profiling wall time: from the cell's start to its last completion
        last_completion_ms: ms_at(r, "measurement_wall_seconds"),
        ttft_ms: Percentiles {
            p50: ms_at(r, "ttft_p50"),
            p90: ms_at(r, "ttft_p90"),
            max: max_of("ttft"),
            ..Percentiles::default()
        },
        output_tokens: u64_at(r, "client_output_tokens").or_else(|| u64_at(r, "total_tokens")),
        total_tok_s: tps.filter(|t| *t >= 0.0),
        ..base
    })
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn a_cell_maps_its_figures_and_leaves_the_rest_missing() {
        let r = json!({"context_tokens": 1024, "concurrency": 2, "benchmark_mode": "burst-e2e",
            "aggregate_tps": 150.0, "request_count_target": 10, "completed_request_count": 9,
            "request_latency_p50": 1.5, "request_latency_p90": 2.0, "ttft_p50": 0.1, "ttft_p90": 0.2,
            "measurement_wall_seconds": 6.0, "client_output_tokens": 900,
            "request_samples": [{"latency": 2.5, "ttft": 0.3}, {"latency": 0.0, "ttft": 0.25}]});
        let b = burst(&r).unwrap();
        assert_eq!((b.status, b.requests, b.completed, b.failed), (CellStatus::Error, 10, 9, 1));
        assert_eq!((b.e2e_ms.p50, b.e2e_ms.max, b.ttft_ms.max), (Some(1500.0), Some(2500.0), Some(300.0)));
        assert_eq!((b.last_completion_ms, b.total_tok_s, b.output_tokens), (Some(6000.0), Some(150.0), Some(900)));
        assert_eq!((b.send_spread_ms, b.scheduled_s), (None, None), "never invented");
        let no_samples =
            burst(&json!({"context_tokens": 1024, "concurrency": 2, "aggregate_tps": 1.0, "request_count": 2}))
                .unwrap();
        assert_eq!((no_samples.e2e_ms.max, no_samples.e2e_ms.p50, no_samples.completed), (None, None, 0));
        let over = burst(
            &json!({"context_tokens": 1024, "concurrency": 2, "aggregate_tps": -1.0, "timeout_reason": "needs 9K"}),
        )
        .unwrap();
        assert_eq!(
            (over.status, over.reason.as_deref(), over.total_tok_s),
            (CellStatus::OverCapacity, Some("needs 9K"), None)
        );
        assert!(burst(&json!({"context_tokens": 1024, "concurrency": 0, "aggregate_tps": 1.0})).is_none());
    }
}
