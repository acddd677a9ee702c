//! A reasoning model's figures and a run's tool-call figures in every load phase (issue 33,
//! methodology §7.3, §7.3.1, §13): one typed struct per family, flattened into each phase's
//! record (a rate or replay level, a burst, the sessions' summary) with the keys a rate level has
//! always written, and one pure function per family over what each completed request did, its
//! times counted from the phase's own origin (a level's due time, a burst's scheduled instant, a
//! turn's due time). A phase where no request thought carries no thinking figure, one whose
//! requests carried no tools no tool-call figure: its record reads as before.

use serde::{Deserialize, Serialize};

use crate::record::percentiles::{P50P90P99, Percentiles};
use crate::stats::{Quantiles, median};

/// What one completed request did, as the phase's figures read it; ms from the phase's origin.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Answered {
    /// It received a token.
    pub got_token: bool,
    /// Its first answer chunk, ms from the origin; `None` where no answer came.
    pub first_answer_ms: Option<f64>,
    /// Its tokens before the first answer chunk (methodology §7.1's attribution).
    pub reasoning_tokens: f64,
    /// Sent with tools: what it did with them; `None` where it carried none.
    pub tool_call: Option<Called>,
}

/// What a request sent with tools did with them.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Called {
    /// Its first tool-call chunk, ms from the origin; `None` where it made no call.
    pub first_tool_call_ms: Option<f64>,
    /// Its tokens from that chunk on (0 without a call).
    pub tokens: f64,
    /// Whether the call's arguments parse as a JSON object; `None` without a call.
    pub args_valid: Option<bool>,
}

/// A phase's thinking figures (methodology §7.3): absent where no request thought.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ThinkingFigures {
    /// A reasoning model's requests (issue 33): from the phase's origin (a level's due time, a
    /// burst's scheduled instant, a turn's due time) to the first answer chunk, over the
    /// completed requests that answered; absent where no request thought.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "Option<P50P90P99>")]
    pub ttfa_ms: Option<Percentiles>,
    /// The mean thinking tokens of the completed requests; absent where no request thought.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0))]
    pub reasoning_tokens_mean: Option<f64>,
    /// Completed requests with no answer (their thinking used up `max_tokens`); absent where no
    /// request thought.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub no_answer: Option<u64>,
}

/// A phase's tool-call figures (methodology §7.3.1): absent where the requests carried no tools.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ToolCallFigures {
    /// A run with `--tools`: from the phase's origin to each completed request's first tool-call
    /// chunk, over those that made a call; absent where the requests carried no tools.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "Option<P50P90P99>")]
    pub ttftc_ms: Option<Percentiles>,
    /// The mean tokens of a call (from its first tool-call chunk on), over the completed requests
    /// that made one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0))]
    pub tool_call_tokens_mean: Option<f64>,
    /// Of those, the share whose arguments parse as a JSON object, 0–1.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0, max = 1))]
    pub tool_args_valid: Option<f64>,
    /// The completed requests sent with tools that made no call; absent where the requests
    /// carried no tools.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub no_tool_call: Option<u64>,
}

fn mean(values: &[f64]) -> Option<f64> {
    (!values.is_empty()).then(|| values.iter().sum::<f64>() / values.len() as f64)
}

fn quantiles(values: &[f64]) -> Option<Percentiles> {
    Quantiles::of(values).map(Percentiles::from)
}

impl ThinkingFigures {
    /// The figures of a phase's completed requests; empty where none of them thought.
    pub fn of(completed: &[Answered]) -> ThinkingFigures {
        if !completed.iter().any(|a| a.reasoning_tokens > 0.0) {
            return ThinkingFigures::default();
        }
        let ttfa: Vec<f64> = completed.iter().filter_map(|a| a.first_answer_ms).collect();
        let reasoning: Vec<f64> = completed.iter().map(|a| a.reasoning_tokens).collect();
        let no_answer = completed.iter().filter(|a| a.got_token && a.first_answer_ms.is_none()).count();
        ThinkingFigures {
            ttfa_ms: quantiles(&ttfa),
            reasoning_tokens_mean: mean(&reasoning),
            no_answer: Some(no_answer as u64),
        }
    }

    /// Whether no request thought.
    pub fn is_empty(&self) -> bool {
        *self == ThinkingFigures::default()
    }

    /// Several rounds as one (a burst's cell): each figure the median of the rounds that have it,
    /// the requests with no answer summed.
    pub fn over(rounds: &[ThinkingFigures]) -> ThinkingFigures {
        let med =
            |f: &dyn Fn(&ThinkingFigures) -> Option<f64>| median(&rounds.iter().filter_map(f).collect::<Vec<_>>());
        let ttfa = Percentiles::each(|q| med(&|r| r.ttfa_ms.as_ref().and_then(q)));
        ThinkingFigures {
            ttfa_ms: (!ttfa.is_empty()).then_some(ttfa),
            reasoning_tokens_mean: med(&|r| r.reasoning_tokens_mean),
            no_answer: rounds.iter().filter_map(|r| r.no_answer).reduce(|a, b| a + b),
        }
    }
}

impl ToolCallFigures {
    /// The figures of a phase's completed requests; empty where none carried tools.
    pub fn of(completed: &[Answered]) -> ToolCallFigures {
        let with: Vec<Called> = completed.iter().filter_map(|a| a.tool_call).collect();
        if with.is_empty() {
            return ToolCallFigures::default();
        }
        let called: Vec<&Called> = with.iter().filter(|c| c.first_tool_call_ms.is_some()).collect();
        let n = called.len() as f64;
        let valid = called.iter().filter(|c| c.args_valid == Some(true)).count() as f64;
        ToolCallFigures {
            ttftc_ms: quantiles(&called.iter().filter_map(|c| c.first_tool_call_ms).collect::<Vec<_>>()),
            tool_call_tokens_mean: mean(&called.iter().map(|c| c.tokens).collect::<Vec<_>>()),
            tool_args_valid: (n > 0.0).then(|| valid / n),
            no_tool_call: Some((with.len() - called.len()) as u64),
        }
    }

    /// Whether the requests carried no tools.
    pub fn is_empty(&self) -> bool {
        *self == ToolCallFigures::default()
    }

    /// Several rounds as one (a burst's cell): each figure the median of the rounds that have it,
    /// the requests that made no call summed.
    pub fn over(rounds: &[ToolCallFigures]) -> ToolCallFigures {
        let med =
            |f: &dyn Fn(&ToolCallFigures) -> Option<f64>| median(&rounds.iter().filter_map(f).collect::<Vec<_>>());
        let ttftc = Percentiles::each(|q| med(&|r| r.ttftc_ms.as_ref().and_then(q)));
        ToolCallFigures {
            ttftc_ms: (!ttftc.is_empty()).then_some(ttftc),
            tool_call_tokens_mean: med(&|r| r.tool_call_tokens_mean),
            tool_args_valid: med(&|r| r.tool_args_valid),
            no_tool_call: rounds.iter().filter_map(|r| r.no_tool_call).reduce(|a, b| a + b),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn thought(answer: Option<f64>, reasoning: f64) -> Answered {
        Answered { got_token: true, first_answer_ms: answer, reasoning_tokens: reasoning, tool_call: None }
    }

    #[test]
    fn thinking_counts_from_the_origin_and_names_the_requests_left_without_an_answer() {
        let t = ThinkingFigures::of(&[thought(Some(100.0), 4.0), thought(Some(300.0), 2.0), thought(None, 6.0)]);
        let q = t.ttfa_ms.unwrap();
        assert_eq!((q.p50, q.p90, q.p99), (Some(200.0), Some(280.0), Some(298.0)));
        assert_eq!((t.reasoning_tokens_mean, t.no_answer), (Some(4.0), Some(1)));
        // nobody thought: nothing, and the record's keys stay out
        let plain = ThinkingFigures::of(&[thought(Some(10.0), 0.0)]);
        assert!(plain.is_empty());
        assert_eq!(serde_json::to_string(&plain).unwrap(), "{}");
        // every request thought and none answered: no TTFA, all counted
        let none = ThinkingFigures::of(&[thought(None, 8.0), thought(None, 8.0)]);
        assert_eq!((none.ttfa_ms, none.reasoning_tokens_mean, none.no_answer), (None, Some(8.0), Some(2)));
    }

    #[test]
    fn tool_calls_are_timed_from_the_origin_and_their_arguments_judged() {
        let call = |ms: Option<f64>, tokens, valid| Answered {
            tool_call: Some(Called { first_tool_call_ms: ms, tokens, args_valid: valid }),
            ..thought(None, 0.0)
        };
        let c = ToolCallFigures::of(&[
            call(Some(50.0), 10.0, Some(true)),
            call(Some(150.0), 20.0, Some(false)),
            call(None, 0.0, None),
        ]);
        assert_eq!(c.ttftc_ms.and_then(|q| q.p50), Some(100.0));
        assert_eq!((c.tool_call_tokens_mean, c.tool_args_valid, c.no_tool_call), (Some(15.0), Some(0.5), Some(1)));
        assert!(ToolCallFigures::of(&[thought(Some(1.0), 0.0)]).is_empty(), "no tools, no figures");
        let none = ToolCallFigures::of(&[call(None, 0.0, None)]);
        assert_eq!((none.ttftc_ms, none.tool_args_valid, none.no_tool_call), (None, None, Some(1)));
    }

    #[test]
    fn rounds_take_the_median_and_sum_the_counts() {
        let round = |p50, mean, none| ThinkingFigures {
            ttfa_ms: Some(Percentiles::p50_p90_p99(p50, p50, p50)),
            reasoning_tokens_mean: Some(mean),
            no_answer: Some(none),
        };
        let t = ThinkingFigures::over(&[round(100.0, 4.0, 1), round(300.0, 8.0, 0), round(200.0, 6.0, 2)]);
        assert_eq!((t.ttfa_ms.unwrap().p50, t.reasoning_tokens_mean, t.no_answer), (Some(200.0), Some(6.0), Some(3)));
        assert!(ThinkingFigures::over(&[ThinkingFigures::default()]).is_empty());
        assert!(ToolCallFigures::over(&[]).is_empty());
    }

    #[test]
    fn the_figures_read_back_from_the_keys_a_rate_level_writes() {
        let v = serde_json::json!({"ttfa_ms": {"p50": 1.0, "p90": 2.0, "p99": 3.0}, "reasoning_tokens_mean": 5, "no_answer": 0});
        let t: ThinkingFigures = serde_json::from_value(v.clone()).unwrap();
        assert_eq!(
            serde_json::to_value(t).unwrap(),
            serde_json::json!({"ttfa_ms": {"p50": 1.0, "p90": 2.0, "p99": 3.0}, "reasoning_tokens_mean": 5.0, "no_answer": 0})
        );
    }
}
