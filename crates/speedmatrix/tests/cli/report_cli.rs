//! `speedmatrix report` and `speedmatrix import` as a user runs them: exit
//! codes, where files go by default, only the named files with flags, the
//! `--open` warnings, and the three files a run writes when it ends.

use std::path::{Path, PathBuf};
use std::process::Output;

use crate::common::{QUICK, SimSpec, bin, run, sim};

fn reference(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/data/reference").join(name)
}

const LIL: &str = "ling-3.0-flash-int4-2xh200nvl.lil-bench-result.json";
const BENCH: &str = "llm-inference-bench-0.4.18.vllm-cpu-tiny.json";
const REPORTS: [&str; 3] = ["report.html", "report.md", "measurements.csv"];

/// Runs the binary with `args` in `cwd`.
fn speedmatrix(cwd: &Path, args: &[&str]) -> (i32, String, String) {
    let out: Output = bin().args(args).current_dir(cwd).output().expect("run speedmatrix");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn names(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> =
        std::fs::read_dir(dir).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
    v.sort();
    v
}

fn sorted(names: &[&str]) -> Vec<String> {
    let mut v: Vec<String> = names.iter().map(|s| s.to_string()).collect();
    v.sort();
    v
}

#[test]
fn unreadable_or_unknown_input_exits_2_naming_the_formats() {
    let dir = tempfile::tempdir().unwrap();
    let other = dir.path().join("other.json");
    std::fs::write(&other, r#"{"hello": "world"}"#).unwrap();
    let missing = dir.path().join("missing.json");
    for cmd in ["report", "import"] {
        let (code, _, err) = speedmatrix(dir.path(), &[cmd, other.to_str().unwrap()]);
        assert_eq!(code, 2, "{cmd}: {err}");
        assert!(err.contains("lil-bench-result/1") && err.contains("llm-inference-bench"), "{err}");
        let (code, _, err) = speedmatrix(dir.path(), &[cmd, missing.to_str().unwrap()]);
        assert_eq!(code, 2, "{cmd} of a missing file: {err}");
    }
    assert_eq!(names(dir.path()), ["other.json"], "nothing written");
}

#[test]
fn an_output_that_cannot_be_written_exits_1() {
    let dir = tempfile::tempdir().unwrap();
    let nowhere = dir.path().join("no-such-dir/page.html");
    let (code, _, err) =
        speedmatrix(dir.path(), &["report", reference(BENCH).to_str().unwrap(), "--html", nowhere.to_str().unwrap()]);
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("cannot write"), "{err}");
    // --out names a file, not a directory
    let file = dir.path().join("a-file");
    std::fs::write(&file, "x").unwrap();
    let (code, _, err) =
        speedmatrix(dir.path(), &["import", reference(BENCH).to_str().unwrap(), "--out", file.to_str().unwrap()]);
    assert_eq!(code, 1, "{err}");
}

#[test]
fn a_reference_file_is_rendered_into_the_current_directory_not_beside_it() {
    let src = tempfile::tempdir().unwrap();
    let file = src.path().join(LIL);
    std::fs::copy(reference(LIL), &file).unwrap();
    let cwd = tempfile::tempdir().unwrap();
    let (code, out, err) = speedmatrix(cwd.path(), &["report", file.to_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(names(cwd.path()), sorted(&REPORTS));
    assert_eq!(names(src.path()), [LIL], "the reference file's directory is left alone");
    for name in REPORTS {
        assert!(out.contains(&format!("wrote ./{name}")) || out.contains(&format!("wrote {name}")), "{out}");
    }
    let html = std::fs::read_to_string(cwd.path().join("report.html")).unwrap();
    assert!(html.contains("<h1>Ling-3.0-flash-int4 on H200 NVL 141GB ×2</h1>"));
}

#[test]
fn with_flags_only_the_named_files_are_written() {
    let dir = tempfile::tempdir().unwrap();
    let (code, out, err) = speedmatrix(dir.path(), &["report", reference(BENCH).to_str().unwrap(), "--md", "only.md"]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(names(dir.path()), ["only.md"]);
    assert!(out.contains("wrote only.md"), "{out}");
    assert!(std::fs::read_to_string(dir.path().join("only.md")).unwrap().starts_with("# tiny-llama"));

    let (code, _, err) =
        speedmatrix(dir.path(), &["report", reference(BENCH).to_str().unwrap(), "--csv", "m.csv", "--html", "p.html"]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(names(dir.path()), ["m.csv", "only.md", "p.html"]);
}

#[test]
fn import_writes_a_run_that_report_renders_next_to_it() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("imported/run-1");
    let (code, stdout, err) =
        speedmatrix(dir.path(), &["import", reference(LIL).to_str().unwrap(), "--out", out.to_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
    assert!(stdout.contains("7 prefill rows, 48 decode cells"), "{stdout}");
    assert_eq!(names(&out), ["run.json"]);
    let record: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("run.json")).unwrap()).unwrap();
    assert_eq!(record["schema"], sm_core::record::SCHEMA);

    // the run directory, then its run.json: the reports go next to it either way
    let (code, _, err) = speedmatrix(dir.path(), &["report", out.to_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
    let mut expected = REPORTS.to_vec();
    expected.push("run.json");
    assert_eq!(names(&out), sorted(&expected));
    std::fs::remove_file(out.join("report.md")).unwrap();
    let (code, _, err) = speedmatrix(dir.path(), &["report", out.join("run.json").to_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(names(&out), sorted(&expected));
    let md = std::fs::read_to_string(out.join("report.md")).unwrap();
    assert!(md.starts_with("# Ling-3.0-flash-int4 on H200 NVL 141GB ×2"), "{md}");
    assert_eq!(names(dir.path()), ["imported"], "nothing in the current directory");

    // a run killed before it wrote its reports: `report DIR` writes them from run.json
    let mut interrupted = record.clone();
    interrupted["status"] = "interrupted".into();
    std::fs::write(out.join("run.json"), interrupted.to_string()).unwrap();
    for name in REPORTS {
        std::fs::remove_file(out.join(name)).unwrap();
    }
    let (code, _, err) = speedmatrix(dir.path(), &["report", out.to_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(names(&out), sorted(&expected));
    let html = std::fs::read_to_string(out.join("report.html")).unwrap();
    assert!(html.contains("This run was interrupted"), "the page says the run is incomplete");

    // the default --out is the current directory
    let here = tempfile::tempdir().unwrap();
    let (code, _, err) = speedmatrix(here.path(), &["import", reference(BENCH).to_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(names(here.path()), ["run.json"]);
}

#[test]
fn report_prints_the_capacity_answer_and_judges_an_import_against_another_slo() {
    let dir = tempfile::tempdir().unwrap();
    let lil = reference(LIL);
    let (code, out, err) = speedmatrix(dir.path(), &["report", lil.to_str().unwrap(), "--md", "default.md"]);
    assert_eq!(code, 0, "{err}");
    assert!(out.starts_with("Capacity\nAt 8K context: "), "the answer comes first:\n{out}");
    assert!(out.contains("Users are simultaneous") && out.contains("Service level (SLO): "), "{out}");

    // a stricter SLO the file's medians can give: fewer users everywhere, said on the page
    let (code, out, err) = speedmatrix(
        dir.path(),
        &["report", lil.to_str().unwrap(), "--md", "strict.md", "--slo", "tok_s>=1000,ttft_p50<=1s"],
    );
    assert_eq!(code, 0, "{err}");
    let md = std::fs::read_to_string(dir.path().join("strict.md")).unwrap();
    assert!(md.contains("tok\\_s\\_p50&gt;=1000,ttft\\_p50&lt;=1s"), "the page names the SLO used:\n{md}");
    assert!(out.contains("no level meets the SLO"), "{out}");

    // the import command takes it too, and writes the judgement into run.json
    let (code, _, err) = speedmatrix(dir.path(), &["import", lil.to_str().unwrap(), "--slo", "tok_s>=1000"]);
    assert_eq!(code, 0, "{err}");
    let record: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.path().join("run.json")).unwrap()).unwrap();
    assert_eq!(record["settings"]["slo"], "tok_s_p50>=1000");
    assert!(record["capacity"].as_array().is_some_and(|c| !c.is_empty()), "{record}");

    // a bound the summaries cannot give is an error that says which bounds they can
    let (code, _, err) = speedmatrix(dir.path(), &["report", lil.to_str().unwrap(), "--slo", "ttft_p95<=1s"]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("ttft_p95") && err.contains("p50, p90 or p99"), "{err}");
    let (code, _, err) = speedmatrix(dir.path(), &["report", lil.to_str().unwrap(), "--slo", "speed>=3"]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("tok_s, ttft, ttfa, ttftc or tbt"), "{err}");

    // a run judged per request while it was measured keeps its own SLO
    let mut run: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(reference("../run-sample.json")).unwrap()).unwrap();
    run["settings"]["slo"] = "tok_s>=5".into();
    let path = dir.path().join("run.json");
    std::fs::write(&path, run.to_string()).unwrap();
    let (code, _, err) = speedmatrix(dir.path(), &["report", path.to_str().unwrap(), "--slo", "tok_s>=6"]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("judged against its own SLO (tok_s_p50>=5)"), "{err}");
}

#[test]
fn open_warns_when_there_is_no_page_or_no_opener() {
    let dir = tempfile::tempdir().unwrap();
    let (code, _, err) =
        speedmatrix(dir.path(), &["report", reference(BENCH).to_str().unwrap(), "--md", "x.md", "--open"]);
    assert_eq!(code, 0, "{err}");
    assert!(err.contains("no HTML page was written"), "{err}");

    // no xdg-open (or open) on the PATH: a warning, and the page is still written
    let empty = tempfile::tempdir().unwrap();
    let out = bin()
        .args(["report", reference(BENCH).to_str().unwrap(), "--html", "x.html", "--open"])
        .current_dir(dir.path())
        .env("PATH", empty.path())
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{err}");
    assert!(err.contains("warning: cannot open") && err.contains("not found"), "{err}");
    assert!(dir.path().join("x.html").is_file());

    // an opener that fails
    let bin_dir = tempfile::tempdir().unwrap();
    for name in ["xdg-open", "open"] {
        let path = bin_dir.path().join(name);
        std::fs::write(&path, "#!/bin/sh\necho 'no method available for opening' >&2\nexit 3\n").unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    let out = bin()
        .args(["report", reference(BENCH).to_str().unwrap(), "--html", "y.html", "--open"])
        .current_dir(dir.path())
        .env("PATH", bin_dir.path())
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{err}");
    assert!(err.contains("warning: cannot open") && err.contains("failed"), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_writes_the_three_reports_when_it_ends() {
    let dir = tempfile::tempdir().unwrap();
    let sim = sim(SimSpec::default()).await;
    let out = dir.path().join("out");
    let mut args =
        vec!["--url", sim.handle.url().leak(), "--contexts", "1k", "--concurrency", "1,2", "--duration", "2s"];
    args.extend_from_slice(QUICK);
    let r = run(&out, &args).await;
    sim.handle.shutdown().await;
    assert_eq!(r.code, 0, "stdout:\n{}\nstderr:\n{}", r.stdout, r.stderr);
    for name in REPORTS {
        assert!(out.join(name).is_file(), "{name} written; stdout:\n{}", r.stdout);
        assert!(r.stdout.contains(name), "the console names {name}:\n{}", r.stdout);
    }
    // the page is this run's: its own numbers and sections
    let record = r.record();
    let total = record["decode"][0]["total_tok_s"].as_f64().unwrap();
    let html = std::fs::read_to_string(out.join("report.html")).unwrap();
    assert!(html.contains(&sm_report::format::fixed1(total)), "the page shows {total}");
    for section in ["id=\"prefill\"", "id=\"sustained-decode\"", "id=\"all-measurements\"", "id=\"methodology\""] {
        assert!(html.contains(section), "{section}");
    }
    let csv = std::fs::read_to_string(out.join("measurements.csv")).unwrap();
    let decode_cells = record["decode"].as_array().unwrap().len();
    let prefill_rows = record["prefill"].as_array().unwrap().len();
    assert_eq!(csv.lines().count(), 1 + prefill_rows + decode_cells, "{csv}");
    let md = std::fs::read_to_string(out.join("report.md")).unwrap();
    assert!(md.contains("## Sustained decode") && md.contains("| 1K |"), "{md}");
    // the end-of-run console view: the decode matrix
    assert!(r.stdout.contains("Sustained decode: total tok/s"), "{}", r.stdout);
}
