//! OpenAI-compatible request bodies and what one streamed chunk says.

use serde::Deserialize;
use serde_json::{Value, json};
use sm_core::record::{Api, ReasoningEffort, ThinkingMode};

/// A prompt: chat messages (`role`, `content`); for `/v1/completions` they are
/// joined into one text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Prompt {
    pub messages: Vec<(String, String)>,
}

impl Prompt {
    pub fn as_text(&self) -> String {
        let parts: Vec<&str> = self.messages.iter().map(|(_, c)| c.as_str()).collect();
        parts.join("\n\n")
    }

    pub fn messages_json(&self) -> Value {
        Value::Array(self.messages.iter().map(|(role, content)| json!({"role": role, "content": content})).collect())
    }
}

/// What a request asks of a reasoning model's thinking (`--thinking`, `--reasoning-effort`);
/// the default sends nothing.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Reasoning {
    pub thinking: Option<ThinkingMode>,
    pub effort: Option<ReasoningEffort>,
}

impl Reasoning {
    /// `chat_template_kwargs` for a chat request: it changes the rendered prompt, so the prompt's
    /// token count is asked with it too.
    pub fn template_kwargs(&self) -> Option<Value> {
        self.thinking.map(|t| json!({"enable_thinking": t == ThinkingMode::On}))
    }

    /// Adds what `self` asks to a request body of `api`.
    pub fn apply(&self, api: Api, body: &mut Value) {
        if let (Api::Chat, Some(kwargs)) = (api, self.template_kwargs()) {
            body["chat_template_kwargs"] = kwargs;
        }
        if let Some(e) = self.effort {
            body["reasoning_effort"] = Value::String(e.as_str().into());
        }
    }
}

/// Everything that shapes one generation request.
#[derive(Debug, Clone, PartialEq)]
pub struct RequestSpec {
    pub api: Api,
    pub model: String,
    pub max_tokens: u64,
    pub stream: bool,
    pub ignore_eos: bool,
    /// `stream_options.continuous_usage_stats`: usage on every chunk.
    pub continuous_usage: bool,
    pub temperature: Option<f64>,
    pub reasoning: Reasoning,
    /// `tools` (OpenAI tool definitions) sent with every chat request; `tool_choice` is left to
    /// the server's default (`auto`). Shared: the same array goes into every body.
    pub tools: Option<std::sync::Arc<Value>>,
}

impl RequestSpec {
    pub fn path(&self) -> &'static str {
        match self.api {
            Api::Chat => "/v1/chat/completions",
            Api::Completions => "/v1/completions",
        }
    }

    pub fn body(&self, prompt: &Prompt) -> Value {
        let mut body = json!({
            "model": self.model,
            "max_tokens": self.max_tokens,
            "stream": self.stream,
        });
        match self.api {
            Api::Chat => {
                body["messages"] = prompt.messages_json();
                if let Some(tools) = &self.tools {
                    body["tools"] = Value::clone(tools);
                }
            }
            Api::Completions => body["prompt"] = Value::String(prompt.as_text()),
        }
        if self.ignore_eos {
            body["ignore_eos"] = Value::Bool(true);
        }
        if self.stream {
            body["stream_options"] = json!({
                "include_usage": true,
                "continuous_usage_stats": self.continuous_usage,
            });
        }
        if let Some(t) = self.temperature {
            body["temperature"] = json!(t);
        }
        self.reasoning.apply(self.api, &mut body);
        body
    }
}

/// What one `data:` event of a completion stream says.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Chunk {
    pub id: Option<String>,
    /// Generated text: content and reasoning deltas (or completions `text`).
    pub text: String,
    /// The answer's own text: content deltas (or completions `text`), without reasoning — what a
    /// chat client sends back as the assistant's turn.
    pub content: String,
    /// Some content, reasoning or tool call arrived (a role-only chunk with `""` is not a token,
    /// nor a tool-call delta with neither a name nor argument text).
    pub has_text: bool,
    /// The chunk carries a `delta.tool_calls` entry (methodology §7.3.1): the answer is a call.
    pub tool_call: bool,
    /// The argument text of tool call index 0 in this chunk (also in `text`).
    pub tool_args: String,
    pub finish_reason: Option<String>,
    /// Cumulative `usage.completion_tokens`, when the chunk carries usage.
    pub completion_tokens: Option<u64>,
    pub prompt_tokens: Option<u64>,
    pub cached_tokens: Option<u64>,
    /// `usage.completion_tokens_details.reasoning_tokens`: the server's count of the thinking tokens.
    pub reasoning_tokens: Option<u64>,
    /// An `error` object sent inside the stream.
    pub error: Option<String>,
}

#[derive(Debug, thiserror::Error)]
#[error("malformed stream event: {reason} (event starts with {start:?})")]
pub struct ChunkError {
    pub reason: String,
    pub start: String,
}

#[derive(Deserialize)]
struct RawChunk {
    id: Option<String>,
    #[serde(default)]
    choices: Vec<RawChoice>,
    usage: Option<RawUsage>,
    error: Option<Value>,
}

#[derive(Deserialize)]
struct RawChoice {
    delta: Option<RawDelta>,
    text: Option<String>,
    finish_reason: Option<String>,
}

#[derive(Deserialize)]
struct RawDelta {
    content: Option<String>,
    reasoning_content: Option<String>,
    reasoning: Option<String>,
    /// Read leniently (any shape is kept, not refused): a server's odd call must not fail the
    /// request whose timing is being measured.
    tool_calls: Option<Value>,
}

#[derive(Deserialize)]
struct RawUsage {
    prompt_tokens: Option<u64>,
    completion_tokens: Option<u64>,
    prompt_tokens_details: Option<RawPromptDetails>,
    completion_tokens_details: Option<RawCompletionDetails>,
}

#[derive(Deserialize)]
struct RawCompletionDetails {
    reasoning_tokens: Option<u64>,
}

#[derive(Deserialize)]
struct RawPromptDetails {
    cached_tokens: Option<u64>,
}

pub fn parse_chunk(data: &[u8]) -> Result<Chunk, ChunkError> {
    let raw: RawChunk = serde_json::from_slice(data).map_err(|e| ChunkError {
        reason: e.to_string(),
        start: String::from_utf8_lossy(&data[..data.len().min(80)]).into_owned(),
    })?;
    let mut chunk = Chunk { id: raw.id, ..Chunk::default() };
    for choice in raw.choices {
        if let Some(delta) = choice.delta {
            for part in [delta.reasoning_content, delta.reasoning].into_iter().flatten() {
                push_text(&mut chunk, &part);
            }
            if let Some(content) = delta.content {
                push_text(&mut chunk, &content);
                chunk.content.push_str(&content);
            }
            if let Some(Value::Array(calls)) = delta.tool_calls {
                push_calls(&mut chunk, &calls);
            }
        }
        if let Some(text) = choice.text {
            push_text(&mut chunk, &text);
            chunk.content.push_str(&text);
        }
        if choice.finish_reason.is_some() {
            chunk.finish_reason = choice.finish_reason;
        }
    }
    if let Some(u) = raw.usage {
        chunk.completion_tokens = u.completion_tokens;
        chunk.prompt_tokens = u.prompt_tokens;
        chunk.cached_tokens = u.prompt_tokens_details.and_then(|d| d.cached_tokens);
        chunk.reasoning_tokens = u.completion_tokens_details.and_then(|d| d.reasoning_tokens);
    }
    chunk.error = raw.error.map(|e| match e.get("message").and_then(Value::as_str) {
        Some(m) => m.to_string(),
        None => e.to_string(),
    });
    Ok(chunk)
}

/// A delta's tool calls: each is a generated part (its name and its argument text are tokens);
/// the arguments of call index 0 are kept to check they parse.
fn push_calls(chunk: &mut Chunk, calls: &[Value]) {
    for call in calls {
        chunk.tool_call = true;
        let f = call.get("function");
        let name = f.and_then(|f| f.get("name")).and_then(Value::as_str).unwrap_or("");
        let args = f.and_then(|f| f.get("arguments")).and_then(Value::as_str).unwrap_or("");
        chunk.has_text |= !name.is_empty();
        push_text(chunk, args);
        if call.get("index").and_then(Value::as_u64).unwrap_or(0) == 0 {
            chunk.tool_args.push_str(args);
        }
    }
}

fn push_text(chunk: &mut Chunk, part: &str) {
    if !part.is_empty() {
        chunk.has_text = true;
        chunk.text.push_str(part);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn role_chunk_is_not_a_token() {
        let c = parse_chunk(br#"{"id":"x","choices":[{"index":0,"delta":{"role":"assistant","content":""}}],"usage":{"prompt_tokens":12,"completion_tokens":0}}"#).unwrap();
        assert!(!c.has_text);
        assert_eq!(c.completion_tokens, Some(0));
        assert_eq!(c.prompt_tokens, Some(12));
        assert_eq!(c.id.as_deref(), Some("x"));
    }

    #[test]
    fn the_servers_count_of_thinking_tokens_is_read() {
        let c = parse_chunk(
            br#"{"choices":[],"usage":{"completion_tokens":9,"completion_tokens_details":{"reasoning_tokens":7}}}"#,
        )
        .unwrap();
        assert_eq!((c.completion_tokens, c.reasoning_tokens), (Some(9), Some(7)));
        let c = parse_chunk(br#"{"choices":[],"usage":{"completion_tokens_details":null}}"#).unwrap();
        assert_eq!(c.reasoning_tokens, None);
    }

    #[test]
    fn reasoning_counts_as_content() {
        let c = parse_chunk(br#"{"choices":[{"delta":{"reasoning_content":"hm"}}]}"#).unwrap();
        assert!(c.has_text);
        let c = parse_chunk(br#"{"choices":[{"delta":{"reasoning":"hm","content":null}}]}"#).unwrap();
        assert!(c.has_text);
        assert_eq!(c.content, "", "reasoning is not the answer's content");
        let c = parse_chunk(br#"{"choices":[{"delta":{"reasoning":"hm","content":" yes"}}]}"#).unwrap();
        assert_eq!((c.text.as_str(), c.content.as_str()), ("hm yes", " yes"));
    }

    #[test]
    fn tool_call_deltas_are_generated_output() {
        // vLLM's (and OpenAI's) first delta of a call: its name, empty arguments
        let head = br#"{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":"get_weather","arguments":""}}]},"finish_reason":null}]}"#;
        let c = parse_chunk(head).unwrap();
        assert!(c.tool_call && c.has_text, "the name is a generated token");
        assert_eq!((c.text.as_str(), c.content.as_str(), c.tool_args.as_str()), ("", "", ""));
        let frag = br#"{"choices":[{"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{\"city\": "}}]}}]}"#;
        let c = parse_chunk(frag).unwrap();
        assert!(c.tool_call && c.has_text);
        assert_eq!((c.tool_args.as_str(), c.text.as_str(), c.content.as_str()), (r#"{"city": "#, r#"{"city": "#, ""));
        // a second call's arguments are output, but not call 0's
        let two = br#"{"choices":[{"delta":{"tool_calls":[{"index":1,"function":{"arguments":"{}"}}]}}]}"#;
        let c = parse_chunk(two).unwrap();
        assert!(c.has_text && c.tool_args.is_empty());
        // an empty or null list, or a call with nothing in it, is no token; odd shapes are no error
        for data in [
            &br#"{"choices":[{"delta":{"content":null,"tool_calls":[]}}]}"#[..],
            br#"{"choices":[{"delta":{"tool_calls":null}}]}"#,
            br#"{"choices":[{"delta":{"tool_calls":[{"index":0,"function":{"arguments":""}}]}}]}"#,
            br#"{"choices":[{"delta":{"tool_calls":[{"index":"0","function":{"arguments":7}}]}}]}"#,
        ] {
            let c = parse_chunk(data).unwrap();
            assert!(!c.has_text, "{}", String::from_utf8_lossy(data));
        }
    }

    #[test]
    fn completions_text_finish_and_usage() {
        let c = parse_chunk(br#"{"choices":[{"text":" a","finish_reason":"length"}],"usage":{"prompt_tokens":5,"completion_tokens":3,"prompt_tokens_details":{"cached_tokens":4}}}"#).unwrap();
        assert_eq!(c.text, " a");
        assert_eq!(c.content, " a");
        assert_eq!(c.finish_reason.as_deref(), Some("length"));
        assert_eq!((c.completion_tokens, c.cached_tokens), (Some(3), Some(4)));
    }

    #[test]
    fn usage_only_final_chunk_and_errors() {
        let c = parse_chunk(br#"{"choices":[],"usage":{"completion_tokens":9}}"#).unwrap();
        assert!(!c.has_text && c.completion_tokens == Some(9));
        let e = parse_chunk(br#"{"error":{"message":"boom","code":500}}"#).unwrap();
        assert_eq!(e.error.as_deref(), Some("boom"));
        assert!(parse_chunk(b"{\"choices\": [").is_err());
    }

    #[test]
    fn request_bodies() {
        let spec = RequestSpec {
            api: Api::Chat,
            model: "m".into(),
            max_tokens: 7,
            stream: true,
            ignore_eos: true,
            continuous_usage: true,
            temperature: None,
            reasoning: Reasoning::default(),
            tools: Some(std::sync::Arc::new(json!([{"type": "function", "function": {"name": "f"}}]))),
        };
        let prompt = Prompt { messages: vec![("user".into(), "hi".into())] };
        let b = spec.body(&prompt);
        assert_eq!(b["messages"][0]["content"], "hi");
        assert_eq!(b["tools"][0]["function"]["name"], "f");
        assert!(b.get("tool_choice").is_none(), "the server's default");
        assert_eq!(b["stream_options"]["continuous_usage_stats"], true);
        assert_eq!(b["ignore_eos"], true);
        assert!(b.get("chat_template_kwargs").is_none() && b.get("reasoning_effort").is_none(), "nothing asked");
        for (thinking, enable) in [(ThinkingMode::On, true), (ThinkingMode::Off, false)] {
            let reasoning = Reasoning { thinking: Some(thinking), effort: Some(ReasoningEffort::High) };
            let b = RequestSpec { reasoning, ..spec.clone() }.body(&prompt);
            assert_eq!(
                (&b["chat_template_kwargs"]["enable_thinking"], &b["reasoning_effort"]),
                (&json!(enable), &json!("high"))
            );
            // a completion has no chat template to pass it to
            let b = RequestSpec { reasoning, api: Api::Completions, ..spec.clone() }.body(&prompt);
            assert!(b.get("chat_template_kwargs").is_none());
        }
        let c = RequestSpec { api: Api::Completions, stream: false, ..spec };
        let b = c.body(&prompt);
        assert_eq!(b["prompt"], "hi");
        assert!(b.get("tools").is_none());
        assert!(b.get("stream_options").is_none());
        assert_eq!(c.path(), "/v1/completions");
    }
}
