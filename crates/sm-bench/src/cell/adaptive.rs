//! Adaptive windows (`--precision`, methodology §12.3): when a window may end, and what its
//! intervals claim when it ended before the longest.
//!
//! A short window sees an earlier part of its requests' lives than the longest window would (all
//! streams start together when the cell does, and a real server's step time grows with the
//! context). Its figures are then not noisy but *placed*: a plain batch-means interval cannot see
//! that. So a window's interval is moved by the trend its sub-windows show, projected to the
//! longest window's centre, and widened by that projection's own uncertainty (the slope's standard
//! error, projected as far); the window may only end when that interval is within the precision:
//! a drifting or noisy cell runs longer, and a cell that stops early claims only what it knows.

use std::sync::Mutex;
use std::time::{Duration, Instant};

use sm_core::precision::{self, BATCHES, Interval, Trend};
use sm_core::stats::Quantiles;

use crate::cell::window::{Figures, Window, tokens_by};
use crate::stream::request_log::RequestLog;

/// An adaptive window (methodology §12.3): it ends once total tok/s and TBT p50 are known within
/// `pct` % (95 % intervals shifted by their trend), but not before `min_duration`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Precision {
    pub pct: f64,
    pub min_duration: Duration,
}

/// Turns the batch-means intervals of a window shorter than `longest` into intervals for the
/// longest window's figures: each figure's trend projected there, with the slope's own
/// uncertainty ([`precision::projected`]); a window as long as the longest is left as it is.
pub(crate) fn account_for_position(f: &mut Figures, longest: Duration) {
    let (len, longest) = (f.measured_s, longest.as_secs_f64());
    let project = |i: Option<Interval>, center: Option<f64>, t: Option<Trend>| match (i, center, t) {
        (Some(i), Some(c), Some(t)) => Some(precision::projected(i, c, t, len, longest)),
        (i, ..) => i,
    };
    f.ci.total_tok_s = project(f.ci.total_tok_s, Some(f.total_tok_s), f.trend.total_tok_s);
    f.ci.per_request_tok_s = project(f.ci.per_request_tok_s, f.per_request_tok_s, f.trend.per_request_tok_s);
    f.ci.tbt_ms_p50 = project(f.ci.tbt_ms_p50, f.tbt_ms.map(|q| q.p50), f.trend.tbt_ms_p50);
    f.ci.tbt_ms_p99 = project(f.ci.tbt_ms_p99, f.tbt_ms.map(|q| q.p99), f.trend.tbt_ms_p99);
}

/// Whether the window `[start, now)` may end: total tok/s and TBT p50 of what the streams have
/// received so far are within `p.pct` with their trend shift. Computed from the live mirrors in
/// place, by binary search at the sub-windows' edges: O(requests × BATCHES × log tokens) a check,
/// not a copy and a pass over every token (the cell's figures come from the full logs afterwards).
pub(crate) fn settled<'a>(
    mirrors: impl IntoIterator<Item = &'a Mutex<Vec<RequestLog>>>,
    window: Window,
    longest: Duration,
    p: Precision,
) -> bool {
    window.len() >= p.min_duration && within(&sums(mirrors, window), window, longest, p)
}

/// What the check needs of the requests in `mirrors` over `window`; over ranks each worker sends
/// its own, over the same window length on its clock, and rank 0 adds them ([`Sums::add`]).
pub(crate) fn sums<'a>(mirrors: impl IntoIterator<Item = &'a Mutex<Vec<RequestLog>>>, window: Window) -> Sums {
    let edges: Vec<Instant> = (0..=BATCHES as u32).map(|i| window.start + window.len() * i / BATCHES as u32).collect();
    let mut sums = Sums::new();
    for mirror in mirrors {
        let logs = mirror.lock().unwrap_or_else(|e| e.into_inner());
        for log in logs.iter() {
            sums.add_log(log, &edges);
        }
    }
    sums
}

/// The check on `sums` of a window of `window`'s length (methodology §12.3).
pub(crate) fn within(sums: &Sums, window: Window, longest: Duration, p: Precision) -> bool {
    let len = window.len().as_secs_f64();
    let within = |center: Option<f64>, batches: Vec<Option<f64>>, trend: Vec<Option<f64>>| {
        let present: Vec<f64> = batches.iter().flatten().copied().collect();
        let Some(center) = center else { return false };
        let Some(i) = precision::batch_interval(center, &present) else { return false };
        let i = match precision::batch_trend(&trend) {
            Some(t) => precision::projected(i, center, t, len, longest.as_secs_f64()),
            None => i,
        };
        i.half_width_pct(center).is_some_and(|h| h <= p.pct)
    };
    let batch_s = len / BATCHES as f64;
    let rate = |v: &[f64]| v.iter().map(|t| Some(t / batch_s)).collect::<Vec<_>>();
    let tbt: Vec<Option<f64>> = sums.tbt.iter().map(|t| Quantiles::of(t).map(|q| q.p50)).collect();
    within(Some(sums.tokens.iter().sum::<f64>() / len), rate(&sums.tokens), rate(&sums.smooth))
        && within(Quantiles::of(&sums.window_tbt).map(|q| q.p50), tbt.clone(), tbt)
}

/// What the settle check sums over the requests: tokens and TBT(r) per sub-window, and TBT(r) over
/// the whole window. It travels between ranks.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub(crate) struct Sums {
    tokens: Vec<f64>,
    /// Tokens per sub-window by [`tokens_by`]: what the total's trend is fitted to.
    smooth: Vec<f64>,
    tbt: Vec<Vec<f64>>,
    window_tbt: Vec<f64>,
}

impl Sums {
    pub(crate) fn new() -> Sums {
        Sums {
            tokens: vec![0.0; BATCHES],
            smooth: vec![0.0; BATCHES],
            tbt: vec![Vec::new(); BATCHES],
            window_tbt: Vec::new(),
        }
    }

    /// Another process's sums of the same window: the check is then over both's requests. Sums of
    /// another shape (another version) are not added: the caller's check fails instead.
    pub(crate) fn add(&mut self, other: Sums) -> bool {
        let shaped = |s: &Sums| s.tokens.len() == BATCHES && s.smooth.len() == BATCHES && s.tbt.len() == BATCHES;
        if !shaped(&other) {
            return false;
        }
        for i in 0..BATCHES {
            self.tokens[i] += other.tokens[i];
            self.smooth[i] += other.smooth[i];
        }
        for (mine, theirs) in self.tbt.iter_mut().zip(other.tbt) {
            mine.extend(theirs);
        }
        self.window_tbt.extend(other.window_tbt);
        true
    }

    /// One request: its points are in arrival order, so each edge is one binary search. Tokens are
    /// the request's running usage where its chunks carry one, its chunk count otherwise (a usage
    /// total at the end is not spread back: the check needs the noise, not the exact level).
    fn add_log(&mut self, log: &RequestLog, edges: &[Instant]) {
        let points = &log.points;
        let Some(first) = points.first() else { return };
        let by_usage = first.usage.is_some();
        let cum = |i: usize| {
            let p = &points[i];
            if by_usage { p.usage.unwrap_or(p.chunks) as f64 } else { p.chunks as f64 }
        };
        let at: Vec<usize> = edges.iter().map(|e| points.partition_point(|p| p.at < *e)).collect();
        // the tokens of points [a, b), and TBT(r) between the first and last of them (§7.3)
        let span = |a: usize, b: usize| -> (f64, Option<f64>) {
            if b <= a {
                return (0.0, None);
            }
            let before = if a == 0 { 0.0 } else { cum(a - 1) };
            let (first, last) = (cum(a), cum(b - 1));
            let ms = (points[b - 1].at - points[a].at).as_secs_f64() * 1000.0;
            (last - before, (last > first).then(|| ms / (last - first)))
        };
        let by: Vec<f64> =
            edges.iter().zip(&at).map(|(&e, &i)| tokens_by(i, points.len(), e, |k| points[k].at, cum)).collect();
        for i in 0..BATCHES {
            self.smooth[i] += by[i + 1] - by[i];
            let (tokens, tbt) = span(at[i], at[i + 1]);
            self.tokens[i] += tokens;
            self.tbt[i].extend(tbt);
        }
        self.window_tbt.extend(span(at[0], at[BATCHES]).1);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cell::window::figures;
    use crate::stream::request_log::Point;

    /// `streams` requests sent at `t0`, each with a token every `step(k)` ms (k: its k-th token),
    /// with running usage.
    fn logs(t0: Instant, streams: usize, tokens: u64, step: impl Fn(u64) -> f64) -> Vec<RequestLog> {
        (0..streams)
            .map(|s| {
                // the streams' steps interleave, as a batch's tokens leave one after the other
                let mut at = t0 + Duration::from_micros(1250 + 2500 * s as u64);
                let mut log = RequestLog::new(t0);
                for k in 1..=tokens {
                    at += Duration::from_secs_f64(step(k) / 1000.0);
                    log.points.push(Point { at, chunks: k, usage: Some(k) });
                }
                log.first_token = log.points.first().map(|p| p.at);
                log
            })
            .collect()
    }

    fn mirrors(logs: Vec<RequestLog>) -> Vec<Mutex<Vec<RequestLog>>> {
        logs.into_iter().map(|l| Mutex::new(vec![l])).collect()
    }

    /// `len` seconds from ten steps after `t0`, when every stream is streaming (a real window opens
    /// at readiness), with its edges between tokens.
    fn window(t0: Instant, len: f64) -> Window {
        let start = t0 + Duration::from_millis(105);
        Window { start, end: start + Duration::from_secs_f64(len) }
    }

    const P: Precision = Precision { pct: 1.0, min_duration: Duration::from_secs(1) };

    #[test]
    fn a_flat_window_settles_at_the_shortest_and_not_before() {
        let t0 = Instant::now();
        let m = mirrors(logs(t0, 4, 1000, |_| 10.0));
        let at = |s: f64| window(t0, s);
        assert!(!settled(&m, at(0.9), Duration::from_secs(6), P), "not before the shortest window");
        assert!(settled(&m, at(1.0), Duration::from_secs(6), P));
    }

    /// Steps 0.5 % slower every second: over the first second the figures are quiet, but the 6 s
    /// window's centre lies 2.5 s later, 1.25 % away; the window may end only once the projection
    /// (and the spread the trend gives the sub-windows) is within 1 %: about 3.7 s.
    #[test]
    fn a_drifting_window_runs_until_its_projected_shift_is_within_the_precision() {
        let t0 = Instant::now();
        let m = mirrors(logs(t0, 4, 1000, |k| 10.0 * (1.0 + 0.00005 * k as f64)));
        let at = |s: f64| window(t0, s);
        let longest = Duration::from_secs(6);
        for s in [1.0, 2.0, 3.0] {
            assert!(!settled(&m, at(s), longest, P), "{s} s");
        }
        assert!(settled(&m, at(4.5), longest, P), "the shift is 0.38 % at 4.5 s");
        assert!(settled(&m, at(1.0), Duration::from_secs(1), P), "a window as long as the longest has no shift");
    }

    #[test]
    fn tokens_by_splits_the_step_in_progress_by_time() {
        let t0 = Instant::now();
        let at = |k: usize| t0 + Duration::from_millis(10 * (k as u64 + 1));
        let cum = |k: usize| (k + 1) as f64;
        let by = |ms: u64| {
            let t = t0 + Duration::from_millis(ms);
            tokens_by((0..3).filter(|&k| at(k) < t).count(), 3, t, at, cum)
        };
        assert_eq!(by(5), 0.0, "before the first token");
        assert_eq!(by(10), 0.0, "a token arriving at t is not yet received");
        assert!((by(15) - 1.5).abs() < 1e-9 && (by(20) - 2.0).abs() < 1e-9);
        assert_eq!(by(99), 3.0, "after the last token");
    }

    /// The check's figures are the window's: the same total and TBT p50 as [`figures`] computes.
    #[test]
    fn the_check_sums_what_the_window_accounting_counts() {
        let t0 = Instant::now();
        let all = logs(t0, 3, 400, |k| 10.0 + (k % 7) as f64);
        let w = Window { start: t0 + Duration::from_millis(300), end: t0 + Duration::from_millis(2300) };
        let f = figures(&all, w, &[], None);
        let edges: Vec<Instant> = (0..=BATCHES as u32).map(|i| w.start + w.len() * i / BATCHES as u32).collect();
        let mut sums = Sums::new();
        all.iter().for_each(|l| sums.add_log(l, &edges));
        assert_eq!(sums.tokens.iter().sum::<f64>(), f.output_tokens as f64);
        assert_eq!(Quantiles::of(&sums.window_tbt).map(|q| q.p50), f.tbt_ms.map(|q| q.p50));
    }

    /// Over ranks each process sums its own requests over the window on its own clock, and rank 0
    /// adds them: the check is then the one a single process holding every request would make.
    #[test]
    fn sums_of_parts_on_their_own_clocks_add_up_to_the_whole() {
        let t0 = Instant::now();
        let all = logs(t0, 6, 400, |k| 10.0 + (k % 5) as f64);
        let w = Window { start: t0 + Duration::from_millis(300), end: t0 + Duration::from_millis(2300) };
        let whole = sums(&[Mutex::new(all.clone())], w);
        // ranks 1 and 2 hold two requests each, timed on clocks 7 s and 9 s ahead of rank 0's
        let shifted = |logs: &[RequestLog], by: Duration| -> Vec<RequestLog> {
            logs.iter()
                .map(|l| {
                    let mut l = l.clone();
                    l.sent += by;
                    l.points.iter_mut().for_each(|p| p.at += by);
                    l
                })
                .collect()
        };
        let mut merged = sums(&[Mutex::new(all[..2].to_vec())], w);
        for (part, secs) in [(&all[2..4], 7), (&all[4..], 9)] {
            let by = Duration::from_secs(secs);
            let theirs = sums(&[Mutex::new(shifted(part, by))], Window { start: w.start + by, end: w.end + by });
            let travelled: Sums = serde_json::from_str(&serde_json::to_string(&theirs).unwrap()).unwrap();
            assert!(merged.add(travelled));
        }
        // equal to the last bits: another clock's instants round differently in floating point
        let close = |a: &[f64], b: &[f64]| {
            a.len() == b.len() && a.iter().zip(b).all(|(x, y)| (x - y).abs() <= 1e-9 * y.abs().max(1.0))
        };
        // per sub-window, in order; the samples in any order
        assert!(close(&merged.tokens, &whole.tokens) && close(&merged.smooth, &whole.smooth), "{merged:?}");
        let same = |a: &[f64], b: &[f64]| {
            let sorted = |v: &[f64]| {
                let mut v = v.to_vec();
                v.sort_by(f64::total_cmp);
                v
            };
            close(&sorted(a), &sorted(b))
        };
        assert!(same(&merged.window_tbt, &whole.window_tbt), "{merged:?}");
        assert!(merged.tbt.iter().zip(&whole.tbt).all(|(m, w)| same(m, w)), "{merged:?}");
        let p = Precision { pct: 1.0, min_duration: Duration::from_secs(1) };
        let longest = Duration::from_secs(5);
        assert_eq!(within(&merged, w, longest, p), within(&whole, w, longest, p));
        // sums of another shape are refused, not added
        assert!(!merged.clone().add(Sums { tokens: vec![1.0], ..Sums::new() }));
    }

    #[test]
    fn a_short_windows_intervals_are_shifted_towards_the_longest_windows_figure() {
        let t0 = Instant::now();
        let all = logs(t0, 4, 1000, |k| 10.0 * (1.0 + 0.0001 * k as f64));
        let mut f = figures(&all, window(t0, 2.0), &[], None);
        let before = f.ci;
        account_for_position(&mut f, Duration::from_secs(6));
        let (b, a) = (before.tbt_ms_p50.unwrap(), f.ci.tbt_ms_p50.unwrap());
        assert_eq!(a.lo, b.lo);
        assert!(a.hi > b.hi * 1.015, "TBT grows: the upper end moves out {b:?} → {a:?}");
        let (b, a) = (before.total_tok_s.unwrap(), f.ci.total_tok_s.unwrap());
        assert!(
            a.lo < b.lo && a.hi == b.hi,
            "total tok/s falls (its batches count whole tokens: noisier): {b:?} → {a:?}"
        );
        let mut full = figures(&all, window(t0, 6.0), &[], None);
        let unshifted = full.ci;
        account_for_position(&mut full, Duration::from_secs(6));
        assert_eq!(full.ci, unshifted, "the longest window is left as it is");
    }
}
