//! How long an open-loop level waits for its requests after its last due time (methodology §13.1,
//! *end of a level*): its own bound, from what its requests show while they run — the time to the
//! first token and the time between tokens × the most tokens a request may ask for — never less
//! than [`MIN_DRAIN`] and never more than `--drain-max`. A request that is still streaming is
//! therefore waited for as long as a request of this level needs; a dead stream is ended sooner by
//! the stall timeout, as a failure.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use sm_client::http::JsonBody;
use sm_core::stats::percentile;

use crate::stream::request::Observer;

/// The shortest wait after the last due time, whatever the level shows.
pub const MIN_DRAIN: Duration = Duration::from_secs(5);

/// The bound is this many times the level's expected time for its longest request: a request
/// still running then is far outside what its level showed.
pub const DRAIN_FACTOR: f64 = 2.0;

/// The percentile of the level's TTFT and TBT the bound is taken from.
const BOUND_PCT: f64 = 90.0;

/// One request's progress while it runs, written by its own task and read by the level's watcher
/// (its own cache line: requests on different cores never write the same line).
#[derive(Debug, Default)]
#[repr(align(128))]
pub struct Progress {
    /// Nanoseconds after the level's start, plus one (0: not yet).
    first_ns: AtomicU64,
    last_ns: AtomicU64,
    tokens: AtomicU64,
}

/// What one request had shown at a moment, seconds after the level's start.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Shown {
    pub due_s: f64,
    pub first_token_s: Option<f64>,
    pub last_token_s: Option<f64>,
    pub tokens: u64,
}

impl Progress {
    pub fn shown(&self, due_s: f64) -> Shown {
        let at = |ns: u64| (ns > 0).then(|| (ns - 1) as f64 / 1e9);
        Shown {
            due_s,
            first_token_s: at(self.first_ns.load(Ordering::Relaxed)),
            last_token_s: at(self.last_ns.load(Ordering::Relaxed)),
            tokens: self.tokens.load(Ordering::Relaxed),
        }
    }
}

/// The observer a request of a level streams through: it stamps its own [`Progress`].
pub struct Stamp<'a> {
    pub progress: &'a Progress,
    pub origin: Instant,
}

impl Stamp<'_> {
    fn now_ns(&self) -> u64 {
        self.origin.elapsed().as_nanos() as u64 + 1
    }
}

impl Observer for Stamp<'_> {
    fn first_token(&self, _ttft: Duration) {
        self.progress.first_ns.store(self.now_ns(), Ordering::Relaxed);
    }
    fn tokens(&self, tokens: u64, _since_last: Option<Duration>) {
        self.progress.tokens.fetch_add(tokens, Ordering::Relaxed);
        self.progress.last_ns.store(self.now_ns(), Ordering::Relaxed);
    }
}

/// The level's wait after its last due time, from what its requests have shown so far:
/// [`DRAIN_FACTOR`] × (TTFT p90 from the due time + TBT p90 × `max_tokens`), within
/// [[`MIN_DRAIN`], `max`] (a `max` below [`MIN_DRAIN`] wins). With no request that has shown its
/// TTFT and TBT yet there is nothing to bound the wait by but `max` (the first-token and stall
/// timeouts still end dead streams).
pub fn bound(shown: &[Shown], max_tokens: u64, max: Duration) -> Duration {
    let ttft: Vec<f64> = shown.iter().filter_map(|s| Some(s.first_token_s? - s.due_s)).collect();
    let tbt: Vec<f64> = shown
        .iter()
        .filter_map(|s| {
            let (first, last) = (s.first_token_s?, s.last_token_s?);
            // the first chunk's tokens arrived at the first token: the gaps are the rest
            (s.tokens >= 2 && last > first).then(|| (last - first) / (s.tokens - 1) as f64)
        })
        .collect();
    let (Some(ttft), Some(tbt)) = (percentile(&ttft, BOUND_PCT), percentile(&tbt, BOUND_PCT)) else {
        return max;
    };
    let expected = ttft.max(0.0) + tbt * max_tokens as f64;
    let secs = (DRAIN_FACTOR * expected).clamp(MIN_DRAIN.min(max).as_secs_f64(), max.as_secs_f64());
    Duration::from_secs_f64(secs)
}

/// The most output tokens any of `bodies` asks for (`max_tokens`, `max_completion_tokens` or
/// `max_output_tokens`); `None` when none says.
pub fn most_tokens(bodies: &[JsonBody]) -> Option<u64> {
    bodies
        .iter()
        .filter_map(|b| {
            let v: serde_json::Value = serde_json::from_slice(b.as_bytes()).ok()?;
            ["max_tokens", "max_completion_tokens", "max_output_tokens"].iter().find_map(|k| v[k].as_u64())
        })
        .max()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shown(due: f64, first: f64, last: f64, tokens: u64) -> Shown {
        Shown { due_s: due, first_token_s: Some(first), last_token_s: Some(last), tokens }
    }

    #[test]
    fn the_bound_is_twice_the_longest_request_the_level_shows() {
        // 50 ms to the first token, 2 ms a token: 4,096 tokens take 8.24 s, the bound is twice that
        let s: Vec<Shown> = (0..10).map(|i| shown(i as f64, i as f64 + 0.05, i as f64 + 0.05 + 0.2, 101)).collect();
        let b = bound(&s, 4096, Duration::from_secs(600)).as_secs_f64();
        assert!((b - 2.0 * (0.05 + 0.002 * 4096.0)).abs() < 1e-6, "{b}");
    }

    #[test]
    fn the_bound_stays_within_its_floor_and_the_cap() {
        let fast: Vec<Shown> = (0..4).map(|i| shown(0.0, 0.001, 0.001 + 0.001 * i as f64, 2 + i)).collect();
        assert_eq!(bound(&fast, 8, Duration::from_secs(600)), MIN_DRAIN);
        let slow: Vec<Shown> = (0..4).map(|_| shown(0.0, 1.0, 11.0, 11)).collect();
        assert_eq!(bound(&slow, 100_000, Duration::from_secs(60)), Duration::from_secs(60));
        // a cap below the floor wins: the user asked for it
        assert_eq!(bound(&fast, 8, Duration::from_secs(1)), Duration::from_secs(1));
        assert_eq!(bound(&slow, 100, Duration::from_secs(2)), Duration::from_secs(2));
    }

    #[test]
    fn without_a_first_token_and_a_gap_there_is_only_the_cap() {
        let waiting = [Shown { due_s: 0.0, ..Shown::default() }];
        assert_eq!(bound(&waiting, 512, Duration::from_secs(90)), Duration::from_secs(90));
        // one token only: a TTFT but no gap yet
        let one = [Shown { due_s: 0.0, first_token_s: Some(0.1), last_token_s: Some(0.1), tokens: 1 }];
        assert_eq!(bound(&one, 512, Duration::from_secs(90)), Duration::from_secs(90));
    }

    #[test]
    fn the_wait_for_the_first_token_counts_from_the_due_time() {
        // queued 3 s before the first token: the bound holds the queue
        let s = [shown(1.0, 4.0, 4.1, 11)];
        let b = bound(&s, 100, Duration::from_secs(600)).as_secs_f64();
        assert!((b - 2.0 * (3.0 + 1.0)).abs() < 1e-6, "{b}");
    }

    #[test]
    fn a_stamp_records_first_and_last_token_and_the_count() {
        let p = Progress::default();
        let origin = Instant::now();
        let stamp = Stamp { progress: &p, origin };
        assert_eq!(p.shown(0.0).first_token_s, None);
        stamp.first_token(Duration::ZERO);
        stamp.tokens(1, None);
        stamp.tokens(3, Some(Duration::from_millis(1)));
        let s = p.shown(0.5);
        assert_eq!((s.due_s, s.tokens), (0.5, 4));
        assert!(s.first_token_s.unwrap() <= s.last_token_s.unwrap());
    }

    #[test]
    fn the_most_tokens_any_body_asks_for() {
        let b = |s: &str| JsonBody::new(&serde_json::from_str::<serde_json::Value>(s).unwrap());
        let bodies = [b(r#"{"max_tokens": 16}"#), b(r#"{"max_completion_tokens": 2048}"#), b(r#"{"prompt": "x"}"#)];
        assert_eq!(most_tokens(&bodies), Some(2048));
        assert_eq!(most_tokens(&[b(r#"{"prompt": "x"}"#)]), None);
    }
}
