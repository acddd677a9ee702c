//! One line of `requests.jsonl` (`run --save-requests`, methodology §7.5, docs/requests.md): what
//! one request the run measured saw, on the run's clock. Typed here; serialised only at the edge
//! (sm-bench's writer), one JSON object per line.

use serde::{Deserialize, Serialize};

/// The file beside `run.json` that holds the lines.
pub const REQUESTS_FILE: &str = "requests.jsonl";

/// Which part of the run sent the request. Later phases (open-loop rates, bursts, mixed prefill,
/// sessions) add their own values; a reader should keep lines of a phase it does not know.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RequestPhase {
    /// A stream of a decode cell (the matrix, a `--repeats` pass or a `--find-capacity` level).
    Decode,
    /// The cold `max_tokens: 1` request of a prefill row.
    Prefill,
    /// A stream of the hidden C=1 warm-up cell, whose figures are discarded.
    Warmup,
    /// A request of the open-loop rate phase (`--request-rate`).
    Rate,
    /// A request of a burst (`--burst`).
    Burst,
    /// The fresh prompt or a background stream of the mixed-prefill phase (`--mixed-prefill`).
    MixedPrefill,
    /// A turn of a multi-turn session (`--sessions`).
    Sessions,
    /// A request of a replayed trace (`--replay`).
    Replay,
}

/// How the request ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RequestStatus {
    /// The server finished it (`finish_reason` or `[DONE]`).
    Completed,
    /// The client dropped it: the cell's window ended, or the cell was stopped or failed elsewhere.
    Cancelled,
    /// It failed; `reason` says why.
    Failed,
}

/// One request. Times are seconds since the run started, on the monotonic clock the record's
/// `events[].t` use (a resumed run continues that clock); `null` where the request never got
/// there. Token counts are `null` where the server did not report them.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RequestLine {
    pub phase: RequestPhase,
    /// The cell's or row's context (prompt tokens as planned).
    pub context: u64,
    /// The cell's concurrency (1 for a prefill row and the warm-up).
    pub concurrency: u32,
    /// With `--repeats`: which measurement of the cell (1-based).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub repeat: Option<u32>,
    /// A level `--find-capacity` measured (present only when true).
    #[serde(default, skip_serializing_if = "is_false")]
    pub searched: bool,
    /// The id the server gave the request (the stream's `id`), to join the line with the
    /// server's own logs; `null` where it sent none.
    pub request_id: Option<String>,
    /// When the request was due to be sent. The decode matrix is closed-loop (a stream sends its
    /// next request as soon as the previous one ends), so here it equals `sent_s`.
    pub scheduled_s: f64,
    /// When it was sent (the second send's time for a `retried` request).
    pub sent_s: f64,
    /// Its first token-bearing chunk.
    pub first_token_s: Option<f64>,
    /// Its first chunk with answer text (`content`, or a completion's `text`): after
    /// `first_token_s` by a reasoning model's thinking, equal to it otherwise; `null` when no
    /// answer came (thinking used up `max_tokens`). Absent where the phase does not record it.
    #[serde(default, skip_serializing_if = "Option::is_none", deserialize_with = "present")]
    pub first_answer_s: Option<Option<f64>>,
    /// Its last token-bearing chunk.
    pub last_token_s: Option<f64>,
    /// When the server finished it; `null` unless `status` is `completed`.
    pub ended_s: Option<f64>,
    /// Output tokens it received, attributed to its chunks as the window accounting does
    /// (methodology §7.1): fractional where a usage total was spread over chunks or chunks were
    /// counted at the cell's tokens per chunk.
    pub output_tokens: f64,
    /// Of `output_tokens`, those whose chunks arrived inside the cell's window: summed over a
    /// cell's lines, the cell's `output_tokens`. `null` without a window (prefill, a cell that
    /// failed before its window ended).
    pub window_output_tokens: Option<f64>,
    /// Whether any of its token-bearing chunks arrived inside the cell's window; `null` without one.
    pub in_window: Option<bool>,
    /// `usage.prompt_tokens` as the server reported it.
    pub prompt_tokens: Option<u64>,
    /// The prompt tokens the server reported as served from its prefix cache.
    pub cached_tokens: Option<u64>,
    /// Of `output_tokens`, those before its first answer chunk: the thinking, as the stream showed
    /// it (methodology §7.1's attribution). Absent when there was none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reasoning_tokens: Option<f64>,
    /// `usage.completion_tokens_details.reasoning_tokens`, where the server sent it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage_reasoning_tokens: Option<u64>,
    /// A request sent with `tools` (`run --tools`, methodology §7.3.1): `first_tool_call_s`,
    /// `tool_call_tokens` and `tool_args_valid`. Absent for a request sent without tools.
    #[serde(flatten, default, skip_serializing_if = "Option::is_none")]
    pub tool_call: Option<ToolCallFields>,
    pub status: RequestStatus,
    /// Why it failed (with `status: failed`), secrets scrubbed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// Its first send broke before any byte of the answer and it was sent once more (§6.7).
    #[serde(default, skip_serializing_if = "is_false")]
    pub retried: bool,
}

/// What a request sent with `tools` did with them.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ToolCallFields {
    /// Its first chunk with a tool-call delta (the call's name, or argument text); `null` when it
    /// made no call.
    #[schemars(range(min = 0))]
    #[schemars(extend("x-nullable" = true))]
    pub first_tool_call_s: Option<f64>,
    /// Of `output_tokens`, those from that chunk on: the call's (methodology §7.1's attribution).
    #[schemars(range(min = 0))]
    pub tool_call_tokens: f64,
    /// Whether the arguments of its call (index 0), joined, parse as a JSON object; `null` when it
    /// made no call.
    #[schemars(extend("x-nullable" = true))]
    pub tool_args_valid: Option<bool>,
}

fn is_false(b: &bool) -> bool {
    !*b
}

/// A key that is there, `null` included, is `Some`; only a missing key is `None` (`default`).
pub(crate) fn present<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<Option<f64>>, D::Error> {
    Option::<f64>::deserialize(d).map(Some)
}

/// Seconds rounded to the microsecond, tokens to the thousandth: what the lines hold.
pub fn round_s(s: f64) -> f64 {
    (s * 1e6).round() / 1e6
}

pub fn round_tokens(t: f64) -> f64 {
    (t * 1e3).round() / 1e3
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_line_is_flat_json_with_nulls_for_what_was_not_seen() {
        let line = RequestLine {
            phase: RequestPhase::Decode,
            context: 8192,
            concurrency: 4,
            repeat: None,
            searched: false,
            request_id: Some("chatcmpl-7".into()),
            scheduled_s: 1.5,
            sent_s: 1.5,
            first_token_s: Some(1.75),
            last_token_s: Some(3.0),
            ended_s: None,
            output_tokens: 12.5,
            window_output_tokens: Some(10.0),
            in_window: Some(true),
            prompt_tokens: Some(8192),
            cached_tokens: None,
            first_answer_s: None,
            reasoning_tokens: None,
            usage_reasoning_tokens: None,
            tool_call: None,
            status: RequestStatus::Cancelled,
            reason: None,
            retried: false,
        };
        let v = serde_json::to_value(&line).unwrap();
        assert_eq!(v["phase"], "decode");
        assert_eq!(v["status"], "cancelled");
        assert!(v["ended_s"].is_null() && v["cached_tokens"].is_null());
        for absent in ["repeat", "searched", "reason", "retried", "first_answer_s", "reasoning_tokens"] {
            assert!(v.get(absent).is_none(), "{absent} is written only where it applies");
        }
        let back: RequestLine = serde_json::from_value(v).unwrap();
        assert_eq!(back, line);
        let warm = RequestLine { phase: RequestPhase::Warmup, repeat: Some(2), searched: true, ..line.clone() };
        let v = serde_json::to_value(&warm).unwrap();
        assert_eq!(
            (v["phase"].as_str(), v["repeat"].as_u64(), v["searched"].as_bool()),
            (Some("warmup"), Some(2), Some(true))
        );
        // a reasoning model's request: no answer (thinking used up max_tokens) is null, not absent
        for first_answer_s in [Some(None), Some(Some(2.5))] {
            let thought = RequestLine {
                first_answer_s,
                reasoning_tokens: Some(12.0),
                usage_reasoning_tokens: Some(12),
                ..line.clone()
            };
            let v = serde_json::to_value(&thought).unwrap();
            assert!(v.get("first_answer_s").is_some(), "{v}");
            assert_eq!(serde_json::from_value::<RequestLine>(v).unwrap(), thought);
        }
        assert!(v.get("tool_call_tokens").is_none(), "no tools, no tool-call keys");
        // a request sent with tools: flat keys, null where it made no call
        for fields in [
            ToolCallFields { first_tool_call_s: Some(2.25), tool_call_tokens: 7.0, tool_args_valid: Some(false) },
            ToolCallFields { first_tool_call_s: None, tool_call_tokens: 0.0, tool_args_valid: None },
        ] {
            let called = RequestLine { tool_call: Some(fields), ..line.clone() };
            let v = serde_json::to_value(&called).unwrap();
            assert!(v.get("first_tool_call_s").is_some() && v.get("tool_args_valid").is_some(), "{v}");
            assert_eq!(v["tool_call_tokens"], fields.tool_call_tokens);
            assert_eq!(serde_json::from_value::<RequestLine>(v).unwrap(), called);
        }
    }

    #[test]
    fn rounding_keeps_microseconds_and_thousandths() {
        assert_eq!(round_s(1.234_567_89), 1.234_568);
        assert_eq!(round_tokens(2.0 / 3.0), 0.667);
    }
}
