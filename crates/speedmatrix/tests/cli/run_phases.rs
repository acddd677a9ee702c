//! What every load phase shares (methodology §13): a run with phases measures only them unless
//! `--matrix`, says so in its plan and pages, runs them in order, and records each phase asked for
//! before anything is measured, so a run stopped before a phase began still runs it on `--resume`.

use std::time::Duration;

use serde_json::{Value, json};

use crate::common::{SimSpec, bin, interrupt, run, sim, spawn_run, wait_for_record};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_phase_not_yet_begun_when_the_run_stopped_runs_on_resume() {
    let sim = sim(SimSpec::default()).await;
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().to_path_buf();
    let url = sim.handle.url();
    // two 3 s rate levels, then one conversation: Ctrl-C inside the second level stops the run
    // before the sessions phase began
    let args = [
        ["--url", &url, "--contexts", "1k", "--request-rate", "10,20", "--duration", "3s"].as_slice(),
        &["--sessions", "1", "--turns", "2", "--think-time", "100ms", "--turn-tokens", "32"],
        &["--max-tokens", "8", "--ready-stable", "300ms"],
    ]
    .concat();
    let child = spawn_run(&out, &args);
    let levels = |v: &Value| v["phases"]["rate"]["levels"].as_array().map_or(0, Vec::len);
    let declared = wait_for_record(&out, "a finished level", |v| levels(v) >= 1).await;
    assert_eq!(declared["settings"]["matrix"], false, "{}", declared["settings"]);
    assert_eq!(
        declared["phases"]["sessions"]["settings"]["users"], 1,
        "declared before it runs: {}",
        declared["phases"]
    );
    assert_eq!(declared["phases"]["sessions"]["sessions"], serde_json::json!([]));
    assert!(declared["decode"].as_array().unwrap().is_empty() && declared["prefill"].as_array().unwrap().is_empty());
    let stopped = interrupt(child, &out, Duration::from_millis(500)).await;
    assert_eq!(stopped.code, 130, "{}\n{}", stopped.stdout, stopped.stderr);
    assert!(
        stopped.stdout.contains("plan: the load phases only (rate, sessions); no decode matrix"),
        "{}",
        stopped.stdout
    );
    assert!(!stopped.stdout.contains("Sustained decode"), "no empty matrix is printed: {}", stopped.stdout);
    assert_eq!(stopped.record()["phases"]["sessions"]["sessions"], serde_json::json!([]));

    // the resume names no phase flag: both phases come from the record
    let resumed = run(&out, &["--resume", out.to_str().unwrap()]).await;
    sim.handle.shutdown().await;
    assert_eq!(resumed.code, 0, "{}", resumed.stderr);
    let rec = resumed.record();
    assert_eq!(rec["status"], "complete");
    let levels = rec["phases"]["rate"]["levels"].as_array().unwrap();
    assert_eq!(levels.len(), 2, "{levels:?}");
    let sessions = rec["phases"]["sessions"]["sessions"].as_array().unwrap();
    assert_eq!(sessions.len(), 1, "{sessions:?}");
    assert_eq!(sessions[0]["status"], "complete", "{}", sessions[0]);
    assert_eq!(sessions[0]["turns"].as_array().unwrap().len(), 2);
    assert!(rec["decode"].as_array().unwrap().is_empty(), "the matrix never ran");
    // the pages carry the phases and no empty matrix
    let md = std::fs::read_to_string(out.join("report.md")).unwrap();
    assert!(!md.contains("## Sustained decode") && !md.contains("## Prefill"), "{md}");
    let html = std::fs::read_to_string(out.join("report.html")).unwrap();
    assert!(!html.contains("id=\"sustained-decode\"") && !html.contains("id=\"all-measurements\""));
    for file in ["rate.csv", "sessions.csv"] {
        assert!(out.join(file).exists(), "{file}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn matrix_adds_the_decode_matrix_before_the_phases() {
    let sim = sim(SimSpec::default()).await;
    let dir = tempfile::tempdir().unwrap();
    let url = sim.handle.url();
    let args = [
        "--url",
        url.as_str(),
        "--contexts",
        "1k",
        "--concurrency",
        "1",
        "--duration",
        "1s",
        "--ready-stable",
        "300ms",
        "--warmup",
        "0s",
        "--no-prefill-at-max",
        "--max-tokens",
        "8",
        "--burst",
        "--matrix",
    ];
    let r = run(dir.path(), &args).await;
    sim.handle.shutdown().await;
    assert_eq!(r.code, 0, "{}", r.stderr);
    let rec = r.record();
    assert!(rec["settings"].get("matrix").is_none(), "true is the default and is not written");
    assert_eq!(rec["decode"].as_array().unwrap().len(), 1);
    assert_eq!(rec["prefill"].as_array().unwrap().len(), 1);
    assert_eq!(rec["phases"]["burst"]["bursts"].as_array().unwrap().len(), 1);
    assert!(r.stdout.contains("; then the load phases: burst"), "{}", r.stdout);
    // the matrix's events come before the burst's
    let events: Vec<&str> = rec["events"].as_array().unwrap().iter().filter_map(|e| e["text"].as_str()).collect();
    let cell = events.iter().position(|e| e.starts_with("cell 1K × 1 done")).expect("cell event");
    let burst = events.iter().position(|e| e.starts_with("burst ")).expect("burst event");
    assert!(cell < burst, "{events:?}");
}

#[test]
fn matrix_without_a_phase_and_prompts_without_a_phase_that_sends_them_are_refused() {
    let out = bin().args(["run", "--matrix", "--dry-run"]).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("--matrix goes with a load phase"), "{err}");
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("p.jsonl");
    std::fs::write(&file, "{\"prompt\": \"hi\"}\n").unwrap();
    let out = bin().args(["run", "--dry-run", "--prompts"]).arg(&file).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("--prompts is used by the load phases"), "{err}");
    std::fs::write(&file, "{\"prompt\": \"hi\"}\n{\"prompt\": 3}\n").unwrap();
    let out = bin().args(["run", "--dry-run", "--burst", "--prompts"]).arg(&file).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("line 2:") && err.contains("\"messages\""), "{err}");
}

/// One short run of all four phases (no matrix) against the simulated engine: its record.
pub async fn every_phase_run() -> Value {
    let sim = sim(SimSpec::default()).await;
    let dir = tempfile::tempdir().unwrap();
    let url = sim.handle.url();
    let args = [
        "--url",
        url.as_str(),
        "--contexts",
        "1k",
        "--concurrency",
        "2",
        "--max-tokens",
        "8",
        "--ready-stable",
        "300ms",
        "--request-rate",
        "20",
        "--requests",
        "4",
        "--burst",
        "--mixed-prefill",
        "2k@2",
        "--mixed-prefill-probes",
        "1",
        "--mixed-prefill-window",
        "500ms",
        "--sessions",
        "2",
        "--turns",
        "2",
        "--think-time",
        "100ms",
        "--turn-tokens",
        "32",
    ];
    let r = run(dir.path(), &args).await;
    sim.handle.shutdown().await;
    assert_eq!(r.code, 0, "{}", r.stderr);
    // no decode matrix, no prefill row: no measurements.csv of a header alone, the phases' CSVs listed
    assert!(!dir.path().join("measurements.csv").exists());
    assert!(r.stdout.contains("rate.csv") && r.stdout.contains("sessions.csv"), "{}", r.stdout);
    let rec = r.record().clone();
    for phase in ["rate", "burst", "mixed_prefill", "sessions"] {
        assert!(rec["phases"][phase].is_object(), "{phase}: {}", rec["phases"]);
    }
    rec
}

/// Text a server sent (a failure's reason) or a label lands in every phase's CSV as text, never
/// as a spreadsheet formula; `report --csv FILE` writes each phase's CSV beside FILE.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn phase_csvs_never_carry_a_formula_and_report_writes_them_beside_the_csv() {
    let mut rec = every_phase_run().await;
    let evil = "=HYPERLINK(\"http://x\",\"y\")";
    rec["phases"]["rate"]["levels"][0]["reason"] = json!(evil);
    rec["phases"]["rate"]["levels"][0]["label"] = json!("+1K");
    rec["phases"]["burst"]["bursts"][0]["reason"] = json!(evil);
    rec["phases"]["burst"]["bursts"][0]["label"] = json!("@1K");
    rec["phases"]["mixed_prefill"]["levels"][0]["probes"][0]["error"] = json!(evil);
    rec["phases"]["sessions"]["sessions"][0]["turns"][0]["reason"] = json!(evil);
    let dir = tempfile::tempdir().unwrap();
    let run_json = dir.path().join("run.json");
    std::fs::write(&run_json, rec.to_string()).unwrap();
    let csv = dir.path().join("out").join("m.csv");
    std::fs::create_dir_all(csv.parent().unwrap()).unwrap();
    let out = bin().args(["report"]).arg(&run_json).arg("--csv").arg(&csv).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(!csv.exists(), "a phases-only run has no measurements to put in --csv FILE");
    assert!(String::from_utf8_lossy(&out.stderr).contains("load phases only"));
    for phase in ["rate", "burst", "mixed_prefill", "sessions"] {
        let path = csv.with_file_name(format!("m-{phase}.csv"));
        let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        assert!(text.lines().count() >= 2, "{phase}: {text}");
        for line in text.lines() {
            // a field starts after a comma or at the line's start, quoted or not
            for field in line.split(',') {
                let f = field.trim_start_matches('"');
                assert!(!f.starts_with(['=', '+', '@']), "{phase}: a formula in {line}");
            }
        }
    }
    let rate = std::fs::read_to_string(csv.with_file_name("m-rate.csv")).unwrap();
    assert!(rate.contains("'=HYPERLINK") && rate.contains("'+1K"), "{rate}");
}
