//! Prompt token counts from the server itself, so contexts are exact (methodology §3).

use std::time::Duration;

use serde_json::{Value, json};
use sm_core::record::Api;

use super::{Engine, ServerFacts, TokenizeApi};
use crate::http::{Client, ClientError};
use crate::openai::{Prompt, Reasoning};

const PROBE_TIMEOUT: Duration = Duration::from_secs(10);
/// Tokenizing a 256K-token prompt on a busy CPU can take seconds.
const COUNT_TIMEOUT: Duration = Duration::from_secs(120);

/// Which tokenize form the server answers, found by asking it once.
pub(super) async fn probe(client: &Client, facts: &ServerFacts) -> TokenizeApi {
    let (api, body) = match facts.engine {
        Engine::Llamacpp => (TokenizeApi::Llamacpp, json!({"content": "hello world"})),
        // TGI's /tokenize takes another shape and answers token objects; not used.
        Engine::Tgi => return TokenizeApi::None,
        _ => (TokenizeApi::Vllm, json!({"model": facts.model, "prompt": "hello world"})),
    };
    match client.post_json("/tokenize", &body, PROBE_TIMEOUT).await {
        Ok(v) if count_of(api, &v).is_some_and(|n| n > 0) => api,
        _ => TokenizeApi::None,
    }
}

fn count_of(api: TokenizeApi, v: &Value) -> Option<u64> {
    let tokens = || v.get("tokens").and_then(Value::as_array).map(|t| t.len() as u64);
    match api {
        TokenizeApi::Vllm => v.get("count").and_then(Value::as_u64).or_else(tokens),
        TokenizeApi::Llamacpp => tokens(),
        TokenizeApi::None => None,
    }
}

/// The request body that counts `prompt` as `api` sends it; `None` when this
/// server cannot count that form (llama.cpp does not apply chat templates in /tokenize).
fn tokenize_body(
    tokenize: TokenizeApi,
    model: &str,
    api: Api,
    prompt: &Prompt,
    reasoning: &Reasoning,
) -> Option<Value> {
    match (tokenize, api) {
        (TokenizeApi::Vllm, Api::Chat) => {
            let mut body = json!({"model": model, "messages": prompt.messages_json()});
            if let Some(kwargs) = reasoning.template_kwargs() {
                body["chat_template_kwargs"] = kwargs;
            }
            Some(body)
        }
        (TokenizeApi::Vllm, Api::Completions) => Some(json!({"model": model, "prompt": prompt.as_text()})),
        // llama.cpp's completions add BOS; its /tokenize does not unless asked.
        (TokenizeApi::Llamacpp, Api::Completions) => Some(json!({"content": prompt.as_text(), "add_special": true})),
        (TokenizeApi::Llamacpp, Api::Chat) | (TokenizeApi::None, _) => None,
    }
}

/// llama.cpp's /tokenize does not apply the chat template, but its
/// `/apply-template` renders the exact text a chat request is tokenized from;
/// that text with BOS (`add_special`) and special tokens parsed is the count.
async fn count_llamacpp_chat(
    client: &Client,
    prompt: &Prompt,
    reasoning: &Reasoning,
) -> Result<Option<u64>, ClientError> {
    let mut body = json!({"messages": prompt.messages_json()});
    if let Some(kwargs) = reasoning.template_kwargs() {
        body["chat_template_kwargs"] = kwargs;
    }
    let rendered = match client.post_json("/apply-template", &body, COUNT_TIMEOUT).await {
        Ok(v) => v,
        // an older server without the endpoint: the caller calibrates instead
        Err(ClientError::Status { status: 404 | 405 | 501, .. }) => return Ok(None),
        Err(e) => return Err(e),
    };
    let Some(text) = rendered.get("prompt").and_then(Value::as_str) else {
        return Ok(None);
    };
    let body = json!({"content": text, "add_special": true, "parse_special": true});
    let v = client.post_json("/tokenize", &body, COUNT_TIMEOUT).await?;
    Ok(count_of(TokenizeApi::Llamacpp, &v))
}

/// Prompt token count by the server, for the given API form, rendered as `reasoning` asks (the
/// chat template's `enable_thinking` changes the prompt).
pub async fn count_tokens(
    client: &Client,
    facts: &ServerFacts,
    (api, reasoning): (Api, &Reasoning),
    prompt: &Prompt,
) -> Result<Option<u64>, ClientError> {
    if (facts.tokenize, api) == (TokenizeApi::Llamacpp, Api::Chat) {
        return count_llamacpp_chat(client, prompt, reasoning).await;
    }
    let Some(body) = tokenize_body(facts.tokenize, &facts.model, api, prompt, reasoning) else {
        return Ok(None);
    };
    let v = client.post_json("/tokenize", &body, COUNT_TIMEOUT).await?;
    count_of(facts.tokenize, &v).map(Some).ok_or_else(|| ClientError::NotJson {
        path: "/tokenize".into(),
        reason: "the answer has no \"count\" or \"tokens\"".into(),
    })
}

/// The server's token ids of `prompt` (vLLM's and SGLang's `/tokenize` list them); `None` where
/// this server does not count this form or its answer has no ids.
pub async fn token_ids(
    client: &Client,
    facts: &ServerFacts,
    (api, reasoning): (Api, &Reasoning),
    prompt: &Prompt,
) -> Result<Option<Vec<u64>>, ClientError> {
    let Some(body) = tokenize_body(facts.tokenize, &facts.model, api, prompt, reasoning)
        .filter(|_| facts.tokenize == TokenizeApi::Vllm)
    else {
        return Ok(None);
    };
    let v = client.post_json("/tokenize", &body, COUNT_TIMEOUT).await?;
    Ok(v.get("tokens").and_then(Value::as_array).and_then(|t| t.iter().map(Value::as_u64).collect()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_from_each_form() {
        let vllm = json!({"count":5,"max_model_len":4096,"tokens":[1,2,3,4,5]});
        assert_eq!(count_of(TokenizeApi::Vllm, &vllm), Some(5));
        assert_eq!(count_of(TokenizeApi::Vllm, &json!({"tokens":[1,2]})), Some(2));
        assert_eq!(count_of(TokenizeApi::Llamacpp, &json!({"tokens":[1,2,3]})), Some(3));
        assert_eq!(count_of(TokenizeApi::Llamacpp, &json!({"count":3})), None);
        assert_eq!(count_of(TokenizeApi::None, &vllm), None);
    }

    #[test]
    fn bodies_per_form() {
        let p = Prompt { messages: vec![("system".into(), "be brief".into()), ("user".into(), "hi".into())] };
        let none = Reasoning::default();
        let off = Reasoning { thinking: Some(sm_core::record::ThinkingMode::Off), effort: None };
        let chat = tokenize_body(TokenizeApi::Vllm, "m", Api::Chat, &p, &off).unwrap();
        assert_eq!(chat["chat_template_kwargs"]["enable_thinking"], false, "the template renders as the request will");
        assert!(
            tokenize_body(TokenizeApi::Vllm, "m", Api::Completions, &p, &off)
                .unwrap()
                .get("chat_template_kwargs")
                .is_none()
        );
        let chat = tokenize_body(TokenizeApi::Vllm, "m", Api::Chat, &p, &none).unwrap();
        assert_eq!(chat["messages"][1]["content"], "hi");
        assert_eq!(chat["model"], "m");
        let text = tokenize_body(TokenizeApi::Vllm, "m", Api::Completions, &p, &none).unwrap();
        assert_eq!(text["prompt"], "be brief\n\nhi");
        let ll = tokenize_body(TokenizeApi::Llamacpp, "m", Api::Completions, &p, &none).unwrap();
        assert_eq!(ll["content"], "be brief\n\nhi");
        assert!(tokenize_body(TokenizeApi::Llamacpp, "m", Api::Chat, &p, &none).is_none());
        assert!(tokenize_body(TokenizeApi::None, "m", Api::Completions, &p, &none).is_none());
    }
}
