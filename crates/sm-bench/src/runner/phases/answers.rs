//! A completed request of a load phase as its thinking and tool-call figures read it (issue 33,
//! methodology §7.3, §7.3.1, §13): the figures themselves are one pure function per family in
//! `sm_core::phases::answers`, the same for a rate or replay level, a burst and the sessions.

use std::time::Instant;

use sm_core::phases::answers::{Answered, Called, ThinkingFigures, ToolCallFigures};

use crate::stream::request_log::RequestLog;
use crate::stream::tokens::{args_valid, call_tokens, split};

fn ms(origin: Instant, t: Instant) -> f64 {
    t.saturating_duration_since(origin).as_secs_f64() * 1000.0
}

/// One completed request, its times from `origin` (its due time, a burst's scheduled instant).
pub fn answered(origin: Instant, log: &RequestLog) -> Answered {
    Answered {
        got_token: log.first_token.is_some(),
        first_answer_ms: log.first_answer.map(|t| ms(origin, t)),
        reasoning_tokens: split(log, None).reasoning,
        tool_call: log.tools.then(|| Called {
            first_tool_call_ms: log.first_tool_call.map(|t| ms(origin, t)),
            tokens: call_tokens(log, None),
            args_valid: args_valid(log),
        }),
    }
}

/// A phase's thinking and tool-call figures from its completed requests, each with its origin.
pub fn figures<'a>(
    completed: impl IntoIterator<Item = (Instant, &'a RequestLog)>,
) -> (ThinkingFigures, ToolCallFigures) {
    let answers: Vec<Answered> = completed.into_iter().map(|(origin, log)| answered(origin, log)).collect();
    (ThinkingFigures::of(&answers), ToolCallFigures::of(&answers))
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::stream::request_log::Point;

    /// A request due at 0, sent at 5 ms, whose chunks (one token each) arrive at `at` ms.
    fn log(t0: Instant, at: &[u64], answer: Option<u64>) -> RequestLog {
        let t = |ms: u64| t0 + Duration::from_millis(ms);
        let mut l = RequestLog::new(t(5));
        l.points =
            at.iter().enumerate().map(|(i, &ms)| Point { at: t(ms), chunks: i as u64 + 1, usage: None }).collect();
        l.first_token = at.first().map(|&ms| t(ms));
        l.first_answer = answer.map(t);
        l.answer_point = answer.and_then(|a| at.iter().position(|&ms| ms == a));
        l.ended = at.last().map(|&ms| t(ms));
        l
    }

    #[test]
    fn a_phases_requests_are_timed_from_their_origin_not_their_send() {
        let t0 = Instant::now();
        // two thinking tokens, then the answer at 30 ms; three thinking tokens and no answer
        let (thought, no_answer) = (log(t0, &[10, 20, 30, 40], Some(30)), log(t0, &[10, 20, 30], None));
        let (thinking, tools) = figures([(t0, &thought), (t0, &no_answer)]);
        assert_eq!(thinking.ttfa_ms.and_then(|q| q.p50), Some(30.0), "from the origin, not the send at 5 ms");
        assert_eq!((thinking.reasoning_tokens_mean, thinking.no_answer), (Some(2.5), Some(1)));
        assert!(tools.is_empty());
        // with tools: a call from 20 ms on, its arguments valid
        // the call is the answer (its first chunk is the first answer chunk too)
        let mut called = log(t0, &[10, 20, 30], Some(20));
        (called.tools, called.first_tool_call, called.tool_point) =
            (true, Some(t0 + Duration::from_millis(20)), Some(1));
        called.tool_args = r#"{"city": "Paris"}"#.into();
        let (thinking, tools) = figures([(t0 + Duration::from_millis(10), &called)]);
        assert_eq!(tools.ttftc_ms.and_then(|q| q.p50), Some(10.0));
        assert_eq!(
            (tools.tool_call_tokens_mean, tools.tool_args_valid, tools.no_tool_call),
            (Some(2.0), Some(1.0), Some(0))
        );
        assert_eq!(thinking.reasoning_tokens_mean, Some(1.0), "one token of thinking before the call");
    }
}
