//! JSON of response chunks and bodies, shaped like vLLM's OpenAI server. Written with `format!` rather
//! than `serde_json::Value` because thousands of streams each get a chunk per decode step.

use std::fmt::Write;

use super::request::Kind;

pub(crate) struct Usage {
    pub prompt: u32,
    pub completion: u32,
    /// Only the final usage carries `prompt_tokens_details`.
    pub cached: Option<u32>,
    /// `completion_tokens_details.reasoning_tokens`, in every usage, only with a `[reasoning]` profile.
    pub reasoning: Option<u32>,
}

impl Usage {
    pub(crate) fn write(&self, out: &mut String) {
        let _ = write!(
            out,
            r#"{{"prompt_tokens":{},"total_tokens":{},"completion_tokens":{}"#,
            self.prompt,
            self.prompt + self.completion,
            self.completion
        );
        if let Some(c) = self.cached {
            let _ = write!(out, r#","prompt_tokens_details":{{"cached_tokens":{c}}}"#);
        }
        if let Some(r) = self.reasoning {
            let _ = write!(out, r#","completion_tokens_details":{{"reasoning_tokens":{r}}}"#);
        }
        out.push('}');
    }

    pub(crate) fn json(&self) -> serde_json::Value {
        let mut s = String::new();
        self.write(&mut s);
        serde_json::from_str(&s).expect("usage JSON is well formed")
    }
}

pub(crate) struct ChunkWriter {
    pub kind: Kind,
    /// `{"id":…,"object":…,"created":…,"model":…,` shared by every chunk of the stream.
    head: String,
}

impl ChunkWriter {
    pub(crate) fn new(kind: Kind, id: &str, created: u64, model: &str) -> Self {
        let object = match kind {
            Kind::Chat => "chat.completion.chunk",
            Kind::Completion => "text_completion",
        };
        let head =
            format!(r#"{{"id":{},"object":"{object}","created":{created},"model":{},"#, json_str(id), json_str(model));
        Self { kind, head }
    }

    /// The shared head, for building a non-streaming body.
    pub(crate) fn head_json(&self) -> String {
        self.head.clone()
    }

    /// An SSE event carrying one choice. `role` adds the assistant role (the first chat chunk).
    pub(crate) fn choice(&self, text: &str, role: bool, finish: Option<&str>, usage: Option<&Usage>) -> String {
        let mut s = self.open(text.len());
        match self.kind {
            Kind::Chat => {
                s.push_str(r#""delta":{"#);
                if role {
                    s.push_str(r#""role":"assistant","#);
                }
                let _ = write!(s, r#""content":{}}},"logprobs":null,"finish_reason":"#, json_str(text));
                push_opt(&mut s, finish);
            }
            Kind::Completion => {
                let _ = write!(s, r#""text":{},"logprobs":null,"finish_reason":"#, json_str(text));
                push_opt(&mut s, finish);
                s.push_str(r#","stop_reason":null"#);
            }
        }
        Self::close(s, usage)
    }

    /// A chat event carrying thinking text in `field` and no `content` key, as vLLM's reasoning
    /// parsers stream it (its deltas leave unset fields out).
    pub(crate) fn reasoning(&self, field: &str, text: &str, finish: Option<&str>, usage: Option<&Usage>) -> String {
        let mut s = self.open(text.len());
        let _ = write!(s, r#""delta":{{"{field}":{}}},"logprobs":null,"finish_reason":"#, json_str(text));
        push_opt(&mut s, finish);
        Self::close(s, usage)
    }

    /// The first delta of a tool call, as OpenAI streams it: the call's id, type and function name
    /// with empty arguments (the name is one generated token).
    pub(crate) fn tool_call_head(
        &self,
        call_id: &str,
        name: &str,
        finish: Option<&str>,
        usage: Option<&Usage>,
    ) -> String {
        let mut s = self.open(name.len() + 80);
        let _ = write!(
            s,
            r#""delta":{{"tool_calls":[{{"index":0,"id":{},"type":"function","function":{{"name":{},"arguments":""}}}}]}},"logprobs":null,"finish_reason":"#,
            json_str(call_id),
            json_str(name)
        );
        push_opt(&mut s, finish);
        Self::close(s, usage)
    }

    /// A later delta of a tool call: a fragment of its arguments, and nothing else.
    pub(crate) fn tool_args(&self, fragment: &str, finish: Option<&str>, usage: Option<&Usage>) -> String {
        let mut s = self.open(fragment.len() + 60);
        let _ = write!(
            s,
            r#""delta":{{"tool_calls":[{{"index":0,"function":{{"arguments":{}}}}}]}},"logprobs":null,"finish_reason":"#,
            json_str(fragment)
        );
        push_opt(&mut s, finish);
        Self::close(s, usage)
    }

    /// `data: {head"choices":[{"index":0,` with room for the rest.
    fn open(&self, text_len: usize) -> String {
        let mut s = String::with_capacity(self.head.len() + text_len + 160);
        s.push_str("data: ");
        s.push_str(&self.head);
        s.push_str(r#""choices":[{"index":0,"#);
        s
    }

    fn close(mut s: String, usage: Option<&Usage>) -> String {
        s.push_str("}]");
        if let Some(u) = usage {
            s.push_str(r#","usage":"#);
            u.write(&mut s);
        }
        s.push_str("}\n\n");
        s
    }

    /// The final `"choices":[]` event with the request's usage.
    pub(crate) fn usage(&self, usage: &Usage) -> String {
        let mut s = String::from("data: ");
        s.push_str(&self.head);
        s.push_str(r#""choices":[],"usage":"#);
        usage.write(&mut s);
        s.push_str("}\n\n");
        s
    }

    /// A broken event: the JSON stops in the middle of a string.
    pub(crate) fn malformed(&self) -> String {
        format!("data: {}\"choices\":[{{\"index\":0,\"delta\":{{\"content\":\"trunc\n\n", self.head)
    }
}

fn push_opt(s: &mut String, v: Option<&str>) {
    match v {
        Some(v) => {
            s.push('"');
            s.push_str(v);
            s.push('"');
        }
        None => s.push_str("null"),
    }
}

pub(crate) fn json_str(s: &str) -> String {
    serde_json::to_string(s).expect("strings serialize")
}

pub(crate) const DONE: &str = "data: [DONE]\n\n";

#[cfg(test)]
mod tests {
    use super::*;

    fn writer() -> ChunkWriter {
        ChunkWriter::new(Kind::Chat, "chatcmpl-7", 1_700_000_000, "m")
    }

    #[test]
    fn chunks_without_reasoning_keep_their_bytes() {
        let head = r#"data: {"id":"chatcmpl-7","object":"chat.completion.chunk","created":1700000000,"model":"m","#;
        let u = Usage { prompt: 3, completion: 1, cached: None, reasoning: None };
        assert_eq!(
            writer().choice(" a", false, None, Some(&u)),
            format!(
                "{head}{}",
                r#""choices":[{"index":0,"delta":{"content":" a"},"logprobs":null,"finish_reason":null}],"usage":{"prompt_tokens":3,"total_tokens":4,"completion_tokens":1}}"#
            ) + "\n\n"
        );
        let u = Usage { prompt: 3, completion: 1, cached: Some(0), reasoning: None };
        assert_eq!(
            writer().usage(&u),
            format!(
                "{head}{}",
                r#""choices":[],"usage":{"prompt_tokens":3,"total_tokens":4,"completion_tokens":1,"prompt_tokens_details":{"cached_tokens":0}}}"#
            ) + "\n\n"
        );
    }

    #[test]
    fn tool_call_deltas_have_openais_shape() {
        let head = writer().tool_call_head("call_7", "get_weather", None, None);
        let v: serde_json::Value = serde_json::from_str(head.strip_prefix("data: ").unwrap().trim()).unwrap();
        assert_eq!(
            v["choices"][0]["delta"],
            serde_json::json!({"tool_calls": [{"index": 0, "id": "call_7", "type": "function",
                "function": {"name": "get_weather", "arguments": ""}}]})
        );
        let args = writer().tool_args(r#"{"q":""#, Some("tool_calls"), None);
        let v: serde_json::Value = serde_json::from_str(args.strip_prefix("data: ").unwrap().trim()).unwrap();
        assert_eq!(v["choices"][0]["delta"]["tool_calls"][0]["function"]["arguments"], r#"{"q":""#);
        assert_eq!(v["choices"][0]["finish_reason"], "tool_calls");
    }

    #[test]
    fn reasoning_deltas_have_the_field_and_no_content() {
        let u = Usage { prompt: 3, completion: 2, cached: Some(0), reasoning: Some(2) };
        let c = writer().reasoning("reasoning", "hm", Some("length"), Some(&u));
        let want = concat!(
            r#""choices":[{"index":0,"delta":{"reasoning":"hm"},"logprobs":null,"finish_reason":"length"}],"#,
            r#""usage":{"prompt_tokens":3,"total_tokens":5,"completion_tokens":2,"#,
            r#""prompt_tokens_details":{"cached_tokens":0},"completion_tokens_details":{"reasoning_tokens":2}}}"#,
            "\n\n"
        );
        assert!(c.ends_with(want), "{c}");
        let v: serde_json::Value = serde_json::from_str(c.trim_start_matches("data: ").trim_end()).unwrap();
        assert!(v["choices"][0]["delta"].get("content").is_none());
    }
}
