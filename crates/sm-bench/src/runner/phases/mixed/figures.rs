//! The mixed-prefill figures (methodology §13.3): pure functions of the background streams' chunk
//! times and the probe's send and first token, so that each is unit-tested on made-up times.

use std::time::{Duration, Instant};

use sm_core::phases::mixed::{MAX_TIMELINE_BINS, TIMELINE_BIN_MS, Timeline};

/// One token-bearing chunk of a background request: when it arrived and how many tokens it carried.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Emission {
    pub at: Instant,
    pub tokens: u64,
}

/// The probe's two instants: sent, and its first token.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProbeTimes {
    pub sent: Instant,
    pub first_token: Instant,
}

/// The figures of one probe.
#[derive(Debug, Clone, PartialEq)]
pub struct ProbeFigures {
    pub before_tok_s: Option<f64>,
    pub during_tok_s: Option<f64>,
    pub after_tok_s: Option<f64>,
    pub longest_stall: Option<Duration>,
    pub timeline: Timeline,
}

/// Every figure of a probe. `requests` holds each background request's chunks in arrival order;
/// `window` is the length of the before and after intervals.
pub fn probe_figures(requests: &[Vec<Emission>], probe: ProbeTimes, window: Duration) -> ProbeFigures {
    let before = probe.sent.checked_sub(window).unwrap_or(probe.sent);
    let after = probe.first_token + window;
    ProbeFigures {
        before_tok_s: rate(requests, before, probe.sent),
        during_tok_s: rate(requests, probe.sent, probe.first_token),
        after_tok_s: rate(requests, probe.first_token, after),
        longest_stall: longest_stall(requests, probe.sent, probe.first_token),
        timeline: timeline(requests, probe, before, after),
    }
}

/// Background tokens whose chunk arrived in `[from, to)`, per second of it; `None` for an empty
/// interval.
pub fn rate(requests: &[Vec<Emission>], from: Instant, to: Instant) -> Option<f64> {
    let secs = to.checked_duration_since(from)?.as_secs_f64();
    (secs > 0.0).then(|| tokens_in(requests, from, to) as f64 / secs)
}

fn tokens_in(requests: &[Vec<Emission>], from: Instant, to: Instant) -> u64 {
    requests.iter().flatten().filter(|e| e.at >= from && e.at < to).map(|e| e.tokens).sum()
}

/// The longest gap between two consecutive chunks of one background request whose span overlaps
/// `(from, to)`: what a background user saw stop while the probe was prefilled. A request's own
/// wait for its first chunk is not a gap (it is that request's TTFT, not a stall). `None` when no
/// request had chunks on both sides of any instant of the interval.
pub fn longest_stall(requests: &[Vec<Emission>], from: Instant, to: Instant) -> Option<Duration> {
    requests
        .iter()
        .flat_map(|r| r.windows(2))
        .filter(|w| w[1].at > from && w[0].at < to)
        .map(|w| w[1].at - w[0].at)
        .max()
}

/// The bin width for a timeline over `span`: [`TIMELINE_BIN_MS`], or wider so that the span fits in
/// [`MAX_TIMELINE_BINS`] bins (a whole number of milliseconds).
pub fn bin_width(span: Duration) -> Duration {
    let base = Duration::from_secs_f64(TIMELINE_BIN_MS / 1000.0);
    let needed = span.as_secs_f64() * 1000.0 / MAX_TIMELINE_BINS as f64;
    base.max(Duration::from_millis(needed.ceil() as u64))
}

/// The bin width and count of a timeline over `[from, to)`: whole bins, so that a short last bin
/// does not read as a dip.
fn bins(from: Instant, to: Instant) -> (Duration, usize) {
    let span = to.saturating_duration_since(from);
    let bin = bin_width(span);
    (bin, (span.as_nanos().div_ceil(bin.as_nanos()).max(1) as usize).min(MAX_TIMELINE_BINS))
}

/// When a probe's last figure is known: the end of its timeline's last bin (at or after its
/// after interval). The runner waits until then before it takes the figures.
pub fn figures_known(probe: ProbeTimes, window: Duration) -> Instant {
    let from = probe.sent.checked_sub(window).unwrap_or(probe.sent);
    let (bin, n) = bins(from, probe.first_token + window);
    (from + bin * n as u32).max(probe.first_token + window)
}

/// Background tokens per bin over `[from, to)` rounded up to whole bins, bins laid from `from`.
pub fn timeline(requests: &[Vec<Emission>], probe: ProbeTimes, from: Instant, to: Instant) -> Timeline {
    let (bin, n) = bins(from, to);
    let mut tokens = vec![0u64; n];
    let to = from + bin * n as u32;
    for e in requests.iter().flatten().filter(|e| e.at >= from && e.at < to) {
        let i = ((e.at - from).as_nanos() / bin.as_nanos()) as usize;
        if let Some(slot) = tokens.get_mut(i) {
            *slot += e.tokens;
        }
    }
    let rel = |t: Instant| -> f64 {
        let s = if t >= probe.sent { (t - probe.sent).as_secs_f64() } else { -(probe.sent - t).as_secs_f64() };
        (s * 1e6).round() / 1e6
    };
    Timeline { start_s: rel(from), bin_ms: bin.as_secs_f64() * 1000.0, tokens, first_token_s: rel(probe.first_token) }
}

/// The background's rate over the `window` before `now`, for the wait between probes.
pub fn recent_rate(requests: &[Vec<Emission>], now: Instant, window: Duration) -> Option<f64> {
    rate(requests, now.checked_sub(window)?, now)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(t0: Instant, v: u64) -> Instant {
        t0 + Duration::from_millis(v)
    }

    /// Two streams: one token every 10 ms from 0 to 2000 ms, except that nothing arrives between
    /// 1000 ms (the send) and 1200 ms (the first token); stream b sends 2 tokens per chunk.
    fn streams(t0: Instant) -> Vec<Vec<Emission>> {
        let times: Vec<u64> = (0..200).map(|i| i * 10).filter(|&t| !(1001..1200).contains(&t)).collect();
        let a = times.iter().map(|&t| Emission { at: ms(t0, t), tokens: 1 }).collect();
        let b = times.iter().map(|&t| Emission { at: ms(t0, t + 5), tokens: 2 }).collect();
        vec![a, b]
    }

    #[test]
    fn before_during_and_after_count_tokens_in_their_intervals() {
        let t0 = Instant::now();
        let probe = ProbeTimes { sent: ms(t0, 1000), first_token: ms(t0, 1200) };
        let f = probe_figures(&streams(t0), probe, Duration::from_millis(500));
        // [500, 1000): 50 chunks of a (1 token) and 50 of b (2 tokens) in 0.5 s
        assert!((f.before_tok_s.unwrap() - 300.0).abs() < 1e-9, "{f:?}");
        // [1000, 1200): a's chunk at 1000 and b's at 1005, then nothing until the first token
        let during = f.during_tok_s.unwrap();
        assert!((during - (1.0 + 2.0) / 0.2).abs() < 1e-9, "{during}");
        // [1200, 1700): 50 + 50 chunks again
        assert!((f.after_tok_s.unwrap() - 300.0).abs() < 1e-9);
        // a: 1000 → 1200; b: 1005 → 1205
        assert_eq!(f.longest_stall, Some(Duration::from_millis(200)));
    }

    #[test]
    fn a_stall_must_overlap_the_prefill_and_a_new_requests_wait_is_not_one() {
        let t0 = Instant::now();
        let e = |t| Emission { at: ms(t0, t), tokens: 1 };
        // one request with a 300 ms gap before the probe, another that starts during it
        let reqs = vec![vec![e(0), e(300), e(310), e(320)], vec![e(600), e(610)]];
        assert_eq!(longest_stall(&reqs, ms(t0, 400), ms(t0, 500)), None);
        assert_eq!(longest_stall(&reqs, ms(t0, 250), ms(t0, 500)), Some(Duration::from_millis(300)));
        assert_eq!(longest_stall(&reqs, ms(t0, 605), ms(t0, 700)), Some(Duration::from_millis(10)));
        assert_eq!(rate(&reqs, ms(t0, 5), ms(t0, 5)), None);
    }

    #[test]
    fn the_timeline_bins_every_token_once_at_100_ms() {
        let t0 = Instant::now();
        let reqs = streams(t0);
        let probe = ProbeTimes { sent: ms(t0, 1000), first_token: ms(t0, 1200) };
        let tl = timeline(&reqs, probe, ms(t0, 500), ms(t0, 1650));
        assert_eq!((tl.bin_ms, tl.tokens.len(), tl.start_s, tl.first_token_s), (100.0, 12, -0.5, 0.2));
        assert_eq!(tl.tokens.iter().sum::<u64>(), tokens_in(&reqs, ms(t0, 500), ms(t0, 1700)), "whole bins");
        assert_eq!(tl.tokens[11], 30, "the last bin is a whole one");
        let known = figures_known(probe, Duration::from_millis(500));
        assert_eq!(known, ms(t0, 1700), "the timeline of [500, 1700) ends there");
        let uneven = ProbeTimes { sent: ms(t0, 1000), first_token: ms(t0, 1150) };
        assert_eq!(figures_known(uneven, Duration::from_millis(500)), ms(t0, 1700), "after the 1650 of the window");
        assert_eq!(tl.tokens[0], 30, "10 chunks of 1 and 10 of 2");
        assert_eq!(tl.tokens[5], 3, "the bin of the send: only the chunks at 1000 and 1005");
        assert_eq!(tl.tokens[6], 0, "inside the prefill");
    }

    #[test]
    fn a_long_span_gets_wider_bins_and_never_more_than_the_cap() {
        assert_eq!(bin_width(Duration::from_secs(10)), Duration::from_millis(100));
        let wide = bin_width(Duration::from_secs(1000));
        assert!(wide > Duration::from_millis(100));
        let t0 = Instant::now();
        let probe = ProbeTimes { sent: ms(t0, 1000), first_token: ms(t0, 999_000) };
        let reqs = vec![vec![Emission { at: ms(t0, 999_999), tokens: 7 }]];
        let tl = timeline(&reqs, probe, t0, ms(t0, 1_000_000));
        assert!(tl.tokens.len() <= MAX_TIMELINE_BINS);
        assert_eq!(tl.tokens.iter().sum::<u64>(), 7, "the last token is binned");
    }
}
