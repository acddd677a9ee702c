use super::*;
use crate::stream::request_log::Point;

fn at(base: Instant, ms: u64) -> Instant {
    base + Duration::from_millis(ms)
}

/// A request sent at `sent`, first token at `first`, one token every `step` ms.
fn steady(base: Instant, sent: u64, first: u64, step: u64, n: u64, per_chunk: u64) -> RequestLog {
    let mut log = RequestLog::new(at(base, sent));
    log.first_token = Some(at(base, first));
    for i in 0..n {
        let usage = Some((i + 1) * per_chunk);
        log.points.push(Point { at: at(base, first + i * step * per_chunk), chunks: i + 1, usage });
    }
    log
}

#[test]
fn counts_only_tokens_inside_the_window() {
    let b = Instant::now();
    // tokens at 100, 110, …, 1090 ms; window [500, 1000) holds 50 of them
    let logs = vec![steady(b, 0, 100, 10, 100, 1)];
    let w = Window { start: at(b, 500), end: at(b, 1000) };
    let f = figures(&logs, w, &[], None);
    assert_eq!(f.output_tokens, 50);
    assert!((f.total_tok_s - 100.0).abs() < 1e-9);
    assert!((f.tbt_ms.unwrap().p50 - 10.0).abs() < 1e-9);
    assert!((f.per_request_tok_s.unwrap() - 100.0).abs() < 1e-9);
    assert!((f.ttft_ms.unwrap().p50 - 100.0).abs() < 1e-9);
    assert_eq!(f.requests, 1);
    assert_eq!(f.completed, 0);
    assert!((f.avg_active - 1.0).abs() < 1e-9);
}

#[test]
fn multi_token_chunks_count_tokens_not_chunks() {
    let b = Instant::now();
    // 4 tokens per chunk every 40 ms = one token per 10 ms
    let logs = vec![steady(b, 0, 0, 10, 100, 4)];
    let w = Window { start: at(b, 0), end: at(b, 1000) };
    let f = figures(&logs, w, &[], None);
    assert_eq!(f.output_tokens, 100);
    assert!((f.tbt_ms.unwrap().p50 - 10.0).abs() < 1e-9);
    assert!((f.chunk_gap_ms.unwrap().p50 - 40.0).abs() < 1e-9);
}

#[test]
fn ttft_after_window_is_excluded_and_completed_counted() {
    let b = Instant::now();
    let mut done = steady(b, 0, 50, 10, 10, 1);
    done.ended = Some(at(b, 150));
    let late = steady(b, 0, 2000, 10, 10, 1);
    let w = Window { start: at(b, 0), end: at(b, 1000) };
    let f = figures(&[done, late], w, &[], None);
    assert_eq!(f.ttft_ms.unwrap().p50, 50.0);
    assert_eq!(f.completed, 1);
    assert_eq!(f.requests, 1);
}

#[test]
fn server_gauge_is_time_weighted() {
    let b = Instant::now();
    let w = Window { start: at(b, 0), end: at(b, 1000) };
    let samples = [RunningSample { at: at(b, 0), running: 4.0 }, RunningSample { at: at(b, 250), running: 8.0 }];
    let f = figures(&[], w, &samples, None);
    assert!((f.avg_active - 7.0).abs() < 1e-9);
    assert_eq!(f.token_source, None);
    assert_eq!(f.output_tokens, 0);
}

#[test]
fn cache_hit_share_sums_the_requests_that_reported_it() {
    let b = Instant::now();
    let log = |prompt: Option<u64>, cached: Option<u64>| {
        let mut l = steady(b, 0, 0, 10, 10, 1);
        (l.prompt_tokens, l.cached_tokens) = (prompt, cached);
        l
    };
    let w = Window { start: b, end: at(b, 1000) };
    assert_eq!(figures(&[log(Some(1000), None)], w, &[], None).prompt_cache_hit_pct, None);
    // one cold request among three warm ones: (0 + 3 × 896) / 4000
    let logs = [
        log(Some(1000), Some(0)),
        log(Some(1000), Some(896)),
        log(Some(1000), Some(896)),
        log(Some(1000), Some(896)),
        log(None, None),
    ];
    let pct = figures(&logs, w, &[], None).prompt_cache_hit_pct.unwrap();
    assert!((pct - 67.2).abs() < 1e-9, "{pct}");
}

#[test]
fn retried_requests_are_counted() {
    let b = Instant::now();
    let mut again = steady(b, 0, 0, 10, 10, 1);
    again.retried = true;
    let f = figures(&[steady(b, 0, 0, 10, 10, 1), again], Window { start: b, end: at(b, 1000) }, &[], None);
    assert_eq!(f.retried, 1);
}

#[test]
fn chunk_source_when_any_request_lacked_usage() {
    let b = Instant::now();
    let mut log = steady(b, 0, 0, 10, 10, 1);
    log.usage = false;
    let f = figures(&[log], Window { start: b, end: at(b, 1000) }, &[], None);
    assert_eq!(f.token_source, Some(TokenSource::Chunks));
}

/// Chunks of `k` tokens every `step × k` ms without usage; when `ends`, the usage total comes
/// after the last chunk (llama.cpp's shape), and `total` may leave a remainder in that chunk.
fn at_end(base: Instant, first: u64, step: u64, chunks: u64, k: u64, ends: Option<u64>) -> RequestLog {
    let mut log = RequestLog::new(base);
    log.first_token = Some(at(base, first));
    log.usage = false;
    for i in 0..chunks {
        log.points.push(Point { at: at(base, first + i * step * k), chunks: i + 1, usage: None });
    }
    if let Some(total) = ends {
        let last = log.points.last_mut().unwrap();
        last.usage = Some(total);
        log.usage_at_end = true;
        log.ended = Some(last.at);
    }
    log
}

#[test]
fn a_usage_total_is_spread_over_its_chunks_in_and_out_of_the_window() {
    let b = Instant::now();
    // 50 chunks of 4 tokens, one token per 10 ms, from 0 to 1960 ms; the total comes at the end
    let logs = [at_end(b, 0, 10, 50, 4, Some(200))];
    let w = Window { start: at(b, 1000), end: at(b, 3000) };
    let f = figures(&logs, w, &[], ChunkRatio::of_logs(&logs));
    assert_eq!(f.output_tokens, 100, "the 25 chunks inside the window carried 4 tokens each");
    assert!((f.per_request_tok_s.unwrap() - 100.0).abs() < 1e-9, "never faster than the server");
    assert_eq!((f.estimated_tokens, f.token_source), (0, Some(TokenSource::UsageAtEnd)));
}

#[test]
fn a_request_cut_by_the_window_counts_the_measured_tokens_per_chunk() {
    let b = Instant::now();
    // K = 3 with a remainder: 512 tokens in 171 chunks; the cut request has no total
    let ended = at_end(b, 0, 10, 171, 3, Some(512));
    let cut = at_end(b, 0, 10, 1000, 3, None);
    let logs = [ended, cut];
    let w = Window { start: at(b, 6000), end: at(b, 12000) };
    let ratio = ChunkRatio::of_logs(&logs).unwrap();
    let f = figures(&logs, w, &[], Some(ratio));
    let truth = 600.0; // 200 chunks of 3 tokens; the ended request ended before the window
    assert!((f.output_tokens as f64 / truth - 1.0).abs() < 0.01, "{} tokens", f.output_tokens);
    assert_eq!(f.estimated_tokens, f.output_tokens);
    assert_eq!(f.chunk_ratio, Some(ratio));
    let per_chunk_ms = f.tbt_ms.unwrap().p50 * ratio.tokens_per_chunk;
    assert!((per_chunk_ms - 30.0).abs() < 1e-6, "TBT is the chunk gap over the tokens per chunk");
    // without a ratio each chunk is one token: 3× too few, and said to be estimated
    let f = figures(&logs, w, &[], None);
    assert_eq!((f.output_tokens, f.estimated_tokens), (200, 200));
}

#[test]
fn the_window_end_cuts_a_gap_that_counts() {
    let b = Instant::now();
    // tokens every 10 ms until 700 ms, then silence; another stream ended at 500 ms
    let mut stalled = steady(b, 0, 0, 10, 71, 1);
    stalled.points.retain(|p| p.at <= at(b, 700));
    let mut done = steady(b, 0, 0, 10, 51, 1);
    done.ended = Some(at(b, 500));
    let w = Window { start: b, end: at(b, 1000) };
    let f = figures(&[stalled.clone(), done], w, &[], None);
    assert_eq!(f.longest_open_gap_ms, Some(300.0), "the ended stream has no open gap");
    // 70 gaps of 10 ms and the censored 300 ms: p99 at rank 69.3 lies between them
    let f = figures(&[stalled], w, &[], None);
    assert!((f.chunk_gap_ms.unwrap().p99 - 97.0).abs() < 1e-6, "the censored gap is among the chunk gaps");
}

/// A request with fewer than two tokens in the window carries its silence there (§11.2): a stalled
/// stream the time since W0 or its one token in the window, whichever is longer; one that began just
/// before W1 only the time since its first token; one that streams has a TBT and no silence.
#[test]
fn a_request_without_a_tbt_carries_its_silence() {
    let b = Instant::now();
    let stalled = steady(b, 0, 50, 10, 1, 1);
    let one_in = steady(b, 0, 400, 10, 1, 1);
    let late = steady(b, 1000, 1050, 60, 3, 1);
    let flowing = steady(b, 0, 20, 10, 120, 1);
    let w = Window { start: at(b, 100), end: at(b, 1100) };
    let f = figures(&[stalled, one_in, late, flowing], w, &[], None);
    let silences: Vec<Option<f64>> = f.per_request.iter().map(|r| r.silent_ms.map(f64::round)).collect();
    assert_eq!(silences, [Some(1000.0), Some(700.0), Some(50.0), None]);
    assert_eq!(f.per_request[2].tokens, 1.0, "the late one's first token is in the window, its next two after");
    // at 10 tok/s (100 ms between tokens) the two silent ones fail; the late one had no time to
    let j = "tok_s>=10".parse::<sm_core::slo::Slo>().unwrap().judge(&f.per_request, f.measured_s);
    assert_eq!(j.goodput_pct, Some(50.0));
}

/// The SLO (methodology §11.2) judges the figures the cell reports: a bound at p50/p90/p99 has
/// exactly the cell's value, and the requests it judges carry every in-window token.
#[test]
fn the_slo_judges_the_cells_own_figures() {
    let b = Instant::now();
    // streams at 5, 10, 20 and 40 ms per token; one ended before the window (TTFT only)
    let mut logs: Vec<RequestLog> =
        [5, 10, 20, 40].iter().enumerate().map(|(i, &step)| steady(b, 0, 30 * (i as u64 + 1), step, 400, 1)).collect();
    let mut early = steady(b, 0, 10, 10, 5, 1);
    early.ended = Some(at(b, 60));
    logs.push(early);
    let w = Window { start: at(b, 100), end: at(b, 1100) };
    let f = figures(&logs, w, &[], None);
    assert_eq!(f.per_request.len(), 5, "the TTFT population: every request with a first token before W1");
    assert_eq!(f.requests, 4, "requests with a token in the window");
    let tokens: f64 = f.per_request.iter().map(|r| r.tokens).sum();
    assert_eq!(tokens.round() as u64, f.output_tokens);
    let slo: sm_core::slo::Slo = "tok_s>=1,ttft_p90<=1s,tbt_p99<=1s,ttft_p50<=1s".parse().unwrap();
    let j = slo.judge(&f.per_request, f.measured_s);
    let value = |i: usize| j.bounds[i].value.unwrap();
    assert!((value(0) - f.per_request_tok_s.unwrap()).abs() < 1e-9);
    assert!((value(1) - f.ttft_ms.unwrap().p90).abs() < 1e-9);
    assert!((value(2) - f.tbt_ms.unwrap().p99).abs() < 1e-9);
    assert!((value(3) - f.ttft_ms.unwrap().p50).abs() < 1e-9);
    assert!(j.met);
    assert_eq!(j.goodput_tok_s.map(|t| t.round()), Some(f.total_tok_s.round()), "all good: goodput is the total");
    // 25 tok/s and faster: the 40 ms stream fails, and the early one (no speed) is judged on TTFT
    let j = "tok_s>=30".parse::<sm_core::slo::Slo>().unwrap().judge(&f.per_request, f.measured_s);
    assert_eq!(j.goodput_pct, Some(80.0));
    let slow = f.per_request.iter().find(|r| r.tbt_ms.is_some_and(|t| (t - 40.0).abs() < 1e-9)).unwrap();
    assert!((j.goodput_tok_s.unwrap() - (tokens - slow.tokens) / f.measured_s).abs() < 1e-9);
}

/// Streams at one steady speed: every sub-window sees the same figures, so the intervals have no
/// width; TTFT gets an order-statistic interval only with enough requests.
#[test]
fn steady_streams_have_tight_intervals() {
    let b = Instant::now();
    let logs: Vec<RequestLog> = (0..8).map(|i| steady(b, 0, 10 + i, 10, 300, 1)).collect();
    let w = Window { start: at(b, 200), end: at(b, 2200) };
    let f = figures(&logs, w, &[], None);
    let ci = f.ci;
    let total = ci.total_tok_s.unwrap();
    assert!((total.hi - total.lo) / f.total_tok_s < 0.01, "{total:?} around {}", f.total_tok_s);
    let tbt = ci.tbt_ms_p50.unwrap();
    assert!((tbt.lo - 10.0).abs() < 1e-6 && (tbt.hi - 10.0).abs() < 1e-6, "{tbt:?}");
    assert!(total.half_width_pct(f.total_tok_s).unwrap() < 1.0 && tbt.half_width_pct(10.0).unwrap() < 1.0);
    assert!(ci.ttft_ms_p50.is_some(), "8 requests give a median's interval");
    assert_eq!(ci.ttft_ms_p90, None, "but not a p90's");
}

/// A stream that alternates between 10 and 20 ms per token every 200 ms: the sub-windows disagree
/// and the interval is as wide as batch means says; `--precision 1 %` is not reached.
#[test]
fn a_stream_whose_speed_swings_has_a_wide_interval() {
    let b = Instant::now();
    let mut log = RequestLog::new(b);
    log.first_token = Some(b);
    let (mut t, mut n) = (0u64, 0u64);
    while t < 2000 {
        let step = if (t / 200) % 2 == 0 { 10 } else { 20 };
        n += 1;
        log.points.push(Point { at: at(b, t), chunks: n, usage: Some(n) });
        t += step;
    }
    let w = Window { start: b, end: at(b, 2000) };
    let f = figures(&[log], w, &[], None);
    let total = f.ci.total_tok_s.unwrap();
    // sub-windows alternate 100 and 50 tok/s: s = 26.35, ± t(9) · s / √10 = ± 18.85
    assert!((total.hi - total.lo - 2.0 * 18.85).abs() < 0.5, "{total:?}");
    assert!(total.contains(75.0));
    let a = total.half_width_pct(f.total_tok_s).unwrap();
    assert!(a > 20.0, "{a:?}: --precision 1 % is far");
}

#[test]
fn arrivals_bound_what_was_generated_when_a_chunk_spans_an_edge() {
    let b = Instant::now();
    // a busy server: 100 tokens in chunks of 25 arriving at 100, 200, 300 and 400 ms
    let logs = vec![steady(b, 0, 100, 4, 4, 25)];
    // [150, 350): two chunks arrived inside; the one at 200 ms was generated after 100 ms and the
    // one at 300 ms after 200 ms: only the second surely inside; those at 200, 300 and 400 ms
    // (generated after 300 ms) possibly
    let a = arrivals(&logs, None, Window { start: at(b, 150), end: at(b, 350) });
    assert_eq!((a.surely, a.arrived, a.possibly), (25.0, 50.0, 75.0));
    // the first chunk's tokens were generated after the request was sent
    let a = arrivals(&logs, None, Window { start: at(b, 0), end: at(b, 100) });
    assert_eq!((a.surely, a.arrived, a.possibly), (0.0, 0.0, 25.0));
    let a = arrivals(&logs, None, Window { start: at(b, 0), end: at(b, 1000) });
    assert_eq!((a.surely, a.arrived, a.possibly), (100.0, 100.0, 100.0));
}

/// A cell sent with tools (§7.3.1): each request of the TTFT population carries its wait for its
/// first tool call, infinite for one that ended with no call; a bound's value at the cell's
/// percentile is the cell's TTFTC where every request called. Without tools, none carries one.
#[test]
fn a_bound_on_the_first_tool_call_reads_each_requests_wait() {
    let b = Instant::now();
    let with_call = |first: u64, call: Option<u64>, ended: Option<u64>| {
        let mut log = steady(b, 0, first, 10, 50, 1);
        log.tools = true;
        log.first_tool_call = call.map(|ms| at(b, ms));
        log.ended = ended.map(|ms| at(b, ms));
        log
    };
    let w = Window { start: at(b, 100), end: at(b, 1100) };
    let logs = [
        with_call(20, Some(40), None),
        with_call(30, Some(80), None),
        with_call(40, Some(300), None),
        // still open at W1, its call after it: not known
        with_call(50, Some(1500), None),
    ];
    let f = figures(&logs, w, &[], None);
    let waits: Vec<Option<f64>> = f.per_request.iter().map(|r| r.ttftc_ms.map(f64::round)).collect();
    assert_eq!(waits, [Some(40.0), Some(80.0), Some(300.0), None]);
    let ttftc = f.tool_calls.as_ref().and_then(|t| t.ttftc_ms).unwrap();
    let slo: sm_core::slo::Slo = "ttftc_p90<=1s,ttftc_p50<=1s".parse().unwrap();
    let j = slo.judge(&f.per_request, f.measured_s);
    assert!((j.bounds[0].value.unwrap() - ttftc.p90).abs() < 1e-9, "the bound's value is the cell's TTFTC p90");
    assert!((j.bounds[1].value.unwrap() - ttftc.p50).abs() < 1e-9);
    assert!(j.met);

    // one ended with text, no call: it waited forever, fails the bound and is not good
    let mut logs = logs.to_vec();
    logs.push(with_call(60, None, Some(560)));
    let f = figures(&logs, w, &[], None);
    assert_eq!(f.per_request.last().unwrap().ttftc_ms, Some(f64::INFINITY));
    let j = slo.judge(&f.per_request, f.measured_s);
    assert!(!j.met && j.bounds[0].value.is_none(), "p90 falls on the request that never called");
    assert_eq!(j.goodput_pct, Some(80.0));

    // sent without tools: no request has a wait for a call
    let plain: Vec<RequestLog> = logs.into_iter().map(|l| RequestLog { tools: false, ..l }).collect();
    assert!(figures(&plain, w, &[], None).per_request.iter().all(|r| r.ttftc_ms.is_none()));
}
