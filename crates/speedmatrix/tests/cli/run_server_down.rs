//! The server goes away in the middle of a run: the cell in progress is an error
//! saying so, the run waits (bounded) for the server, then continues — or stops
//! as `failed` with everything measured kept.

use std::time::{Duration, Instant};

use std::io::{BufRead, BufReader};
use std::process::{Child, Stdio};

use crate::common::QUICK;

/// A simulated engine in its own process, so it can be killed like a real server.
pub(crate) fn sim_process(port: u16) -> (Child, String) {
    let mut child = crate::common::bin()
        .args(["sim", "--profile", "tiny", "--port", &port.to_string()])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap()).read_line(&mut line).unwrap();
    let url = line.trim().rsplit(' ').next().unwrap().to_string();
    assert!(url.starts_with("http://127.0.0.1:"), "{line}");
    (child, url)
}

pub(crate) fn port_of(url: &str) -> u16 {
    url.rsplit(':').next().unwrap().parse().unwrap()
}

async fn wait_for_cells(path: &std::path::Path, n: usize) {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let cells = std::fs::read_to_string(path)
            .ok()
            .and_then(|s| serde_json::from_str::<serde_json::Value>(&s).ok())
            .map_or(0, |v| v["decode"].as_array().map_or(0, Vec::len));
        if cells >= n {
            return;
        }
        assert!(Instant::now() < deadline, "{n} cells did not finish within 60 s");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

fn spawn_run(url: &str, out: &std::path::Path, server_wait: &str) -> std::process::Child {
    crate::common::bin()
        .args(["run", "--url", url, "--contexts", "1k", "--concurrency", "1,2,4", "--duration", "2s"])
        .args(QUICK)
        .args(["--max-tokens", "4096", "--server-wait", server_wait, "--stall-timeout", "5s", "--out"])
        .arg(out)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_run_waits_for_the_server_and_continues() {
    let (mut first, url) = sim_process(0);
    let dir = tempfile::tempdir().unwrap();
    let child = spawn_run(&url, dir.path(), "60s");
    wait_for_cells(&dir.path().join("run.json"), 1).await;
    // the second cell is streaming: kill the server, bring it back a few seconds later
    tokio::time::sleep(Duration::from_millis(1500)).await;
    first.kill().unwrap();
    first.wait().unwrap();
    tokio::time::sleep(Duration::from_secs(3)).await;
    let (mut second, _) = sim_process(port_of(&url));
    let output = tokio::task::spawn_blocking(move || child.wait_with_output().unwrap()).await.unwrap();
    let r = crate::common::result(dir.path(), output);
    second.kill().unwrap();
    second.wait().unwrap();
    assert_eq!(r.code, 2, "one cell errored; stderr:\n{}", r.stderr);
    let rec = r.record();
    assert_eq!(rec["status"], "complete");
    let down: Vec<_> = r.cells().into_iter().filter(|c| c["status"] == "error").collect();
    assert_eq!(down.len(), 1, "{rec}");
    let reason = down[0]["reason"].as_str().unwrap();
    assert!(reason.starts_with("server stopped responding"), "{}", down[0]);
    assert_eq!(reason.matches("server stopped responding").count(), 1, "marked once: {reason}");
    assert_eq!(r.cells().iter().filter(|c| c["status"] == "valid").count(), 2);
    assert!(rec["events"].to_string().contains("server is back"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_run_fails_when_the_server_stays_away_and_keeps_what_it_measured() {
    let (mut server, url) = sim_process(0);
    let dir = tempfile::tempdir().unwrap();
    let child = spawn_run(&url, dir.path(), "3s");
    wait_for_cells(&dir.path().join("run.json"), 1).await;
    tokio::time::sleep(Duration::from_millis(1500)).await;
    server.kill().unwrap();
    server.wait().unwrap();
    let output = tokio::task::spawn_blocking(move || child.wait_with_output().unwrap()).await.unwrap();
    let r = crate::common::result(dir.path(), output);
    assert_eq!(r.code, 1, "{}", r.stderr);
    let rec = r.record();
    assert_eq!(rec["status"], "failed");
    assert_eq!(r.cell(1024, 1)["status"], "valid", "the finished cell is kept");
    assert!(rec["events"].to_string().contains("did not come back"));
}
