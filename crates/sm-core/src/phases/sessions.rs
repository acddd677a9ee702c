//! Issue 17 §4 — multi-turn sessions (`--sessions USERS --turns T`): the phase's section of
//! `run.json` (methodology §13.4). Every turn of every simulated user is kept as it was measured
//! ([`SessionTurn`]); the figures per turn index ([`TurnFigures`]) and over the whole phase
//! ([`SessionsSummary`]) are pure functions of those turns, recomputed after each one.

use serde::{Deserialize, Serialize};

use crate::phases::answers::{Answered, Called, ThinkingFigures, ToolCallFigures};
use crate::record::percentiles::{Percentiles, flat_keys};
use crate::stats::{Quantiles, percentile};

/// The most users one phase holds (`--sessions`): each is a connection and a task.
pub const MAX_USERS: u32 = 256;
/// The most turns one conversation has (`--turns`): its prompt grows with every turn.
pub const MAX_TURNS: u32 = 64;
/// The most turns of one phase (users × turns): each is kept in run.json.
pub const MAX_TURNS_TOTAL: u64 = 4096;

/// What the phase was asked to do.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct SessionsSettings {
    /// Simulated users, each holding one conversation (`--sessions`).
    #[schemars(range(min = 1))]
    pub users: u32,
    /// Turns per conversation (`--turns`).
    #[schemars(range(min = 1))]
    pub turns: u32,
    /// Pause between an answer's end and the user's next turn (`--think-time`).
    #[schemars(range(min = 0))]
    pub think_time_s: f64,
    /// Tokens of each new user message (`--turn-tokens`); unused with `prompts_file`.
    pub turn_tokens: u64,
    /// Tokens of the system prompt common to every user (`--shared-prefix`); `None`: each user's
    /// system prompt is its own.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shared_prefix: Option<u64>,
    /// `max_tokens` of every answer (`--max-tokens`, or a prompts-file line's own).
    pub max_tokens: u64,
    /// Users start this far apart: user `u` (0-based) sends its first turn `u × stagger_s` after
    /// the phase starts.
    #[schemars(range(min = 0))]
    pub stagger_s: f64,
    /// The user messages came from `--prompts FILE.jsonl` (`settings.prompts_file`).
    #[serde(default, skip_serializing_if = "is_false")]
    pub prompts_file: bool,
}

fn is_false(b: &bool) -> bool {
    !*b
}

/// How a turn ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum TurnStatus {
    /// The answer arrived to its end.
    Completed,
    /// It failed; `reason` says why. The conversation cannot go on without its answer.
    Failed,
}

/// One turn of one user: a request whose prompt is the whole conversation so far. Times are
/// seconds since the run started, on the run's monotonic clock (methodology §13).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct SessionTurn {
    /// 1-based turn index.
    #[schemars(range(min = 1))]
    pub turn: u32,
    /// The server's id of the request, secrets scrubbed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request_id: Option<String>,
    /// When the turn was due: the user's start for turn 1, else the previous answer's end plus
    /// the think time. TTFT and latency are measured from here.
    #[schemars(range(min = 0))]
    pub scheduled_s: f64,
    /// When the request was handed to the connection; `null` when it never was.
    #[schemars(range(min = 0))]
    pub sent_s: Option<f64>,
    /// Its first token-bearing chunk.
    #[schemars(range(min = 0))]
    pub first_token_s: Option<f64>,
    /// Its last token-bearing chunk.
    #[schemars(range(min = 0))]
    pub last_token_s: Option<f64>,
    /// When the answer ended; `null` unless `status` is `completed`.
    #[schemars(range(min = 0))]
    pub ended_s: Option<f64>,
    /// `usage.prompt_tokens`.
    pub prompt_tokens: Option<u64>,
    /// `usage.prompt_tokens_details.cached_tokens`: prompt tokens served from the prefix cache.
    pub cached_tokens: Option<u64>,
    /// Output tokens of the answer (`usage.completion_tokens`, else its token-bearing chunks).
    pub output_tokens: u64,
    /// A reasoning model's thinking and a run's tool call in this turn (issue 33); absent keys
    /// where it did neither.
    #[serde(flatten)]
    pub answer: TurnAnswer,
    pub status: TurnStatus,
    /// Why it failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

/// Where a user's conversation stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum SessionStatus {
    /// Every turn was answered.
    Complete,
    /// A turn failed, which ended the conversation.
    Failed,
    /// The run stopped before the conversation ended; `--resume` holds it again from turn 1.
    Interrupted,
    /// The server went away during the conversation, which the run then stopped (a turn that
    /// failed with it says `server stopped responding`); `--resume --retry-failed` holds it again
    /// from turn 1.
    ServerLost,
}

/// One user's conversation.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Session {
    /// 0-based user index.
    pub user: u32,
    pub status: SessionStatus,
    /// Its turns in order.
    pub turns: Vec<SessionTurn>,
}

/// The figures of one turn index, across users (methodology §13.4).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct TurnFigures {
    /// 1-based turn index.
    #[schemars(range(min = 1))]
    pub turn: u32,
    /// Turns of this index answered.
    pub completed: u64,
    /// Turns of this index that failed.
    pub failed: u64,
    /// TTFT from the scheduled turn start over the completed turns, ms: p50, p90 (the keys
    /// `ttft_ms_p50`, `ttft_ms_p90` of `turn_ttft_ms_keys`).
    #[serde(flatten, with = "turn_ttft_ms_keys")]
    #[schemars(with = "turn_ttft_ms_keys::Keys")]
    pub ttft_ms: Percentiles,
    /// Mean `usage.prompt_tokens`.
    #[schemars(range(min = 0))]
    pub prompt_tokens_mean: Option<f64>,
    /// Mean cached prompt tokens as the server reported them.
    #[schemars(range(min = 0))]
    pub cached_tokens_mean: Option<f64>,
    /// 100 × Σ cached ÷ Σ prompt tokens, over the turns that reported both.
    #[schemars(range(min = 0, max = 100))]
    pub cache_hit_pct: Option<f64>,
    /// Mean per-request output rate: (output tokens − 1) ÷ (last token − first token).
    #[schemars(range(min = 0))]
    pub output_tok_s: Option<f64>,
}

/// What a turn's answer held beside its tokens (issue 33): each key absent where it tells nothing,
/// so a turn of a model that does not think, sent without tools, reads as before.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize, schemars::JsonSchema)]
pub struct TurnAnswer {
    /// Its first chunk with answer text, where that was not its first token (a reasoning model's
    /// thinking came first); `null` when no answer came (the thinking used up `max_tokens`, or the
    /// turn answered with a tool call only). Absent: the first token was the answer's.
    #[serde(default, skip_serializing_if = "Option::is_none", deserialize_with = "crate::requests::present")]
    #[schemars(range(min = 0))]
    #[schemars(extend("x-nullable" = true))]
    pub first_answer_s: Option<Option<f64>>,
    /// Of `output_tokens`, those before its first answer chunk: the thinking (methodology §7.1's
    /// attribution). Absent when there was none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0))]
    pub reasoning_tokens: Option<f64>,
    /// A turn sent with `tools` (`run --tools`): `first_tool_call_s`, `tool_call_tokens`,
    /// `tool_args_valid`, as requests.jsonl writes them.
    #[serde(flatten, default, skip_serializing_if = "Option::is_none")]
    pub tool_call: Option<crate::requests::ToolCallFields>,
}

/// The whole phase, across users and turns (methodology §13.4).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct SessionsSummary {
    /// Turns answered.
    pub completed: u64,
    /// Turns that failed.
    pub failed: u64,
    /// Output tokens of the completed turns.
    pub output_tokens: u64,
    /// From the first turn's scheduled start to the last answer's end.
    #[schemars(range(min = 0))]
    pub span_s: f64,
    /// `output_tokens ÷ span_s`.
    #[schemars(range(min = 0))]
    pub output_tok_s: Option<f64>,
    /// TTFT from the scheduled start, ms: p50, p90, p99 (the keys `ttft_ms_p50`, … of
    /// `summary_ttft_ms_keys`).
    #[serde(flatten, with = "summary_ttft_ms_keys")]
    #[schemars(with = "summary_ttft_ms_keys::Keys")]
    pub ttft_ms: Percentiles,
    /// End-to-end latency, answer end minus scheduled start, ms: p50, p90, p99 (the keys
    /// `latency_ms_p50`, … of `latency_ms_keys`).
    #[serde(flatten, with = "latency_ms_keys")]
    #[schemars(with = "latency_ms_keys::Keys")]
    pub latency_ms: Percentiles,
    /// 100 × Σ cached ÷ Σ prompt tokens over every answered turn that reported both.
    #[schemars(range(min = 0, max = 100))]
    pub cache_hit_pct: Option<f64>,
    /// The largest send lag (sent minus scheduled) of any turn.
    #[schemars(range(min = 0))]
    pub send_lag_ms_max: Option<f64>,
    /// A reasoning model's turns: TTFA from each turn's due time over the completed turns that
    /// answered, their mean thinking tokens, those left without an answer; absent where no turn
    /// thought.
    #[serde(flatten)]
    pub thinking: ThinkingFigures,
    /// A run with `--tools`: time to the first tool call from each turn's due time, the calls'
    /// tokens, whether their arguments parse, the turns that made none; absent without tools.
    #[serde(flatten)]
    pub tool_calls: ToolCallFigures,
}

flat_keys! {
    /// The TTFTs of one turn index as run.json writes them: null when no turn completed.
    mod turn_ttft_ms_keys {
        /// TTFT from the scheduled turn start, p50 and p90 over the completed turns.
        #[schemars(range(min = 0))]
        p50: "ttft_ms_p50",
        /// TTFT p90 from the scheduled start, ms.
        #[schemars(range(min = 0))]
        p90: "ttft_ms_p90",
    }
}

flat_keys! {
    /// The phase's TTFTs as run.json writes them: null when no turn completed.
    mod summary_ttft_ms_keys {
        /// TTFT p50 from the scheduled start, ms.
        #[schemars(range(min = 0))]
        p50: "ttft_ms_p50",
        /// TTFT p90, ms.
        #[schemars(range(min = 0))]
        p90: "ttft_ms_p90",
        /// TTFT p99, ms.
        #[schemars(range(min = 0))]
        p99: "ttft_ms_p99",
    }
}

flat_keys! {
    /// The phase's end-to-end latencies as run.json writes them: null when no turn completed.
    mod latency_ms_keys {
        /// End-to-end latency: answer end minus scheduled start.
        #[schemars(range(min = 0))]
        p50: "latency_ms_p50",
        /// End-to-end latency p90, ms.
        #[schemars(range(min = 0))]
        p90: "latency_ms_p90",
        /// End-to-end latency p99, ms.
        #[schemars(range(min = 0))]
        p99: "latency_ms_p99",
    }
}

/// The phase's section: its settings, every turn measured and the figures over them.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct SessionsPhase {
    pub settings: SessionsSettings,
    /// One conversation per user that started, by user index.
    pub sessions: Vec<Session>,
    /// The figures of each turn index that has a turn measured.
    pub by_turn: Vec<TurnFigures>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub summary: Option<SessionsSummary>,
    /// The server's gauges and the GPUs over the whole phase (methodology §14); only a phase whose
    /// conversations all ran in one session, to their end.
    #[serde(flatten)]
    pub telemetry: crate::telemetry::Telemetry,
}

impl SessionsPhase {
    pub fn new(settings: SessionsSettings) -> SessionsPhase {
        SessionsPhase {
            settings,
            sessions: Vec::new(),
            by_turn: Vec::new(),
            summary: None,
            telemetry: Default::default(),
        }
    }

    /// Recomputes the figures from the turns.
    pub fn refresh(&mut self) {
        self.by_turn = turn_figures(&self.sessions, self.settings.turns);
        self.summary = summary(&self.sessions);
    }
}

fn ms(s: f64) -> f64 {
    (s * 1e6).round() / 1e3
}

fn round2(v: f64) -> f64 {
    (v * 100.0).round() / 100.0
}

fn mean(values: &[f64]) -> Option<f64> {
    (!values.is_empty()).then(|| values.iter().sum::<f64>() / values.len() as f64)
}

/// TTFT of a completed turn, in seconds from its scheduled start.
pub fn ttft_s(t: &SessionTurn) -> Option<f64> {
    t.first_token_s.filter(|_| t.status == TurnStatus::Completed).map(|f| f - t.scheduled_s)
}

/// End-to-end latency of a completed turn, in seconds from its scheduled start.
pub fn latency_s(t: &SessionTurn) -> Option<f64> {
    t.ended_s.filter(|_| t.status == TurnStatus::Completed).map(|e| e - t.scheduled_s)
}

/// A completed turn's own output rate: the tokens after its first over the time they took.
pub fn request_tok_s(t: &SessionTurn) -> Option<f64> {
    let (first, last) = (t.first_token_s?, t.last_token_s?);
    let span = last - first;
    (t.status == TurnStatus::Completed && t.output_tokens >= 2 && span > 0.0)
        .then(|| (t.output_tokens - 1) as f64 / span)
}

/// 100 × Σ cached ÷ Σ prompt tokens over the turns that reported both.
pub fn cache_hit_pct<'a>(turns: impl IntoIterator<Item = &'a SessionTurn>) -> Option<f64> {
    let (cached, prompt) = turns
        .into_iter()
        .filter_map(|t| Some((t.cached_tokens?, t.prompt_tokens?)))
        .fold((0u64, 0u64), |(c, p), (tc, tp)| (c + tc, p + tp));
    (prompt > 0).then(|| round2(100.0 * cached as f64 / prompt as f64))
}

/// The figures of each turn index `1..=turns` that has at least one turn measured.
pub fn turn_figures(sessions: &[Session], turns: u32) -> Vec<TurnFigures> {
    (1..=turns)
        .filter_map(|k| {
            let all: Vec<&SessionTurn> = sessions.iter().flat_map(|s| &s.turns).filter(|t| t.turn == k).collect();
            (!all.is_empty()).then(|| one_turn(k, &all))
        })
        .collect()
}

fn one_turn(turn: u32, all: &[&SessionTurn]) -> TurnFigures {
    let done: Vec<&SessionTurn> = all.iter().copied().filter(|t| t.status == TurnStatus::Completed).collect();
    let ttft: Vec<f64> = done.iter().filter_map(|t| ttft_s(t)).map(ms).collect();
    let prompt: Vec<f64> = done.iter().filter_map(|t| t.prompt_tokens).map(|p| p as f64).collect();
    let cached: Vec<f64> = done.iter().filter_map(|t| t.cached_tokens).map(|c| c as f64).collect();
    let rates: Vec<f64> = done.iter().filter_map(|t| request_tok_s(t)).collect();
    TurnFigures {
        turn,
        completed: done.len() as u64,
        failed: (all.len() - done.len()) as u64,
        ttft_ms: Percentiles {
            p50: percentile(&ttft, 50.0).map(round3),
            p90: percentile(&ttft, 90.0).map(round3),
            ..Percentiles::default()
        },
        prompt_tokens_mean: mean(&prompt).map(round2),
        cached_tokens_mean: mean(&cached).map(round2),
        cache_hit_pct: cache_hit_pct(done.iter().copied()),
        output_tok_s: mean(&rates).map(round2),
    }
}

fn round3(v: f64) -> f64 {
    (v * 1000.0).round() / 1000.0
}

/// The phase's figures across users and turns; `None` before any turn was measured.
pub fn summary(sessions: &[Session]) -> Option<SessionsSummary> {
    let all: Vec<&SessionTurn> = sessions.iter().flat_map(|s| &s.turns).collect();
    let start = all.iter().map(|t| t.scheduled_s).min_by(f64::total_cmp)?;
    let done: Vec<&SessionTurn> = all.iter().copied().filter(|t| t.status == TurnStatus::Completed).collect();
    let end = done.iter().filter_map(|t| t.ended_s).max_by(f64::total_cmp);
    let span = end.map_or(0.0, |e| e - start);
    let output_tokens: u64 = done.iter().map(|t| t.output_tokens).sum();
    let ttft: Vec<f64> = done.iter().filter_map(|t| ttft_s(t)).map(ms).collect();
    let latency: Vec<f64> = done.iter().filter_map(|t| latency_s(t)).map(ms).collect();
    let (ttft, latency) = (Quantiles::of(&ttft), Quantiles::of(&latency));
    let lag = all.iter().filter_map(|t| t.sent_s.map(|s| ms(s - t.scheduled_s))).max_by(f64::total_cmp);
    let answers: Vec<Answered> = done.iter().map(|t| answered(t)).collect();
    let (thinking, tool_calls) = (ThinkingFigures::of(&answers), ToolCallFigures::of(&answers));
    Some(SessionsSummary {
        completed: done.len() as u64,
        failed: (all.len() - done.len()) as u64,
        output_tokens,
        span_s: round3(span),
        output_tok_s: (span > 0.0).then(|| round2(output_tokens as f64 / span)),
        ttft_ms: ttft.map(|q| Percentiles::from(q).map(round3)).unwrap_or_default(),
        latency_ms: latency.map(|q| Percentiles::from(q).map(round3)).unwrap_or_default(),
        cache_hit_pct: cache_hit_pct(done.iter().copied()),
        send_lag_ms_max: lag.map(round3),
        thinking: ThinkingFigures { ttfa_ms: thinking.ttfa_ms.map(|p| p.map(round3)), ..thinking },
        tool_calls: ToolCallFigures { ttftc_ms: tool_calls.ttftc_ms.map(|p| p.map(round3)), ..tool_calls },
    })
}

/// A completed turn as the phase's thinking and tool-call figures read it: its times from its
/// due time, as its TTFT.
pub fn answered(t: &SessionTurn) -> Answered {
    let since_due = |s: f64| ms(s - t.scheduled_s);
    // absent: the first token was the answer's
    let first_answer = t.answer.first_answer_s.unwrap_or(t.first_token_s);
    Answered {
        got_token: t.first_token_s.is_some(),
        first_answer_ms: first_answer.map(since_due),
        reasoning_tokens: t.answer.reasoning_tokens.unwrap_or(0.0),
        tool_call: t.answer.tool_call.map(|c| Called {
            first_tool_call_ms: c.first_tool_call_s.map(since_due),
            tokens: c.tool_call_tokens,
            args_valid: c.tool_args_valid,
        }),
    }
}

#[cfg(test)]
mod tests;
