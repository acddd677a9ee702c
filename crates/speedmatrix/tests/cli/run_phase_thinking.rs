//! A reasoning model's figures and a run's tool-call figures in the load phases (issue 33: "per
//! request and per cell, in every phase") against the simulated engine's truth: a burst's and the
//! sessions' time to the first answer token, thinking tokens and requests left without an answer,
//! and a rate level's time to the first tool call and its calls' figures, agree with the engine's
//! trace and with the requests' own lines.

use std::path::Path;

use serde_json::Value;

use crate::common::{SimSpec, num as f, request_lines, run, sim, trace_by_id};

/// Every chat answer of the tiny profile thinks this many tokens first.
const THINKING: u64 = 8;

/// The tiny profile as a reasoning model thinking [`THINKING`] tokens, `tools` its `[tools]`
/// section (empty for none).
fn profile(dir: &Path, tools: &str) -> String {
    let path = dir.join("thinking.toml");
    let tiny = include_str!("../../../sm-sim/profiles/tiny.toml");
    std::fs::write(&path, format!("{tiny}\n[reasoning]\ntokens = {THINKING}\nseed = 3\n{tools}")).unwrap();
    path.to_str().unwrap().to_string()
}

/// The median as the record's percentiles take it (linear between the two middle values).
fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    let n = v.len();
    assert!(n > 0, "no value");
    if n % 2 == 1 { v[n / 2] } else { (v[n / 2 - 1] + v[n / 2]) / 2.0 }
}

/// Each completed line of `phase` checked against the engine's trace: its thinking is the
/// engine's, its wait from the first token to the first answer the engine's give or take the
/// loopback's jitter. Returns the lines.
fn checked_lines(out: &Path, dir: &Path, phase: &str) -> Vec<Value> {
    let trace = trace_by_id(dir);
    let lines: Vec<Value> =
        request_lines(out).into_iter().filter(|l| l["phase"] == phase && l["status"] == "completed").collect();
    for l in &lines {
        let t = &trace[l["request_id"].as_str().unwrap()];
        assert_eq!(t["reasoning_tokens"].as_u64(), Some(THINKING), "{t}");
        assert_eq!(l["reasoning_tokens"].as_f64(), Some(THINKING as f64), "{l}\n{t}");
        let client = f(&l["first_answer_s"]) - f(&l["first_token_s"]);
        let engine = f(&t["first_answer"]) - f(&t["first_token"]);
        assert!((client - engine).abs() < 0.05, "{client} s against the trace's {engine} s: {l}\n{t}");
    }
    lines
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bursts_wait_for_the_answer_and_its_thinking_are_the_engines() {
    let dir = tempfile::tempdir().unwrap();
    let profile = profile(dir.path(), "");
    let sim = sim(SimSpec { profile: &profile, trace_dir: Some(dir.path()), ..SimSpec::default() }).await;
    let url = sim.handle.url();
    let out = dir.path().join("out");
    let args = ["--url", url.as_str(), "--contexts", "1k", "--concurrency", "2,3", "--burst", "--save-requests"];
    let r = run(&out, &[&args[..], &["--max-tokens", "24"]].concat()).await;
    assert_eq!(r.code, 0, "{}", r.stderr);
    let lines = checked_lines(&out, dir.path(), "burst");
    let bursts = r.record()["phases"]["burst"]["bursts"].as_array().unwrap().clone();
    assert_eq!(bursts.len(), 2, "{bursts:?}");
    for b in &bursts {
        assert_eq!(b["status"], "valid", "{b}");
        let c = b["concurrency"].as_u64().unwrap();
        assert_eq!(f(&b["reasoning_tokens_mean"]), THINKING as f64, "{b}");
        assert_eq!(b["no_answer"], 0, "{b}");
        // from the burst's scheduled instant, as its TTFT: the lines' first answers less it
        let mine: Vec<&Value> = lines.iter().filter(|l| l["concurrency"] == c).collect();
        assert_eq!(mine.len() as u64, c);
        let want = median(mine.iter().map(|l| (f(&l["first_answer_s"]) - f(&l["scheduled_s"])) * 1000.0).collect());
        let ttfa = &b["ttfa_ms"];
        assert!((f(&ttfa["p50"]) - want).abs() < 0.01, "TTFA p50 against the lines' {want} ms: {b}");
        assert!(f(&ttfa["p50"]) > f(&b["ttft_ms_p50"]), "the answer comes after the thinking: {b}");
        assert!(f(&ttfa["p99"]) >= f(&ttfa["p50"]), "{b}");
        assert!(b.get("ttftc_ms").is_none() && b.get("no_tool_call").is_none(), "no tools sent: {b}");
    }
    let md = std::fs::read_to_string(out.join("report.md")).unwrap();
    assert!(md.contains("| TTFA p50 |") && md.contains("| Thinking tokens |"), "the burst table shows them");

    // thinking that uses up max_tokens leaves every request without an answer
    let out = dir.path().join("short");
    let max = THINKING.to_string();
    let r = run(&out, &[&args[..], &["--max-tokens", &max]].concat()).await;
    assert_eq!(r.code, 0, "{}", r.stderr);
    sim.handle.shutdown().await;
    for b in r.record()["phases"]["burst"]["bursts"].as_array().unwrap() {
        assert_eq!(b["no_answer"], b["completed"], "{b}");
        assert_eq!(f(&b["reasoning_tokens_mean"]), THINKING as f64, "{b}");
        assert!(b.get("ttfa_ms").is_none(), "no answer, no wait for one: {b}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_sessions_wait_for_the_answer_and_thinking_are_the_engines() {
    let dir = tempfile::tempdir().unwrap();
    let profile = profile(dir.path(), "");
    let sim = sim(SimSpec { profile: &profile, trace_dir: Some(dir.path()), ..SimSpec::default() }).await;
    let url = sim.handle.url();
    let out = dir.path().join("out");
    let args = ["--url", url.as_str(), "--max-tokens", "24", "--save-requests"];
    let flags = ["--sessions", "2", "--turns", "2", "--think-time", "0s", "--turn-tokens", "32"];
    let r = run(&out, &[&args[..], &flags].concat()).await;
    assert_eq!(r.code, 0, "{}", r.stderr);
    sim.handle.shutdown().await;
    let lines = checked_lines(&out, dir.path(), "sessions");
    assert_eq!(lines.len(), 4);
    let p = &r.record()["phases"]["sessions"];
    // each turn keeps its thinking and its first answer, as its line
    let trace = trace_by_id(dir.path());
    for t in p["sessions"].as_array().unwrap().iter().flat_map(|s| s["turns"].as_array().unwrap()) {
        let engine = &trace[t["request_id"].as_str().unwrap()];
        assert_eq!(t["reasoning_tokens"].as_f64(), Some(THINKING as f64), "{t}");
        let client = f(&t["first_answer_s"]) - f(&t["first_token_s"]);
        assert!((client - (f(&engine["first_answer"]) - f(&engine["first_token"]))).abs() < 0.05, "{t}\n{engine}");
    }
    let s = &p["summary"];
    assert_eq!(f(&s["reasoning_tokens_mean"]), THINKING as f64, "{s}");
    assert_eq!(s["no_answer"], 0, "{s}");
    // from each turn's due time, as its TTFT
    let want = median(lines.iter().map(|l| (f(&l["first_answer_s"]) - f(&l["scheduled_s"])) * 1000.0).collect());
    assert!((f(&s["ttfa_ms"]["p50"]) - want).abs() < 0.01, "TTFA p50 against the lines' {want} ms: {s}");
    assert!(f(&s["ttfa_ms"]["p50"]) > f(&s["ttft_ms_p50"]), "{s}");
    let md = std::fs::read_to_string(out.join("report.md")).unwrap();
    assert!(md.contains("Time to the first answer token p50"), "the sessions' totals say it");
}

const TOOLS: &str = r#"[{"type": "function", "function": {"name": "get_weather", "description": "The weather in a city",
  "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}]"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rate_levels_tool_calls_are_the_engines_from_the_due_time() {
    let dir = tempfile::tempdir().unwrap();
    let profile = profile(dir.path(), "\n[tools]\ninvalid_json = 0.5\nseed = 5\n");
    let tools = dir.path().join("tools.json");
    std::fs::write(&tools, TOOLS).unwrap();
    let sim = sim(SimSpec { profile: &profile, trace_dir: Some(dir.path()), ..SimSpec::default() }).await;
    let url = sim.handle.url();
    let out = dir.path().join("out");
    let rate = ["--request-rate", "20", "--arrival", "constant", "--requests", "8", "--max-tokens", "32"];
    let args = ["--url", url.as_str(), "--contexts", "1k", "--save-requests", "--tools", tools.to_str().unwrap()];
    let r = run(&out, &[&args[..], &rate].concat()).await;
    assert_eq!(r.code, 0, "{}", r.stderr);
    sim.handle.shutdown().await;
    let level = &r.record()["phases"]["rate"]["levels"][0];
    assert_eq!(level["status"], "measured", "{level}");
    let trace = trace_by_id(dir.path());
    let lines: Vec<Value> =
        request_lines(&out).into_iter().filter(|l| l["phase"] == "rate" && l["status"] == "completed").collect();
    assert_eq!(lines.len(), 8);
    let mut valid = 0;
    for l in &lines {
        let t = &trace[l["request_id"].as_str().unwrap()];
        assert_eq!(l["tool_args_valid"], t["tool_args_valid"], "{l}\n{t}");
        assert_eq!(t["tool_call_tokens"].as_u64(), Some(32 - THINKING), "{t}");
        valid += u64::from(t["tool_args_valid"] == true);
    }
    // the share of valid arguments and the calls' tokens are the engine's
    assert_eq!(f(&level["tool_args_valid"]), valid as f64 / 8.0, "{level}");
    assert_eq!(f(&level["tool_call_tokens_mean"]), (32 - THINKING) as f64, "{level}");
    assert_eq!(level["no_tool_call"], 0, "{level}");
    // from the due time: the lines' first calls less their due times
    let want = median(lines.iter().map(|l| (f(&l["first_tool_call_s"]) - f(&l["scheduled_s"])) * 1000.0).collect());
    assert!((f(&level["ttftc_ms"]["p50"]) - want).abs() < 0.01, "TTFTC p50 against the lines' {want} ms: {level}");
    assert!(f(&level["ttftc_ms"]["p50"]) > f(&level["ttft_ms"]["p50"]), "the call comes after the thinking: {level}");
    assert_eq!(f(&level["reasoning_tokens_mean"]), THINKING as f64, "{level}");
    let md = std::fs::read_to_string(out.join("report.md")).unwrap();
    assert!(md.contains("| TTFTC p50 |") && md.contains("| Tool args valid |"), "the rate table shows the calls");
}
