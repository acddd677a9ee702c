//! The figures of one burst (methodology §13.2): pure functions of the requests' timestamps on the
//! runner's monotonic clock, measured from the instant the burst was due.

use std::time::{Duration, Instant};

use sm_core::record::Percentiles;
use sm_core::stats::percentile;

/// What one request of a burst saw.
#[derive(Debug, Clone, PartialEq)]
pub struct BurstRequest {
    /// When its bytes went out (after any connection set-up the client did first).
    pub sent: Instant,
    pub first_token: Option<Instant>,
    /// When it completed (`finish_reason` or `[DONE]`); `None` for a request that failed.
    pub ended: Option<Instant>,
    /// Its output tokens: the server's last usage count, else its token-bearing chunks.
    pub output_tokens: u64,
}

/// The figures of one burst; each `None` where no request gives it.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct BurstFigures {
    pub completed: u64,
    pub failed: u64,
    pub e2e_ms: Option<Spread>,
    pub ttft_ms: Option<Spread>,
    pub last_completion_ms: Option<f64>,
    pub output_tokens: Option<u64>,
    pub total_tok_s: Option<f64>,
    pub send_spread_ms: Option<f64>,
}

/// p50, p90 and max of a set of durations, in ms.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Spread {
    pub p50: f64,
    pub p90: f64,
    pub max: f64,
}

/// p50, p90 and max: the shape of a burst's latencies in the record.
impl From<Spread> for Percentiles {
    fn from(s: Spread) -> Percentiles {
        Percentiles::p50_p90_max(s.p50, s.p90, s.max)
    }
}

impl Spread {
    fn of(values: &[f64]) -> Option<Spread> {
        Some(Spread {
            p50: percentile(values, 50.0)?,
            p90: percentile(values, 90.0)?,
            max: values.iter().copied().fold(f64::NEG_INFINITY, f64::max),
        })
    }
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

/// The burst's figures from its requests and the instant all of them were due (`scheduled`).
/// Latencies count from `scheduled`, so a request the client sent late carries that lateness.
/// Tokens and the end-to-end figures count completed requests only; TTFT counts every request that
/// received a token.
pub fn figures(scheduled: Instant, requests: &[BurstRequest]) -> BurstFigures {
    let since = |t: Instant| ms(t.saturating_duration_since(scheduled));
    let done: Vec<&BurstRequest> = requests.iter().filter(|r| r.ended.is_some()).collect();
    let e2e: Vec<f64> = done.iter().filter_map(|r| r.ended).map(since).collect();
    let ttft: Vec<f64> = requests.iter().filter_map(|r| r.first_token).map(since).collect();
    let last = e2e.iter().copied().reduce(f64::max);
    let tokens = (!done.is_empty()).then(|| done.iter().map(|r| r.output_tokens).sum::<u64>());
    let first_sent = requests.iter().map(|r| r.sent).min();
    let last_sent = requests.iter().map(|r| r.sent).max();
    BurstFigures {
        completed: done.len() as u64,
        failed: (requests.len() - done.len()) as u64,
        e2e_ms: Spread::of(&e2e),
        ttft_ms: Spread::of(&ttft),
        last_completion_ms: last,
        output_tokens: tokens,
        // a burst that completed in no measurable time has no rate
        total_tok_s: tokens.zip(last).filter(|&(_, l)| l > 0.0).map(|(t, l)| t as f64 / (l / 1000.0)),
        send_spread_ms: first_sent.zip(last_sent).map(|(a, b)| ms(b - a)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(t0: Instant, ms: u64) -> Instant {
        t0 + Duration::from_millis(ms)
    }

    fn request(t0: Instant, sent: u64, first: Option<u64>, ended: Option<u64>, tokens: u64) -> BurstRequest {
        BurstRequest {
            sent: at(t0, sent),
            first_token: first.map(|f| at(t0, f)),
            ended: ended.map(|e| at(t0, e)),
            output_tokens: tokens,
        }
    }

    #[test]
    fn latencies_count_from_the_scheduled_instant() {
        let t0 = Instant::now();
        let scheduled = at(t0, 10);
        let requests = [
            request(t0, 10, Some(30), Some(110), 10),
            request(t0, 12, Some(40), Some(210), 20),
            request(t0, 15, Some(50), Some(310), 30),
            request(t0, 20, Some(60), Some(1010), 40),
        ];
        let f = figures(scheduled, &requests);
        assert_eq!((f.completed, f.failed), (4, 0));
        let e2e = f.e2e_ms.unwrap();
        // 100, 200, 300, 1000 ms: p50 between 200 and 300, p90 at k = 2.7
        assert!((e2e.p50 - 250.0).abs() < 1e-9 && (e2e.p90 - 790.0).abs() < 1e-9 && (e2e.max - 1000.0).abs() < 1e-9);
        let ttft = f.ttft_ms.unwrap();
        assert!((ttft.p50 - 35.0).abs() < 1e-9 && (ttft.max - 50.0).abs() < 1e-9, "{ttft:?}");
        assert!((f.last_completion_ms.unwrap() - 1000.0).abs() < 1e-9);
        assert_eq!(f.output_tokens, Some(100));
        assert!((f.total_tok_s.unwrap() - 100.0).abs() < 1e-9, "100 tokens in 1 s");
        assert!((f.send_spread_ms.unwrap() - 10.0).abs() < 1e-9);
    }

    #[test]
    fn failed_requests_count_apart_and_add_no_tokens() {
        let t0 = Instant::now();
        let requests = [request(t0, 0, Some(20), Some(500), 50), request(t0, 0, Some(30), None, 7)];
        let f = figures(t0, &requests);
        assert_eq!((f.completed, f.failed, f.output_tokens), (1, 1, Some(50)));
        assert_eq!(f.ttft_ms.map(|t| t.max), Some(30.0), "a failed request's first token still counts");
        assert_eq!(f.last_completion_ms, Some(500.0));
        let none = figures(t0, &[request(t0, 0, None, None, 0)]);
        assert_eq!((none.e2e_ms, none.ttft_ms, none.output_tokens, none.total_tok_s), (None, None, None, None));
        assert_eq!(none.failed, 1);
    }
}
