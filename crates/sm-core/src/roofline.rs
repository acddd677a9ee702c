//! The memory-bandwidth roofline of a decode step (methodology §14.4): is a measured tok/s
//! physically possible on the GPUs the record names? Pure functions, no clock.
//!
//! One decode step reads the active weights once (shared by every sequence in the batch) and
//! each sequence's KV cache, so `step time ≥ bytes ÷ (bandwidth × GPUs)` and the batch makes at
//! most `C ÷ step time` tokens a second. Compute, kernel launches and communication only make a
//! step slower, so the bound is an upper bound on tok/s, never an estimate of it.

use serde::{Deserialize, Serialize};
use thiserror::Error;

/// Above `1 + TOLERANCE` of the bound a cell is flagged: the table holds peak figures rounded
/// by their vendors, and a window's tok/s has its own noise, so a few % over is not evidence.
pub const TOLERANCE: f64 = 0.05;

/// What a decode step reads, per model.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ModelShape {
    /// Parameters read per step: for a mixture-of-experts model, the active ones (attention,
    /// router, shared experts, `experts_per_tok` routed experts, output head).
    #[schemars(range(min = 0))]
    pub active_params: f64,
    /// Bytes per weight (2 for bf16).
    #[schemars(extend("exclusiveMinimum" = 0))]
    pub bytes_per_weight: f64,
    /// KV-cache bytes per token of context.
    #[schemars(range(min = 0))]
    pub kv_bytes_per_token: f64,
}

/// The GPUs a run used: their summed memory bandwidth (tensor parallelism reads each GPU's
/// shard at once, so bandwidths add).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Bandwidth {
    pub gb_s_per_gpu: f64,
    pub gpus: u32,
}

impl Bandwidth {
    pub fn bytes_per_s(&self) -> f64 {
        self.gb_s_per_gpu * 1e9 * f64::from(self.gpus)
    }
}

/// Bytes one decode step reads at `concurrency` sequences each holding `context` tokens of KV.
pub fn bytes_per_step(shape: &ModelShape, concurrency: u32, context: u64) -> f64 {
    let weights = shape.active_params * shape.bytes_per_weight;
    let kv = f64::from(concurrency) * context as f64 * shape.kv_bytes_per_token;
    weights + kv
}

/// The most tokens a second the batch can make: `C ÷ (bytes ÷ bandwidth)`. `None` where there
/// is nothing to bound (no sequences, no bytes, no bandwidth).
pub fn bound_tok_s(shape: &ModelShape, bw: Bandwidth, concurrency: u32, context: u64) -> Option<f64> {
    let bytes = bytes_per_step(shape, concurrency, context);
    let rate = bw.bytes_per_s();
    if concurrency == 0 || !bytes.is_finite() || bytes <= 0.0 || rate.is_nan() || rate <= 0.0 {
        return None;
    }
    Some(f64::from(concurrency) * rate / bytes)
}

/// Measured ÷ bound; `None` without both, or at a non-positive bound.
pub fn fraction(measured_tok_s: Option<f64>, bound: Option<f64>) -> Option<f64> {
    match (measured_tok_s, bound) {
        (Some(m), Some(b)) if b > 0.0 && m.is_finite() && m >= 0.0 => Some(m / b),
        _ => None,
    }
}

/// Why a cell is above its bound, the likeliest first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AboveBound {
    /// Chunks carried several tokens: a step made more than one token per sequence.
    SpeculativeDecoding,
    /// One token per step and still too fast: the model described is larger than the one
    /// served (quantised weights, a smaller model), or the measurement is wrong.
    ModelOrMeasurement,
}

impl std::fmt::Display for AboveBound {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            AboveBound::SpeculativeDecoding => {
                "above the bound: chunks carry several tokens, likely speculative decoding"
            }
            AboveBound::ModelOrMeasurement => {
                "above the bound: the model description (size, bytes per weight) is likely wrong, or the measurement"
            }
        })
    }
}

/// `Some(reason)` where `fraction` exceeds `1 + TOLERANCE`; `multi_token_chunks` says whether
/// the cell's stream chunks carried more than one token on average.
pub fn judge(fraction: f64, multi_token_chunks: bool) -> Option<AboveBound> {
    (fraction > 1.0 + TOLERANCE).then_some(if multi_token_chunks {
        AboveBound::SpeculativeDecoding
    } else {
        AboveBound::ModelOrMeasurement
    })
}

/// One row of the GPU table: all `tokens` must be words of the normalised name.
struct GpuRow {
    tokens: &'static [&'static str],
    label: &'static str,
    gb_s: f64,
}

/// Peak memory bandwidth per GPU, most specific rows first. Sources, per row:
#[rustfmt::skip]
const GPUS: &[GpuRow] = &[
    // https://www.nvidia.com/en-us/data-center/b200/ (HGX B200: 8 TB/s per GPU)
    GpuRow { tokens: &["b200"], label: "B200", gb_s: 8000.0 },
    // https://www.nvidia.com/en-us/data-center/h200/ (H200 SXM and H200 NVL: 4.8 TB/s)
    GpuRow { tokens: &["h200", "nvl"], label: "H200 NVL", gb_s: 4800.0 },
    GpuRow { tokens: &["h200"], label: "H200", gb_s: 4800.0 },
    // https://www.nvidia.com/en-us/data-center/h100/ (SXM 3.35 TB/s, NVL 3.9 TB/s, PCIe 2 TB/s)
    GpuRow { tokens: &["h100", "nvl"], label: "H100 NVL", gb_s: 3900.0 },
    GpuRow { tokens: &["h100", "pcie"], label: "H100 PCIe", gb_s: 2000.0 },
    GpuRow { tokens: &["h100"], label: "H100 SXM", gb_s: 3350.0 },
    // https://www.nvidia.com/en-us/data-center/a100/ (80GB PCIe 1,935 GB/s, 80GB SXM 2,039 GB/s, 40GB 1,555 GB/s)
    GpuRow { tokens: &["a100", "80gb", "pcie"], label: "A100 80GB PCIe", gb_s: 1935.0 },
    GpuRow { tokens: &["a100", "80gb"], label: "A100 80GB SXM", gb_s: 2039.0 },
    GpuRow { tokens: &["a100"], label: "A100 40GB", gb_s: 1555.0 },
    // https://www.nvidia.com/en-us/data-center/l40s/ (864 GB/s)
    GpuRow { tokens: &["l40s"], label: "L40S", gb_s: 864.0 },
    // https://www.nvidia.com/en-us/data-center/l4/ (300 GB/s)
    GpuRow { tokens: &["l4"], label: "L4", gb_s: 300.0 },
    // https://www.nvidia.com/en-us/data-center/products/a10-gpu/ (600 GB/s)
    GpuRow { tokens: &["a10"], label: "A10", gb_s: 600.0 },
    // https://www.nvidia.com/en-us/geforce/graphics-cards/50-series/rtx-5090/ (512-bit, 28 Gbps GDDR7: 1,792 GB/s)
    GpuRow { tokens: &["rtx", "5090"], label: "RTX 5090", gb_s: 1792.0 },
    // https://www.nvidia.com/en-us/geforce/graphics-cards/40-series/rtx-4090/ (384-bit, 21 Gbps GDDR6X: 1,008 GB/s)
    GpuRow { tokens: &["rtx", "4090"], label: "RTX 4090", gb_s: 1008.0 },
    // https://www.nvidia.com/en-us/products/workstations/professional-desktop-gpus/rtx-pro-6000/ (1,792 GB/s)
    GpuRow { tokens: &["rtx", "pro", "6000"], label: "RTX PRO 6000 Blackwell", gb_s: 1792.0 },
    // https://www.nvidia.com/en-us/design-visualization/rtx-6000/ (960 GB/s)
    GpuRow { tokens: &["rtx", "6000", "ada"], label: "RTX 6000 Ada", gb_s: 960.0 },
    // https://www.nvidia.com/en-us/design-visualization/rtx-a6000/ (768 GB/s)
    GpuRow { tokens: &["rtx", "a6000"], label: "RTX A6000", gb_s: 768.0 },
    // https://www.amd.com/en/products/accelerators/instinct/mi300/mi325x.html (6 TB/s)
    GpuRow { tokens: &["mi325x"], label: "MI325X", gb_s: 6000.0 },
    // https://www.amd.com/en/products/accelerators/instinct/mi300/mi300x.html (5.3 TB/s)
    GpuRow { tokens: &["mi300x"], label: "MI300X", gb_s: 5300.0 },
];

/// A GPU the table knows: its short name (for "61 % of the H200's roofline") and bandwidth.
#[derive(Debug, Clone, PartialEq)]
pub struct KnownGpu {
    pub label: &'static str,
    pub gb_s: f64,
}

/// The table row for a GPU name as `nvidia-smi`/`amd-smi` reports it ("NVIDIA H200 NVL",
/// "NVIDIA A100-SXM4-80GB"); `None` for a GPU the table does not hold.
pub fn lookup_gpu(name: &str) -> Option<KnownGpu> {
    let lower = name.to_ascii_lowercase();
    let words: Vec<&str> = lower.split(|c: char| !c.is_ascii_alphanumeric()).filter(|w| !w.is_empty()).collect();
    GPUS.iter()
        .find(|row| row.tokens.iter().all(|t| words.contains(t)))
        .map(|row| KnownGpu { label: row.label, gb_s: row.gb_s })
}

#[derive(Debug, Clone, PartialEq, Error)]
pub enum CountError {
    #[error("`{0}` is not a parameter count; write e.g. 8B, 70b, 1.5T, 500M or 3000000000")]
    Invalid(String),
}

/// Parses a parameter count: `3B`, `70b`, `1.5T`, `500M`, `125k`, or a plain number.
pub fn parse_count(s: &str) -> Result<f64, CountError> {
    let t = s.trim();
    let (num, mult) = match t.chars().last().map(|c| c.to_ascii_lowercase()) {
        Some('k') => (&t[..t.len() - 1], 1e3),
        Some('m') => (&t[..t.len() - 1], 1e6),
        Some('b') => (&t[..t.len() - 1], 1e9),
        Some('t') => (&t[..t.len() - 1], 1e12),
        _ => (t, 1.0),
    };
    match num.trim().parse::<f64>() {
        Ok(v) if v.is_finite() && v > 0.0 => Ok(v * mult),
        _ => Err(CountError::Invalid(s.to_string())),
    }
}

/// The shape as recorded in `settings.model_shape`, with where it came from.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct RecordedShape {
    #[serde(flatten)]
    pub shape: ModelShape,
    /// `config_json` (`--model-config`) or `flags` (`--active-params` …).
    pub source: ShapeSource,
    /// The config file's name (no directories: they may hold a user name).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub config_file: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum ShapeSource {
    ConfigJson,
    Flags,
}

#[cfg(test)]
mod tests;
