use std::time::Duration;

use super::*;
use crate::cell::window::{Window, figures};
use crate::stream::request_log::Point;

fn at(base: Instant, ms: u64) -> Instant {
    base + Duration::from_millis(ms)
}

/// A request sent at `sent` ms, `n` chunks `step` ms apart from `first`, without usage until an
/// optional total at the end.
fn request(base: Instant, sent: u64, first: u64, step: u64, n: u64, total: Option<u64>) -> RequestLog {
    let mut log = RequestLog::new(at(base, sent));
    log.first_token = Some(at(base, first));
    log.usage = false;
    for i in 0..n {
        let usage = if i + 1 == n { total } else { None };
        log.points.push(Point { at: at(base, first + i * step), chunks: i + 1, usage });
    }
    log.usage_at_end = total.is_some();
    log
}

const DECODE: LineCell =
    LineCell { phase: RequestPhase::Decode, context: 1024, concurrency: 3, repeat: Some(2), searched: false };

#[test]
fn in_window_tokens_add_up_to_the_cells_output_tokens() {
    let t0 = Instant::now();
    let base = at(t0, 2000);
    // one ended with a total of 25 over 10 chunks (2.5 a chunk), two cut off at the window's end
    // and counted at the ended one's tokens per chunk, one entirely before the window
    let mut ended = request(base, 0, 100, 100, 10, Some(25));
    ended.ended = Some(at(base, 1000));
    let logs = vec![
        ended,
        request(base, 0, 150, 100, 20, None),
        request(base, 1000, 1200, 50, 30, None),
        request(base, 0, 50, 10, 3, None),
    ];
    let window = Window { start: at(base, 400), end: at(base, 2000) };
    let ratio = crate::stream::tokens::ChunkRatio::of_logs(&logs);
    let f = figures(&logs, window, &[], ratio);
    let cell = CellRequests { logs, window: Some(window), per_chunk: ratio.map(|r| r.tokens_per_chunk) };
    let lines = cell_lines(DECODE, &cell, t0);
    assert_eq!(lines.len(), 4);
    let sum: f64 = lines.iter().filter_map(|l| l.window_output_tokens).sum();
    assert!((sum - f.output_tokens as f64).abs() <= 0.5, "{sum} vs {}", f.output_tokens);
    assert_eq!(
        lines.iter().map(|l| l.in_window).collect::<Vec<_>>(),
        [Some(true), Some(true), Some(true), Some(false)]
    );
    let first = &lines[0];
    assert_eq!(
        (first.status, first.output_tokens, first.window_output_tokens),
        (RequestStatus::Completed, 25.0, Some(17.5))
    );
    assert_eq!(
        (first.sent_s, first.first_token_s, first.last_token_s, first.ended_s),
        (2.0, Some(2.1), Some(3.0), Some(3.0))
    );
    assert_eq!(first.scheduled_s, first.sent_s, "closed loop: scheduled is sent");
    assert_eq!((first.repeat, first.concurrency, first.context), (Some(2), 3, 1024));
    let cut = &lines[1];
    assert_eq!((cut.status, cut.ended_s, cut.output_tokens), (RequestStatus::Cancelled, None, 50.0));
}

#[test]
fn a_failed_request_says_why_without_secrets_and_a_cell_without_window_has_no_window_figures() {
    let t0 = Instant::now();
    sm_core::secrets::register("sk-line-builder-secret");
    let mut failed = request(t0, 10, 20, 10, 2, None);
    failed.failure = Some("the server said: bad key sk-line-builder-secret".into());
    failed.retried = true;
    let never = RequestLog::new(at(t0, 5));
    let cell = CellRequests { logs: vec![failed, never], window: None, per_chunk: None };
    let lines = cell_lines(LineCell { phase: RequestPhase::Warmup, repeat: None, ..DECODE }, &cell, t0);
    let l = &lines[0];
    assert_eq!((l.phase, l.status, l.retried), (RequestPhase::Warmup, RequestStatus::Failed, true));
    let reason = l.reason.as_deref().unwrap();
    assert!(reason.contains("bad key") && !reason.contains("sk-line-builder-secret"), "{reason}");
    assert_eq!((l.window_output_tokens, l.in_window, l.output_tokens), (None, None, 2.0));
    let n = &lines[1];
    assert_eq!(
        (n.status, n.first_token_s, n.last_token_s, n.output_tokens),
        (RequestStatus::Cancelled, None, None, 0.0)
    );
}

#[test]
fn a_prefill_line_has_its_times_or_its_reason() {
    let t0 = Instant::now();
    let times = ScoutTimes {
        sent: at(t0, 1000),
        first_token: at(t0, 1250),
        last_token: at(t0, 1250),
        ended: Some(at(t0, 1251)),
    };
    let request = PrefillRequest::Answered {
        times,
        id: Some("cmpl-1"),
        output_tokens: 1,
        prompt_tokens: Some(4096),
        cached_tokens: Some(0),
    };
    let l = prefill_line(4096, request, t0);
    assert_eq!((l.phase, l.status, l.concurrency), (RequestPhase::Prefill, RequestStatus::Completed, 1));
    assert_eq!((l.sent_s, l.first_token_s, l.ended_s), (1.0, Some(1.25), Some(1.251)));
    assert_eq!((l.prompt_tokens, l.cached_tokens, l.in_window), (Some(4096), Some(0), None));
    assert_eq!(l.request_id.as_deref(), Some("cmpl-1"));
    let l = prefill_line(4096, PrefillRequest::Failed { asked: at(t0, 500), reason: "timed out" }, t0);
    assert_eq!(
        (l.status, l.reason.as_deref(), l.sent_s, l.first_token_s),
        (RequestStatus::Failed, Some("timed out"), 0.5, None)
    );
}

#[test]
fn the_file_is_appended_to_and_a_torn_last_line_is_dropped() {
    let dir = tempfile::tempdir().unwrap();
    let t0 = Instant::now();
    let line = prefill_line(1, PrefillRequest::Failed { asked: t0, reason: "x" }, t0);
    let path = dir.path().join(REQUESTS_FILE);
    RequestsFile::open(dir.path(), true).unwrap().append(&[line.clone(), line.clone()]).unwrap();
    // a crash in the middle of a write leaves part of a line
    std::fs::write(&path, std::fs::read_to_string(&path).unwrap() + "{\"phase\":\"dec").unwrap();
    RequestsFile::open(dir.path(), false).unwrap().append(std::slice::from_ref(&line)).unwrap();
    let text = std::fs::read_to_string(&path).unwrap();
    let parsed: Vec<RequestLine> = text.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert_eq!(parsed, vec![line.clone(), line.clone(), line.clone()]);
    RequestsFile::open(dir.path(), true).unwrap();
    assert_eq!(std::fs::read_to_string(&path).unwrap(), "", "a new run starts the file afresh");
}
