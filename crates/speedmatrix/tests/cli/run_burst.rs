//! `--burst` against the simulated engine (methodology §13.2): each burst's figures agree with the
//! engine's trace (end-to-end times, time to the last completion and TTFT as durations from the
//! burst's first arrival; tokens exactly), natural ends drawn by the sim's `[natural_output]` with
//! `--no-ignore-eos`, an over-capacity cell is written but not sent, prompts from a file, a resume
//! keeps finished bursts, and bad flags are refused with what to do.

use std::collections::HashMap;
use std::path::Path;

use serde_json::Value;

use crate::common::{SimSpec, num as f, request_lines as lines, run, sim, trace_lines};

/// The tiny profile with natural output lengths drawn per request (mean 40, cv 0.6): with
/// `--max-tokens 40` some requests stop on their own, some at the limit.
const NATURAL: &str = r#"
name = "tiny-natural"
model = "tiny"
max_model_len = 16384
kv_cache_tokens = 131072
block_size = 16
max_num_seqs = 64
max_num_batched_tokens = 4096

[natural_output]
mean = 40
cv = 0.6
seed = 11

[prefill]
contexts = [1024, 16384]
tokens_per_s = [400000, 400000]

[decode]
batch = [1, 4, 16]
contexts = [1024, 16384]
step_ms = [[2.0, 2.2], [2.2, 2.45], [2.7, 3.0]]

[overhead]
cached_prefill_ms = 2
"#;

fn bursts(record: &Value) -> &Vec<Value> {
    record["phases"]["burst"]["bursts"].as_array().expect("phases.burst.bursts")
}

/// The p-th percentile with linear interpolation, as methodology §4 defines it.
fn percentile(values: &[f64], p: f64) -> f64 {
    let mut v = values.to_vec();
    v.sort_by(f64::total_cmp);
    let k = (v.len() - 1) as f64 * p / 100.0;
    let (lo, hi) = (k.floor() as usize, k.ceil() as usize);
    v[lo] + (v[hi] - v[lo]) * (k - lo as f64)
}

/// The client's figure (ms, from the burst's scheduled time) against the trace's (s, from the
/// burst's first arrival): the client starts its clock before the first request leaves and sees
/// each end after the engine made it, so it may read a little more, never less.
fn close(what: &str, client_ms: f64, truth_s: f64) {
    let truth = truth_s * 1000.0;
    assert!(
        client_ms >= truth - 2.0 && client_ms <= truth + 250.0,
        "{what}: {client_ms} ms, the trace says {truth} ms"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_burst_agrees_with_the_trace_and_an_over_capacity_cell_is_not_sent() {
    let dir = tempfile::tempdir().unwrap();
    let profile = dir.path().join("natural.toml");
    std::fs::write(&profile, NATURAL).unwrap();
    let sim =
        sim(SimSpec { profile: profile.to_str().unwrap(), trace_dir: Some(dir.path()), ..SimSpec::default() }).await;
    let url = sim.handle.url();
    let out = dir.path().join("out");
    // 4K × 8 needs 8 × (4K + 40) KV tokens: over a 20K budget; 4K × 1 and every 1K cell fit
    let mut args = vec!["--url", url.as_str(), "--contexts", "1k,4k", "--concurrency", "1,8", "--max-tokens", "40"];
    args.extend_from_slice(&["--burst", "--no-ignore-eos", "--save-requests", "--kv-budget", "20k"]);
    let r = run(&out, &args).await;
    assert_eq!(r.code, 0, "{}\n{}", r.stdout, r.stderr);
    sim.handle.shutdown().await;
    let record = r.record();
    assert_eq!(record["phases"]["burst"]["ignore_eos"], false);
    assert_eq!(record["settings"]["ignore_eos"], true, "the matrix's setting is not the phase's");
    assert!(record["decode"].as_array().is_none_or(Vec::is_empty), "only the phase ran");

    let trace: HashMap<String, Value> = trace_lines(&dir.path().join("trace.jsonl"))
        .into_iter()
        .map(|t| (format!("chatcmpl-{}", t["id"]), t))
        .collect();
    let lines = lines(&out);
    let all = bursts(record);
    assert_eq!(all.len(), 4, "{all:?}");
    let over: Vec<_> = all.iter().filter(|b| b["status"] == "over_capacity").collect();
    assert_eq!(over.len(), 1, "{all:?}");
    assert_eq!((over[0]["context"].as_u64(), over[0]["concurrency"].as_u64()), (Some(4096), Some(8)));
    assert!(over[0]["reason"].as_str().is_some_and(|r| r.contains("KV")), "{}", over[0]);
    assert!(over[0]["e2e_ms_p50"].is_null() && over[0]["requests"] == 0);
    assert!(!lines.iter().any(|l| l["context"] == 4096 && l["concurrency"] == 8), "the over-capacity burst was sent");

    let (mut stops, mut lengths) = (0, Vec::new());
    for b in all.iter().filter(|b| b["status"] != "over_capacity") {
        assert_eq!(b["status"], "valid", "{b}");
        let c = b["concurrency"].as_u64().unwrap();
        let mine: Vec<&Value> = lines
            .iter()
            .filter(|l| l["phase"] == "burst" && l["context"] == b["context"] && l["concurrency"] == c)
            .collect();
        assert_eq!(mine.len() as u64, c, "exactly C requests: {b}");
        assert_eq!(
            (b["requests"].as_u64(), b["completed"].as_u64(), b["failed"].as_u64()),
            (Some(c), Some(c), Some(0))
        );
        let truth: Vec<&Value> = mine.iter().map(|l| &trace[l["request_id"].as_str().unwrap()]).collect();
        for t in &truth {
            assert!(t["prompt_tokens"].as_u64().unwrap() >= b["context"].as_u64().unwrap() - 16, "{t}");
            lengths.push(t["completion_tokens"].as_u64().unwrap());
            stops += usize::from(t["finish"] == "stop");
        }
        let tokens: u64 = truth.iter().map(|t| t["completion_tokens"].as_u64().unwrap()).sum();
        assert_eq!(b["output_tokens"].as_u64(), Some(tokens), "{b}");
        // durations from the burst's first arrival, on the engine's clock
        let start = truth.iter().map(|t| f(&t["arrival"])).fold(f64::INFINITY, f64::min);
        let e2e: Vec<f64> = truth.iter().map(|t| f(&t["end"]) - start).collect();
        let ttft: Vec<f64> = truth.iter().map(|t| f(&t["first_token"]) - start).collect();
        close("e2e p50", f(&b["e2e_ms_p50"]), percentile(&e2e, 50.0));
        close("e2e p90", f(&b["e2e_ms_p90"]), percentile(&e2e, 90.0));
        close("e2e max", f(&b["e2e_ms_max"]), percentile(&e2e, 100.0));
        close("last completion", f(&b["last_completion_ms"]), percentile(&e2e, 100.0));
        close("TTFT p50", f(&b["ttft_ms_p50"]), percentile(&ttft, 50.0));
        close("TTFT max", f(&b["ttft_ms_max"]), percentile(&ttft, 100.0));
        let rate = tokens as f64 / (f(&b["last_completion_ms"]) / 1000.0);
        // both figures are rounded: tok/s to 0.1, the time to 1 µs
        assert!((f(&b["total_tok_s"]) - rate).abs() <= 0.05 + rate * 1e-5, "tok/s is tokens ÷ time to last: {b}");
        // the lines say the same as the burst
        let scheduled = f(&b["scheduled_s"]);
        assert!(mine.iter().all(|l| (f(&l["scheduled_s"]) - scheduled).abs() < 0.001), "{mine:?}");
        let spread = mine.iter().map(|l| f(&l["sent_s"])).fold(f64::MIN, f64::max)
            - mine.iter().map(|l| f(&l["sent_s"])).fold(f64::MAX, f64::min);
        assert!((f(&b["send_spread_ms"]) - spread * 1000.0).abs() < 0.01, "{b}");
    }
    // the sim's natural lengths: some requests stopped on their own, some at --max-tokens
    assert!(stops > 0 && stops < lengths.len(), "{stops} of {} stopped on their own: {lengths:?}", lengths.len());
    assert!(lengths.contains(&40) && lengths.iter().any(|&n| n < 40), "{lengths:?}");

    let csv = std::fs::read_to_string(out.join("burst.csv")).expect("burst.csv");
    assert_eq!(csv.lines().count(), 1 + 4, "a header and a row per burst:\n{csv}");
    let page = std::fs::read_to_string(out.join("report.html")).unwrap();
    assert!(page.contains("Bursts"), "the page has the section");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn prompts_from_a_file_go_in_order_with_their_own_max_tokens() {
    let dir = tempfile::tempdir().unwrap();
    let sim = sim(SimSpec { trace_dir: Some(dir.path()), ..SimSpec::default() }).await;
    let url = sim.handle.url();
    let file = dir.path().join("p.jsonl");
    let text = "{\"prompt\": \"one\", \"max_tokens\": 5}\n{\"prompt\": \"two two\", \"max_tokens\": 7}\n\
                {\"messages\": [{\"role\": \"user\", \"content\": \"three\"}], \"max_tokens\": 9}\n{\"prompt\": \"four\"}\n";
    std::fs::write(&file, text).unwrap();
    let out = dir.path().join("out");
    let args = ["--url", url.as_str(), "--concurrency", "2,3", "--max-tokens", "12", "--burst", "--save-requests"];
    let r = run(&out, &[&args[..], &["--prompts", file.to_str().unwrap()]].concat()).await;
    assert_eq!(r.code, 0, "{}\n{}", r.stdout, r.stderr);
    sim.handle.shutdown().await;
    let all = bursts(r.record());
    assert_eq!(all.len(), 2, "one burst per concurrency: {all:?}");
    assert!(all.iter().all(|b| b["context"].is_null() && b["label"] == "file" && b["status"] == "valid"), "{all:?}");
    let trace: HashMap<String, Value> = trace_lines(&dir.path().join("trace.jsonl"))
        .into_iter()
        .map(|t| (format!("chatcmpl-{}", t["id"]), t))
        .collect();
    let lines = lines(&out);
    // C=2 takes lines 1–2, C=3 lines 3, 4 and 1 again: each its own max_tokens, else --max-tokens
    for (c, want) in [(2, vec![5, 7]), (3, vec![5, 9, 12])] {
        let mut got: Vec<u64> = lines
            .iter()
            .filter(|l| l["concurrency"] == c)
            .map(|l| trace[l["request_id"].as_str().unwrap()]["completion_tokens"].as_u64().unwrap())
            .collect();
        got.sort();
        assert_eq!(got, want, "C={c}");
        let b = all.iter().find(|b| b["concurrency"] == c).unwrap();
        assert_eq!(b["output_tokens"].as_u64(), Some(want.iter().sum()), "{b}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_resume_keeps_finished_bursts_and_sends_the_rest() {
    let dir = tempfile::tempdir().unwrap();
    let sim = sim(SimSpec::default()).await;
    let url = sim.handle.url();
    let out = dir.path().join("out");
    let args = ["--url", url.as_str(), "--contexts", "1k", "--concurrency", "1,2", "--max-tokens", "16"];
    let first = run(&out, &[&args[..], &["--burst", "--burst-rounds", "2"]].concat()).await;
    assert_eq!(first.code, 0, "{}", first.stderr);
    let done = bursts(first.record()).clone();
    assert_eq!(done.len(), 4, "2 cells × 2 rounds: {done:?}");
    // as a run stopped during its third burst leaves it
    let mut record = first.record().clone();
    record["phases"]["burst"]["bursts"].as_array_mut().unwrap().truncate(2);
    record["status"] = "interrupted".into();
    std::fs::write(out.join("run.json"), serde_json::to_string_pretty(&record).unwrap()).unwrap();
    let resumed = run(&out, &["--resume", out.to_str().unwrap()]).await;
    assert_eq!(resumed.code, 0, "{}", resumed.stderr);
    let after = bursts(resumed.record());
    assert_eq!(after.len(), 4, "{after:?}");
    assert_eq!(after[..2], done[..2], "the finished bursts are kept as they were");
    let keys: Vec<_> = after.iter().map(|b| (b["concurrency"].as_u64(), b["round"].as_u64())).collect();
    assert_eq!(keys, [(Some(1), Some(1)), (Some(1), Some(2)), (Some(2), Some(1)), (Some(2), Some(2))]);
    assert!(f(&after[2]["scheduled_s"]) > f(&done[1]["scheduled_s"]), "sent again, later on the run's clock");
    assert_eq!(resumed.record()["phases"]["burst"]["rounds"], 2);

    // --retry-failed sends a failed burst again, and keeps the others
    let mut record = resumed.record().clone();
    record["phases"]["burst"]["bursts"][1]["status"] = "error".into();
    record["phases"]["burst"]["bursts"][1]["reason"] = "1 of 1 requests failed".into();
    std::fs::write(out.join("run.json"), serde_json::to_string_pretty(&record).unwrap()).unwrap();
    let retried = run(&out, &["--resume", out.to_str().unwrap(), "--retry-failed"]).await;
    assert_eq!(retried.code, 0, "{}", retried.stderr);
    sim.handle.shutdown().await;
    let again = bursts(retried.record());
    assert_eq!(again.len(), 4, "{again:?}");
    assert!(again.iter().all(|b| b["status"] == "valid"), "{again:?}");
    assert_eq!([&again[0], &again[1], &again[2]], [&after[0], &after[2], &after[3]], "the others are kept");
    assert_eq!((again[3]["concurrency"].as_u64(), again[3]["round"].as_u64()), (Some(1), Some(2)));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_burst_flags_are_refused_with_what_to_do() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    let url = ["--url", "http://127.0.0.1:9"];
    for (args, says) in [
        (&["--burst", "--burst-rounds", "0"][..], "--burst-rounds"),
        (&["--burst", "--burst-rounds", "11"][..], "too large"),
        (&["--burst-rounds", "2"][..], "add --burst"),
        (&["--no-ignore-eos"][..], "add --burst"),
        (&["--burst", "--prompts", "/nonexistent/p.jsonl"][..], "cannot read the prompts file"),
    ] {
        let r = run(&out, &[&url[..], args].concat()).await;
        assert_eq!(r.code, 1, "{args:?} was accepted: {}", r.stderr);
        assert!(r.stderr.contains(says), "{args:?}: {}", r.stderr);
        assert!(!out.join("run.json").exists(), "{args:?} wrote a record");
    }
}

/// Ctrl-C during a burst: the bursts that finished are kept, the one in flight is dropped (its
/// requests cancelled: the server goes idle), the run is interrupted; `--resume` sends the rest.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ctrl_c_keeps_finished_bursts_and_drops_the_one_in_flight() {
    use std::time::{Duration, Instant};
    let sim = sim(SimSpec::default()).await;
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    let url = sim.handle.url();
    // 1,500 tokens at 2–3 ms a step: a burst of about 3–4 s, long enough to be stopped in
    let args = ["--url", url.as_str(), "--contexts", "1k", "--concurrency", "1,2,4", "--max-tokens", "1500", "--burst"];
    let child = crate::common::bin()
        .arg("run")
        .args(args)
        .arg("--out")
        .arg(&out)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let recorded = |out: &Path| {
        std::fs::read_to_string(out.join("run.json"))
            .ok()
            .and_then(|s| serde_json::from_str::<Value>(&s).ok())
            .map_or(0, |v| v["phases"]["burst"]["bursts"].as_array().map_or(0, Vec::len))
    };
    let deadline = Instant::now() + Duration::from_secs(60);
    while recorded(&out) < 1 {
        assert!(Instant::now() < deadline, "no burst finished within 60 s");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // the second burst is in flight once the server runs its requests
    while crate::common::scheduler(&url).await.0 < 1.0 {
        assert!(Instant::now() < deadline, "the second burst did not start");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let pid = child.id().to_string();
    assert!(std::process::Command::new("kill").args(["-INT", &pid]).status().unwrap().success());
    let output = tokio::task::spawn_blocking(move || child.wait_with_output().unwrap()).await.unwrap();
    let r = crate::common::result(&out, output);
    assert_eq!(r.code, 130, "{}\n{}", r.stdout, r.stderr);
    assert_eq!(r.record()["status"], "interrupted");
    let kept = bursts(r.record()).clone();
    assert_eq!(kept.len(), 1, "the burst in flight is not recorded: {kept:?}");
    assert_eq!((kept[0]["concurrency"].as_u64(), kept[0]["status"].as_str()), (Some(1), Some("valid")));
    // the sim aborts a request when its connection closes, which it learns a moment after the exit
    let idle_by = Instant::now() + Duration::from_secs(5);
    while crate::common::scheduler(&url).await != (0.0, 0.0) {
        assert!(Instant::now() < idle_by, "the cancelled requests did not leave the server");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }

    let resumed = run(&out, &["--resume", out.to_str().unwrap()]).await;
    assert_eq!(resumed.code, 0, "{}", resumed.stderr);
    sim.handle.shutdown().await;
    let after = bursts(resumed.record());
    assert_eq!(after.len(), 3, "{after:?}");
    assert_eq!(after[0], kept[0], "the finished burst is kept as it was");
    assert!(
        after.iter().all(|b| b["status"] == "valid" && b["output_tokens"] == 1500 * b["concurrency"].as_u64().unwrap())
    );
}

/// A stalled request in a burst, against the trace: the burst is an error that names the stall
/// (never "cancelled": without a drain the client cuts nothing), counts it as one failure, and its
/// span and tok/s rest on the three completed requests, not stretched by the stall timeout.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stalled_request_is_a_named_failure_outside_the_span() {
    let dir = tempfile::tempdir().unwrap();
    let faults = ["stall-after=20@max-tokens=200,from=2,to=2"];
    let sim = sim(SimSpec { faults: &faults, trace_dir: Some(dir.path()), ..SimSpec::default() }).await;
    let url = sim.handle.url();
    let out = dir.path().join("out");
    let args = ["--url", &url, "--contexts", "1k", "--concurrency", "4", "--max-tokens", "200", "--burst"];
    let r = run(&out, &[&args[..], &["--no-prefill-at-max", "--stall-timeout", "2s"]].concat()).await;
    sim.handle.shutdown().await;
    assert_eq!(r.code, 2, "a burst in error: {}", r.stderr);
    let b = &r.record()["phases"]["burst"]["bursts"][0];
    assert_eq!(b["status"], "error", "{b}");
    let reason = b["reason"].as_str().unwrap();
    assert!(reason.starts_with("1 of 4 requests failed") && reason.contains("stalled"), "{b}");
    assert_eq!((b["completed"].as_u64(), b["failed"].as_u64()), (Some(3), Some(1)), "{b}");
    let trace = trace_lines(&dir.path().join("trace.jsonl"));
    let burst: Vec<&Value> = trace.iter().filter(|t| t["prompt_tokens"].as_u64() > Some(1000)).collect();
    let done: Vec<&Value> =
        burst.iter().copied().filter(|t| t["completion_tokens"] == 200 && t["finish"] == "length").collect();
    assert!(done.len() >= 3, "{burst:?}");
    let first = burst.iter().map(|t| f(&t["arrival"])).fold(f64::INFINITY, f64::min);
    // the engine finishes the stalled request too: the completed ones end no later than the last
    let last_end = done.iter().map(|t| f(&t["end"])).fold(0.0, f64::max);
    let span_ms = f(&b["last_completion_ms"]);
    assert!(span_ms <= (last_end - first) * 1000.0 + 50.0, "span {span_ms} ms, the trace {} s", last_end - first);
    let tokens = b["output_tokens"].as_u64().unwrap();
    assert_eq!(tokens, 600, "the completed requests' tokens only");
}
