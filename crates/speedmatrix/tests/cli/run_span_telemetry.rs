//! Telemetry through a prefill row and a rate level (methodology §14), against the simulated
//! engine's truth: its `[gpu]` draws `idle_w + per_sequence_w × running` (no cap here) and
//! integrates that into its energy counter, and its `/metrics` counts every prompt and generated
//! token. A span's sampler reads from before its first request to after its last, so the
//! server's counters over the span are exactly its requests' tokens, and its energy is the idle
//! power over the span plus each request's running time at the per-sequence power.

use std::collections::HashMap;

use serde_json::Value;

use crate::common::{QUICK, SimSpec, num, request_lines, run, sim, trace_lines};

const IDLE_W: f64 = 100.0;
const PER_SEQUENCE_W: f64 = 60.0;

/// tiny, with a GPU and a prefill slow enough (4K tok/s: 1K tokens take 0.25 s) that the row's
/// energy shows its request.
fn profile(dir: &std::path::Path) -> String {
    let tiny = include_str!("../../../sm-sim/profiles/tiny.toml").replace("[400000, 400000]", "[4000, 4000]");
    assert!(tiny.contains("[4000, 4000]"), "the tiny profile's prefill rates moved");
    let gpu =
        format!("\n[gpu]\nname = \"Sim GPU\"\nidle_w = {IDLE_W}\nper_sequence_w = {PER_SEQUENCE_W}\ntdp_w = 5000\n");
    let path = dir.join("gpu.toml");
    std::fs::write(&path, tiny + &gpu).unwrap();
    path.to_str().unwrap().to_string()
}

/// The trace lines of the saved requests of `phase`, by the server's id.
fn traced<'a>(lines: &[Value], trace: &'a HashMap<String, Value>, phase: &str) -> Vec<&'a Value> {
    let mine = lines.iter().filter(|l| l["phase"] == phase);
    mine.map(|l| &trace[l["request_id"].as_str().expect("the server's id")]).collect()
}

/// The server's token counters over a span are exactly the tokens of the requests it held.
fn assert_server_counted(m: &Value, requests: &[&Value]) {
    let sum = |key: &str| requests.iter().map(|t| num(&t[key])).sum::<f64>();
    assert_eq!(num(&m["generation_tokens"]), sum("completion_tokens"), "{m}");
    assert_eq!(num(&m["prompt_tokens"]), sum("prompt_tokens"), "{m}");
}

/// The engine's truth for a span's `energy_j`: its mean power over the GPU's sampled span of
/// `sampled_s` (every request inside it) times the span's `span_s` (methodology §14.3). The
/// sampled span runs from the first read to the last, so it is longer than the span by the reads'
/// latency, which a busy client stretches: its idle tail dilutes the mean. Set against the energy
/// over `span_s` alone, the figure moved with the machine's load (a sessions phase was once 5 %
/// under it); set against its own definition it does not. The scrapes of `/metrics` are taken
/// beside the GPU's reads, first and last at once, so their span is the sampled span.
fn energy_truth(requests: &[&Value], span_s: f64, sampled_s: f64) -> f64 {
    let running: f64 = requests.iter().map(|t| num(&t["end"]) - num(&t["admitted"])).sum();
    (IDLE_W + PER_SEQUENCE_W * running / sampled_s) * span_s
}

/// A run of `args` against a fresh sim with [`profile`]'s GPU, sampled every 100 ms, with its
/// requests saved: the run, its directory, and the sim's trace by the server's id.
struct Traced {
    r: crate::common::RunResult,
    out: std::path::PathBuf,
    trace: HashMap<String, Value>,
    lines: Vec<Value>,
    _dir: tempfile::TempDir,
}

async fn traced_run(args: &[&str]) -> Traced {
    let dir = tempfile::tempdir().unwrap();
    let profile = profile(dir.path());
    let sim = sim(SimSpec { profile: &profile, trace_dir: Some(dir.path()), ..SimSpec::default() }).await;
    let url = sim.handle.url();
    let dcgm = format!("{url}/dcgm/metrics");
    let mut all = vec!["--url", url.as_str(), "--metrics-interval", "100ms", "--gpu-metrics", &dcgm];
    all.extend_from_slice(&["--save-requests"]);
    all.extend_from_slice(args);
    all.extend_from_slice(QUICK);
    let out = dir.path().join("out");
    let r = run(&out, &all).await;
    sim.handle.shutdown().await;
    assert_eq!(r.code, 0, "stdout:\n{}\nstderr:\n{}", r.stdout, r.stderr);
    let trace: HashMap<String, Value> = trace_lines(&dir.path().join("trace.jsonl"))
        .into_iter()
        .map(|t| (format!("chatcmpl-{}", t["id"]), t))
        .collect();
    let lines = request_lines(&out);
    Traced { r, out, trace, lines, _dir: dir }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_prefill_row_and_a_rate_level_carry_the_servers_counts_and_the_gpus_energy() {
    let mut args = vec!["--contexts", "1k", "--concurrency", "1", "--duration", "1s"];
    args.extend_from_slice(&["--matrix", "--request-rate", "4", "--arrival", "constant", "--requests", "6"]);
    args.extend_from_slice(&["--max-tokens", "64"]);
    let Traced { r, out, trace, lines, .. } = &traced_run(&args).await;

    // the prefill row: one request, its prompt counted by the server, its energy the engine's
    let row = &r.record()["prefill"][0];
    assert_eq!(row["status"], "valid", "{row}");
    let [request] = traced(lines, trace, "prefill")[..] else { panic!("one prefill request") };
    let m = &row["server_metrics"];
    assert_eq!(num(&m["prompt_tokens"]), num(&request["prompt_tokens"]), "{m}");
    assert_eq!(num(&m["generation_tokens"]), num(&request["completion_tokens"]), "{m}");
    assert!(m["series"].as_array().unwrap().iter().any(|p| num(&p["running"]) == 1.0), "mid-prefill scrapes: {m}");
    let g = &row["gpu"];
    assert_eq!((&g["source"], &g["energy_from"]), (&Value::from("dcgm"), &Value::from("counter")), "{g}");
    assert!(g.get("joules_per_token").is_none(), "a prefill row's energy is not per output token: {g}");
    // the span is the request's time at the engine and the loopback trips around it
    let engine_s = num(&request["end"]) - num(&request["arrival"]);
    let (energy, truth) = (num(&g["energy_j"]), energy_truth(&[request], engine_s, engine_s));
    assert!((energy - truth).abs() < 0.05 * truth + 2.0, "prefill row: {energy} J, the engine's {truth} J: {g}");

    // the rate level: every request's tokens inside the span, its energy over the span
    let level = &r.record()["phases"]["rate"]["levels"][0];
    assert_eq!(level["status"], "measured", "{level}");
    let requests = traced(lines, trace, "rate");
    assert_eq!(requests.len(), 6);
    let m = &level["server_metrics"];
    assert_server_counted(m, &requests);
    assert!(num(&m["tok_s_diff_pct"]).abs() < 10.0, "the server's tok/s against the level's: {m}");
    let g = &level["gpu"];
    let span = num(&level["span_s"]);
    let (energy, truth) = (num(&g["energy_j"]), energy_truth(&requests, span, num(&m["span_s"])));
    assert!((energy - truth).abs() < 0.04 * truth, "rate level: {energy} J, the engine's {truth} J over {span} s");
    let tokens = num(&level["output_tok_s"]) * span;
    assert!((num(&g["joules_per_token"]) - energy / tokens).abs() < 1e-3 * energy / tokens, "{g}");

    // the reports show both spans
    let md = std::fs::read_to_string(out.join("report.md")).unwrap();
    let section = &md[md.find("## Telemetry of the prefill rows and the load phases").expect("the section")..];
    assert!(section.contains("- prefill 1K: GPU: ") && section.contains("- 4 req/s at 1K: GPU: "), "{section}");
    let html = std::fs::read_to_string(out.join("report.html")).unwrap();
    assert!(html.contains("id=\"span-telemetry\"") && html.contains("<details><summary>4 req/s at 1K: server "));
    let csv = std::fs::read_to_string(out.join("rate.csv")).unwrap();
    assert!(csv.lines().next().unwrap().ends_with("server_kv_usage_max,server_preemptions"), "{csv}");
    let measurements = std::fs::read_to_string(out.join("measurements.csv")).unwrap();
    let header: Vec<&str> = measurements.lines().next().unwrap().split(',').collect();
    let col = header.iter().position(|h| *h == "gpu_energy_j").unwrap();
    let prefill = measurements.lines().find(|l| l.starts_with("Prefill")).expect("the prefill line");
    assert_eq!(prefill.split(',').nth(col).map(|v| v.parse::<f64>().unwrap()), Some(num(&row["gpu"]["energy_j"])));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_burst_carries_the_servers_counts_and_the_gpus_energy() {
    let mut args = vec!["--contexts", "1k", "--concurrency", "4", "--burst"];
    args.extend_from_slice(&["--max-tokens", "300"]);
    let Traced { r, out, trace, lines, .. } = &traced_run(&args).await;

    // the burst: its four requests' tokens counted by the server, its energy the engine's
    let burst = &r.record()["phases"]["burst"]["bursts"][0];
    assert_eq!(burst["status"], "valid", "{burst}");
    let requests = traced(lines, trace, "burst");
    assert_eq!(requests.len(), 4);
    let m = &burst["server_metrics"];
    assert_server_counted(m, &requests);
    assert!(num(&m["tok_s_diff_pct"]).abs() < 10.0, "the server's tok/s against the burst's: {m}");
    let g = &burst["gpu"];
    assert_eq!(g["source"], "dcgm", "{g}");
    let span = num(&burst["last_completion_ms"]) / 1000.0;
    let (energy, truth) = (num(&g["energy_j"]), energy_truth(&requests, span, num(&m["span_s"])));
    assert!((energy - truth).abs() < 0.05 * truth, "burst: {energy} J, the engine's {truth} J over {span} s");
    let tokens = num(&burst["output_tokens"]);
    assert!((num(&g["joules_per_token"]) - energy / tokens).abs() < 1e-3 * energy / tokens, "{g}");

    // the reports show it
    let md = std::fs::read_to_string(out.join("report.md")).unwrap();
    let section = &md[md.find("## Telemetry of the prefill rows and the load phases").expect("the section")..];
    assert!(section.contains("- burst 1K × 4 round 1: GPU: "), "{section}");
    let csv = std::fs::read_to_string(out.join("burst.csv")).unwrap();
    let header: Vec<&str> = csv.lines().next().unwrap().split(',').collect();
    let col = header.iter().position(|h| *h == "gpu_energy_j").expect("burst.csv's gpu_energy_j");
    let row = csv.lines().nth(1).unwrap();
    assert_eq!(row.split(',').nth(col).map(|v| v.parse::<f64>().unwrap()), Some(energy), "{csv}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_mixed_prefill_level_carries_the_servers_counts_and_the_gpus_energy() {
    let mut args = vec!["--contexts", "1k", "--concurrency", "1", "--mixed-prefill", "2k@2"];
    args.extend_from_slice(&["--mixed-prefill-probes", "1", "--mixed-prefill-window", "300ms", "--max-tokens", "4000"]);
    let Traced { r, out, trace, lines, .. } = &traced_run(&args).await;

    // the level's span holds the background streams and the probe, not the idle reference before it
    let level = &r.record()["phases"]["mixed_prefill"]["levels"][0];
    assert!(level["error"].is_null(), "{level}");
    let mut requests = traced(lines, trace, "mixed_prefill");
    requests.sort_by(|a, b| num(&a["arrival"]).total_cmp(&num(&b["arrival"])));
    let idle = requests.iter().position(|t| num(&t["prompt_tokens"]) == 2048.0).expect("the idle reference");
    requests.remove(idle);
    assert_eq!(requests.iter().filter(|t| num(&t["prompt_tokens"]) == 2048.0).count(), 1, "one probe");
    let m = &level["server_metrics"];
    assert_server_counted(m, &requests);
    let g = &level["gpu"];
    assert_eq!(g["source"], "dcgm", "{g}");
    assert!(g.get("joules_per_token").is_none(), "a level's energy mixes decode and prefill: {g}");
    let span = num(&m["span_s"]);
    let (energy, truth) = (num(&g["energy_j"]), energy_truth(&requests, span, span));
    assert!((energy - truth).abs() < 0.05 * truth, "mixed level: {energy} J, the engine's {truth} J over {span} s");

    let md = std::fs::read_to_string(out.join("report.md")).unwrap();
    assert!(md.contains("- mixed prefill 2K@2: GPU: "), "{md}");
    let csv = std::fs::read_to_string(out.join("mixed_prefill.csv")).unwrap();
    assert!(csv.lines().next().unwrap().ends_with("server_kv_usage_max,server_preemptions"), "{csv}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_sessions_phase_carries_the_servers_counts_and_the_gpus_energy() {
    let mut args = vec!["--contexts", "1k", "--concurrency", "1", "--max-tokens", "200"];
    args.extend_from_slice(&["--sessions", "2", "--turns", "2", "--think-time", "100ms", "--turn-tokens", "32"]);
    let Traced { r, out, trace, lines, .. } = &traced_run(&args).await;

    // the whole phase is the span: every turn's tokens, the energy over the summary's span
    let phase = &r.record()["phases"]["sessions"];
    let requests = traced(lines, trace, "sessions");
    assert_eq!(requests.len(), 4, "2 users × 2 turns");
    let m = &phase["server_metrics"];
    assert_server_counted(m, &requests);
    let g = &phase["gpu"];
    assert_eq!(g["source"], "dcgm", "{g}");
    let span = num(&phase["summary"]["span_s"]);
    let (energy, truth) = (num(&g["energy_j"]), energy_truth(&requests, span, num(&m["span_s"])));
    assert!((energy - truth).abs() < 0.05 * truth, "sessions: {energy} J, the engine's {truth} J over {span} s");
    let tokens = num(&phase["summary"]["output_tokens"]);
    assert!((num(&g["joules_per_token"]) - energy / tokens).abs() < 1e-3 * energy / tokens, "{g}");
    let md = std::fs::read_to_string(out.join("report.md")).unwrap();
    assert!(md.contains("- sessions: GPU: "), "{md}");
}
