//! A decode cell's server gauges (methodology §14.1), checked like the rest: only a valid cell
//! carries them; the series is bounded ([`MAX_POINTS`], as the tool thins it) and in time order;
//! every number is finite and in its range (a share from 0 to 1, a percentage to 100, counts and
//! times from 0); and the server's tok/s agrees with its tokens over its span as rounding allows.

use sm_core::record::{CellStatus, DecodeCell};
use sm_core::server_metrics::{MAX_POINTS, ServerMetrics};

use super::{MAX_S, Refusal, figure};

/// Requests at once, tokens per second and counters: far past any server, short of overflow.
const MAX_COUNT: f64 = 1e12;
/// Half the millisecond span_s is rounded to.
const SPAN_ROUNDING: f64 = 0.0005;

pub fn cell(at: &str, c: &DecodeCell) -> Result<(), Refusal> {
    check(at, c.status(), c.server_metrics.as_ref())
}

/// The gauges of any measured span of `status`: a decode cell, a prefill row, a load phase's level.
pub fn check(at: &str, status: CellStatus, m: Option<&ServerMetrics>) -> Result<(), Refusal> {
    let Some(m) = m else { return Ok(()) };
    if status != CellStatus::Valid {
        return Err(Refusal::FigureOfInvalid { at: at.to_string(), status: status.name(), field: "server_metrics" });
    }
    if m.series.len() > MAX_POINTS {
        return Err(Refusal::TooMany {
            what: "points in a cell's server_metrics.series",
            name: "MAX_POINTS",
            found: m.series.len(),
            limit: MAX_POINTS,
        });
    }
    summary(at, m)?;
    let mut last = 0.0;
    for p in &m.series {
        figure(at, "server_metrics.series.t_s", Some(p.t_s), MAX_S)?;
        figure(at, "server_metrics.series.running", Some(p.running), MAX_COUNT)?;
        figure(at, "server_metrics.series.waiting", Some(p.waiting), MAX_COUNT)?;
        figure(at, "server_metrics.series.kv_usage", p.kv_usage, 1.0)?;
        if p.t_s < last {
            return Err(Refusal::Incoherent {
                at: at.to_string(),
                why: "server_metrics.series is not in time order".into(),
            });
        }
        last = p.t_s;
    }
    Ok(())
}

fn summary(at: &str, m: &ServerMetrics) -> Result<(), Refusal> {
    let count = |n: Option<u64>| n.map(|n| n as f64);
    for (field, value, max) in [
        ("server_metrics.interval_s", Some(m.interval_s), MAX_S),
        ("server_metrics.scrapes", Some(m.scrapes as f64), MAX_COUNT),
        ("server_metrics.span_s", Some(m.span_s), MAX_S),
        ("server_metrics.running_mean", Some(m.running_mean), MAX_COUNT),
        ("server_metrics.waiting_max", Some(m.waiting_max), MAX_COUNT),
        ("server_metrics.kv_usage_mean", m.kv_usage_mean, 1.0),
        ("server_metrics.kv_usage_max", m.kv_usage_max, 1.0),
        ("server_metrics.preemptions", count(m.preemptions), MAX_COUNT),
        ("server_metrics.prefix_hit_pct", m.prefix_hit_pct, 100.0),
        ("server_metrics.prompt_tokens", count(m.prompt_tokens), MAX_COUNT),
        ("server_metrics.generation_tokens", count(m.generation_tokens), MAX_COUNT),
        ("server_metrics.server_tok_s", m.server_tok_s, MAX_COUNT),
        ("server_metrics.measured_tokens", count(m.measured_tokens), MAX_COUNT),
        ("server_metrics.tok_s_timing_pct", m.tok_s_timing_pct, MAX_COUNT),
        ("server_metrics.queue_time_ms_p50", m.queue_time_ms_p50, MAX_S * 1000.0),
        ("server_metrics.queue_time_ms_mean", m.queue_time_ms_mean, MAX_S * 1000.0),
    ] {
        figure(at, field, value, max)?;
    }
    // a signed percentage: −100 % (the server counted nothing) upward
    if let Some(d) = m.tok_s_diff_pct {
        figure(at, "server_metrics.tok_s_diff_pct", Some(d + 100.0), MAX_COUNT)?;
    }
    // span_s is rounded to the millisecond: over a prefill row's few milliseconds that rounding,
    // not the 1 % allowed, decides how far tokens ÷ span_s may be from the unrounded rate
    let (lo, hi) = (m.span_s + SPAN_ROUNDING, (m.span_s - SPAN_ROUNDING).max(f64::MIN_POSITIVE));
    if let (Some(tok_s), Some(tokens)) = (m.server_tok_s, m.generation_tokens)
        && m.span_s > 0.0
        && (tok_s < tokens as f64 / lo - 0.01 * tok_s.max(1.0) || tok_s > tokens as f64 / hi + 0.01 * tok_s.max(1.0))
    {
        return Err(Refusal::Incoherent {
            at: at.to_string(),
            why: format!(
                "server_metrics.server_tok_s is {tok_s} but generation_tokens ÷ span_s is {:.3}",
                tokens as f64 / m.span_s
            ),
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use sm_core::server_metrics::ServerPoint;

    use super::*;

    fn ok() -> ServerMetrics {
        let p = |t_s| ServerPoint { t_s, running: 4.0, waiting: 0.0, kv_usage: Some(0.3) };
        ServerMetrics {
            interval_s: 1.0,
            scrapes: 3,
            span_s: 2.0,
            series: vec![p(0.0), p(1.0), p(2.0)],
            running_mean: 4.0,
            generation_tokens: Some(800),
            server_tok_s: Some(400.0),
            tok_s_diff_pct: Some(-0.5),
            ..ServerMetrics::default()
        }
    }

    #[test]
    fn the_series_is_bounded_finite_ordered_and_coherent() {
        let c = |m: ServerMetrics, status| DecodeCell {
            status: Some(status),
            server_metrics: Some(m),
            label: "1K".into(),
            concurrency: 4,
            ..Default::default()
        };
        assert!(cell("x", &c(ok(), CellStatus::Valid)).is_ok());
        assert!(cell("x", &DecodeCell::default()).is_ok());
        // a prefill row's 3.3 ms span, recorded as 0.003 s: 1 token is 300.5 tok/s, not 333.3
        let short = ServerMetrics { span_s: 0.003, generation_tokens: Some(1), server_tok_s: Some(300.49), ..ok() };
        assert!(check("x", CellStatus::Valid, Some(&short)).is_ok());
        let off = ServerMetrics { server_tok_s: Some(250.0), ..short };
        assert!(matches!(check("x", CellStatus::Valid, Some(&off)), Err(Refusal::Incoherent { .. })));
        assert!(matches!(cell("x", &c(ok(), CellStatus::Error)), Err(Refusal::FigureOfInvalid { .. })));
        let long = ServerMetrics { series: vec![ok().series[0]; MAX_POINTS + 1], ..ok() };
        assert!(matches!(cell("x", &c(long, CellStatus::Valid)), Err(Refusal::TooMany { .. })));
        let mut nan = ok();
        nan.series[1].running = f64::NAN;
        let mut kv = ok();
        kv.series[2].kv_usage = Some(1.5);
        let mut backwards = ok();
        backwards.series[2].t_s = 0.5;
        for bad in [
            nan,
            kv,
            backwards,
            ServerMetrics { server_tok_s: Some(f64::INFINITY), ..ok() },
            ServerMetrics { server_tok_s: Some(900.0), ..ok() },
            ServerMetrics { prefix_hit_pct: Some(101.0), ..ok() },
            ServerMetrics { tok_s_diff_pct: Some(-150.0), ..ok() },
            ServerMetrics { interval_s: -1.0, ..ok() },
        ] {
            assert!(cell("x", &c(bad.clone(), CellStatus::Valid)).is_err(), "{bad:?}");
        }
    }
}
