//! Token counts a server does not state chunk by chunk, checked against the simulated engine's
//! trace (its ground truth): usage only at the end of a request with several tokens per chunk,
//! for requests that end inside the window, span its start, or outlast it; and a stream that
//! goes silent shortly before the window closes.

use std::collections::HashMap;

use crate::common::{QUICK, SimSpec, num, request_lines, run, sim, trace_lines};
use serde_json::Value;

/// The server's decode rate per request (tok/s), from the trace: over each request that made more
/// than 100 tokens, the tokens after its first emission over the time they took; the median.
fn traced_rate(trace: &[Value]) -> f64 {
    let mut rates: Vec<f64> = trace
        .iter()
        .filter(|t| t["completion_tokens"].as_u64().unwrap_or(0) > 100)
        .filter_map(|t| {
            let e = t["emissions"].as_array()?;
            let (first, last) = (e.first()?, e.last()?);
            let tokens: f64 = e.iter().skip(1).map(|x| x[1].as_f64().unwrap()).sum();
            let secs = last[0].as_f64()? - first[0].as_f64()?;
            (secs > 0.0).then(|| tokens / secs)
        })
        .collect();
    rates.sort_by(f64::total_cmp);
    assert!(!rates.is_empty(), "the trace has long requests");
    rates[rates.len() / 2]
}

struct Case {
    k: u32,
    max_tokens: &'static str,
    concurrency: u64,
    /// What the case is about.
    what: &'static str,
}

/// Usage only at the end, K tokens per chunk: the cell counts what the server made, attributes it
/// to when it arrived, and per-request tok/s is never above the server's rate.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn usage_only_at_the_end_with_several_tokens_per_chunk_counts_every_token() {
    let cases = [
        Case { k: 4, max_tokens: "8000", concurrency: 1, what: "requests outlast the window: a probe measures K" },
        Case { k: 2, max_tokens: "8000", concurrency: 1, what: "requests outlast the window, K = 2" },
        // 750 chunks take 1.5 s: the first request spans W0 and ends inside, the second is cut at W1
        Case { k: 4, max_tokens: "3000", concurrency: 1, what: "requests span the window's start and end" },
        Case { k: 3, max_tokens: "301", concurrency: 2, what: "K = 3 with a remainder, requests end inside" },
    ];
    let mut failures = Vec::new();
    for case in &cases {
        let dir = tempfile::tempdir().unwrap();
        let multi = format!("multi-token={}", case.k);
        let faults = ["usage-at-end", multi.as_str()];
        let sim = sim(SimSpec { faults: &faults, trace_dir: Some(dir.path()), ..SimSpec::default() }).await;
        let c = case.concurrency.to_string();
        let url = sim.handle.url();
        let mut args = vec!["--url", url.as_str(), "--contexts", "1k", "--concurrency", &c, "--duration", "2s"];
        args.extend_from_slice(&["--max-tokens", case.max_tokens]);
        args.extend_from_slice(QUICK);
        let r = run(&dir.path().join("out"), &args).await;
        sim.handle.shutdown().await;
        let cell = r.cell(1024, case.concurrency);
        let name = format!("K={} max_tokens={} C={} ({})", case.k, case.max_tokens, case.concurrency, case.what);
        if cell["status"] != "valid" {
            failures.push(format!("{name}: not valid: {cell}\n{}", r.stderr));
            continue;
        }
        assert_eq!(cell["token_source"], "usage_at_end", "{name}: {cell}");
        let truth = traced_rate(&trace_lines(&dir.path().join("trace.jsonl")));
        let per_request = cell["per_request_tok_s"].as_f64().unwrap();
        let total = cell["total_tok_s"].as_f64().unwrap();
        let expected_total = truth * case.concurrency as f64;
        // chunk counting is off by a factor K; the margins absorb two shared cores' jitter
        if (per_request / truth - 1.0).abs() > 0.05 {
            failures.push(format!("{name}: per-request {per_request:.0} tok/s, the server made {truth:.0}"));
        }
        if (total / expected_total - 1.0).abs() > 0.06 {
            failures.push(format!("{name}: total {total:.0} tok/s, the server made {expected_total:.0}: {cell}"));
        }
        let tokens = cell["output_tokens"].as_f64().unwrap();
        assert!((tokens / 2.0 - total).abs() < 1.0, "{name}: total tok/s = output tokens / measured");
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// One stream goes silent about two seconds before the window closes, shorter than
/// `--stall-timeout`: the cell stays valid, but the censored gap is said.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stall_the_window_end_cuts_off_is_said() {
    // the first decode request of the 1K prompt stops after 300 tokens (about 0.6 s at 2 ms a token)
    let faults = ["stall-after=300@prompt= m0000001024],max-tokens=8000,to=1"];
    let sim = sim(SimSpec { faults: &faults, ..SimSpec::default() }).await;
    let dir = tempfile::tempdir().unwrap();
    let url = sim.handle.url();
    let mut args = vec!["--url", url.as_str(), "--contexts", "1k", "--concurrency", "2", "--duration", "3s"];
    args.extend_from_slice(&["--max-tokens", "8000", "--stall-timeout", "10s"]);
    args.extend_from_slice(QUICK);
    let r = run(dir.path(), &args).await;
    sim.handle.shutdown().await;
    let cell = r.cell(1024, 2);
    assert_eq!(cell["status"], "valid", "{cell}\n{}", r.stderr);
    let warnings = cell["warnings"].to_string();
    assert!(warnings.contains("a stream sent nothing in the last"), "the censored gap is said: {cell}");
}

/// The tokens the engine emitted to a cell's requests that reached the client inside its window,
/// from the trace: each request's emissions moved onto the run's clock by its first token (the
/// client saw it at `first_token_s`), counted inside [W1 − duration, W1). W1 is taken just after
/// the last token of a stream the window's end cut off; the true W1 is at most one decode step
/// later, a ~0.1 % error at each end of a 2–3 s window.
fn window_truth(lines: &[&Value], trace: &HashMap<String, Value>, duration: f64) -> f64 {
    let cut = lines.iter().filter(|l| l["status"] == "cancelled" && l["in_window"] == true);
    let w1 = cut.map(|l| num(&l["last_token_s"])).fold(f64::MIN, f64::max) + 1e-6;
    let w0 = w1 - duration;
    let mut tokens = 0.0;
    for l in lines.iter().filter(|l| !l["first_token_s"].is_null()) {
        let id = l["request_id"].as_str().expect("the server's id");
        let emissions = trace[id]["emissions"].as_array().unwrap();
        let offset = num(&l["first_token_s"]) - num(&emissions[0][0]);
        tokens +=
            emissions.iter().filter(|e| (w0..w1).contains(&(num(&e[0]) + offset))).map(|e| num(&e[1])).sum::<f64>();
    }
    tokens
}

/// Speculative decoding (2.3 tokens per chunk on average, varying chunk by chunk) on a server that
/// reports usage only at the end: a cell is valid only with a count within 1 % of what the engine
/// sent inside the window. A cell whose requests end inside it is counted from their totals and
/// the spread of their tokens per chunk; a C > 1 cell whose requests outlast the window is counted
/// by a probe batch of C requests, whose spread bounds the count (4.2 % here: an error); a single
/// request cannot tell how much chunks vary. Chunks that only now and then carry two tokens (a
/// draft accepted 1 % of the time; llama.cpp holding back half a character looks the same) give a
/// probe batch whose bound is under 1 %: that cell is valid, and its count is held to the trace.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn speculative_decoding_with_usage_at_the_end_is_counted_within_one_percent_or_not_valid() {
    struct Spec {
        concurrency: u64,
        max_tokens: &'static str,
        duration: f64,
        /// `Some(text)`: the cell must be an error saying this; `None`: it must be valid.
        error: Option<&'static str>,
        /// The profile's draft length and acceptance probability.
        speculative: (u32, f64),
    }
    let cases = [
        Spec { concurrency: 2, max_tokens: "200", duration: 3.0, error: None, speculative: (4, 0.6) },
        Spec {
            concurrency: 4,
            max_tokens: "8000",
            duration: 2.0,
            error: Some("may be off by up to"),
            speculative: (4, 0.6),
        },
        Spec { concurrency: 4, max_tokens: "8000", duration: 2.0, error: None, speculative: (1, 0.01) },
        Spec {
            concurrency: 1,
            max_tokens: "8000",
            duration: 2.0,
            error: Some("a single request cannot tell"),
            speculative: (4, 0.6),
        },
    ];
    let dir = tempfile::tempdir().unwrap();
    let mut failures = Vec::new();
    for (i, case) in cases.iter().enumerate() {
        let dir = dir.path().join(i.to_string());
        std::fs::create_dir(&dir).unwrap();
        let profile = dir.join("spec.toml");
        let (draft, acceptance) = case.speculative;
        let text = format!(
            "{}\n[speculative]\ndraft_tokens = {draft}\nacceptance = {acceptance}\nseed = 5\n",
            include_str!("../../../sm-sim/profiles/tiny.toml")
        );
        std::fs::write(&profile, text).unwrap();
        let spec = SimSpec {
            profile: profile.to_str().unwrap(),
            faults: &["usage-at-end"],
            trace_dir: Some(&dir),
            ..SimSpec::default()
        };
        let sim = sim(spec).await;
        let (url, c, d) = (sim.handle.url(), case.concurrency.to_string(), format!("{}s", case.duration));
        let mut args = vec!["--url", url.as_str(), "--contexts", "1k", "--concurrency", &c, "--duration", &d];
        args.extend_from_slice(&["--max-tokens", case.max_tokens, "--save-requests"]);
        args.extend_from_slice(QUICK);
        let out = dir.join("out");
        let r = run(&out, &args).await;
        sim.handle.shutdown().await;
        let cell = r.cell(1024, case.concurrency);
        let name = format!("C={} max_tokens={} speculative {draft}@{acceptance}", case.concurrency, case.max_tokens);
        if cell["status"] == "valid" {
            let trace: HashMap<String, Value> = trace_lines(&dir.join("trace.jsonl"))
                .into_iter()
                .map(|t| (format!("chatcmpl-{}", t["id"]), t))
                .collect();
            let lines = request_lines(&out);
            let lines: Vec<&Value> = lines.iter().filter(|l| l["phase"] == "decode").collect();
            let truth = window_truth(&lines, &trace, case.duration);
            let counted = num(&cell["output_tokens"]);
            let off = (counted / truth - 1.0) * 100.0;
            eprintln!("{name}: counted {counted} tokens, the engine sent {truth} in the window ({off:+.2} %)");
            if off.abs() > 1.0 || case.error.is_some() {
                failures.push(format!(
                    "{name}: valid with {counted} tokens, the engine sent {truth} ({off:+.2} %): {cell}"
                ));
            }
        } else if case.error.is_none_or(|says| !cell["reason"].as_str().is_some_and(|r| r.contains(says))) {
            failures.push(format!("{name}: expected {:?}, got {cell}", case.error.unwrap_or("valid")));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
