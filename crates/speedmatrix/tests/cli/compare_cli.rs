//! `speedmatrix compare` end to end: runs of the simulated engine, whose speed the profile sets,
//! compared with each other. Two runs of one profile pass `--fail-on`; a profile whose decode steps
//! are 5 % longer fails it, naming the cells and the bound, in every format; bad bounds and inputs
//! get a clear error and exit 2.

use std::path::Path;
use std::process::Output;

use serde_json::Value;

use crate::common::{QUICK, SimSpec, bin, run, sim};

/// A profile whose decode step at 1 and 4 streams is `scale` × 4 and 5 ms, at every context.
fn profile(dir: &Path, name: &str, scale: f64) -> String {
    let (s1, s4) = (4.0 * scale, 5.0 * scale);
    let toml = format!(
        "name = \"{name}\"\nmodel = \"compare-test\"\nmax_model_len = 4096\nkv_cache_tokens = 1048576\n\
         block_size = 16\nmax_num_seqs = 64\nmax_num_batched_tokens = 4096\n\
         [prefill]\ncontexts = [1024, 4096]\ntokens_per_s = [400000, 400000]\n\
         [decode]\nbatch = [1, 4]\ncontexts = [1024, 4096]\nstep_ms = [[{s1}, {s1}], [{s4}, {s4}]]\n\
         [overhead]\ncached_prefill_ms = 2\n"
    );
    let path = dir.join(format!("{name}.toml"));
    std::fs::write(&path, toml).unwrap();
    path.to_str().unwrap().to_string()
}

/// A short run of `profile` into `out`: contexts 1K, 1 and 4 users, 2 s windows.
async fn measure(profile: &str, out: &Path) {
    let sim = sim(SimSpec { profile, ..SimSpec::default() }).await;
    let url = sim.handle.url();
    let mut args = vec!["--url", url.as_str(), "--contexts", "1k", "--concurrency", "1,4", "--duration", "2s"];
    args.extend_from_slice(QUICK);
    let r = run(out, &args).await;
    sim.handle.shutdown().await;
    assert_eq!(r.code, 0, "stdout:\n{}\nstderr:\n{}", r.stdout, r.stderr);
    assert!(r.cells().iter().all(|c| c["status"] == "valid" && c["ci"]["total_tok_s"].is_object()), "{}", r.record());
}

pub fn compare(args: &[&str]) -> (i32, String, String) {
    let Output { status, stdout, stderr } = bin().arg("compare").args(args).output().unwrap();
    (
        status.code().unwrap_or(-1),
        String::from_utf8_lossy(&stdout).into_owned(),
        String::from_utf8_lossy(&stderr).into_owned(),
    )
}

const GATE: &str = "total_tok_s<-3%,ttft_p90>+10%";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn identical_runs_pass_and_a_planted_five_percent_regression_fails() {
    let dir = tempfile::tempdir().unwrap();
    let base = profile(dir.path(), "base", 1.0);
    let slow = profile(dir.path(), "slow", 1.05);
    let (a, a2, b) = (dir.path().join("a"), dir.path().join("a2"), dir.path().join("b"));
    measure(&base, &a).await;
    measure(&base, &a2).await;
    measure(&slow, &b).await;
    let (a, a2, b) = (a.to_str().unwrap(), a2.to_str().unwrap(), b.to_str().unwrap());

    // the same profile twice: no difference beyond the bound and the noise
    let (code, out, err) = compare(&[a, &format!("{a2}/run.json"), "--fail-on", GATE]);
    assert_eq!(code, 0, "{out}\n{err}");
    assert!(out.contains("B compared with A: 2 cells compared") && out.contains("passed"), "{out}");

    // 5 % longer steps: total tok/s about 4.8 % lower, beyond both runs' intervals, in both cells
    let (code, out, err) = compare(&[a, b, "--fail-on", GATE]);
    assert_eq!(code, 1, "{out}\n{err}");
    assert!(out.contains("FAILED (2 failures)"), "{out}");
    for cell in ["1K × 1", "1K × 4"] {
        let line = out
            .lines()
            .find(|l| l.starts_with(&format!("B {cell}: total_tok_s -")))
            .unwrap_or_else(|| panic!("{cell}: {out}"));
        assert!(line.contains("is past total_tok_s<-3%"), "{line}");
    }
    // the capacity answers side by side
    assert!(out.contains("capacity, max users (bounded by):"), "{out}");
    // without a gate, the differences are printed and the exit status is 0
    let (code, plain, _) = compare(&[a, b]);
    assert_eq!(code, 0, "{plain}");
    assert!(plain.contains("*") && !plain.contains("--fail-on"), "{plain}");

    // JSON: the documented shape, the same verdict
    let (code, json, _) = compare(&[a, a2, b, "--fail-on", GATE, "--format", "json"]);
    assert_eq!(code, 1);
    let v: Value = serde_json::from_str(&json).unwrap();
    assert_eq!(v["format"], "speedmatrix.compare/1");
    assert_eq!((v["gate"]["fail_on"].as_str(), v["gate"]["passed"].as_bool()), (Some(GATE), Some(false)));
    let [same, slower] = [&v["comparisons"][0], &v["comparisons"][1]];
    assert_eq!((same["run"].as_str(), slower["run"].as_str()), (Some("B"), Some("C")));
    assert_eq!(same["failures"], serde_json::json!([]));
    for cell in slower["cells"].as_array().unwrap() {
        let total = &cell["figures"]["total_tok_s"];
        let pct = total["diff_pct"].as_f64().unwrap();
        assert!((-6.5..=-3.0).contains(&pct), "{cell}");
        assert_eq!(total["significance"], "significant", "{cell}");
    }
    let failed: Vec<(u64, &str)> = slower["failures"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| (f["concurrency"].as_u64().unwrap(), f["bound"].as_str().unwrap()))
        .collect();
    assert_eq!(failed, [(1, "total_tok_s<-3%"), (4, "total_tok_s<-3%")]);

    // Markdown for a CI comment: a table per run, significant differences in bold, the verdict
    let (code, md, _) = compare(&[a, b, "--fail-on", GATE, "--format", "markdown"]);
    assert_eq!(code, 1);
    assert!(
        md.contains(
            "| Context | Users | Requests | total tok/s | per-request tok/s | TTFT p50 | TTFT p90 | TBT p50 | TBT p99 |"
        ),
        "{md}"
    );
    let row =
        md.lines().find(|l| l.starts_with("| ❌ 1K | 4 | ") && l.contains("| **-")).unwrap_or_else(|| panic!("{md}"));
    assert!(row.contains("%\\***"), "{row}");
    assert!(md.contains("**--fail-on total\\_tok\\_s&lt;-3%,ttft\\_p90&gt;+10%: FAILED (2 failures)**"), "{md}");
}

/// A run recorded before speedmatrix.run/1.2 has no intervals: its differences say so and never
/// fail a bound, however large.
#[test]
fn runs_without_intervals_never_fail_the_gate() {
    let dir = tempfile::tempdir().unwrap();
    let sample = concat!(env!("CARGO_MANIFEST_DIR"), "/../../tests/data/run-sample.json");
    let mut slower: Value = serde_json::from_str(&std::fs::read_to_string(sample).unwrap()).unwrap();
    for cell in slower["decode"].as_array_mut().unwrap() {
        if let Some(t) = cell["total_tok_s"].as_f64() {
            cell["total_tok_s"] = (t * 0.5).into();
        }
    }
    let b = dir.path().join("b.json");
    std::fs::write(&b, slower.to_string()).unwrap();
    let (code, out, err) = compare(&[sample, b.to_str().unwrap(), "--fail-on", "total_tok_s<-3%"]);
    assert_eq!(code, 0, "{out}\n{err}");
    assert!(out.contains("-50.0 %?") && out.contains("? no interval") && out.contains("passed"), "{out}");
}

#[test]
fn bad_bounds_and_inputs_are_refused_clearly() {
    let dir = tempfile::tempdir().unwrap();
    let sample = concat!(env!("CARGO_MANIFEST_DIR"), "/../../tests/data/run-sample.json");
    let cases: Vec<(Vec<String>, &str)> = vec![
        (vec![sample.into()], "required"),
        (
            vec![sample.into(), sample.into(), "--fail-on".into(), "total_tok_s<3%".into()],
            "signed percentage such as -3% or +10%",
        ),
        (
            vec![sample.into(), sample.into(), "--fail-on".into(), "speed<-3%".into()],
            "the figures are total_tok_s, per_request_tok_s, ttft_p50, ttft_p90, tbt_p50, tbt_p99",
        ),
        (vec![sample.into(), sample.into(), "--format".into(), "html".into()], "possible values: text, markdown, json"),
        (
            vec![sample.into(), "no-such-run".into()],
            "run B (no-such-run): no such file or directory; for a run on a results site give its address",
        ),
        (vec![sample.into(), "abc".into(), "--site".into(), "127.0.0.1:1".into()], "give the site's address"),
        (vec![sample.into(), "http://127.0.0.1:1/compare?ids=a".into()], "not a run's address on a results site"),
        (
            vec![sample.into(), "http://127.0.0.1:1/runs/abc".into()],
            "cannot reach http://127.0.0.1:1/runs/abc/run.json",
        ),
    ];
    let not_json = dir.path().join("notes.txt");
    std::fs::write(&not_json, "hello").unwrap();
    let future = dir.path().join("future.json");
    std::fs::write(&future, r#"{"schema":"speedmatrix.run/2","decode":[]}"#).unwrap();
    let dir_without = dir.path().join("empty");
    std::fs::create_dir(&dir_without).unwrap();
    let more: Vec<(Vec<String>, &str)> = vec![
        (vec![not_json.display().to_string(), sample.into()], "run A"),
        (vec![sample.into(), not_json.display().to_string()], "not JSON"),
        (
            vec![sample.into(), future.display().to_string()],
            "schema \"speedmatrix.run/2\", which this version cannot read (it reads speedmatrix.run/1 and /1.N): a newer speedmatrix wrote it; update speedmatrix",
        ),
        (vec![sample.into(), dir_without.display().to_string()], "a directory without a run.json"),
    ];
    for (args, expected) in cases.into_iter().chain(more) {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let (code, out, err) = compare(&args);
        assert_eq!(code, 2, "{args:?}: {out}\n{err}");
        assert!(err.contains(expected), "{args:?}: {err}");
        assert!(out.is_empty(), "{args:?}: {out}");
    }
}

/// A reference-tool file (llm-inference-bench JSON) is imported on the fly: against itself every
/// figure differs by 0 with the no-interval mark and the gate passes; a copy whose 4-user cell is
/// twice as slow still passes (no interval, never significant), and one whose 1-user cell failed
/// fails the gate as a lost cell (docs/compare.md).
#[test]
fn a_reference_tool_file_is_compared_with_its_marks() {
    let dir = tempfile::tempdir().unwrap();
    let reference = concat!(env!("CARGO_MANIFEST_DIR"), "/../../tests/data/bench/bench-0.7.0.json");
    let (code, out, err) = compare(&[reference, reference, "--fail-on", GATE]);
    assert_eq!(code, 0, "{out}\n{err}");
    assert!(out.contains("B compared with A: 2 cells compared"), "{out}");
    for users in [1, 4] {
        let row = out.lines().find(|l| l.starts_with(&format!("16K      {users} "))).unwrap_or_else(|| panic!("{out}"));
        assert!(row.contains("+0.0 %?") && !row.contains('*'), "no interval, no significance: {row}");
    }
    assert!(out.contains(&format!("--fail-on {GATE}: passed")), "{out}");

    let edited = |edit: &dyn Fn(&mut Value), name: &str| {
        let mut v: Value = serde_json::from_str(&std::fs::read_to_string(reference).unwrap()).unwrap();
        for cell in v["results"].as_array_mut().unwrap().iter_mut().filter(|c| c["benchmark_mode"] == "duration") {
            edit(cell);
        }
        let path = dir.path().join(name);
        std::fs::write(&path, v.to_string()).unwrap();
        path.to_str().unwrap().to_string()
    };
    let halved = edited(
        &|c| {
            if c["concurrency"] == 4 {
                c["aggregate_tps"] = 60.25.into()
            }
        },
        "halved.json",
    );
    let (code, out, err) = compare(&[reference, &halved, "--fail-on", GATE, "--format", "json"]);
    assert_eq!(code, 0, "a difference without intervals fails no bound: {out}\n{err}");
    let json: Value = serde_json::from_str(&out).unwrap();
    let cells = json["comparisons"][0]["cells"].as_array().unwrap();
    let four = cells.iter().find(|c| c["concurrency"] == 4).unwrap();
    assert_eq!(four["figures"]["total_tok_s"]["diff_pct"], -50.0, "{four}");
    assert_eq!(four["figures"]["total_tok_s"]["significance"], "no_interval", "{four}");
    assert_eq!(json["gate"]["passed"], true, "{json}");

    let broken = edited(
        &|c| {
            if c["concurrency"] == 1 {
                c["failure_reason"] = "stream stalled".into()
            }
        },
        "broken.json",
    );
    let (code, out, err) = compare(&[reference, &broken, "--fail-on", GATE]);
    assert_eq!(code, 1, "a cell valid in A and not in B fails the gate: {out}\n{err}");
    assert!(out.contains("not compared: valid in A, error in B"), "{out}");
    assert!(out.contains("FAILED (1 failure"), "{out}");
}

/// A run with `--contexts 8k,256k` on a 262,144-token model measures 256K at 257,984 tokens; the
/// published run it replays measured the reference tool's `251K`, 257,024 tokens. The command
/// pairs the two (0.4 % apart), names both and compares them, instead of "only in A" / "only in B"
/// and "—" at the longest context; a TTFT from fewer requests than its percentile needs gets no
/// percentage, and every row says how many requests each run's cell rests on.
#[test]
fn the_longest_context_pairs_with_the_published_runs_and_few_requests_give_no_percentage() {
    let dir = tempfile::tempdir().unwrap();
    let sample = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../tests/data/run-sample.json"))
        .unwrap()
        .replace("131072", "257984")
        .replace("\"128K\"", "\"256K\"");
    let fitted = dir.path().join("fitted.json");
    std::fs::write(&fitted, sample).unwrap();
    let page = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../tests/data/reference/ling-3.0-flash-int4-2xh200nvl.lil-bench-result.json"
    );
    let (code, out, err) = compare(&[fitted.to_str().unwrap(), page]);
    assert_eq!(code, 0, "{out}\n{err}");
    let longest: Vec<&str> = out.lines().filter(|l| l.starts_with("256K (257,984) ≈ 251K")).collect();
    assert!(!longest.is_empty(), "{out}");
    assert!(longest.iter().any(|l| l.contains(" %")), "the longest context is compared: {out}");
    let apart = |l: &&str| l.starts_with("251K") || (l.starts_with("256K (257,984)") && !l.contains('≈'));
    assert!(!out.lines().any(|l| apart(&l)), "one row, not two: {out}");
    // 8K × 1 rests on 2 requests in the sample: its TTFT gives no percentage
    let one = out.lines().find(|l| l.starts_with("8K ") && l.split_whitespace().nth(1) == Some("1")).unwrap();
    assert!(one.contains("— (n < 6)") && one.contains("2/"), "{one}\n{out}");
    assert!(out.contains("fewer requests than its percentile's interval needs"), "{out}");
    let (code, json, _) = compare(&[fitted.to_str().unwrap(), page, "--format", "json"]);
    assert_eq!(code, 0);
    let v: Value = serde_json::from_str(&json).unwrap();
    let cells = v["comparisons"][0]["cells"].as_array().unwrap();
    let paired = cells.iter().find(|c| c["context"] == 257_984 && c["outcome"] == "compared").expect("paired");
    assert_eq!(
        (paired["b_context"].as_u64(), paired["label"].as_str()),
        (Some(257_024), Some("256K (257,984) ≈ 251K"))
    );
}
