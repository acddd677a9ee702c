//! A reasoning model's cell (methodology §7.3, issue 33): the wait for the first answer token, the
//! thinking each request did, and the requests whose thinking left no answer. Pure functions over
//! the requests' logs; `None` for a cell where no request thought, so a model that does not think
//! carries none of these figures.

use std::time::Instant;

use sm_core::precision::{self, Interval};
use sm_core::stats::{Quantiles, median};

use crate::stream::request_log::RequestLog;
use crate::stream::tokens::{TokenSplit, attribute, split};

/// What a cell's thinking requests showed.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Thinking {
    /// From each request's send to its first answer chunk, ms, over the requests whose first answer
    /// came before the window closed (as TTFT's population is those whose first token did).
    pub ttfa_ms: Option<Quantiles>,
    /// 95 % intervals of TTFA p50 and p90, by order statistics as TTFT's (methodology §12.2).
    pub ttfa_ci: [Option<Interval>; 2],
    /// The mean thinking tokens (before the first answer chunk) of the requests that ended inside
    /// the window: the cell's `completed` requests.
    pub reasoning_tokens_mean: Option<f64>,
    /// Of those, the ones with tokens but no answer: their thinking used up `max_tokens`.
    pub no_answer: u64,
    /// Their mean answer tokens (from the first answer chunk on).
    pub answer_tokens_mean: Option<f64>,
    /// The median of their answers' own speeds ([`answer_tok_s`]).
    pub answer_tok_s: Option<f64>,
    /// The server's count of the thinking, from usage: the mean over those that reported it.
    pub usage_reasoning_tokens_mean: Option<f64>,
    /// Those whose usage count differs from the stream's by more than one token; `None` where no
    /// request reported one.
    pub reasoning_disagree: Option<u64>,
}

fn mean(values: &[f64]) -> Option<f64> {
    (!values.is_empty()).then(|| values.iter().sum::<f64>() / values.len() as f64)
}

/// See [`Thinking`]; the window is `[start, end)` (its type is the window module's, which calls
/// this one); `per_chunk` as the cell's token attribution takes it. A cell thought where a request's
/// stream carried thinking or its usage counted some (a server that thinks without showing it).
pub fn thinking(logs: &[RequestLog], (start, end): (Instant, Instant), per_chunk: Option<f64>) -> Option<Thinking> {
    let splits: Vec<TokenSplit> = logs.iter().map(|l| split(l, per_chunk)).collect();
    let usage_thought = logs.iter().any(|l| l.reasoning_tokens.is_some_and(|t| t > 0));
    if !splits.iter().any(|s| s.reasoning > 0.0) && !usage_thought {
        return None;
    }
    let ttfa: Vec<f64> =
        logs.iter().filter_map(|l| l.first_answer.filter(|&a| a < end).map(|a| l.ms_after_send(a))).collect();
    // the cell's completed requests: those whose end arrived inside the window
    let ended: Vec<(&RequestLog, TokenSplit)> =
        logs.iter().zip(splits).filter(|(l, _)| l.ended_within(start, end)).collect();
    let no_answer = ended.iter().filter(|(l, _)| l.first_answer.is_none() && l.first_token.is_some());
    let reported: Vec<(f64, u64)> =
        ended.iter().filter_map(|(l, s)| l.reasoning_tokens.map(|u| (s.reasoning, u))).collect();
    let speeds: Vec<f64> = ended.iter().filter_map(|(l, _)| answer_tok_s(l, per_chunk)).collect();
    let answers: Vec<f64> = ended.iter().filter(|(l, _)| l.first_answer.is_some()).map(|(_, s)| s.answer).collect();
    let mut sorted = ttfa.clone();
    sorted.sort_by(f64::total_cmp);
    Some(Thinking {
        ttfa_ms: Quantiles::of(&ttfa),
        ttfa_ci: [50.0, 90.0].map(|p| precision::quantile_interval(&sorted, p)),
        reasoning_tokens_mean: mean(&ended.iter().map(|(_, s)| s.reasoning).collect::<Vec<_>>()),
        no_answer: no_answer.count() as u64,
        answer_tokens_mean: mean(&answers),
        answer_tok_s: median(&speeds),
        usage_reasoning_tokens_mean: mean(&reported.iter().map(|&(_, u)| u as f64).collect::<Vec<_>>()),
        reasoning_disagree: (!reported.is_empty())
            .then(|| reported.iter().filter(|&&(stream, u)| (stream - u as f64).abs() > 1.0).count() as u64),
    })
}

/// One request's answer speed, tok/s: the answer tokens after its first answer chunk over the time
/// from that chunk to its last, as a request's decode speed leaves out its first token's wait.
/// `None` with fewer than two answer chunks, or for a log from another rank's wire (no place).
pub fn answer_tok_s(log: &RequestLog, per_chunk: Option<f64>) -> Option<f64> {
    let k = log.answer_point?;
    let counts = attribute(&log.points, per_chunk);
    let (first, last) = (log.points.get(k)?, log.points.last()?);
    let tokens = counts.last()?.0 - counts.get(k)?.0;
    let secs = last.at.saturating_duration_since(first.at).as_secs_f64();
    (tokens > 0.0 && secs > 0.0).then(|| tokens / secs)
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::stream::request_log::Point;

    /// A request sent at 0 whose chunks (one token each) arrive at `at` ms; the answer from `answer`.
    fn log(t0: Instant, at: &[u64], answer: Option<u64>, ended: bool) -> RequestLog {
        let t = |ms: u64| t0 + Duration::from_millis(ms);
        let mut l = RequestLog::new(t0);
        l.points =
            at.iter().enumerate().map(|(i, &ms)| Point { at: t(ms), chunks: i as u64 + 1, usage: None }).collect();
        l.first_token = at.first().map(|&ms| t(ms));
        l.first_answer = answer.map(t);
        l.answer_point = answer.and_then(|a| at.iter().position(|&ms| ms == a));
        l.ended = ended.then(|| t(*at.last().unwrap()));
        l
    }

    #[test]
    fn a_cell_that_thought_has_its_wait_for_the_answer() {
        let t0 = Instant::now();
        let window = (t0, t0 + Duration::from_secs(10));
        let logs = [
            // three thinking tokens, then two of answer
            log(t0, &[10, 20, 30, 40, 50], Some(40), true),
            // one thinking token, then the answer
            log(t0, &[100, 200, 300], Some(200), true),
            // thinking that used up max_tokens
            log(t0, &[10, 20], None, true),
        ];
        let t = thinking(&logs, window, None).expect("the cell thought");
        let q = t.ttfa_ms.unwrap();
        assert_eq!((q.p50, q.p99.round()), (120.0, 198.0));
        assert_eq!(t.reasoning_tokens_mean, Some((3.0 + 1.0 + 2.0) / 3.0));
        assert_eq!(t.no_answer, 1);
        assert_eq!(t.answer_tokens_mean, Some(2.0), "the two that answered gave two answer tokens each");
        // one token after the first answer chunk: in 10 ms (100 tok/s) and in 100 ms (10 tok/s)
        assert_eq!(t.answer_tok_s, Some(55.0));
        assert_eq!((t.usage_reasoning_tokens_mean, t.reasoning_disagree), (None, None), "no usage count");
        // an answer after the window closed is not in the population
        let short = (t0, t0 + Duration::from_millis(100));
        assert_eq!(thinking(&logs, short, None).unwrap().ttfa_ms.unwrap().p50, 40.0);
    }

    #[test]
    fn the_servers_own_count_of_the_thinking_is_kept_and_a_disagreement_counted() {
        let t0 = Instant::now();
        let window = (t0, t0 + Duration::from_secs(10));
        let with_usage =
            |at: &[u64], answer, usage| RequestLog { reasoning_tokens: usage, ..log(t0, at, answer, true) };
        let logs = [
            // three thinking tokens by the stream: usage 4 (the end marker on the thinking side) agrees
            with_usage(&[10, 20, 30, 40], Some(40), Some(4)),
            // one by the stream, usage 5: they disagree
            with_usage(&[10, 20, 30], Some(20), Some(5)),
            // no usage count reported
            with_usage(&[10, 20], Some(20), None),
        ];
        let t = thinking(&logs, window, None).unwrap();
        assert_eq!((t.usage_reasoning_tokens_mean, t.reasoning_disagree), (Some(4.5), Some(1)));
        // a server that thinks without showing it: no thinking in the stream, usage counts it
        let hidden = [with_usage(&[10, 20], Some(10), Some(30))];
        let t = thinking(&hidden, window, None).expect("usage says the cell thought");
        assert_eq!(
            (t.reasoning_tokens_mean, t.usage_reasoning_tokens_mean, t.reasoning_disagree),
            (Some(0.0), Some(30.0), Some(1))
        );
    }

    #[test]
    fn a_cell_that_did_not_think_has_no_thinking_figures() {
        let t0 = Instant::now();
        let window = (t0, t0 + Duration::from_secs(10));
        let logs = [log(t0, &[10, 20], Some(10), true), log(t0, &[15], Some(15), false)];
        assert_eq!(thinking(&logs, window, None), None);
    }
}
