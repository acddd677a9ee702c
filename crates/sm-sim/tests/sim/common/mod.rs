//! Helpers shared by the sim's integration tests: start a sim, stream SSE over loopback.
#![allow(dead_code)]

use std::time::{Duration, Instant};

use futures_util::StreamExt;
use serde_json::{Value, json};
use sm_sim::{Profile, SimHandle, SimOptions};

pub async fn sim_with(f: impl FnOnce(&mut SimOptions)) -> SimHandle {
    let mut opts = SimOptions::new(Profile::builtin("tiny").unwrap());
    f(&mut opts);
    sm_sim::start(opts).await.expect("sim starts")
}

pub async fn tiny() -> SimHandle {
    sim_with(|_| {}).await
}

pub fn profile_from(text: &str) -> Profile {
    Profile::from_toml_str(text).expect("test profile is valid")
}

/// A profile with a flat decode step and a flat prefill rate.
pub fn flat_profile(step_ms: f64, prefill_tok_s: u64, kv_tokens: u64, max_seqs: u64) -> Profile {
    profile_from(&format!(
        r#"
name = "flat"
model = "flat"
max_model_len = 16384
kv_cache_tokens = {kv_tokens}
block_size = 16
max_num_seqs = {max_seqs}
max_num_batched_tokens = 4096
[prefill]
contexts = [1024]
tokens_per_s = [{prefill_tok_s}]
[decode]
batch = [1]
contexts = [1024]
step_ms = [[{step_ms}]]
[overhead]
cached_prefill_ms = 5
"#
    ))
}

pub fn client() -> reqwest::Client {
    reqwest::Client::builder().build().unwrap()
}

/// A text of exactly `n` tokens of the sim's tokenizer (" wxyz" would be two: use 3 letters).
pub fn words(n: usize, salt: &str) -> String {
    let mut s = String::new();
    for i in 0..n {
        let a = (b'a' + (i % 26) as u8) as char;
        let b = (b'a' + ((i / 26) % 26) as u8) as char;
        let c = salt.chars().next().unwrap_or('q');
        s.push(' ');
        s.push(a);
        s.push(b);
        s.push(c);
    }
    s
}

pub struct Event {
    pub at: Instant,
    pub data: String,
}

impl Event {
    pub fn json(&self) -> Option<Value> {
        serde_json::from_str(&self.data).ok()
    }
}

pub struct Streamed {
    pub status: u16,
    pub events: Vec<Event>,
    /// The body ended with a transport error (connection closed abruptly).
    pub broken: bool,
    pub start: Instant,
}

impl Streamed {
    pub fn chunks(&self) -> Vec<Value> {
        self.events.iter().filter_map(Event::json).collect()
    }

    pub fn done(&self) -> bool {
        self.events.last().is_some_and(|e| e.data == "[DONE]")
    }

    pub fn content(&self) -> String {
        self.chunks()
            .iter()
            .filter_map(|c| {
                let ch = c["choices"].get(0)?;
                ch["delta"]["content"].as_str().or(ch["text"].as_str()).map(str::to_string)
            })
            .collect()
    }

    /// Events that carried generated text, with their arrival times.
    pub fn token_events(&self) -> Vec<(&Event, Value)> {
        self.events
            .iter()
            .filter_map(|e| Some((e, e.json()?)))
            .filter(|(_, c)| {
                c["choices"].get(0).is_some_and(|ch| {
                    ch["delta"]["content"].as_str().or(ch["text"].as_str()).is_some_and(|t| !t.is_empty())
                })
            })
            .collect()
    }

    pub fn usage(&self) -> Option<Value> {
        self.chunks().into_iter().rev().find_map(|c| c.get("usage").filter(|u| !u.is_null()).cloned())
    }

    pub fn ttft(&self) -> Duration {
        self.token_events()[0].0.at - self.start
    }
}

pub async fn post_stream(url: &str, path: &str, body: Value, headers: &[(&str, &str)]) -> Streamed {
    post_stream_limit(url, path, body, headers, usize::MAX).await
}

/// Streams until the end, or until `max_events` events were read (then drops the connection).
pub async fn post_stream_limit(
    url: &str,
    path: &str,
    body: Value,
    headers: &[(&str, &str)],
    max_events: usize,
) -> Streamed {
    let start = Instant::now();
    let mut req = client().post(format!("{url}{path}")).json(&body);
    for (k, v) in headers {
        req = req.header(*k, *v);
    }
    let resp = req.send().await.expect("request sent");
    let status = resp.status().as_u16();
    let mut events = Vec::new();
    let mut buf = String::new();
    let mut broken = false;
    let mut stream = resp.bytes_stream();
    'outer: while let Some(item) = stream.next().await {
        match item {
            Ok(bytes) => {
                buf.push_str(&String::from_utf8_lossy(&bytes));
                while let Some(i) = buf.find("\n\n") {
                    let ev: String = buf.drain(..i + 2).collect();
                    let data = ev.trim_end().strip_prefix("data: ").unwrap_or(ev.trim_end()).to_string();
                    events.push(Event { at: Instant::now(), data });
                    if events.len() >= max_events {
                        break 'outer;
                    }
                }
            }
            Err(_) => {
                broken = true;
                break;
            }
        }
    }
    Streamed { status, events, broken, start }
}

pub fn chat_body(prompt: &str, max_tokens: u32) -> Value {
    json!({
        "messages": [{"role": "user", "content": prompt}],
        "max_tokens": max_tokens,
        "ignore_eos": true,
        "stream": true,
        "stream_options": {"include_usage": true},
    })
}

pub async fn metrics(url: &str) -> String {
    client().get(format!("{url}/metrics")).send().await.unwrap().text().await.unwrap()
}

/// The value of the first sample of `name` in Prometheus text.
pub fn metric(text: &str, name: &str) -> f64 {
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .find(|l| l.starts_with(name) && l[name.len()..].starts_with(['{', ' ']))
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("metric {name} not found in:\n{text}"))
}

/// Polls `/metrics` until `pred` holds or `timeout` passes; returns the last text.
pub async fn wait_metrics(url: &str, timeout: Duration, pred: impl Fn(&str) -> bool) -> String {
    let end = Instant::now() + timeout;
    loop {
        let m = metrics(url).await;
        if pred(&m) || Instant::now() > end {
            return m;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}
