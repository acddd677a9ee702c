//! The engine model seen from outside: prefix cache, queueing on KV, disconnect, decode speed.

use std::time::Duration;

use crate::common::*;
use serde_json::json;

#[tokio::test]
async fn second_identical_prompt_hits_the_prefix_cache() {
    // 2,000 prompt tokens at 20K tok/s: ~100 ms of prefill, versus 5 ms for a cached prompt
    let sim = sim_with(|o| o.profile = flat_profile(5.0, 20_000, 131_072, 64)).await;
    let url = sim.url();
    let prompt = words(2000, "p");
    let body = json!({"prompt": prompt, "max_tokens": 3, "ignore_eos": true, "stream": true,
                      "stream_options": {"include_usage": true}});
    let first = post_stream(&url, "/v1/completions", body.clone(), &[]).await;
    let second = post_stream(&url, "/v1/completions", body, &[]).await;
    let u1 = first.usage().unwrap();
    let u2 = second.usage().unwrap();
    assert_eq!(u1["prompt_tokens_details"]["cached_tokens"], 0);
    // full 16-token blocks only, and never the whole prompt
    assert_eq!(u2["prompt_tokens_details"]["cached_tokens"], 1984);
    assert!(first.ttft() > Duration::from_millis(80), "uncached TTFT {:?}", first.ttft());
    assert!(second.ttft() * 2 < first.ttft(), "cached {:?} vs uncached {:?}", second.ttft(), first.ttft());
    let m = metrics(&url).await;
    assert_eq!(metric(&m, "vllm:prefix_cache_hits_total"), 1984.0);
    assert_eq!(metric(&m, "vllm:prefix_cache_queries_total"), 4000.0);
    assert_eq!(metric(&m, "vllm:prompt_tokens_total"), 4000.0);
    sim.shutdown().await;
}

#[tokio::test]
async fn requests_whose_kv_does_not_fit_wait_in_the_queue() {
    // 8,192 blocks of 16; a 15,000-token prompt takes 938 blocks: 8 fit, the other 2 wait
    let sim = sim_with(|o| o.profile = flat_profile(10.0, 400_000, 131_072, 64)).await;
    let url = sim.url();
    let mut tasks = Vec::new();
    for i in 0..10 {
        let url = url.clone();
        let salt = ((b'a' + i) as char).to_string();
        tasks.push(tokio::spawn(async move {
            let body = json!({"prompt": words(15_000, &salt), "max_tokens": 60, "ignore_eos": true, "stream": true});
            post_stream(&url, "/v1/completions", body, &[]).await
        }));
    }
    let m = wait_metrics(&url, Duration::from_secs(10), |m| {
        metric(m, "vllm:num_requests_running") == 8.0 && metric(m, "vllm:num_requests_waiting") == 2.0
    })
    .await;
    assert_eq!(metric(&m, "vllm:num_requests_running"), 8.0, "{m}");
    assert_eq!(metric(&m, "vllm:num_requests_waiting"), 2.0, "{m}");
    assert!(metric(&m, "vllm:kv_cache_usage_perc") > 0.9, "{m}");
    for t in tasks {
        let s = t.await.unwrap();
        assert_eq!(s.token_events().len(), 60);
    }
    let m = wait_metrics(&url, Duration::from_secs(2), |m| metric(m, "vllm:num_requests_running") == 0.0).await;
    assert_eq!(metric(&m, "vllm:num_requests_running"), 0.0);
    assert_eq!(metric(&m, "vllm:num_requests_waiting"), 0.0);
    assert!(m.contains(r#"finished_reason="length"} 10.0"#), "{m}");
    sim.shutdown().await;
}

#[tokio::test]
async fn a_disconnect_frees_kv_and_the_running_count_drops() {
    let sim = sim_with(|o| o.profile = flat_profile(10.0, 400_000, 131_072, 64)).await;
    let url = sim.url();
    let mut keep = Vec::new();
    for i in 0..2 {
        let url = url.clone();
        let salt = ((b'k' + i) as char).to_string();
        keep.push(tokio::spawn(async move {
            let body = json!({"prompt": words(4000, &salt), "max_tokens": 400, "ignore_eos": true, "stream": true});
            post_stream_limit(&url, "/v1/completions", body, &[], 60).await
        }));
    }
    let body = json!({"prompt": words(4000, "z"), "max_tokens": 1000, "ignore_eos": true, "stream": true});
    let m0 = {
        let url2 = url.clone();
        let h = tokio::spawn(async move { post_stream_limit(&url2, "/v1/completions", body, &[], 5).await });
        let m = wait_metrics(&url, Duration::from_secs(5), |m| metric(m, "vllm:num_requests_running") == 3.0).await;
        assert_eq!(metric(&m, "vllm:num_requests_running"), 3.0, "{m}");
        let s = h.await.unwrap();
        assert_eq!(s.events.len(), 5, "read 5 events, then dropped the connection");
        m
    };
    let m1 = wait_metrics(&url, Duration::from_secs(2), |m| metric(m, "vllm:num_requests_running") == 2.0).await;
    assert_eq!(metric(&m1, "vllm:num_requests_running"), 2.0, "{m1}");
    let (kv0, kv1) = (metric(&m0, "vllm:kv_cache_usage_perc"), metric(&m1, "vllm:kv_cache_usage_perc"));
    assert!(kv1 < kv0 * 0.8, "KV usage before {kv0}, after {kv1}");
    assert!(m1.contains(r#"finished_reason="abort"} 1.0"#), "{m1}");
    for k in keep {
        k.await.unwrap();
    }
    sim.shutdown().await;
}

fn interval_ms(s: &Streamed, from: usize) -> f64 {
    let t = s.token_events();
    let (a, b) = (t[from].0.at, t[t.len() - 1].0.at);
    (b - a).as_secs_f64() * 1000.0 / (t.len() - 1 - from) as f64
}

#[tokio::test]
async fn decode_speed_follows_the_profile() {
    // 12 ms at batch 1, 24 ms at batch 8: batch 4 is 20 ms (log-linear in batch)
    let profile = profile_from(
        r#"
name = "speed"
model = "speed"
max_model_len = 4096
kv_cache_tokens = 65536
block_size = 16
max_num_seqs = 16
max_num_batched_tokens = 4096
[prefill]
contexts = [1024]
tokens_per_s = [1000000]
[decode]
batch = [1, 8]
contexts = [1024]
step_ms = [[12], [24]]
[overhead]
cached_prefill_ms = 1
"#,
    );
    let sim = sim_with(|o| o.profile = profile).await;
    let url = sim.url();
    let one = post_stream(
        &url,
        "/v1/completions",
        json!({"prompt": words(100, "s"), "max_tokens": 50, "ignore_eos": true, "stream": true}),
        &[],
    )
    .await;
    let batch1 = interval_ms(&one, 5);
    assert!((batch1 - 12.0).abs() < 3.0, "batch 1: {batch1:.2} ms per token");
    let mut tasks = Vec::new();
    for i in 0..4 {
        let url = url.clone();
        let salt = ((b'a' + i) as char).to_string();
        tasks.push(tokio::spawn(async move {
            post_stream(
                &url,
                "/v1/completions",
                json!({"prompt": words(100, &salt), "max_tokens": 50, "ignore_eos": true, "stream": true}),
                &[],
            )
            .await
        }));
    }
    for t in tasks {
        let s = t.await.unwrap();
        let ms = interval_ms(&s, 5);
        assert!((ms - 20.0).abs() < 4.0, "batch 4: {ms:.2} ms per token");
    }
    sim.shutdown().await;
}

#[tokio::test]
async fn kv_growth_preempts_the_newest_request() {
    // 1,024 tokens of KV; two requests of 300 + 400 tokens cannot both finish without preemption
    let profile = profile_from(
        r#"
name = "small-kv"
model = "small-kv"
max_model_len = 1024
kv_cache_tokens = 1024
block_size = 16
max_num_seqs = 8
max_num_batched_tokens = 2048
[prefill]
contexts = [1024]
tokens_per_s = [1000000]
[decode]
batch = [1]
contexts = [1024]
step_ms = [[1]]
[overhead]
cached_prefill_ms = 1
"#,
    );
    let sim = sim_with(|o| o.profile = profile).await;
    let url = sim.url();
    let mut tasks = Vec::new();
    for i in 0..2 {
        let url = url.clone();
        let salt = ((b'a' + i) as char).to_string();
        tasks.push(tokio::spawn(async move {
            post_stream(
                &url,
                "/v1/completions",
                json!({"prompt": words(300, &salt), "max_tokens": 400, "ignore_eos": true, "stream": true}),
                &[],
            )
            .await
        }));
    }
    for t in tasks {
        assert_eq!(t.await.unwrap().token_events().len(), 400, "preempted requests resume without losing tokens");
    }
    let m = metrics(&url).await;
    assert!(metric(&m, "vllm:num_preemptions_total") >= 1.0, "{m}");
    sim.shutdown().await;
}

#[tokio::test]
async fn seed_profile_replays_the_published_8k_row() {
    // published: prefill 8K at 26.1K tok/s (314 ms), decode at 1 request: 60 ms TTFT warm, 5.7 ms per token
    let sim = sim_with(|o| o.profile = sm_sim::Profile::builtin("seed-ling-3.0-flash-h200nvl-x2").unwrap()).await;
    let url = sim.url();
    let prompt: Vec<u32> = (0..8192u32).map(|i| 0x2061_6100 + (i % 26)).collect();
    let body = json!({"prompt": prompt, "max_tokens": 80, "ignore_eos": true, "stream": true,
                      "stream_options": {"include_usage": true}});
    let cold = post_stream(&url, "/v1/completions", body.clone(), &[]).await;
    let warm = post_stream(&url, "/v1/completions", body, &[]).await;
    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    assert!((280.0..420.0).contains(&ms(cold.ttft())), "cold TTFT {:?}", cold.ttft());
    assert!((50.0..150.0).contains(&ms(warm.ttft())), "warm TTFT {:?}", warm.ttft());
    assert_eq!(warm.usage().unwrap()["prompt_tokens_details"]["cached_tokens"], 7936);
    let tbt = interval_ms(&warm, 5);
    assert!((tbt - 5.7).abs() < 1.5, "time between tokens {tbt:.2} ms");
    sim.shutdown().await;
}
