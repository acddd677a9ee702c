//! A fault in the sessions phase (methodology §13.4), against the simulated engine's trace: a
//! stalled turn is a failed turn, and its tokens (which the engine went on generating after the
//! client gave up on them) are not set against the streams' count as "another client".

use serde_json::Value;

use crate::common::{SimSpec, run, sim, trace_lines};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stalled_turn_is_a_failure_not_another_client() {
    let dir = tempfile::tempdir().unwrap();
    // the third request of the run: one user's first turn
    let faults = ["stall-after=100@from=3,to=3"];
    let sim = sim(SimSpec { faults: &faults, trace_dir: Some(dir.path()), ..SimSpec::default() }).await;
    let url = sim.handle.url();
    let out = dir.path().join("out");
    let mut args = vec!["--url", url.as_str(), "--contexts", "1k", "--concurrency", "1", "--max-tokens", "400"];
    args.extend_from_slice(&["--ready-stable", "300ms", "--warmup", "0s", "--no-prefill-at-max"]);
    args.extend_from_slice(&["--sessions", "3", "--turns", "3", "--think-time", "200ms", "--turn-tokens", "64"]);
    args.extend_from_slice(&["--stall-timeout", "2s"]);
    let r = run(&out, &args).await;
    sim.handle.shutdown().await;
    let phase = &r.record()["phases"]["sessions"];
    let turns: Vec<&Value> =
        phase["sessions"].as_array().unwrap().iter().flat_map(|s| s["turns"].as_array().unwrap()).collect();
    let failed: Vec<&&Value> = turns.iter().filter(|t| t["status"] == "failed").collect();
    assert_eq!(failed.len(), 1, "{phase}");
    assert!(failed[0]["reason"].as_str().unwrap().contains("stalled"), "named as a stall: {}", failed[0]);
    assert_eq!(phase["summary"]["failed"], 1);

    // the trace: the engine generated more for the stalled turn than the client received
    let id = failed[0]["request_id"].as_str().unwrap();
    let trace = trace_lines(&dir.path().join("trace.jsonl"));
    let truth = trace.iter().find(|t| format!("chatcmpl-{}", t["id"]) == id).expect("the stalled turn in the trace");
    assert!(truth["completion_tokens"].as_u64() > failed[0]["output_tokens"].as_u64(), "{truth}");

    let server = &phase["server_metrics"];
    assert!(server["generation_tokens"].is_number(), "the server's own count is kept: {server}");
    for key in ["measured_tokens", "tok_s_diff_pct"] {
        assert!(server[key].is_null(), "no comparison with a failed turn's tokens: {key} in {server}");
    }
    assert!(!r.stderr.contains("another client"), "a fault is not another client: {}", r.stderr);
}
