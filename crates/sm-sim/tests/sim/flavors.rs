//! Other engines' discovery endpoints, metric names and quirks.

use std::time::Duration;

use crate::common::*;
use futures_util::StreamExt;
use serde_json::{Value, json};
use sm_sim::Flavor;

async fn get(url: &str) -> (u16, String) {
    let r = client().get(url).send().await.unwrap();
    (r.status().as_u16(), r.text().await.unwrap())
}

async fn get_json(url: &str) -> Value {
    let (s, t) = get(url).await;
    assert_eq!(s, 200, "{url}: {t}");
    serde_json::from_str(&t).unwrap()
}

#[tokio::test]
async fn flavor_names_parse() {
    for f in Flavor::ALL {
        assert_eq!(f.to_string().parse::<Flavor>().unwrap(), f);
    }
    let e = "ollama".parse::<Flavor>().unwrap_err().to_string();
    assert!(e.contains("vllm, sglang, llamacpp, tgi, generic"), "{e}");
}

#[tokio::test]
async fn sglang_discovery_and_metrics() {
    let sim = sim_with(|o| o.flavor = Flavor::Sglang).await;
    let url = sim.url();
    let info = get_json(&format!("{url}/get_server_info")).await;
    assert_eq!(info["max_total_num_tokens"], 131072);
    assert_eq!(info["max_running_requests"], 64);
    assert_eq!(info["context_length"], 16384);
    assert!(info["version"].is_string() && info["model_path"].is_string());
    let m = metrics(&url).await;
    for name in [
        "sglang:num_running_reqs",
        "sglang:num_queue_reqs",
        "sglang:gen_throughput",
        "sglang:token_usage",
        "sglang:prompt_tokens_total",
        "sglang:generation_tokens_total",
    ] {
        metric(&m, name);
    }
    assert!(!m.contains("vllm:"));
    assert_eq!(get(&format!("{url}/tokenize")).await.0, 404);
    assert_eq!(get(&format!("{url}/version")).await.0, 404);
    let s = post_stream(&url, "/v1/chat/completions", chat_body("hi", 4), &[]).await;
    assert_eq!(s.token_events().len(), 4);
    sim.shutdown().await;
}

async fn running(url: &str) -> f64 {
    metric(&metrics(url).await, "sglang:num_running_reqs")
}

#[tokio::test]
async fn sglang_keeps_generating_after_the_stream_closes() {
    let sim = sim_with(|o| {
        o.flavor = Flavor::Sglang;
        o.profile = flat_profile(5.0, 400_000, 131_072, 64);
    })
    .await;
    let url = sim.url();
    // closed without abort_request: runs on to max_tokens (200 × 5 ms)
    let s = post_stream_limit(&url, "/v1/chat/completions", chat_body("a", 200), &[], 4).await;
    let rid = s.chunks()[0]["id"].as_str().unwrap().to_string();
    tokio::time::sleep(Duration::from_millis(150)).await;
    assert_eq!(running(&url).await, 1.0, "still generating after the client left");
    // an abort for a stream that is already closed is ignored
    client().post(format!("{url}/abort_request")).json(&json!({"rid": rid})).send().await.unwrap();
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_eq!(running(&url).await, 1.0, "abort after close is ignored");
    let m = wait_metrics(&url, Duration::from_secs(5), |m| metric(m, "sglang:num_running_reqs") == 0.0).await;
    assert_eq!(metric(&m, "sglang:generation_tokens_total"), 200.0, "ran to max_tokens");

    // abort_request while the stream is open stops it
    let resp = client().post(format!("{url}/v1/chat/completions")).json(&chat_body("b", 2000)).send().await.unwrap();
    let mut stream = resp.bytes_stream();
    let first = String::from_utf8_lossy(&stream.next().await.unwrap().unwrap()).to_string();
    let chunk: Value =
        serde_json::from_str(first.trim().strip_prefix("data: ").unwrap().split("\n\n").next().unwrap()).unwrap();
    let rid = chunk["id"].as_str().unwrap().to_string();
    let r = client().post(format!("{url}/abort_request")).json(&json!({"rid": rid})).send().await.unwrap();
    assert_eq!(r.status(), 200);
    let mut rest = String::new();
    while let Some(Ok(b)) = tokio::time::timeout(Duration::from_secs(2), stream.next()).await.unwrap() {
        rest.push_str(&String::from_utf8_lossy(&b));
    }
    assert!(rest.contains(r#""finish_reason":"abort""#) && rest.ends_with("data: [DONE]\n\n"), "{rest}");
    let m = wait_metrics(&url, Duration::from_secs(2), |m| metric(m, "sglang:num_running_reqs") == 0.0).await;
    assert!(metric(&m, "sglang:generation_tokens_total") < 2000.0 + 200.0);
    sim.shutdown().await;
}

#[tokio::test]
async fn llamacpp_props_slots_tokenize_and_metrics() {
    let sim = sim_with(|o| o.flavor = Flavor::Llamacpp).await;
    let url = sim.url();
    let props = get_json(&format!("{url}/props")).await;
    assert_eq!(props["default_generation_settings"]["n_ctx"], 2048);
    assert_eq!(props["total_slots"], 64);
    assert_eq!(props["build_info"], "b0000-sim");
    let slots = get_json(&format!("{url}/slots")).await;
    assert_eq!(slots.as_array().unwrap().len(), 64);
    assert_eq!(slots[0], json!({"id": 0, "n_ctx": 2048, "is_processing": false}));
    let models = get_json(&format!("{url}/v1/models")).await;
    assert_eq!(models["data"][0]["owned_by"], "llamacpp");
    assert_eq!(models["data"][0]["meta"]["n_ctx_train"], 16384);
    let t: Value = client()
        .post(format!("{url}/tokenize"))
        .json(&json!({"content": "hello world"}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(t["tokens"].as_array().unwrap().len(), 4);
    let m = metrics(&url).await;
    for name in [
        "llamacpp:requests_processing",
        "llamacpp:requests_deferred",
        "llamacpp:tokens_predicted_total",
        "llamacpp:prompt_tokens_total",
    ] {
        metric(&m, name);
    }
    // a request must fit a slot's context
    let r = client()
        .post(format!("{url}/v1/completions"))
        .json(&json!({"prompt": words(2000, "l"), "max_tokens": 100}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 400);
    let s = post_stream(&url, "/v1/chat/completions", chat_body("hi", 3), &[]).await;
    assert_eq!(s.token_events().len(), 3);
    sim.shutdown().await;
}

#[tokio::test]
async fn tgi_info_and_metrics() {
    let sim = sim_with(|o| o.flavor = Flavor::Tgi).await;
    let url = sim.url();
    let info = get_json(&format!("{url}/info")).await;
    assert_eq!(info["max_input_tokens"], 16383);
    assert_eq!(info["max_total_tokens"], 16384);
    assert_eq!(info["max_concurrent_requests"], 64);
    assert_eq!(info["max_batch_total_tokens"], 131072);
    assert!(info["model_id"].is_string() && info["version"].is_string());
    let m = metrics(&url).await;
    metric(&m, "tgi_batch_current_size");
    metric(&m, "tgi_queue_size");
    assert_eq!(get(&format!("{url}/version")).await.0, 404);
    assert_eq!(
        client().post(format!("{url}/tokenize")).json(&json!({"prompt": "x"})).send().await.unwrap().status(),
        404
    );
    sim.shutdown().await;
}

#[tokio::test]
async fn generic_serves_only_v1_and_502s_the_rest() {
    let sim = sim_with(|o| o.flavor = Flavor::Generic).await;
    let url = sim.url();
    for path in ["/metrics", "/version", "/get_server_info", "/props"] {
        let (s, body) = get(&format!("{url}{path}")).await;
        assert_eq!(s, 502, "{path}");
        assert!(body.contains("<html>"), "{path}: {body}");
    }
    assert_eq!(get(&format!("{url}/health")).await.0, 200);
    get_json(&format!("{url}/v1/models")).await;
    let s = post_stream(&url, "/v1/chat/completions", chat_body("hi", 3), &[]).await;
    assert_eq!(s.token_events().len(), 3);
    sim.shutdown().await;
}
