//! The rank protocol's messages, one JSON object per line over TCP (docs/distributed.md), and
//! requests carried between clocks: a worker sends its requests timed from its own window's
//! open, and rank 0 places them on its clock from its own window's open.

use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use serde_json::Value;
use sm_core::record::CellStatus;

use crate::cell::adaptive::Sums;
use crate::runner::phases::open_loop::{End, Sent};
use crate::stream::request_log::{Point, RequestLog};

/// Bumped on any change of the messages: ranks of two versions refuse each other.
pub const PROTOCOL: u32 = 3;

/// Rank 0 to a worker.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ToWorker {
    /// The worker's hello is accepted.
    Welcome,
    /// The worker's hello is refused, and why.
    Refused { reason: String },
    /// A cell: hold `streams` streams of this request until `Close`.
    Cell(CellOrder),
    /// A rate level or a burst: send this rank's part of the schedule from `Open` on.
    Level(LevelOrder),
    /// Open the window (a level: start the schedule) now, on the worker's clock.
    Open,
    /// With `--precision`: the sums of the check over the window's first `len_ns` (methodology §12.3).
    Check { id: u64, len_ns: u64 },
    /// Close the window now, cancel the streams and report (a level: it was stopped).
    Close,
    /// The run is over.
    Bye,
}

/// What a worker needs to drive its share of a cell; the API key never travels: every rank is
/// given its own.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CellOrder {
    pub path: String,
    pub body: Value,
    pub streams: u32,
    pub first_token_timeout_ms: u64,
    pub stall_timeout_ms: u64,
    pub abort_request: bool,
    /// With `--precision`: keep each request's tokens as they arrive, for rank 0's checks.
    #[serde(default)]
    pub mirrored: bool,
}

/// What a worker needs to send its part of a rate level or a burst (methodology §13.1, §13.2,
/// docs/distributed.md).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LevelOrder {
    pub path: String,
    /// The bodies, sent in turn: request `i` of the schedule sends body `i` modulo their number.
    pub bodies: Vec<Value>,
    /// The whole schedule, seconds after the level's start; the worker sends its part.
    pub due: Vec<f64>,
    /// This rank's share of `--max-concurrency`.
    pub max_concurrency: Option<u32>,
    /// `--drain-max`: the longest a rank waits after the schedule's last due time (its own bound,
    /// from its own requests, ends the wait sooner); `None` for a burst (every request is read to
    /// its end). Protocol 3: before, a fixed grace.
    pub drain_max_ms: Option<u64>,
    pub first_token_timeout_ms: u64,
    pub stall_timeout_ms: u64,
    pub abort_request: bool,
}

/// A worker to rank 0.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ToCoordinator {
    Hello {
        protocol: u32,
        rank: u32,
        ranks: u32,
        version: String,
    },
    /// How many of the worker's streams have received a token (sent when it changes).
    Streams {
        with_token: u32,
    },
    /// A stream of the worker failed: the cell fails.
    Failed {
        status: CellStatus,
        reason: String,
    },
    /// A level's order is read and its bodies made: the level may start.
    Ready,
    /// The answer to `Open`, at once: its round trip bounds how late the worker's window opened.
    Opened,
    /// The answer to `Check`: this rank's sums over its window's first `len_ns`.
    Sums {
        id: u64,
        sums: Sums,
    },
    Report(RankReport),
    LevelReport(LevelReport),
}

/// A worker's requests and health for one cell, sent after `Close`.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct RankReport {
    /// Whether the window opened on the worker (a cell that failed earlier has no window).
    pub opened: bool,
    pub window_s: f64,
    pub logs: Vec<WireLog>,
    pub lag_ms_p99: Option<f64>,
    pub cpu_pct: Option<f64>,
}

/// A worker's part of a level, sent when it ended.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct LevelReport {
    /// Why the worker could not send its part (nothing was sent).
    pub failure: Option<String>,
    /// Its requests, timed from its level's start; empty when the level was stopped.
    pub requests: Vec<WireSent>,
}

/// A [`Sent`] with every instant as signed nanoseconds from the level's start.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WireSent {
    pub due: i64,
    pub log: Option<WireLog>,
    pub end: End,
    pub over: Option<i64>,
}

impl WireSent {
    pub fn from_sent(s: &Sent, origin: Instant) -> WireSent {
        WireSent {
            due: offset(s.due, origin),
            log: s.log.as_ref().map(|l| WireLog::from_log(l, origin)),
            end: s.end.clone(),
            over: s.over.map(|t| offset(t, origin)),
        }
    }

    /// The request on this process's clock, `origin` standing for the sender's origin.
    pub fn to_sent(&self, origin: Instant) -> Sent {
        Sent {
            due: at(self.due, origin),
            log: self.log.as_ref().map(|l| l.to_log(origin)),
            end: self.end.clone(),
            over: self.over.map(|ns| at(ns, origin)),
        }
    }
}

/// A [`RequestLog`] with every instant as signed nanoseconds from an origin (the window's open).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct WireLog {
    pub sent: i64,
    pub first_token: Option<i64>,
    #[serde(default)]
    pub first_answer: Option<i64>,
    /// (at, chunks, usage) of each token-bearing chunk.
    pub points: Vec<(i64, u64, Option<u64>)>,
    pub ended: Option<i64>,
    pub usage: bool,
    pub usage_at_end: bool,
    pub prompt_tokens: Option<u64>,
    pub cached_tokens: Option<u64>,
    #[serde(default)]
    pub reasoning_tokens: Option<u64>,
    /// Sent with tools, its first tool-call chunk and the call's arguments (`RequestLog`'s).
    #[serde(default)]
    pub tools: bool,
    #[serde(default)]
    pub first_tool_call: Option<i64>,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub tool_args: String,
    pub retried: bool,
    pub failure: Option<String>,
    pub id: Option<String>,
}

fn offset(t: Instant, origin: Instant) -> i64 {
    match t.checked_duration_since(origin) {
        Some(d) => d.as_nanos() as i64,
        None => -((origin - t).as_nanos() as i64),
    }
}

fn at(ns: i64, origin: Instant) -> Instant {
    let d = Duration::from_nanos(ns.unsigned_abs());
    // a worker's request sent long before its window may precede this process's clock origin:
    // it then stays at the earliest instant we can name, outside any window either way
    if ns >= 0 { origin + d } else { origin.checked_sub(d).unwrap_or(origin) }
}

impl WireLog {
    pub fn from_log(log: &RequestLog, origin: Instant) -> WireLog {
        let o = |t: Instant| offset(t, origin);
        WireLog {
            sent: o(log.sent),
            first_token: log.first_token.map(o),
            first_answer: log.first_answer.map(o),
            points: log.points.iter().map(|p| (o(p.at), p.chunks, p.usage)).collect(),
            ended: log.ended.map(o),
            usage: log.usage,
            usage_at_end: log.usage_at_end,
            prompt_tokens: log.prompt_tokens,
            cached_tokens: log.cached_tokens,
            reasoning_tokens: log.reasoning_tokens,
            tools: log.tools,
            first_tool_call: log.first_tool_call.map(o),
            tool_args: log.tool_args.clone(),
            retried: log.retried,
            failure: log.failure.clone(),
            id: log.id.clone(),
        }
    }

    /// The request on this process's clock, `origin` standing for the sender's origin.
    pub fn to_log(&self, origin: Instant) -> RequestLog {
        let t = |ns: i64| at(ns, origin);
        RequestLog {
            sent: t(self.sent),
            first_token: self.first_token.map(t),
            first_answer: self.first_answer.map(t),
            // not sent: the split falls back to the instants
            answer_point: None,
            points: self.points.iter().map(|&(ns, chunks, usage)| Point { at: t(ns), chunks, usage }).collect(),
            ended: self.ended.map(t),
            usage: self.usage,
            usage_at_end: self.usage_at_end,
            prompt_tokens: self.prompt_tokens,
            cached_tokens: self.cached_tokens,
            reasoning_tokens: self.reasoning_tokens,
            tools: self.tools,
            first_tool_call: self.first_tool_call.map(t),
            // not sent, as `answer_point`: the call's tokens are told by the instants
            tool_point: None,
            tool_args: self.tool_args.clone(),
            retried: self.retried,
            failure: self.failure.clone(),
            id: self.id.clone(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_request_keeps_its_times_relative_to_the_origin() {
        let origin = Instant::now() + Duration::from_secs(5);
        let mut log = RequestLog::new(origin - Duration::from_millis(1500));
        log.first_token = Some(origin - Duration::from_millis(20));
        log.first_answer = Some(origin + Duration::from_millis(7));
        log.reasoning_tokens = Some(1);
        log.tools = true;
        log.first_tool_call = Some(origin + Duration::from_millis(7));
        log.tool_args = r#"{"q":"a"}"#.into();
        log.points = vec![
            Point { at: origin - Duration::from_millis(20), chunks: 1, usage: Some(1) },
            Point { at: origin + Duration::from_millis(7), chunks: 2, usage: Some(3) },
        ];
        log.ended = Some(origin + Duration::from_millis(7));
        log.id = Some("r1".into());
        let wire = WireLog::from_log(&log, origin);
        assert_eq!(wire.sent, -1_500_000_000);
        assert_eq!(wire.points[1].0, 7_000_000);
        let json = serde_json::to_string(&wire).unwrap();
        let back: WireLog = serde_json::from_str(&json).unwrap();
        // another clock: every instant keeps its distance from the origin, nothing else changes
        let there = origin + Duration::from_secs(100);
        let moved = back.to_log(there);
        let shift = Duration::from_secs(100);
        let expected = RequestLog {
            sent: log.sent + shift,
            first_token: log.first_token.map(|t| t + shift),
            first_answer: log.first_answer.map(|t| t + shift),
            first_tool_call: log.first_tool_call.map(|t| t + shift),
            points: log.points.iter().map(|p| Point { at: p.at + shift, ..*p }).collect(),
            ended: log.ended.map(|t| t + shift),
            ..log.clone()
        };
        assert_eq!(moved, expected);
        assert_eq!(back.to_log(origin), log);
    }

    #[test]
    fn a_level_request_keeps_its_times_and_its_end() {
        let start = Instant::now();
        let mut log = RequestLog::new(start + Duration::from_millis(41));
        log.first_token = Some(start + Duration::from_millis(90));
        let cases = [
            Sent { due: start + Duration::from_millis(40), log: Some(log), end: End::Completed, over: None },
            Sent { due: start, log: None, end: End::Unsent, over: None },
            Sent { due: start, log: None, end: End::Failed("HTTP 503".into()), over: Some(start) },
            Sent { due: start, log: None, end: End::Lost("reset".into()), over: None },
            Sent { due: start, log: None, end: End::Cancelled, over: None },
        ];
        let there = start + Duration::from_secs(7);
        for sent in cases {
            let line = serde_json::to_string(&WireSent::from_sent(&sent, start)).unwrap();
            let back: WireSent = serde_json::from_str(&line).unwrap();
            let moved = back.to_sent(there);
            let shift = Duration::from_secs(7);
            assert_eq!(moved.due, sent.due + shift, "{line}");
            assert_eq!(moved.end, sent.end, "{line}");
            assert_eq!(moved.over, sent.over.map(|t| t + shift), "{line}");
            assert_eq!(
                moved.log.map(|l| (l.sent, l.first_token)),
                sent.log.map(|l| (l.sent + shift, l.first_token.map(|t| t + shift)))
            );
        }
    }

    #[test]
    fn messages_are_tagged_lines() {
        let m = ToCoordinator::Hello { protocol: PROTOCOL, rank: 2, ranks: 3, version: "0.1".into() };
        let line = serde_json::to_string(&m).unwrap();
        assert!(line.starts_with(r#"{"type":"hello""#), "{line}");
        assert_eq!(serde_json::from_str::<ToCoordinator>(&line).unwrap(), m);
        let open = serde_json::to_string(&ToWorker::Open).unwrap();
        assert_eq!(open, r#"{"type":"open"}"#);
    }
}
