//! The server goes away in the middle of a load phase (methodology §6.8, §13): as after a decode
//! cell, the unit in progress (a burst, a mixed-prefill level, the conversations of the sessions
//! phase) is written as an error saying the server stopped responding, the run waits (bounded)
//! for the server and goes on when it is back, or ends `failed` keeping everything it measured.
//! `--resume --retry-failed` measures the cut units again. The sim runs in its own process, so it
//! can be killed like a real server.

use std::path::Path;
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::common::{QUICK, RunResult, run};
use crate::run_server_down::{port_of, sim_process};

const LOST: &str = "server stopped responding";

fn spawn_run(url: &str, out: &Path, args: &[&str]) -> Child {
    crate::common::bin()
        .args(["run", "--url", url, "--contexts", "1k"])
        .args(QUICK)
        .args(["--stall-timeout", "5s"])
        .args(args)
        .arg("--out")
        .arg(out)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

/// Waits (at most 60 s) until run.json shows `what`.
async fn wait_until(out: &Path, what: &str, done: impl Fn(&Value) -> bool) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while !std::fs::read_to_string(out.join("run.json"))
        .ok()
        .and_then(|s| serde_json::from_str::<Value>(&s).ok())
        .is_some_and(|v| done(&v))
    {
        assert!(Instant::now() < deadline, "not within 60 s: {what}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Kills the server; with `back_after`, starts a new one on its port that long after.
async fn outage(mut server: Child, url: &str, back_after: Option<Duration>) -> Option<Child> {
    server.kill().unwrap();
    server.wait().unwrap();
    let after = back_after?;
    tokio::time::sleep(after).await;
    Some(sim_process(port_of(url)).0)
}

async fn finished(child: Child, out: &Path) -> RunResult {
    let output = tokio::task::spawn_blocking(move || child.wait_with_output().unwrap()).await.unwrap();
    crate::common::result(out, output)
}

fn events(rec: &Value) -> String {
    rec["events"].to_string()
}

fn says_lost(v: &Value) -> bool {
    // said once: a unit that found the server gone before it began is not marked a second time
    v.as_str().is_some_and(|r| r.starts_with(LOST) && r.matches(LOST).count() == 1)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_burst_cut_by_the_server_is_an_error_and_the_run_goes_on_once_it_is_back() {
    let (server, url) = sim_process(0);
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    // 1,500 tokens at 2–3 ms a step: bursts of a few seconds, long enough to be cut
    let args = ["--concurrency", "1,2,4", "--max-tokens", "1500", "--burst", "--server-wait", "20s"];
    let child = spawn_run(&url, &out, &args);
    let bursts = |v: &Value| v["phases"]["burst"]["bursts"].as_array().map_or(0, Vec::len);
    wait_until(&out, "the first burst", |v| bursts(v) >= 1).await;
    // the second burst is in flight once the server runs its requests
    let deadline = Instant::now() + Duration::from_secs(30);
    while crate::common::scheduler(&url).await.0 < 1.0 {
        assert!(Instant::now() < deadline, "the second burst did not start");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let mut back = outage(server, &url, Some(Duration::from_secs(5))).await.unwrap();
    let r = finished(child, &out).await;
    back.kill().unwrap();
    back.wait().unwrap();
    let rec = r.record();
    assert_eq!(rec["status"], "complete", "{}", r.stderr);
    assert_eq!(r.code, 2, "a burst in error makes the run exit 2, as an errored cell does: {}", r.stderr);
    assert!(events(rec).contains("server is back"), "{}", events(rec));
    let bursts = rec["phases"]["burst"]["bursts"].as_array().unwrap();
    let status: Vec<(u64, &str)> =
        bursts.iter().map(|b| (b["concurrency"].as_u64().unwrap(), b["status"].as_str().unwrap())).collect();
    assert_eq!(status, [(1, "valid"), (2, "error"), (4, "valid")], "{bursts:?}");
    assert!(says_lost(&bursts[1]["reason"]), "{}", bursts[1]);
}

fn mixed_args(server_wait: &'static str) -> Vec<&'static str> {
    vec![
        "--concurrency",
        "1",
        "--mixed-prefill",
        "2k@2,3k@2",
        "--mixed-prefill-probes",
        "2",
        "--mixed-prefill-window",
        "500ms",
        "--max-tokens",
        "3000",
        "--server-wait",
        server_wait,
    ]
}

fn mixed_levels(v: &Value) -> Vec<Value> {
    v["phases"]["mixed_prefill"]["levels"].as_array().cloned().unwrap_or_default()
}

fn valid_probes(level: &Value) -> usize {
    level["probes"].as_array().unwrap().iter().filter(|p| p["error"].is_null() && p["ttft_ms"].is_number()).count()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_mixed_prefill_level_cut_by_the_server_is_an_error_and_retry_failed_measures_it_again() {
    let (server, url) = sim_process(0);
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    let child = spawn_run(&url, &out, &mixed_args("20s"));
    let probes = |v: &Value| mixed_levels(v).first().map_or(0, |l| l["probes"].as_array().map_or(0, Vec::len));
    wait_until(&out, "the first level's first probe", |v| probes(v) >= 1).await;
    // down long enough that the level sees it go before it comes back
    let mut back = outage(server, &url, Some(Duration::from_secs(8))).await.unwrap();
    let r = finished(child, &out).await;
    let rec = r.record().clone();
    assert_eq!(rec["status"], "complete", "{}", r.stderr);
    assert_eq!(r.code, 2, "a mixed-prefill level in error makes the run exit 2: {}", r.stderr);
    assert!(events(&rec).contains("server is back"), "{}", events(&rec));
    let levels = mixed_levels(&rec);
    assert!(says_lost(&levels[0]["error"]), "{:?}", levels[0]);
    assert!(
        levels[1]["error"].is_null() && valid_probes(&levels[1]) == 2,
        "the next level is measured: {:?}",
        levels[1]
    );

    let retried = run(&out, &["--resume", out.to_str().unwrap(), "--retry-failed"]).await;
    back.kill().unwrap();
    back.wait().unwrap();
    assert_eq!(retried.record()["status"], "complete", "{}", retried.stderr);
    assert_eq!(retried.code, 0, "nothing is in error after the retry: {}", retried.stderr);
    let levels = mixed_levels(retried.record());
    assert!(levels[0]["error"].is_null(), "the cut level is measured again: {:?}", levels[0]);
    assert_eq!(valid_probes(&levels[0]), 2, "{:?}", levels[0]);
    assert_eq!(levels[1], mixed_levels(&rec)[1], "the finished level is kept as it was");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_that_stays_away_fails_a_mixed_prefill_run_and_keeps_the_finished_level() {
    let (server, url) = sim_process(0);
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    let child = spawn_run(&url, &out, &mixed_args("3s"));
    let second_started = |v: &Value| mixed_levels(v).get(1).is_some_and(|l| !l["idle"].is_null());
    wait_until(&out, "the second level's idle reference", second_started).await;
    outage(server, &url, None).await;
    let r = finished(child, &out).await;
    assert_eq!(r.code, 1, "{}", r.stderr);
    let rec = r.record();
    assert_eq!(rec["status"], "failed");
    assert!(events(rec).contains("did not come back"), "{}", events(rec));
    let levels = mixed_levels(rec);
    assert!(levels[0]["error"].is_null() && valid_probes(&levels[0]) == 2, "kept: {:?}", levels[0]);
    assert!(says_lost(&levels[1]["error"]), "{:?}", levels[1]);
}

fn sessions(v: &Value) -> Vec<Value> {
    v["phases"]["sessions"]["sessions"].as_array().cloned().unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sessions_cut_by_the_server_stop_and_retry_failed_holds_them_again() {
    let (server, url) = sim_process(0);
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    let flags =
        ["--concurrency", "1", "--sessions", "3", "--turns", "8", "--think-time", "300ms", "--turn-tokens", "32"];
    let child = spawn_run(&url, &out, &[&flags[..], &["--max-tokens", "24", "--server-wait", "20s"]].concat());
    let turns = |v: &Value| sessions(v).iter().map(|s| s["turns"].as_array().map_or(0, Vec::len)).sum::<usize>();
    wait_until(&out, "four turns", |v| turns(v) >= 4).await;
    let mut back = outage(server, &url, Some(Duration::from_secs(5))).await.unwrap();
    let r = finished(child, &out).await;
    let rec = r.record();
    assert_eq!(rec["status"], "complete", "{}", r.stderr);
    assert_eq!(r.code, 2, "conversations the server's loss ended make the run exit 2: {}", r.stderr);
    assert!(events(rec).contains("server is back"), "{}", events(rec));
    let held = sessions(rec);
    assert_eq!(held.len(), 3, "{held:?}");
    assert!(held.iter().any(|s| s["status"] == "server_lost"), "{held:?}");
    assert!(held.iter().all(|s| s["status"] == "complete" || s["status"] == "server_lost"), "{held:?}");
    let failed: Vec<&Value> =
        held.iter().flat_map(|s| s["turns"].as_array().unwrap()).filter(|t| t["status"] == "failed").collect();
    assert!(!failed.is_empty() && failed.iter().all(|t| says_lost(&t["reason"])), "{failed:?}");
    // users thinking when the run found the server gone were stopped before their next turn: a
    // conversation that went on would have ended on a failed turn, as each conversation did before
    let stopped_between_turns = |s: &&Value| {
        s["status"] == "server_lost" && s["turns"].as_array().unwrap().last().is_none_or(|t| t["status"] == "completed")
    };
    assert!(held.iter().any(|s| stopped_between_turns(&s)), "no user was stopped between turns: {held:?}");

    let retried = run(&out, &["--resume", out.to_str().unwrap(), "--retry-failed"]).await;
    back.kill().unwrap();
    back.wait().unwrap();
    assert_eq!(retried.record()["status"], "complete", "{}", retried.stderr);
    assert_eq!(retried.code, 0, "{}", retried.stderr);
    let held = sessions(retried.record());
    assert!(held.iter().all(|s| s["status"] == "complete" && s["turns"].as_array().unwrap().len() == 8), "{held:?}");
}
