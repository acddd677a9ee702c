//! A level's figures (methodology §13.1): pure functions over what each request saw, on the run's
//! monotonic clock. Latency is counted from the request's **due** time, not from when it was sent.

use std::time::{Duration, Instant};

use sm_core::phases::rate::{LATE_MS, LevelCounts, LevelStatus, RateLevel, RequestRate, Saturation};
use sm_core::record::Percentiles;
use sm_core::slo::{RequestFigures, Slo};
use sm_core::stats::{Quantiles, percentile};

use crate::runner::phases::answers;
use crate::runner::phases::open_loop::{End, Sent};
use crate::stream::request_log::RequestLog;
use crate::stream::tokens::attribute;

use super::saturation::{Waited, judge};

/// Time-weighted mean and maximum of the requests in flight (`[sent, over)`) over `[0, span]`;
/// the part of an interval past the span is not counted.
pub fn in_flight(intervals: &[(f64, f64)], span: f64) -> (f64, u64) {
    let mut edges: Vec<(f64, i64)> =
        intervals.iter().filter(|&&(a, _)| a <= span).flat_map(|&(a, b)| [(a, 1), (b.min(span), -1)]).collect();
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
    Quantiles::of(values).map(Percentiles::from)
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

/// The level's figures from its requests (in due order), judged against `slo`. Its figures rest
/// on the completed requests: a request that failed is counted as failed (a fault), and one the
/// client cut, or never sent, is neither a failure nor behind; neither stretches the span.
pub fn level(key: LevelKey, start: Instant, requests: &[Sent], slo: &Slo) -> RateLevel {
    let counts = counts(requests);
    let mut level = RateLevel::unmeasured(key.context, key.label, key.rate, LevelStatus::Measured, String::new());
    level.reason = None;
    level.counts = counts;
    let completed: Vec<(&Sent, &RequestLog)> = requests.iter().filter_map(|r| r.completed().map(|l| (r, l))).collect();
    let span = completed.iter().filter_map(|(r, _)| r.over).max().map(|e| secs(start, e)).filter(|&s| s > 0.0);
    let figures = request_figures(requests);
    let ttft: Vec<f64> = figures.iter().filter_map(|f| f.ttft_ms).collect();
    let tbt: Vec<f64> = figures.iter().filter_map(|f| f.tbt_ms).collect();
    let e2e: Vec<f64> =
        completed.iter().filter_map(|(r, l)| l.ended.map(|e| ms(e.saturating_duration_since(r.due)))).collect();
    level.ttft_ms = pct3(&ttft);
    level.tbt_ms = pct3(&tbt);
    level.e2e_ms = pct3(&e2e);
    (level.thinking, level.tool_calls) = answers::figures(completed.iter().map(|&(r, l)| (r.due, l)));
    let lags: Vec<f64> =
        requests.iter().filter_map(|r| r.log.as_ref().map(|l| ms(l.sent.saturating_duration_since(r.due)))).collect();
    level.send_lag_ms = percentile(&lags, 50.0).map(|p50| {
        Percentiles::p50_p99_max(p50, percentile(&lags, 99.0).unwrap_or(p50), lags.iter().copied().fold(0.0, f64::max))
    });
    let judged = judge(&waited(start, requests), counts.cancelled + counts.unsent);
    level.backlog_pct = judged.backlog_pct;
    level.saturation = Some(judged.saturation);
    level.saturated = judged.saturation == Saturation::Saturated;
    level.first_failure = first_failure(requests);
    if let Some(span) = span {
        let good = figures.iter().filter(|f| slo.meets(f)).count() as f64;
        let output: f64 = figures.iter().map(|f| f.tokens).sum();
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
        // of the requests the server answered or failed: a request the client cut is not judged
        let judged = counts.completed + counts.failed;
        level.goodput_pct = (judged > 0).then(|| good * 100.0 / judged as f64);
    }
    if completed.is_empty() && (counts.failed > 0 || counts.scheduled == 0) {
        level.status = LevelStatus::Error;
        level.saturation = None;
        level.reason = Some(no_completion(requests));
    }
    level
}

/// The completed requests' own figures, in due order, latency from the due time: what the
/// level's SLO bounds and goodput are judged on.
pub fn request_figures(requests: &[Sent]) -> Vec<RequestFigures> {
    requests
        .iter()
        .filter_map(|r| r.completed().map(|l| (r, l)))
        .map(|(r, l)| RequestFigures {
            tokens: output_tokens(l),
            ttft_ms: l.first_token.map(|t| ms(t.saturating_duration_since(r.due))),
            // a completed request with no answer chunk never answered: its thinking used up max_tokens
            ttfa_ms: l
                .first_token
                .map(|_| l.first_answer.map_or(f64::INFINITY, |t| ms(t.saturating_duration_since(r.due)))),
            // sent with tools, a completed request with no tool-call delta never called: it waited forever
            ttftc_ms: l
                .tools
                .then(|| l.first_tool_call.map_or(f64::INFINITY, |t| ms(t.saturating_duration_since(r.due)))),
            tbt_ms: tbt_ms(l),
            // a completed request's tokens are all counted: one token is a whole answer, not a stall
            silent_ms: None,
        })
        .collect()
}

/// Each request as the saturation test reads it.
fn waited(start: Instant, requests: &[Sent]) -> Vec<Waited> {
    requests
        .iter()
        .map(|r| {
            let log = r.log.as_ref();
            Waited {
                due: secs(start, r.due),
                first_token: log.and_then(|l| l.first_token).map(|t| secs(start, t)),
                end: r.completed().and_then(|l| l.ended).map(|e| secs(start, e)),
                failed: matches!(r.end, End::Failed(_) | End::Lost(_)),
            }
        })
        .collect()
}

/// The first failure's reason, when a request failed.
fn first_failure(requests: &[Sent]) -> Option<String> {
    requests.iter().find_map(|r| match &r.end {
        End::Failed(why) | End::Lost(why) => Some(why.clone()),
        _ => None,
    })
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

/// Why a level is an error: no request completed and some failed (or none was scheduled).
fn no_completion(requests: &[Sent]) -> String {
    match first_failure(requests) {
        Some(why) => format!("no request completed; the first failure: {why}"),
        None => "the level scheduled no request".into(),
    }
}

#[cfg(test)]
mod tests;
