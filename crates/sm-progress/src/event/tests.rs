//! Each event family gives the line docs/dashboard.md documents and run.json's `events` keep.

use sm_core::phases::rate::{LevelStatus, RateLevel};
use sm_core::record::Percentiles;

use super::*;

fn line(e: RunEvent) -> String {
    e.to_string()
}

#[test]
fn run_events() {
    assert_eq!(line(RunEvent::RunStarted), "run started");
    assert_eq!(line(RunEvent::RunResumed), "run resumed: finished cells are kept");
    assert_eq!(
        line(RunEvent::Retrying { cells: 2, rows: 1 }),
        "measuring again 2 cell(s) and 1 prefill row(s) that failed or were skipped"
    );
    assert_eq!(line(RunEvent::RunEnded(RunStatus::Complete)), "run complete");
    assert_eq!(line(RunEvent::RunEnded(RunStatus::Failed)), "run failed");
    assert_eq!(line(RunEvent::RunEnded(RunStatus::Interrupted)), "run interrupted: finished cells are kept");
}

#[test]
fn sizing_events() {
    assert_eq!(line(RunEvent::PromptsSizedBy(PromptSource::ServerTokenize)), "prompt lengths by server_tokenize");
    assert_eq!(line(RunEvent::PromptsSizedBy(PromptSource::UsageCalibration)), "prompt lengths by usage_calibration");
    assert_eq!(line(RunEvent::SizingFailed { reason: "HTTP 404".into() }), "cannot size prompts: HTTP 404");
    assert_eq!(line(RunEvent::SizingNote("a note".into())), "a note");
    assert_eq!(line(RunEvent::Notice("SIGINT (interrupted): stopping".into())), "SIGINT (interrupted): stopping");
}

#[test]
fn warm_up_events() {
    assert_eq!(line(RunEvent::WarmupRequestDone), "warm-up request done");
    assert_eq!(
        line(RunEvent::DecodeWarmupStarted { at: "2K".into(), window: Duration::from_secs(1) }),
        "decode warm-up at 2K for 1 s"
    );
    assert_eq!(line(RunEvent::DecodeWarmupDone), "decode warm-up done");
    assert_eq!(line(RunEvent::DecodeWarmupSkipped { reason: "no prompt".into() }), "decode warm-up skipped: no prompt");
    let request = WarmupFailure { stage: WarmupStage::Request, reason: "HTTP 500".into() };
    assert_eq!(line(RunEvent::WarmupFailed(request)), "the warm-up request failed: HTTP 500; the run goes on");
    let cell = WarmupFailure { stage: WarmupStage::DecodeCell(CellStatus::Error), reason: "HTTP 500".into() };
    assert_eq!(cell.to_string(), "the decode warm-up failed (error): HTTP 500");
    assert_eq!(line(RunEvent::WarmupFailed(cell)), "the decode warm-up failed (error): HTTP 500; the run goes on");
}

#[test]
fn prefill_events() {
    assert_eq!(line(RunEvent::PrefillStarted { row: "1K".into() }), "prefill 1K started");
    let done = RunEvent::PrefillDone { row: "1K".into(), prompt_tok_s: 344987.04, ttft_ms: 2.97, note: None };
    assert_eq!(line(done), "prefill 1K done: 344987 prompt tok/s, TTFT 3 ms");
    let noted =
        RunEvent::PrefillDone { row: "8K".into(), prompt_tok_s: 1000.0, ttft_ms: 8.0, note: Some("why".into()) };
    assert_eq!(line(noted), "prefill 8K done: 1000 prompt tok/s, TTFT 8 ms (why)");
    let failed = RunEvent::PrefillFailed { row: "max (4096)".into(), reason: "HTTP 400".into() };
    assert_eq!(line(failed), "prefill max (4096) failed: HTTP 400");
}

#[test]
fn cell_events() {
    assert_eq!(line(RunEvent::CellStarted { cell: "1K".into(), concurrency: 1 }), "cell 1K × 1 started");
    let done = RunEvent::CellDone {
        label: "1K".into(),
        concurrency: 1,
        total_tok_s: 499.04,
        per_request_tok_s: 498.94,
        ttft_ms: 2.4,
    };
    assert_eq!(line(done), "cell 1K × 1 done: 499.0 tok/s total, 498.9 tok/s per request, TTFT 2 ms");
    let ended = RunEvent::CellEnded {
        label: "8K".into(),
        concurrency: 4,
        status: CellStatus::Error,
        reason: "HTTP 500".into(),
    };
    assert_eq!(line(ended), "cell 8K × 4 error: HTTP 500");
    let over = RunEvent::CellEnded {
        label: "8K".into(),
        concurrency: 64,
        status: CellStatus::OverCapacity,
        reason: "KV".into(),
    };
    assert_eq!(line(over), "cell 8K × 64 over capacity: KV");
}

#[test]
fn server_events() {
    assert_eq!(
        line(RunEvent::ServerLost { wait: Duration::from_secs(60) }),
        "server stopped responding; waiting up to 60 s for it to come back"
    );
    assert_eq!(line(RunEvent::ServerBack { after: Duration::from_secs(4) }), "server is back after 4 s; continuing");
    assert_eq!(
        line(RunEvent::ServerGone { wait: Duration::from_secs(60) }),
        "server did not come back within 60 s; stopping (everything measured is kept; --resume continues later)"
    );
}

/// A listener is never handed a secret, whichever text of an event carries it.
#[test]
fn scrubbed_events_carry_no_secret() {
    let secret = "sk-progress-test-0123456789";
    sm_core::secrets::register(secret);
    let with = |t: &str| format!("{t} {secret}");
    let events = [
        RunEvent::SizingFailed { reason: with("x") },
        RunEvent::SizingNote(with("x")),
        RunEvent::Notice(with("x")),
        RunEvent::WarmupFailed(WarmupFailure { stage: WarmupStage::Request, reason: with("x") }),
        RunEvent::DecodeWarmupSkipped { reason: with("x") },
        RunEvent::PrefillFailed { row: "1K".into(), reason: with("x") },
        RunEvent::PrefillDone { row: "1K".into(), prompt_tok_s: 1.0, ttft_ms: 1.0, note: Some(with("x")) },
        RunEvent::CellEnded { label: "1K".into(), concurrency: 1, status: CellStatus::Error, reason: with("x") },
        RunEvent::RateLevelDone(Box::new(RateLevel::unmeasured(
            1024,
            "1K".into(),
            "4".parse().unwrap(),
            LevelStatus::Error,
            with("x"),
        ))),
    ];
    for e in events {
        assert!(e.to_string().contains(secret), "the test's event carries the secret: {e}");
        let shown = e.scrubbed().to_string();
        assert!(!shown.contains(secret), "{shown}");
    }
}

#[test]
fn capacity_search_events() {
    let between = RunEvent::CapacitySearch { label: "8K".into(), concurrency: 24, pass: 16, stop: Some(32) };
    assert_eq!(line(between), "capacity search at 8K: 16 users meet the SLO, 32 do not; measuring 24");
    let upward = RunEvent::CapacitySearch { label: "8K".into(), concurrency: 128, pass: 64, stop: None };
    assert_eq!(line(upward), "capacity search at 8K: 64 users meet the SLO; measuring 128");
}

#[test]
fn mixed_prefill_events() {
    let done = RunEvent::MixedProbeDone {
        level: "64K@8".into(),
        probe: 2,
        ttft_ms: 1234.4,
        slowdown: Some(3.456),
        before_tok_s: Some(812.3),
        during_tok_s: Some(95.6),
        stall_ms: Some(640.2),
    };
    assert_eq!(
        line(done),
        "mixed prefill 64K@8 probe 2: TTFT 1234 ms (3.46× idle), background 812 → 96 tok/s, longest stall 640 ms"
    );
    let bare = RunEvent::MixedProbeDone {
        level: "8K@1".into(),
        probe: 1,
        ttft_ms: 10.0,
        slowdown: None,
        before_tok_s: None,
        during_tok_s: None,
        stall_ms: None,
    };
    assert_eq!(line(bare), "mixed prefill 8K@1 probe 1: TTFT 10 ms");
    let failed =
        RunEvent::MixedPrefillFailed { level: "8K@1".into(), what: "probe 3".into(), reason: "HTTP 500".into() };
    assert_eq!(line(failed), "mixed prefill 8K@1: probe 3 failed: HTTP 500");
}

#[test]
fn rate_events() {
    let mut level =
        RateLevel::unmeasured(1024, "1K".into(), "4".parse().unwrap(), LevelStatus::Measured, String::new());
    level.reason = None;
    level.counts.scheduled = 12;
    level.counts.completed = 12;
    level.counts.late = 2;
    level.achieved_rps = Some(3.912);
    level.ttft_ms = Some(Percentiles::p50_p90_p99(41.2, 60.0, 88.9));
    level.send_lag_ms = Some(Percentiles::p50_p99_max(0.1, 20.0, 31.6));
    level.saturated = true;
    assert_eq!(
        line(RunEvent::RateLevelDone(Box::new(level))),
        "rate 4 req/s at 1K: 12/12 completed, achieved 3.91 req/s, TTFT p50 41 ms p99 89 ms, 2 late (send lag max 32 ms), saturated"
    );
    let why = "not run: the server was already saturated at 2 and 4 req/s";
    let skipped = RateLevel::unmeasured(1024, "1K".into(), "8".parse().unwrap(), LevelStatus::Skipped, why.into());
    assert_eq!(line(RunEvent::RateLevelDone(Box::new(skipped))), format!("rate 8 req/s at 1K: {why}"));
    assert_eq!(
        line(RunEvent::RateWindowCut { rate: "inf".into(), label: "8K".into(), max: 100_000 }),
        "rate inf req/s at 8K: the window holds more than 100000 requests; the level sends the first 100000"
    );
}
