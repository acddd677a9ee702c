//! A reasoning model (issue 33) against the simulated engine's truth: each request's first answer
//! token and thinking tokens agree with the engine's trace, the cell has its time to the first
//! answer token, and thinking that uses up `max_tokens` is counted as no answer.

use std::collections::HashMap;
use std::path::Path;

use serde_json::Value;

use crate::common::{SimSpec, num as f, request_lines, run, sim, trace_lines};

/// The tiny profile as a reasoning model: `tokens` thinking tokens per chat answer.
fn thinking_profile(dir: &Path, tokens: &str) -> String {
    let path = dir.join("thinking.toml");
    let tiny = include_str!("../../../sm-sim/profiles/tiny.toml");
    std::fs::write(&path, format!("{tiny}\n[reasoning]\ntokens = {tokens}\nseed = 3\n")).unwrap();
    path.to_str().unwrap().to_string()
}

fn args<'a>(url: &'a str, extra: &[&'a str]) -> Vec<&'a str> {
    let mut a = vec!["--url", url, "--contexts", "1k", "--concurrency", "1,2", "--duration", "2s"];
    a.extend_from_slice(&["--ready-stable", "300ms", "--warmup", "0s", "--no-prefill-at-max", "--save-requests"]);
    a.extend_from_slice(extra);
    a
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_requests_first_answer_and_thinking_agree_with_the_trace() {
    let dir = tempfile::tempdir().unwrap();
    let profile = thinking_profile(dir.path(), "[8, 24]");
    let sim = sim(SimSpec { profile: &profile, trace_dir: Some(dir.path()), ..SimSpec::default() }).await;
    let url = sim.handle.url();
    let out = dir.path().join("out");
    let r = run(&out, &args(&url, &["--max-tokens", "64"])).await;
    assert_eq!(r.code, 0, "{}", r.stderr);
    sim.handle.shutdown().await;
    let trace: HashMap<String, Value> = trace_lines(&dir.path().join("trace.jsonl"))
        .into_iter()
        .map(|t| (format!("chatcmpl-{}", t["id"]), t))
        .collect();
    let lines = request_lines(&out);
    let mut checked = 0;
    for l in lines.iter().filter(|l| l["phase"] == "decode" && l["status"] == "completed") {
        let t = &trace[l["request_id"].as_str().unwrap()];
        let thought = t["reasoning_tokens"].as_u64().unwrap();
        assert!((8..=24).contains(&thought), "{t}");
        assert_eq!(l["usage_reasoning_tokens"].as_u64(), Some(thought), "the server's count: {l}");
        assert_eq!(l["reasoning_tokens"].as_f64(), Some(thought as f64), "the stream's split: {l}\n{t}");
        // the wait between the first token and the first answer token is the engine's, give or
        // take the loopback's jitter on each
        let (client, engine) =
            (f(&l["first_answer_s"]) - f(&l["first_token_s"]), f(&t["first_answer"]) - f(&t["first_token"]));
        assert!((client - engine).abs() < 0.05, "{client} s against the trace's {engine} s: {l}\n{t}");
        checked += 1;
    }
    assert!(checked >= 4, "{checked} requests checked");
    for cell in r.cells() {
        assert_eq!(cell["status"], "valid", "{cell}");
        assert!(f(&cell["ttfa_ms_p50"]) > f(&cell["ttft_ms_p50"]), "the answer comes after the thinking: {cell}");
        let mean = f(&cell["reasoning_tokens_mean"]);
        assert!((8.0..=24.0).contains(&mean), "{cell}");
        assert_eq!(cell["no_answer"], 0, "{cell}");
    }
    let md = std::fs::read_to_string(out.join("report.md")).unwrap();
    assert!(md.contains("| TTFA p50 |") && md.contains("| Thinking tokens |"), "the page shows the thinking");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn thinking_that_uses_up_max_tokens_is_counted_as_no_answer() {
    let dir = tempfile::tempdir().unwrap();
    let profile = thinking_profile(dir.path(), "40");
    let sim = sim(SimSpec { profile: &profile, ..SimSpec::default() }).await;
    let url = sim.handle.url();
    let out = dir.path().join("out");
    let r = run(&out, &args(&url, &["--max-tokens", "16"])).await;
    assert_eq!(r.code, 0, "{}", r.stderr);
    sim.handle.shutdown().await;
    for cell in r.cells() {
        assert_eq!(cell["status"], "valid", "{cell}");
        assert_eq!(cell["no_answer"].as_u64(), cell["completed"].as_u64(), "every ended request thought only: {cell}");
        assert!(cell.get("ttfa_ms_p50").is_none(), "no answer came: {cell}");
        assert_eq!(f(&cell["reasoning_tokens_mean"]), 16.0, "{cell}");
    }
    let lines = request_lines(&out);
    let done: Vec<&Value> = lines.iter().filter(|l| l["phase"] == "decode" && l["status"] == "completed").collect();
    assert!(!done.is_empty());
    for l in done {
        assert!(l["first_answer_s"].is_null() && l.get("first_answer_s").is_some(), "{l}");
        assert_eq!(l["reasoning_tokens"].as_f64(), Some(16.0), "{l}");
    }
}
