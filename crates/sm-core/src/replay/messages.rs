//! A timestamped-messages line: `{"timestamp": s, "messages": [{"role", "content"}] | "prompt": "…",
//! "max_tokens": n, "session_id": "…"}`. Other keys are ignored, as for `--prompts` files' readers
//! elsewhere: a trace exported from logs carries columns the replay does not send.

use std::time::Duration;

use serde_json::Value;

use super::error::LineError;
use super::fields::{self, Object, Unit};
use super::{Message, MessagesInput, ReplayPrompt};

/// The line's timestamp and input.
pub(super) fn parse(mut object: Object) -> Result<(Duration, MessagesInput), LineError> {
    let at = fields::timestamp(&mut object, Unit::Seconds)?;
    let prompt = prompt(&mut object)?;
    let max_tokens = fields::optional(&mut object, "max_tokens")
        .map(|v| fields::whole(&v, "max_tokens", 1, "a whole number of tokens, 1 or more"))
        .transpose()?;
    let session_id = fields::optional(&mut object, "session_id").map(session_id).transpose()?;
    Ok((at, MessagesInput { prompt, max_tokens, session_id }))
}

/// Exactly one of `messages` and `prompt`, not empty: an empty request says nothing to replay.
fn prompt(object: &mut Object) -> Result<ReplayPrompt, LineError> {
    match (fields::optional(object, "messages"), fields::optional(object, "prompt")) {
        (Some(m), None) => messages(m).map(ReplayPrompt::Messages),
        (None, Some(p)) => match fields::text(p, "prompt")? {
            p if p.is_empty() => Err(LineError::field("prompt", "is empty")),
            p => Ok(ReplayPrompt::Text(p)),
        },
        (Some(_), Some(_)) => Err(LineError::field("messages", "and \"prompt\" are both given: keep one")),
        // shown as `"messages" or "prompt" is missing`
        (None, None) => Err(LineError::Missing("messages\" or \"prompt")),
    }
}

fn messages(value: Value) -> Result<Vec<Message>, LineError> {
    let Value::Array(items) = value else {
        let why = format!("must be a list of {{\"role\", \"content\"}}, not {}", fields::shown(&value));
        return Err(LineError::field("messages", why));
    };
    if items.is_empty() {
        return Err(LineError::field("messages", "is empty"));
    }
    items.into_iter().enumerate().map(|(i, m)| message(i, m)).collect()
}

fn message(i: usize, value: Value) -> Result<Message, LineError> {
    let Value::Object(mut m) = value else {
        let why = format!("must be an object {{\"role\", \"content\"}}, not {}", fields::shown(&value));
        return Err(LineError::field(format!("messages[{i}]"), why));
    };
    let mut part = |key: &str| {
        let field = format!("messages[{i}].{key}");
        match fields::optional(&mut m, key) {
            Some(v) => fields::text(v, &field),
            None => Err(LineError::field(field, "is missing")),
        }
    };
    Ok(Message { role: part("role")?, content: part("content")? })
}

/// A session's id: text, or a whole number kept as its decimal text (logs often number sessions).
fn session_id(value: Value) -> Result<String, LineError> {
    match value {
        Value::String(s) => Ok(s),
        Value::Number(n) if n.is_u64() || n.is_i64() => Ok(n.to_string()),
        other => Err(LineError::field(
            "session_id",
            format!("must be text or a whole number, not {}", fields::shown(&other)),
        )),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn line(v: Value) -> Result<(Duration, MessagesInput), LineError> {
        parse(v.as_object().unwrap().clone())
    }

    fn chat(pairs: &[(&str, &str)]) -> ReplayPrompt {
        let m = pairs.iter().map(|(r, c)| Message { role: r.to_string(), content: c.to_string() });
        ReplayPrompt::Messages(m.collect())
    }

    #[test]
    fn both_prompt_forms_with_their_options() {
        let (at, input) = line(json!({"timestamp": 1.25, "messages": [{"role": "system", "content": "s"},
            {"role": "user", "content": "u"}], "max_tokens": 64, "session_id": "a"}))
        .unwrap();
        assert_eq!(at, Duration::from_millis(1250));
        assert_eq!(input.prompt, chat(&[("system", "s"), ("user", "u")]));
        assert_eq!((input.max_tokens, input.session_id.as_deref()), (Some(64), Some("a")));
        let (at, input) = line(json!({"timestamp": 0, "prompt": "hi", "session_id": 7, "max_tokens": null})).unwrap();
        assert_eq!(at, Duration::ZERO);
        assert_eq!(
            input,
            MessagesInput { prompt: ReplayPrompt::Text("hi".into()), max_tokens: None, session_id: Some("7".into()) }
        );
    }

    #[test]
    fn each_refusal_names_its_field() {
        for (v, says) in [
            (json!({"prompt": "a"}), "\"timestamp\" is missing"),
            (json!({"timestamp": 1}), "\"messages\" or \"prompt\" is missing"),
            (json!({"timestamp": 1, "prompt": "a", "messages": []}), "\"messages\" and \"prompt\" are both given"),
            (json!({"timestamp": 1, "prompt": ""}), "\"prompt\" is empty"),
            (json!({"timestamp": 1, "prompt": 3}), "\"prompt\" must be text, not 3"),
            (json!({"timestamp": 1, "messages": []}), "\"messages\" is empty"),
            (json!({"timestamp": 1, "messages": "hi"}), "\"messages\" must be a list"),
            (json!({"timestamp": 1, "messages": ["hi"]}), "\"messages[0]\" must be an object"),
            (json!({"timestamp": 1, "messages": [{"role": "user"}]}), "\"messages[0].content\" is missing"),
            (
                json!({"timestamp": 1, "messages": [{"role": "user", "content": "a"}, {"content": "b"}]}),
                "\"messages[1].role\" is missing",
            ),
            (
                json!({"timestamp": 1, "messages": [{"role": "user", "content": [1]}]}),
                "\"messages[0].content\" must be text",
            ),
            (
                json!({"timestamp": 1, "prompt": "a", "max_tokens": 0}),
                "\"max_tokens\" must be a whole number of tokens, 1 or more, not 0",
            ),
            (json!({"timestamp": 1, "prompt": "a", "max_tokens": 2.5}), "\"max_tokens\" must be"),
            (
                json!({"timestamp": 1, "prompt": "a", "session_id": 1.5}),
                "\"session_id\" must be text or a whole number",
            ),
            (json!({"timestamp": -2, "prompt": "a"}), "\"timestamp\" must be a number of seconds, 0 or more, not -2"),
        ] {
            let e = line(v.clone()).unwrap_err().to_string();
            assert!(e.starts_with(says), "{v}: {e}");
        }
    }
}
