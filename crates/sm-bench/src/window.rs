//! Window accounting: turns what every request of a cell saw into the cell's
//! figures. Pure functions over timestamps — `docs/methodology.md` §7 defines
//! each figure, and this file is that definition in code.

use std::time::{Duration, Instant};

use sm_core::record::TokenSource;
use sm_core::stats::{Quantiles, median};

/// A token-bearing chunk: when it arrived and the request's cumulative output
/// tokens after it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Point {
    pub at: Instant,
    pub tokens: u64,
}

/// Everything one request of a cell saw.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RequestLog {
    pub sent: Instant,
    pub first_token: Option<Instant>,
    pub points: Vec<Point>,
    /// `finish_reason` or `[DONE]` arrived (the request completed normally).
    pub ended: Option<Instant>,
    /// Every token-bearing chunk carried usage, so `tokens` are real token counts.
    pub usage: bool,
    /// Chunks were counted, then a usage total at the end corrected the count.
    pub usage_at_end: bool,
    pub prompt_tokens: Option<u64>,
    pub cached_tokens: Option<u64>,
    /// The request was sent a second time because its first send failed before any
    /// response byte (a pooled keep-alive connection the server had closed).
    pub retried: bool,
}

impl RequestLog {
    pub fn new(sent: Instant) -> RequestLog {
        RequestLog {
            sent,
            first_token: None,
            points: Vec::new(),
            ended: None,
            usage: true,
            usage_at_end: false,
            prompt_tokens: None,
            cached_tokens: None,
            retried: false,
        }
    }
}

/// The window `[start, end)` on the run's monotonic clock.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Window {
    pub start: Instant,
    pub end: Instant,
}

impl Window {
    pub fn contains(&self, t: Instant) -> bool {
        t >= self.start && t < self.end
    }
    pub fn len(&self) -> Duration {
        self.end - self.start
    }
}

/// A sample of the server's running-requests gauge.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RunningSample {
    pub at: Instant,
    pub running: f64,
}

#[derive(Debug, Clone, PartialEq, Default)]
pub struct Figures {
    pub output_tokens: u64,
    pub measured_s: f64,
    pub total_tok_s: f64,
    pub per_request_tok_s: Option<f64>,
    pub ttft_ms: Option<Quantiles>,
    pub tbt_ms: Option<Quantiles>,
    pub chunk_gap_ms: Option<Quantiles>,
    pub avg_active: f64,
    pub completed: u64,
    pub requests: u64,
    pub token_source: Option<TokenSource>,
    /// Share of the prompt tokens the server reported as cached (%), over the requests that
    /// reported both numbers; `None` when none did.
    pub prompt_cache_hit_pct: Option<f64>,
    /// Requests sent a second time after their first send failed before any response byte.
    pub retried: u64,
}

pub fn figures(logs: &[RequestLog], window: Window, running: &[RunningSample]) -> Figures {
    let token_source = if logs.iter().any(|r| !r.points.is_empty()) {
        Some(if logs.iter().all(|r| r.usage) {
            TokenSource::Usage
        } else if logs.iter().any(|r| r.usage_at_end) {
            TokenSource::UsageAtEnd
        } else {
            TokenSource::Chunks
        })
    } else {
        None
    };
    let mut output_tokens = 0;
    let mut tbt = Vec::new();
    let mut gaps = Vec::new();
    let mut requests = 0;
    for log in logs {
        let mut prev_tokens = 0;
        let mut first_in: Option<Point> = None;
        let mut last_in: Option<Point> = None;
        for p in &log.points {
            if window.contains(p.at) {
                output_tokens += p.tokens.saturating_sub(prev_tokens);
                if let Some(last) = last_in {
                    gaps.push(ms(p.at - last.at));
                }
                first_in.get_or_insert(*p);
                last_in = Some(*p);
            }
            prev_tokens = p.tokens;
        }
        if let (Some(a), Some(b)) = (first_in, last_in) {
            requests += 1;
            if b.tokens > a.tokens {
                tbt.push(ms(b.at - a.at) / (b.tokens - a.tokens) as f64);
            }
        }
    }
    let ttft: Vec<f64> =
        logs.iter().filter_map(|r| r.first_token.filter(|&t| t < window.end).map(|t| ms(t - r.sent))).collect();
    let per_user: Vec<f64> = tbt.iter().filter(|&&t| t > 0.0).map(|t| 1000.0 / t).collect();
    let completed = logs.iter().filter(|r| r.ended.is_some_and(|t| window.contains(t))).count() as u64;
    let measured_s = window.len().as_secs_f64();
    Figures {
        output_tokens,
        measured_s,
        total_tok_s: if measured_s > 0.0 { output_tokens as f64 / measured_s } else { 0.0 },
        per_request_tok_s: median(&per_user),
        ttft_ms: Quantiles::of(&ttft),
        tbt_ms: Quantiles::of(&tbt),
        chunk_gap_ms: Quantiles::of(&gaps),
        avg_active: if running.is_empty() { client_active(logs, window) } else { time_weighted(running, window) },
        completed,
        requests,
        token_source,
        prompt_cache_hit_pct: prompt_cache_hit_pct(logs),
        retried: logs.iter().filter(|r| r.retried).count() as u64,
    }
}

/// `100 × Σ cached_tokens / Σ prompt_tokens` over every request of the cell that reported both
/// (ramp, window and cut-off requests alike: each one's prompt is the cell's prompt). A sum, not a
/// median, so that a few cold requests among many warm ones still show.
fn prompt_cache_hit_pct(logs: &[RequestLog]) -> Option<f64> {
    let (cached, prompt) = logs
        .iter()
        .filter_map(|r| r.cached_tokens.zip(r.prompt_tokens))
        .fold((0u64, 0u64), |(c, p), (rc, rp)| (c + rc.min(rp), p + rp));
    (prompt > 0).then(|| cached as f64 * 100.0 / prompt as f64)
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

/// Mean number of streams generating (first token seen, not yet ended) over the window.
fn client_active(logs: &[RequestLog], window: Window) -> f64 {
    let total: f64 = logs
        .iter()
        .filter_map(|r| {
            let from = r.first_token?.max(window.start);
            let to = r.ended.unwrap_or(window.end).min(window.end);
            (to > from).then(|| (to - from).as_secs_f64())
        })
        .sum();
    let len = window.len().as_secs_f64();
    if len > 0.0 { total / len } else { 0.0 }
}

/// Sample-and-hold mean of a gauge over the window. The value before the first
/// sample in the window is the last sample before it (or the first sample).
fn time_weighted(samples: &[RunningSample], window: Window) -> f64 {
    let len = window.len().as_secs_f64();
    if len <= 0.0 || samples.is_empty() {
        return 0.0;
    }
    let mut value = samples.iter().take_while(|s| s.at <= window.start).last().unwrap_or(&samples[0]).running;
    let mut t = window.start;
    let mut acc = 0.0;
    for s in samples.iter().filter(|s| window.contains(s.at)) {
        acc += value * (s.at - t).as_secs_f64();
        value = s.running;
        t = s.at;
    }
    acc += value * (window.end - t).as_secs_f64();
    acc / len
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(base: Instant, ms: u64) -> Instant {
        base + Duration::from_millis(ms)
    }

    /// A request sent at `sent`, first token at `first`, one token every `step` ms.
    fn steady(base: Instant, sent: u64, first: u64, step: u64, n: u64, per_chunk: u64) -> RequestLog {
        let mut log = RequestLog::new(at(base, sent));
        log.first_token = Some(at(base, first));
        for i in 0..n {
            log.points.push(Point { at: at(base, first + i * step * per_chunk), tokens: (i + 1) * per_chunk });
        }
        log
    }

    #[test]
    fn counts_only_tokens_inside_the_window() {
        let b = Instant::now();
        // tokens at 100, 110, …, 1090 ms; window [500, 1000) holds 50 of them
        let logs = vec![steady(b, 0, 100, 10, 100, 1)];
        let w = Window { start: at(b, 500), end: at(b, 1000) };
        let f = figures(&logs, w, &[]);
        assert_eq!(f.output_tokens, 50);
        assert!((f.total_tok_s - 100.0).abs() < 1e-9);
        assert!((f.tbt_ms.unwrap().p50 - 10.0).abs() < 1e-9);
        assert!((f.per_request_tok_s.unwrap() - 100.0).abs() < 1e-9);
        assert!((f.ttft_ms.unwrap().p50 - 100.0).abs() < 1e-9);
        assert_eq!(f.requests, 1);
        assert_eq!(f.completed, 0);
        assert!((f.avg_active - 1.0).abs() < 1e-9);
    }

    #[test]
    fn multi_token_chunks_count_tokens_not_chunks() {
        let b = Instant::now();
        // 4 tokens per chunk every 40 ms = one token per 10 ms
        let logs = vec![steady(b, 0, 0, 10, 100, 4)];
        let w = Window { start: at(b, 0), end: at(b, 1000) };
        let f = figures(&logs, w, &[]);
        assert_eq!(f.output_tokens, 100);
        assert!((f.tbt_ms.unwrap().p50 - 10.0).abs() < 1e-9);
        assert!((f.chunk_gap_ms.unwrap().p50 - 40.0).abs() < 1e-9);
    }

    #[test]
    fn ttft_after_window_is_excluded_and_completed_counted() {
        let b = Instant::now();
        let mut done = steady(b, 0, 50, 10, 10, 1);
        done.ended = Some(at(b, 150));
        let late = steady(b, 0, 2000, 10, 10, 1);
        let w = Window { start: at(b, 0), end: at(b, 1000) };
        let f = figures(&[done, late], w, &[]);
        assert_eq!(f.ttft_ms.unwrap().p50, 50.0);
        assert_eq!(f.completed, 1);
        assert_eq!(f.requests, 1);
    }

    #[test]
    fn server_gauge_is_time_weighted() {
        let b = Instant::now();
        let w = Window { start: at(b, 0), end: at(b, 1000) };
        let samples = [RunningSample { at: at(b, 0), running: 4.0 }, RunningSample { at: at(b, 250), running: 8.0 }];
        let f = figures(&[], w, &samples);
        assert!((f.avg_active - 7.0).abs() < 1e-9);
        assert_eq!(f.token_source, None);
        assert_eq!(f.output_tokens, 0);
    }

    #[test]
    fn cache_hit_share_sums_the_requests_that_reported_it() {
        let b = Instant::now();
        let log = |prompt: Option<u64>, cached: Option<u64>| {
            let mut l = steady(b, 0, 0, 10, 10, 1);
            (l.prompt_tokens, l.cached_tokens) = (prompt, cached);
            l
        };
        let w = Window { start: b, end: at(b, 1000) };
        assert_eq!(figures(&[log(Some(1000), None)], w, &[]).prompt_cache_hit_pct, None);
        // one cold request among three warm ones: (0 + 3 × 896) / 4000
        let logs = [
            log(Some(1000), Some(0)),
            log(Some(1000), Some(896)),
            log(Some(1000), Some(896)),
            log(Some(1000), Some(896)),
            log(None, None),
        ];
        let pct = figures(&logs, w, &[]).prompt_cache_hit_pct.unwrap();
        assert!((pct - 67.2).abs() < 1e-9, "{pct}");
    }

    #[test]
    fn retried_requests_are_counted() {
        let b = Instant::now();
        let mut again = steady(b, 0, 0, 10, 10, 1);
        again.retried = true;
        let f = figures(&[steady(b, 0, 0, 10, 10, 1), again], Window { start: b, end: at(b, 1000) }, &[]);
        assert_eq!(f.retried, 1);
    }

    #[test]
    fn chunk_source_when_any_request_lacked_usage() {
        let b = Instant::now();
        let mut log = steady(b, 0, 0, 10, 10, 1);
        log.usage = false;
        let f = figures(&[log], Window { start: b, end: at(b, 1000) }, &[]);
        assert_eq!(f.token_source, Some(TokenSource::Chunks));
    }
}
