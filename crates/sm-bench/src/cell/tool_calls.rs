//! A cell sent with tools (`run --tools`, methodology §7.3.1, issue 33 §2): the wait for the first
//! tool-call delta, the calls' tokens, whether their arguments parse, and the requests that made no
//! call. Pure functions over the requests' logs; `None` for a cell whose requests carried no tools,
//! so a run without `--tools` carries none of these figures.

use std::time::Instant;

use sm_core::precision::{self, Interval};
use sm_core::stats::Quantiles;

use crate::stream::request_log::RequestLog;
use crate::stream::tokens::{args_valid, call_tokens};

/// What a cell's requests did with their tools.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ToolCalls {
    /// From each request's send to its first tool-call chunk, ms, over the requests whose first
    /// call arrived before the window closed (as TTFT's population is those whose first token did).
    pub ttftc_ms: Option<Quantiles>,
    /// 95 % intervals of TTFTC p50 and p90, by order statistics as TTFT's (methodology §12.2).
    pub ttftc_ci: [Option<Interval>; 2],
    /// The mean tokens of a call (from its first tool-call chunk on), over the cell's completed
    /// requests that made one.
    pub tool_call_tokens_mean: Option<f64>,
    /// Of those, the share whose arguments parse as a JSON object, 0–1.
    pub tool_args_valid: Option<f64>,
    /// The cell's completed requests that made no call.
    pub no_tool_call: u64,
}

/// See [`ToolCalls`]; the window is `[start, end)`, `per_chunk` as the cell's token attribution
/// takes it.
pub fn tool_calls(logs: &[RequestLog], (start, end): (Instant, Instant), per_chunk: Option<f64>) -> Option<ToolCalls> {
    let with: Vec<&RequestLog> = logs.iter().filter(|l| l.tools).collect();
    if with.is_empty() {
        return None;
    }
    let ttftc: Vec<f64> =
        with.iter().filter_map(|l| l.first_tool_call.filter(|&c| c < end).map(|c| l.ms_after_send(c))).collect();
    // the cell's completed requests: those whose end arrived inside the window
    let completed: Vec<&RequestLog> = with.iter().copied().filter(|l| l.ended_within(start, end)).collect();
    let called: Vec<&RequestLog> = completed.iter().copied().filter(|l| l.first_tool_call.is_some()).collect();
    let n = called.len() as f64;
    let tokens: f64 = called.iter().map(|l| call_tokens(l, per_chunk)).sum();
    let valid = called.iter().filter(|l| args_valid(l) == Some(true)).count() as f64;
    let mut sorted = ttftc.clone();
    sorted.sort_by(f64::total_cmp);
    Some(ToolCalls {
        ttftc_ms: Quantiles::of(&ttftc),
        ttftc_ci: [50.0, 90.0].map(|p| precision::quantile_interval(&sorted, p)),
        tool_call_tokens_mean: (n > 0.0).then(|| tokens / n),
        tool_args_valid: (n > 0.0).then(|| valid / n),
        no_tool_call: (completed.len() - called.len()) as u64,
    })
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::stream::request_log::Point;

    /// A request with tools sent at 0 whose chunks (one token each) arrive at `at` ms; the call
    /// from `call` (its arguments `args`), ended at its last chunk when `ended`.
    fn log(t0: Instant, at: &[u64], call: Option<(u64, &str)>, ended: bool) -> RequestLog {
        let t = |ms: u64| t0 + Duration::from_millis(ms);
        let mut l = RequestLog::new(t0);
        l.tools = true;
        l.points =
            at.iter().enumerate().map(|(i, &ms)| Point { at: t(ms), chunks: i as u64 + 1, usage: None }).collect();
        l.first_token = at.first().map(|&ms| t(ms));
        if let Some((ms, args)) = call {
            l.first_tool_call = Some(t(ms));
            l.tool_point = at.iter().position(|&a| a == ms);
            l.tool_args = args.into();
        }
        l.ended = ended.then(|| t(*at.last().unwrap()));
        l
    }

    #[test]
    fn a_cell_with_tools_has_its_wait_for_the_call_and_the_calls_figures() {
        let t0 = Instant::now();
        let window = (t0, t0 + Duration::from_secs(10));
        let logs = [
            // two tokens of thinking, then a call of three tokens with valid arguments
            log(t0, &[10, 20, 30, 40, 50], Some((30, r#"{"a": 1}"#)), true),
            // a call of two tokens at once, its arguments cut
            log(t0, &[100, 200], Some((100, r#"{"a"#)), true),
            // no call: it answered with text
            log(t0, &[10, 20], None, true),
            // a call still open when the window closed: timed, but not completed
            log(t0, &[300, 400], Some((300, "{")), false),
        ];
        let c = tool_calls(&logs, window, None).expect("sent with tools");
        let q = c.ttftc_ms.unwrap();
        assert_eq!((q.p50, q.p99.round()), (100.0, 296.0));
        assert_eq!(c.tool_call_tokens_mean, Some((3.0 + 2.0) / 2.0));
        assert_eq!(c.tool_args_valid, Some(0.5));
        assert_eq!(c.no_tool_call, 1);
        assert_eq!(c.ttftc_ci, [None, None], "three calls are too few for an interval (6 at p50)");
        // a call after the window closed is not in the population
        let short = (t0, t0 + Duration::from_millis(60));
        assert_eq!(tool_calls(&logs, short, None).unwrap().ttftc_ms.unwrap().p50, 30.0);
    }

    /// Enough calls give TTFTC order-statistic intervals (§12.2) around its percentiles, as TTFT's:
    /// what compare tells a change in the wait for the call from noise by.
    #[test]
    fn enough_calls_give_intervals_around_the_wait() {
        let t0 = Instant::now();
        let window = (t0, t0 + Duration::from_secs(10));
        let logs: Vec<RequestLog> =
            (1..=40).map(|i| log(t0, &[10 * i, 10 * i + 5], Some((10 * i, "{}")), true)).collect();
        let c = tool_calls(&logs, window, None).unwrap();
        let q = c.ttftc_ms.unwrap();
        let [p50, p90] = c.ttftc_ci.map(Option::unwrap);
        assert!(p50.lo < q.p50 && q.p50 < p50.hi, "{p50:?} around {}", q.p50);
        assert!(p90.lo < q.p90 && q.p90 < p90.hi, "{p90:?} around {}", q.p90);
        let five = tool_calls(&logs[..5], window, None).unwrap();
        assert_eq!(five.ttftc_ci, [None, None], "5 calls are too few even at p50");
    }

    #[test]
    fn a_cell_without_tools_has_no_tool_call_figures() {
        let t0 = Instant::now();
        let window = (t0, t0 + Duration::from_secs(10));
        let mut plain = log(t0, &[10, 20], None, true);
        plain.tools = false;
        assert_eq!(tool_calls(&[plain], window, None), None);
        // sent with tools, none called: the figures are there, the count says so
        let c = tool_calls(&[log(t0, &[10], None, true)], window, None).unwrap();
        assert_eq!((c.ttftc_ms, c.tool_call_tokens_mean, c.tool_args_valid, c.no_tool_call), (None, None, None, 1));
    }
}
