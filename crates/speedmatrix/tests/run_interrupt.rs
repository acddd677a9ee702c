//! Ctrl-C keeps every finished cell, marks the run interrupted and exits 130.

mod common;

use std::time::{Duration, Instant};

use common::{QUICK, SimSpec, sim};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn interrupt_keeps_finished_cells() {
    let sim = sim(SimSpec::default()).await;
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().to_path_buf();
    let url = sim.handle.url();
    let child = common::bin()
        .args(["run", "--url", &url, "--contexts", "1k", "--concurrency", "1,2,4,8", "--duration", "2s"])
        .args(QUICK)
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
    let status = std::process::Command::new("kill").args(["-INT", &pid.to_string()]).status().unwrap();
    assert!(status.success());
    let output = tokio::task::spawn_blocking(move || child.wait_with_output().unwrap()).await.unwrap();
    let r = common::result(&out, output);
    assert_eq!(r.code, 130, "{}", r.stderr);
    let rec = r.record();
    assert_eq!(rec["status"], "interrupted");
    assert!(!rec["decode"].as_array().unwrap().is_empty(), "finished cells are kept");
    assert!(rec["decode"].as_array().unwrap().iter().all(|c| c["status"] == "valid"), "no half-measured cell: {rec}");
    assert!(rec["finished"].is_string());
    sim.handle.shutdown().await;
}
