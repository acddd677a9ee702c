//! `speedmatrix run` against the simulated engine, whose true behaviour is known:
//! the measured figures must agree with the profile, prompts must be exact, the
//! prefill rows cold and the decode requests cached, and every cell must leave
//! the server idle.

use crate::common::{QUICK, SimSpec, run, scheduler, sim, trace_lines};
use sm_sim::Profile;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn figures_follow_the_profile() {
    let dir = tempfile::tempdir().unwrap();
    let sim = sim(SimSpec { trace_dir: Some(dir.path()), ..SimSpec::default() }).await;
    let out = dir.path().join("out");
    let mut args =
        vec!["--url", sim.handle.url().leak(), "--contexts", "1k,8k", "--concurrency", "1,8", "--duration", "3s"];
    args.extend_from_slice(QUICK);
    let r = run(&out, &args).await;
    assert_eq!(r.code, 0, "stdout:\n{}\nstderr:\n{}", r.stdout, r.stderr);
    let (running, waiting) = scheduler(&sim.handle.url()).await;
    assert_eq!((running, waiting), (0.0, 0.0), "streams were really cancelled");
    sim.handle.shutdown().await;

    let rec = r.record();
    assert_eq!(rec["status"], "complete");
    assert_eq!(rec["settings"]["prompt_source"], "server_tokenize");
    let profile = Profile::builtin("tiny").unwrap();
    for ctx in [1024u64, 8192] {
        for c in [1u64, 8] {
            let cell = r.cell(ctx, c);
            assert_eq!(cell["status"], "valid", "{cell}");
            assert_eq!(cell["token_source"], "usage");
            let truth_tbt = profile.step_ms(c as f64, ctx as f64);
            let tbt = cell["tbt_ms_p50"].as_f64().unwrap();
            assert!((tbt / truth_tbt - 1.0).abs() < 0.03, "{ctx}×{c}: TBT {tbt} ms, profile {truth_tbt} ms");
            let truth_total = c as f64 * 1000.0 / truth_tbt;
            let total = cell["total_tok_s"].as_f64().unwrap();
            assert!((total / truth_total - 1.0).abs() < 0.05, "{ctx}×{c}: {total} tok/s, profile {truth_total}");
            let per_request = cell["per_request_tok_s"].as_f64().unwrap();
            assert!((per_request * tbt / 1000.0 - 1.0).abs() < 0.03, "per-request tok/s is 1/TBT");
            assert_eq!(cell["measured_s"], 3.0);
            let active = cell["avg_active"].as_f64().unwrap();
            assert!((active - c as f64).abs() < 0.5, "{ctx}×{c}: avg active {active}");
            assert!(cell["client_lag_ms_p99"].as_f64().is_some(), "client health is recorded: {cell}");
            assert!(cell["client_cpu_pct"].as_f64().is_some_and(|c| c > 0.0), "client CPU is recorded: {cell}");
            let tokens = cell["output_tokens"].as_f64().unwrap();
            assert!((tokens / 3.0 - total).abs() < 1.0, "total tok/s = output tokens / measured");
        }
    }
    // prefill rows: exact prompt length, cold
    for row in rec["prefill"].as_array().unwrap() {
        assert_eq!(row["status"], "valid");
        assert_eq!(row["prompt_tokens"], row["context"], "prompt length is exact with /tokenize");
        assert_eq!(row["cached_tokens"], 0, "the prefill row is cold: {row}");
    }
    // decode requests hit the prefix cache: every request with a long output was served from cache
    let trace = trace_lines(&dir.path().join("trace.jsonl"));
    let decode: Vec<_> = trace.iter().filter(|t| t["completion_tokens"].as_u64().unwrap_or(0) > 1).collect();
    assert!(decode.len() >= 10, "trace has the decode requests");
    let block = profile.block_size;
    for t in decode.iter().filter(|t| t["prompt_tokens"].as_u64().unwrap() > 1000) {
        let prompt = t["prompt_tokens"].as_u64().unwrap();
        let cached = t["cached_tokens"].as_u64().unwrap();
        assert!(cached >= prompt / block * block - block, "decode request not cached: {t}");
    }
}

/// Cancelled streams must be gone before the next cell starts: after the C=4
/// cell, the C=1 cell of the same context never sees more than one request.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_next_cell_starts_on_an_idle_server() {
    let dir = tempfile::tempdir().unwrap();
    let sim = sim(SimSpec { trace_dir: Some(dir.path()), ..SimSpec::default() }).await;
    let mut args =
        vec!["--url", sim.handle.url().leak(), "--contexts", "1k", "--concurrency", "4,1", "--duration", "1s"];
    args.extend_from_slice(QUICK);
    args.extend_from_slice(&["--max-tokens", "4096"]);
    let r = run(&dir.path().join("out"), &args).await;
    assert_eq!(r.code, 0, "{}", r.stderr);
    sim.handle.shutdown().await;
    let trace = trace_lines(&dir.path().join("trace.jsonl"));
    let long: Vec<_> = trace.iter().filter(|t| t["completion_tokens"].as_u64().unwrap_or(0) > 1).collect();
    // the C=1 cell's requests are the last ones to arrive; C=4 ones were cut short by the cancel
    let last_arrival = long.iter().map(|t| t["arrival"].as_f64().unwrap()).fold(0.0, f64::max);
    let overlapping = long
        .iter()
        .filter(|t| t["arrival"].as_f64().unwrap() < last_arrival && t["end"].as_f64().unwrap() > last_arrival)
        .count();
    assert_eq!(overlapping, 0, "a request of the previous cell was still running");
    assert!(
        long.iter().any(|t| t["finish"] == "disconnect" || t["finish"] == "abort"),
        "cancelled streams are aborted"
    );
}
