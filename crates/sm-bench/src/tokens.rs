//! Which tokens each chunk carried (methodology §7.3, `output_tokens`): pure functions over a
//! request's chunks.
//!
//! A server with continuous usage says after every chunk how many tokens the request has; then
//! each chunk carries exactly its increase. A server that reports usage only when a request ends
//! (llama.cpp, SGLang without continuous usage stats) says how many tokens all the chunks carried
//! together, and only at the end: that total is spread over the chunks where the tokens arrived,
//! never applied at the instant it arrives. A request cut off before its end has no total of its
//! own; its chunks carry the cell's measured tokens per chunk.

use crate::request_log::{Point, RequestLog};

/// Tokens per chunk, measured from requests whose usage total covered their chunks.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ChunkRatio {
    /// Σ tokens / Σ chunks over the sample.
    pub tokens_per_chunk: f64,
    /// How far the ratio may be from the true one, relative: the last chunk of a finished request
    /// can carry fewer tokens than the others (`max_tokens` is rarely a multiple of the tokens per
    /// chunk), so each finished request may pull the ratio down by up to one chunk's worth.
    pub uncertainty: f64,
    /// Requests in the sample.
    pub requests: u64,
    pub source: RatioSource,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RatioSource {
    /// Requests of the cell that ended with a usage total.
    EndedRequests,
    /// A probe request sent after the cell, on the idle server.
    Probe,
}

impl ChunkRatio {
    /// From `(tokens, chunks)` of each request whose usage covered its chunks; `None` without any.
    pub fn measure(samples: impl IntoIterator<Item = (u64, u64)>, source: RatioSource) -> Option<ChunkRatio> {
        let (mut tokens, mut chunks, mut requests) = (0u64, 0u64, 0u64);
        for (t, c) in samples.into_iter().filter(|&(_, c)| c > 0) {
            tokens += t;
            chunks += c;
            requests += 1;
        }
        (chunks > 0 && tokens > 0).then(|| ChunkRatio {
            tokens_per_chunk: tokens as f64 / chunks as f64,
            uncertainty: requests as f64 / chunks as f64,
            requests,
            source,
        })
    }

    /// From the cell's requests: those with a usage total after chunks that had none.
    pub fn of_logs(logs: &[RequestLog]) -> Option<ChunkRatio> {
        ChunkRatio::measure(logs.iter().filter(|l| l.usage_at_end).filter_map(last_anchor), RatioSource::EndedRequests)
    }
}

/// `(usage, chunks)` at the last chunk whose usage is known.
pub(crate) fn last_anchor(log: &RequestLog) -> Option<(u64, u64)> {
    log.points.iter().rev().find_map(|p| p.usage.map(|u| (u, p.chunks)))
}

/// One request's cumulative tokens after each of its points, and whether that count is estimated
/// (the chunk came after the last usage the request reported, so `ratio` filled in).
///
/// Between two points with usage (or the start and the first one) the increase is spread evenly
/// over the chunks in between. After the last one, each chunk carries `ratio` tokens (1 when no
/// ratio is known: a server without usage).
pub fn attribute(points: &[Point], ratio: Option<f64>) -> Vec<(f64, bool)> {
    let mut out = Vec::with_capacity(points.len());
    let (mut base_chunks, mut base_tokens) = (0u64, 0.0f64);
    let mut i = 0;
    while i < points.len() {
        match points[i..].iter().position(|p| p.usage.is_some()) {
            Some(off) => {
                let anchor = &points[i + off];
                let total = (anchor.usage.unwrap_or(0) as f64).max(base_tokens);
                let span = anchor.chunks.saturating_sub(base_chunks);
                for p in &points[i..=i + off] {
                    let t = if span == 0 {
                        total
                    } else {
                        base_tokens + (total - base_tokens) * p.chunks.saturating_sub(base_chunks) as f64 / span as f64
                    };
                    out.push((t, false));
                }
                (base_chunks, base_tokens) = (anchor.chunks, total);
                i += off + 1;
            }
            None => {
                let per_chunk = ratio.unwrap_or(1.0);
                for p in &points[i..] {
                    out.push((base_tokens + p.chunks.saturating_sub(base_chunks) as f64 * per_chunk, true));
                }
                break;
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, Instant};

    use super::*;

    fn pts(spec: &[(u64, Option<u64>)]) -> Vec<Point> {
        let t0 = Instant::now();
        spec.iter()
            .enumerate()
            .map(|(i, &(chunks, usage))| Point { at: t0 + Duration::from_millis(i as u64), chunks, usage })
            .collect()
    }

    fn tokens(points: &[Point], ratio: Option<f64>) -> Vec<f64> {
        attribute(points, ratio).into_iter().map(|(t, _)| t).collect()
    }

    #[test]
    fn continuous_usage_is_taken_as_is() {
        let p = pts(&[(1, Some(2)), (2, Some(3)), (2, Some(5))]);
        assert_eq!(attribute(&p, None), [(2.0, false), (3.0, false), (5.0, false)]);
    }

    #[test]
    fn a_total_at_the_end_is_spread_over_the_chunks_it_covers() {
        // 4 chunks, 10 tokens: 4 × 3 would be 12, so the last chunk carried 1 (a remainder)
        let p = pts(&[(1, None), (2, None), (3, None), (4, Some(10))]);
        assert_eq!(tokens(&p, Some(7.0)), [2.5, 5.0, 7.5, 10.0], "the ratio plays no part in a covered request");
        assert!(attribute(&p, None).iter().all(|&(_, est)| !est));
    }

    #[test]
    fn chunks_after_the_last_usage_carry_the_ratio_and_are_marked_estimated() {
        let p = pts(&[(1, None), (2, None), (3, None)]);
        assert_eq!(attribute(&p, Some(4.0)), [(4.0, true), (8.0, true), (12.0, true)]);
        assert_eq!(tokens(&p, None), [1.0, 2.0, 3.0], "no ratio: one token per chunk");
        // usage on a middle chunk anchors what came before it
        let p = pts(&[(1, None), (2, Some(6)), (3, None)]);
        assert_eq!(attribute(&p, Some(2.0)), [(3.0, false), (6.0, false), (8.0, true)]);
    }

    #[test]
    fn the_ratio_pools_requests_and_bounds_the_remainder() {
        // K = 3, max_tokens 512: 170 chunks of 3 and one of 2
        let r = ChunkRatio::measure([(512, 171), (512, 171)], RatioSource::EndedRequests).unwrap();
        assert!((r.tokens_per_chunk - 512.0 / 171.0).abs() < 1e-12);
        assert!((3.0 / r.tokens_per_chunk - 1.0) <= r.uncertainty, "the true ratio lies within the bound");
        assert_eq!(r.requests, 2);
        assert_eq!(ChunkRatio::measure([(5, 0)], RatioSource::Probe), None, "no chunks, no ratio");
    }
}
