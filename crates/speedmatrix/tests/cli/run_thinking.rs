//! A reasoning model (issue 33) against the simulated engine's truth: each request's first answer
//! token and thinking tokens agree with the engine's trace, the cell has its time to the first
//! answer token, and thinking that uses up `max_tokens` is counted as no answer.

use std::path::Path;

use serde_json::Value;

use crate::common::{SimSpec, num as f, request_lines, run, sim, trace_by_id, trace_lines};

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
    let r = run(&out, &args(&url, &["--max-tokens", "64", "--slo", "tok_s_p10>=1,ttfa_p90<=60s"])).await;
    assert_eq!(r.code, 0, "{}", r.stderr);
    sim.handle.shutdown().await;
    let trace = trace_by_id(dir.path());
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
        // every request generates 64 tokens: what it did not think it answered
        let answer = f(&cell["answer_tokens_mean"]);
        assert!((answer + mean - 64.0).abs() <= 0.1, "{answer} answer + {mean} thinking tokens: {cell}");
        // the server's count of the thinking is the stream's
        assert_eq!(
            (f(&cell["usage_reasoning_tokens_mean"]), &cell["reasoning_disagree"]),
            (mean, &Value::from(0)),
            "{cell}"
        );
        // the answer streams at the cell's decode speed (the sim's step time does not tell thinking apart)
        let (speed, decode) = (f(&cell["answer_tok_s"]), f(&cell["per_request_tok_s"]));
        assert!((speed / decode - 1.0).abs() < 0.25, "answer {speed} tok/s against {decode}: {cell}");
        // the SLO's bound on the first answer token reads the same requests as the cell's TTFA
        let bound = cell["slo_bounds"].as_array().unwrap().iter().find(|b| b["bound"] == "ttfa_p90").unwrap();
        assert_eq!((&bound["value"], &bound["holds"]), (&cell["ttfa_ms_p90"], &Value::Bool(true)), "{cell}");
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
    let r = run(&out, &args(&url, &["--max-tokens", "16", "--slo", "ttft_p90<=60s,ttfa_p50<=60s"])).await;
    assert_eq!(r.code, 0, "{}", r.stderr);
    sim.handle.shutdown().await;
    for cell in r.cells() {
        assert_eq!(cell["status"], "valid", "{cell}");
        // TTFT holds; a user who never got an answer did not get it in time
        assert_eq!(cell["slo_met"], false, "{cell}");
        let bound = cell["slo_bounds"].as_array().unwrap().iter().find(|b| b["bound"] == "ttfa_p50").unwrap();
        assert_eq!((&bound["value"], &bound["holds"]), (&Value::Null, &Value::Bool(false)), "{cell}");
        // only a request still thinking when the window closed (its wait not known yet) is good
        assert!(f(&cell["goodput_pct"]) < 5.0, "{cell}");
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn thinking_off_is_sent_recorded_and_the_model_answers_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let profile = thinking_profile(dir.path(), "20");
    let sim = sim(SimSpec { profile: &profile, trace_dir: Some(dir.path()), ..SimSpec::default() }).await;
    let url = sim.handle.url();
    let refused = run(&dir.path().join("no"), &args(&url, &["--thinking", "off", "--api", "completions"])).await;
    assert_eq!(refused.code, 1, "{}", refused.stderr);
    assert!(refused.stderr.contains("--api chat"), "{}", refused.stderr);
    let out = dir.path().join("out");
    let r = run(&out, &args(&url, &["--max-tokens", "32", "--thinking", "off", "--reasoning-effort", "low"])).await;
    assert_eq!(r.code, 0, "{}", r.stderr);
    sim.handle.shutdown().await;
    let settings = &r.record()["settings"];
    assert_eq!((&settings["thinking"], &settings["reasoning_effort"]), (&Value::from("off"), &Value::from("low")));
    for cell in r.cells() {
        assert_eq!(cell["status"], "valid", "{cell}");
        assert!(cell.get("ttfa_ms_p50").is_none() && cell.get("reasoning_tokens_mean").is_none(), "{cell}");
    }
    let traced = trace_lines(&dir.path().join("trace.jsonl"));
    assert!(
        !traced.is_empty() && traced.iter().all(|t| t.get("reasoning_tokens").is_none_or(|v| v == 0)),
        "the engine did not think"
    );
    for l in request_lines(&out).iter().filter(|l| l["phase"] == "decode" && l["status"] == "completed") {
        assert_eq!(l["first_answer_s"], l["first_token_s"], "{l}");
        assert!(l.get("reasoning_tokens").is_none(), "{l}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rate_levels_wait_for_the_answer_is_the_engines_from_the_due_time() {
    let dir = tempfile::tempdir().unwrap();
    let profile = thinking_profile(dir.path(), "[6, 18]");
    let sim = sim(SimSpec { profile: &profile, trace_dir: Some(dir.path()), ..SimSpec::default() }).await;
    let url = sim.handle.url();
    let out = dir.path().join("out");
    let rate = ["--request-rate", "20", "--arrival", "constant", "--requests", "12", "--max-tokens", "32"];
    let r = run(&out, &[&["--url", url.as_str(), "--contexts", "1k", "--save-requests"][..], &rate].concat()).await;
    assert_eq!(r.code, 0, "{}", r.stderr);
    sim.handle.shutdown().await;
    let level = &r.record()["phases"]["rate"]["levels"][0];
    assert_eq!(level["status"], "measured", "{level}");
    let trace = trace_by_id(dir.path());
    let lines: Vec<Value> = request_lines(&out).into_iter().filter(|l| l["phase"] == "rate").collect();
    assert_eq!(lines.len(), 12);
    let mut truth = Vec::new();
    let mut thought = 0.0;
    for l in &lines {
        let t = &trace[l["request_id"].as_str().unwrap()];
        // the engine's wait for the answer, plus the send lag: from the due time
        truth.push(f(&t["first_answer"]) - f(&t["arrival"]) + f(&l["sent_s"]) - f(&l["scheduled_s"]));
        thought += f(&t["reasoning_tokens"]);
    }
    truth.sort_by(f64::total_cmp);
    let (p50, want) = (f(&level["ttfa_ms"]["p50"]) / 1000.0, (truth[5] + truth[6]) / 2.0);
    assert!(p50 >= want - 0.002 && p50 <= want + 0.05, "TTFA p50 {p50} s, the trace says {want} s: {level}");
    assert!(f(&level["ttfa_ms"]["p50"]) > f(&level["ttft_ms"]["p50"]), "{level}");
    assert!((f(&level["reasoning_tokens_mean"]) - thought / 12.0).abs() < 1e-6, "{level}");
    assert_eq!(level["no_answer"], 0, "{level}");
}
