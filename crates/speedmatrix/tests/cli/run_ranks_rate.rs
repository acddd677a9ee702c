//! `--request-rate` and `--burst` over `--ranks 3` (docs/distributed.md), three local processes
//! against the simulated engine: the ranks send one schedule between them, and the merged level or
//! burst agrees with the sim's trace as a single process's does (run_rate.rs, run_burst.rs); a
//! worker lost mid-level fails the level and the ones after, and Ctrl-C on rank 0 stops every
//! rank's part.

use std::collections::HashMap;
use std::process::Child;
use std::time::Duration;

use serde_json::Value;

use crate::common::{RunResult, SimSpec, num, request_lines, result, scheduler, sim, trace_lines};
use crate::run_ranks::{free_port, spawn_rank, three_ranks, wait};

/// One rate level or burst (`args`) at 1K over three ranks against a sim writing its trace into the
/// returned directory (the results in its `out`); every worker must say it drove one.
async fn one_schedule(args: &[&str]) -> (RunResult, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let sim = sim(SimSpec { trace_dir: Some(dir.path()), ..SimSpec::default() }).await;
    let url = sim.handle.url();
    let mut all = vec!["--url", &url, "--contexts", "1k", "--save-requests", "--ready-stable", "300ms"];
    all.extend_from_slice(args);
    let (port, out) = (free_port(), dir.path().join("out"));
    let (rank0, workers) = three_ranks(port, &out, &all).await;
    for (i, o) in workers.iter().enumerate() {
        let stdout = String::from_utf8_lossy(&o.stdout);
        assert!(stdout.contains("0 cell(s) and 1 rate level(s) or burst(s)"), "rank {}: {stdout}", i + 1);
    }
    sim.handle.shutdown().await;
    let r = result(&out, rank0);
    assert_eq!(r.code, 0, "stdout:\n{}\nstderr:\n{}", r.stdout, r.stderr);
    (r, dir)
}

/// `--request-rate` over ranks: each rank sends every third request of the one schedule, and the
/// merged level is the schedule: the engine saw all of it arrive 1/rate apart, and the level's
/// counts, due times and latencies agree with the trace as a single process's do (run_rate.rs).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_ranks_send_one_rate_schedule() {
    let args = ["--request-rate", "25", "--arrival", "constant", "--requests", "12", "--max-tokens", "16"];
    let (r, dir) = one_schedule(&[&args[..], &["--max-concurrency", "6"]].concat()).await;
    let out = dir.path().join("out");
    let level = &r.record()["phases"]["rate"]["levels"][0];
    assert_eq!(level["status"], "measured", "{level}");
    let c = &level["counts"];
    // rank 0 sends 4 of the 12: the other 8 are the workers'
    assert_eq!((c["scheduled"].as_u64(), c["sent"].as_u64(), c["completed"].as_u64()), (Some(12), Some(12), Some(12)));
    // each rank's part: every third request, all sent and completed
    let ranks = level["ranks"].as_array().unwrap_or_else(|| panic!("ranks[] in {level}"));
    let parts: Vec<(u64, u64, u64, u64)> = ranks
        .iter()
        .map(|r| {
            let n = |k: &str| r[k].as_u64().unwrap_or_else(|| panic!("{k} in {r}"));
            (n("rank"), n("scheduled"), n("sent"), n("completed"))
        })
        .collect();
    assert_eq!(parts, [(0, 4, 4, 4), (1, 4, 4, 4), (2, 4, 4, 4)], "{level}");
    assert!(ranks.iter().all(|r| r["send_lag_ms_p99"].is_number()), "{level}");
    assert!(ranks[1..].iter().all(|r| r["open_rtt_ms"].is_number()) && ranks[0].get("open_rtt_ms").is_none());
    let trace: HashMap<String, Value> = trace_lines(&dir.path().join("trace.jsonl"))
        .into_iter()
        .map(|t| (format!("chatcmpl-{}", t["id"]), t))
        .collect();
    // besides the hidden warm-up's short prompt
    let sent = trace.values().filter(|t| t["prompt_tokens"] == 1024).count();
    assert_eq!(sent, 12, "the engine saw each request once");
    let lines: Vec<Value> = request_lines(&out).into_iter().filter(|l| l["phase"] == "rate").collect();
    assert_eq!(lines.len(), 12, "one line per request, every rank's");
    let due: Vec<f64> = lines.iter().map(|l| num(&l["scheduled_s"])).collect();
    assert!(due.windows(2).all(|w| ((w[1] - w[0]) - 0.04).abs() < 1e-5), "the schedule, in due order: {due:?}");
    let pairs: Vec<(&Value, &Value)> =
        lines.iter().map(|l| (l, &trace[l["request_id"].as_str().expect("the server's id")])).collect();
    // the engine saw them arrive 1/rate apart, whichever rank sent them, each as late as its rank
    // says it sent it (a busy machine delays a send past its due time; the rank measures that
    // lag, and the gap may move by it, not by more)
    let mut arrivals: Vec<(f64, f64)> =
        pairs.iter().map(|(l, t)| (num(&t["arrival"]), num(&l["sent_s"]) - num(&l["scheduled_s"]))).collect();
    arrivals.sort_by(|a, b| a.0.total_cmp(&b.0));
    for w in arrivals.windows(2) {
        let (gap, lags) = (w[1].0 - w[0].0, w[0].1.max(0.0) + w[1].1.max(0.0));
        assert!((gap - 0.04).abs() < 0.015 + lags, "arrivals at the engine, with their send lags: {arrivals:?}");
    }
    // TTFT from the due time: the engine's arrival → first token, plus the send lag and the trip
    let mut truth: Vec<f64> = pairs
        .iter()
        .map(|(l, t)| num(&t["first_token"]) - num(&t["arrival"]) + num(&l["sent_s"]) - num(&l["scheduled_s"]))
        .collect();
    truth.sort_by(f64::total_cmp);
    let (ttft, truth) = (num(&level["ttft_ms"]["p50"]) / 1000.0, truth[truth.len() / 2]);
    assert!(ttft >= truth - 0.002 && ttft <= truth + 0.05, "TTFT p50 {ttft} s, the trace says {truth} s");
    let tokens: f64 = pairs.iter().map(|(_, t)| num(&t["completion_tokens"])).sum();
    assert!((num(&level["output_tok_s"]) * num(&level["span_s"]) - tokens).abs() < 0.5, "{level}");
}

/// `--burst` over ranks: each rank sends its third of the C requests at rank 0's open, and the
/// merged burst's figures agree with the trace, measured from the burst's due instant on rank 0.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_ranks_send_one_burst() {
    let (r, dir) = one_schedule(&["--concurrency", "6", "--burst", "--max-tokens", "40"]).await;
    let out = dir.path().join("out");
    let b = &r.record()["phases"]["burst"]["bursts"][0];
    assert_eq!(b["status"], "valid", "{b}");
    assert_eq!((b["requests"].as_u64(), b["completed"].as_u64()), (Some(6), Some(6)), "{b}");
    let parts: Vec<(u64, u64)> = b["ranks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| (p["rank"].as_u64().unwrap(), p["completed"].as_u64().unwrap()))
        .collect();
    assert_eq!(parts, [(0, 2), (1, 2), (2, 2)], "{b}");
    let trace: HashMap<String, Value> = trace_lines(&dir.path().join("trace.jsonl"))
        .into_iter()
        .map(|t| (format!("chatcmpl-{}", t["id"]), t))
        .collect();
    let lines: Vec<Value> = request_lines(&out).into_iter().filter(|l| l["phase"] == "burst").collect();
    assert_eq!(lines.len(), 6, "one line per request, every rank's");
    let truth: Vec<&Value> = lines.iter().map(|l| &trace[l["request_id"].as_str().unwrap()]).collect();
    let tokens: u64 = truth.iter().map(|t| t["completion_tokens"].as_u64().unwrap()).sum();
    assert_eq!(b["output_tokens"].as_u64(), Some(tokens), "{b}");
    // from the burst's first arrival at the engine: the client's clock starts before any request
    // leaves, so it may read a little more; less only by how late a worker opened its part after
    // rank 0 (its times are placed at rank 0's open), at most the open message's round trip
    let start = truth.iter().map(|t| num(&t["arrival"])).fold(f64::INFINITY, f64::min);
    let last = truth.iter().map(|t| num(&t["end"])).fold(0.0, f64::max) - start;
    let got = num(&b["last_completion_ms"]) / 1000.0;
    let rtt = b["ranks"].as_array().unwrap().iter().filter_map(|p| p["open_rtt_ms"].as_f64()).fold(0.0, f64::max);
    let low = last - 0.002 - rtt / 1000.0;
    assert!(got >= low && got <= last + 0.25, "last completion {got} s, the trace says {last} s (open rtt {rtt} ms)");
    let arrivals: Vec<f64> = truth.iter().map(|t| num(&t["arrival"]) - start).collect();
    assert!(arrivals.iter().all(|a| *a < 0.1), "every rank's part arrived at once: {arrivals:?}");
}

/// Rate levels of 12 requests of `tokens` each (2 ms a token on the tiny engine), spread over three
/// ranks: (workers, rank 0), rank 0 started last.
fn long_levels(url: &str, out: &std::path::Path, port: u16, rates: &str, tokens: &str) -> (Vec<Child>, Child) {
    let args = ["--url", url, "--contexts", "1k", "--request-rate", rates, "--arrival", "constant"];
    let args = [&args[..], &["--requests", "12", "--max-tokens", tokens, "--ready-stable", "300ms"]].concat();
    let workers: Vec<Child> = (1..3).map(|r| spawn_rank(r, 3, port, out, &args)).collect();
    (workers, spawn_rank(0, 3, port, out, &args))
}

/// Waits until the engine runs at least `n` requests: a level is under way.
async fn running(url: &str, n: f64) {
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    while scheduler(url).await.0 < n {
        assert!(std::time::Instant::now() < deadline, "the level did not start within 60 s");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// A level is never measured at less than its rate: a worker killed mid-level fails the level
/// with its reason, and the next level is not run without it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_lost_mid_level_fails_the_level_and_the_ones_after() {
    let dir = tempfile::tempdir().unwrap();
    let sim = sim(SimSpec::default()).await;
    let url = sim.handle.url();
    let (port, out) = (free_port(), dir.path().join("out"));
    let (mut workers, rank0) = long_levels(&url, &out, port, "4,8", "300");
    running(&url, 2.0).await;
    workers[1].kill().unwrap();
    let _ = workers[1].wait();
    let r = result(&out, wait(rank0).await);
    let _ = wait(workers.remove(0)).await;
    sim.handle.shutdown().await;
    let levels = r.record()["phases"]["rate"]["levels"].as_array().cloned().unwrap_or_default();
    assert_eq!(levels.len(), 2, "{}\n{}", r.stdout, r.stderr);
    assert_eq!(levels[0]["status"], "error", "{}", levels[0]);
    let reason = levels[0]["reason"].as_str().unwrap();
    assert!(reason.contains("rank 2 was lost mid-level"), "{reason}");
    assert_eq!(levels[1]["status"], "error", "{}", levels[1]);
    assert!(levels[1]["reason"].as_str().unwrap().contains("rank 2 is gone"), "{}", levels[1]);
}

/// Ctrl-C on rank 0 mid-level stops every rank's part: the level is dropped as in one process,
/// and the workers are told the run is over.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ctrl_c_on_rank_0_stops_every_ranks_level() {
    let dir = tempfile::tempdir().unwrap();
    let sim = sim(SimSpec::default()).await;
    let url = sim.handle.url();
    let (port, out) = (free_port(), dir.path().join("out"));
    // requests of 16 s: only a cancel ends them soon
    let (workers, rank0) = long_levels(&url, &out, port, "4", "8000");
    running(&url, 3.0).await;
    let stopped = std::time::Instant::now();
    let r = crate::common::interrupt(rank0, &out, Duration::ZERO).await;
    for (i, w) in workers.into_iter().enumerate() {
        let o = wait(w).await;
        assert!(o.status.success(), "rank {}: {}", i + 1, String::from_utf8_lossy(&o.stderr));
    }
    assert!(stopped.elapsed() < Duration::from_secs(10), "every rank stopped its part: {:?}", stopped.elapsed());
    // every rank's requests were cancelled: the engine soon runs none
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    while scheduler(&url).await.0 > 0.0 {
        assert!(std::time::Instant::now() < deadline, "requests still running after the stop");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    sim.handle.shutdown().await;
    assert_eq!(r.code, 130, "{}\n{}", r.stdout, r.stderr);
    assert_eq!(r.record()["status"], "interrupted");
    let levels = r.record()["phases"]["rate"]["levels"].as_array().map_or(0, Vec::len);
    assert_eq!(levels, 0, "the level in progress is dropped");
}
