//! A `[reasoning]` profile: thinking deltas first, then the answer, with the truth in usage and
//! the trace. What client code (time to first answer token, the token split) is tested against.

use std::path::PathBuf;

use crate::common::*;
use serde_json::{Value, json};
use sm_sim::{Profile, Reasoning, ReasoningField, SimHandle};

const STEP_MS: f64 = 10.0;

fn reasoning_profile(min: u32, max: u32, field: ReasoningField, seed: u64) -> Profile {
    let mut p = flat_profile(STEP_MS, 400_000, 131_072, 64);
    p.reasoning = Some(Reasoning::new(min, max, field, seed).unwrap());
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

/// `(reasoning deltas' token counts, content deltas' token counts)`, in stream order, checking
/// that no content comes before the last reasoning delta and that a reasoning delta has no
/// `content` key.
fn split(s: &Streamed, field: &str) -> (Vec<usize>, Vec<usize>) {
    let (mut think, mut answer) = (Vec::new(), Vec::new());
    for c in s.chunks() {
        let Some(d) = c["choices"].get(0).map(|ch| &ch["delta"]) else { continue };
        if let Some(t) = d.get(field) {
            assert!(d.get("content").is_none(), "a reasoning delta has no content: {c}");
            assert!(answer.is_empty(), "reasoning after the answer began: {c}");
            think.push(sm_sim::tokenizer::count(t.as_str().unwrap()));
        } else if let Some(t) = d["content"].as_str().filter(|t| !t.is_empty()) {
            answer.push(sm_sim::tokenizer::count(t));
        }
    }
    (think, answer)
}

fn continuous(body: &mut Value) {
    body["stream_options"]["continuous_usage_stats"] = json!(true);
}

#[tokio::test]
async fn thinking_comes_first_in_either_field_and_usage_and_trace_agree() {
    for field in [ReasoningField::ReasoningContent, ReasoningField::Reasoning] {
        let (sim, path, _dir) = traced(reasoning_profile(5, 5, field, 0)).await;
        let mut body = chat_body(&words(30, "r"), 12);
        continuous(&mut body);
        let s = post_stream(&sim.url(), "/v1/chat/completions", body, &[]).await;
        sim.shutdown().await;
        assert!(s.done());
        let chunks = s.chunks();
        assert_eq!(chunks[0]["choices"][0]["delta"], json!({"role": "assistant", "content": ""}));
        let (think, answer) = split(&s, field.as_str());
        assert_eq!((think, answer), (vec![1; 5], vec![1; 7]), "{field}");
        let other = if field == ReasoningField::Reasoning { "reasoning_content" } else { "reasoning" };
        let other = format!("\"{other}\":");
        assert!(s.events.iter().all(|e| !e.data.contains(&other)), "only the configured spelling");
        // every usage object carries the thinking sent so far, the final one all of it
        for c in &chunks {
            let u = &c["usage"];
            let done = u["completion_tokens"].as_u64().unwrap();
            assert_eq!(u["completion_tokens_details"]["reasoning_tokens"], done.min(5), "{c}");
        }
        let usage = s.usage().unwrap();
        assert_eq!(usage["completion_tokens"], 12);
        let last_token = chunks.iter().rev().find(|c| c["choices"].get(0).is_some()).unwrap();
        assert_eq!(last_token["choices"][0]["finish_reason"], "length");
        let rec = &trace_lines(&path)[0];
        assert_eq!(rec["reasoning_tokens"], usage["completion_tokens_details"]["reasoning_tokens"]);
        assert_eq!(rec["completion_tokens"], 12);
        let em = rec["emissions"].as_array().unwrap();
        assert_eq!(rec["first_answer"], em[5][0], "the first answer token is the 6th token's release");
        let gap = rec["first_answer"].as_f64().unwrap() - rec["first_token"].as_f64().unwrap();
        assert!((gap * 1000.0 - 5.0 * STEP_MS).abs() < STEP_MS, "5 decode steps, got {gap} s");
    }
}

#[tokio::test]
async fn ranged_thinking_is_drawn_per_request_from_the_seed() {
    let mut runs = Vec::new();
    for _ in 0..2 {
        let (sim, path, _dir) = traced(reasoning_profile(2, 9, ReasoningField::Reasoning, 11)).await;
        let mut sent = Vec::new();
        for i in 0..12 {
            let s = post_stream(&sim.url(), "/v1/chat/completions", chat_body(&words(20, "s"), 20), &[]).await;
            let (think, answer) = split(&s, "reasoning");
            let r: usize = think.iter().sum();
            assert_eq!(r + answer.iter().sum::<usize>(), 20, "request {i}");
            assert_eq!(s.usage().unwrap()["completion_tokens_details"]["reasoning_tokens"], r as u64);
            sent.push(r as u32);
        }
        sim.shutdown().await;
        let recs = trace_lines(&path);
        let r = Reasoning::new(2, 9, ReasoningField::Reasoning, 11).unwrap();
        for rec in &recs {
            let id = rec["id"].as_u64().unwrap();
            assert_eq!(rec["reasoning_tokens"], r.tokens(id), "the trace has the seed's draw");
            assert_eq!(sent[id as usize - 1], r.tokens(id), "and so does the stream");
        }
        assert!(sent.iter().all(|n| (2..=9).contains(n)), "{sent:?}");
        assert!(sent.iter().any(|n| *n != sent[0]), "drawn, not fixed: {sent:?}");
        runs.push(sent);
    }
    assert_eq!(runs[0], runs[1], "the same seed replays the same counts");
}

#[tokio::test]
async fn enable_thinking_false_answers_at_once() {
    let (sim, path, _dir) = traced(reasoning_profile(6, 6, ReasoningField::ReasoningContent, 0)).await;
    let mut body = chat_body(&words(20, "f"), 8);
    body["chat_template_kwargs"] = json!({"enable_thinking": false});
    continuous(&mut body);
    let s = post_stream(&sim.url(), "/v1/chat/completions", body, &[]).await;
    let bad = json!({"messages": [{"role": "user", "content": "x"}], "chat_template_kwargs": 1});
    let r = client().post(format!("{}/v1/chat/completions", sim.url())).json(&bad).send().await.unwrap();
    assert_eq!(r.status(), 400);
    sim.shutdown().await;
    assert_eq!(split(&s, "reasoning_content"), (vec![], vec![1; 8]));
    assert_eq!(s.usage().unwrap()["completion_tokens_details"]["reasoning_tokens"], 0);
    let rec = &trace_lines(&path)[0];
    assert_eq!(rec["reasoning_tokens"], 0);
    assert_eq!(rec["first_answer"], rec["first_token"]);
}

#[tokio::test]
async fn thinking_that_uses_up_max_tokens_leaves_no_answer() {
    let (sim, path, _dir) = traced(reasoning_profile(10, 10, ReasoningField::ReasoningContent, 0)).await;
    let s = post_stream(&sim.url(), "/v1/chat/completions", chat_body(&words(20, "x"), 6), &[]).await;
    let mut body = chat_body(&words(20, "y"), 6);
    body["stream"] = json!(false);
    let whole: Value = client()
        .post(format!("{}/v1/chat/completions", sim.url()))
        .json(&body)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    sim.shutdown().await;
    assert_eq!(split(&s, "reasoning_content"), (vec![1; 6], vec![]));
    let last = s.chunks().into_iter().rev().find(|c| c["choices"].get(0).is_some()).unwrap();
    assert_eq!(last["choices"][0]["finish_reason"], "length");
    assert!(last["choices"][0]["delta"].get("reasoning_content").is_some(), "{last}");
    let u = s.usage().unwrap();
    assert_eq!(
        (u["completion_tokens"].as_u64(), u["completion_tokens_details"]["reasoning_tokens"].as_u64()),
        (Some(6), Some(6))
    );
    let msg = &whole["choices"][0]["message"];
    assert!(msg["content"].is_null(), "{whole}");
    assert_eq!(sm_sim::tokenizer::count(msg["reasoning_content"].as_str().unwrap()), 6);
    assert_eq!(whole["choices"][0]["finish_reason"], "length");
    assert_eq!(whole["usage"]["completion_tokens_details"]["reasoning_tokens"], 6);
    for rec in trace_lines(&path) {
        assert_eq!((rec["reasoning_tokens"].as_u64(), rec["finish"].as_str()), (Some(6), Some("length")));
        assert!(rec["first_answer"].is_null(), "{rec}");
    }
}

#[tokio::test]
async fn an_emission_across_the_end_of_thinking_splits_into_two_deltas() {
    let (sim, path, _dir) = traced(reasoning_profile(4, 4, ReasoningField::Reasoning, 0)).await;
    let h = [("x-sim-fault", "multi-token=3")];
    let s = post_stream(&sim.url(), "/v1/chat/completions", chat_body(&words(20, "m"), 9), &h).await;
    sim.shutdown().await;
    assert_eq!(split(&s, "reasoning"), (vec![3, 1], vec![2, 3]));
    let rec = &trace_lines(&path)[0];
    assert_eq!(rec["first_answer"], rec["emissions"][1][0], "the second emission carries the first answer");
}

#[tokio::test]
async fn a_natural_end_comes_after_the_thinking() {
    let mut p = reasoning_profile(5, 5, ReasoningField::ReasoningContent, 0);
    p.natural_output = Some(sm_sim::natural::NaturalOutput { mean: 4.0, cv: 0.0, seed: 0 });
    let (sim, _path, _dir) = traced(p).await;
    let mut body = chat_body(&words(20, "n"), 100);
    body["ignore_eos"] = json!(false);
    let s = post_stream(&sim.url(), "/v1/chat/completions", body, &[]).await;
    sim.shutdown().await;
    assert_eq!(split(&s, "reasoning_content"), (vec![1; 5], vec![1; 4]));
    let last = s.chunks().into_iter().rev().find(|c| c["choices"].get(0).is_some()).unwrap();
    assert_eq!(last["choices"][0]["finish_reason"], "stop");
}

#[tokio::test]
async fn completions_have_no_thinking() {
    let (sim, path, _dir) = traced(reasoning_profile(5, 5, ReasoningField::ReasoningContent, 0)).await;
    let body = json!({"prompt": words(20, "c"), "max_tokens": 6, "ignore_eos": true, "stream": true,
                      "stream_options": {"include_usage": true, "continuous_usage_stats": true}});
    let s = post_stream(&sim.url(), "/v1/completions", body, &[]).await;
    sim.shutdown().await;
    assert_eq!(s.token_events().len(), 6);
    assert!(s.events.iter().all(|e| !e.data.contains("reasoning")), "no thinking, no details");
    let rec = &trace_lines(&path)[0];
    assert_eq!(rec["reasoning_tokens"], 0);
    assert_eq!(rec["first_answer"], rec["first_token"]);
}

#[tokio::test]
async fn a_profile_without_reasoning_writes_what_it_wrote_before() {
    let (sim, path, _dir) = traced(flat_profile(STEP_MS, 400_000, 131_072, 64)).await;
    let mut body = chat_body(&words(20, "o"), 4);
    continuous(&mut body);
    let s = post_stream(&sim.url(), "/v1/chat/completions", body, &[]).await;
    sim.shutdown().await;
    assert!(s.events.iter().all(|e| !e.data.contains("reasoning") && !e.data.contains("completion_tokens_details")));
    let line = std::fs::read_to_string(&path).unwrap();
    assert!(!line.contains("reasoning_tokens") && !line.contains("first_answer"), "{line}");
}
