//! Token counts a server does not state chunk by chunk, checked against the simulated engine's
//! trace (its ground truth): usage only at the end of a request with several tokens per chunk,
//! for requests that end inside the window, span its start, or outlast it; and a stream that
//! goes silent shortly before the window closes.

use crate::common::{QUICK, SimSpec, run, sim, trace_lines};
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
