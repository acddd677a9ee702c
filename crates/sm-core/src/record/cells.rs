//! The record's rows: a prefill row, a decode cell (with its intervals, repeats and phase split)
//! and an entry of the plan.

use serde::{Deserialize, Serialize};

use super::settings::{TokenSource, is_false};
use super::status::{CellStatus, PlanStatus};
use crate::precision::Interval;
use crate::slo::BoundCheck;

/// One row of the prefill table: the cold, cache-warming scout of a context.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PrefillRow {
    pub context: u64,
    pub label: String,
    pub prompt_tokens: Option<u64>,
    pub ttft_ms: Option<f64>,
    pub prompt_tok_s: Option<f64>,
    /// `usage.prompt_tokens_details.cached_tokens` where the server reports it:
    /// 0 proves the row was cold.
    pub cached_tokens: Option<u64>,
    pub status: CellStatus,
    pub reason: Option<String>,
    /// The server's gauges and the GPUs through the row's request (methodology §14).
    #[serde(flatten)]
    pub telemetry: crate::telemetry::Telemetry,
}

/// One cell of the sustained-decode matrix. Only `valid` cells carry numbers.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct DecodeCell {
    pub context: u64,
    pub label: String,
    pub concurrency: u32,
    pub status: Option<CellStatus>,
    pub reason: Option<String>,
    pub total_tok_s: Option<f64>,
    pub per_request_tok_s: Option<f64>,
    pub ttft_ms_p50: Option<f64>,
    pub ttft_ms_p90: Option<f64>,
    pub ttft_ms_p99: Option<f64>,
    pub tbt_ms_p50: Option<f64>,
    pub tbt_ms_p90: Option<f64>,
    pub tbt_ms_p99: Option<f64>,
    pub chunk_gap_ms_p50: Option<f64>,
    pub chunk_gap_ms_p99: Option<f64>,
    pub avg_active: Option<f64>,
    pub completed: Option<u64>,
    pub output_tokens: Option<u64>,
    pub measured_s: Option<f64>,
    /// Requests that produced at least one token inside the window.
    pub requests: Option<u64>,
    pub token_source: Option<TokenSource>,
    /// Over capacity: the KV tokens the cell would need.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kv_need_tokens: Option<u64>,
    /// How late the client's async runtime woke during the window, p99 (ms): chunk
    /// timestamps may be late by about as much.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_lag_ms_p99: Option<f64>,
    /// CPU the speedmatrix process used during the window, % of one core.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_cpu_pct: Option<f64>,
    /// `100 × Σ cached_tokens / Σ prompt_tokens` over the cell's decode requests that reported
    /// both (`usage.prompt_tokens_details.cached_tokens`); absent when the server reports no
    /// cached tokens. Low means TTFT was not measured cache-warm.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prompt_cache_hit_pct: Option<f64>,
    /// Requests of the cell sent a second time because their connection broke before any byte
    /// of the answer (a pooled keep-alive connection the server closed); absent when none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_retries: Option<u64>,
    /// Things a reader should know about a valid figure (e.g. the server held fewer streams than asked).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<String>,
    /// Whether the cell met every bound of `settings.slo` (valid cells).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub slo_met: Option<bool>,
    /// Each bound of the SLO as this cell measured it.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub slo_bounds: Vec<BoundCheck>,
    /// Share of the cell's requests that met every bound on their own figures (%).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub goodput_pct: Option<f64>,
    /// Output tokens/s of the requests that met every bound.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub goodput_tok_s: Option<f64>,
    /// `--cost-per-hour` over the output tokens an hour makes at `total_tok_s`, USD per million.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usd_per_million_tokens: Option<f64>,
    /// Measured by `--find-capacity`, not part of the planned matrix.
    #[serde(default, skip_serializing_if = "is_false")]
    pub searched: bool,
    /// 95 % confidence intervals of the main figures (methodology §12); absent before 1.2.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ci: Option<CellIntervals>,
    /// With `--precision`: whether total tok/s and TBT p50 reached it within the window.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub precision_met: Option<bool>,
    /// With `--repeats N`: every measurement of the cell; the cell's main figures are their means.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub repeats: Vec<Repeat>,
    /// With two or more repeats: whether they agree within their intervals (methodology §12.4).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub repeats_agree: Option<bool>,
    /// Where the cell's wall time went (s); absent before 1.2.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phases: Option<CellPhases>,
    /// The memory-bandwidth bound on total tok/s (methodology §14.4), with a model shape.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub roofline_tok_s: Option<f64>,
    /// `total_tok_s ÷ roofline_tok_s`: the share of the roofline achieved.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub roofline_fraction: Option<f64>,
    /// Speculative decoding in the window, from the engine's counters (methodology §14.2); absent
    /// where the engine exports none or did not speculate.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spec_decode: Option<crate::spec_decode::SpecDecode>,
    /// GPU power, energy and throttling in the window (methodology §14.3); absent without a source.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gpu: Option<crate::gpu_telemetry::GpuCell>,
    /// The server's gauges over the window, from its `/metrics` (methodology §14.1); absent
    /// where it has none or `--metrics-interval off`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server_metrics: Option<crate::server_metrics::ServerMetrics>,
    /// With `--ranks N` (1.4): each client process's streams, tokens and health; absent with one.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ranks: Vec<crate::ranks::RankCell>,
}

/// 95 % confidence intervals of a cell's main figures; a figure has none when its samples are too
/// few for one (methodology §12).
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
pub struct CellIntervals {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub total_tok_s: Option<Interval>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub per_request_tok_s: Option<Interval>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ttft_ms_p50: Option<Interval>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ttft_ms_p90: Option<Interval>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tbt_ms_p50: Option<Interval>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tbt_ms_p99: Option<Interval>,
}

/// The main figures of one measurement of a cell under `--repeats`.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct Repeat {
    pub total_tok_s: Option<f64>,
    pub per_request_tok_s: Option<f64>,
    pub ttft_ms_p50: Option<f64>,
    pub ttft_ms_p90: Option<f64>,
    pub tbt_ms_p50: Option<f64>,
    pub tbt_ms_p99: Option<f64>,
    pub measured_s: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub goodput_tok_s: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ci: Option<CellIntervals>,
    /// Why this measurement has no figures (it was not valid).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

/// Where a cell's wall time went, in seconds: the scout and the drain before it, the ramp to
/// stable readiness, the window, and stopping the streams and draining after it.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
pub struct CellPhases {
    pub before_s: f64,
    pub ramp_s: f64,
    pub window_s: f64,
    pub after_s: f64,
}

impl DecodeCell {
    pub fn status(&self) -> CellStatus {
        self.status.unwrap_or(CellStatus::Error)
    }
}

/// A cell or prefill row of the plan, before it is measured.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PlannedCell {
    pub kind: PlanKind,
    pub requested_context: u64,
    pub context: u64,
    pub label: String,
    pub concurrency: u32,
    pub status: PlanStatus,
    pub reason: Option<String>,
}

/// What a plan entry measures; run.json writes `prefill` or `decode`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PlanKind {
    Prefill,
    Decode,
}

impl PlanKind {
    pub fn name(self) -> &'static str {
        match self {
            PlanKind::Prefill => "prefill",
            PlanKind::Decode => "decode",
        }
    }
}

impl std::fmt::Display for PlanKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}
