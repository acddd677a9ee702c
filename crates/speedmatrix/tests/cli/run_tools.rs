//! Tool calls (issue 33 §2) against the simulated engine's truth: with `--tools`, each request's
//! first tool call, the call's tokens and whether its arguments parse agree with the engine's
//! trace, the cell has its time to the first tool call and its calls' figures, and bad tool files
//! are refused before anything is sent.

use std::path::Path;

use serde_json::Value;

use crate::common::{SimSpec, num as f, request_lines, run, sim, trace_by_id};

const THINKING: u64 = 6;
const MAX_TOKENS: u64 = 32;

/// The tiny profile thinking `THINKING` tokens before each call, `invalid` of the calls' arguments
/// deliberately not JSON.
fn tools_profile(dir: &Path, invalid: f64) -> String {
    let path = dir.join("tools.toml");
    let tiny = include_str!("../../../sm-sim/profiles/tiny.toml");
    let text = format!("{tiny}\n[reasoning]\ntokens = {THINKING}\n\n[tools]\ninvalid_json = {invalid}\nseed = 5\n");
    std::fs::write(&path, text).unwrap();
    path.to_str().unwrap().to_string()
}

fn tools_file(dir: &Path, text: &str) -> String {
    let path = dir.join("tools.json");
    std::fs::write(&path, text).unwrap();
    path.to_str().unwrap().to_string()
}

const TOOLS: &str = r#"[{"type": "function", "function": {"name": "get_weather", "description": "The weather in a city",
  "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}]"#;

fn args<'a>(url: &'a str, tools: &'a str, extra: &[&'a str]) -> Vec<&'a str> {
    let mut a = vec!["--url", url, "--contexts", "1k", "--concurrency", "1,2", "--duration", "2s", "--tools", tools];
    a.extend_from_slice(&["--ready-stable", "300ms", "--warmup", "0s", "--no-prefill-at-max", "--save-requests"]);
    a.extend_from_slice(extra);
    a
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_requests_tool_call_agrees_with_the_trace() {
    let dir = tempfile::tempdir().unwrap();
    let profile = tools_profile(dir.path(), 0.5);
    let tools = tools_file(dir.path(), TOOLS);
    let sim = sim(SimSpec { profile: &profile, trace_dir: Some(dir.path()), ..SimSpec::default() }).await;
    let url = sim.handle.url();
    let out = dir.path().join("out");
    let max = MAX_TOKENS.to_string();
    let r = run(&out, &args(&url, &tools, &["--max-tokens", &max])).await;
    assert_eq!(r.code, 0, "{}", r.stderr);
    sim.handle.shutdown().await;
    let trace = trace_by_id(dir.path());
    let lines = request_lines(&out);
    let mut valid = Vec::new();
    for l in lines.iter().filter(|l| l["phase"] == "decode" && l["status"] == "completed") {
        let t = &trace[l["request_id"].as_str().unwrap()];
        assert_eq!(t["tool_call_tokens"].as_u64(), Some(MAX_TOKENS - THINKING), "{t}");
        assert_eq!(l["tool_call_tokens"].as_f64(), Some((MAX_TOKENS - THINKING) as f64), "{l}\n{t}");
        assert_eq!(l["tool_args_valid"], t["tool_args_valid"], "{l}\n{t}");
        // the wait from the first token (the thinking's) to the call is the engine's, give or take
        // the loopback's jitter on each
        let client = f(&l["first_tool_call_s"]) - f(&l["first_token_s"]);
        let engine = f(&t["first_tool_call"]) - f(&t["first_token"]);
        assert!((client - engine).abs() < 0.05, "{client} s against the trace's {engine} s: {l}\n{t}");
        assert_eq!(l["first_answer_s"], l["first_tool_call_s"], "the call is the answer: {l}");
        valid.push(l["tool_args_valid"].as_bool().unwrap());
    }
    assert!(valid.len() >= 4, "{} requests checked", valid.len());
    assert!(valid.contains(&true) && valid.contains(&false), "the seeded share gives both: {valid:?}");
    let shown = r.stdout.clone() + &std::fs::read_to_string(out.join("report.md")).unwrap();
    assert!(shown.contains("| TTFTC p50 |") && shown.contains("| Tool-call tokens |"), "the page shows the calls");
    for cell in r.cells() {
        assert_eq!(cell["status"], "valid", "{cell}");
        assert!(f(&cell["ttftc_ms_p50"]) > f(&cell["ttft_ms_p50"]), "the call comes after the thinking: {cell}");
        // every completed request's call is MAX_TOKENS − THINKING tokens, so their mean is too
        assert_eq!(f(&cell["tool_call_tokens_mean"]), (MAX_TOKENS - THINKING) as f64, "{cell}");
        assert_eq!(cell["no_tool_call"], 0, "{cell}");
        let share = f(&cell["tool_args_valid"]);
        assert!((0.0..=1.0).contains(&share), "{cell}");
    }
    let settings = &r.record()["settings"]["tools"];
    assert_eq!((settings["name"].as_str(), settings["names"][0].as_str()), (Some("tools.json"), Some("get_weather")));
    assert_eq!(settings["bytes"].as_u64(), Some(TOOLS.len() as u64));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cells_share_of_valid_arguments_is_its_requests() {
    let dir = tempfile::tempdir().unwrap();
    let profile = tools_profile(dir.path(), 1.0);
    let tools = tools_file(dir.path(), TOOLS);
    let sim = sim(SimSpec { profile: &profile, ..SimSpec::default() }).await;
    let url = sim.handle.url();
    let out = dir.path().join("out");
    let r = run(&out, &args(&url, &tools, &["--max-tokens", "16"])).await;
    assert_eq!(r.code, 0, "{}", r.stderr);
    sim.handle.shutdown().await;
    let done: Vec<Value> =
        request_lines(&out).into_iter().filter(|l| l["phase"] == "decode" && l["status"] == "completed").collect();
    assert!(!done.is_empty());
    assert!(done.iter().all(|l| l["tool_args_valid"] == false), "every call's arguments were broken");
    for cell in r.cells() {
        assert_eq!((f(&cell["tool_args_valid"]), f(&cell["tool_call_tokens_mean"])), (0.0, 10.0), "{cell}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_tool_files_are_refused_before_anything_is_sent() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    for (text, want) in [
        (r#"{"type": "function"}"#, "it must be a JSON array of tool definitions"),
        (r#"[{"type": "function", "function": {"description": "x"}}]"#, "tool 1 has no function.name"),
        ("[", "it is not JSON"),
    ] {
        let tools = tools_file(dir.path(), text);
        let r = run(&out, &["--url", "http://127.0.0.1:9", "--tools", &tools]).await;
        assert_ne!(r.code, 0, "{text}");
        assert!(r.stderr.contains(want) && r.stderr.contains("tools.json"), "{text}: {}", r.stderr);
    }
    let missing = dir.path().join("none.json");
    let r = run(&out, &["--url", "http://127.0.0.1:9", "--tools", missing.to_str().unwrap()]).await;
    assert!(r.code != 0 && r.stderr.contains("--tools: cannot read"), "{}", r.stderr);
    let tools = tools_file(dir.path(), TOOLS);
    let r = run(&out, &["--url", "http://127.0.0.1:9", "--tools", &tools, "--api", "completions"]).await;
    assert!(r.code != 0 && r.stderr.contains("--tools goes with --api chat"), "{}", r.stderr);
}

/// A bound on the wait for the first tool call (`ttftc_pNN`, methodology §11.1) is judged over the
/// cell's requests: its value is the cell's TTFTC at that percentile (every request called), each
/// request's wait the engine's, and a run without `--tools` refuses it before anything is sent.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bound_on_the_first_tool_call_is_the_cells_ttftc() {
    let dir = tempfile::tempdir().unwrap();
    let profile = tools_profile(dir.path(), 0.0);
    let tools = tools_file(dir.path(), TOOLS);
    let sim = sim(SimSpec { profile: &profile, trace_dir: Some(dir.path()), ..SimSpec::default() }).await;
    let url = sim.handle.url();
    let out = dir.path().join("out");
    let slo = ["--max-tokens", "16", "--slo", "tok_s_p10>=1,ttftc_p90<=60s,ttftc_p50<=60s"];
    let r = run(&out, &args(&url, &tools, &slo)).await;
    assert_eq!(r.code, 0, "{}", r.stderr);
    sim.handle.shutdown().await;
    assert_eq!(r.record()["settings"]["slo"], "tok_s_p10>=1,ttftc_p90<=60s,ttftc_p50<=60s");
    let trace = trace_by_id(dir.path());
    let lines = request_lines(&out);
    let done: Vec<&Value> = lines.iter().filter(|l| l["phase"] == "decode" && l["status"] == "completed").collect();
    assert!(done.len() >= 4, "{} requests", done.len());
    for l in done {
        // each request's wait for its call, from the first token on, is the engine's
        let t = &trace[l["request_id"].as_str().unwrap()];
        let client = f(&l["first_tool_call_s"]) - f(&l["first_token_s"]);
        let engine = f(&t["first_tool_call"]) - f(&t["first_token"]);
        assert!((client - engine).abs() < 0.05, "{client} s against the trace's {engine} s: {l}\n{t}");
    }
    for cell in r.cells() {
        assert_eq!((&cell["status"], &cell["no_tool_call"]), (&Value::from("valid"), &Value::from(0)), "{cell}");
        let bound =
            |key: &str| cell["slo_bounds"].as_array().unwrap().iter().find(|b| b["bound"] == key).unwrap().clone();
        for (key, figure) in [("ttftc_p90", "ttftc_ms_p90"), ("ttftc_p50", "ttftc_ms_p50")] {
            let b = bound(key);
            assert_eq!((&b["value"], &b["holds"]), (&cell[figure], &Value::Bool(true)), "{key}: {cell}");
            assert_eq!(b["limit"], 60000.0, "{b}");
        }
        assert!(f(&cell["ttftc_ms_p50"]) > f(&cell["ttft_ms_p50"]), "the call comes after the thinking: {cell}");
    }

    // without --tools there is no call to wait for: refused, saying what to do
    let r =
        run(&dir.path().join("plain"), &["--url", "http://127.0.0.1:9", "--slo", "ttft_p90<=2s,ttftc_p90<=2s"]).await;
    assert_ne!(r.code, 0, "{}", r.stderr);
    for want in ["ttftc_p90", "without --tools", "give --tools FILE.json, or drop the ttftc bound"] {
        assert!(r.stderr.contains(want), "{want}: {}", r.stderr);
    }
    assert!(!dir.path().join("plain").join("run.json").exists(), "nothing was measured");
}
