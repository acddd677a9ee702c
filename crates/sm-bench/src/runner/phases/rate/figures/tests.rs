use super::*;
use crate::stream::request_log::Point;
use sm_core::phases::rate::Saturation;

#[test]
fn in_flight_is_time_weighted_and_back_to_back_is_one() {
    let (mean, max) = in_flight(&[(0.0, 1.0), (1.0, 2.0)], 2.0);
    assert_eq!((mean, max), (1.0, 1));
    let (mean, max) = in_flight(&[(0.0, 2.0), (0.5, 1.5), (1.0, 2.0)], 4.0);
    assert_eq!((mean, max), ((2.0 + 1.0 + 1.0) / 4.0, 3));
    assert_eq!(in_flight(&[], 1.0), (0.0, 0));
    // past the span (a request cut or failed after the last completion) is not counted
    assert_eq!(in_flight(&[(0.0, 1.0), (0.5, 9.0)], 1.0), (1.5, 2));
    assert_eq!(in_flight(&[(0.0, 1.0), (2.0, 3.0)], 1.0), (1.0, 1));
}

/// A completed request: due at `due` s, sent `lag` s later, first token `ttft` s after sending,
/// `tokens` tokens 10 ms apart (usage on every chunk), ended at the last.
fn request(t0: Instant, due: f64, lag: f64, ttft: f64, tokens: u64) -> Sent {
    let at = |s: f64| t0 + Duration::from_secs_f64(s);
    let sent = due + lag;
    let mut log = RequestLog::new(at(sent));
    let first = sent + ttft;
    log.first_token = Some(at(first));
    log.points =
        (0..tokens).map(|i| Point { at: at(first + 0.01 * i as f64), chunks: i + 1, usage: Some(i + 1) }).collect();
    log.ended = log.points.last().map(|p| p.at);
    log.prompt_tokens = Some(100);
    Sent { due: at(due), over: log.ended, log: Some(log), end: End::Completed }
}

fn key() -> LevelKey {
    LevelKey { context: 1024, label: "1K".into(), rate: RequestRate::PerSecond(2.0) }
}

#[test]
fn latency_counts_from_the_due_time_and_the_lag_is_reported() {
    let t0 = Instant::now();
    let slo: Slo = "ttft_p90<=150ms".parse().unwrap();
    // the second request waited 200 ms for a slot: its TTFT from the due time is 250 ms
    let reqs = vec![request(t0, 0.0, 0.0, 0.05, 11), request(t0, 0.5, 0.2, 0.05, 11)];
    let l = level(key(), t0, &reqs, &slo);
    assert_eq!(l.status, LevelStatus::Measured);
    let ttft = l.ttft_ms.unwrap();
    assert!((ttft.p50.unwrap() - 150.0).abs() < 1e-6 && (ttft.p99.unwrap() - 248.0).abs() < 1e-6, "{ttft:?}");
    let lag = l.send_lag_ms.unwrap();
    assert!((lag.max.unwrap() - 200.0).abs() < 1e-6 && (lag.p50.unwrap() - 100.0).abs() < 1e-6, "{lag:?}");
    assert_eq!((l.counts.sent, l.counts.completed, l.counts.late), (2, 2, 1));
    // e2e: 0.05 + 0.1 s of tokens, and 0.2 s more for the late one
    let e2e = l.e2e_ms.unwrap();
    assert!((e2e.p50.unwrap() - 250.0).abs() < 1e-6, "{e2e:?}");
    assert!((l.tbt_ms.unwrap().p50.unwrap() - 10.0).abs() < 1e-6);
    // the span runs from the level's start to the last end: 0.5 + 0.2 + 0.05 + 0.1
    let span = l.span_s.unwrap();
    assert!((span - 0.85).abs() < 1e-9, "{span}");
    assert!((l.achieved_rps.unwrap() - 2.0 / 0.85).abs() < 1e-9);
    assert!((l.output_tok_s.unwrap() - 22.0 / 0.85).abs() < 1e-9);
    assert!((l.input_tok_s.unwrap() - 200.0 / 0.85).abs() < 1e-9);
    // only the first met the TTFT bound on its own figures
    assert_eq!(l.goodput_pct, Some(50.0));
    assert!((l.goodput_rps.unwrap() - 1.0 / 0.85).abs() < 1e-9);
    // the two never overlapped
    assert_eq!(l.in_flight_max, Some(1));
}

/// A request the client cut at `at` s, after `tokens` tokens (none: before its first token).
fn cut(t0: Instant, due: f64, at: f64, tokens: u64) -> Sent {
    let mut r = request(t0, due, 0.0, 0.05, tokens.max(1));
    if tokens == 0 {
        r.log.as_mut().unwrap().first_token = None;
        r.log.as_mut().unwrap().points.clear();
    }
    r.log.as_mut().unwrap().ended = None;
    r.end = End::Cancelled;
    r.over = Some(t0 + Duration::from_secs_f64(at));
    r
}

/// A request that failed at `at` s (a stall: tokens, then nothing until the stall timeout).
fn failed(t0: Instant, due: f64, at: f64, why: &str) -> Sent {
    let mut r = request(t0, due, 0.0, 0.05, 5);
    r.log.as_mut().unwrap().ended = None;
    r.end = End::Failed(why.into());
    r.over = Some(t0 + Duration::from_secs_f64(at));
    r
}

#[test]
fn failures_count_against_goodput_but_the_client_cut_and_unsent_do_not() {
    let t0 = Instant::now();
    let slo = Slo::default();
    let mut reqs = vec![request(t0, 0.0, 0.0, 0.05, 5)];
    reqs.push(Sent { due: t0, log: None, end: End::Unsent, over: None });
    reqs.push(failed(t0, 0.1, 0.2, "HTTP 503"));
    reqs.push(cut(t0, 0.2, 9.0, 3));
    let l = level(key(), t0, &reqs, &slo);
    let c = l.counts;
    assert_eq!((c.scheduled, c.sent, c.unsent, c.failed, c.cancelled), (4, 3, 1, 1, 1));
    // one of the two the server answered or failed: the cut and the unsent are not judged
    assert_eq!(l.goodput_pct, Some(50.0));
    assert_eq!(l.first_failure.as_deref(), Some("HTTP 503"));
    assert_eq!(l.cut(), 2);
    let note = l.note().to_string();
    assert!(note.contains("1 of 4 requests failed (a fault, not load; the first: HTTP 503)"), "{note}");
    assert!(note.contains("the client cut 1 request still running and 1 waiting for a slot"), "{note}");
    let only_failed = level(key(), t0, &reqs[2..3], &slo);
    assert_eq!(only_failed.status, LevelStatus::Error);
    assert!(only_failed.reason.as_deref().unwrap().contains("HTTP 503"));
    assert!(!only_failed.saturated && only_failed.verdict().is_none(), "an error is not saturated");
}

#[test]
fn neither_a_failure_nor_a_cut_stretches_the_span() {
    let t0 = Instant::now();
    let slo = Slo::default();
    // four completed by 0.6 s; a stall failed at 15.3 s (the stall timeout) and one was cut at 20 s
    let mut reqs: Vec<Sent> = (0..4).map(|i| request(t0, i as f64 * 0.1, 0.0, 0.05, 11)).collect();
    reqs.push(failed(t0, 0.4, 15.3, "stalled: no token for 15 s"));
    reqs.push(cut(t0, 0.5, 20.0, 2));
    let l = level(key(), t0, &reqs, &slo);
    let span = l.span_s.unwrap();
    assert!((span - 0.45).abs() < 1e-9, "the last completion, not the stall: {span}");
    assert!((l.achieved_rps.unwrap() - 4.0 / 0.45).abs() < 1e-9);
    // the figures rest on the completed requests: their 44 tokens
    assert!((l.output_tok_s.unwrap() - 44.0 / 0.45).abs() < 1e-9);
    assert!(l.in_flight_max.unwrap() <= 3, "{:?}", l.in_flight_max);
}

#[test]
fn a_level_the_client_cut_entirely_is_measured_and_unknown_not_an_error() {
    let t0 = Instant::now();
    let reqs: Vec<Sent> = (0..6).map(|i| cut(t0, i as f64 * 0.5, 12.0, 40)).collect();
    let l = level(key(), t0, &reqs, &Slo::default());
    assert_eq!(l.status, LevelStatus::Measured, "{l:?}");
    assert_eq!(l.verdict(), Some(Saturation::Unknown));
    assert!(!l.saturated);
    assert_eq!((l.span_s, l.achieved_rps, l.goodput_pct), (None, None, None));
    assert!(l.note().to_string().contains("the figures rest on the 0 completed"), "{}", l.note());
}

#[test]
fn long_answers_among_short_ones_are_not_behind() {
    let t0 = Instant::now();
    // one request every 0.1 s, answers of 16 to 2,048 tokens (10 ms each), all started at once
    let reqs: Vec<Sent> = (0..40).map(|i| request(t0, i as f64 * 0.1, 0.0, 0.02, [16, 2048, 64, 512][i % 4])).collect();
    let l = level(key(), t0, &reqs, &Slo::default());
    assert_eq!((l.verdict(), l.backlog_pct), (Some(Saturation::KeptUp), Some(0.0)), "{l:?}");
}
