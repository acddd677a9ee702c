//! The record's cell from a cell's outcome: its figures rounded as run.json keeps them, its
//! intervals, its judgement against the SLO and the price of its tokens (methodology §7.3, §11, §12).

use sm_core::spec_decode::SpecDecode;
use std::time::Duration;

use sm_core::answer;
use sm_core::gpu_telemetry::{GpuCell, GpuFigures};
use sm_core::plan::Cell;
use sm_core::precision::Interval;
use sm_core::record::{CellIntervals, CellPhases, CellStatus, DecodeCell, Percentiles};
use sm_core::slo::{BoundCheck, Slo};
use sm_core::stats::Quantiles;

use crate::cell::verdict::CellOutcome;

pub(super) fn round1(v: f64) -> f64 {
    (v * 10.0).round() / 10.0
}

pub(super) fn round3(v: f64) -> f64 {
    (v * 1000.0).round() / 1000.0
}

/// The record's cell from what was measured: figures, the judgement against the SLO (methodology
/// §11.2, from the requests' own figures, which are not kept) and the price of its tokens.
pub(super) fn decode_cell(cell: &Cell, outcome: CellOutcome, slo: &Slo, cost_per_hour: Option<f64>) -> DecodeCell {
    let mut dc = DecodeCell {
        context: cell.context.0,
        label: cell.label.clone(),
        concurrency: cell.concurrency,
        status: Some(outcome.status),
        reason: outcome.reason,
        warnings: outcome.warnings,
        ranks: outcome.ranks.into_iter().map(rounded_rank).collect(),
        ..DecodeCell::default()
    };
    let Some(f) = outcome.figures.filter(|_| outcome.status == CellStatus::Valid) else {
        return dc;
    };
    dc.total_tok_s = Some(round3(f.total_tok_s));
    dc.per_request_tok_s = f.per_request_tok_s.map(round3);
    let percentiles = |q: Option<Quantiles>| q.map_or_else(Percentiles::default, |q| Percentiles::from(q).map(round3));
    (dc.ttft_ms, dc.tbt_ms) = (percentiles(f.ttft_ms), percentiles(f.tbt_ms));
    // the chunk gaps' shape is p50 and p99
    dc.chunk_gap_ms = Percentiles { p90: None, ..percentiles(f.chunk_gap_ms) };
    dc.avg_active = Some(round3(f.avg_active));
    dc.completed = Some(f.completed);
    dc.output_tokens = Some(f.output_tokens);
    dc.measured_s = Some(round3(f.measured_s));
    dc.requests = Some(f.requests);
    dc.token_source = f.token_source;
    dc.prompt_cache_hit_pct = f.prompt_cache_hit_pct.map(round1);
    if let Some(t) = &f.thinking {
        dc.ttfa_ms = percentiles(t.ttfa_ms);
        dc.reasoning_tokens_mean = t.reasoning_tokens_mean.map(round1);
        dc.no_answer = Some(t.no_answer);
        dc.answer_tokens_mean = t.answer_tokens_mean.map(round1);
        dc.answer_tok_s = t.answer_tok_s.map(round3);
        dc.usage_reasoning_tokens_mean = t.usage_reasoning_tokens_mean.map(round1);
        dc.reasoning_disagree = t.reasoning_disagree;
        if let Some(n) = t.reasoning_disagree.filter(|&n| n > 0) {
            dc.warnings.push(format!(
                "{n} requests' thinking tokens differ between the stream and the server's usage count by more than one"
            ));
        }
    }
    if let Some(t) = &f.tool_calls {
        dc.ttftc_ms = percentiles(t.ttftc_ms);
        dc.tool_call_tokens_mean = t.tool_call_tokens_mean.map(round1);
        dc.tool_args_valid = t.tool_args_valid.map(round3);
        dc.no_tool_call = Some(t.no_tool_call);
    }
    dc.client_retries = (f.retried > 0).then_some(f.retried);
    if let Some(h) = outcome.health {
        dc.client_lag_ms_p99 = Some(round3(h.lag_ms_p99));
        dc.client_cpu_pct = Some(round1(h.cpu_pct));
    }
    let judged = slo.judge(&f.per_request, f.measured_s);
    dc.slo_met = Some(judged.met);
    dc.slo_bounds = judged.bounds.into_iter().map(|b| BoundCheck { value: b.value.map(round3), ..b }).collect();
    dc.goodput_pct = judged.goodput_pct.map(round1);
    dc.goodput_tok_s = judged.goodput_tok_s.map(round3);
    dc.usd_per_million_tokens = cost_per_hour.and_then(|usd| answer::usd_per_million_tokens(usd, f.total_tok_s));
    let ttfa_ci = f.thinking.as_ref().map_or([None, None], |t| t.ttfa_ci);
    let ttftc_ci = f.tool_calls.as_ref().map_or([None, None], |t| t.ttftc_ci);
    dc.ci = Some(rounded(CellIntervals {
        ttfa_ms_p50: ttfa_ci[0],
        ttfa_ms_p90: ttfa_ci[1],
        ttftc_ms_p50: ttftc_ci[0],
        ttftc_ms_p90: ttftc_ci[1],
        ..f.ci
    }));
    dc.phases = outcome.phases.map(|p| CellPhases {
        before_s: round3(p.before_s),
        ramp_s: round3(p.ramp_s),
        window_s: round3(p.window_s),
        after_s: round3(p.after_s),
    });
    dc.gpu = outcome.gpu.map(rounded_gpu);
    dc.spec_decode = outcome.spec_decode.map(|s| SpecDecode {
        acceptance_length: round3(s.acceptance_length),
        acceptance_rate: (s.acceptance_rate * 1e4).round() / 1e4,
        ..s
    });
    dc.server_metrics = outcome.server_metrics;
    dc
}

/// GPU figures as run.json keeps them: 3 decimals, J/token to a microjoule (it may be 0.05).
pub(crate) fn rounded_gpu(g: GpuCell) -> GpuCell {
    let micro = |v: f64| (v * 1e6).round() / 1e6;
    GpuCell {
        power_w: g.power_w.map(round3),
        energy_j: g.energy_j.map(round3),
        joules_per_token: g.joules_per_token.map(micro),
        wh_per_million_tokens: g.wh_per_million_tokens.map(round3),
        gpus: g
            .gpus
            .into_iter()
            .map(|f| GpuFigures {
                power_w: f.power_w.map(round3),
                sm_clock_mhz: f.sm_clock_mhz.map(round1),
                mem_clock_mhz: f.mem_clock_mhz.map(round1),
                util_pct: f.util_pct.map(round1),
                ..f
            })
            .collect(),
        ..g
    }
}

/// Intervals rounded outward to the figures' 3 decimals: rounding never narrows one.
fn rounded(ci: CellIntervals) -> CellIntervals {
    let r = |i: Option<Interval>| i.map(|i| i.rounded(3));
    CellIntervals {
        total_tok_s: r(ci.total_tok_s),
        per_request_tok_s: r(ci.per_request_tok_s),
        ttft_ms_p50: r(ci.ttft_ms_p50),
        ttft_ms_p90: r(ci.ttft_ms_p90),
        tbt_ms_p50: r(ci.tbt_ms_p50),
        tbt_ms_p99: r(ci.tbt_ms_p99),
        ttfa_ms_p50: r(ci.ttfa_ms_p50),
        ttfa_ms_p90: r(ci.ttfa_ms_p90),
        ttftc_ms_p50: r(ci.ttftc_ms_p50),
        ttftc_ms_p90: r(ci.ttftc_ms_p90),
    }
}

/// With `--precision`: whether the valid cell reached it, and a warning when the longest window
/// (`--duration`) ended first (methodology §12.3).
pub(super) fn precision_verdict(dc: &mut DecodeCell, pct: f64, longest: Duration) {
    if dc.status() != CellStatus::Valid {
        return;
    }
    let ci = dc.ci.unwrap_or_default();
    let half = |i: Option<Interval>, v: Option<f64>| i.zip(v).and_then(|(i, v)| i.half_width_pct(v));
    let total = half(ci.total_tok_s, dc.total_tok_s);
    let tbt = half(ci.tbt_ms_p50, dc.tbt_ms.p50);
    let met = matches!((total, tbt), (Some(a), Some(b)) if a <= pct && b <= pct);
    dc.precision_met = Some(met);
    if !met {
        let show = |v: Option<f64>| v.map_or("no interval".to_string(), |v| format!("±{v:.1} %"));
        let measured = dc.measured_s.unwrap_or(0.0);
        let when = if measured + 0.5 < longest.as_secs_f64() {
            format!(
                "the window ended at {measured:.1} s when the running figures were within it, but the final ones are not"
            )
        } else {
            format!("the longest window ({} s) ended first", longest.as_secs_f64())
        };
        dc.warnings.push(format!("not within ±{pct} %: {when}: total tok/s {}, TBT p50 {}", show(total), show(tbt)));
    }
}

fn rounded_rank(r: sm_core::ranks::RankCell) -> sm_core::ranks::RankCell {
    sm_core::ranks::RankCell {
        client_lag_ms_p99: r.client_lag_ms_p99.map(round3),
        client_cpu_pct: r.client_cpu_pct.map(round1),
        open_rtt_ms: r.open_rtt_ms.map(round3),
        ..r
    }
}
