//! Speculative decoding (methodology §14.2) against the simulated engine with `[speculative]` on:
//! the cell's acceptance length and rate come from the engine's counters over the window, the
//! counters equal the trace's per-request truth, and tok/s counts every token of a multi-token
//! chunk. Without speculative decoding the fields are absent.

use crate::common::{QUICK, SimSpec, metric_sums, num, run, sim, trace_lines};
use sm_sim::Profile;

const K: u64 = 4;
const P: f64 = 0.6;

async fn counters(url: &str) -> [f64; 3] {
    let names = ["drafts", "draft_tokens", "accepted_tokens"].map(|n| format!("vllm:spec_decode_num_{n}_total"));
    metric_sums(url, names.each_ref().map(String::as_str)).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cells_report_acceptance_from_the_engine_counters() {
    let dir = tempfile::tempdir().unwrap();
    let profile_path = dir.path().join("spec.toml");
    let text = format!(
        "{}\n[speculative]\ndraft_tokens = {K}\nacceptance = {P}\nseed = 11\n",
        include_str!("../../../sm-sim/profiles/tiny.toml")
    );
    std::fs::write(&profile_path, text).unwrap();
    let sim =
        sim(SimSpec { profile: profile_path.to_str().unwrap(), trace_dir: Some(dir.path()), ..SimSpec::default() })
            .await;
    let url = sim.handle.url();
    let mut args = vec!["--url", url.clone().leak(), "--contexts", "1k", "--concurrency", "4", "--duration", "2s"];
    args.extend_from_slice(QUICK);
    let out = dir.path().join("out");
    let r = run(&out, &args).await;
    assert_eq!(r.code, 0, "stdout:\n{}\nstderr:\n{}", r.stdout, r.stderr);
    let [drafts, draft_tokens, accepted] = counters(&url).await;
    sim.handle.shutdown().await;

    // the engine's counters are the trace's truth, request by request summed
    let trace = trace_lines(&dir.path().join("trace.jsonl"));
    let sum = |k: &str| trace.iter().filter_map(|t| t["spec"][k].as_f64()).sum::<f64>();
    assert_eq!((drafts, accepted), (sum("drafts"), sum("accepted")), "counters = trace");
    assert_eq!(draft_tokens, K as f64 * drafts);
    let emitted: f64 = trace.iter().map(|t| num(&t["completion_tokens"])).sum();
    let first_tokens = trace.iter().filter(|t| num(&t["completion_tokens"]) > 0.0).count() as f64;
    assert_eq!(emitted, first_tokens + drafts + accepted, "each step emits 1 + accepted tokens");

    let cell = r.cell(1024, 4);
    assert_eq!(cell["status"], "valid", "{cell}");
    let s = &cell["spec_decode"];
    let (len, rate) = (num(&s["acceptance_length"]), num(&s["acceptance_rate"]));
    let (w_drafts, w_accepted) = (num(&s["drafts"]), num(&s["accepted"]));
    // the cell's figures are its window's counter differences, by their definitions
    assert!(w_drafts > 100.0 && w_drafts < drafts, "{s}");
    assert!((len - (1.0 + w_accepted / w_drafts)).abs() < 1e-3, "{s}");
    assert!((rate - w_accepted / (K as f64 * w_drafts)).abs() < 1e-4, "{s}");
    // … and the same statistic as the whole run's truth and the configured model
    let truth_len = 1.0 + sum("accepted") / sum("drafts");
    assert!((len / truth_len - 1.0).abs() < 0.05, "window {len}, trace {truth_len}");
    let model = (1.0 - P.powi(K as i32 + 1)) / (1.0 - P);
    assert!((len / model - 1.0).abs() < 0.06, "window {len}, model {model}");
    // tok/s counts every token of a chunk: steps per second × tokens per step
    let step_ms = Profile::builtin("tiny").unwrap().step_ms(4.0, 1024.0);
    let want = 4.0 * 1000.0 / step_ms * len;
    let total = num(&cell["total_tok_s"]);
    assert!((total / want - 1.0).abs() < 0.08, "{total} tok/s, want {want}");
    assert!(
        !cell["warnings"].to_string().contains("no speculative-decoding counters"),
        "counters present: no note: {cell}"
    );
    // the page, the Markdown and the CSV say it with the record's figures
    let line = format!("speculative decoding: {len:.1} tokens per step (acceptance {:.0} %)", rate * 100.0);
    let md = std::fs::read_to_string(out.join("report.md")).unwrap();
    assert!(md.contains(&format!("1K × 4: {line}")), "{md}");
    let fact = format!("{len:.1} tokens per step (acceptance {:.0} %), from the engine's counters", rate * 100.0);
    assert!(md.contains(&fact), "facts line: {md}");
    let html = std::fs::read_to_string(out.join("report.html")).unwrap();
    assert!(html.contains(&line), "hover");
    let csv = std::fs::read_to_string(out.join("measurements.csv")).unwrap();
    assert!(csv.lines().next().unwrap().contains("spec_decode_acceptance_length"), "{csv}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_speculative_decoding_the_fields_are_absent() {
    let dir = tempfile::tempdir().unwrap();
    let sim = sim(SimSpec { faults: &["multi-token=3"], ..SimSpec::default() }).await;
    let mut args = vec!["--url", sim.handle.url().leak(), "--contexts", "1k", "--concurrency", "2", "--duration", "1s"];
    args.extend_from_slice(QUICK);
    let r = run(&dir.path().join("out"), &args).await;
    assert_eq!(r.code, 0, "stdout:\n{}\nstderr:\n{}", r.stdout, r.stderr);
    sim.handle.shutdown().await;
    let cell = r.cell(1024, 2);
    assert!(cell.get("spec_decode").is_none(), "{cell}");
    let md = std::fs::read_to_string(dir.path().join("out").join("report.md")).unwrap();
    assert!(!md.contains("Speculative decoding"), "no figures, no line");
    // chunks of 3 tokens and no counters: the cell says it cannot tell why
    let warnings = cell["warnings"].to_string();
    assert!(warnings.contains("chunks carried 3.00 tokens each") || warnings.contains("chunks carried 2.9"), "{cell}");
    assert!(warnings.contains("no speculative-decoding counters"), "{cell}");
}
