//! A model's decode shape from its Hugging Face `config.json` (methodology §14.4): the
//! parameters one decode step reads and the KV-cache bytes per token.
//!
//! Counted per layer: attention (q, k, v, o projections) and the gated MLP (gate, up, down:
//! `3 × hidden × intermediate`); for a mixture of experts, `experts_per_tok` routed experts,
//! the shared expert(s) and the router. Plus the output head (`vocab × hidden`), which every step
//! reads whole. The input embedding is not counted: a step reads only the batch's rows of it.
//! Norms and biases are under 0.1 % and left out. Multi-head latent attention (DeepSeek's
//! `kv_lora_rank`) stores a compressed KV cache this formula does not describe, so it is refused.

use serde_json::Value;
use thiserror::Error;

use crate::roofline::ModelShape;

#[derive(Debug, Clone, PartialEq, Error)]
pub enum ConfigError {
    #[error("config.json is not JSON: {0}")]
    Json(String),
    #[error(
        "config.json lacks `{0}`, which the roofline needs; give --active-params, --bytes-per-weight and --kv-bytes-per-token instead"
    )]
    Missing(&'static str),
    #[error(
        "config.json's torch_dtype `{0}` is not one the roofline knows (float32, bfloat16, float16, float8); give --bytes-per-weight"
    )]
    Dtype(String),
    #[error(
        "config.json describes multi-head latent attention (kv_lora_rank), whose KV cache the roofline does not model; give --kv-bytes-per-token"
    )]
    LatentAttention,
}

/// The shape, and the total parameters for the record.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ConfigShape {
    pub shape: ModelShape,
    pub total_params: f64,
}

/// The model's settings, from the top level or, for multimodal configs, `text_config`.
fn text_config(root: &Value) -> &Value {
    match root.get("text_config") {
        Some(t) if t.get("hidden_size").is_some() => t,
        _ => root,
    }
}

fn num(cfg: &Value, key: &'static str) -> Option<f64> {
    cfg.get(key).and_then(Value::as_f64).filter(|v| v.is_finite() && *v >= 0.0)
}

fn need(cfg: &Value, key: &'static str) -> Result<f64, ConfigError> {
    num(cfg, key).ok_or(ConfigError::Missing(key))
}

/// Bytes per weight from `quantization_config.bits` where given, else from `torch_dtype`.
fn bytes_per_weight(root: &Value, cfg: &Value) -> Result<f64, ConfigError> {
    if let Some(q) = root.get("quantization_config") {
        if let Some(bits) = q.get("bits").and_then(Value::as_f64).filter(|b| *b > 0.0) {
            return Ok(bits / 8.0);
        }
        if q.get("quant_method").and_then(Value::as_str) == Some("fp8") {
            return Ok(1.0);
        }
    }
    let dtype = cfg
        .get("torch_dtype")
        .or_else(|| root.get("torch_dtype"))
        .or_else(|| cfg.get("dtype"))
        .and_then(Value::as_str)
        .ok_or(ConfigError::Missing("torch_dtype"))?;
    dtype_bytes(dtype).ok_or_else(|| ConfigError::Dtype(dtype.to_string()))
}

/// Bytes of one value of a dtype name (`bfloat16`, `float16`, `float32`, `float8…`).
pub fn dtype_bytes(dtype: &str) -> Option<f64> {
    match dtype.to_ascii_lowercase().trim_start_matches("torch.") {
        "float32" | "fp32" => Some(4.0),
        "bfloat16" | "float16" | "bf16" | "fp16" | "half" => Some(2.0),
        d if d.starts_with("float8") || d == "fp8" => Some(1.0),
        _ => None,
    }
}

/// Parses `config.json` text into the decode shape. The KV cache is taken to be stored at the
/// model's own activation dtype (`torch_dtype`), as engines do by default.
pub fn shape_from_config(text: &str) -> Result<ConfigShape, ConfigError> {
    let root: Value = serde_json::from_str(text).map_err(|e| ConfigError::Json(e.to_string()))?;
    let cfg = text_config(&root);
    if cfg.get("kv_lora_rank").is_some_and(|v| !v.is_null()) {
        return Err(ConfigError::LatentAttention);
    }
    let hidden = need(cfg, "hidden_size")?;
    let layers = need(cfg, "num_hidden_layers")?;
    let heads = need(cfg, "num_attention_heads")?;
    let kv_heads = num(cfg, "num_key_value_heads").unwrap_or(heads);
    let head_dim = num(cfg, "head_dim").unwrap_or(hidden / heads.max(1.0));
    let vocab = need(cfg, "vocab_size")?;

    let attention = hidden * head_dim * (2.0 * heads + 2.0 * kv_heads);
    let (mlp_total, mlp_active) = mlp_params(cfg, hidden)?;
    let head = vocab * hidden;
    let tied = cfg.get("tie_word_embeddings").and_then(Value::as_bool).unwrap_or(false);
    let embedding = if tied { 0.0 } else { vocab * hidden };

    let active_params = layers * (attention + mlp_active) + head;
    let total_params = layers * (attention + mlp_total) + head + embedding;
    let bpw = bytes_per_weight(&root, cfg)?;
    let kv_dtype = cfg
        .get("torch_dtype")
        .or_else(|| root.get("torch_dtype"))
        .and_then(Value::as_str)
        .and_then(dtype_bytes)
        .unwrap_or(2.0);
    let kv_bytes_per_token = 2.0 * layers * kv_heads * head_dim * kv_dtype;
    Ok(ConfigShape { shape: ModelShape { active_params, bytes_per_weight: bpw, kv_bytes_per_token }, total_params })
}

/// Per-layer MLP parameters `(all, active per token)`: dense, or routed experts + shared + router.
fn mlp_params(cfg: &Value, hidden: f64) -> Result<(f64, f64), ConfigError> {
    let experts = num(cfg, "num_experts").or_else(|| num(cfg, "num_local_experts")).unwrap_or(0.0);
    if experts <= 1.0 {
        let inter = need(cfg, "intermediate_size")?;
        let p = 3.0 * hidden * inter;
        return Ok((p, p));
    }
    let per_tok = need(cfg, "num_experts_per_tok")?;
    let expert_inter = num(cfg, "moe_intermediate_size")
        .or_else(|| num(cfg, "intermediate_size"))
        .ok_or(ConfigError::Missing("moe_intermediate_size"))?;
    let expert = 3.0 * hidden * expert_inter;
    let shared = match num(cfg, "shared_expert_intermediate_size") {
        Some(i) => 3.0 * hidden * i,
        None => num(cfg, "n_shared_experts").unwrap_or(0.0) * expert,
    };
    let router = hidden * experts;
    Ok((experts * expert + shared + router, per_tok * expert + shared + router))
}
