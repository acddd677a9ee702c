//! `--save-requests` against the simulated engine: one line per measured request, whose in-window
//! tokens add up to each cell's `output_tokens` and whose times agree with the engine's trace; a
//! resume appends without repeating a line; without the flag there is no file, and `--force`
//! removes an old one.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use serde_json::Value;

use crate::common::{QUICK, SimSpec, num as f, request_lines as lines, run, sim, trace_lines};

/// `(context, concurrency)` → the cell's decode lines.
fn by_cell(lines: &[Value]) -> BTreeMap<(u64, u64), Vec<&Value>> {
    let mut cells: BTreeMap<(u64, u64), Vec<&Value>> = BTreeMap::new();
    for l in lines.iter().filter(|l| l["phase"] == "decode") {
        cells.entry((l["context"].as_u64().unwrap(), l["concurrency"].as_u64().unwrap())).or_default().push(l);
    }
    cells
}

/// Every cell of the record: its lines' in-window tokens add up to its `output_tokens`.
fn check_sums(record: &Value, lines: &[Value]) {
    let cells = by_cell(lines);
    for cell in record["decode"].as_array().unwrap() {
        let key = (cell["context"].as_u64().unwrap(), cell["concurrency"].as_u64().unwrap());
        let of_cell = &cells[&key];
        let sum: f64 = of_cell.iter().map(|l| f(&l["window_output_tokens"])).sum();
        let tokens = f(&cell["output_tokens"]);
        assert!((sum - tokens).abs() <= 1.0, "{key:?}: lines hold {sum} tokens in the window, the cell {tokens}");
        let in_window = of_cell.iter().filter(|l| l["in_window"] == true).count() as u64;
        assert!(in_window >= key.1, "{key:?}: every stream had tokens in the window, {in_window} lines say so");
    }
    assert_eq!(cells.len(), record["decode"].as_array().unwrap().len(), "lines of a cell the record lacks");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_request_has_a_line_that_agrees_with_the_cell_and_the_trace() {
    let dir = tempfile::tempdir().unwrap();
    let sim = sim(SimSpec { trace_dir: Some(dir.path()), ..SimSpec::default() }).await;
    let url = sim.handle.url();
    let out = dir.path().join("out");
    let mut args = vec!["--url", url.as_str(), "--contexts", "1k", "--concurrency", "1,3", "--duration", "1s"];
    args.extend_from_slice(&["--prefill-contexts", "2k", "--save-requests"]);
    // QUICK, but with the hidden warm-up cell, whose requests are lines too
    args.extend_from_slice(&["--ready-stable", "300ms", "--warmup", "1s", "--no-prefill-at-max"]);
    // 100 tokens: several requests of each stream end inside the window, the last ones are cut off
    args.extend_from_slice(&["--max-tokens", "100"]);
    let r = run(&out, &args).await;
    assert_eq!(r.code, 0, "{}", r.stderr);
    sim.handle.shutdown().await;
    assert_eq!(r.record()["settings"]["save_requests"], true);
    let lines = lines(&out);
    check_sums(r.record(), &lines);

    let trace: HashMap<String, Value> = trace_lines(&dir.path().join("trace.jsonl"))
        .into_iter()
        .map(|t| (format!("chatcmpl-{}", t["id"]), t))
        .collect();
    let prefill: Vec<_> = lines.iter().filter(|l| l["phase"] == "prefill").collect();
    let rows: Vec<_> = r.record()["prefill"].as_array().unwrap().iter().map(|p| p["context"].as_u64()).collect();
    assert_eq!(prefill.iter().map(|l| l["context"].as_u64()).collect::<Vec<_>>(), rows, "one line per prefill row");
    for l in &prefill {
        assert_eq!((l["prompt_tokens"].as_u64(), l["cached_tokens"].as_u64()), (l["context"].as_u64(), Some(0)));
        assert_eq!((l["status"].as_str(), l["output_tokens"].as_f64()), (Some("completed"), Some(1.0)));
    }

    let warmup: Vec<_> = lines.iter().filter(|l| l["phase"] == "warmup").collect();
    assert!(!warmup.is_empty(), "the warm-up cell's requests are marked as such");
    assert!(warmup.iter().all(|l| l["concurrency"] == 1 && l["context"] == 1024 && l["in_window"].is_boolean()));
    let phases: Vec<_> = lines.iter().map(|l| l["phase"].as_str().unwrap()).collect();
    let first_decode = phases.iter().position(|&p| p == "decode").unwrap();
    assert!(phases[..first_decode].contains(&"warmup"), "the warm-up's lines come before the matrix's: {phases:?}");

    let mut ids = BTreeSet::new();
    let (mut completed, mut cancelled, mut diffs) = (0, 0, Vec::new());
    for l in &lines {
        assert!(l.get("prompt").is_none() && l.get("text").is_none(), "no text: {l}");
        assert_eq!(l["scheduled_s"], l["sent_s"], "closed loop: {l}");
        if l["first_token_s"].is_null() {
            // sent just before the cell's cancel (on a busy machine, more often): cut before any token
            assert_eq!((l["status"].as_str(), f(&l["output_tokens"])), (Some("cancelled"), 0.0), "{l}");
            assert!(l["last_token_s"].is_null() && l["ended_s"].is_null(), "{l}");
            cancelled += 1;
            continue;
        }
        let (sent, first, last) = (f(&l["sent_s"]), f(&l["first_token_s"]), f(&l["last_token_s"]));
        assert!(sent <= first && first <= last, "sent ≤ first token ≤ last token: {l}");
        // a model that does not think: its first answer token is its first token, nothing thought
        if l["phase"] != "prefill" {
            assert_eq!(l["first_answer_s"], l["first_token_s"], "{l}");
        }
        assert!(l.get("reasoning_tokens").is_none() && l.get("usage_reasoning_tokens").is_none(), "{l}");
        let id = l["request_id"].as_str().expect("the server's id");
        assert!(ids.insert(id.to_string()), "{id} has two lines");
        let t = trace.get(id).unwrap_or_else(|| panic!("{id} is not in the trace"));
        // the client's TTFT includes the loopback trip the engine does not see
        let ttft = first - sent;
        let truth = f(&t["first_token"]) - f(&t["arrival"]);
        assert!(ttft >= truth - 0.002 && ttft <= truth + 0.5, "{id}: TTFT {ttft} s, the trace says {truth} s");
        diffs.push(ttft - truth);
        let out_tokens = f(&l["output_tokens"]);
        match l["status"].as_str() {
            Some("completed") => {
                completed += 1;
                assert_eq!(out_tokens, f(&t["completion_tokens"]), "{l}\n{t}");
                assert!(f(&l["ended_s"]) >= last, "{l}");
            }
            Some("cancelled") => {
                cancelled += 1;
                assert!(l["ended_s"].is_null(), "{l}");
                assert!(out_tokens <= f(&t["completion_tokens"]), "received more than the engine made: {l}\n{t}");
            }
            s => panic!("status {s:?}: {l}"),
        }
        assert_eq!(l["prompt_tokens"], t["prompt_tokens"], "{l}");
        // the engine reports cached tokens with its final usage: a cut-off request never saw them
        if l["status"] == "completed" || !l["cached_tokens"].is_null() {
            assert_eq!(l["cached_tokens"], t["cached_tokens"], "{l}");
        }
    }
    assert!(completed >= 4 && cancelled >= 4, "{completed} completed, {cancelled} cancelled");
    diffs.sort_by(f64::total_cmp);
    let median = diffs[diffs.len() / 2];
    assert!(median < 0.05, "the lines' TTFT is {median} s above the trace's (median)");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_resume_appends_and_force_or_no_flag_leaves_no_old_lines() {
    let dir = tempfile::tempdir().unwrap();
    let sim = sim(SimSpec::default()).await;
    let url = sim.handle.url();
    let out = dir.path().join("out");
    let mut args = vec!["--url", url.as_str(), "--contexts", "1k", "--concurrency", "1,2", "--duration", "1s"];
    args.extend_from_slice(QUICK);
    let first = run(&out, &[&args[..], &["--save-requests"]].concat()).await;
    assert_eq!(first.code, 0, "{}", first.stderr);

    // as a run killed during its C=2 cell leaves it: neither the cell nor its lines were written
    let mut record = first.record().clone();
    record["decode"].as_array_mut().unwrap().retain(|c| c["concurrency"] != 2);
    record["status"] = "interrupted".into();
    std::fs::write(out.join("run.json"), serde_json::to_string_pretty(&record).unwrap()).unwrap();
    let kept: Vec<Value> = lines(&out).into_iter().filter(|l| l["concurrency"] != 2).collect();
    let text: String = kept.iter().map(|l| format!("{l}\n")).collect();
    std::fs::write(out.join("requests.jsonl"), &text).unwrap();

    // the flag is not repeated: the resume keeps it from run.json
    let resumed = run(&out, &["--resume", out.to_str().unwrap()]).await;
    assert_eq!(resumed.code, 0, "{}", resumed.stderr);
    assert_eq!(resumed.record()["settings"]["save_requests"], true);
    let after = std::fs::read_to_string(out.join("requests.jsonl")).unwrap();
    assert!(after.starts_with(&text), "the resume appended to the lines that were there");
    let all = lines(&out);
    check_sums(resumed.record(), &all);
    let new = &all[kept.len()..];
    assert!(!new.is_empty() && new.iter().all(|l| l["concurrency"] == 2), "only the C=2 cell's lines were added");
    let ids: BTreeSet<_> = all.iter().map(|l| l["request_id"].to_string()).collect();
    assert_eq!(ids.len(), all.len(), "a request has two lines");

    let forced = run(&out, &[&args[..], &["--force"]].concat()).await;
    assert_eq!(forced.code, 0, "{}", forced.stderr);
    assert!(!out.join("requests.jsonl").exists(), "--force without --save-requests removes the old lines");
    assert!(forced.record()["settings"].get("save_requests").is_none());
    sim.handle.shutdown().await;
}

/// A stream the server cuts off fails its cell: its line says `failed` and why, the cell's other
/// requests were dropped by the client, and without a window no line has window figures. A
/// prefill row the server refuses has a line too.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_request_and_a_refused_prefill_row_have_lines_that_say_why() {
    let faults = [
        "disconnect-after=20@prompt= m0000001024],max-tokens=512,to=1",
        "status=503@prompt= m0000002048],max-tokens=1,to=1",
    ];
    let sim = sim(SimSpec { faults: &faults, ..SimSpec::default() }).await;
    let url = sim.handle.url();
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    let mut args = vec!["--url", url.as_str(), "--contexts", "1k", "--concurrency", "2", "--duration", "1s"];
    args.extend_from_slice(&["--prefill-contexts", "2k", "--save-requests"]);
    args.extend_from_slice(QUICK);
    let r = run(&out, &args).await;
    assert_eq!(r.code, 2, "a cell and a row failed: {}", r.stderr);
    sim.handle.shutdown().await;
    let lines = lines(&out);
    let decode: Vec<_> = lines.iter().filter(|l| l["phase"] == "decode").collect();
    let failed: Vec<_> = decode.iter().filter(|l| l["status"] == "failed").collect();
    assert_eq!(failed.len(), 1, "{decode:?}");
    assert!(failed[0]["reason"].as_str().is_some_and(|r| !r.is_empty()), "{}", failed[0]);
    assert_eq!(failed[0]["output_tokens"].as_f64(), Some(20.0), "{}", failed[0]);
    assert!(failed[0]["ended_s"].is_null());
    assert!(decode.iter().filter(|l| l["status"] != "failed").all(|l| l["status"] == "cancelled"), "{decode:?}");
    assert!(decode.iter().all(|l| l["window_output_tokens"].is_null() && l["in_window"].is_null()), "{decode:?}");
    let row = lines.iter().find(|l| l["phase"] == "prefill" && l["context"] == 2048).expect("the refused row's line");
    assert_eq!(row["status"], "failed", "{row}");
    assert!(row["reason"].as_str().is_some_and(|r| r.contains("503")), "{row}");
    assert!(row["first_token_s"].is_null() && row["request_id"].is_null(), "{row}");
    assert_eq!(r.record()["prefill"].as_array().unwrap().iter().filter(|p| p["status"] == "error").count(), 1);
}

/// A server that reports usage only at the end, three tokens per chunk: the lines attribute tokens
/// as the cell's figures do (the usage totals spread over chunks, cut-off requests at the cell's
/// tokens per chunk), so they still add up to each cell's `output_tokens`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lines_add_up_when_usage_comes_only_at_the_end() {
    let sim = sim(SimSpec { faults: &["usage-at-end", "multi-token=3"], ..SimSpec::default() }).await;
    let url = sim.handle.url();
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    let mut args = vec!["--url", url.as_str(), "--contexts", "1k", "--concurrency", "1,4", "--duration", "1s"];
    args.extend_from_slice(&["--save-requests", "--max-tokens", "100"]);
    args.extend_from_slice(QUICK);
    let r = run(&out, &args).await;
    assert_eq!(r.code, 0, "{}", r.stderr);
    sim.handle.shutdown().await;
    assert!(r.cells().iter().all(|c| c["token_source"] == "usage_at_end"), "{:?}", r.cells());
    let lines = lines(&out);
    check_sums(r.record(), &lines);
    for l in lines.iter().filter(|l| l["phase"] == "decode" && l["status"] == "completed") {
        assert_eq!(l["output_tokens"].as_f64(), Some(100.0), "a finished request has its usage total: {l}");
    }
}
