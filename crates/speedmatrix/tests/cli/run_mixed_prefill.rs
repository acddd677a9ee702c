//! `--mixed-prefill CTX@BG` against the simulated engine (methodology §13.3): the fresh prompt's
//! idle and loaded TTFT, the background's tok/s before / during / after its prefill and the
//! longest stall, each compared with the engine's trace; a resume keeps the finished probes; bad
//! flags say what to give.
//!
//! The profile prefills slowly (50K tok/s, 2,048-token chunks) so that a 12K prompt takes six or
//! seven steps of ~43 ms, during which the background decodes one token per stream per step
//! instead of one per ~2.2 ms: chunked prefill as a real engine does it.

use std::path::Path;

use serde_json::Value;

use crate::common::{QUICK, SimSpec, num as f, run, sim, trace_lines};

const PROFILE: &str = r#"name = "slow-prefill"
model = "tiny"
max_model_len = 16384
kv_cache_tokens = 131072
block_size = 16
max_num_seqs = 64
max_num_batched_tokens = 2048
natural_output_tokens = 256

[prefill]
contexts = [1024, 16384]
tokens_per_s = [50000, 50000]

[decode]
batch = [1, 2, 4, 8]
contexts = [1024, 16384]
step_ms = [[2.0, 2.2], [2.1, 2.3], [2.2, 2.45], [2.4, 2.7]]

[overhead]
cached_prefill_ms = 2
"#;

const WINDOW_S: f64 = 0.5;
const BG: u64 = 4;

/// The trace's background requests (the 1K prompt) as `[(time, tokens)]` each.
fn background(trace: &[Value]) -> Vec<Vec<(f64, f64)>> {
    trace
        .iter()
        .filter(|t| t["prompt_tokens"] == 1024 && t["completion_tokens"].as_u64() > Some(1))
        .map(|t| t["emissions"].as_array().unwrap().iter().map(|e| (f(&e[0]), f(&e[1]))).collect())
        .collect()
}

fn tokens_in(bg: &[Vec<(f64, f64)>], from: f64, to: f64) -> f64 {
    bg.iter().flatten().filter(|(t, _)| *t >= from && *t < to).map(|(_, n)| n).sum()
}

fn longest_stall(bg: &[Vec<(f64, f64)>], from: f64, to: f64) -> f64 {
    bg.iter()
        .flat_map(|r| r.windows(2))
        .filter(|w| w[1].0 > from && w[0].0 < to)
        .map(|w| w[1].0 - w[0].0)
        .fold(0.0, f64::max)
}

pub(crate) fn write_profile(dir: &Path) -> String {
    let path = dir.join("slow-prefill.toml");
    std::fs::write(&path, PROFILE).unwrap();
    path.to_str().unwrap().to_string()
}

fn args<'a>(url: &'a str, probes: &'a str) -> Vec<&'a str> {
    let mut a = vec!["--url", url, "--contexts", "1k", "--concurrency", "1", "--mixed-prefill", "12k@4"];
    a.extend_from_slice(&["--mixed-prefill-probes", probes, "--mixed-prefill-window", "500ms", "--max-tokens", "3000"]);
    a.extend_from_slice(&["--save-requests"]);
    a.extend_from_slice(QUICK);
    a
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_probes_figures_agree_with_the_trace() {
    let dir = tempfile::tempdir().unwrap();
    let profile = write_profile(dir.path());
    let sim = sim(SimSpec { profile: &profile, trace_dir: Some(dir.path()), ..SimSpec::default() }).await;
    let url = sim.handle.url();
    let out = dir.path().join("out");
    let r = run(&out, &args(&url, "2")).await;
    assert_eq!(r.code, 0, "{}", r.stderr);
    sim.handle.shutdown().await;
    let record = r.record();
    assert!(record["decode"].as_array().unwrap().is_empty(), "a phase alone measures no matrix");
    let level = &record["phases"]["mixed_prefill"]["levels"][0];
    assert_eq!((level["prompt_context"].as_u64(), level["background"].as_u64()), (Some(12288), Some(BG)));
    assert_eq!(level["background_context"], 1024);
    let probes = level["probes"].as_array().unwrap();
    assert_eq!(probes.len(), 2, "{level}");

    let trace = trace_lines(&dir.path().join("trace.jsonl"));
    let mut fresh: Vec<&Value> = trace.iter().filter(|t| t["prompt_tokens"] == 12288).collect();
    fresh.sort_by(|a, b| f(&a["arrival"]).total_cmp(&f(&b["arrival"])));
    assert_eq!(fresh.len(), 3, "the idle reference and two probes, each its own fresh prompt");
    for t in &fresh {
        assert!(t["cached_tokens"].as_u64().unwrap() <= 64, "a fresh prompt was served from the cache: {t}");
    }
    let ttft_truth = |t: &Value| (f(&t["first_token"]) - f(&t["arrival"])) * 1000.0;
    // the client's TTFT includes the loopback trip the engine does not see
    let close = |measured: f64, truth: f64, what: &str| {
        assert!(
            measured >= truth - 2.0 && measured <= truth + 50.0,
            "{what}: measured {measured} ms, the trace {truth} ms"
        )
    };
    let idle = f(&level["idle"]["ttft_ms"]);
    close(idle, ttft_truth(fresh[0]), "idle TTFT");
    assert_eq!(level["idle"]["source"], "measured");

    let bg = background(&trace);
    assert!(bg.len() >= BG as usize, "{} background requests in the trace", bg.len());
    for (p, t) in probes.iter().zip(&fresh[1..]) {
        assert!(p["error"].is_null(), "{p}");
        let ttft = f(&p["ttft_ms"]);
        close(ttft, ttft_truth(t), "probe TTFT");
        assert_eq!(p["cached_tokens"], t["cached_tokens"]);
        assert!((f(&p["slowdown"]) - ttft / idle).abs() < 0.01, "{p}");
        // the client's send on the engine's clock: its TTFT before the engine's first token (the
        // engine stamps arrival only once it has read and tokenized the prompt, and the background
        // decodes meanwhile); both first tokens reach the client by the same path
        let first = f(&t["first_token"]);
        let a = first - ttft / 1000.0;
        let before = tokens_in(&bg, a - WINDOW_S, a) / WINDOW_S;
        let during_s = first - a;
        let during = tokens_in(&bg, a, first) / during_s;
        let after = tokens_in(&bg, first, first + WINDOW_S) / WINDOW_S;
        // the engine itself: decode slows while the prompt is prefilled in chunks
        assert!(during < before / 3.0, "the trace: {during} tok/s during the prefill, {before} before");
        // one step's tokens of every stream may fall either side of an interval's edge
        let edge = |secs: f64| 2.0 * BG as f64 / secs;
        let agree = |measured: f64, truth: f64, secs: f64, what: &str| {
            assert!(
                (measured - truth).abs() <= edge(secs) + 0.1 * truth,
                "{what}: measured {measured} tok/s, the trace {truth}"
            )
        };
        agree(f(&p["before_tok_s"]), before, WINDOW_S, "before");
        agree(f(&p["during_tok_s"]), during, during_s, "during");
        agree(f(&p["after_tok_s"]), after, WINDOW_S, "after");
        let stall = longest_stall(&bg, a, first) * 1000.0;
        let measured = f(&p["longest_stall_ms"]);
        assert!(
            (measured - stall).abs() <= 10.0 + 0.1 * stall,
            "longest stall: measured {measured} ms, the trace {stall} ms"
        );
        let tl = &p["timeline"];
        assert_eq!(f(&tl["bin_ms"]), 100.0);
        assert!((f(&tl["start_s"]) + WINDOW_S).abs() < 1e-6, "{tl}");
        assert!((f(&tl["first_token_s"]) * 1000.0 - ttft).abs() < 0.01, "{tl}");
        let binned: f64 = tl["tokens"].as_array().unwrap().iter().map(f).sum();
        let bins = tl["tokens"].as_array().unwrap().len() as f64;
        assert!(bins * 0.1 >= during_s + 2.0 * WINDOW_S - 0.01 && bins * 0.1 < during_s + 2.0 * WINDOW_S + 0.11);
        let truth = tokens_in(&bg, a - WINDOW_S, a - WINDOW_S + bins * 0.1);
        assert!(
            (binned - truth).abs() <= 4.0 * BG as f64 + 0.02 * truth,
            "timeline holds {binned} tokens, the trace {truth}"
        );
    }
    let events: Vec<&str> = record["events"].as_array().unwrap().iter().map(|e| e["text"].as_str().unwrap()).collect();
    for n in 1..=2 {
        let said = format!("mixed prefill 12K@4 probe {n}: TTFT ");
        assert!(events.iter().any(|e| e.starts_with(&said) && e.contains("× idle")), "{said}… in {events:?}");
    }
    let median = f(&level["ttft_ms_median"]);
    let ttfts: Vec<f64> = probes.iter().map(|p| f(&p["ttft_ms"])).collect();
    assert!((median - (ttfts[0] + ttfts[1]) / 2.0).abs() < 0.01);

    let lines: Vec<Value> = std::fs::read_to_string(out.join("requests.jsonl"))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let fresh_lines = lines.iter().filter(|l| l["phase"] == "mixed_prefill" && l["context"] == 12288).count();
    assert_eq!(fresh_lines, 3, "a line per fresh prompt");
    assert!(lines.iter().filter(|l| l["phase"] == "mixed_prefill" && l["context"] == 1024).count() >= BG as usize);
    let csv = std::fs::read_to_string(out.join("mixed_prefill.csv")).expect("mixed_prefill.csv");
    assert_eq!(csv.lines().count(), 3, "a header and a row per probe");
    let page = std::fs::read_to_string(out.join("report.html")).unwrap();
    assert!(
        page.contains("id=\"mixed-prefill\"") && page.contains("<svg"),
        "the page has the section and its timeline"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_resume_keeps_the_finished_probes_and_measures_the_rest() {
    let dir = tempfile::tempdir().unwrap();
    let profile = write_profile(dir.path());
    let sim = sim(SimSpec { profile: &profile, ..SimSpec::default() }).await;
    let url = sim.handle.url();
    let out = dir.path().join("out");
    let first = run(&out, &args(&url, "2")).await;
    assert_eq!(first.code, 0, "{}", first.stderr);
    // as a run stopped after its first probe leaves it
    let mut record = first.record().clone();
    let kept = record["phases"]["mixed_prefill"]["levels"][0]["probes"][0].clone();
    record["phases"]["mixed_prefill"]["levels"][0]["probes"].as_array_mut().unwrap().truncate(1);
    record["status"] = "interrupted".into();
    std::fs::write(out.join("run.json"), serde_json::to_string_pretty(&record).unwrap()).unwrap();
    let resumed = run(&out, &["--resume", out.to_str().unwrap()]).await;
    assert_eq!(resumed.code, 0, "{}", resumed.stderr);
    sim.handle.shutdown().await;
    let level = &resumed.record()["phases"]["mixed_prefill"]["levels"][0];
    let probes = level["probes"].as_array().unwrap();
    assert_eq!(probes.len(), 2, "{level}");
    assert_eq!(probes[0], kept, "the finished probe is kept as it was");
    assert!(f(&probes[1]["sent_s"]) > f(&kept["sent_s"]), "the second probe was measured in the resumed session");
    assert!(probes[1]["error"].is_null(), "a fresh prompt of its own, not a cached one: {}", probes[1]);
    assert_eq!(level["idle"], first.record()["phases"]["mixed_prefill"]["levels"][0]["idle"]);
}

#[test]
fn bad_mixed_prefill_flags_say_what_to_give() {
    for (value, says) in [("64k", "has no @"), ("x@8", "not a token count"), ("8k@0", "too small")] {
        let out = crate::common::bin().args(["run", "--mixed-prefill", value]).output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{value}: {err}");
        assert!(err.contains("--mixed-prefill") && err.contains(says) && err.contains("e.g."), "{value}: {err}");
    }
    let out = crate::common::bin().args(["run", "--mixed-prefill-probes", "2", "--dry-run"]).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("go with --mixed-prefill CTX@BG"), "{err}");
}

/// Ctrl-C after the first probe: the run is interrupted with every finished probe kept (none half
/// measured) and the reports written; a resume measures the probes left, keeping the others.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ctrl_c_keeps_the_finished_probes_and_a_resume_finishes_the_level() {
    let dir = tempfile::tempdir().unwrap();
    let profile = write_profile(dir.path());
    let sim = sim(SimSpec { profile: &profile, ..SimSpec::default() }).await;
    let url = sim.handle.url();
    let out = dir.path().join("out");
    let child = crate::common::bin()
        .arg("run")
        .args(args(&url, "4"))
        .args(["--progress", "plain", "--out", out.to_str().unwrap()])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let probes_in = |v: &Value| v["phases"]["mixed_prefill"]["levels"][0]["probes"].as_array().map_or(0, Vec::len);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    loop {
        let record = std::fs::read_to_string(out.join("run.json")).ok().and_then(|s| serde_json::from_str(&s).ok());
        if record.is_some_and(|v: Value| probes_in(&v) >= 1) {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "no probe finished within 60 s");
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    let pid = child.id().to_string();
    assert!(std::process::Command::new("kill").args(["-INT", &pid]).status().unwrap().success());
    let output = tokio::task::spawn_blocking(move || child.wait_with_output().unwrap()).await.unwrap();
    let stopped = crate::common::result(&out, output);
    assert_eq!(stopped.code, 130, "{}\n{}", stopped.stdout, stopped.stderr);
    let record = stopped.record();
    assert_eq!(record["status"], "interrupted");
    let kept = record["phases"]["mixed_prefill"]["levels"][0]["probes"].as_array().unwrap().clone();
    assert!((1..4).contains(&kept.len()), "{kept:?}");
    assert!(kept.iter().all(|p| p["ttft_ms"].is_f64() && p["timeline"].is_object()), "no half probe: {kept:?}");
    let csv = std::fs::read_to_string(out.join("mixed_prefill.csv")).expect("the CSV of an interrupted run");
    assert_eq!(csv.lines().count(), 1 + kept.len());

    let resumed = run(&out, &["--resume", out.to_str().unwrap()]).await;
    assert_eq!(resumed.code, 0, "{}", resumed.stderr);
    sim.handle.shutdown().await;
    let probes = resumed.record()["phases"]["mixed_prefill"]["levels"][0]["probes"].as_array().unwrap().clone();
    assert_eq!(probes.len(), 4);
    assert_eq!(probes[..kept.len()], kept[..], "the finished probes are kept as they were");
    assert!(probes.iter().all(|p| p["error"].is_null()), "{probes:?}");
}

/// With `--matrix` the matrix runs first, and a prefill row at CTX is the idle reference: no
/// fresh prompt is sent alone a second time.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_the_matrix_the_prefill_row_is_the_idle_reference() {
    let dir = tempfile::tempdir().unwrap();
    let profile = write_profile(dir.path());
    let sim = sim(SimSpec { profile: &profile, trace_dir: Some(dir.path()), ..SimSpec::default() }).await;
    let url = sim.handle.url();
    let out = dir.path().join("out");
    let mut a = args(&url, "1");
    a.extend_from_slice(&["--matrix", "--duration", "1s", "--prefill-contexts", "12k"]);
    let r = run(&out, &a).await;
    assert_eq!(r.code, 0, "{}", r.stderr);
    sim.handle.shutdown().await;
    let record = r.record();
    assert_eq!(record["decode"].as_array().unwrap().len(), 1, "the matrix ran too");
    let row = record["prefill"].as_array().unwrap().iter().find(|p| p["context"] == 12288).expect("the 12K row");
    let level = &record["phases"]["mixed_prefill"]["levels"][0];
    assert_eq!(level["idle"]["source"], "prefill_row");
    assert_eq!(level["idle"]["ttft_ms"], row["ttft_ms"]);
    let fresh = trace_lines(&dir.path().join("trace.jsonl")).iter().filter(|t| t["prompt_tokens"] == 12288).count();
    assert_eq!(fresh, 2, "the prefill row and the one probe");
}
