//! Each fault of the simulated engine gives the right status and reason, and the
//! run goes on to the next cell; servers without /tokenize or usage still work.

use crate::common::{QUICK, SimSpec, run, sim};
use sm_sim::Flavor;

async fn run_with_fault(fault: &'static str, extra: &[&str]) -> crate::common::RunResult {
    let sim = sim(SimSpec { faults: &[fault], ..SimSpec::default() }).await;
    let dir = tempfile::tempdir().unwrap();
    let url = sim.handle.url();
    let mut args = vec!["--url", url.as_str(), "--contexts", "1k", "--concurrency", "1,2"];
    if !extra.contains(&"--duration") {
        args.extend_from_slice(&["--duration", "1s"]);
    }
    args.extend_from_slice(QUICK);
    args.extend_from_slice(extra);
    let r = run(dir.path(), &args).await;
    assert_eq!(crate::common::scheduler(&url).await, (0.0, 0.0), "{fault}: the server is idle after the run");
    sim.handle.shutdown().await;
    r
}

fn assert_both_cells(r: &crate::common::RunResult, status: &str, reason: &str) {
    for c in [1, 2] {
        let cell = r.cell(1024, c);
        assert_eq!(cell["status"], status, "1K×{c}: {cell}\nstderr:\n{}", r.stderr);
        let got = cell["reason"].as_str().unwrap_or("");
        assert!(got.contains(reason), "1K×{c}: reason {got:?} should contain {reason:?}");
        assert!(cell["total_tok_s"].is_null(), "an invalid cell carries no number");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_error_status() {
    let r = run_with_fault("status=503", &[]).await;
    assert_eq!(r.code, 2, "some cells errored");
    assert_both_cells(&r, "error", "HTTP 503");
}

/// A server that refuses the measured requests after discovery passed (a key revoked mid-run, a
/// proxy that guards only the generating endpoints): the reason says whether the key was refused
/// or one is asked for, and never shows the key.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_request_says_whether_the_key_was_refused_or_missing() {
    let refused = run_with_fault("status=401", &["--api-key", "sk-mid-run-key"]).await;
    assert_eq!(refused.code, 2, "{}", refused.stderr);
    assert_both_cells(&refused, "error", "HTTP 401 Unauthorized");
    assert_both_cells(&refused, "error", "the server refused the API key");
    assert!(!serde_json::to_string(refused.record()).unwrap().contains("sk-mid-run-key"));
    assert!(!refused.stdout.contains("sk-mid-run-key") && !refused.stderr.contains("sk-mid-run-key"));
    let missing = run_with_fault("status=403", &[]).await;
    assert_both_cells(&missing, "error", "the server asks for an API key: pass --api-key");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn disconnect_mid_stream() {
    let r = run_with_fault("disconnect-after=20", &[]).await;
    assert_eq!(r.code, 2);
    assert_both_cells(&r, "error", "broke");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn malformed_event() {
    let r = run_with_fault("malformed-sse", &[]).await;
    assert_both_cells(&r, "error", "malformed stream event");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stalled_stream_hits_the_idle_timeout() {
    let r = run_with_fault("stall-after=20", &["--stall-timeout", "1s"]).await;
    assert_both_cells(&r, "error", "stalled");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn repeating_text_is_a_loop() {
    // 4,096 repeated characters take about 700 tokens to appear
    let r = run_with_fault("loop", &["--max-tokens", "4096", "--duration", "3s"]).await;
    assert_both_cells(&r, "loop", "repeated");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_usage_counts_chunks_and_says_so() {
    let r = run_with_fault("no-usage", &[]).await;
    assert_eq!(r.code, 0, "{}", r.stderr);
    for c in [1, 2] {
        let cell = r.cell(1024, c);
        assert_eq!(cell["status"], "valid");
        assert_eq!(cell["token_source"], "chunks");
        assert!(cell["warnings"].to_string().contains("counted from chunks"), "{cell}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn multi_token_chunks_count_tokens() {
    let r = run_with_fault("multi-token=4", &[]).await;
    assert_eq!(r.code, 0, "{}", r.stderr);
    for c in [1, 2] {
        let cell = r.cell(1024, c);
        assert_eq!(cell["token_source"], "usage");
        let tbt = cell["tbt_ms_p50"].as_f64().unwrap();
        let gap = cell["chunk_gap_ms_p50"].as_f64().unwrap();
        // counting chunks as tokens would give 1; the margin absorbs the jitter of ten runs sharing two cores
        assert!((gap / tbt - 4.0).abs() < 1.0, "4 tokens per chunk: gap {gap} ms, TBT {tbt} ms");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slow_first_token_shows_in_ttft() {
    let r = run_with_fault("slow-first-token=400", &[]).await;
    assert_eq!(r.code, 0, "{}", r.stderr);
    let ttft = r.cell(1024, 1)["ttft_ms_p50"].as_f64().unwrap();
    assert!(ttft >= 400.0, "TTFT {ttft} ms");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn generic_server_calibrates_prompt_lengths_within_one_percent() {
    let sim = sim(SimSpec { flavor: Flavor::Generic, ..SimSpec::default() }).await;
    let dir = tempfile::tempdir().unwrap();
    let url = sim.handle.url();
    let mut args = vec!["--url", url.as_str(), "--contexts", "2k,12k", "--concurrency", "1", "--duration", "1s"];
    args.extend_from_slice(QUICK);
    let r = run(dir.path(), &args).await;
    sim.handle.shutdown().await;
    assert_eq!(r.code, 0, "{}", r.stderr);
    let rec = r.record();
    assert_eq!(rec["server"]["engine"], "generic");
    assert_eq!(rec["server"]["metrics_available"], false);
    assert_eq!(rec["settings"]["prompt_source"], "usage_calibration");
    for row in rec["prefill"].as_array().unwrap() {
        let ctx = row["context"].as_f64().unwrap();
        let got = row["prompt_tokens"].as_f64().unwrap();
        assert!((got / ctx - 1.0).abs() <= 0.01, "{ctx}: {got} prompt tokens");
    }
    assert_eq!(r.cell(2048, 1)["status"], "valid");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sglang_streams_are_aborted_and_the_server_drains() {
    let dir = tempfile::tempdir().unwrap();
    let sim = sim(SimSpec { flavor: Flavor::Sglang, trace_dir: Some(dir.path()), ..SimSpec::default() }).await;
    let url = sim.handle.url();
    let mut args = vec!["--url", url.as_str(), "--contexts", "1k", "--concurrency", "2", "--duration", "1s"];
    args.extend_from_slice(QUICK);
    args.extend_from_slice(&["--max-tokens", "8000"]);
    let r = run(&dir.path().join("out"), &args).await;
    sim.handle.shutdown().await;
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(r.record()["server"]["engine"], "sglang");
    assert_eq!(r.cell(1024, 2)["status"], "valid");
    let trace = crate::common::trace_lines(&dir.path().join("trace.jsonl"));
    let aborted = trace.iter().filter(|t| t["finish"] == "abort").count();
    assert!(aborted >= 2, "the window's streams were aborted, not left generating 8,000 tokens: {trace:?}");
}

/// A load phase cancels as a cell does: a rate level's requests still running when its wait runs out are
/// aborted on SGLang (which runs a dropped stream on), not left generating into the next level.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sglang_requests_a_rate_level_cancels_are_aborted_before_the_next_level() {
    let dir = tempfile::tempdir().unwrap();
    let sim = sim(SimSpec { flavor: Flavor::Sglang, trace_dir: Some(dir.path()), ..SimSpec::default() }).await;
    let url = sim.handle.url();
    // two levels of four requests of 8,000 tokens: each level's are still running when its wait
    // (--drain-max 1s) runs out, and the client cuts them
    let args = [
        "--url",
        url.as_str(),
        "--contexts",
        "1k",
        "--request-rate",
        "50,100",
        "--requests",
        "4",
        "--max-tokens",
        "8000",
        "--drain-max",
        "1s",
    ];
    let r = run(&dir.path().join("out"), &args).await;
    sim.handle.shutdown().await;
    let levels = r.record()["phases"]["rate"]["levels"].as_array().unwrap().clone();
    for level in &levels {
        assert_eq!(level["counts"]["cancelled"], 4, "{level}");
    }
    // the client cut them: not the server's fault, so not an error, and the verdict is unknown
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(levels.iter().all(|l| l["status"] == "measured" && l["saturation"] == "unknown"), "{levels:?}");
    let mut long: Vec<_> = crate::common::trace_lines(&dir.path().join("trace.jsonl"))
        .into_iter()
        .filter(|t| t["finish"] != "length")
        .collect();
    assert_eq!(long.len(), 8, "the levels' requests, and no other, were cut: {} lines", long.len());
    long.sort_by(|a, b| a["arrival"].as_f64().partial_cmp(&b["arrival"].as_f64()).unwrap());
    let second = long[4]["arrival"].as_f64().unwrap();
    for t in &long[..4] {
        let end = t["end"].as_f64().unwrap();
        let (id, finish) = (&t["id"], &t["finish"]);
        assert!(
            end < second + 0.5,
            "first-level request {id} ran on {:.1} s into the second level ({finish})",
            end - second
        );
        assert_eq!(finish, "abort", "request {id}");
    }
}
