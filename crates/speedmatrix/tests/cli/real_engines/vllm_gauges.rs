//! The server's gauges per cell (methodology §14.1) against vLLM serving the tiny model: a short
//! cell records a non-empty series from vLLM's own /metrics, and vLLM's generation counter agrees
//! with the tokens the streams received over the same span, the scrapes' (not the window: on a
//! busy machine a scrape of vLLM is answered late and holds its streams meanwhile, so the two
//! spans' rates differed by up to 24 %), within the 2 % of the cell's warning past the scrapes'
//! own timing.

use super::support::Vllm;

#[test]
#[ignore = "needs a real engine: scripts/engines/real-engine-tests.sh"]
fn vllm_server_gauges() {
    let Some(vllm) = Vllm::from_env() else { return };
    let args = vec![
        "--contexts",
        "512",
        "--concurrency",
        "2",
        "--duration",
        "5s",
        "--max-tokens",
        "256",
        "--metrics-interval",
        "500ms",
        "--ready-stable",
        "1s",
        "--warmup",
        "0s",
        "--no-prefill-at-max",
    ];
    let (r, _dir) = vllm.run(&args);
    assert_eq!(r.code, 0, "{}", r.context());
    let cell = r.decode().into_iter().find(|c| c["concurrency"] == 2).expect("the cell");
    assert_eq!(cell["status"], "valid", "{cell}");
    let m = &cell["server_metrics"];
    let series = m["series"].as_array().unwrap_or_else(|| panic!("no server series: {cell}"));
    // the window's first and last scrapes at least: how many between depends on how soon a busy
    // vLLM answers (0.8 s was seen, against the 500 ms interval), not on what is tested here
    assert!(series.len() >= 2 && m["scrapes"].as_u64() == Some(series.len() as u64), "{m}");
    assert!(series.iter().all(|p| p["running"].as_f64().is_some_and(|r| r <= 2.0)), "{m}");
    // exported and in range; not asserted above 0: under CI's load (llama.cpp building beside it)
    // vLLM 0.32-cpu's running and KV gauges were seen stuck at 0 while its own log said 1 running
    assert!(m["kv_usage_max"].as_f64().is_some_and(|k| (0.0..=1.0).contains(&k)), "vLLM exports KV usage: {m}");
    let (server, ours) = (m["generation_tokens"].as_f64().unwrap(), m["measured_tokens"].as_f64().unwrap());
    let (diff, timing) = (m["tok_s_diff_pct"].as_f64().unwrap(), m["tok_s_timing_pct"].as_f64().unwrap());
    assert!(diff.abs() <= 2.0 + timing && diff.abs() < 15.0, "vLLM counted {server} tokens, the streams {ours}: {m}");
    assert!(!cell["warnings"].to_string().contains("the server counted"), "{cell}");
}
