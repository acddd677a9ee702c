//! Discovery and utility endpoints: the ones each real engine exposes, so engine adapters can be tested.

use std::sync::Arc;

use axum::Json;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

use super::AppState;
use super::error::ApiError;
use super::request;
use crate::engine::{Command, FinishReason};
use crate::flavor::Flavor;
use crate::tokenizer;

const SGLANG_VERSION: &str = "0.5.0-sim";

pub(crate) async fn models(State(st): State<Arc<AppState>>) -> Json<Value> {
    let created = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs());
    let mut m = json!({
        "id": st.model,
        "object": "model",
        "created": created,
        "owned_by": "vllm",
        "root": st.model,
        "parent": null,
        "max_model_len": st.profile.max_model_len,
    });
    match st.flavor {
        Flavor::Llamacpp => {
            m["owned_by"] = "llamacpp".into();
            m["meta"] = json!({"n_ctx_train": st.profile.max_model_len});
        }
        Flavor::Sglang => m["owned_by"] = "sglang".into(),
        Flavor::Tgi => m["owned_by"] = "tgi".into(),
        Flavor::Generic => m["owned_by"] = "organization-owner".into(),
        Flavor::Vllm => {}
    }
    Json(json!({"object": "list", "data": [m]}))
}

pub(crate) async fn version() -> Json<Value> {
    Json(json!({"version": concat!(env!("CARGO_PKG_VERSION"), "+sim")}))
}

pub(crate) async fn tokenize(State(st): State<Arc<AppState>>, body: Bytes) -> Response {
    let result = (|| -> Result<Value, ApiError> {
        let body = request::parse_json(&body)?;
        if st.flavor == Flavor::Llamacpp {
            let content = body
                .get("content")
                .and_then(Value::as_str)
                .ok_or_else(|| ApiError::bad_request("`content` must be a string"))?;
            return Ok(json!({"tokens": tokenizer::encode(content)}));
        }
        request::check_model(&st, &body)?;
        let tokens = if body.get("messages").is_some() {
            request::chat_ids(&request::messages(&body)?)
        } else {
            request::prompt_ids(body.get("prompt"))?
        };
        Ok(json!({
            "count": tokens.len(),
            "max_model_len": st.profile.max_model_len,
            "tokens": tokens,
        }))
    })();
    match result {
        Ok(v) => Json(v).into_response(),
        Err(e) => e.into_response(),
    }
}

pub(crate) async fn detokenize(State(st): State<Arc<AppState>>, body: Bytes) -> Response {
    let result = (|| -> Result<Value, ApiError> {
        let body = request::parse_json(&body)?;
        let ids: Option<Vec<u32>> = body
            .get("tokens")
            .and_then(Value::as_array)
            .and_then(|a| a.iter().map(|v| v.as_u64().and_then(|x| u32::try_from(x).ok())).collect());
        let ids = ids.ok_or_else(|| ApiError::bad_request("`tokens` must be an array of token ids"))?;
        let text = tokenizer::decode(&ids);
        Ok(if st.flavor == Flavor::Llamacpp { json!({"content": text}) } else { json!({"prompt": text}) })
    })();
    match result {
        Ok(v) => Json(v).into_response(),
        Err(e) => e.into_response(),
    }
}

pub(crate) async fn sglang_server_info(State(st): State<Arc<AppState>>) -> Json<Value> {
    let p = &st.profile;
    Json(json!({
        "version": SGLANG_VERSION,
        "model_path": st.model,
        "served_model_name": st.model,
        "max_total_num_tokens": p.kv_cache_tokens,
        "max_running_requests": p.max_num_seqs,
        "context_length": p.max_model_len,
        "page_size": p.block_size,
        "chunked_prefill_size": p.max_num_batched_tokens,
    }))
}

/// Aborts a request whose stream is still open; like SGLang, an unknown or closed rid is ignored.
pub(crate) async fn sglang_abort(State(st): State<Arc<AppState>>, body: Bytes) -> Response {
    let body = match request::parse_json(&body) {
        Ok(b) => b,
        Err(e) => return e.into_response(),
    };
    let Some(rid) = body.get("rid").and_then(Value::as_str) else {
        return ApiError::bad_request("`rid` must be a string").into_response();
    };
    let id = st.sglang_open.lock().ok().and_then(|m| m.get(rid).copied());
    if let Some(id) = id {
        let _ = st.engine_tx.send(Command::Abort { id, reason: FinishReason::Abort });
    }
    StatusCode::OK.into_response()
}

fn slot_ctx(st: &AppState) -> u64 {
    st.profile.kv_cache_tokens / st.profile.max_num_seqs
}

pub(crate) async fn llamacpp_props(State(st): State<Arc<AppState>>) -> Json<Value> {
    Json(json!({
        "default_generation_settings": {"n_ctx": slot_ctx(&st), "params": {"n_predict": -1}},
        "total_slots": st.profile.max_num_seqs,
        "model_path": format!("/models/{}.gguf", st.model),
        "build_info": "b0000-sim",
        "chat_template": "",
    }))
}

pub(crate) async fn llamacpp_slots(State(st): State<Arc<AppState>>) -> Json<Value> {
    let busy = st.stats().running;
    let n_ctx = slot_ctx(&st);
    let slots: Vec<Value> =
        (0..st.profile.max_num_seqs).map(|i| json!({"id": i, "n_ctx": n_ctx, "is_processing": i < busy})).collect();
    Json(Value::Array(slots))
}

pub(crate) async fn tgi_info(State(st): State<Arc<AppState>>) -> Json<Value> {
    let p = &st.profile;
    Json(json!({
        "model_id": st.model,
        "version": "3.0.0-sim",
        "max_input_tokens": p.max_model_len - 1,
        "max_total_tokens": p.max_model_len,
        "max_concurrent_requests": p.max_num_seqs,
        "max_batch_total_tokens": p.kv_cache_tokens,
        "max_batch_prefill_tokens": p.max_num_batched_tokens,
        "router": "text-generation-router",
    }))
}
