//! Window accounting: turns what every request of a cell saw into the cell's
//! figures. Pure functions over timestamps — `docs/methodology.md` §7 defines
//! each figure, and this file is that definition in code.

use std::time::{Duration, Instant};

use sm_core::precision::{self, BATCHES, Interval, Trend};
use sm_core::record::{CellIntervals, TokenSource};
use sm_core::server_metrics::Arrived;
use sm_core::slo::RequestFigures;
use sm_core::stats::{Quantiles, median};

use crate::stream::request_log::RequestLog;
use crate::stream::tokens::{ChunkRatio, attribute, last_anchor};

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
    /// Of `output_tokens`, those carried by chunks after the last usage their request reported:
    /// counted as chunks × `chunk_ratio` (or 1 per chunk without a ratio), not told by the server.
    pub estimated_tokens: u64,
    /// The tokens per chunk that counted `estimated_tokens`.
    pub chunk_ratio: Option<ChunkRatio>,
    /// Σ k(m − k)/m over requests whose usage total at their end covered m chunks, k of them inside
    /// the window: how uncertain the split of their totals is when chunks carry varying counts.
    pub split_chunks: f64,
    /// The longest censored gap: W1 − the last token before W1 of a stream still open at W1.
    pub longest_open_gap_ms: Option<f64>,
    /// Every request of the TTFT population (§7.3) with what it saw inside the window, for the SLO and goodput (§11.2).
    pub per_request: Vec<RequestFigures>,
    /// 95 % intervals of the main figures (§12).
    pub ci: CellIntervals,
    /// How the batch-means figures moved across the window's sub-windows (§12.3).
    pub trend: Trends,
    /// A reasoning model's: the wait for the first answer token and the thinking; `None` where no
    /// request thought.
    pub thinking: Option<super::thinking::Thinking>,
    /// A cell sent with tools: the wait for the first tool call, the calls' tokens and whether
    /// their arguments parse; `None` where the requests carried no tools.
    pub tool_calls: Option<super::tool_calls::ToolCalls>,
}

/// The trend of each batch-means figure over the window's [`BATCHES`] sub-windows (slope and its
/// standard error, in the figure's unit per sub-window); `None` where the figure has no interval.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Trends {
    pub total_tok_s: Option<Trend>,
    pub per_request_tok_s: Option<Trend>,
    pub tbt_ms_p50: Option<Trend>,
    pub tbt_ms_p99: Option<Trend>,
}

/// The cell's figures (methodology §7.3). `ratio` gives the tokens per chunk of chunks after their
/// request's last usage (see [`crate::stream::tokens`]); `None` counts them one token each.
pub fn figures(logs: &[RequestLog], window: Window, running: &[RunningSample], ratio: Option<ChunkRatio>) -> Figures {
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
    let per_chunk = ratio.map(|r| r.tokens_per_chunk);
    let (mut output, mut estimated, mut split) = (0.0f64, 0.0f64, 0.0f64);
    let mut tbt = Vec::new();
    let mut gaps = Vec::new();
    let mut requests = 0;
    let mut per_request = Vec::new();
    for log in logs {
        let seen = in_window(log, per_chunk, window, &mut gaps);
        output += seen.tokens;
        estimated += seen.estimated;
        split += seen.split;
        requests += u64::from(seen.any);
        tbt.extend(seen.tbt_ms);
        // the TTFT population (§7.3): every request whose first token came before W1
        if let Some(first) = log.first_token.filter(|&t| t < window.end) {
            per_request.push(RequestFigures {
                tokens: seen.tokens,
                ttft_ms: Some(ms(first - log.sent)),
                ttfa_ms: ttfa_ms(log, window),
                ttftc_ms: ttftc_ms(log, window),
                tbt_ms: seen.tbt_ms,
                silent_ms: seen.tbt_ms.is_none().then(|| silent_ms(log, window)),
            });
        }
    }
    let open_gaps = open_gaps_ms(logs, window);
    let longest_open_gap_ms = open_gaps.iter().copied().reduce(f64::max);
    gaps.extend(open_gaps);
    let ttft: Vec<f64> = per_request.iter().filter_map(|r| r.ttft_ms).collect();
    let per_user: Vec<f64> = tbt.iter().filter(|&&t| t > 0.0).map(|t| 1000.0 / t).collect();
    let completed = logs.iter().filter(|r| r.ended.is_some_and(|t| window.contains(t))).count() as u64;
    let measured_s = window.len().as_secs_f64();
    let output_tokens = output.round() as u64;
    let total_tok_s = if measured_s > 0.0 { output_tokens as f64 / measured_s } else { 0.0 };
    let per_request_tok_s = median(&per_user);
    let tbt_ms = Quantiles::of(&tbt);
    let (ci, trend) = intervals(logs, window, per_chunk, &ttft, (total_tok_s, per_request_tok_s, tbt_ms));
    Figures {
        output_tokens,
        measured_s,
        total_tok_s,
        per_request_tok_s,
        ttft_ms: Quantiles::of(&ttft),
        tbt_ms,
        chunk_gap_ms: Quantiles::of(&gaps),
        avg_active: if running.is_empty() { client_active(logs, window) } else { time_weighted(running, window) },
        completed,
        requests,
        token_source,
        prompt_cache_hit_pct: prompt_cache_hit_pct(logs),
        retried: logs.iter().filter(|r| r.retried).count() as u64,
        estimated_tokens: estimated.round() as u64,
        chunk_ratio: ratio.filter(|_| estimated > 0.0),
        split_chunks: split,
        longest_open_gap_ms,
        per_request,
        ci,
        trend,
        thinking: super::thinking::thinking(logs, (window.start, window.end), per_chunk),
        tool_calls: super::tool_calls::tool_calls(logs, (window.start, window.end), per_chunk),
    }
}

/// Every stream's tokens (attributed, §7.1) over `window`, to set the server's counter against
/// over its scrapes' span (§14.1): those that arrived inside it, as a cell's total counts them, and
/// bounds on those generated inside it. A chunk's tokens were generated after its stream's previous
/// chunk arrived (after the request was sent, for its first) and before it arrived: a busy server
/// sends what it generated meanwhile in one chunk, so a chunk may span an edge of the window.
pub fn arrivals(logs: &[RequestLog], per_chunk: Option<f64>, window: Window) -> Arrived {
    let mut out = Arrived::default();
    for log in logs {
        let counts = attribute(&log.points, per_chunk);
        let (mut after, mut before) = (log.sent, 0.0);
        for (p, &(tokens, _)) in log.points.iter().zip(&counts) {
            let carried = tokens - before;
            if window.contains(p.at) {
                out.arrived += carried;
            }
            if after >= window.start && p.at < window.end {
                out.surely += carried;
            }
            if p.at >= window.start && after < window.end {
                out.possibly += carried;
            }
            (after, before) = (p.at, tokens);
        }
    }
    out
}

/// The figures of one of the window's [`BATCHES`] sub-windows.
struct Batch {
    total_tok_s: f64,
    /// Total tok/s with the tokens of the step in progress at each edge split by time
    /// ([`tokens_by`]): what the trend is fitted to, free of whole-step counting noise.
    smooth_tok_s: f64,
    per_request_tok_s: Option<f64>,
    tbt_ms: Option<Quantiles>,
}

/// The window cut into [`BATCHES`] equal sub-windows, each measured like a window of its own.
fn batches(logs: &[RequestLog], window: Window, per_chunk: Option<f64>) -> Vec<Batch> {
    let len = window.len() / BATCHES as u32;
    let secs = len.as_secs_f64();
    if secs <= 0.0 {
        return Vec::new();
    }
    let edges: Vec<Instant> = (0..=BATCHES as u32).map(|i| window.start + len * i).collect();
    let mut smooth = [0.0; BATCHES];
    for log in logs {
        let counts = attribute(&log.points, per_chunk);
        let by = |t: Instant| {
            let i = log.points.partition_point(|p| p.at < t);
            tokens_by(i, log.points.len(), t, |k| log.points[k].at, |k| counts[k].0)
        };
        let at: Vec<f64> = edges.iter().map(|&e| by(e)).collect();
        smooth.iter_mut().enumerate().for_each(|(i, s)| *s += at[i + 1] - at[i]);
    }
    let mut scratch = Vec::new();
    (0..BATCHES)
        .map(|i| {
            let sub = Window { start: edges[i], end: edges[i + 1] };
            let (mut tokens, mut tbt) = (0.0, Vec::new());
            for log in logs {
                let seen = in_window(log, per_chunk, sub, &mut scratch);
                tokens += seen.tokens;
                tbt.extend(seen.tbt_ms);
                scratch.clear();
            }
            let per_user: Vec<f64> = tbt.iter().filter(|&&t| t > 0.0).map(|t| 1000.0 / t).collect();
            Batch {
                total_tok_s: tokens / secs,
                smooth_tok_s: smooth[i] / secs,
                per_request_tok_s: median(&per_user),
                tbt_ms: Quantiles::of(&tbt),
            }
        })
        .collect()
}

/// The 95 % intervals of §12: batch means for the figures the streams make together (total and
/// per-request tok/s, TBT), order statistics for TTFT percentiles (one independent sample per
/// request); and the batch-means figures' trends across the sub-windows.
fn intervals(
    logs: &[RequestLog],
    window: Window,
    per_chunk: Option<f64>,
    ttft: &[f64],
    (total, per_request, tbt): (f64, Option<f64>, Option<Quantiles>),
) -> (CellIntervals, Trends) {
    let b = batches(logs, window, per_chunk);
    let series = |pick: &dyn Fn(&Batch) -> Option<f64>| -> Vec<Option<f64>> { b.iter().map(pick).collect() };
    let of = |center: Option<f64>, values: &[Option<f64>]| -> (Option<Interval>, Option<Trend>) {
        let present: Vec<f64> = values.iter().flatten().copied().collect();
        let interval = center.and_then(|c| precision::batch_interval(c, &present));
        (interval, interval.and(precision::batch_trend(values)))
    };
    // total tok/s: the noise from the counts (§12.1), the trend from the smooth counts
    let smooth_trend = precision::batch_trend(&series(&|b| Some(b.smooth_tok_s)));
    let mut sorted = ttft.to_vec();
    sorted.sort_by(f64::total_cmp);
    let (total_ci, _) = of(Some(total), &series(&|b| Some(b.total_tok_s)));
    let total_trend = total_ci.and(smooth_trend);
    let (per_request_ci, per_request_trend) = of(per_request, &series(&|b| b.per_request_tok_s));
    let (p50_ci, p50_trend) = of(tbt.map(|q| q.p50), &series(&|b| b.tbt_ms.map(|q| q.p50)));
    let (p99_ci, p99_trend) = of(tbt.map(|q| q.p99), &series(&|b| b.tbt_ms.map(|q| q.p99)));
    let ci = CellIntervals {
        total_tok_s: total_ci,
        per_request_tok_s: per_request_ci,
        ttft_ms_p50: precision::quantile_interval(&sorted, 50.0),
        ttft_ms_p90: precision::quantile_interval(&sorted, 90.0),
        tbt_ms_p50: p50_ci,
        tbt_ms_p99: p99_ci,
        // a thinking cell's: its own population (crate::cell::thinking)
        ttfa_ms_p50: None,
        ttfa_ms_p90: None,
        // a cell with tools': its own population (crate::cell::tool_calls)
        ttftc_ms_p50: None,
        ttftc_ms_p90: None,
    };
    let trend = Trends {
        total_tok_s: total_trend,
        per_request_tok_s: per_request_trend,
        tbt_ms_p50: p50_trend,
        tbt_ms_p99: p99_trend,
    };
    (ci, trend)
}

/// What one stream brought into the window.
pub(crate) struct InWindow {
    /// Tokens (attributed, §7.1) of its chunks inside the window.
    pub(crate) tokens: f64,
    /// Of `tokens`, those counted at the measured tokens per chunk.
    estimated: f64,
    /// k(m − k)/m when its usage total at the end covered m chunks, k of them inside the window.
    split: f64,
    /// TBT(r) over its in-window chunks; `None` with fewer than two tokens there.
    tbt_ms: Option<f64>,
    /// Whether it had a token-bearing chunk inside the window.
    pub(crate) any: bool,
}

/// One stream's in-window tokens and TBT; its gaps between in-window chunks go to `gaps`.
pub(crate) fn in_window(log: &RequestLog, per_chunk: Option<f64>, window: Window, gaps: &mut Vec<f64>) -> InWindow {
    let counts = attribute(&log.points, per_chunk);
    let mut seen = InWindow { tokens: 0.0, estimated: 0.0, split: 0.0, tbt_ms: None, any: false };
    let (mut prev_tokens, mut prev_chunks, mut covered_in) = (0.0, 0u64, 0u64);
    let mut first_in: Option<(Instant, f64)> = None;
    let mut last_in: Option<(Instant, f64)> = None;
    for (p, &(tokens, guessed)) in log.points.iter().zip(&counts) {
        if window.contains(p.at) {
            let carried = tokens - prev_tokens;
            seen.tokens += carried;
            if guessed {
                seen.estimated += carried;
            } else {
                covered_in += p.chunks.saturating_sub(prev_chunks);
            }
            if let Some((at, _)) = last_in {
                gaps.push(ms(p.at - at));
            }
            first_in.get_or_insert((p.at, tokens));
            last_in = Some((p.at, tokens));
        }
        prev_tokens = tokens;
        prev_chunks = p.chunks;
    }
    if let Some((_, m)) = last_anchor(log).filter(|_| log.usage_at_end && covered_in > 0) {
        let (k, m) = (covered_in as f64, m as f64);
        seen.split = (k * (m - k) / m).max(0.0);
    }
    if let (Some((a_at, a_tokens)), Some((b_at, b_tokens))) = (first_in, last_in) {
        seen.any = true;
        seen.tbt_ms = (b_tokens > a_tokens).then(|| ms(b_at - a_at) / (b_tokens - a_tokens));
    }
    seen
}

/// A request's wait for its first answer token, as an SLO bound reads it (§11.2): from its send to
/// its first answer chunk where that came before the window closed; infinite for a request that
/// ended before then with no answer (its thinking used up `max_tokens`); unknown while it still
/// thinks. The population is TTFT's: every request whose first token came before the window closed.
fn ttfa_ms(log: &RequestLog, window: Window) -> Option<f64> {
    match log.first_answer {
        Some(a) if a < window.end => Some(ms(a - log.sent)),
        None if log.ended.is_some_and(|t| t < window.end) => Some(f64::INFINITY),
        _ => None,
    }
}

/// A request's wait for its first tool-call delta, as an SLO bound reads it (§7.3.1, §11.2): from
/// its send to that delta where it came before the window closed; infinite for a request sent with
/// tools that ended before then with no call (its user waited for a call that never came); unknown
/// while its call may still come, and for a request sent without tools. The population is TTFT's.
fn ttftc_ms(log: &RequestLog, window: Window) -> Option<f64> {
    match log.first_tool_call {
        _ if !log.tools => None,
        Some(c) if c < window.end => Some(ms(c - log.sent)),
        None if log.ended.is_some_and(|t| t < window.end) => Some(f64::INFINITY),
        _ => None,
    }
}

/// The longest time inside the window that `log` went without a token while it streamed (from its
/// first token, or W0, to its end, or W1): what goodput holds a request without a TBT to (§11.2).
/// The window's edges cut the gaps they fall in, so this is at most the request's real silence.
fn silent_ms(log: &RequestLog, window: Window) -> f64 {
    let Some(first) = log.first_token else { return 0.0 };
    let from = first.max(window.start);
    let to = log.ended.map_or(window.end, |e| e.min(window.end));
    if to <= from {
        return 0.0;
    }
    let mut last = from;
    let mut longest = Duration::ZERO;
    for p in log.points.iter().filter(|p| p.at > from && p.at < to) {
        longest = longest.max(p.at - last);
        last = p.at;
    }
    ms(longest.max(to - last))
}

/// The gaps the window's end cuts off: for every stream that had received a token before W1 and
/// had not ended by then, W1 − its last token before W1. A stream that went silent shortly before
/// W1 shows here, not among the gaps between two chunks.
fn open_gaps_ms(logs: &[RequestLog], window: Window) -> Vec<f64> {
    logs.iter()
        .filter(|r| r.ended.is_none_or(|t| t >= window.end))
        .filter_map(|r| r.points.iter().rev().find(|p| p.at < window.end))
        .map(|p| ms(window.end - p.at))
        .collect()
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

/// A request's tokens received by `t`, the tokens of the step in progress at `t` counted in
/// proportion to how far into it `t` lies. A sub-window's plain count moves by a whole step of every
/// stream (the streams step together) as an edge crosses a step, noise that a slope projected far
/// ahead multiplies; this one moves smoothly. `i`: the first of the `n` points at or after `t`;
/// `at` and `cum` give each point's arrival and the request's tokens with it.
pub(crate) fn tokens_by(
    i: usize,
    n: usize,
    t: Instant,
    at: impl Fn(usize) -> Instant,
    cum: impl Fn(usize) -> f64,
) -> f64 {
    match i {
        0 => 0.0,
        i if i >= n => cum(n - 1),
        i => {
            let (a, b) = (at(i - 1), at(i));
            let f = if b > a { (t - a).as_secs_f64() / (b - a).as_secs_f64() } else { 1.0 };
            cum(i - 1) + (cum(i) - cum(i - 1)) * f
        }
    }
}

#[cfg(test)]
mod tests;
