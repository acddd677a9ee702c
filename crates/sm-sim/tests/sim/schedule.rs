//! The scheduler against its ground truth: admission under `max_num_seqs`, chunked prefill, and step
//! times by context and batch, read from `--trace` (the engine's own release times) rather than from
//! a client's clock, so that a loaded machine adds no noise of its own to the figures compared.

use std::path::PathBuf;
use std::time::Duration;

use crate::common::*;
use serde_json::{Value, json};
use sm_sim::{Profile, SimHandle};

/// A sim writing its trace into a temporary directory (kept alive by the returned guard).
async fn traced(profile: Profile) -> (SimHandle, PathBuf, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("trace.jsonl");
    let p = path.clone();
    let sim = sim_with(move |o| {
        o.profile = profile;
        o.trace = Some(p);
    })
    .await;
    (sim, path, dir)
}

/// Stops the sim (which flushes the trace) and returns the records by request id.
async fn finish(sim: SimHandle, path: &PathBuf) -> Vec<Value> {
    sim.shutdown().await;
    let text = std::fs::read_to_string(path).unwrap();
    let mut recs: Vec<Value> = text.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    recs.sort_by_key(|r| r["id"].as_u64());
    recs
}

fn time(r: &Value, key: &str) -> f64 {
    r[key].as_f64().unwrap_or_else(|| panic!("{key} missing in {r}"))
}

fn emission_times(r: &Value) -> Vec<f64> {
    r["emissions"].as_array().unwrap().iter().map(|e| e[0].as_f64().unwrap()).collect()
}

/// Median gap, in ms, between consecutive emissions at times `ts`. A median, not a mean: a release
/// delayed by a busy machine moves one gap up and the next down, and the median ignores both.
fn median_gap_ms(ts: &[f64]) -> f64 {
    let mut gaps: Vec<f64> = ts.windows(2).map(|w| (w[1] - w[0]) * 1000.0).collect();
    assert!(!gaps.is_empty(), "need two emissions at least");
    gaps.sort_by(f64::total_cmp);
    gaps[gaps.len() / 2]
}

fn completion(prompt: Value, max_tokens: u32) -> Value {
    json!({"prompt": prompt, "max_tokens": max_tokens, "ignore_eos": true, "stream": true})
}

/// `n` token ids of the sim's tokenizer, distinct per `salt` (so no prefix is shared).
fn token_ids(n: u32, salt: u32) -> Value {
    json!((0..n).map(|i| 0x2061_6100 + salt * 0x1_0000 + (i % 26)).collect::<Vec<u32>>())
}

/// A profile with one decode row: `step_ms` by `contexts` at every batch size.
fn decode_profile(batch: &str, contexts: &str, step_ms: &str, max_batched: u64, prefill_tok_s: u64) -> Profile {
    profile_from(&format!(
        r#"
name = "sched"
model = "sched"
max_model_len = 16384
kv_cache_tokens = 262144
block_size = 16
max_num_seqs = 64
max_num_batched_tokens = {max_batched}
[prefill]
contexts = [1024]
tokens_per_s = [{prefill_tok_s}]
[decode]
batch = {batch}
contexts = {contexts}
step_ms = {step_ms}
[overhead]
cached_prefill_ms = 1
"#
    ))
}

async fn stream_all(url: &str, bodies: Vec<Value>) -> Vec<Streamed> {
    let tasks: Vec<_> = bodies
        .into_iter()
        .map(|b| {
            let url = url.to_string();
            tokio::spawn(async move { post_stream(&url, "/v1/completions", b, &[]).await })
        })
        .collect();
    let mut out = Vec::new();
    for t in tasks {
        out.push(t.await.unwrap());
    }
    out
}

#[tokio::test]
async fn admission_stops_at_max_num_seqs_and_the_rest_wait() {
    let (sim, path, _dir) = traced(flat_profile(10.0, 400_000, 131_072, 4)).await;
    let url = sim.url();
    let streams = tokio::spawn({
        let url = url.clone();
        async move { stream_all(&url, (0..10).map(|i| completion(token_ids(100, i), 60)).collect()).await }
    });
    let m = wait_metrics(&url, Duration::from_secs(20), |m| {
        metric(m, "vllm:num_requests_running") == 4.0 && metric(m, "vllm:num_requests_waiting") == 6.0
    })
    .await;
    assert_eq!(metric(&m, "vllm:num_requests_running"), 4.0, "{m}");
    assert_eq!(metric(&m, "vllm:num_requests_waiting"), 6.0, "{m}");
    for s in streams.await.unwrap() {
        assert_eq!(s.token_events().len(), 60);
    }
    let recs = finish(sim, &path).await;
    assert_eq!(recs.len(), 10);
    // ground truth: admitted in waves of 4, each after a request of the wave before has run its 60
    // tokens (one prefill step, then 59 decode steps of 10 ms); uncapped, all 10 start together
    let mut admitted: Vec<f64> = recs.iter().map(|r| time(r, "admitted")).collect();
    admitted.sort_by(f64::total_cmp);
    for k in 4..10 {
        let wait_ms = (admitted[k] - admitted[k - 4]) * 1000.0;
        assert!(wait_ms >= 589.0, "request {k} admitted {wait_ms:.1} ms after request {}", k - 4);
    }
}

#[tokio::test]
async fn a_long_prompt_is_prefilled_in_chunks_of_the_step_budget() {
    // 20 ms decode steps; prefill at 50K tok/s under a budget of 1,024 tokens per step, of which one
    // goes to the decoding stream: 8,000 prompt tokens take ceil(8000 / 1023) = 8 steps
    let (sim, path, _dir) = traced(decode_profile("[1]", "[1024]", "[[20]]", 1024, 50_000)).await;
    let url = sim.url();
    let decoding = tokio::spawn({
        let url = url.clone();
        async move { post_stream(&url, "/v1/completions", completion(token_ids(100, 0), 200), &[]).await }
    });
    wait_metrics(&url, Duration::from_secs(20), |m| metric(m, "vllm:generation_tokens_total") >= 3.0).await;
    post_stream(&url, "/v1/completions", completion(token_ids(8000, 1), 3), &[]).await;
    decoding.await.unwrap();
    let recs = finish(sim, &path).await;
    let (a, b) = (&recs[0], &recs[1]);
    assert_eq!(b["prompt_tokens"], 8000);
    let (admitted, first) = (time(b, "admitted"), time(b, "first_token"));
    assert!(time(a, "first_token") < admitted && first < time(a, "end"), "the short stream decoded throughout");
    // 8 steps of 20 ms decode + 160 ms of prefill; in one chunk it would be 20 + 160 ms. Schedule
    // times are exact and lateness only adds, so this lower bound holds on any machine
    let ttft_ms = (first - admitted) * 1000.0;
    assert!(ttft_ms >= 319.9, "prefill took {ttft_ms:.1} ms of schedule: not chunked by the budget");
    // the decoding stream's steps stretch by the chunk's prefill time (20 → ~40 ms) while it prefills
    let ts = emission_times(a);
    let during: Vec<f64> = ts.iter().copied().filter(|&t| t > admitted && t <= first).collect();
    let after: Vec<f64> = ts.iter().copied().filter(|&t| t > first).collect();
    assert!(during.len() >= 7, "{} emissions of the short stream during the prefill", during.len());
    let (gap_during, gap_after) = (median_gap_ms(&during), median_gap_ms(&after));
    assert!(gap_during > 1.6 * gap_after, "gaps: {gap_during:.2} ms while prefilling, {gap_after:.2} ms after");
}

#[tokio::test]
async fn step_time_follows_the_context_linearly() {
    // 20 ms at 1K, 60 ms at 8K: 100 tokens clamp to 20, 4,608 (the midpoint) is 40, 9,000 clamps to 60.
    // Steps of 20 ms or more: a step thread without real-time priority on a loaded machine can fall
    // behind shorter ones for a while, and then its releases follow the CPU rather than the schedule
    let (sim, path, _dir) = traced(decode_profile("[1]", "[1024, 8192]", "[[20, 60]]", 16384, 1_000_000)).await;
    let url = sim.url();
    for (salt, n) in [(0, 100), (1, 4608), (2, 9000)] {
        post_stream(&url, "/v1/completions", completion(token_ids(n, salt), 30), &[]).await;
    }
    let recs = finish(sim, &path).await;
    for (r, want) in recs.iter().zip([20.0, 40.0, 60.0]) {
        let got = median_gap_ms(&emission_times(r));
        assert!((got - want).abs() < 3.0, "prompt {}: {got:.2} ms per step, profile says {want}", r["prompt_tokens"]);
    }
}

#[tokio::test]
async fn step_time_is_log_linear_in_batch() {
    // 20 ms at batch 1, 100 ms at batch 16: batch 4 is 60 ms log-linearly (36 ms if it were linear)
    let (sim, path, _dir) = traced(decode_profile("[1, 16]", "[1024]", "[[20], [100]]", 4096, 1_000_000)).await;
    let url = sim.url();
    stream_all(&url, (0..4).map(|i| completion(token_ids(100, i), 40)).collect()).await;
    let recs = finish(sim, &path).await;
    // the window in which all four were decoding
    let from = recs.iter().map(|r| time(r, "first_token")).fold(f64::MIN, f64::max);
    let to = recs.iter().map(|r| time(r, "end")).fold(f64::MAX, f64::min);
    for r in &recs {
        let ts: Vec<f64> = emission_times(r).into_iter().filter(|&t| t >= from && t < to).collect();
        assert!(ts.len() >= 10, "only {} steps with all four running", ts.len());
        let got = median_gap_ms(&ts);
        assert!((got - 60.0).abs() < 4.0, "batch 4: {got:.2} ms per step, log-linear says 60, linear 36");
    }
}

/// A profile whose cached-prompt TTFT grows steeply with the running batch, as the seed profile's
/// does: `ttft_1` ms at batch 1, `ttft_b` at `batch`, on a flat decode step of `step_ms`.
fn ttft_profile(step_ms: f64, batch: u32, ttft_1: f64, ttft_b: f64) -> Profile {
    profile_from(&format!(
        r#"
name = "ttft"
model = "ttft"
max_model_len = 16384
kv_cache_tokens = 262144
block_size = 16
max_num_seqs = 64
max_num_batched_tokens = 4096
[prefill]
contexts = [1024]
tokens_per_s = [1000000]
[decode]
batch = [1]
contexts = [1024]
step_ms = [[{step_ms}]]
[overhead]
cached_prefill_ms = 1
[ttft]
batch = [1, {batch}]
contexts = [1024]
cached_ms = [[{ttft_1}], [{ttft_b}]]
"#
    ))
}

/// Each record's TTFT in ms on the engine's own clock: arrival to the first release.
fn ttfts_ms(recs: &[Value]) -> Vec<f64> {
    recs.iter().map(|r| (time(r, "first_token") - time(r, "arrival")) * 1000.0).collect()
}

fn quantile(mut v: Vec<f64>, q: f64) -> f64 {
    v.sort_by(f64::total_cmp);
    v[((v.len() - 1) as f64 * q).round() as usize]
}

#[tokio::test]
async fn a_burst_of_cached_prompts_waits_as_the_batch_it_runs_in() {
    // A decode cell's first wave: 16 requests with one cached prompt, sent at once. Each runs in a
    // batch of 16, so each waits the profile's TTFT at batch 16 (800 ms). Looked up by its place in
    // the admission order instead (1, 2, … 16), the first waited 100 ms and the median request the
    // TTFT of batch ~8, and the later ones also waited for the first one's timer before admission.
    let (sim, path, _dir) = traced(ttft_profile(10.0, 16, 100.0, 800.0)).await;
    let url = sim.url();
    let prompt = token_ids(1000, 0);
    // cold: fills the prefix cache (62 of 63 blocks; the rest is within one block: a cached prompt)
    post_stream(&url, "/v1/completions", completion(prompt.clone(), 1), &[]).await;
    stream_all(&url, (0..16).map(|_| completion(prompt.clone(), 20)).collect()).await;
    let recs = finish(sim, &path).await;
    assert_eq!(recs.len(), 17);
    let ttft = ttfts_ms(&recs[1..]);
    // Schedule times are exact and lateness only adds; a first token due inside a 10 ms decode step
    // leaves at the nearest step end, at most 5 ms early. The median allows for a loaded machine.
    let (p25, p50) = (quantile(ttft.clone(), 0.25), quantile(ttft.clone(), 0.5));
    assert!(p25 >= 794.0 && p50 < 830.0, "TTFTs (ms) {ttft:.1?}: the profile says 800 at batch 16");
}

#[tokio::test]
async fn a_restart_into_a_running_batch_waits_as_that_batch_from_its_arrival() {
    // Four streams of different lengths on one cached prompt, each sent again as soon as it ends (a
    // decode cell's workers): after the first wave every request joins three running ones, and its
    // TTFT is the profile's at batch 4, 200 ms = five 40 ms steps, counted from its arrival; its first
    // token leaves at the step end nearest that instant. Counted from the step boundary that admitted
    // it instead, it came a whole step late (240 ms), and half a step on average on a real grid.
    let (sim, path, _dir) = traced(ttft_profile(40.0, 4, 50.0, 200.0)).await;
    let url = sim.url();
    let prompt = token_ids(1000, 0);
    post_stream(&url, "/v1/completions", completion(prompt.clone(), 1), &[]).await;
    // the workers run until all are stopped at once, so that every request they complete ran with
    // all four (a worker that stopped early would leave a smaller batch to the others)
    let workers: Vec<_> = (0..4u32)
        .map(|i| {
            let (url, prompt) = (url.clone(), prompt.clone());
            tokio::spawn(async move {
                loop {
                    post_stream(&url, "/v1/completions", completion(prompt.clone(), 4 + 3 * i), &[]).await;
                }
            })
        })
        .collect();
    tokio::time::sleep(Duration::from_millis(3500)).await;
    for w in &workers {
        w.abort();
    }
    let recs = finish(sim, &path).await;
    // ids follow arrival: the warm-up and the first wave of four come first
    let restarts: Vec<Value> = recs[5..].iter().filter(|r| r["finish"] == "length").cloned().collect();
    assert!(restarts.len() >= 12, "{} restarts completed", restarts.len());
    let restarts = ttfts_ms(&restarts);
    let p50 = quantile(restarts.clone(), 0.5);
    assert!(restarts.iter().all(|&t| t >= 179.0), "restart TTFTs (ms) {restarts:.1?}: none may leave before 200 − 20");
    assert!((179.0..220.0).contains(&p50), "restart TTFTs (ms) {restarts:.1?}: median {p50:.1}, the profile says 200");
}

#[tokio::test]
async fn a_cached_prompt_held_back_by_max_num_seqs_adds_its_wait() {
    // Two sequences at most: of four cached requests sent at once, two wait for the first two to end
    // (a 100 ms TTFT, then 4 decode steps of 10 ms), then for their own TTFT (100 ms): 240 ms in all.
    // Counted from arrival alone, their TTFT would have passed before they were even admitted.
    let mut p = ttft_profile(10.0, 2, 100.0, 100.0);
    p.max_num_seqs = 2;
    let (sim, path, _dir) = traced(p).await;
    let url = sim.url();
    let prompt = token_ids(1000, 0);
    post_stream(&url, "/v1/completions", completion(prompt.clone(), 1), &[]).await;
    stream_all(&url, (0..4).map(|_| completion(prompt.clone(), 5)).collect()).await;
    let recs = finish(sim, &path).await;
    let mut ttft = ttfts_ms(&recs[1..]);
    ttft.sort_by(f64::total_cmp);
    assert!(ttft[..2].iter().all(|&t| (99.0..130.0).contains(&t)), "TTFTs (ms) {ttft:.1?}");
    assert!(ttft[2..].iter().all(|&t| t >= 230.0), "held back, then 100 ms: TTFTs (ms) {ttft:.1?}");
}

#[tokio::test]
async fn overridden_seqs_kv_and_step_scale_reach_the_engine() {
    // `speedmatrix sim --max-num-seqs 3 --kv-cache-tokens 40010 --step-scale 4` over a flat 5 ms step
    let p = flat_profile(5.0, 400_000, 131_072, 64)
        .with_max_num_seqs(3)
        .and_then(|p| p.with_kv_cache_tokens(40_010))
        .and_then(|p| p.with_step_scale(4.0))
        .unwrap();
    let (sim, path, _dir) = traced(p).await;
    let url = sim.url();
    let m = metrics(&url).await;
    assert!(m.contains(r#"num_gpu_blocks="2500""#) && m.contains(r#"kv_cache_size_tokens="40000""#), "{m}");
    let streams = tokio::spawn({
        let url = url.clone();
        async move { stream_all(&url, (0..5).map(|i| completion(token_ids(100, i), 20)).collect()).await }
    });
    let m = wait_metrics(&url, Duration::from_secs(20), |m| {
        metric(m, "vllm:num_requests_running") == 3.0 && metric(m, "vllm:num_requests_waiting") == 2.0
    })
    .await;
    assert_eq!(metric(&m, "vllm:num_requests_running"), 3.0, "capped at the overridden 3: {m}");
    for s in streams.await.unwrap() {
        assert_eq!(s.token_events().len(), 20);
    }
    let recs = finish(sim, &path).await;
    // the trace's schedule times are exact: 5 ms steps × 4 = 20 ms between tokens
    for r in &recs {
        let gap = median_gap_ms(&emission_times(r));
        assert!((19.9..=21.0).contains(&gap), "median gap {gap:.2} ms, not 4 × 5 ms");
    }
}
