//! A reasoning model's cell (methodology §7.3, issue 33): the wait for the first answer token, the
//! thinking each request did, and the requests whose thinking left no answer. Pure functions over
//! the requests' logs; `None` for a cell where no request thought, so a model that does not think
//! carries none of these figures.

use std::time::Instant;

use sm_core::stats::Quantiles;

use crate::stream::request_log::RequestLog;
use crate::stream::tokens::split;

/// What a cell's thinking requests showed.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Thinking {
    /// From each request's send to its first answer chunk, ms, over the requests whose first answer
    /// came before the window closed (as TTFT's population is those whose first token did).
    pub ttfa_ms: Option<Quantiles>,
    /// The mean thinking tokens (before the first answer chunk) of the requests that ended inside
    /// the window: the cell's `completed` requests.
    pub reasoning_tokens_mean: Option<f64>,
    /// Of those, the ones with tokens but no answer: their thinking used up `max_tokens`.
    pub no_answer: u64,
}

fn ms(from: Instant, to: Instant) -> f64 {
    to.saturating_duration_since(from).as_secs_f64() * 1000.0
}

/// See [`Thinking`]; the window is `[start, end)` (its type is the window module's, which calls
/// this one); `per_chunk` as the cell's token attribution takes it.
pub fn thinking(logs: &[RequestLog], (start, end): (Instant, Instant), per_chunk: Option<f64>) -> Option<Thinking> {
    let thought: Vec<f64> = logs.iter().map(|l| split(l, per_chunk).reasoning).collect();
    if !thought.iter().any(|&t| t > 0.0) {
        return None;
    }
    let ttfa: Vec<f64> =
        logs.iter().filter_map(|l| l.first_answer.filter(|&a| a < end).map(|a| ms(l.sent, a))).collect();
    // the cell's completed requests: those whose end arrived inside the window
    let completed = |l: &RequestLog| l.ended.is_some_and(|t| t >= start && t < end);
    let ended: Vec<f64> = logs.iter().zip(&thought).filter(|(l, _)| completed(l)).map(|(_, &t)| t).collect();
    let no_answer = logs.iter().filter(|l| completed(l) && l.first_answer.is_none() && l.first_token.is_some());
    Some(Thinking {
        ttfa_ms: Quantiles::of(&ttfa),
        reasoning_tokens_mean: (!ended.is_empty()).then(|| ended.iter().sum::<f64>() / ended.len() as f64),
        no_answer: no_answer.count() as u64,
    })
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
        // an answer after the window closed is not in the population
        let short = (t0, t0 + Duration::from_millis(100));
        assert_eq!(thinking(&logs, short, None).unwrap().ttfa_ms.unwrap().p50, 40.0);
    }

    #[test]
    fn a_cell_that_did_not_think_has_no_thinking_figures() {
        let t0 = Instant::now();
        let window = (t0, t0 + Duration::from_secs(10));
        let logs = [log(t0, &[10, 20], Some(10), true), log(t0, &[15], Some(15), false)];
        assert_eq!(thinking(&logs, window, None), None);
    }
}
