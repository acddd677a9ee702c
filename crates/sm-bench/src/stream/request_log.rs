//! What one request of a cell saw, chunk by chunk: written by the request loop (`request.rs`),
//! read by the window accounting (`cell/window.rs`) and the token attribution (`tokens.rs`).

use std::time::Instant;

/// A token-bearing chunk: when it arrived, how many token-bearing chunks the request had
/// received with it, and the request's cumulative `usage.completion_tokens` as of this chunk where
/// the server said it (on this chunk, or in a usage total that came after it without new chunks).
/// Which tokens each chunk carried is worked out from these by [`crate::stream::tokens::attribute`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Point {
    pub at: Instant,
    pub chunks: u64,
    pub usage: Option<u64>,
}

/// Everything one request of a cell saw.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RequestLog {
    pub sent: Instant,
    pub first_token: Option<Instant>,
    /// The first chunk with answer text (content, or a completion's text): later than
    /// `first_token` by the thinking of a reasoning model, the same instant otherwise.
    pub first_answer: Option<Instant>,
    /// How many points came before the first answer chunk's: chunks read together share one
    /// instant, so the split between thinking and answer is by place, not by time.
    pub answer_point: Option<usize>,
    pub points: Vec<Point>,
    /// `finish_reason` or `[DONE]` arrived (the request completed normally).
    pub ended: Option<Instant>,
    /// Every token-bearing chunk carried usage, so the points' usage are real token counts.
    pub usage: bool,
    /// Chunks without usage were followed by a usage total that covers them (the request ended).
    pub usage_at_end: bool,
    pub prompt_tokens: Option<u64>,
    pub cached_tokens: Option<u64>,
    /// `usage.completion_tokens_details.reasoning_tokens`, the last the server sent.
    pub reasoning_tokens: Option<u64>,
    /// The request was sent with `tools` (methodology §7.3.1): the tool-call fields below are its
    /// figures; without them they stay empty and its lines carry none.
    pub tools: bool,
    /// The first chunk with a tool-call delta that carried output (a name or argument text).
    pub first_tool_call: Option<Instant>,
    /// How many points came before that chunk's (as `answer_point`): the call's tokens are those
    /// of the points from there on.
    pub tool_point: Option<usize>,
    /// The argument text of tool call index 0, joined: whether it parses is `tool_args_valid`.
    pub tool_args: String,
    /// The request was sent a second time because its first send failed before any
    /// response byte (a pooled keep-alive connection the server had closed).
    pub retried: bool,
    /// Why the request failed, where the failure was its own and not the cancel's doing (set
    /// once it ended, for `--save-requests`).
    pub failure: Option<String>,
    /// The id the server gave the request (set once it ended, for `--save-requests`).
    pub id: Option<String>,
}

impl RequestLog {
    /// Milliseconds from the send to `t` (0 for an instant before it).
    pub fn ms_after_send(&self, t: Instant) -> f64 {
        t.saturating_duration_since(self.sent).as_secs_f64() * 1000.0
    }

    /// Whether the request ended inside `[start, end)`: a cell's `completed` request.
    pub fn ended_within(&self, start: Instant, end: Instant) -> bool {
        self.ended.is_some_and(|t| t >= start && t < end)
    }

    pub fn new(sent: Instant) -> RequestLog {
        RequestLog {
            sent,
            first_token: None,
            first_answer: None,
            answer_point: None,
            points: Vec::new(),
            ended: None,
            usage: true,
            usage_at_end: false,
            prompt_tokens: None,
            cached_tokens: None,
            reasoning_tokens: None,
            tools: false,
            first_tool_call: None,
            tool_point: None,
            tool_args: String::new(),
            retried: false,
            failure: None,
            id: None,
        }
    }
}
