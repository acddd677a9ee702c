//! Which tokens each chunk carried (methodology §7.3, `output_tokens`): pure functions over a
//! request's chunks.
//!
//! A server with continuous usage says after every chunk how many tokens the request has; then
//! each chunk carries exactly its increase. A server that reports usage only when a request ends
//! (llama.cpp, SGLang without continuous usage stats) says how many tokens all the chunks carried
//! together, and only at the end: that total is spread over the chunks where the tokens arrived,
//! never applied at the instant it arrives. A request cut off before its end has no total of its
//! own; its chunks carry the cell's measured tokens per chunk.

use std::time::Instant;

use crate::stream::request_log::{Point, RequestLog};

/// Tokens per chunk, measured from requests whose usage total covered their chunks.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ChunkRatio {
    /// Σ tokens / Σ chunks over the sample.
    pub tokens_per_chunk: f64,
    /// How far the ratio may be from the true one, relative: the last chunk of a finished request
    /// can carry fewer tokens than the others (`max_tokens` is rarely a multiple of the tokens per
    /// chunk), but never fewer than one. So each finished request may pull the ratio down by up to
    /// K − 1 tokens where every chunk carries K (none at K = 1), and by ρ − 1 on average where the
    /// counts vary: (requests / Σ m) × (K − 1)/K, or × (ρ − 1)/ρ.
    pub uncertainty: f64,
    /// Requests in the sample.
    pub requests: u64,
    /// Chunks in the sample (Σ m).
    pub chunks: u64,
    pub spread: ChunkSpread,
    pub source: RatioSource,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RatioSource {
    /// Requests of the cell that ended with a usage total.
    EndedRequests,
    /// Probe requests sent together after the cell, on the otherwise idle server; `batch` of
    /// them ended with a usage total.
    Probe { batch: u32 },
}

/// Whether every chunk carries the same number of tokens.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum ChunkSpread {
    /// One count K explains every request: all its chunks carry K but one shorter (the last, as
    /// `max_tokens` runs out). A fixed K per chunk (a server batching its output) looks like this.
    Constant,
    /// No single K does (speculative decoding: each step emits 1 + the accepted drafts, varying
    /// by request and by batch). `sd` is the standard deviation of one chunk's tokens, estimated
    /// from how the requests' ratios scatter (see [`chunk_sd`]); `None` from a single request,
    /// which cannot tell how much they vary.
    Variable { sd: Option<f64> },
}

/// z of a two-sided 95 % normal bound: the count's error bound is this many standard deviations.
pub const Z95: f64 = 1.96;

impl ChunkRatio {
    /// From `(tokens, chunks)` of each request whose usage covered its chunks; `None` without any.
    pub fn measure(samples: impl IntoIterator<Item = (u64, u64)>, source: RatioSource) -> Option<ChunkRatio> {
        let samples: Vec<(u64, u64)> = samples.into_iter().filter(|&(_, c)| c > 0).collect();
        let tokens: u64 = samples.iter().map(|s| s.0).sum();
        let chunks: u64 = samples.iter().map(|s| s.1).sum();
        let requests = samples.len() as u64;
        (chunks > 0 && tokens > 0).then(|| {
            let tokens_per_chunk = tokens as f64 / chunks as f64;
            let (spread, short_share) = match constant_count(&samples) {
                Some(k) => (ChunkSpread::Constant, (k - 1) as f64 / k as f64),
                None => (
                    ChunkSpread::Variable { sd: chunk_sd(&samples, tokens_per_chunk) },
                    (tokens_per_chunk - 1.0).max(0.0) / tokens_per_chunk,
                ),
            };
            ChunkRatio {
                tokens_per_chunk,
                uncertainty: requests as f64 / chunks as f64 * short_share,
                requests,
                chunks,
                spread,
                source,
            }
        })
    }

    /// From the cell's requests: those with a usage total after chunks that had none.
    pub fn of_logs(logs: &[RequestLog]) -> Option<ChunkRatio> {
        ChunkRatio::measure(logs.iter().filter(|l| l.usage_at_end).filter_map(last_anchor), RatioSource::EndedRequests)
    }

    /// The standard deviation (tokens) of a count made of `estimated_chunks` chunks counted at
    /// this ratio plus `split` (Σ k(m − k)/m over requests whose total was split between the
    /// window's inside and outside, see [`split_chunks`]): each counted chunk's own deviation from
    /// the mean, the ratio's error on all of them, and where a split total's tokens really fell.
    /// 0 when every chunk carries the same count; `None` when the counts vary by an unknown amount.
    pub fn count_sd(&self, estimated_chunks: f64, split: f64) -> Option<f64> {
        match self.spread {
            ChunkSpread::Constant => Some(0.0),
            ChunkSpread::Variable { sd } => {
                let m = estimated_chunks;
                sd.map(|sd| sd * (m + m * m / self.chunks as f64 + split).sqrt())
            }
        }
    }
}

/// The K that explains every request, if one does: K·m − T between 0 and K − 1 (one short chunk).
fn constant_count(samples: &[(u64, u64)]) -> Option<u64> {
    let k = samples.iter().map(|&(t, m)| t.div_ceil(m)).max().unwrap_or(1);
    samples.iter().all(|&(t, m)| (k * m).checked_sub(t).is_some_and(|short| short < k)).then_some(k)
}

/// The standard deviation of one chunk's tokens, from the requests' ratios: a request of m chunks
/// whose chunks vary independently by σ has a ratio that varies by σ/√m, so
/// σ̂² = Σ (Tᵢ − ρ·mᵢ)²/mᵢ / (n − 1). A difference between requests (their batches, their text)
/// widens it too, as it should. `None` below two requests.
fn chunk_sd(samples: &[(u64, u64)], ratio: f64) -> Option<f64> {
    let n = samples.len();
    (n >= 2).then(|| {
        let ss: f64 = samples.iter().map(|&(t, m)| (t as f64 - ratio * m as f64).powi(2) / m as f64).sum();
        (ss / (n - 1) as f64).sqrt()
    })
}

/// `(usage, chunks)` at the last chunk whose usage is known.
pub(crate) fn last_anchor(log: &RequestLog) -> Option<(u64, u64)> {
    log.points.iter().rev().find_map(|p| p.usage.map(|u| (u, p.chunks)))
}

/// A request's output tokens split at its first answer chunk (methodology §7.5): the thinking
/// before it, the answer from it on. A request with no answer chunk thought all of its tokens.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct TokenSplit {
    pub reasoning: f64,
    pub answer: f64,
}

/// See [`TokenSplit`]; `ratio` as [`attribute`] takes it.
pub fn split(log: &RequestLog, ratio: Option<f64>) -> TokenSplit {
    let counts = attribute(&log.points, ratio);
    let total = counts.last().map_or(0.0, |c| c.0);
    let reasoning = match (log.first_answer, log.answer_point) {
        (None, _) => total,
        (Some(_), Some(k)) => k.checked_sub(1).and_then(|i| counts.get(i)).map_or(0.0, |c| c.0),
        // a log from another rank's wire: by time
        (Some(a), None) => {
            log.points.iter().zip(&counts).take_while(|(p, _)| p.at < a).last().map_or(0.0, |(_, c)| c.0)
        }
    };
    TokenSplit { reasoning, answer: total - reasoning }
}

/// The `--save-requests` fields of a request's thinking: its first answer chunk (`Some(None)` when
/// none came), its thinking tokens as the stream showed them (absent at 0) and as its usage said.
pub fn answer_fields(log: &RequestLog, ratio: Option<f64>, secs: impl Fn(Instant) -> f64) -> AnswerFields {
    let thought = split(log, ratio).reasoning;
    AnswerFields {
        first_answer_s: Some(log.first_answer.map(&secs)),
        reasoning_tokens: (thought > 0.0).then(|| sm_core::requests::round_tokens(thought)),
        usage_reasoning_tokens: log.reasoning_tokens,
        tool_call: log.tools.then(|| sm_core::requests::ToolCallFields {
            first_tool_call_s: log.first_tool_call.map(&secs),
            tool_call_tokens: sm_core::requests::round_tokens(call_tokens(log, ratio)),
            tool_args_valid: args_valid(log),
        }),
    }
}

/// A request's tokens from its first tool-call chunk on (methodology §7.3.1): a call comes last in
/// an answer, so those are the call's. 0 without a call.
pub fn call_tokens(log: &RequestLog, ratio: Option<f64>) -> f64 {
    let Some(first) = log.first_tool_call else { return 0.0 };
    let counts = attribute(&log.points, ratio);
    let total = counts.last().map_or(0.0, |c| c.0);
    let before = match log.tool_point {
        Some(k) => k.checked_sub(1).and_then(|i| counts.get(i)).map_or(0.0, |c| c.0),
        // a log from another rank's wire: by time
        None => log.points.iter().zip(&counts).take_while(|(p, _)| p.at < first).last().map_or(0.0, |(_, c)| c.0),
    };
    total - before
}

/// Whether the call's arguments, joined, are a JSON object; `None` without a call.
pub fn args_valid(log: &RequestLog) -> Option<bool> {
    log.first_tool_call?;
    Some(serde_json::from_str::<serde_json::Value>(&log.tool_args).is_ok_and(|v| v.is_object()))
}

/// What [`answer_fields`] gives.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct AnswerFields {
    pub first_answer_s: Option<Option<f64>>,
    pub reasoning_tokens: Option<f64>,
    pub usage_reasoning_tokens: Option<u64>,
    /// Only for a request sent with tools.
    pub tool_call: Option<sm_core::requests::ToolCallFields>,
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
        assert_eq!(ChunkRatio::measure([(5, 0)], RatioSource::Probe { batch: 1 }), None, "no chunks, no ratio");
    }

    #[test]
    fn a_last_chunk_can_be_short_only_by_what_a_chunk_carries_beyond_one_token() {
        // one token per chunk: no chunk can be short, the ratio is exact
        let one = ChunkRatio::measure([(64, 64), (64, 64)], RatioSource::EndedRequests).unwrap();
        assert_eq!((one.spread, one.uncertainty), (ChunkSpread::Constant, 0.0));
        // two tokens now and then (llama.cpp holding back half a character): ρ − 1 of a chunk each
        let rare = ChunkRatio::measure([(64, 63), (64, 64), (64, 63)], RatioSource::EndedRequests).unwrap();
        assert!(matches!(rare.spread, ChunkSpread::Variable { .. }), "{rare:?}");
        let expected = 3.0 / 190.0 * (rare.tokens_per_chunk - 1.0) / rare.tokens_per_chunk;
        assert!((rare.uncertainty - expected).abs() < 1e-12, "{rare:?}");
        assert!(rare.uncertainty < 0.0002, "a hundredth of the one-chunk bound: {rare:?}");
    }
    #[test]
    fn a_constant_count_is_told_from_a_varying_one() {
        use RatioSource::EndedRequests;
        // K = 3, each request's last chunk short or not: one K explains them all
        let r = ChunkRatio::measure([(512, 171), (300, 100), (299, 100)], EndedRequests).unwrap();
        assert_eq!(r.spread, ChunkSpread::Constant);
        assert_eq!(r.count_sd(1000.0, 50.0), Some(0.0), "a constant count has only the remainder's error");
        // 2.3 tokens per chunk: no K explains it; ρ = 2.325, deviations ∓5 over 200 chunks each
        let r = ChunkRatio::measure([(460, 200), (470, 200)], EndedRequests).unwrap();
        let ChunkSpread::Variable { sd: Some(sd) } = r.spread else { panic!("{r:?}") };
        assert!((sd - 0.5).abs() < 1e-12, "σ̂² = (25 + 25)/200 / 1: {sd}");
        // 400 chunks at ρ: their own spread and the ratio's error, plus a split total's
        let want = 0.5 * (400.0 + 400.0 * 400.0 / 400.0 + 30.0f64).sqrt();
        assert!((r.count_sd(400.0, 30.0).unwrap() - want).abs() < 1e-9);
        // one request cannot tell how much chunks vary
        let r = ChunkRatio::measure([(460, 200)], RatioSource::Probe { batch: 1 }).unwrap();
        assert_eq!(r.spread, ChunkSpread::Variable { sd: None });
        assert_eq!(r.count_sd(10.0, 0.0), None);
    }

    /// Chunks of 1 to 5 tokens drawn at random: σ̂ from 30 requests' totals is the draws' σ.
    #[test]
    fn the_chunk_sd_is_the_spread_of_one_chunks_tokens() {
        let mut x = 0x2545_f491_4f6c_dd1du64;
        let mut draw = || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            1 + x % 5
        };
        let samples: Vec<(u64, u64)> = (0..30).map(|i| ((0..150 + i).map(|_| draw()).sum(), 150 + i)).collect();
        let r = ChunkRatio::measure(samples, RatioSource::EndedRequests).unwrap();
        let ChunkSpread::Variable { sd: Some(sd) } = r.spread else { panic!("{r:?}") };
        // uniform on 1..=5: σ = √2
        assert!((sd / 2f64.sqrt() - 1.0).abs() < 0.3, "σ̂ {sd}");
        assert!((r.tokens_per_chunk - 3.0).abs() < 0.05, "{r:?}");
    }
}
