use super::*;
use crate::request_log::Point;

#[test]
fn a_server_that_keeps_up_is_not_saturated() {
    // one request every 0.1 s, each 0.3 s long: the last is done 0.3 s after it was due
    let due: Vec<f64> = (0..40).map(|i| i as f64 * 0.1).collect();
    let done: Vec<Option<f64>> = due.iter().map(|d| Some(d + 0.3)).collect();
    assert_eq!(saturation(&due, &done), (0.0, false));
    // one straggler of 40 is noise, not a backlog
    let mut one = done.clone();
    one[39] = Some(10.0);
    assert_eq!(saturation(&due, &one), (2.5, false));
    // so are two of four: but only because at least two must be behind *and* more than 10 %
    assert_eq!(saturation(&[0.0, 0.1], &[Some(0.3), None]), (50.0, false));
}

#[test]
fn a_growing_queue_is_saturated() {
    // the server finishes one request every 0.2 s while they are due every 0.1 s
    let due: Vec<f64> = (0..40).map(|i| i as f64 * 0.1).collect();
    let done: Vec<Option<f64>> = (0..40).map(|i| Some(0.3 + i as f64 * 0.2)).collect();
    let (pct, saturated) = saturation(&due, &done);
    assert!(saturated && pct > 30.0, "{pct}");
    // requests cut at the grace never completed: they are behind
    let cut: Vec<Option<f64>> = (0..40).map(|i| (i < 10).then_some(0.3 + i as f64 * 0.1)).collect();
    assert!(saturation(&due, &cut).1);
    // none of the first quarter completed: nothing kept up
    assert_eq!(saturation(&due, &[None; 40]), (100.0, true));
    assert_eq!(saturation(&[], &[]), (0.0, false));
}

#[test]
fn in_flight_is_time_weighted_and_back_to_back_is_one() {
    let (mean, max) = in_flight(&[(0.0, 1.0), (1.0, 2.0)], 2.0);
    assert_eq!((mean, max), (1.0, 1));
    let (mean, max) = in_flight(&[(0.0, 2.0), (0.5, 1.5), (1.0, 2.0)], 4.0);
    assert_eq!((mean, max), ((2.0 + 1.0 + 1.0) / 4.0, 3));
    assert_eq!(in_flight(&[], 1.0), (0.0, 0));
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
    assert!((ttft.p50 - 150.0).abs() < 1e-6 && (ttft.p99 - 248.0).abs() < 1e-6, "{ttft:?}");
    let lag = l.send_lag_ms.unwrap();
    assert!((lag.max - 200.0).abs() < 1e-6 && (lag.p50 - 100.0).abs() < 1e-6, "{lag:?}");
    assert_eq!((l.counts.sent, l.counts.completed, l.counts.late), (2, 2, 1));
    // e2e: 0.05 + 0.1 s of tokens, and 0.2 s more for the late one
    let e2e = l.e2e_ms.unwrap();
    assert!((e2e.p50 - 250.0).abs() < 1e-6, "{e2e:?}");
    assert!((l.tbt_ms.unwrap().p50 - 10.0).abs() < 1e-6);
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

#[test]
fn requests_that_did_not_complete_count_against_goodput_and_an_empty_level_says_why() {
    let t0 = Instant::now();
    let slo = Slo::default();
    let mut reqs = vec![request(t0, 0.0, 0.0, 0.05, 5)];
    reqs.push(Sent { due: t0, log: None, end: End::Unsent, over: None });
    let mut failed = request(t0, 0.1, 0.0, 0.05, 1);
    failed.end = End::Failed("HTTP 503".into());
    reqs.push(failed);
    let l = level(key(), t0, &reqs, &slo);
    assert_eq!((l.counts.scheduled, l.counts.sent, l.counts.unsent, l.counts.failed), (3, 2, 1, 1));
    assert!((l.goodput_pct.unwrap() - 100.0 / 3.0).abs() < 1e-9);
    let only_failed = level(key(), t0, &reqs[2..], &slo);
    assert_eq!(only_failed.status, LevelStatus::Error);
    assert!(only_failed.reason.unwrap().contains("HTTP 503"));
}
