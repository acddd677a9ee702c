//! The fidelity benchmark in its CI form (the full table is `bench/fidelity/run.sh`, docs/fidelity.md):
//! the real binary measures 100 streams on the fidelity profile (a constant 10 ms step, a 20 ms
//! cached-prompt TTFT), and its TBT p50 and total tok/s must agree with the same figures computed
//! from the sim's `--trace` within twice the targets (1 %, 0.5 %).
//!
//! TTFT is held to a looser upper bound, [`TTFT_HIGH_MS`], not to twice the 2 ms target: with 100-token
//! requests on a constant step all 100 streams restart in the same step, and each burst of 100
//! requests waits in the client's send path and the sim's accept queue before the trace's arrival
//! time, which is stamped when the sim's handler starts. On 2 shared cores that queue is several ms
//! (docs/performance.md, "Measurement fidelity"). The client and the sim are optimised even in test
//! builds (the workspace manifest's `profile.dev.package` entries): unoptimised, the same test was
//! +17…+20 ms off; optimised, +6…+11 ms on a machine with another build running. Queues only make a
//! TTFT late, so the lower bound is twice the target: a TTFT that ends at the role chunk (−20 ms) or
//! starts at the wrong instant still fails, and so does one that is late by more than a step plus
//! the cached-prompt TTFT.

//! The truth is computed like bench/fidelity/fidelity.py: speedmatrix cancels every stream at the
//! window's end W1, so the first disconnect in the trace marks W1 on the sim's clock, and the window
//! is [W1 − duration, W1). The trace records when the scheduler released a token; the sim's HTTP
//! handlers write it later (a few ms when 100 streams share a loaded core), and that lag is server
//! time that any client counts in its TTFT. The TTFT error is therefore taken net of the sim's own
//! median release-to-write lag, read from its emission statistics. CPU time and memory are not
//! asserted here: CI machines are shared.

use std::path::Path;

use crate::common::{run, trace_lines};
use serde_json::Value;
use sm_sim::{Profile, SimOptions};

const STREAMS: u64 = 100;
const WINDOW_S: f64 = 4.0;
/// TTFT p50 error bounds (ms): twice the 2 ms target below, looser above (see the module comment).
const TTFT_LOW_MS: f64 = -2.0 * 2.0;
const TTFT_HIGH_MS: f64 = 25.0;
const TBT_PCT: f64 = 2.0 * 1.0;
const TOK_S_PCT: f64 = 2.0 * 0.5;

fn pct(mut v: Vec<f64>, p: f64) -> f64 {
    assert!(!v.is_empty(), "no values");
    v.sort_by(f64::total_cmp);
    let k = (v.len() - 1) as f64 * p / 100.0;
    let (lo, hi) = (k.floor() as usize, (k.ceil() as usize).min(v.len() - 1));
    v[lo] + (v[hi] - v[lo]) * (k - lo as f64)
}

pub(crate) struct Truth {
    pub(crate) ttft_p50: f64,
    pub(crate) tbt_p50: f64,
    pub(crate) tok_s: f64,
}

fn emissions(r: &Value) -> Vec<(f64, f64)> {
    r["emissions"].as_array().unwrap().iter().map(|e| (e[0].as_f64().unwrap(), e[1].as_f64().unwrap())).collect()
}

/// The window's figures from the sim's trace (also the truth of the multi-rank test, `run_ranks`).
pub(crate) fn truth(trace: &[Value], window_s: f64) -> Truth {
    // speedmatrix's one-token requests (prefill row, scout) are not part of the cell
    let cell: Vec<&Value> =
        trace.iter().filter(|r| !(r["finish"] == "length" && r["completion_tokens"].as_u64() <= Some(1))).collect();
    let w1 = cell
        .iter()
        .filter(|r| r["finish"] == "disconnect")
        .filter_map(|r| r["end"].as_f64())
        .min_by(f64::total_cmp)
        .expect("speedmatrix cancelled its streams at the window's end");
    let w0 = w1 - window_s;
    let ttft: Vec<f64> = cell
        .iter()
        .filter_map(|r| Some((r["first_token"].as_f64()?, r["arrival"].as_f64()?)))
        .filter(|(first, _)| *first < w1)
        .map(|(first, arrival)| (first - arrival) * 1000.0)
        .collect();
    let (mut tbt, mut tokens) = (Vec::new(), 0.0);
    for r in &cell {
        let inside: Vec<(f64, f64)> = emissions(r).into_iter().filter(|(t, _)| (w0..w1).contains(t)).collect();
        tokens += inside.iter().map(|e| e.1).sum::<f64>();
        if inside.len() >= 2 {
            let n: f64 = inside[1..].iter().map(|e| e.1).sum();
            tbt.push((inside[inside.len() - 1].0 - inside[0].0) * 1000.0 / n);
        }
    }
    Truth { ttft_p50: pct(ttft, 50.0), tbt_p50: pct(tbt, 50.0), tok_s: tokens / window_s }
}

/// One measurement: (TTFT p50 error ms, TBT p50 error %, tok/s error %) and a description.
/// `threads`: `--client-threads`, which the record must then keep.
async fn measure(dir: &Path, threads: Option<u32>) -> ((f64, f64, f64), String) {
    let profile_path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../bench/fidelity/fidelity.toml");
    let mut opts = SimOptions::new(Profile::from_file(&profile_path).expect("fidelity profile"));
    let trace_path = dir.join("trace.jsonl");
    opts.trace = Some(trace_path.clone());
    let sim = sm_sim::start(opts).await.expect("sim starts");
    let url = sim.url();
    let window = format!("{WINDOW_S}s");
    let streams = STREAMS.to_string();
    let threads_arg = threads.map(|n| n.to_string());
    let mut args = vec![
        "--url",
        &url,
        "--contexts",
        "1k",
        "--concurrency",
        &streams,
        "--duration",
        &window,
        "--max-tokens",
        "100",
        "--ready-stable",
        "1s",
        "--warmup",
        "0s",
        "--no-prefill-at-max",
        "--progress",
        "quiet",
    ];
    if let Some(n) = &threads_arg {
        args.extend(["--client-threads", n]);
    }
    let r = run(&dir.join("out"), &args).await;
    let stats = sim.emission_stats();
    let write_lag_ms = stats.handler.quantile_ms(0.5) - stats.scheduler.quantile_ms(0.5);
    sim.shutdown().await;
    assert_eq!(r.code, 0, "stdout:\n{}\nstderr:\n{}", r.stdout, r.stderr);
    let cell = r.cell(1024, STREAMS);
    assert_eq!(cell["status"], "valid", "{cell}");
    let recorded = r.record()["tool"]["client_threads"].as_u64();
    assert!(recorded.is_some_and(|n| n >= 1), "the record keeps the client's threads: {}", r.record()["tool"]);
    if let Some(n) = threads {
        assert_eq!(recorded, Some(u64::from(n)), "--client-threads {n} is what ran");
    }
    let t = truth(&trace_lines(&trace_path), WINDOW_S);
    let got = |k: &str| cell[k].as_f64().unwrap_or_else(|| panic!("{k} in {cell}"));
    let errors = (
        got("ttft_ms_p50") - t.ttft_p50 - write_lag_ms,
        (got("tbt_ms_p50") / t.tbt_p50 - 1.0) * 100.0,
        (got("total_tok_s") / t.tok_s - 1.0) * 100.0,
    );
    let text = format!(
        "TTFT p50 {:.2} ms (truth {:.2} + sim write lag {write_lag_ms:.2}), TBT p50 {:.3} ms (truth {:.3}), {:.1} tok/s (truth {:.1}); \
         client lag p99 {} ms, CPU {} %",
        got("ttft_ms_p50"),
        t.ttft_p50,
        got("tbt_ms_p50"),
        t.tbt_p50,
        got("total_tok_s"),
        t.tok_s,
        cell["client_lag_ms_p99"],
        cell["client_cpu_pct"]
    );
    (errors, text)
}

fn within(e: (f64, f64, f64)) -> bool {
    (TTFT_LOW_MS..=TTFT_HIGH_MS).contains(&e.0) && e.1.abs() <= TBT_PCT && e.2.abs() <= TOK_S_PCT
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn speedmatrix_agrees_with_the_trace_at_100_streams() {
    agrees_with_the_trace(None).await;
}

/// Streams spread over two worker threads (each stream's tokens counted on whichever thread its
/// task runs, its own shard of the live state, its own cancel: docs/scaling.md) give the same
/// figures as the trace.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_client_threads_agree_with_the_trace_at_100_streams() {
    agrees_with_the_trace(Some(2)).await;
}

async fn agrees_with_the_trace(threads: Option<u32>) {
    // A loaded CI machine can starve the client for a moment; a second measurement separates that
    // from a real measurement error, which repeats.
    let mut seen = Vec::new();
    for attempt in 1..=2 {
        let dir = tempfile::tempdir().unwrap();
        let (errors, text) = measure(dir.path(), threads).await;
        eprintln!("attempt {attempt}: {text}; errors {errors:.3?}");
        if within(errors) {
            return;
        }
        seen.push(format!("attempt {attempt}: errors (TTFT ms, TBT %, tok/s %) {errors:.3?}: {text}"));
    }
    panic!(
        "speedmatrix's errors exceed the bounds (TTFT p50 {TTFT_LOW_MS}…+{TTFT_HIGH_MS} ms, TBT {TBT_PCT} %, \
         tok/s {TOK_S_PCT} %):\n{}",
        seen.join("\n")
    );
}

#[test]
fn the_truth_follows_the_trace() {
    // streams cancelled at 1.0 s: one from 0.025 s, one that ended at 0.5 s and its successor
    let mut lines = vec![serde_json::json!({"finish":"length","completion_tokens":1,"arrival":0.0,
        "first_token":0.001,"end":0.001,"emissions":[[0.001,1]]})];
    let steady = |arrival: f64, first: f64, end: f64, finish: &str| {
        let em: Vec<Value> = (0..)
            .map(|i| first + i as f64 * 0.01)
            .take_while(|t| *t < end)
            .map(|t| serde_json::json!([t, 1]))
            .collect();
        serde_json::json!({"finish": finish, "completion_tokens": em.len(), "arrival": arrival,
            "first_token": first, "end": end, "emissions": em})
    };
    lines.push(steady(0.0, 0.025, 1.0, "disconnect"));
    lines.push(steady(0.0, 0.03, 0.5, "length"));
    lines.push(steady(0.5, 0.535, 1.001, "disconnect"));
    let t = truth(&lines, 0.5);
    assert!((t.ttft_p50 - 30.0).abs() < 1e-6, "TTFTs 25, 30, 35 ms: {}", t.ttft_p50);
    assert!((t.tbt_p50 - 10.0).abs() < 1e-6, "{}", t.tbt_p50);
    // [0.5, 1.0): 50 tokens of the first stream, 47 of the restarted one
    assert!((t.tok_s - 97.0 / 0.5).abs() < 1e-6, "{}", t.tok_s);
}
