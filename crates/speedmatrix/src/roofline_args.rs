//! The flags that describe the model for the memory-bandwidth roofline (methodology §14.4):
//! a Hugging Face `config.json`, or the three numbers by hand.

use std::path::PathBuf;

use anyhow::{Context, Result};
use sm_core::model_config::shape_from_config;
use sm_core::roofline::{ModelShape, parse_count};
use sm_core::roofline_record::{RecordedShape, ShapeSource};

#[derive(Debug, Default, clap::Args)]
pub struct RooflineArgs {
    /// The model's Hugging Face config.json: its size and KV bytes per token give each decode
    /// cell a memory-bandwidth roofline (needs the GPU: detected, or --gpu NAME --gpu-count N).
    #[arg(long, value_name = "PATH", conflicts_with_all = ["active_params", "bytes_per_weight", "kv_bytes_per_token"])]
    pub(crate) model_config: Option<PathBuf>,
    /// Parameters a decode step reads (for a mixture of experts, the active ones), e.g. 8B, 3.3B.
    #[arg(long, value_name = "N", requires_all = ["bytes_per_weight", "kv_bytes_per_token"], value_parser = count)]
    pub(crate) active_params: Option<f64>,
    /// Bytes per weight: 2 for bf16/fp16, 1 for fp8, 0.5 for 4-bit.
    #[arg(long, value_name = "BYTES", requires = "active_params", value_parser = positive)]
    pub(crate) bytes_per_weight: Option<f64>,
    /// KV-cache bytes per token: 2 × layers × KV heads × head size × bytes per value.
    #[arg(long, value_name = "BYTES", requires = "active_params", value_parser = non_negative)]
    pub(crate) kv_bytes_per_token: Option<f64>,
}

fn count(s: &str) -> Result<f64, String> {
    parse_count(s).map_err(|e| e.to_string())
}

fn number(s: &str, ok: impl Fn(f64) -> bool, what: &str) -> Result<f64, String> {
    match s.trim().parse::<f64>() {
        Ok(v) if v.is_finite() && ok(v) => Ok(v),
        _ => Err(format!("`{s}` is not {what}")),
    }
}

fn positive(s: &str) -> Result<f64, String> {
    number(s, |v| v > 0.0, "a positive number of bytes, e.g. 2 for bf16 or 0.5 for 4-bit")
}

fn non_negative(s: &str) -> Result<f64, String> {
    number(s, |v| v >= 0.0, "a number of bytes (0 or more)")
}

impl RooflineArgs {
    /// The shape the flags describe, `None` without them; reads and checks `--model-config`.
    pub(crate) fn shape(&self) -> Result<Option<RecordedShape>> {
        if let Some(path) = &self.model_config {
            let text = std::fs::read_to_string(path)
                .with_context(|| format!("cannot read --model-config {}", path.display()))?;
            let parsed = shape_from_config(&text).with_context(|| format!("--model-config {}", path.display()))?;
            let name = path.file_name().map(|n| n.to_string_lossy().into_owned());
            return Ok(Some(RecordedShape { shape: parsed.shape, source: ShapeSource::ConfigJson, config_file: name }));
        }
        let (Some(active_params), Some(bytes_per_weight), Some(kv_bytes_per_token)) =
            (self.active_params, self.bytes_per_weight, self.kv_bytes_per_token)
        else {
            return Ok(None);
        };
        let shape = ModelShape { active_params, bytes_per_weight, kv_bytes_per_token };
        Ok(Some(RecordedShape { shape, source: ShapeSource::Flags, config_file: None }))
    }
}
