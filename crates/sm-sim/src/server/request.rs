//! Parsing and validation of chat and completion request bodies.

use axum::http::StatusCode;
use serde_json::Value;

use super::AppState;
use super::error::ApiError;
use crate::flavor::Flavor;
use crate::tokenizer;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    Chat,
    Completion,
}

pub(crate) struct Parsed {
    pub prompt_ids: Vec<u32>,
    pub max_tokens: u32,
    pub ignore_eos: bool,
    pub stream: bool,
    pub include_usage: bool,
    pub continuous_usage: bool,
    /// False when `chat_template_kwargs.enable_thinking` is `false`: a reasoning model then answers
    /// without thinking, as Qwen3's and Ling's templates do.
    pub thinking: bool,
    /// A chat request with `tools` (and `tool_choice` not `"none"`): the function its answer calls.
    pub tool: Option<String>,
}

pub(crate) fn parse_json(body: &[u8]) -> Result<Value, ApiError> {
    let v: Value =
        serde_json::from_slice(body).map_err(|e| ApiError::bad_request(format!("Invalid JSON body: {e}")))?;
    if !v.is_object() {
        return Err(ApiError::bad_request("The request body must be a JSON object"));
    }
    Ok(v)
}

/// A 404 unless `model` is absent or names the served model.
pub(crate) fn check_model(state: &AppState, body: &Value) -> Result<(), ApiError> {
    match body.get("model") {
        None | Some(Value::Null) => Ok(()),
        Some(Value::String(m)) if *m == state.model => Ok(()),
        Some(Value::String(m)) => Err(ApiError::new(StatusCode::NOT_FOUND, format!("The model `{m}` does not exist."))),
        Some(_) => Err(ApiError::bad_request("`model` must be a string")),
    }
}

fn message_text(i: usize, content: Option<&Value>) -> Result<String, ApiError> {
    match content {
        None | Some(Value::Null) => Ok(String::new()),
        Some(Value::String(s)) => Ok(s.clone()),
        Some(Value::Array(parts)) => {
            let mut out = String::new();
            for p in parts {
                match p.get("text").and_then(Value::as_str) {
                    Some(t) => out.push_str(t),
                    None => {
                        return Err(ApiError::bad_request(format!(
                            "messages[{i}].content: only text parts are supported"
                        )));
                    }
                }
            }
            Ok(out)
        }
        Some(_) => {
            Err(ApiError::bad_request(format!("messages[{i}].content must be a string or an array of text parts")))
        }
    }
}

/// `(role, content)` pairs of a `messages` array.
pub(crate) fn messages(body: &Value) -> Result<Vec<(String, String)>, ApiError> {
    let msgs = match body.get("messages") {
        Some(Value::Array(a)) if !a.is_empty() => a,
        Some(Value::Array(_)) => return Err(ApiError::bad_request("`messages` must not be empty")),
        Some(_) => return Err(ApiError::bad_request("`messages` must be an array")),
        None => return Err(ApiError::bad_request("`messages` is required")),
    };
    msgs.iter()
        .enumerate()
        .map(|(i, m)| {
            let role = m
                .get("role")
                .and_then(Value::as_str)
                .ok_or_else(|| ApiError::bad_request(format!("messages[{i}].role must be a string")))?;
            Ok((role.to_string(), message_text(i, m.get("content"))?))
        })
        .collect()
}

pub(crate) fn chat_ids(msgs: &[(String, String)]) -> Vec<u32> {
    let pairs: Vec<(&str, &str)> = msgs.iter().map(|(r, c)| (r.as_str(), c.as_str())).collect();
    tokenizer::chat_encode(&pairs)
}

fn token_array(a: &[Value]) -> Option<Vec<u32>> {
    a.iter().map(|v| v.as_u64().and_then(|x| u32::try_from(x).ok())).collect()
}

/// Token ids of a completion `prompt`: a string, an array of token ids, or a one-element array of either.
pub(crate) fn prompt_ids(prompt: Option<&Value>) -> Result<Vec<u32>, ApiError> {
    let bad =
        || ApiError::bad_request("`prompt` must be a string, an array of token ids, or a one-element array of those");
    match prompt {
        None => Err(ApiError::bad_request("`prompt` is required")),
        Some(Value::String(s)) => Ok(tokenizer::encode(s)),
        Some(Value::Array(a)) if a.len() == 1 && !a[0].is_number() => prompt_ids(Some(&a[0])),
        Some(Value::Array(a)) => token_array(a).ok_or_else(bad),
        Some(_) => Err(bad()),
    }
}

fn opt_bool(body: &Value, key: &str) -> Result<bool, ApiError> {
    match body.get(key) {
        None | Some(Value::Null) => Ok(false),
        Some(Value::Bool(b)) => Ok(*b),
        Some(_) => Err(ApiError::bad_request(format!("`{key}` must be a boolean"))),
    }
}

fn opt_max_tokens(body: &Value) -> Result<Option<u64>, ApiError> {
    for key in ["max_completion_tokens", "max_tokens"] {
        match body.get(key) {
            None | Some(Value::Null) => continue,
            Some(v) => {
                return match v.as_u64() {
                    Some(n) if n >= 1 => Ok(Some(n)),
                    _ => Err(ApiError::bad_request(format!("`{key}` must be an integer ≥ 1, got {v}"))),
                };
            }
        }
    }
    Ok(None)
}

/// The text a fault scope's `prompt=` looks in: every message's content, or the prompt (token ids
/// decoded). Shape errors are left to [`parse`]: a request it refuses matches no text.
pub(crate) fn fault_text(kind: Kind, body: &Value) -> String {
    match kind {
        Kind::Chat => messages(body).map(|m| m.into_iter().map(|(_, c)| c).collect::<Vec<_>>().join("\n")),
        Kind::Completion => match body.get("prompt") {
            Some(Value::String(s)) => Ok(s.clone()),
            p => prompt_ids(p).map(|ids| tokenizer::decode(&ids)),
        },
    }
    .unwrap_or_default()
}

/// The output cap the request asks for, if it names one.
pub(crate) fn asked_max_tokens(body: &Value) -> Option<u64> {
    opt_max_tokens(body).ok().flatten()
}

/// Context available to one request: the model length, or a llama.cpp slot's share of the KV cache.
pub(crate) fn context_limit(state: &AppState) -> u64 {
    let p = &state.profile;
    match state.flavor {
        Flavor::Llamacpp => p.max_model_len.min(p.kv_cache_tokens / p.max_num_seqs),
        _ => p.max_model_len,
    }
}

pub(crate) fn parse(state: &AppState, kind: Kind, body: &Value) -> Result<Parsed, ApiError> {
    check_model(state, body)?;
    let prompt_ids = match kind {
        Kind::Chat => chat_ids(&messages(body)?),
        Kind::Completion => prompt_ids(body.get("prompt"))?,
    };
    let limit = context_limit(state);
    let prompt = prompt_ids.len() as u64;
    let what = if kind == Kind::Chat { "messages" } else { "prompt" };
    if prompt == 0 {
        return Err(ApiError::bad_request("The prompt is empty"));
    }
    if prompt >= limit {
        return Err(ApiError::bad_request(format!(
            "This model's maximum context length is {limit} tokens. However, your request has {prompt} input tokens. Please reduce the length of the input {what}."
        )));
    }
    let max_tokens = match opt_max_tokens(body)? {
        Some(m) if prompt + m > limit => {
            return Err(ApiError::bad_request(format!(
                "This model's maximum context length is {limit} tokens. However, you requested {} tokens ({prompt} in the {what}, {m} in the completion). Please reduce the length of the {what} or completion.",
                prompt + m
            )));
        }
        Some(m) => m,
        None => limit - prompt,
    };
    let stream = opt_bool(body, "stream")?;
    let (mut include_usage, mut continuous_usage) = (false, false);
    match body.get("stream_options") {
        None | Some(Value::Null) => {}
        Some(o @ Value::Object(_)) => {
            include_usage = opt_bool(o, "include_usage")?;
            // vLLM only honours continuous usage together with include_usage
            continuous_usage = include_usage && opt_bool(o, "continuous_usage_stats")?;
        }
        Some(_) => return Err(ApiError::bad_request("`stream_options` must be an object")),
    }
    Ok(Parsed {
        prompt_ids,
        max_tokens: max_tokens.min(u64::from(u32::MAX)) as u32,
        ignore_eos: opt_bool(body, "ignore_eos")?,
        stream,
        include_usage,
        continuous_usage,
        thinking: thinking(body)?,
        tool: if kind == Kind::Chat { crate::tools::called_function(body) } else { None },
    })
}

/// `chat_template_kwargs.enable_thinking`: only an explicit `false` turns thinking off (the
/// templates' default is on); a kwargs that is not an object is refused, as vLLM's schema does.
fn thinking(body: &Value) -> Result<bool, ApiError> {
    match body.get("chat_template_kwargs") {
        None | Some(Value::Null) => Ok(true),
        Some(k @ Value::Object(_)) => Ok(k.get("enable_thinking") != Some(&Value::Bool(false))),
        Some(_) => Err(ApiError::bad_request("`chat_template_kwargs` must be an object")),
    }
}

const FNV_OFFSET: u64 = 0xcbf2_9ce4_8422_2325;
const FNV_PRIME: u64 = 0x0000_0100_0000_01b3;

fn fnv(mut h: u64, ids: &[u32]) -> u64 {
    for id in ids {
        for b in id.to_le_bytes() {
            h ^= u64::from(b);
            h = h.wrapping_mul(FNV_PRIME);
        }
    }
    h
}

/// Chained hashes of the prompt's full blocks: block i's hash covers every token before its end, so
/// equal hashes mean equal prefixes (what a prefix cache keys on).
pub(crate) fn block_hashes(ids: &[u32], block_size: usize) -> Vec<u64> {
    let mut h = FNV_OFFSET;
    ids.chunks_exact(block_size)
        .map(|block| {
            h = fnv(h, block);
            h
        })
        .collect()
}

/// Chained hashes of the blocks a request fills while it decodes, past its prompt's full blocks:
/// the blocks of `prompt ++ between ++ answer`, the prefix a later request that sends the answer
/// back begins with (`between`: what its template writes before the answer's content).
/// `prompt_hashes` are the prompt's own ([`block_hashes`]): the chain goes on from its last.
pub(crate) fn decode_hashes(
    prompt: &[u32],
    prompt_hashes: &[u64],
    between: &[u32],
    answer: &[u32],
    block_size: usize,
) -> Vec<u64> {
    let full = prompt_hashes.len() * block_size;
    let mut h = prompt_hashes.last().copied().unwrap_or(FNV_OFFSET);
    let tail: Vec<u32> = prompt[full..].iter().chain(between).chain(answer).copied().collect();
    tail.chunks_exact(block_size)
        .map(|block| {
            h = fnv(h, block);
            h
        })
        .collect()
}

pub(crate) fn prompt_seed(ids: &[u32]) -> u64 {
    fnv(FNV_OFFSET, ids)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decode_hashes_go_on_with_the_chain_of_prompt_separator_and_answer() {
        let prompt: Vec<u32> = (0..37).collect();
        let (between, answer): (Vec<u32>, Vec<u32>) = (vec![900], (100..140).collect());
        let ext: Vec<u32> = prompt.iter().chain(&between).chain(&answer).copied().collect();
        let own = block_hashes(&prompt, 8);
        let decode = decode_hashes(&prompt, &own, &between, &answer, 8);
        let whole = block_hashes(&ext, 8);
        assert_eq!(own.len(), 4);
        assert_eq!([own.as_slice(), decode.as_slice()].concat(), whole, "the same chain as the whole history's");
        // a later turn whose prompt begins with the history hits these blocks
        let next: Vec<u32> = ext.iter().chain(&[7, 7, 7]).copied().collect();
        assert_eq!(block_hashes(&next, 8)[..whole.len()], whole[..]);
    }
}
