//! The vLLM-flavor HTTP API: shapes, usage, tokenizer agreement, errors, auth.

use crate::common::*;
use serde_json::{Value, json};

#[tokio::test]
async fn models_and_version() {
    let sim = tiny().await;
    let url = sim.url();
    let m: Value = client().get(format!("{url}/v1/models")).send().await.unwrap().json().await.unwrap();
    assert_eq!(m["object"], "list");
    assert_eq!(m["data"][0]["id"], "tiny");
    assert_eq!(m["data"][0]["object"], "model");
    assert_eq!(m["data"][0]["max_model_len"], 16384);
    assert_eq!(m["data"][0]["owned_by"], "vllm");
    // the library's default, like the CLI's `--host` default (run_server_down.rs checks that one)
    assert_eq!(sim.addr().ip(), std::net::IpAddr::V4(std::net::Ipv4Addr::LOCALHOST));
    let v: Value = client().get(format!("{url}/version")).send().await.unwrap().json().await.unwrap();
    assert_eq!(v["version"], concat!(env!("CARGO_PKG_VERSION"), "+sim"));
    let h = client().get(format!("{url}/health")).send().await.unwrap();
    assert_eq!(h.status(), 200);
    sim.shutdown().await;
}

#[tokio::test]
async fn chat_stream_has_vllm_shape_and_continuous_usage() {
    let sim = tiny().await;
    let mut body = chat_body(&words(40, "a"), 12);
    body["stream_options"]["continuous_usage_stats"] = json!(true);
    let s = post_stream(&sim.url(), "/v1/chat/completions", body, &[]).await;
    assert_eq!(s.status, 200);
    assert!(s.done(), "stream ends with [DONE]");
    let chunks = s.chunks();
    let first = &chunks[0];
    assert_eq!(first["choices"][0]["delta"], json!({"role": "assistant", "content": ""}));
    assert_eq!(first["usage"]["completion_tokens"], 0);
    let id = first["id"].as_str().unwrap().to_string();
    assert!(id.starts_with("chatcmpl-"));
    let prompt_tokens = first["usage"]["prompt_tokens"].as_u64().unwrap();
    assert_eq!(prompt_tokens, 40 + 4 + 2);
    let mut last_completion = 0;
    for c in &chunks {
        assert_eq!(c["id"], id.as_str());
        assert_eq!(c["object"], "chat.completion.chunk");
        assert_eq!(c["model"], "tiny");
        assert!(c["created"].as_u64().unwrap() > 1_600_000_000);
        let u = &c["usage"];
        let done = u["completion_tokens"].as_u64().unwrap();
        assert!(done >= last_completion, "usage is cumulative");
        assert_eq!(u["total_tokens"].as_u64().unwrap(), u["prompt_tokens"].as_u64().unwrap() + done);
        last_completion = done;
    }
    let tokens = s.token_events();
    assert_eq!(tokens.len(), 12, "one chunk per token");
    for (i, (_, c)) in tokens.iter().enumerate() {
        assert_eq!(c["usage"]["completion_tokens"], i as u64 + 1);
        let fin = &c["choices"][0]["finish_reason"];
        if i == 11 { assert_eq!(fin, "length") } else { assert!(fin.is_null()) }
    }
    let last = chunks.last().unwrap();
    assert_eq!(last["choices"], json!([]));
    assert_eq!(last["usage"]["completion_tokens"], 12);
    assert_eq!(last["usage"]["prompt_tokens_details"]["cached_tokens"], 0);
    assert_eq!(sm_sim::tokenizer::count(&s.content()), 12, "the text re-tokenizes to the usage count");
    sim.shutdown().await;
}

#[tokio::test]
async fn completions_stream_and_non_streaming() {
    let sim = tiny().await;
    let url = sim.url();
    let prompt = words(30, "b");
    let body = json!({"model": "tiny", "prompt": prompt, "max_tokens": 7, "ignore_eos": true, "stream": true,
                      "stream_options": {"include_usage": true}});
    let s = post_stream(&url, "/v1/completions", body, &[]).await;
    let chunks = s.chunks();
    assert_eq!(chunks[0]["object"], "text_completion");
    assert!(chunks[0]["id"].as_str().unwrap().starts_with("cmpl-"));
    assert_eq!(s.token_events().len(), 7);
    assert_eq!(s.token_events()[6].1["choices"][0]["finish_reason"], "length");
    assert!(chunks[..chunks.len() - 1].iter().all(|c| c.get("usage").is_none()), "usage only at the end");
    assert_eq!(s.usage().unwrap()["prompt_tokens"], 30);
    assert!(s.done());

    let r: Value = client()
        .post(format!("{url}/v1/completions"))
        .json(&json!({"prompt": prompt, "max_tokens": 5, "ignore_eos": true}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(r["object"], "text_completion");
    assert_eq!(r["usage"]["completion_tokens"], 5);
    assert_eq!(r["usage"]["prompt_tokens"], 30);
    assert_eq!(sm_sim::tokenizer::count(r["choices"][0]["text"].as_str().unwrap()), 5);

    let r: Value = client()
        .post(format!("{url}/v1/chat/completions"))
        .json(
            &json!({"messages": [{"role": "user", "content": prompt}], "max_completion_tokens": 4, "ignore_eos": true}),
        )
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(r["object"], "chat.completion");
    assert_eq!(r["choices"][0]["message"]["role"], "assistant");
    assert_eq!(r["choices"][0]["finish_reason"], "length");
    assert_eq!(r["usage"]["completion_tokens"], 4);
    assert_eq!(r["usage"]["total_tokens"], 4 + 30 + 6);
    sim.shutdown().await;
}

#[tokio::test]
async fn completions_stream_has_continuous_usage() {
    let sim = tiny().await;
    let body = json!({"prompt": words(30, "c"), "max_tokens": 6, "ignore_eos": true, "stream": true,
                      "stream_options": {"include_usage": true, "continuous_usage_stats": true}});
    let s = post_stream(&sim.url(), "/v1/completions", body, &[]).await;
    assert!(s.done());
    let tokens = s.token_events();
    assert_eq!(tokens.len(), 6);
    for (i, (_, c)) in tokens.iter().enumerate() {
        let u = &c["usage"];
        assert_eq!(u["prompt_tokens"], 30, "{c}");
        assert_eq!(u["completion_tokens"], i as u64 + 1, "usage on every chunk, cumulative: {c}");
        assert_eq!(u["total_tokens"], 30 + i as u64 + 1);
    }
    let last = s.chunks().pop().unwrap();
    assert_eq!(last["choices"], json!([]));
    assert_eq!(last["usage"]["completion_tokens"], 6);
    sim.shutdown().await;
}

#[tokio::test]
async fn natural_end_without_ignore_eos() {
    let sim = tiny().await;
    let r: Value = client()
        .post(format!("{}/v1/completions", sim.url()))
        .json(&json!({"prompt": words(10, "c"), "max_tokens": 5000}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(r["choices"][0]["finish_reason"], "stop");
    let n = r["usage"]["completion_tokens"].as_u64().unwrap();
    assert!((128..=384).contains(&n), "natural length around the profile's 256: {n}");
    sim.shutdown().await;
}

#[tokio::test]
async fn tokenize_equals_usage() {
    let sim = tiny().await;
    let url = sim.url();
    let messages = json!([{"role": "system", "content": "You are terse."}, {"role": "user", "content": "Hello, world! ¿Qué tal?"}]);
    let t: Value = client()
        .post(format!("{url}/tokenize"))
        .json(&json!({"model": "tiny", "messages": messages}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(t["max_model_len"], 16384);
    let r: Value = client()
        .post(format!("{url}/v1/chat/completions"))
        .json(&json!({"model": "tiny", "messages": messages, "max_tokens": 1}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(t["count"], r["usage"]["prompt_tokens"]);
    assert_eq!(t["tokens"].as_array().unwrap().len() as u64, t["count"].as_u64().unwrap());

    let prompt = "The quick brown fox, 12345 times.\nNew line";
    let t: Value = client()
        .post(format!("{url}/tokenize"))
        .json(&json!({"prompt": prompt}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let r: Value = client()
        .post(format!("{url}/v1/completions"))
        .json(&json!({"prompt": prompt, "max_tokens": 1}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(t["count"], r["usage"]["prompt_tokens"]);
    assert_eq!(t["count"].as_u64().unwrap() as usize, sm_sim::tokenizer::count(prompt));
    let d: Value = client()
        .post(format!("{url}/detokenize"))
        .json(&json!({"tokens": t["tokens"]}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(d["prompt"], prompt);
    sim.shutdown().await;
}

async fn error_of(resp: reqwest::Response) -> (u16, String) {
    let status = resp.status().as_u16();
    let v: Value = resp.json().await.unwrap();
    assert!(v["error"]["type"].is_string(), "OpenAI-shaped error: {v}");
    (status, v["error"]["message"].as_str().unwrap().to_string())
}

#[tokio::test]
async fn errors_are_openai_shaped() {
    let sim = tiny().await;
    let url = sim.url();
    let c = client();
    let (s, m) = error_of(
        c.post(format!("{url}/v1/completions"))
            .json(&json!({"prompt": words(16000, "d"), "max_tokens": 1000}))
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(s, 400);
    assert!(m.contains("maximum context length is 16384") && m.contains("17000"), "{m}");
    let (s, m) = error_of(
        c.post(format!("{url}/v1/chat/completions"))
            .header("content-type", "application/json")
            .body("{\"messages\": [")
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(s, 400);
    assert!(m.contains("Invalid JSON"), "{m}");
    let (s, m) =
        error_of(c.post(format!("{url}/v1/chat/completions")).json(&json!({"model": "tiny"})).send().await.unwrap())
            .await;
    assert_eq!((s, m.as_str()), (400, "`messages` is required"));
    let (s, m) = error_of(
        c.post(format!("{url}/v1/chat/completions"))
            .json(&json!({"model": "gpt-9", "messages": [{"role": "user", "content": "hi"}]}))
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(s, 404);
    assert!(m.contains("gpt-9"), "{m}");
    sim.shutdown().await;
}

#[tokio::test]
async fn api_key_is_enforced_on_v1() {
    let sim = sim_with(|o| o.api_key = Some("sekret".into())).await;
    let url = sim.url();
    let c = client();
    let (s, _) = error_of(c.get(format!("{url}/v1/models")).send().await.unwrap()).await;
    assert_eq!(s, 401);
    let (s, _) = error_of(c.get(format!("{url}/v1/models")).bearer_auth("wrong").send().await.unwrap()).await;
    assert_eq!(s, 401);
    let (s, _) =
        error_of(c.post(format!("{url}/v1/completions")).json(&json!({"prompt": "x"})).send().await.unwrap()).await;
    assert_eq!(s, 401);
    assert_eq!(c.get(format!("{url}/v1/models")).bearer_auth("sekret").send().await.unwrap().status(), 200);
    let r = c
        .post(format!("{url}/v1/completions"))
        .bearer_auth("sekret")
        .json(&json!({"prompt": "x", "max_tokens": 2}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    assert_eq!(c.get(format!("{url}/health")).send().await.unwrap().status(), 200);
    assert_eq!(c.get(format!("{url}/metrics")).send().await.unwrap().status(), 200);
    sim.shutdown().await;
}

#[tokio::test]
async fn metrics_have_vllm_names() {
    let sim = tiny().await;
    let m = metrics(&sim.url()).await;
    for name in [
        "vllm:num_requests_running",
        "vllm:num_requests_waiting",
        "vllm:kv_cache_usage_perc",
        "vllm:prompt_tokens_total",
        "vllm:generation_tokens_total",
        "vllm:prefix_cache_queries_total",
        "vllm:prefix_cache_hits_total",
        "vllm:num_preemptions_total",
        "vllm:request_success_total",
    ] {
        assert!(m.contains(&format!("# TYPE {name} ")), "{name} missing:\n{m}");
        metric(&m, name);
    }
    assert!(m.contains(r#"vllm:num_requests_running{engine="0",model_name="tiny"} 0.0"#), "{m}");
    assert!(
        m.contains(r#"block_size="16""#)
            && m.contains(r#"num_gpu_blocks="8192""#)
            && m.contains(r#"kv_cache_size_tokens="131072""#)
            && m.contains(r#"enable_prefix_caching="True""#),
        "{m}"
    );
    // served model override
    let sim2 = sim_with(|o| o.model = Some("other".into())).await;
    assert_eq!(sim2.model(), "other");
    assert!(metrics(&sim2.url()).await.contains(r#"model_name="other""#));
    sim.shutdown().await;
    sim2.shutdown().await;
}
