//! Every fault, per request (header) and per server.

use std::time::Duration;

use crate::common::*;
use futures_util::StreamExt;
use serde_json::{Value, json};
use sm_sim::Fault;

fn body(max_tokens: u32) -> Value {
    let mut b = chat_body(&words(20, "f"), max_tokens);
    b["stream_options"]["continuous_usage_stats"] = json!(true);
    b
}

#[tokio::test]
async fn status_fault_answers_with_an_openai_error() {
    let sim = tiny().await;
    let url = sim.url();
    for code in [429u16, 500, 503] {
        let spec = format!("status={code}");
        let r = client()
            .post(format!("{url}/v1/chat/completions"))
            .header("x-sim-fault", &spec)
            .json(&body(3))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status().as_u16(), code);
        let v: Value = r.json().await.unwrap();
        assert_eq!(v["error"]["code"], code);
        assert!(v["error"]["message"].as_str().unwrap().contains(&spec));
    }
    let r = client()
        .post(format!("{url}/v1/chat/completions"))
        .header("x-sim-fault", "explode")
        .json(&body(3))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 400);
    let ok = client().post(format!("{url}/v1/chat/completions")).json(&body(3)).send().await.unwrap();
    assert_eq!(ok.status(), 200, "faults are per request");
    sim.shutdown().await;

    let sim = sim_with(|o| o.faults = vec![Fault::Status(503).into()]).await;
    let r = client().post(format!("{}/v1/completions", sim.url())).json(&json!({"prompt": "x"})).send().await.unwrap();
    assert_eq!(r.status(), 503);
    sim.shutdown().await;
}

#[tokio::test]
async fn disconnect_after_closes_the_connection_abruptly() {
    let sim = tiny().await;
    let url = sim.url();
    let s = post_stream(&url, "/v1/chat/completions", body(50), &[("x-sim-fault", "disconnect-after=3")]).await;
    assert!(s.broken, "the body ends with a transport error");
    assert!(!s.done(), "no [DONE]");
    assert_eq!(s.token_events().len(), 3);
    let m = wait_metrics(&url, Duration::from_secs(2), |m| m.contains(r#"finished_reason="abort"} 1.0"#)).await;
    assert!(m.contains(r#"finished_reason="abort"} 1.0"#), "the engine aborted it:\n{m}");
    // non-streaming: the connection is dropped instead of answering
    let r = client()
        .post(format!("{url}/v1/completions"))
        .header("x-sim-fault", "disconnect-after=2")
        .json(&json!({"prompt": "x", "max_tokens": 5, "ignore_eos": true}))
        .send()
        .await;
    let failed = match r {
        Err(_) => true,
        Ok(resp) => resp.bytes().await.is_err(),
    };
    assert!(failed);
    sim.shutdown().await;
}

#[tokio::test]
async fn stall_after_keeps_the_connection_open_and_silent() {
    let sim = tiny().await;
    let resp = client()
        .post(format!("{}/v1/chat/completions", sim.url()))
        .header("x-sim-fault", "stall-after=2")
        .json(&body(40))
        .send()
        .await
        .unwrap();
    let mut stream = resp.bytes_stream();
    let mut text = String::new();
    loop {
        match tokio::time::timeout(Duration::from_millis(500), stream.next()).await {
            Ok(Some(Ok(b))) => text.push_str(&String::from_utf8_lossy(&b)),
            Ok(other) => panic!("the stream should stay open, got {:?}", other.map(|r| r.is_ok())),
            Err(_) => break, // silent for 500 ms while open: stalled
        }
    }
    assert_eq!(text.matches("\"content\":\"").count(), 3, "role chunk + 2 tokens:\n{text}");
    assert!(!text.contains("[DONE]"));
    sim.shutdown().await;
}

#[tokio::test]
async fn stall_after_never_answers_a_non_streaming_request() {
    let sim = tiny().await;
    let url = sim.url();
    let req = |fault: &str| {
        client()
            .post(format!("{url}/v1/completions"))
            .header("x-sim-fault", fault)
            .json(&json!({"prompt": "x", "max_tokens": 5, "ignore_eos": true}))
    };
    // a stall at or past the last token changes nothing (as for a stream)
    let r = req("stall-after=5").send().await.unwrap();
    assert_eq!(r.status(), 200);
    // the answer would take ~10 ms: 1.5 s of silence means stalled
    let wait = Duration::from_millis(1500);
    let (a, b) = tokio::join!(req("stall-after=0").timeout(wait).send(), req("stall-after=2").timeout(wait).send());
    for r in [a, b] {
        let e = r.expect_err("a stalled request never answers");
        assert!(e.is_timeout(), "{e}");
    }
    // meanwhile the engine ran both to their end
    let m = wait_metrics(&url, Duration::from_secs(5), |m| m.contains(r#"finished_reason="length"} 3.0"#)).await;
    assert!(m.contains(r#"finished_reason="length"} 3.0"#), "{m}");
    // a held request ends with the connection when the sim stops, never with an answer
    let held = tokio::spawn(req("stall-after=1").send());
    wait_metrics(&url, Duration::from_secs(5), |m| m.contains(r#"finished_reason="length"} 4.0"#)).await;
    sim.shutdown().await;
    let answered = match held.await.unwrap() {
        Err(_) => false,
        Ok(r) => r.bytes().await.is_ok(),
    };
    assert!(!answered, "the stalled request got an answer at shutdown");
}

#[tokio::test]
async fn malformed_sse_sends_one_broken_event_and_continues() {
    let sim = tiny().await;
    let s = post_stream(&sim.url(), "/v1/chat/completions", body(10), &[("x-sim-fault", "malformed-sse")]).await;
    let broken: Vec<_> = s.events.iter().filter(|e| e.data != "[DONE]" && e.json().is_none()).collect();
    assert_eq!(broken.len(), 1);
    assert_eq!(s.token_events().len(), 10);
    assert!(s.done());
    let i = s.events.iter().position(|e| e.json().is_none()).unwrap();
    assert!(i > 0 && i < s.events.len() - 2, "mid-stream, at event {i}");
    sim.shutdown().await;
}

#[tokio::test]
async fn no_usage_never_sends_usage() {
    let sim = sim_with(|o| o.faults = vec![Fault::NoUsage.into()]).await;
    let s = post_stream(&sim.url(), "/v1/chat/completions", body(5), &[]).await;
    assert_eq!(s.token_events().len(), 5);
    assert!(s.chunks().iter().all(|c| c.get("usage").is_none()));
    assert!(s.done());
    let r: Value = client()
        .post(format!("{}/v1/completions", sim.url()))
        .json(&json!({"prompt": "x", "max_tokens": 2}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert!(r.get("usage").is_none());
    sim.shutdown().await;
}

/// llama.cpp's shape: continuous usage is asked for but not given; the total comes at the end.
#[tokio::test]
async fn usage_at_end_sends_usage_only_in_the_final_chunk() {
    let sim = sim_with(|o| o.faults = vec![Fault::UsageAtEnd.into()]).await;
    let s = post_stream(&sim.url(), "/v1/chat/completions", body(7), &[("x-sim-fault", "multi-token=3")]).await;
    assert_eq!(s.token_events().len(), 3, "3 + 3 + 1 tokens");
    let chunks = s.chunks();
    let with_usage: Vec<&Value> = chunks.iter().filter(|c| c.get("usage").is_some()).collect();
    assert_eq!(with_usage.len(), 1, "{chunks:?}");
    assert_eq!(with_usage[0]["choices"], json!([]));
    assert_eq!(with_usage[0]["usage"]["completion_tokens"], 7);
    assert!(s.done());
    sim.shutdown().await;
}

#[tokio::test]
async fn multi_token_sends_k_tokens_per_chunk() {
    let sim = tiny().await;
    let s = post_stream(&sim.url(), "/v1/chat/completions", body(10), &[("x-sim-fault", "multi-token=4")]).await;
    let usage: Vec<u64> =
        s.token_events().iter().map(|(_, c)| c["usage"]["completion_tokens"].as_u64().unwrap()).collect();
    assert_eq!(usage, vec![4, 8, 10]);
    let per_chunk: Vec<usize> = s
        .token_events()
        .iter()
        .map(|(_, c)| sm_sim::tokenizer::count(c["choices"][0]["delta"]["content"].as_str().unwrap()))
        .collect();
    assert_eq!(per_chunk, vec![4, 4, 2]);
    assert_eq!(s.usage().unwrap()["completion_tokens"], 10);
    sim.shutdown().await;
}

#[tokio::test]
async fn loop_repeats_the_text_exactly() {
    let sim = tiny().await;
    let url = sim.url();
    let looped = post_stream(&url, "/v1/chat/completions", body(120), &[("x-sim-fault", "loop")]).await.content();
    let w: Vec<&str> = looped.split_whitespace().collect();
    assert!(w.len() >= 40);
    assert_eq!(w[0..8], w[8..16]);
    assert_eq!(w[0..8], w[24..32]);
    let normal = post_stream(&url, "/v1/chat/completions", body(120), &[]).await.content();
    let w: Vec<&str> = normal.split_whitespace().collect();
    assert_ne!(w[0..8], w[8..16]);
    sim.shutdown().await;
}

#[tokio::test]
async fn slow_first_token_delays_the_first_token() {
    let sim = tiny().await;
    let url = sim.url();
    let slow = post_stream(&url, "/v1/chat/completions", body(3), &[("x-sim-fault", "slow-first-token=400")]).await;
    assert!(slow.ttft() >= Duration::from_millis(400), "{:?}", slow.ttft());
    let fast = post_stream(&url, "/v1/chat/completions", body(3), &[]).await;
    assert!(fast.ttft() < Duration::from_millis(200), "{:?}", fast.ttft());
    sim.shutdown().await;
}

#[tokio::test]
async fn scoped_server_faults_hit_only_matching_requests() {
    let faults = ["status=503@prompt=[w],max-tokens=2,from=2,to=3", "no-usage@prompt=[nu]"];
    let sim = sim_with(|o| o.faults = faults.iter().map(|f| f.parse().unwrap()).collect()).await;
    let url = sim.url();
    let status = |prompt: &'static str, max_tokens: u32| {
        let url = url.clone();
        async move {
            let b = chat_body(&format!("{prompt}{}", words(5, "s")), max_tokens);
            client().post(format!("{url}/v1/chat/completions")).json(&b).send().await.unwrap().status().as_u16()
        }
    };
    // the first matching request is spared, the 2nd and 3rd fail, the 4th is past `to`;
    // other prompts and other max_tokens neither fail nor count
    let mut got = Vec::new();
    for (prompt, max_tokens) in [("[w]", 2), ("[m]", 2), ("[w]", 2), ("[w]", 3), ("[w]", 2), ("[w]", 2)] {
        got.push(status(prompt, max_tokens).await);
    }
    assert_eq!(got, [200, 200, 503, 200, 503, 200]);
    // completions prompts are matched too, and a second fault applies on its own
    let r: Value = client()
        .post(format!("{url}/v1/completions"))
        .json(&json!({"prompt": "[nu] x", "max_tokens": 2}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert!(r.get("usage").is_none(), "{r}");
    let s = post_stream(&url, "/v1/chat/completions", body(3), &[]).await;
    assert!(s.usage().is_some(), "an unscoped request keeps its usage");
    // a scope in the per-request header is refused, naming where scopes belong
    let r = client()
        .post(format!("{url}/v1/chat/completions"))
        .header("x-sim-fault", "loop@from=2")
        .json(&body(3))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 400);
    assert!(r.text().await.unwrap().contains("--fault"));
    sim.shutdown().await;
}
