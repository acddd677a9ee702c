//! `--replay` against the simulated engine (methodology §13.5): every request is due at the
//! trace's time ÷ the scale, its prompt exactly the trace's input length and its output the
//! trace's, the cached tokens the client reports are the engine's, and the ideal is what the
//! trace's blocks share; a session's turn waits for the answer before it; the capacity search on
//! the scale keeps its bracket consistent with the verdicts; bad input is refused with what to do.

use std::collections::HashMap;
use std::io::Write;
use std::path::Path;

use serde_json::{Value, json};
use sm_core::replay::MooncakeInput;
use sm_core::replay::prefix::shared_prefixes;

use crate::common::{SimSpec, interrupt, num as f, request_lines, run, sim, spawn_run, trace_lines, wait_for_record};

const BLOCK: u64 = 64;

fn u(v: &Value) -> u64 {
    v.as_u64().unwrap_or_else(|| panic!("not a count: {v}"))
}

fn write_trace(path: &Path, lines: &[Value]) {
    let mut file = std::fs::File::create(path).unwrap();
    for l in lines {
        writeln!(file, "{l}").unwrap();
    }
}

/// Twelve requests 120 ms apart: three families that share their first one or two blocks.
fn mooncake() -> Vec<MooncakeInput> {
    (0..12u64)
        .map(|i| {
            let family = i % 3;
            let mut ids = vec![1000 * family + 1];
            if i % 2 == 0 {
                ids.push(1000 * family + 2);
            }
            ids.extend([10 * i + 500, 10 * i + 501]);
            let input = ids.len() as u64 * BLOCK - (i * 7) % 40;
            MooncakeInput { input_tokens: input, hash_ids: ids, output_tokens: 8 + i % 3 * 4 }
        })
        .collect()
}

fn args<'a>(url: &'a str, trace: &'a str, extra: &[&'a str]) -> Vec<&'a str> {
    let mut a = vec!["--url", url, "--replay", trace, "--replay-block-tokens", "64", "--save-requests"];
    a.extend_from_slice(&["--ready-stable", "300ms", "--warmup", "0s"]);
    a.extend_from_slice(extra);
    a
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_mooncake_replay_agrees_with_the_engines_trace() {
    let dir = tempfile::tempdir().unwrap();
    let requests = mooncake();
    let lines: Vec<Value> = requests
        .iter()
        .enumerate()
        .map(|(i, m)| {
            json!({"timestamp": 5000 + i * 120, "input_length": m.input_tokens, "output_length": m.output_tokens, "hash_ids": m.hash_ids})
        })
        .collect();
    let trace = dir.path().join("mooncake.jsonl");
    write_trace(&trace, &lines);
    let sim = sim(SimSpec { trace_dir: Some(dir.path()), ..SimSpec::default() }).await;
    let url = sim.handle.url();
    let out = dir.path().join("out");
    let r = run(&out, &args(&url, trace.to_str().unwrap(), &["--time-scale", "1,2"])).await;
    assert_eq!(r.code, 0, "{}", r.stderr);
    sim.handle.shutdown().await;
    let p = &r.record()["phases"]["replay"];
    assert_eq!(p["settings"]["format"], "mooncake");
    assert_eq!(u(&p["settings"]["requests"]), 12);
    assert!((f(&p["settings"]["recorded_rps"]) - 12.0 / 1.32).abs() < 1e-9, "{}", p["settings"]);
    let kv = u(&p["settings"]["kv_block_tokens"]);
    assert_eq!(kv, sm_sim::Profile::resolve("tiny").unwrap().block_size);
    let engine: HashMap<String, Value> = trace_lines(&dir.path().join("trace.jsonl"))
        .into_iter()
        .map(|t| (format!("chatcmpl-{}", t["id"]), t))
        .collect();
    let ideal: Vec<u64> = shared_prefixes(&requests, BLOCK as u32)
        .iter()
        .zip(&requests)
        .map(|(s, m)| s.tokens.min(m.input_tokens - 1) / kv * kv)
        .collect();
    let all = request_lines(&out);
    let lines: Vec<&Value> = all.iter().filter(|l| l["phase"] == "replay").collect();
    assert_eq!(lines.len(), 24, "two levels of 12");
    let levels = p["levels"].as_array().unwrap();
    for (level, scale) in levels.iter().zip([1.0, 2.0]) {
        assert_eq!(f(&level["time_scale"]), scale);
        assert_eq!(level["status"], "measured", "{level}");
        let mine = &lines[if scale == 1.0 { 0..12 } else { 12..24 }];
        let t0 = f(&mine[0]["scheduled_s"]);
        let mut cached_sum = 0;
        for (i, (line, m)) in mine.iter().zip(&requests).enumerate() {
            // due at the trace's time ÷ the scale, from the level's start
            let due = f(&line["scheduled_s"]) - t0;
            assert!((due - i as f64 * 0.12 / scale).abs() < 2e-6, "request {i} due at {due} s, scale {scale}");
            let tr = &engine[line["request_id"].as_str().expect("the server's id")];
            assert_eq!(u(&tr["prompt_tokens"]), m.input_tokens, "request {i}: the trace's input, exact");
            assert_eq!(u(&line["prompt_tokens"]), m.input_tokens);
            assert_eq!(u(&tr["completion_tokens"]), m.output_tokens, "output_length as max_tokens, EOS ignored");
            assert_eq!(line["cached_tokens"], tr["cached_tokens"], "request {i}: the client reports the engine's hits");
            // the ideal bounds what a cache can reuse; this trace's requests arrive after the
            // prefill of those they share with, so the engine reaches it
            assert_eq!(u(&tr["cached_tokens"]), ideal[i], "request {i} of scale {scale}");
            cached_sum += u(&tr["cached_tokens"]);
        }
        let prefix = &level["prefix"];
        assert_eq!(u(&prefix["ideal_tokens"]), ideal.iter().sum::<u64>());
        assert_eq!(u(&prefix["cached_tokens"]), cached_sum);
        assert_eq!(f(&prefix["reached_pct"]), 100.0);
        assert_eq!(u(&prefix["prompt_tokens"]), requests.iter().map(|m| m.input_tokens).sum::<u64>());
    }
    assert!(ideal.iter().any(|&t| t > 0) && ideal.contains(&0), "{ideal:?}");
    let md = std::fs::read_to_string(out.join("report.md")).unwrap();
    assert!(md.contains("mooncake.jsonl"), "the report names the trace");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sessions_turn_waits_for_the_answer_before_it() {
    let dir = tempfile::tempdir().unwrap();
    // turns 20 ms apart in the trace: shorter than an answer, so each waits for the one before
    let mut lines = Vec::new();
    for turn in 0..3 {
        for user in ["a", "b"] {
            let at = f64::from(turn) * 0.02 + if user == "b" { 0.005 } else { 0.0 };
            let messages = json!([{"role": "user", "content": format!("user {user} turn {turn}: tell me more")}]);
            lines.push(json!({"timestamp": at, "messages": messages, "max_tokens": 16, "session_id": user}));
        }
    }
    lines.push(json!({"timestamp": 0.07, "prompt": "a lone request", "max_tokens": 8}));
    let trace = dir.path().join("chat.jsonl");
    write_trace(&trace, &lines);
    let sim = sim(SimSpec::default()).await;
    let url = sim.handle.url();
    let out = dir.path().join("out");
    let r = run(&out, &args(&url, trace.to_str().unwrap(), &[])).await;
    assert_eq!(r.code, 0, "{}", r.stderr);
    sim.handle.shutdown().await;
    let p = &r.record()["phases"]["replay"];
    assert_eq!(p["settings"]["format"], "messages");
    assert!(p["levels"][0]["prefix"].get("ideal_tokens").is_none(), "a messages trace has no ideal");
    let all = request_lines(&out);
    let lines: Vec<&Value> = all.iter().filter(|l| l["phase"] == "replay").collect();
    assert_eq!(lines.len(), 7);
    assert!(lines.iter().all(|l| l["status"] == "completed"), "{lines:?}");
    for user in 0..2 {
        for turn in 1..3 {
            let (before, this) = (lines[(turn - 1) * 2 + user], lines[turn * 2 + user]);
            let ended = f(&before["ended_s"]);
            assert!(f(&this["sent_s"]) >= ended, "turn {turn} of user {user} was sent before the answer it follows");
            // its due time is when its user could send it: after the answer, not the trace's time
            assert!(f(&this["scheduled_s"]) >= ended - 1e-6, "{this}");
        }
    }
    assert_eq!(lines[6]["output_tokens"].as_f64().map(|t| t <= 8.0), Some(true));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_capacity_search_brackets_the_scale_the_verdicts_allow() {
    let dir = tempfile::tempdir().unwrap();
    let lines: Vec<Value> = (0..10)
        .map(
            |i| json!({"timestamp": i * 200, "input_length": 100, "output_length": 16, "hash_ids": [i * 2, i * 2 + 1]}),
        )
        .collect();
    let trace = dir.path().join("t.jsonl");
    write_trace(&trace, &lines);
    let sim = sim(SimSpec::default()).await;
    let url = sim.handle.url();
    let out = dir.path().join("out");
    let extra = ["--find-capacity", "--slo", "tok_s_p10>=1,ttft_p90<=30s", "--time-scale", "4"];
    let r = run(&out, &args(&url, trace.to_str().unwrap(), &extra)).await;
    assert_eq!(r.code, 0, "{}", r.stderr);
    sim.handle.shutdown().await;
    let p = &r.record()["phases"]["replay"];
    let levels = p["levels"].as_array().unwrap();
    assert_eq!(f(&levels[0]["time_scale"]), 4.0, "the search starts at the first scale asked");
    assert_eq!(levels[0]["searched"], false);
    assert!(levels[1..].iter().all(|l| l["searched"] == true));
    let verdict = |scale: f64| {
        let l = levels.iter().find(|l| f(&l["time_scale"]) == scale).unwrap();
        l["verdict"]["met"].as_bool().unwrap()
    };
    let c = &p["capacity"];
    assert!(!c.is_null(), "{p}");
    let max = c["max_scale"].as_f64();
    let failed = c["failed_scale"].as_f64();
    if let Some(m) = max {
        assert!(verdict(m), "the answer's scale met the SLO");
        assert!((f(&c["max_rps"]) - m * f(&p["settings"]["recorded_rps"])).abs() < 1e-9);
    }
    if let Some(x) = failed {
        assert!(!verdict(x) && c["limited_by"].is_string(), "{c}");
    }
    match (max, failed) {
        (Some(m), Some(x)) => assert!(x / m <= 1.05 + 1e-9 && c["converged"] == true, "{c}"),
        (Some(m), None) => assert_eq!(m, 64.0, "met up to the search's ceiling"),
        (None, _) => panic!("an SLO this loose is met at some scale: {c}"),
    }
    let md = std::fs::read_to_string(out.join("report.md")).unwrap();
    assert!(md.contains("recorded rate"), "the answer heads the report");
}

#[test]
fn bad_replay_input_is_refused_with_what_to_do() {
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("bad.jsonl");
    std::fs::write(&trace, "{\"timestamp\": 0, \"prompt\": \"hi\"}\n{\"timestamp\": 1}\n").unwrap();
    let t = trace.to_str().unwrap();
    let cases: [(&[&str], &str); 5] = [
        (&["--replay", t], "line 2"),
        (&["--replay", "/nonexistent/trace.jsonl"], "cannot open"),
        (&["--replay", t, "--time-scale", "0"], "not a time scale"),
        (&["--time-scale", "2"], "go with --replay"),
        (&["--replay", t, "--replay-format", "csv"], "mooncake|messages"),
    ];
    for (flags, says) in cases {
        let out = dir.path().join("out");
        let o = crate::common::bin().arg("run").args(flags).arg("--out").arg(&out).output().unwrap();
        let stderr = String::from_utf8_lossy(&o.stderr);
        assert_ne!(o.status.code(), Some(0), "{flags:?}");
        assert!(stderr.contains(says), "{flags:?}: {stderr}");
        assert_eq!(stderr.matches(says).count(), 1, "said once: {stderr}");
        assert!(!out.join("run.json").exists(), "{flags:?}: refused before anything is written");
    }
}

/// A server whose answer is known: four sequences at most, every request 40 tokens of 10 ms steps
/// (about 0.42 s with its first token), a request every 200 ms of the trace. It keeps up up to the
/// scale where four requests' service matches the arrivals: 4 × 0.2 / 0.42 ≈ 1.9. Above it each
/// arrival waits 0.105 − 0.2 / s s longer than the one before, and the 22nd of 24 (the p90) waits
/// past TTFT p90 ≤ 300 ms once 22 × (0.105 − 0.2 / s) > 0.28: at s ≈ 2.17. The answer lies between.
const FOUR_SEQS: &str = r#"
name = "four-seqs"
model = "four-seqs"
max_model_len = 8192
kv_cache_tokens = 1048576
block_size = 16
max_num_seqs = 4
max_num_batched_tokens = 65536
natural_output_tokens = 256

[prefill]
contexts = [1024, 8192]
tokens_per_s = [100000000, 100000000]

[decode]
batch = [1, 16]
contexts = [1024, 8192]
step_ms = [
  [10.0, 10.0],
  [10.0, 10.0],
]

[overhead]
cached_prefill_ms = 20
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_capacity_search_finds_the_knee_of_a_server_whose_answer_is_known() {
    let dir = tempfile::tempdir().unwrap();
    let profile = dir.path().join("four.toml");
    std::fs::write(&profile, FOUR_SEQS).unwrap();
    let lines: Vec<Value> = (0..24)
        .map(
            |i| json!({"timestamp": i * 200, "input_length": 100, "output_length": 40, "hash_ids": [2 * i, 2 * i + 1]}),
        )
        .collect();
    let trace = dir.path().join("t.jsonl");
    write_trace(&trace, &lines);
    let sim = sim(SimSpec { profile: profile.to_str().unwrap(), ..SimSpec::default() }).await;
    let url = sim.handle.url();
    let out = dir.path().join("out");
    let extra = ["--find-capacity", "--slo", "tok_s_p10>=1,ttft_p90<=300ms"];
    let r = run(&out, &args(&url, trace.to_str().unwrap(), &extra)).await;
    assert_eq!(r.code, 0, "{}", r.stderr);
    sim.handle.shutdown().await;
    let c = &r.record()["phases"]["replay"]["capacity"];
    let (knee, bound) = (4.0 * 0.2 / 0.42, 0.2 / (0.105 - 0.28 / 22.0));
    let (max, failed) = (f(&c["max_scale"]), f(&c["failed_scale"]));
    // the search's ±5 %, and the sim's step boundaries around each figure
    assert!(max >= knee * 0.95 && max <= bound * 1.1, "the answer {max}× is not in {knee:.2}–{bound:.2}×: {c}");
    assert!(failed / max <= 1.05 + 1e-9 && c["converged"] == true, "{c}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replay_stopped_after_a_scale_goes_on_from_the_next_on_resume() {
    let dir = tempfile::tempdir().unwrap();
    let lines: Vec<Value> = (0..20)
        .map(|i| json!({"timestamp": i * 150, "input_length": 100, "output_length": 8, "hash_ids": [2 * i, 2 * i + 1]}))
        .collect();
    let trace = dir.path().join("t.jsonl");
    write_trace(&trace, &lines);
    let sim = sim(SimSpec::default()).await;
    let url = sim.handle.url();
    let out = dir.path().join("out");
    let t = trace.to_str().unwrap();
    let child = spawn_run(&out, &args(&url, t, &["--time-scale", "2,1,0.5"]));
    let levels = |v: &Value| v["phases"]["replay"]["levels"].as_array().map_or(0, Vec::len);
    let first = wait_for_record(&out, "a finished scale", |v| levels(v) >= 1).await;
    let stopped = interrupt(child, &out, std::time::Duration::from_millis(300)).await;
    assert_eq!(stopped.code, 130, "{}", stopped.stderr);
    let kept = stopped.record()["phases"]["replay"]["levels"][0].clone();
    assert_eq!(kept, first["phases"]["replay"]["levels"][0]);

    // without the trace, the resume says what to give
    let o = run(&out, &["--resume", out.to_str().unwrap()]).await;
    assert_ne!(o.code, 0);
    assert!(o.stderr.contains("give --replay with that file"), "{}", o.stderr);
    // with it, the scales come from the record and the finished one is kept
    let resumed = run(&out, &["--resume", out.to_str().unwrap(), "--replay", t]).await;
    sim.handle.shutdown().await;
    assert_eq!(resumed.code, 0, "{}", resumed.stderr);
    let p = &resumed.record()["phases"]["replay"];
    let scales: Vec<f64> = p["levels"].as_array().unwrap().iter().map(|l| f(&l["time_scale"])).collect();
    assert_eq!(scales, [2.0, 1.0, 0.5], "{p}");
    assert_eq!(p["levels"][0], kept, "the finished scale is kept as measured");
    assert_eq!(p["settings"]["time_scales"], json!([2.0, 1.0, 0.5]));
    // another file is refused
    std::fs::write(&trace, "{\"timestamp\": 0, \"prompt\": \"other\"}\n").unwrap();
    let o = run(&out, &["--resume", out.to_str().unwrap(), "--replay", t]).await;
    assert!(o.code != 0 && o.stderr.contains("give the same file"), "{}", o.stderr);
}
