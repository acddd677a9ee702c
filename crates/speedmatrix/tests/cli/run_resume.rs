//! Resuming after `kill -9` in the middle of a cell: no finished cell is lost, none
//! is measured twice; a second process on a running directory is refused; a resume
//! with other settings, prompts or server is refused with every difference listed
//! and the directory untouched.
//! Also the `--progress plain` format that logs rely on.

use std::collections::BTreeSet;
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use crate::common::{QUICK, SimSpec, run, sim};

fn cells(record: &serde_json::Value) -> Vec<(u64, u64, String)> {
    record["decode"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| (c["context"].as_u64().unwrap(), c["concurrency"].as_u64().unwrap(), c["status"].to_string()))
        .collect()
}

fn read_record(path: &Path) -> serde_json::Value {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

/// `(context, concurrency)` of a plain progress line `[  1.2s] cell 2K × 1 started`.
fn started_cell(line: &str) -> Option<(u64, u64)> {
    let cell = line.split_once("] cell ")?.1.strip_suffix(" started")?;
    let (ctx, c) = cell.split_once(" × ")?;
    Some((ctx.strip_suffix('K')?.parse::<u64>().ok()? * 1024, c.parse().ok()?))
}

/// Reads plain progress until the next cell starts; returns that cell and the reader, which the
/// caller keeps so that the child's stdout stays open.
async fn next_cell_start<R: BufRead + Send + 'static>(reader: R) -> ((u64, u64), R) {
    let read = tokio::task::spawn_blocking(move || {
        let mut reader = reader;
        let mut line = String::new();
        while reader.read_line(&mut line).unwrap() > 0 {
            if let Some(cell) = started_cell(line.trim_end()) {
                return (cell, reader);
            }
            line.clear();
        }
        panic!("the run ended before the next cell started");
    });
    tokio::time::timeout(Duration::from_secs(120), read).await.expect("no cell started within 120 s").unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_9_mid_cell_then_resume_measures_each_cell_once() {
    let sim = sim(SimSpec::default()).await;
    let url = sim.handle.url();
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run");
    let resume = ["--resume", out.to_str().unwrap()];
    let matrix = ["--contexts", "1k,2k", "--concurrency", "1,2", "--duration", "3s", "--max-tokens", "512"];
    let mut child = crate::common::bin()
        .args(["run", "--url", &url, "--progress", "plain"])
        .args(matrix)
        .args(QUICK)
        .arg("--out")
        .arg(&out)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let reader = BufReader::new(child.stdout.take().unwrap());

    // while the first cell runs, a second process on the directory is refused and changes nothing
    let (_, reader) = next_cell_start(reader).await;
    let second = run(&out, &resume).await;
    assert_eq!(second.code, 1, "{}", second.stderr);
    let busy = format!("another speedmatrix process (PID {}) is running in", child.id());
    assert!(second.stderr.contains(&busy) && second.stderr.contains("run.lock"), "{}", second.stderr);

    // SIGKILL about a second into the second cell: no chance to write anything more
    let (killed, reader) = next_cell_start(reader).await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    child.kill().unwrap();
    child.wait().unwrap();
    drop(reader);
    let before = cells(&read_record(&out.join("run.json")));
    let in_progress = |c: &&(u64, u64, String)| (c.0, c.1) == killed;
    assert_eq!(before.len(), 1, "one cell finished before the kill: {before:?}");
    assert!(!before.iter().any(|c| in_progress(&c)), "{killed:?} was still in progress: {before:?}");

    let r = run(&out, &resume).await;
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(r.record()["status"], "complete");
    let after = cells(r.record());
    let unique: BTreeSet<_> = after.iter().map(|(c, n, _)| (*c, *n)).collect();
    assert_eq!(unique.len(), after.len(), "a cell was measured twice: {after:?}");
    // the cells of an uninterrupted run: every planned decode cell
    let planned: BTreeSet<_> = r.record()["plan"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|p| p["kind"] == "decode" && p["status"] == "planned")
        .map(|p| (p["context"].as_u64().unwrap(), p["concurrency"].as_u64().unwrap()))
        .collect();
    assert_eq!(unique, planned);
    assert_eq!(unique, BTreeSet::from([(1024, 1), (1024, 2), (2048, 1), (2048, 2)]));
    for cell in &before {
        assert!(after.contains(cell), "finished cell {cell:?} was lost or changed");
    }
    let again = after.iter().find(in_progress).expect("the killed cell");
    assert_eq!(again.2, "\"valid\"", "the killed cell is measured again");
    let prefill: Vec<u64> =
        r.record()["prefill"].as_array().unwrap().iter().map(|p| p["context"].as_u64().unwrap()).collect();
    assert_eq!(prefill, vec![1024, 2048], "prefill rows once each");
    let events = r.record()["events"].to_string();
    assert!(events.contains("run resumed"));
    // flags not repeated come from run.json: QUICK's, not the defaults (which would be refused)
    let settings = &r.record()["settings"];
    assert_eq!((settings["warmup_s"].as_f64(), settings["ready_stable_s"].as_f64()), (Some(0.0), Some(0.3)));
    assert!(!events.contains("decode warm-up"), "{events}");
    // kill -9 left run.lock behind (unlocked); the resume took it and removed it when it ended
    assert!(!out.join("run.lock").exists(), "run.lock left behind by the resumed run");
    sim.handle.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refused_resumes_list_every_difference_and_change_nothing() {
    let first = sim(SimSpec::default()).await;
    let url = first.handle.url();
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run");
    let mut args = vec!["--url", url.as_str(), "--contexts", "1k", "--concurrency", "1", "--duration", "1s"];
    args.extend_from_slice(QUICK);
    let r = run(&out, &args).await;
    assert_eq!(r.code, 0, "{}", r.stderr);
    // an interrupted run whose recorded prompt no longer matches what the server makes
    let mut record = r.record().clone();
    record["status"] = "interrupted".into();
    record["decode"] = serde_json::json!([]);
    record["prompts"][0]["hash"] = "0123456789abcdef".into();
    std::fs::write(out.join("run.json"), serde_json::to_string_pretty(&record).unwrap()).unwrap();
    let written = std::fs::read(out.join("run.json")).unwrap();
    let unchanged = || assert!(std::fs::read(out.join("run.json")).unwrap() == written, "run.json was changed");

    let resume = ["--resume", out.to_str().unwrap()];
    let other_settings = ["--max-tokens", "999", "--ready-stable", "2s"];
    let refused = run(&out, &[&resume[..], &other_settings[..]].concat()).await;
    assert_eq!(refused.code, 1, "{}", refused.stderr);
    for expected in [
        "max tokens: was 512, now 999",
        "ready-stable: was 0.3 s, now 2 s",
        "the prompt of context 1K is different now",
        "run without --resume",
    ] {
        assert!(refused.stderr.contains(expected), "{expected:?} missing:\n{}", refused.stderr);
    }
    unchanged();

    // another server that does not serve the model: the whole list, not a discovery error
    let second = sim(SimSpec { profile: "seed-ling-3.0-flash-h200nvl-x2", ..SimSpec::default() }).await;
    let second_url = second.handle.url();
    let elsewhere = run(&out, &[&resume[..], &["--url", second_url.as_str()]].concat()).await;
    assert_eq!(elsewhere.code, 1, "{}", elsewhere.stderr);
    let stderr = &elsewhere.stderr;
    assert!(!stderr.contains("is not served here"), "{stderr}");
    for expected in [
        format!("server URL: was {url}, now {second_url}"),
        "model: was tiny, now ling".to_string(),
        "max_model_len: was".to_string(),
        "run without --resume".to_string(),
    ] {
        assert!(stderr.contains(&expected), "{expected:?} missing:\n{stderr}");
    }
    unchanged();
    first.handle.shutdown().await;
    second.handle.shutdown().await;
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

/// Prefill rows `(context, status)` and decode cells `(context, concurrency, status)`.
type Statuses = (Vec<(u64, String)>, Vec<(u64, u64, String)>);

/// `--retry-failed`: after a transient fault, the cells and prefill rows that failed are measured
/// again and the good ones are kept as they were; a plain resume keeps the failures.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn retry_failed_measures_the_failed_cells_and_rows_again() {
    // the 2K prefill row and both 2K scouts (all max_tokens 1) get a 503, once each
    let sim =
        sim(SimSpec { faults: &["status=503@prompt= m0000002048],max-tokens=1,to=3"], ..SimSpec::default() }).await;
    let url = sim.handle.url();
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run");
    let mut args = vec!["--url", url.as_str(), "--contexts", "1k,2k", "--concurrency", "1,2", "--duration", "1s"];
    args.extend_from_slice(&["--prefill-contexts", "1k,2k"]);
    args.extend_from_slice(QUICK);
    let first = run(&out, &args).await;
    assert_eq!(first.code, 2, "some cells failed: {}", first.stderr);
    assert_eq!(first.record()["status"], "complete", "a complete run can be resumed to retry its failures");
    let status = |r: &serde_json::Value| -> Statuses {
        let rows =
            r["prefill"].as_array().unwrap().iter().map(|p| (p["context"].as_u64().unwrap(), p["status"].to_string()));
        (rows.collect::<Vec<_>>(), cells(r))
    };
    let failed = status(first.record());
    let errors = |s: &Statuses| {
        s.0.iter().filter(|r| r.1 == "\"error\"").count() + s.1.iter().filter(|c| c.2 == "\"error\"").count()
    };
    assert_eq!(errors(&failed), 3, "the 2K row and both 2K cells: {failed:?}");
    let good_1k = first.record()["decode"].as_array().unwrap().iter().filter(|c| c["context"] == 1024).cloned();
    let good_1k: Vec<_> = good_1k.collect();

    let resume = ["--resume", out.to_str().unwrap()];
    let plain = run(&out, &resume).await;
    assert_eq!(plain.code, 2, "a plain resume keeps the failures: {}", plain.stderr);
    assert_eq!(status(plain.record()), failed);

    let retried = run(&out, &[&resume[..], &["--retry-failed"]].concat()).await;
    assert_eq!(retried.code, 0, "{}", retried.stderr);
    let now = status(retried.record());
    assert_eq!(errors(&now), 0, "{now:?}");
    assert_eq!((now.0.len(), now.1.len()), (2, 4), "each row and cell once: {now:?}");
    let events = retried.record()["events"].to_string();
    assert!(events.contains("measuring again 2 cell(s) and 1 prefill row(s)"), "{events}");
    let kept: Vec<_> =
        retried.record()["decode"].as_array().unwrap().iter().filter(|c| c["context"] == 1024).cloned().collect();
    assert_eq!(kept, good_1k, "the valid cells are kept as they were");

    let alone = run(dir.path().join("other").as_path(), &["--retry-failed"]).await;
    assert_eq!(alone.code, 1, "--retry-failed without --resume is refused: {}", alone.stderr);
    assert!(alone.stderr.contains("--retry-failed works with --resume DIR"), "{}", alone.stderr);
    assert!(!alone.stderr.contains("measuring the built-in"), "refused before anything starts: {}", alone.stderr);
    sim.handle.shutdown().await;
}
