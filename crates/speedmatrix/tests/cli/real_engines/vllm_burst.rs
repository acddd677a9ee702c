//! The burst phase (`--burst`, methodology §13.2) against vLLM serving the tiny model: a short
//! variant, two contexts × two concurrencies with short answers that may end on their own.

use super::support::{Metrics, Vllm};

/// Every planned burst is sent with exactly C requests, all complete, and the figures are coherent:
/// TTFT before the end, p50 ≤ p90 ≤ max = the time to the last completion, tok/s = tokens ÷ that
/// time, at most `--max-tokens` per request. The server is idle after the phase.
#[test]
#[ignore = "needs a real engine: scripts/engines/real-engine-tests.sh"]
fn vllm_burst_phase() {
    let Some(vllm) = Vllm::from_env() else { return };
    let mut args = vec!["--contexts", "256,1k", "--concurrency", "1,4", "--max-tokens", "32"];
    args.extend(["--burst", "--no-ignore-eos", "--save-requests"]);
    let (r, dir) = vllm.run(&args);
    assert_eq!(r.code, 0, "{}", r.context());
    let record = r.record();
    assert_eq!(record["status"], "complete", "{}", r.context());
    let phase = &record["phases"]["burst"];
    assert_eq!((phase["ignore_eos"].as_bool(), phase["max_tokens"].as_u64()), (Some(false), Some(32)), "{phase}");
    let bursts = phase["bursts"].as_array().expect("bursts");
    assert_eq!(bursts.len(), 4, "2 contexts × 2 concurrencies: {bursts:?}");
    let f = |b: &serde_json::Value, k: &str| b[k].as_f64().unwrap_or_else(|| panic!("{k} missing: {b}"));
    for b in bursts {
        let c = b["concurrency"].as_u64().unwrap();
        assert_eq!(b["status"], "valid", "{b}");
        assert_eq!(
            (b["requests"].as_u64(), b["completed"].as_u64(), b["failed"].as_u64()),
            (Some(c), Some(c), Some(0))
        );
        let (p50, p90, max, last) =
            (f(b, "e2e_ms_p50"), f(b, "e2e_ms_p90"), f(b, "e2e_ms_max"), f(b, "last_completion_ms"));
        assert!(0.0 < p50 && p50 <= p90 && p90 <= max && (max - last).abs() < 0.01, "{b}");
        // a random-weight model may stop at once without a token: TTFT then has fewer samples
        if !b["ttft_ms_max"].is_null() {
            assert!(f(b, "ttft_ms_p50") <= f(b, "ttft_ms_max") && f(b, "ttft_ms_max") <= max, "{b}");
        }
        let tokens = b["output_tokens"].as_u64().unwrap();
        assert!(tokens <= 32 * c, "at most --max-tokens each: {b}");
        let rate = tokens as f64 / (last / 1000.0);
        assert!((f(b, "total_tok_s") - rate).abs() <= 0.05 + rate * 1e-5, "{b}");
        assert!(f(b, "send_spread_ms") <= max, "{b}");
    }
    let lines = std::fs::read_to_string(dir.path().join("requests.jsonl")).unwrap();
    let burst_lines = lines.lines().filter(|l| l.contains("\"phase\":\"burst\"")).count();
    assert_eq!(burst_lines, 1 + 4 + 1 + 4, "one line per request sent");
    assert!(dir.path().join("burst.csv").exists());
    let m = Metrics::scrape(&vllm.url);
    assert_eq!(m.sum("vllm:num_requests_running"), 0.0, "the server is idle after the phase");
}
