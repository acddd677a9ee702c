//! The prefill scout: one streamed request with `max_tokens: 1` and the exact
//! prompt of a context. Its first run is the context's (cold) prefill row; later
//! runs re-warm the prefix cache before a decode cell.

use std::time::{Duration, Instant};

use serde_json::Value;
use sm_client::openai::parse_chunk;
use sm_client::sse::SseEvent;
use sm_client::{Client, JsonBody};

use crate::stream::request::{describe, stream_retrying};
use crate::stream::tokens::{ChunkRatio, RatioSource};

#[derive(Debug, Clone, PartialEq)]
pub struct ScoutResult {
    pub ttft: Duration,
    pub prompt_tokens: Option<u64>,
    pub cached_tokens: Option<u64>,
    /// The server reported `usage.completion_tokens` (at least at the end).
    pub reports_usage: bool,
    /// Chunks that carried text.
    pub chunks: u64,
    /// The last `usage.completion_tokens` the server reported.
    pub completion_tokens: Option<u64>,
    /// The id the server gave the request.
    pub id: Option<String>,
    /// When it was sent, its first and last token-bearing chunk, and when the server finished it
    /// (for `--save-requests`).
    pub times: ScoutTimes,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ScoutTimes {
    pub sent: Instant,
    pub first_token: Instant,
    pub last_token: Instant,
    pub ended: Option<Instant>,
}

impl ScoutResult {
    pub fn ttft_ms(&self) -> f64 {
        self.ttft.as_secs_f64() * 1000.0
    }
}

/// `body` must ask for `max_tokens: 1`, streamed with usage.
pub async fn scout(client: &Client, path: &str, body: &Value, timeout: Duration) -> Result<ScoutResult, String> {
    // a retry here is logged, not counted: the scout's figures are its TTFT and usage
    let body = JsonBody::new(body);
    let mut stream = stream_retrying(client, path, &body, timeout).await.0.map_err(|e| describe(&e))?;
    let sent: Instant = stream.sent_at;
    let mut first: Option<Instant> = None;
    let (mut last, mut ended, mut id) = (None, None, None);
    let mut prompt_tokens = None;
    let mut cached_tokens = None;
    let mut reports_usage = false;
    let (mut chunks, mut completion_tokens) = (0, None);
    loop {
        let ev = match stream.next().await {
            Ok(Some(ev)) => ev,
            Ok(None) => break,
            Err(e) => return Err(describe(&e)),
        };
        let data = match ev.event {
            SseEvent::Done => {
                ended.get_or_insert(ev.at);
                break;
            }
            SseEvent::Data(d) => d,
        };
        let chunk = parse_chunk(&data).map_err(|e| e.to_string())?;
        if let Some(err) = chunk.error {
            return Err(format!("the server reported an error mid-stream: {err}"));
        }
        // With one output token the token chunk may be empty text plus a finish reason.
        if first.is_none() && (chunk.has_text || chunk.finish_reason.is_some()) {
            first = Some(ev.at);
        }
        if chunk.has_text || chunk.finish_reason.is_some() {
            last = Some(ev.at);
        }
        if chunk.finish_reason.is_some() {
            ended.get_or_insert(ev.at);
        }
        if id.is_none() {
            id = chunk.id;
        }
        reports_usage |= chunk.completion_tokens.is_some();
        chunks += u64::from(chunk.has_text);
        completion_tokens = chunk.completion_tokens.or(completion_tokens);
        prompt_tokens = chunk.prompt_tokens.or(prompt_tokens);
        cached_tokens = chunk.cached_tokens.or(cached_tokens);
    }
    let first = first.ok_or_else(|| "the scout's stream ended without a token".to_string())?;
    let times = ScoutTimes { sent, first_token: first, last_token: last.unwrap_or(first), ended };
    Ok(ScoutResult {
        ttft: first - sent,
        prompt_tokens,
        cached_tokens,
        reports_usage,
        chunks,
        completion_tokens,
        id,
        times,
    })
}

/// Output tokens of the probe that measures tokens per chunk when no request of a cell ended
/// (methodology §7.3): enough chunks that a short last chunk moves the ratio by little.
pub const PROBE_TOKENS: u64 = 512;

/// Tokens per chunk of `batch` requests with the cell's body, each at most [`PROBE_TOKENS`] long,
/// sent together so that the server decodes them as one batch of the cell's size (what a chunk
/// carries can change with the batch: speculative acceptance, output batching). `None` when none
/// ended with a usage total and chunks; `Probe { batch }` counts those that did.
pub async fn probe_chunk_ratio(
    client: &Client,
    path: &str,
    body: &Value,
    timeout: Duration,
    batch: u32,
) -> Option<ChunkRatio> {
    let mut body = body.clone();
    let asked = body.get("max_tokens").and_then(Value::as_u64).unwrap_or(PROBE_TOKENS);
    body["max_tokens"] = PROBE_TOKENS.min(asked).into();
    let probes = (0..batch.max(1)).map(|_| scout(client, path, &body, timeout));
    let samples: Vec<(u64, u64)> = futures_util::future::join_all(probes)
        .await
        .into_iter()
        .filter_map(|r| r.map_err(|e| tracing::warn!("a chunk probe failed: {e}")).ok())
        .filter_map(|s| s.completion_tokens.map(|t| (t, s.chunks)))
        .filter(|&(_, chunks)| chunks > 0)
        .collect();
    let answered = samples.len() as u32;
    ChunkRatio::measure(samples, RatioSource::Probe { batch: answered })
}
