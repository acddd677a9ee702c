//! Resuming after `kill -9`: no finished cell is lost, none is measured twice,
//! and a resume with other settings is refused with the differences listed.
//! Also the `--progress plain` format that logs rely on.

mod common;

use std::collections::BTreeSet;
use std::path::Path;
use std::time::{Duration, Instant};

use common::{QUICK, SimSpec, run, sim};

fn cells(record: &serde_json::Value) -> Vec<(u64, u64, String)> {
    record["decode"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| (c["context"].as_u64().unwrap(), c["concurrency"].as_u64().unwrap(), c["status"].to_string()))
        .collect()
}

fn decode_cells_in(path: &Path) -> usize {
    std::fs::read_to_string(path)
        .ok()
        .and_then(|s| serde_json::from_str::<serde_json::Value>(&s).ok())
        .map_or(0, |v| v["decode"].as_array().map_or(0, Vec::len))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_9_then_resume_measures_each_cell_once() {
    let sim = sim(SimSpec::default()).await;
    let url = sim.handle.url();
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run");
    let matrix = ["--contexts", "1k,2k", "--concurrency", "1,2", "--duration", "1s", "--max-tokens", "512"];
    let mut child = common::bin()
        .args(["run", "--url", &url])
        .args(matrix)
        .args(QUICK)
        .arg("--out")
        .arg(&out)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    while decode_cells_in(&out.join("run.json")) < 2 {
        assert!(Instant::now() < deadline, "two cells did not finish within 60 s");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    child.kill().unwrap(); // SIGKILL: no chance to write anything more
    child.wait().unwrap();
    let before = cells(&serde_json::from_str(&std::fs::read_to_string(out.join("run.json")).unwrap()).unwrap());
    assert!(before.len() < 4, "the run was killed before the end");

    let r = run(&out, &["--resume", out.to_str().unwrap()]).await;
    assert_eq!(r.code, 0, "{}", r.stderr);
    let after = cells(r.record());
    assert_eq!(r.record()["status"], "complete");
    let unique: BTreeSet<_> = after.iter().map(|(c, n, _)| (*c, *n)).collect();
    assert_eq!(unique.len(), after.len(), "a cell was measured twice: {after:?}");
    assert_eq!(unique, BTreeSet::from([(1024, 1), (1024, 2), (2048, 1), (2048, 2)]));
    for cell in &before {
        assert!(after.contains(cell), "finished cell {cell:?} was lost or changed");
    }
    let prefill: Vec<u64> =
        r.record()["prefill"].as_array().unwrap().iter().map(|p| p["context"].as_u64().unwrap()).collect();
    assert_eq!(prefill, vec![1024, 2048], "prefill rows once each");
    assert!(r.record()["events"].to_string().contains("run resumed"));

    // the same directory with other settings is refused, and nothing is changed
    let refused = run(&out, &["--resume", out.to_str().unwrap(), "--max-tokens", "999"]).await;
    assert_eq!(refused.code, 1);
    assert!(refused.stderr.contains("max tokens: was 512, now 999"), "{}", refused.stderr);
    assert!(refused.stderr.contains("run without --resume"), "{}", refused.stderr);
    assert_eq!(refused.record()["status"], "complete");
    sim.handle.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn plain_progress_is_one_stamped_line_per_event() {
    let sim = sim(SimSpec::default()).await;
    let dir = tempfile::tempdir().unwrap();
    let url = sim.handle.url();
    let mut args = vec!["--url", url.as_str(), "--contexts", "1k", "--concurrency", "1,2", "--duration", "1s"];
    args.extend_from_slice(QUICK);
    args.extend_from_slice(&["--progress", "plain"]);
    let r = run(dir.path(), &args).await;
    sim.handle.shutdown().await;
    assert_eq!(r.code, 0, "{}", r.stderr);
    let progress: Vec<&str> = r.stdout.lines().take_while(|l| !l.is_empty()).collect();
    for line in &progress {
        let stamped = line.starts_with('[') && line.contains("s] ");
        let continued = line.starts_with("           ");
        assert!(stamped || continued, "not a progress line: {line:?}");
    }
    let text = progress.join("\n");
    for expected in
        ["run started", "prefill    1K", "cell 1K × 1 started", "decode    1K × 1", "decode    1K × 2", "run complete"]
    {
        assert!(text.contains(expected), "{expected:?} missing from:\n{text}");
    }
}
