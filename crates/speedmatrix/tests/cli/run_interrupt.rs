//! Ctrl-C, SIGTERM (kill, systemd, containers) and SIGHUP (a dropped SSH session) each keep every
//! finished cell, mark the run interrupted, write the reports and exit 128 + the signal's number.

use std::time::{Duration, Instant};

use crate::common::{QUICK, RunResult, SimSpec, sim};

/// Runs a plain-progress matrix, sends `signal` once a cell has finished, and returns what the
/// process left behind.
async fn stopped_by(signal: &str) -> (RunResult, tempfile::TempDir) {
    let sim = sim(SimSpec::default()).await;
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().to_path_buf();
    let url = sim.handle.url();
    let child = crate::common::bin()
        .args(["run", "--url", &url, "--contexts", "1k", "--concurrency", "1,2,4,8", "--duration", "2s"])
        .args(QUICK)
        .args(["--progress", "plain"])
        .arg("--out")
        .arg(&out)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id();
    let run_json = out.join("run.json");
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let cells = std::fs::read_to_string(&run_json)
            .ok()
            .and_then(|s| serde_json::from_str::<serde_json::Value>(&s).ok())
            .map_or(0, |v| v["decode"].as_array().map_or(0, Vec::len));
        if cells >= 1 {
            break;
        }
        assert!(Instant::now() < deadline, "no cell finished within 60 s");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let status = std::process::Command::new("kill").args([&format!("-{signal}"), &pid.to_string()]).status().unwrap();
    assert!(status.success());
    let output = tokio::task::spawn_blocking(move || child.wait_with_output().unwrap()).await.unwrap();
    sim.handle.shutdown().await;
    (crate::common::result(&out, output), dir)
}

fn assert_interrupted_with_complete_files(r: &RunResult, dir: &std::path::Path, code: i32) {
    assert_eq!(r.code, code, "{}\n{}", r.stdout, r.stderr);
    let rec = r.record();
    assert_eq!(rec["status"], "interrupted");
    assert!(!rec["decode"].as_array().unwrap().is_empty(), "finished cells are kept");
    assert!(rec["decode"].as_array().unwrap().iter().all(|c| c["status"] == "valid"), "no half-measured cell: {rec}");
    assert!(rec["finished"].is_string());
    for file in ["report.html", "report.md", "measurements.csv"] {
        let text = std::fs::read_to_string(dir.join(file)).unwrap_or_else(|e| panic!("{file}: {e}\n{}", r.stderr));
        assert!(text.contains("1K"), "{file} has no finished cell:\n{text}");
    }
    assert!(!dir.join("run.lock").exists(), "run.lock left behind by an interrupted run");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn interrupt_keeps_finished_cells() {
    let (r, dir) = stopped_by("INT").await;
    assert_interrupted_with_complete_files(&r, dir.path(), 130);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_stops_like_ctrl_c_and_writes_the_reports() {
    let (r, dir) = stopped_by("TERM").await;
    assert_interrupted_with_complete_files(&r, dir.path(), 143);
    let notice = r.stdout.lines().find(|l| l.contains("SIGTERM")).unwrap_or_else(|| panic!("{}", r.stdout));
    assert!(notice.starts_with('[') && notice.contains("stopping"), "{notice}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sighup_from_a_dropped_session_stops_like_ctrl_c_and_writes_the_reports() {
    let (r, dir) = stopped_by("HUP").await;
    assert_interrupted_with_complete_files(&r, dir.path(), 129);
}
