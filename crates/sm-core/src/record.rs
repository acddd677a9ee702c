//! The run record, schema `speedmatrix.run/1.N` ([`SCHEMA`] is the one written) — published as
//! `schema/run.schema.json`. Field names are a contract: the report, the results
//! site and other tools read them. Add fields; never rename or repurpose one.
//! A minor version (`/1.1`) only adds optional fields: every reader of `/1` reads it.

use serde::{Deserialize, Serialize};

use crate::Tokens;
use crate::capacity::{CapacityRule, Limits};
use crate::capacity_answer::Capacity;
pub use crate::engine::Engine;
use crate::precision::Interval;
use crate::slo::{BoundCheck, Slo};

/// The schema this version writes. 1.1 added the service level, goodput, cost and `capacity[]`; 1.2
/// precision (intervals, adaptive windows, repeats); 1.3 the load phases; 1.4 `tool.client_threads`,
/// the `ranks` of a cell, a rate level and a burst, telemetry on prefill rows and rate levels, and the
/// telemetry settings.
pub const SCHEMA: &str = "speedmatrix.run/1.4";

/// Whether a record's `schema` is one this version reads: `speedmatrix.run/1` or any `/1.N`.
pub fn schema_readable(schema: &str) -> bool {
    schema.strip_prefix("speedmatrix.run/1").is_some_and(|minor| {
        minor.is_empty()
            || minor.strip_prefix('.').is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
    })
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RunStatus {
    /// `--dry-run`: discovered and planned, nothing measured.
    Planned,
    Running,
    Complete,
    Interrupted,
    Failed,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CellStatus {
    Valid,
    OverCapacity,
    Error,
    Loop,
    Skipped,
}

impl CellStatus {
    /// The status as the console, the tables and the dashboard say it ("over capacity").
    pub fn word(self) -> &'static str {
        match self {
            CellStatus::Valid => "valid",
            CellStatus::OverCapacity => "over capacity",
            CellStatus::Error => "error",
            CellStatus::Loop => "loop",
            CellStatus::Skipped => "skipped",
        }
    }

    /// The status as run.json, the CSV and the site's messages spell it ("over_capacity").
    pub fn name(self) -> &'static str {
        match self {
            CellStatus::OverCapacity => "over_capacity",
            other => other.word(),
        }
    }
}

/// How prompt lengths were made exact (methodology: prompt sizing).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PromptSource {
    /// Bisection with the server's `/tokenize`.
    ServerTokenize,
    /// `--tokenizer tokenizer.json` plus the server's fixed template cost.
    TokenizerFile,
    /// `usage.prompt_tokens` of `max_tokens: 1` requests.
    UsageCalibration,
}

impl PromptSource {
    /// The name run.json records.
    pub fn name(self) -> &'static str {
        match self {
            PromptSource::ServerTokenize => "server_tokenize",
            PromptSource::TokenizerFile => "tokenizer_file",
            PromptSource::UsageCalibration => "usage_calibration",
        }
    }
}

impl std::fmt::Display for PromptSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// Where a decode cell's output-token count comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TokenSource {
    /// Per-chunk increase of `usage.completion_tokens` (continuous usage stats).
    Usage,
    /// Content-bearing chunks, corrected by the usage total the server sends at
    /// the end of each request (llama.cpp). Exact for requests that ended inside
    /// the window; chunk-counted for the ones cut by the window's end.
    UsageAtEnd,
    /// Content-bearing chunks: the server sent no usage. Undercounts when a
    /// chunk carries several tokens (speculative decoding).
    Chunks,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Api {
    #[default]
    Chat,
    Completions,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Tool {
    pub name: String,
    pub version: String,
    pub commit: Option<String>,
    /// The measuring runtime's worker threads (`--client-threads`); absent before schema 1.4 and
    /// in imported records.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_threads: Option<u32>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ServerInfo {
    /// Base URL without credentials.
    pub url: String,
    /// `vllm`, `sglang`, `llamacpp`, `tgi` or `generic`.
    pub engine: Engine,
    pub engine_version: Option<String>,
    pub model: String,
    pub max_model_len: Option<u64>,
    pub kv_budget_tokens: Option<u64>,
    /// e.g. `vllm:cache_config_info kv_cache_size_tokens`, `--kv-budget`, `unknown`.
    pub kv_budget_source: String,
    pub max_num_seqs: Option<u32>,
    pub metrics_available: bool,
    pub tokenize_available: bool,
    /// Whatever else was learnt (block size, quantization, …), free-form.
    #[serde(default, skip_serializing_if = "serde_json::Map::is_empty")]
    pub extra: serde_json::Map<String, serde_json::Value>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Settings {
    pub contexts: Vec<u64>,
    pub concurrency: Vec<u32>,
    pub duration_s: f64,
    pub max_tokens: u64,
    pub prefill_contexts: Vec<u64>,
    pub capacity_rule: CapacityRule,
    pub api: Api,
    /// How prompt lengths were made exact: `server_tokenize`, `tokenizer_file`, `usage_calibration`.
    pub prompt_source: PromptSource,
    pub ignore_eos: bool,
    pub temperature: Option<f64>,
    /// The waits and limits of the run; absent (null) in records written before they were recorded.
    #[serde(flatten, default)]
    pub timing: TimingSettings,
    /// `--slo`: the service level every valid decode cell is judged against (absent before 1.1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub slo: Option<Slo>,
    /// `--cost-per-hour`: the price of the whole server, USD per hour.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cost_per_hour_usd: Option<f64>,
    /// `--find-capacity`: levels between the matrix's were searched for the capacity answer.
    #[serde(default, skip_serializing_if = "is_false")]
    pub find_capacity: bool,
    /// `--precision`: the half-width (% of the figure) each cell measured towards; `duration_s` is
    /// then the longest window and `min_duration_s` the shortest.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub precision_pct: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_duration_s: Option<f64>,
    /// `--repeats`: how many times each cell is measured (absent: once).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub repeats: Option<u32>,
    /// `--save-requests`: every measured request has a line in `requests.jsonl` beside the record
    /// ([`crate::requests`]).
    #[serde(default, skip_serializing_if = "is_false")]
    pub save_requests: bool,
    /// `--prompts FILE.jsonl`: the phases sent these prompts in place of synthetic text.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prompts_file: Option<crate::phases::PromptsFileInfo>,
    /// Whether the decode matrix ran: `false` when only load phases were asked for. Absent
    /// (every record before schema 1.3) means it did.
    #[serde(default = "yes", skip_serializing_if = "is_true")]
    pub matrix: bool,
    /// `--model-config` or `--active-params …`: the model shape the roofline used (§14.4).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model_shape: Option<crate::roofline::RecordedShape>,
    /// `--gpu-metrics` as asked (`auto`, `off`, `nvml` or the exporter's URL without its
    /// credentials), so that a resume reads the same source (methodology §14.3).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gpu_metrics: Option<String>,
}

fn yes() -> bool {
    true
}

fn is_true(b: &bool) -> bool {
    *b
}

fn is_false(b: &bool) -> bool {
    !*b
}

/// The timing flags of a run, so that a resume uses the same ones. `None` in a record written
/// before they were recorded: a resume then takes the flags' defaults.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
pub struct TimingSettings {
    /// `--warmup`: window of the hidden C=1 warm-up cell (0: none).
    #[serde(default)]
    pub warmup_s: Option<f64>,
    /// `--ready-stable`: how long readiness must hold before the window opens.
    #[serde(default)]
    pub ready_stable_s: Option<f64>,
    /// `--ready-timeout`: the longest wait for readiness.
    #[serde(default)]
    pub ready_timeout_s: Option<f64>,
    /// `--stall-timeout`: the longest silence between two tokens of a stream.
    #[serde(default)]
    pub stall_timeout_s: Option<f64>,
    /// `--server-wait`: how long to wait for a server that stopped responding.
    #[serde(default)]
    pub server_wait_s: Option<f64>,
    /// `--metrics-interval` (0: off): how often the server's /metrics and the GPUs were read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metrics_interval_s: Option<f64>,
}

#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct Gpu {
    pub name: String,
    pub memory_mib: Option<u64>,
}

#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct Hardware {
    pub os: String,
    pub kernel: Option<String>,
    pub cpu: Option<String>,
    pub gpus: Vec<Gpu>,
    pub gpu_count: u32,
}

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

/// What the plan decided for an entry; run.json writes `planned`, `over_capacity` or `skipped`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PlanStatus {
    Planned,
    OverCapacity,
    Skipped,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Event {
    /// Seconds since `started`.
    pub t: f64,
    pub text: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunRecord {
    pub schema: String,
    pub tool: Tool,
    pub status: RunStatus,
    /// UTC, RFC 3339.
    pub started: String,
    pub finished: Option<String>,
    pub label: Option<String>,
    pub server: ServerInfo,
    pub settings: Settings,
    pub hardware: Hardware,
    pub launch_command: Option<String>,
    #[serde(default)]
    pub plan: Vec<PlannedCell>,
    pub prefill: Vec<PrefillRow>,
    pub decode: Vec<DecodeCell>,
    pub events: Vec<Event>,
    /// The run's id: the tag at the start of every prompt. A resumed run keeps it,
    /// so it sends the same prompts (and hits the same cache) as before.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run_id: Option<String>,
    /// Each measured context's prompt: tokens as counted and a hash of its text. A
    /// resume refuses to continue when the server now makes different prompts.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub prompts: Vec<PromptInfo>,
    /// The capacity answer per decode context (methodology §11.3), from the judged cells.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub capacity: Vec<Capacity>,
    /// The load phases that ran beside (or instead of) the decode matrix (methodology §13).
    #[serde(default, skip_serializing_if = "crate::phases::Phases::is_empty")]
    pub phases: crate::phases::Phases,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PromptInfo {
    pub context: u64,
    /// Prompt tokens as the server counted them while sizing (null with calibration).
    pub tokens: Option<u64>,
    /// FNV-1a 64-bit hash of the prompt's messages, hex.
    pub hash: String,
}

/// FNV-1a, 64 bits: a stable fingerprint of text (not for security).
pub fn fnv1a64(parts: &[&str]) -> String {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for part in parts {
        for b in part.bytes().chain(std::iter::once(0u8)) {
            h ^= u64::from(b);
            h = h.wrapping_mul(0x0100_0000_01b3);
        }
    }
    format!("{h:016x}")
}

impl RunRecord {
    pub fn decode_cell(&self, context: u64, concurrency: u32) -> Option<&DecodeCell> {
        self.decode.iter().find(|c| c.context == context && c.concurrency == concurrency)
    }

    /// What the server holds, as the record says: KV budget, block size, `max_num_seqs`.
    pub fn limits(&self) -> Limits {
        Limits {
            kv_budget: self.server.kv_budget_tokens.map(Tokens),
            block_size: self.server.extra.get("block_size").and_then(serde_json::Value::as_u64),
            max_num_seqs: self.server.max_num_seqs,
        }
    }
}

/// Now, UTC, RFC 3339 with whole seconds.
pub fn now_rfc3339() -> String {
    let now = time::OffsetDateTime::now_utc().replace_nanosecond(0).unwrap_or_else(|_| time::OffsetDateTime::now_utc());
    now.format(&time::format_description::well_known::Rfc3339).unwrap_or_else(|_| "1970-01-01T00:00:00Z".to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statuses_serialise_as_documented() {
        let s = serde_json::to_string(&[CellStatus::Valid, CellStatus::OverCapacity, CellStatus::Loop]).unwrap();
        assert_eq!(s, r#"["valid","over_capacity","loop"]"#);
        assert_eq!(serde_json::to_string(&RunStatus::Interrupted).unwrap(), r#""interrupted""#);
        assert_eq!(serde_json::to_string(&CapacityRule::PrefixShared).unwrap(), r#""prefix-shared""#);
        assert_eq!(serde_json::to_string(&TokenSource::Chunks).unwrap(), r#""chunks""#);
        let plan = [PlanKind::Prefill, PlanKind::Decode];
        assert_eq!(serde_json::to_string(&plan).unwrap(), r#"["prefill","decode"]"#);
        let plan = [PlanStatus::Planned, PlanStatus::OverCapacity, PlanStatus::Skipped];
        assert_eq!(serde_json::to_string(&plan).unwrap(), r#"["planned","over_capacity","skipped"]"#);
        let sources = [PromptSource::ServerTokenize, PromptSource::TokenizerFile, PromptSource::UsageCalibration];
        let s = serde_json::to_string(&sources).unwrap();
        assert_eq!(s, r#"["server_tokenize","tokenizer_file","usage_calibration"]"#);
        for p in sources {
            assert_eq!(serde_json::to_string(&p).unwrap(), format!("\"{}\"", p.name()));
        }
        let all =
            [CellStatus::Valid, CellStatus::OverCapacity, CellStatus::Error, CellStatus::Loop, CellStatus::Skipped];
        for c in all {
            assert_eq!(serde_json::to_string(&c).unwrap(), format!("\"{}\"", c.name()));
        }
    }

    /// A recorded run.json read and written again keeps its plan and prompt source as they were:
    /// the typed plan entries, statuses and prompt source write exactly what the strings did. (The
    /// sample predates the optional timing settings, which a write adds as nulls.)
    #[test]
    fn a_recorded_plan_round_trips_unchanged() {
        let text = include_str!("../../../tests/data/run-sample.json");
        let original: serde_json::Value = serde_json::from_str(text).unwrap();
        let record: RunRecord = serde_json::from_str(text).unwrap();
        let written = serde_json::to_value(&record).unwrap();
        assert_eq!(written["plan"], original["plan"]);
        assert_eq!(written["settings"]["prompt_source"], original["settings"]["prompt_source"]);
        assert_eq!(written["decode"], original["decode"]);
        assert_eq!(written["prefill"], original["prefill"]);
        let again: RunRecord = serde_json::from_value(written.clone()).unwrap();
        assert_eq!(serde_json::to_value(&again).unwrap(), written);
    }

    #[test]
    fn timestamps_are_utc_rfc3339() {
        let t = now_rfc3339();
        assert!(t.ends_with('Z') && t.len() == 20, "{t}");
    }

    #[test]
    fn timing_settings_are_flat_and_optional() {
        let old = r#"{"contexts":[1024],"concurrency":[1],"duration_s":30.0,"max_tokens":4096,"prefill_contexts":[],
            "capacity_rule":"reference","api":"chat","prompt_source":"server_tokenize","ignore_eos":true,"temperature":null}"#;
        let s: Settings = serde_json::from_str(old).unwrap();
        assert_eq!(s.timing, TimingSettings::default());
        let mut s = s;
        s.timing.ready_stable_s = Some(1.5);
        let json = serde_json::to_value(&s).unwrap();
        assert_eq!(json["ready_stable_s"], 1.5);
        assert!(json["warmup_s"].is_null() && json.get("timing").is_none(), "{json}");
        assert_eq!(serde_json::from_value::<Settings>(json).unwrap(), s);
    }
}
