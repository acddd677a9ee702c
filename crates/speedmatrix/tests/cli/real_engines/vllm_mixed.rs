//! Against vLLM: the mixed-prefill phase (methodology §13.3), short. Asserts what a shared CPU
//! cannot blur: the planned probes were sent, each fresh prompt was cold and of its planned length,
//! and the figures are present and coherent; never how much the prefill slowed the background.

use super::support::Vllm;

#[test]
#[ignore = "needs a real engine: scripts/engines/real-engine-tests.sh"]
fn vllm_mixed_prefill_phase() {
    let Some(vllm) = Vllm::from_env() else { return };
    let mut args = vec!["--contexts", "256", "--concurrency", "1", "--mixed-prefill", "1k@2"];
    args.extend(["--mixed-prefill-probes", "2", "--mixed-prefill-window", "1s", "--max-tokens", "32"]);
    args.extend(["--ready-stable", "1s", "--warmup", "0s", "--no-prefill-at-max", "--save-requests"]);
    let (r, dir) = vllm.run(&args);
    assert_eq!(r.code, 0, "{}", r.context());
    let record = r.record();
    assert_eq!(record["status"], "complete", "{}", r.context());
    assert!(record["decode"].as_array().unwrap().is_empty(), "a phase alone measures no matrix");
    let level = &record["phases"]["mixed_prefill"]["levels"][0];
    assert!(level["error"].is_null(), "{level}");
    assert_eq!((level["prompt_context"].as_u64(), level["background"].as_u64()), (Some(1024), Some(2)));
    let idle = level["idle"]["ttft_ms"].as_f64().unwrap_or_else(|| panic!("no idle TTFT: {level}"));
    assert!(idle > 0.0);
    let probes = level["probes"].as_array().unwrap();
    assert_eq!(probes.len(), 2, "{level}");
    for p in probes {
        assert!(p["error"].is_null(), "{p}");
        assert_eq!(p["prompt_tokens"], 1024, "an exact fresh prompt: {p}");
        // vLLM's CPU blocks are 128 tokens: a fresh prompt shares at most one with anything sent before
        assert!(p["cached_tokens"].as_u64().unwrap_or(0) <= 128, "a cold prompt: {p}");
        let ttft = p["ttft_ms"].as_f64().unwrap();
        assert!((p["slowdown"].as_f64().unwrap() - ttft / idle).abs() < 0.01, "{p}");
        assert!(p["before_tok_s"].as_f64().unwrap() > 0.0, "the background decoded before the probe: {p}");
        assert!(p["after_tok_s"].as_f64().is_some() && p["during_tok_s"].as_f64().is_some(), "{p}");
        let tl = &p["timeline"];
        assert_eq!(tl["bin_ms"], 100.0, "{tl}");
        assert!(tl["tokens"].as_array().unwrap().iter().any(|n| n.as_u64() > Some(0)), "{tl}");
    }
    assert!(dir.path().join("mixed_prefill.csv").exists(), "mixed_prefill.csv beside run.json");
}
