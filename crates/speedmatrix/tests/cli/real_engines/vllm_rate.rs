//! The rate phase (`--request-rate`, methodology §13.1) against vLLM serving the tiny model: a
//! short sweep whose counts are as planned and whose figures are present and coherent.

use super::support::Vllm;

#[test]
#[ignore = "needs a real engine: scripts/engines/real-engine-tests.sh"]
fn vllm_rate_phase() {
    let Some(vllm) = Vllm::from_env() else { return };
    let args = vec![
        "--contexts",
        "512",
        "--request-rate",
        "1,4",
        "--arrival",
        "constant",
        "--requests",
        "6",
        "--max-tokens",
        "16",
        "--ready-stable",
        "1s",
        "--warmup",
        "0s",
        "--no-prefill-at-max",
        "--save-requests",
    ];
    let (r, dir) = vllm.run(&args);
    assert_eq!(r.code, 0, "{}", r.context());
    let record = r.record();
    assert_eq!(record["status"], "complete", "{}", r.context());
    assert_eq!(record["settings"]["matrix"], false);
    let levels = record["phases"]["rate"]["levels"].as_array().expect("the rate levels");
    assert_eq!(levels.len(), 2, "one level per rate: {levels:?}");
    for l in levels {
        // a slow CPU server may saturate at 4 req/s: then the level is still measured and says so.
        // Each level waits for its own requests (16 tokens: well inside its bound), so none is cut
        // and none failed on a healthy server: every verdict rests on the six completed requests
        assert_eq!(l["status"], "measured", "{l}");
        let c = &l["counts"];
        let counts =
            ["scheduled", "sent", "completed", "failed", "cancelled", "unsent"].map(|k| c[k].as_u64().unwrap());
        assert_eq!(counts, [6, 6, 6, 0, 0, 0], "{l}");
        assert!(l.get("first_failure").is_none(), "no fault: {l}");
        let (ttft, e2e) = (l["ttft_ms"]["p50"].as_f64().unwrap(), l["e2e_ms"]["p50"].as_f64().unwrap());
        assert!(ttft > 0.0 && e2e >= ttft, "{l}");
        assert!(l["achieved_rps"].as_f64().unwrap() > 0.0, "{l}");
        assert!(l["send_lag_ms"]["max"].as_f64().unwrap() >= 0.0, "{l}");
        assert!(l["in_flight_max"].as_u64().unwrap() >= 1, "{l}");
        // drain_s is kept only where the level's own wait ran out on requests still running
        assert!(l.get("drain_s").is_none(), "no request outlived the level's own wait: {l}");
        // kept up or saturated (a busy CPU server may fall behind), never unknown: nothing was cut
        let verdict = l["saturation"].as_str().unwrap_or_default();
        assert!(["kept_up", "saturated"].contains(&verdict), "{l}");
        assert_eq!(l["saturated"], verdict == "saturated", "{l}");
        assert!(l["goodput_pct"].as_f64().is_some() && l["backlog_pct"].as_f64().is_some(), "{l}");
    }
    assert!(dir.path().join("rate.csv").exists());
    let lines = std::fs::read_to_string(dir.path().join("requests.jsonl")).unwrap();
    assert_eq!(lines.lines().filter(|l| l.contains("\"phase\":\"rate\"")).count(), 12);
}
