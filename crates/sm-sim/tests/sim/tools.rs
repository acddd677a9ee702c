//! Tool calls: a chat request with `tools` is answered with one call in OpenAI's streaming shape,
//! its truth in the trace. What client code (time to first tool call, the call's tokens, whether
//! its arguments parse) is tested against.

use std::path::PathBuf;

use crate::common::*;
use serde_json::{Value, json};
use sm_sim::{Profile, Reasoning, ReasoningField, SimHandle, Tools};

const STEP_MS: f64 = 10.0;

fn profile(invalid_json: f64) -> Profile {
    let mut p = flat_profile(STEP_MS, 400_000, 131_072, 64);
    p.tools = Tools::new(invalid_json, 3).unwrap();
    p
}

async fn traced(profile: Profile) -> (SimHandle, PathBuf, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("trace.jsonl");
    let p2 = path.clone();
    let sim = sim_with(move |o| {
        o.profile = profile;
        o.trace = Some(p2);
    })
    .await;
    (sim, path, dir)
}

fn trace_lines(path: &PathBuf) -> Vec<Value> {
    std::fs::read_to_string(path).unwrap().lines().map(|l| serde_json::from_str(l).unwrap()).collect()
}

fn with_tools(mut body: Value) -> Value {
    body["tools"] = json!([
        {"type": "function", "function": {"name": "get_weather", "description": "w", "parameters": {"type": "object"}}},
        {"type": "function", "function": {"name": "other", "parameters": {}}},
    ]);
    body["stream_options"]["continuous_usage_stats"] = json!(true);
    body
}

/// The stream's tool-call deltas: `(name, arguments fragment)` each, in order.
fn calls(s: &Streamed) -> Vec<(Option<String>, String)> {
    s.chunks()
        .iter()
        .filter_map(|c| c["choices"].get(0)?["delta"]["tool_calls"].get(0).cloned())
        .map(|t| {
            assert_eq!(t["index"], 0);
            let f = &t["function"];
            (f["name"].as_str().map(str::to_string), f["arguments"].as_str().unwrap().to_string())
        })
        .collect()
}

#[tokio::test]
async fn a_request_with_tools_streams_one_call_whose_arguments_are_json() {
    let (sim, path, _dir) = traced(profile(0.0)).await;
    let s = post_stream(&sim.url(), "/v1/chat/completions", with_tools(chat_body(&words(30, "t"), 12)), &[]).await;
    sim.shutdown().await;
    assert!(s.done());
    let got = calls(&s);
    assert_eq!(got.len(), 12, "one delta per token: the name's, then 11 argument fragments");
    assert_eq!(got[0], (Some("get_weather".into()), String::new()));
    assert!(got[1..].iter().all(|(name, frag)| name.is_none() && !frag.is_empty()));
    let head = &s.chunks()[1]["choices"][0]["delta"]["tool_calls"][0];
    assert!(head["id"].as_str().unwrap().starts_with("call_") && head["type"] == "function", "{head}");
    let args: String = got.iter().map(|(_, f)| f.as_str()).collect();
    assert!(serde_json::from_str::<Value>(&args).unwrap().is_object(), "{args}");
    assert!(s.content().is_empty(), "no content beside the call");
    // usage counts the name's delta as a token, as the client does
    let usages: Vec<u64> = s
        .chunks()
        .iter()
        .filter(|c| c["choices"].get(0).is_some_and(|ch| ch["delta"].get("tool_calls").is_some()))
        .map(|c| c["usage"]["completion_tokens"].as_u64().unwrap())
        .collect();
    assert_eq!(usages, (1..=12).collect::<Vec<_>>());
    let last = s.chunks().into_iter().rev().find(|c| c["choices"].get(0).is_some()).unwrap();
    assert_eq!(last["choices"][0]["finish_reason"], "tool_calls");
    let rec = &trace_lines(&path)[0];
    assert_eq!((rec["tool_call_tokens"].as_u64(), rec["tool_args_valid"].as_bool()), (Some(12), Some(true)));
    assert_eq!(rec["first_tool_call"], rec["first_token"], "without thinking the call is the first token");
    assert_eq!(rec["finish"], "length", "the engine's own reason stays in the trace");
}

#[tokio::test]
async fn the_invalid_share_is_seeded_and_the_trace_says_which() {
    let (sim, path, _dir) = traced(profile(0.5)).await;
    let mut valid = Vec::new();
    for i in 0..16 {
        let body = with_tools(chat_body(&words(20, &format!("v{i}")), 6));
        let s = post_stream(&sim.url(), "/v1/chat/completions", body, &[]).await;
        let args: String = calls(&s).iter().map(|(_, f)| f.as_str()).collect();
        valid.push(serde_json::from_str::<Value>(&args).is_ok_and(|v| v.is_object()));
    }
    sim.shutdown().await;
    let recs = trace_lines(&path);
    let tools = Tools::new(0.5, 3).unwrap();
    for rec in &recs {
        let id = rec["id"].as_u64().unwrap();
        assert_eq!(rec["tool_args_valid"], valid[id as usize - 1], "the trace says what the stream showed");
        assert_eq!(rec["tool_args_valid"], tools.plans_valid(id), "and it is the seed's draw");
    }
    assert!(valid.contains(&true) && valid.contains(&false), "{valid:?}");
}

#[tokio::test]
async fn thinking_comes_first_then_the_call() {
    let mut p = profile(0.0);
    p.reasoning = Some(Reasoning::new(4, 4, ReasoningField::Reasoning, 0).unwrap());
    let (sim, path, _dir) = traced(p).await;
    let s = post_stream(&sim.url(), "/v1/chat/completions", with_tools(chat_body(&words(20, "k"), 9)), &[]).await;
    // thinking that uses up max_tokens makes no call
    let none = post_stream(&sim.url(), "/v1/chat/completions", with_tools(chat_body(&words(20, "j"), 3)), &[]).await;
    sim.shutdown().await;
    assert_eq!(calls(&s).len(), 5);
    assert!(calls(&none).is_empty());
    let recs = trace_lines(&path);
    let em = recs[0]["emissions"].as_array().unwrap();
    assert_eq!(recs[0]["first_tool_call"], em[4][0], "the call's name is the token after the thinking");
    assert_eq!(recs[0]["first_tool_call"], recs[0]["first_answer"]);
    assert_eq!((recs[0]["tool_call_tokens"].as_u64(), recs[0]["tool_args_valid"].as_bool()), (Some(5), Some(true)));
    assert!(recs[1]["first_tool_call"].is_null() && recs[1]["tool_args_valid"].is_null(), "{}", recs[1]);
    assert_eq!(recs[1]["tool_call_tokens"], 0);
}

#[tokio::test]
async fn tool_choice_none_and_requests_without_tools_answer_as_before() {
    let (sim, path, _dir) = traced(profile(0.0)).await;
    let mut body = with_tools(chat_body(&words(20, "n"), 4));
    body["tool_choice"] = json!("none");
    let s = post_stream(&sim.url(), "/v1/chat/completions", body, &[]).await;
    let plain = post_stream(&sim.url(), "/v1/chat/completions", chat_body(&words(20, "p"), 4), &[]).await;
    let mut whole = with_tools(chat_body(&words(20, "w"), 5));
    whole["stream"] = json!(false);
    let whole: Value = client()
        .post(format!("{}/v1/chat/completions", sim.url()))
        .json(&whole)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    sim.shutdown().await;
    assert!(calls(&s).is_empty() && calls(&plain).is_empty());
    assert_eq!(s.token_events().len(), 4);
    let lines = std::fs::read_to_string(&path).unwrap();
    let recs: Vec<Value> = lines.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert!(recs[..2].iter().all(|r| r.get("first_tool_call").is_none()), "{lines}");
    let call = &whole["choices"][0]["message"]["tool_calls"][0];
    assert_eq!(call["function"]["name"], "get_weather");
    let args: Value = serde_json::from_str(call["function"]["arguments"].as_str().unwrap()).unwrap();
    assert!(args.is_object(), "{whole}");
    assert_eq!(whole["choices"][0]["finish_reason"], "tool_calls");
}
