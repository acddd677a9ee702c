//! The capacity answer against the simulated engine, whose step times are known exactly: the
//! capacity `--find-capacity` finds is the one the profile gives, for several profiles and SLOs,
//! bounded by the SLO (bisection), the KV cache and max_num_seqs (upward search clamped to what
//! fits), and the matrix's top (with and without a search); goodput is checked against the sim's
//! trace; a search is added to a finished run, and an interrupted one resumed.

use std::path::Path;

use serde_json::Value;
use sm_sim::{Flavor, Profile};

use crate::common::{QUICK, RunResult, SimSpec, interrupt, run, sim, spawn_run, trace_lines, wait_for_record};

/// A profile whose decode step is `step_ms` at each batch size of `batch`, the same at every
/// context, so a user's speed depends only on how many streams run. (The sim interpolates
/// log-linearly between batch sizes: the tests list every size they measure.)
fn profile(dir: &Path, name: &str, kv_cache_tokens: u64, max_num_seqs: u64, batch: &[u32], step_ms: &[f64]) -> String {
    let rows: Vec<String> = step_ms.iter().map(|s| format!("[{s}, {s}]")).collect();
    assert_eq!(batch.len(), step_ms.len());
    let toml = format!(
        "name = \"{name}\"\nmodel = \"{name}\"\nmax_model_len = 4096\nkv_cache_tokens = {kv_cache_tokens}\n\
         block_size = 16\nmax_num_seqs = {max_num_seqs}\nmax_num_batched_tokens = 4096\n\
         [prefill]\ncontexts = [1024, 4096]\ntokens_per_s = [400000, 400000]\n\
         [decode]\nbatch = {batch:?}\ncontexts = [1024, 4096]\nstep_ms = [{}]\n\
         [overhead]\ncached_prefill_ms = 2\n",
        rows.join(", ")
    );
    let path = dir.join(format!("{name}.toml"));
    std::fs::write(&path, toml).unwrap();
    path.to_str().unwrap().to_string()
}

/// The largest C whose users get at least `tok_s` from the profile, among those that fit.
fn truth(profile: &str, tok_s: f64, fits: u32) -> u32 {
    let p = Profile::resolve(profile).unwrap();
    (1..=fits).take_while(|&c| 1000.0 / p.step_ms(f64::from(c), 1024.0) >= tok_s).last().unwrap_or(0)
}

async fn capacity_run(dir: &Path, profile: &str, args: &[&str]) -> RunResult {
    capacity_run_on(dir, SimSpec { profile, ..SimSpec::default() }, args).await
}

/// As [`capacity_run`], against a sim of another flavor (which says other things about its limits).
async fn capacity_run_on(dir: &Path, spec: SimSpec<'_>, args: &[&str]) -> RunResult {
    let sim = sim(spec).await;
    let url = sim.handle.url();
    let mut all = vec!["--url", url.as_str(), "--contexts", "1k", "--duration", "2s", "--max-tokens", "512"];
    all.extend_from_slice(QUICK);
    all.extend_from_slice(args);
    let r = run(&dir.join("out"), &all).await;
    sim.handle.shutdown().await;
    assert_eq!(r.code, 0, "stdout:\n{}\nstderr:\n{}", r.stdout, r.stderr);
    r
}

fn answer(r: &RunResult) -> &Value {
    let caps = r.record()["capacity"].as_array().expect("capacity[]");
    assert_eq!(caps.len(), 1, "{caps:?}");
    &caps[0]
}

fn searched(r: &RunResult) -> Vec<u64> {
    r.cells().iter().filter(|c| c["searched"] == true).map(|c| c["concurrency"].as_u64().unwrap()).collect()
}

/// Batch sizes 1–16 at 10 ms per stream: a user's speed is 100 / C tok/s.
const LINEAR_BATCH: [u32; 16] = [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16];

fn linear_steps() -> Vec<f64> {
    LINEAR_BATCH.iter().map(|&c| 10.0 * f64::from(c)).collect()
}

/// Every user's speed falls as 100 / C tok/s: the SLO bounds the answer, found by bisection between
/// the matrix's 4 (passes) and 16 (fails).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_search_finds_the_profiles_capacity_under_the_slo() {
    let dir = tempfile::tempdir().unwrap();
    let linear = profile(dir.path(), "linear", 1 << 20, 64, &LINEAR_BATCH, &linear_steps());
    // 11 users get 9.09 tok/s, 12 get 8.33: the limit lies between, 4 % from each
    let expected = truth(&linear, 8.7, 64);
    assert_eq!(expected, 11, "the profile's own answer");
    let slo = ["--slo", "tok_s_p10>=8.7,ttft_p90<=2s", "--concurrency", "1,4,16", "--find-capacity"];
    let r = capacity_run(dir.path(), &linear, &slo).await;
    let a = answer(&r);
    assert_eq!(a["max_users"], expected, "{a}");
    assert_eq!((a["bounded_by"].as_str(), a["cell"].as_u64()), (Some("slo:tok_s_p10"), Some(11)));
    assert_eq!(a["failed_cell"], 12, "{a}");
    let mut levels = searched(&r);
    levels.sort_unstable();
    assert_eq!(levels, [10, 11, 12, 13], "bisection 4..16: 10, 13, 11, 12");
    for cell in r.cells() {
        let c = cell["concurrency"].as_f64().unwrap();
        assert_eq!(cell["slo_met"], c <= 11.0, "{cell}");
        let tok_s = cell["slo_bounds"][0]["value"].as_f64().unwrap();
        assert!(
            (tok_s * c / 100.0 - 1.0).abs() < 0.03,
            "{c} users: {tok_s} tok/s each, the profile gives {}",
            100.0 / c
        );
    }
    assert_eq!(r.record()["settings"]["slo"], "tok_s_p10>=8.7,ttft_p90<=2s");
    let log = &r.stdout;
    assert!(log.contains("capacity search at 1K: 4 users meet the SLO, 16 do not; measuring 10"), "{log}");
    assert!(log.contains("decode matrix done: 3 of 3 cells measured (3 valid)"), "{log}");
}

/// The same speeds with a KV cache that holds 6 users of 1K + 512 tokens each: every level that
/// fits passes, so the search doubles to the KV limit and the answer is bounded by the cache.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_kv_cache_bounds_the_answer_for_distinct_users() {
    let dir = tempfile::tempdir().unwrap();
    let small = profile(dir.path(), "small-kv", 6 * (1024 + 512), 64, &LINEAR_BATCH, &linear_steps());
    let slo = ["--slo", "tok_s>=5,ttft_p90<=2s", "--concurrency", "1,4,16", "--find-capacity", "--cost-per-hour", "9"];
    let r = capacity_run(dir.path(), &small, &slo).await;
    let a = answer(&r);
    assert_eq!(truth(&small, 5.0, 6), 6);
    assert_eq!((a["max_users"].as_u64(), a["bounded_by"].as_str()), (Some(6), Some("kv_cache")), "{a}");
    assert_eq!(a["fit_limit"], 6);
    assert_eq!(searched(&r), [6], "doubling from 4 is clamped to what fits");
    assert_eq!(r.cell(1024, 16)["status"], "over_capacity");
    // $9/h over 6 users; the capacity cell's tokens priced at its rate
    assert!((a["usd_per_user_hour"].as_f64().unwrap() - 1.5).abs() < 1e-9, "{a}");
    let cell = r.cell(1024, 6);
    let total = cell["total_tok_s"].as_f64().unwrap();
    let usd = cell["usd_per_million_tokens"].as_f64().unwrap();
    assert!((usd - 9.0 / (total * 3600.0) * 1e6).abs() < 1e-3, "{cell}");
    assert_eq!(a["usd_per_million_tokens"], cell["usd_per_million_tokens"]);
}

/// A knee: 250 tok/s per user up to 8 streams, then much slower. Another profile and SLO, found
/// from a coarse matrix (1 passes, 16 fails); and without a search, a matrix that passes everywhere
/// says `matrix_top`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_knee_is_found_and_an_unsearched_matrix_says_matrix_top() {
    let dir = tempfile::tempdir().unwrap();
    let knee = profile(dir.path(), "knee", 1 << 20, 64, &[1, 8, 9, 16, 64], &[4.0, 4.0, 6.0, 20.0, 100.0]);
    let expected = truth(&knee, 200.0, 64);
    assert_eq!(expected, 8);
    let slo = ["--slo", "tok_s_p10>=200,tbt_p99<=4.5ms", "--concurrency", "1,16", "--find-capacity"];
    let r = capacity_run(&dir.path().join("a"), &knee, &slo).await;
    let a = answer(&r);
    assert_eq!(a["max_users"], expected, "{a}");
    assert_eq!(a["bounded_by"], "slo:tok_s_p10");
    let bounds = r.cell(1024, 16)["slo_bounds"].as_array().unwrap().clone();
    assert!(bounds.iter().all(|b| b["holds"] == false), "both bounds fail at 16: {bounds:?}");

    let plain = ["--slo", "tok_s_p10>=200", "--concurrency", "1,2,4"];
    let r = capacity_run(&dir.path().join("b"), &knee, &plain).await;
    let a = answer(&r);
    assert_eq!((a["max_users"].as_u64(), a["bounded_by"].as_str()), (Some(4), Some("matrix_top")), "{a}");
    assert!(searched(&r).is_empty());
    assert!(r.record()["settings"].get("find_capacity").is_none());
}

/// The server runs at most 6 sequences, fewer than its KV cache holds: SGLang says so
/// (`max_running_requests`), the matrix's 16 is over capacity, and the search doubles from 4 to what
/// `max_num_seqs` allows. Every level passes: the answer is the profile's `max_num_seqs`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn max_num_seqs_bounds_the_answer_below_the_kv_fit() {
    let dir = tempfile::tempdir().unwrap();
    let seqs = profile(dir.path(), "few-seqs", 1 << 20, 6, &LINEAR_BATCH, &linear_steps());
    let max_num_seqs = Profile::resolve(&seqs).unwrap().max_num_seqs as u32;
    assert!(u64::from(max_num_seqs) * (1024 + 512) < 1 << 20, "the KV cache holds more users");
    let spec = SimSpec { profile: &seqs, flavor: Flavor::Sglang, ..SimSpec::default() };
    let slo = ["--slo", "tok_s>=5,ttft_p90<=2s", "--concurrency", "1,4,16", "--find-capacity"];
    let r = capacity_run_on(dir.path(), spec, &slo).await;
    assert_eq!(r.record()["server"]["max_num_seqs"], max_num_seqs);
    let a = answer(&r);
    assert_eq!(truth(&seqs, 5.0, max_num_seqs), max_num_seqs, "the SLO holds up to max_num_seqs");
    assert_eq!((a["max_users"].as_u64(), a["bounded_by"].as_str()), (Some(6), Some("max_num_seqs")), "{a}");
    assert_eq!((a["fit_limit"].as_u64(), a["cell"].as_u64()), (Some(6), Some(6)), "{a}");
    assert_eq!(searched(&r), [6], "doubling from 4 is clamped to max_num_seqs");
    assert_eq!(r.cell(1024, 16)["status"], "over_capacity");
    assert_eq!(r.cell(1024, 6)["slo_met"], true);
}

/// Without a known limit (a generic server says nothing of its KV cache or max_num_seqs) and every
/// level passing, the upward search doubles to 8 × the matrix's top; all of it passes, so the answer
/// is still `matrix_top`: the true capacity may be higher.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_search_that_passes_everywhere_says_matrix_top() {
    let dir = tempfile::tempdir().unwrap();
    let linear = profile(dir.path(), "linear", 1 << 20, 64, &LINEAR_BATCH, &linear_steps());
    let spec = SimSpec { profile: &linear, flavor: Flavor::Generic, ..SimSpec::default() };
    let slo = ["--slo", "tok_s_p10>=5", "--concurrency", "1,2", "--find-capacity"];
    let r = capacity_run_on(dir.path(), spec, &slo).await;
    let server = &r.record()["server"];
    assert!(server["kv_budget_tokens"].is_null() && server["max_num_seqs"].is_null(), "{server}");
    assert_eq!(truth(&linear, 5.0, 16), 16, "every level searched passes");
    let a = answer(&r);
    assert_eq!((a["max_users"].as_u64(), a["bounded_by"].as_str()), (Some(16), Some("matrix_top")), "{a}");
    assert!(a.get("fit_limit").is_none(), "{a}");
    assert_eq!(searched(&r), [4, 8, 16], "doubling from 2 up to 8 × 2");
    assert!(r.cells().iter().all(|c| c["slo_met"] == true));
}

/// Goodput: one of four streams waits 1.5 s for its first token. The SLO's TTFT bound fails at p90,
/// and the other three requests are the goodput — the trace says which one waited.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn goodput_counts_the_requests_that_met_every_bound() {
    let dir = tempfile::tempdir().unwrap();
    let sim = sim(SimSpec {
        faults: &["slow-first-token=1500@max-tokens=4096,from=2,to=2"],
        trace_dir: Some(dir.path()),
        ..SimSpec::default()
    })
    .await;
    let url = sim.handle.url();
    let mut args = vec!["--url", url.as_str(), "--contexts", "1k", "--concurrency", "4", "--duration", "2s"];
    args.extend_from_slice(QUICK);
    args.extend_from_slice(&["--max-tokens", "4096", "--slo", "tok_s>=100,ttft_p90<=1s"]);
    let r = run(&dir.path().join("out"), &args).await;
    sim.handle.shutdown().await;
    assert_eq!(r.code, 0, "{}", r.stderr);
    let trace = trace_lines(&dir.path().join("trace.jsonl"));
    // the cell's streams: the 1K prompt, more than the scout's one token
    let decode: Vec<&Value> = trace
        .iter()
        .filter(|t| t["prompt_tokens"] == 1024 && t["completion_tokens"].as_u64().unwrap_or(0) > 1)
        .collect();
    let waited = |t: &&&Value| t["first_token"].as_f64().unwrap() - t["arrival"].as_f64().unwrap() >= 1.5;
    let slow = decode.iter().filter(waited).count();
    assert_eq!((decode.len(), slow), (4, 1), "four streams, no restart in the window, one slow");

    let cell = r.cell(1024, 4);
    assert_eq!(cell["slo_met"], false, "{cell}");
    let ttft = &cell["slo_bounds"][1];
    assert_eq!((ttft["bound"].as_str(), ttft["holds"].as_bool()), (Some("ttft_p90"), Some(false)));
    assert_eq!(ttft["value"], cell["ttft_ms_p90"], "the bound's value is the cell's own TTFT p90");
    let truth_pct = 100.0 * (decode.len() - slow) as f64 / decode.len() as f64;
    assert_eq!(cell["goodput_pct"].as_f64(), Some(truth_pct));
    // the four streams decode at one speed in the window: three quarters of the tokens are good
    let share = cell["goodput_tok_s"].as_f64().unwrap() / cell["total_tok_s"].as_f64().unwrap();
    assert!((share - 0.75).abs() < 0.02, "goodput share {share}");
    let a = answer(&r);
    assert_eq!((a["max_users"].as_u64(), a["bounded_by"].as_str()), (Some(0), Some("slo:ttft_p90")), "{a}");
}

/// Goodput and a stalled stream: one of four streams sends its first token and then nothing. It
/// has no speed of its own, so the SLO's percentiles are over the other three and the cell meets
/// the SLO; but its user got almost nothing, so it is not part of the goodput (methodology §11.2).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stalled_stream_is_not_goodput() {
    let dir = tempfile::tempdir().unwrap();
    let sim = sim(SimSpec {
        faults: &["stall-after=1@max-tokens=4096,from=2,to=2"],
        trace_dir: Some(dir.path()),
        ..SimSpec::default()
    })
    .await;
    let url = sim.handle.url();
    let mut args = vec!["--url", url.as_str(), "--contexts", "1k", "--concurrency", "4", "--duration", "2s"];
    args.extend_from_slice(QUICK);
    args.extend_from_slice(&["--max-tokens", "4096", "--slo", "tok_s>=100,ttft_p90<=1s"]);
    let r = run(&dir.path().join("out"), &args).await;
    sim.handle.shutdown().await;
    assert_eq!(r.code, 0, "{}", r.stderr);
    // the engine ran four streams and no restart (its trace counts what it generated, the stalled
    // one's too); the fault's scope holds back what one of them sends after its first token
    let trace = trace_lines(&dir.path().join("trace.jsonl"));
    let cell_streams =
        trace.iter().filter(|t| t["prompt_tokens"] == 1024 && t["completion_tokens"].as_u64().unwrap_or(0) > 1).count();
    assert_eq!(cell_streams, 4, "four streams, no restart in the window");
    let (flowing, stalled) = (3, 1);

    let cell = r.cell(1024, 4);
    assert_eq!((cell["status"].as_str(), cell["requests"].as_u64()), (Some("valid"), Some(3)), "{cell}");
    assert_eq!(cell["slo_met"], true, "the stalled stream has no speed in the percentiles: {cell}");
    let truth_pct = 100.0 * flowing as f64 / (flowing + stalled) as f64;
    assert_eq!(cell["goodput_pct"].as_f64(), Some(truth_pct), "{cell}");
    // it brought no token into the window: the goodput is every token
    let share = cell["goodput_tok_s"].as_f64().unwrap() / cell["total_tok_s"].as_f64().unwrap();
    assert!((share - 1.0).abs() < 0.01, "goodput share {share}");
}

/// A finished run gets its search later (`--resume DIR --find-capacity`): the search starts from
/// the cells in the record and measures no level twice. Another SLO would judge the kept cells by
/// a rule they were not measured against: refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_resume_adds_the_search_and_keeps_the_slo() {
    let dir = tempfile::tempdir().unwrap();
    let linear = profile(dir.path(), "linear", 1 << 20, 64, &LINEAR_BATCH, &linear_steps());
    let sim = sim(SimSpec { profile: &linear, ..SimSpec::default() }).await;
    let url = sim.handle.url();
    let out = dir.path().join("out");
    let mut args = vec!["--url", url.as_str(), "--contexts", "1k", "--duration", "2s", "--max-tokens", "512"];
    args.extend_from_slice(QUICK);
    args.extend_from_slice(&["--concurrency", "4,16", "--slo", "tok_s_p10>=8.7"]);
    let first = run(&out, &args).await;
    assert_eq!(first.code, 0, "{}", first.stderr);
    let a = answer(&first);
    assert_eq!((a["max_users"].as_u64(), a["bounded_by"].as_str()), (Some(4), Some("slo:tok_s_p10")), "{a}");

    let dir_arg = out.to_str().unwrap();
    let refused = run(&out, &["--resume", dir_arg, "--slo", "tok_s_p10>=5"]).await;
    assert_ne!(refused.code, 0);
    assert!(refused.stderr.contains("SLO (--slo): was tok_s_p10>=8.7, now tok_s_p10>=5"), "{}", refused.stderr);

    let resumed = run(&out, &["--resume", dir_arg, "--find-capacity"]).await;
    sim.handle.shutdown().await;
    assert_eq!(resumed.code, 0, "{}\n{}", resumed.stdout, resumed.stderr);
    let a = answer(&resumed);
    assert_eq!((a["max_users"].as_u64(), a["bounded_by"].as_str()), (Some(11), Some("slo:tok_s_p10")), "{a}");
    assert_eq!(resumed.cells().iter().filter(|c| c["concurrency"] == 4).count(), 1, "no level twice");
    assert_eq!(resumed.cell(1024, 4), first.cell(1024, 4), "the matrix's cells are kept as they were");
    assert_eq!(resumed.record()["settings"]["find_capacity"], true);
}

/// A search stopped (Ctrl-C) right after its first searched cell resumes where it stopped: no
/// level is measured twice, and the search goes on to the answer and the levels an uninterrupted
/// run finds (the first test's: bisection 4..16 measures 10, 13, 11, 12 and answers 11).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_interrupted_search_resumes_without_measuring_a_level_twice() {
    let dir = tempfile::tempdir().unwrap();
    let linear = profile(dir.path(), "linear", 1 << 20, 64, &LINEAR_BATCH, &linear_steps());
    let sim = sim(SimSpec { profile: &linear, ..SimSpec::default() }).await;
    let url = sim.handle.url();
    let out = dir.path().join("out");
    let mut args = vec!["--url", url.as_str(), "--contexts", "1k", "--duration", "2s", "--max-tokens", "512"];
    args.extend_from_slice(QUICK);
    args.extend_from_slice(&["--concurrency", "4,16", "--slo", "tok_s_p10>=8.7", "--find-capacity"]);
    let child = spawn_run(&out, &args);
    let searched_cell = |r: &Value| r["decode"].as_array().is_some_and(|d| d.iter().any(|c| c["searched"] == true));
    wait_for_record(&out, "the first searched cell", searched_cell).await;
    let stopped = interrupt(child, &out, std::time::Duration::ZERO).await;
    assert_ne!(stopped.code, 0, "interrupted: {}\n{}", stopped.stdout, stopped.stderr);
    let before = searched(&stopped);
    assert!(!before.is_empty() && before.len() < 4, "stopped inside the search: {before:?}");

    let resumed = run(&out, &["--resume", out.to_str().unwrap()]).await;
    sim.handle.shutdown().await;
    assert_eq!(resumed.code, 0, "{}\n{}", resumed.stdout, resumed.stderr);
    let mut levels: Vec<u64> = resumed.cells().iter().map(|c| c["concurrency"].as_u64().unwrap()).collect();
    levels.sort_unstable();
    assert_eq!(levels, [4, 10, 11, 12, 13, 16], "each level once");
    for c in &before {
        assert_eq!(resumed.cell(1024, *c), stopped.cell(1024, *c), "the searched cells measured before are kept");
    }
    let a = answer(&resumed);
    let uninterrupted = (Some(11), Some("slo:tok_s_p10"), Some(12));
    assert_eq!((a["max_users"].as_u64(), a["bounded_by"].as_str(), a["failed_cell"].as_u64()), uninterrupted, "{a}");
    assert_eq!(truth(&linear, 8.7, 64), 11);
}

/// A bad --slo or --cost-per-hour is refused before anything starts, saying what to write.
#[test]
fn bad_slo_and_cost_flags_say_what_to_write() {
    let cases: [(&[&str], &str); 6] = [
        (&["--slo", "e2e_p90<=2s"], "use tok_s, ttft, ttfa, ttftc or tbt"),
        (&["--slo", "ttft_p90<=2"], "with a unit, e.g. 2s or 150ms"),
        (&["--slo", "tok_s_p100>=10"], "from 1 to 99"),
        (&["--slo", "tok_s<=10"], "bounded from below"),
        (&["--cost-per-hour", "cheap"], "USD per hour, e.g. 7.5"),
        (&["--cost-per-hour", "0"], "more than 0"),
    ];
    for (args, says) in cases {
        let out = crate::common::bin().arg("run").args(args).arg("--dry-run").output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{args:?}: {stderr}");
        assert!(stderr.contains(says), "{args:?}: {stderr}");
    }
}
