//! A level's figures (methodology §13.1): pure functions over what each request saw, on the run's
//! monotonic clock. Latency is counted from the request's **due** time, not from when it was sent.

use std::time::{Duration, Instant};

use sm_core::phases::rate::{LATE_MS, LevelCounts, LevelStatus, Percentiles, RateLevel, RequestRate, SendLag};
use sm_core::slo::{RequestFigures, Slo};
use sm_core::stats::{Quantiles, median, percentile};

use crate::open_loop::{End, Sent};
use crate::request_log::RequestLog;
use crate::tokens::attribute;

/// A backlog (requests not completed by the deadline) above this share of the level, and of at
/// least [`BACKLOG_MIN`] requests, makes the level saturated.
pub const BACKLOG_PCT: f64 = 10.0;
pub const BACKLOG_MIN: usize = 2;

/// The saturation test (methodology §13.1): `due` and `done` (completion, `None` if it never
/// completed) are seconds after the level's start, in due order. The reference latency `w0` is the
/// median end-to-end latency of the first quarter of the requests; a server that keeps up has
/// completed nearly every request by `last due + 2·w0`. Returns the share (%) it had not completed
/// by then and whether that makes the level saturated.
pub fn saturation(due: &[f64], done: &[Option<f64>]) -> (f64, bool) {
    let n = due.len();
    if n == 0 {
        return (0.0, false);
    }
    let quarter = n.div_ceil(4);
    let first: Vec<f64> = due[..quarter].iter().zip(done).filter_map(|(d, e)| e.map(|e| e - d)).collect();
    let Some(w0) = median(&first) else {
        // not one of the first requests completed: nothing kept up
        return (100.0, n >= BACKLOG_MIN);
    };
    let deadline = due.iter().copied().fold(0.0, f64::max) + 2.0 * w0;
    let behind = done.iter().filter(|e| e.is_none_or(|e| e > deadline)).count();
    let pct = behind as f64 * 100.0 / n as f64;
    (pct, pct > BACKLOG_PCT && behind >= BACKLOG_MIN)
}

/// Time-weighted mean and maximum of the requests in flight (`[sent, over)`) over `[start, end]`.
pub fn in_flight(intervals: &[(f64, f64)], span: f64) -> (f64, u64) {
    let mut edges: Vec<(f64, i64)> = intervals.iter().flat_map(|&(a, b)| [(a, 1), (b, -1)]).collect();
    // at one instant an end comes before a start: back-to-back requests are not two at once
    edges.sort_by(|x, y| x.0.total_cmp(&y.0).then(x.1.cmp(&y.1)));
    let (mut now, mut max, mut area, mut last) = (0i64, 0i64, 0.0, 0.0);
    for (t, step) in edges {
        area += now as f64 * (t - last).max(0.0);
        now += step;
        max = max.max(now);
        last = t;
    }
    let mean = if span > 0.0 { area / span } else { 0.0 };
    (mean, max.max(0) as u64)
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

fn secs(start: Instant, t: Instant) -> f64 {
    t.saturating_duration_since(start).as_secs_f64()
}

fn pct3(values: &[f64]) -> Option<Percentiles> {
    Quantiles::of(values).map(|q| Percentiles { p50: q.p50, p90: q.p90, p99: q.p99 })
}

/// A request's own TBT (methodology §6): (last token − first token) ÷ the tokens between them.
fn tbt_ms(log: &RequestLog) -> Option<f64> {
    let counts = attribute(&log.points, None);
    let (first, last) = (log.points.first()?, log.points.last()?);
    let (a, b) = (counts.first()?.0, counts.last()?.0);
    (b > a).then(|| ms(last.at - first.at) / (b - a))
}

fn output_tokens(log: &RequestLog) -> f64 {
    attribute(&log.points, None).last().map_or(0.0, |&(t, _)| t)
}

/// What identifies a level in the record.
pub struct LevelKey {
    pub context: u64,
    pub label: String,
    pub rate: RequestRate,
}

/// The level's figures from its requests (in due order), judged against `slo`.
pub fn level(key: LevelKey, start: Instant, requests: &[Sent], slo: &Slo) -> RateLevel {
    let counts = counts(requests);
    let mut level = RateLevel::unmeasured(key.context, key.label, key.rate, LevelStatus::Measured, String::new());
    level.reason = None;
    level.counts = counts;
    let end = requests.iter().filter_map(|r| r.over).max();
    let span = end.map(|e| secs(start, e)).filter(|&s| s > 0.0);
    let completed: Vec<(&Sent, &RequestLog)> = requests.iter().filter_map(|r| r.completed().map(|l| (r, l))).collect();
    let figures: Vec<RequestFigures> = completed
        .iter()
        .map(|(r, l)| RequestFigures {
            tokens: output_tokens(l),
            ttft_ms: l.first_token.map(|t| ms(t.saturating_duration_since(r.due))),
            tbt_ms: tbt_ms(l),
            // a completed request's tokens are all counted: one token is a whole answer, not a stall
            silent_ms: None,
        })
        .collect();
    let ttft: Vec<f64> = figures.iter().filter_map(|f| f.ttft_ms).collect();
    let tbt: Vec<f64> = figures.iter().filter_map(|f| f.tbt_ms).collect();
    let e2e: Vec<f64> =
        completed.iter().filter_map(|(r, l)| l.ended.map(|e| ms(e.saturating_duration_since(r.due)))).collect();
    level.ttft_ms = pct3(&ttft);
    level.tbt_ms = pct3(&tbt);
    level.e2e_ms = pct3(&e2e);
    let lags: Vec<f64> =
        requests.iter().filter_map(|r| r.log.as_ref().map(|l| ms(l.sent.saturating_duration_since(r.due)))).collect();
    level.send_lag_ms = percentile(&lags, 50.0).map(|p50| SendLag {
        p50,
        p99: percentile(&lags, 99.0).unwrap_or(p50),
        max: lags.iter().copied().fold(0.0, f64::max),
    });
    let due: Vec<f64> = requests.iter().map(|r| secs(start, r.due)).collect();
    let done: Vec<Option<f64>> =
        requests.iter().map(|r| r.completed().and_then(|l| l.ended).map(|e| secs(start, e))).collect();
    let (backlog, saturated) = saturation(&due, &done);
    level.backlog_pct = Some(backlog);
    level.saturated = saturated;
    if let Some(span) = span {
        let good = figures.iter().filter(|f| slo.meets(f)).count() as f64;
        let output: f64 = requests.iter().filter_map(|r| r.log.as_ref()).map(output_tokens).sum();
        let input: u64 = completed.iter().filter_map(|(_, l)| l.prompt_tokens).sum();
        let flights: Vec<(f64, f64)> =
            requests.iter().filter_map(|r| Some((secs(start, r.log.as_ref()?.sent), secs(start, r.over?)))).collect();
        let (mean, max) = in_flight(&flights, span);
        level.span_s = Some(span);
        level.achieved_rps = Some(completed.len() as f64 / span);
        level.output_tok_s = Some(output / span);
        level.input_tok_s = Some(input as f64 / span);
        level.in_flight_mean = Some(mean);
        level.in_flight_max = Some(max);
        level.goodput_rps = Some(good / span);
        level.goodput_pct = (counts.scheduled > 0).then(|| good * 100.0 / counts.scheduled as f64);
    }
    if completed.is_empty() {
        level.status = LevelStatus::Error;
        level.reason = Some(no_completion(requests));
    }
    level
}

fn counts(requests: &[Sent]) -> LevelCounts {
    let mut c = LevelCounts { scheduled: requests.len() as u64, ..LevelCounts::default() };
    for r in requests {
        match r.end {
            End::Completed => c.completed += 1,
            End::Failed(_) | End::Lost(_) => c.failed += 1,
            End::Cancelled => c.cancelled += 1,
            End::Unsent => c.unsent += 1,
        }
        if let Some(l) = &r.log {
            c.sent += 1;
            c.late += u64::from(ms(l.sent.saturating_duration_since(r.due)) > LATE_MS);
        }
    }
    c
}

/// Whether a request of the level lost its connection: the server may have gone away.
pub fn connection_lost(requests: &[Sent]) -> bool {
    requests.iter().any(|r| matches!(r.end, End::Lost(_)))
}

/// Why no request of a level completed: the first failure, else the grace running out.
fn no_completion(requests: &[Sent]) -> String {
    match requests.iter().find_map(|r| match &r.end {
        End::Failed(why) | End::Lost(why) => Some(why.clone()),
        _ => None,
    }) {
        Some(why) => format!("no request completed; the first failure: {why}"),
        None if requests.is_empty() => "the level scheduled no request".into(),
        None => "no request completed before the level's grace ran out".into(),
    }
}

#[cfg(test)]
#[path = "figures_tests.rs"]
mod tests;
