//! A fault in a mixed-prefill level's background (methodology §13.3), against the simulated engine's
//! trace: a background stream that stalls is a fault of the level, never the probe's prefill cost.
//! A probe whose span holds the stall keeps no figure the level rests on, and a stream that fails
//! after the last probe's check is the level's error all the same.

use serde_json::Value;

use crate::common::{QUICK, SimSpec, num as f, run, sim, trace_lines};

/// The first background request (the only ones with 3,000 output tokens) stalls after this many.
const STALL_AFTER: u64 = 150;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stalled_background_stream_is_a_fault_not_the_probes_cost() {
    let dir = tempfile::tempdir().unwrap();
    let profile = crate::run_mixed_prefill::write_profile(dir.path());
    let fault = format!("stall-after={STALL_AFTER}@max-tokens=3000,from=1,to=1");
    let faults = [fault.as_str()];
    let sim = sim(SimSpec { profile: &profile, faults: &faults, trace_dir: Some(dir.path()), ..SimSpec::default() });
    let sim = sim.await;
    let url = sim.handle.url();
    let out = dir.path().join("out");
    let mut args = vec!["--url", url.as_str(), "--contexts", "1k", "--concurrency", "1", "--mixed-prefill", "12k@4"];
    args.extend_from_slice(&["--mixed-prefill-probes", "2", "--mixed-prefill-window", "500ms"]);
    args.extend_from_slice(&["--max-tokens", "3000", "--stall-timeout", "1s"]);
    args.extend_from_slice(QUICK);
    let r = run(&out, &args).await;
    sim.handle.shutdown().await;
    let level = &r.record()["phases"]["mixed_prefill"]["levels"][0];

    // the trace: the engine goes on generating the stalled request (the sim holds its stream
    // silent), so the stall began at its STALL_AFTER-th token, within the first probe's span
    let trace = trace_lines(&dir.path().join("trace.jsonl"));
    let stalled = trace
        .iter()
        .filter(|t| t["prompt_tokens"] == 1024 && t["completion_tokens"].as_u64() > Some(1))
        .min_by_key(|t| t["id"].as_u64())
        .expect("the background's first request is in the trace");
    let mut sent = 0.0;
    let silent_from = stalled["emissions"]
        .as_array()
        .unwrap()
        .iter()
        .find_map(|e| {
            sent += f(&e[1]);
            (sent >= STALL_AFTER as f64).then(|| f(&e[0]))
        })
        .expect("the stalled request reached its stall");
    let mut fresh: Vec<&Value> = trace.iter().filter(|t| t["prompt_tokens"] == 12288).collect();
    fresh.sort_by(|a, b| f(&a["arrival"]).total_cmp(&f(&b["arrival"])));
    assert!(fresh.len() >= 2, "the idle reference and a probe: {fresh:?}");
    assert!(silent_from < f(&fresh[1]["first_token"]) + 0.5, "the stall began within the first probe's span");

    let error = level["error"].as_str().unwrap_or_default();
    assert!(error.contains("background stream failed") && error.contains("stalled"), "{level}");
    let probes = level["probes"].as_array().unwrap();
    assert!(!probes.is_empty(), "{level}");
    let first = probes[0]["error"].as_str().unwrap_or_default();
    assert!(first.contains("fell silent") && first.contains("fault"), "the first probe measured the stall: {level}");
    assert!(level["ttft_ms_median"].is_null() && level["slowdown"].is_null(), "no figure rests on a fault: {level}");
    assert_eq!(r.code, 2, "a level in error: {}", r.stderr);
}

/// A background stream that breaks after the last probe's check, while that probe's after-window
/// runs: the level used to end valid (the failure seen only as a hint that the server may be gone).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_background_stream_that_fails_after_the_last_check_is_the_levels_error() {
    let dir = tempfile::tempdir().unwrap();
    let profile = crate::run_mixed_prefill::write_profile(dir.path());
    // ~2.4 ms a step: about 3.4 s into the background, inside the probe's 2 s after-window
    let faults = ["disconnect-after=1400@max-tokens=3000,from=1,to=1"];
    let sim = sim(SimSpec { profile: &profile, faults: &faults, trace_dir: Some(dir.path()), ..SimSpec::default() });
    let sim = sim.await;
    let url = sim.handle.url();
    let out = dir.path().join("out");
    let mut args = vec!["--url", url.as_str(), "--contexts", "1k", "--concurrency", "1", "--mixed-prefill", "12k@4"];
    args.extend_from_slice(&["--mixed-prefill-probes", "1", "--mixed-prefill-window", "2s", "--max-tokens", "3000"]);
    args.extend_from_slice(QUICK);
    let r = run(&out, &args).await;
    sim.handle.shutdown().await;
    let level = &r.record()["phases"]["mixed_prefill"]["levels"][0];
    let trace = trace_lines(&dir.path().join("trace.jsonl"));
    // the client's stop breaks the others too, each at its own count
    let broken = trace.iter().filter(|t| t["finish"] == "disconnect" && t["completion_tokens"] == 1400).count();
    assert_eq!(broken, 1, "the engine saw the background's first request break at its 1,400th token");
    let error = level["error"].as_str().unwrap_or_default();
    assert!(error.contains("background stream failed"), "the break is the level's error: {level}");
    for p in level["probes"].as_array().unwrap() {
        assert!(p["error"].as_str().is_some_and(|e| e.contains("fell silent")), "{p}");
    }
    assert!(level["ttft_ms_median"].is_null(), "{level}");
    assert_eq!(r.code, 2, "a level in error: {}", r.stderr);
}

/// Ctrl-C while the background ramps up (its first tokens held back 4 s): the client cut the
/// level, so it keeps no error that blames the server ("only 0 of 4 streams had a first token"),
/// and a resume measures it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ctrl_c_during_the_ramp_is_no_fault_of_the_server() {
    let dir = tempfile::tempdir().unwrap();
    let profile = crate::run_mixed_prefill::write_profile(dir.path());
    let faults = ["slow-first-token=4000@max-tokens=3000,from=1,to=4"];
    let sim = sim(SimSpec { profile: &profile, faults: &faults, ..SimSpec::default() }).await;
    let url = sim.handle.url();
    let out = dir.path().join("out");
    let mut args = vec!["--url", url.as_str(), "--contexts", "1k", "--concurrency", "1", "--mixed-prefill", "12k@4"];
    args.extend_from_slice(&["--mixed-prefill-probes", "1", "--mixed-prefill-window", "500ms", "--max-tokens", "3000"]);
    args.extend_from_slice(QUICK);
    let child = crate::common::bin()
        .arg("run")
        .args(&args)
        .args(["--progress", "plain", "--out", out.to_str().unwrap()])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // the idle reference is written just before the background starts
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    loop {
        let record = std::fs::read_to_string(out.join("run.json")).ok().and_then(|s| serde_json::from_str(&s).ok());
        if record.is_some_and(|v: Value| v["phases"]["mixed_prefill"]["levels"][0]["idle"].is_object()) {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "no idle reference within 60 s");
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    let pid = child.id().to_string();
    assert!(std::process::Command::new("kill").args(["-INT", &pid]).status().unwrap().success());
    let output = tokio::task::spawn_blocking(move || child.wait_with_output().unwrap()).await.unwrap();
    let stopped = crate::common::result(&out, output);
    assert_eq!(stopped.code, 130, "{}\n{}", stopped.stdout, stopped.stderr);
    let level = &stopped.record()["phases"]["mixed_prefill"]["levels"][0];
    assert!(level["error"].is_null(), "the client stopped the level, the server did not fail it: {level}");
    let resumed = run(&out, &["--resume", out.to_str().unwrap()]).await;
    sim.handle.shutdown().await;
    assert_eq!(resumed.code, 0, "{}", resumed.stderr);
    let level = &resumed.record()["phases"]["mixed_prefill"]["levels"][0];
    assert_eq!(level["probes"].as_array().map(Vec::len), Some(1), "the resume measured the level: {level}");
}

/// Ctrl-C while the second probe waits for the background to recover and then its window: the
/// wait the client cut sends no probe after the stop, so none is called `steady: false` for it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ctrl_c_between_probes_sends_no_probe_after_it() {
    let dir = tempfile::tempdir().unwrap();
    let profile = crate::run_mixed_prefill::write_profile(dir.path());
    let sim = sim(SimSpec { profile: &profile, ..SimSpec::default() }).await;
    let url = sim.handle.url();
    let out = dir.path().join("out");
    let mut args = vec!["--url", url.as_str(), "--contexts", "1k", "--concurrency", "1", "--mixed-prefill", "12k@4"];
    args.extend_from_slice(&["--mixed-prefill-probes", "2", "--mixed-prefill-window", "3s", "--max-tokens", "6000"]);
    args.extend_from_slice(QUICK);
    let child = crate::common::bin()
        .arg("run")
        .args(&args)
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
    sim.handle.shutdown().await;
    let stopped = crate::common::result(&out, output);
    assert_eq!(stopped.code, 130, "{}\n{}", stopped.stdout, stopped.stderr);
    let level = &stopped.record()["phases"]["mixed_prefill"]["levels"][0];
    assert_eq!(probes_in(stopped.record()), 1, "no probe sent after Ctrl-C: {level}");
    assert!(level["error"].is_null(), "{level}");
}
