//! The run record, schema `speedmatrix.run/1.N` ([`SCHEMA`] is the one written) — published as
//! `schema/run.schema.json`, which [`schema::run_schema`] generates from these types. Field names are a contract: the report, the results
//! site and other tools read them. Add fields; never rename or repurpose one.
//! A minor version (`/1.1`) only adds optional fields: every reader of `/1` reads it.

use serde::{Deserialize, Serialize};

use crate::Tokens;
use crate::capacity::Limits;
use crate::capacity_answer::Capacity;
pub use crate::engine::Engine;

mod cells;
pub mod percentiles;
pub mod schema;
mod settings;
pub mod status;
pub use cells::{CellIntervals, CellPhases, DecodeCell, PlanKind, PlannedCell, PrefillRow, Repeat};
pub use percentiles::Percentiles;
pub use settings::{Api, PromptSource, ReasoningEffort, Settings, ThinkingMode, TimingSettings, TokenSource};
pub use status::{CellStatus, PlanStatus, RunStatus};

/// The schema this version writes. 1.1 added the service level, goodput, cost and `capacity[]`; 1.2
/// precision (intervals, adaptive windows, repeats); 1.3 the load phases; 1.4 `tool.client_threads`,
/// the `ranks` of a cell, a rate level and a burst, telemetry on prefill rows and rate levels, and the
/// telemetry settings; 1.5 the server metrics' `measured_tokens` and `tok_s_timing_pct`, a rate
/// level's `saturation` verdict, `drain_s` and `first_failure`, and
/// the rate phase's `drain_max_s` in place of `grace_s`.
pub const SCHEMA: &str = "speedmatrix.run/1.5";

/// Whether a record's `schema` is one this version reads: `speedmatrix.run/1` or any `/1.N`.
pub fn schema_readable(schema: &str) -> bool {
    schema.strip_prefix("speedmatrix.run/1").is_some_and(|minor| {
        minor.is_empty()
            || minor.strip_prefix('.').is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
    })
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Tool {
    /// The measuring tool: `speedmatrix`.
    pub name: String,
    /// The tool's version (Cargo package version).
    pub version: String,
    /// The source commit the tool was built from, when known.
    pub commit: Option<String>,
    /// The measuring runtime's worker threads (`--client-threads`); absent before schema 1.4 and
    /// in imported records.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub client_threads: Option<u32>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ServerInfo {
    /// Base URL without credentials.
    pub url: String,
    /// `vllm`, `sglang`, `llamacpp`, `tgi` or `generic`.
    pub engine: Engine,
    /// The engine's version as the server reports it (vLLM `GET /version`, SGLang `/get_server_info`, …), when it does.
    pub engine_version: Option<String>,
    /// The model id the requests name (from `GET /v1/models` or `--model`).
    pub model: String,
    /// The longest sequence (prompt + output tokens) one request may have, from discovery or `--max-model-len`; null
    /// when unknown (contexts are then not fitted).
    pub max_model_len: Option<u64>,
    /// The server's KV cache in tokens, from discovery or `--kv-budget`; null when unknown (no cell is then over
    /// capacity by KV).
    pub kv_budget_tokens: Option<u64>,
    /// e.g. `vllm:cache_config_info kv_cache_size_tokens`, `--kv-budget`, `unknown`.
    pub kv_budget_source: String,
    /// The most sequences the server runs at once (vLLM `--max-num-seqs`, SGLang `max_running_requests`, llama.cpp
    /// `total_slots`, TGI `max_concurrent_requests`, or `--max-num-seqs`); null when unknown. A cell with more requests
    /// at once is over capacity.
    pub max_num_seqs: Option<u32>,
    /// Whether the server exposes Prometheus `/metrics` with the engine's scheduler gauges (used for readiness, average
    /// active requests and the drain barrier).
    pub metrics_available: bool,
    /// Whether the server's `POST /tokenize` could be used to make prompt lengths exact.
    pub tokenize_available: bool,
    /// Whatever else was learnt (block size, quantization, …), free-form.
    #[serde(default, skip_serializing_if = "serde_json::Map::is_empty")]
    pub extra: serde_json::Map<String, serde_json::Value>,
}

#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Gpu {
    /// GPU model name, e.g. `NVIDIA H200 NVL`.
    pub name: String,
    /// GPU memory in MiB, when known.
    pub memory_mib: Option<u64>,
}

#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Hardware {
    /// Operating system, e.g. `linux`.
    pub os: String,
    /// Kernel release, when known.
    pub kernel: Option<String>,
    /// CPU model, when known.
    pub cpu: Option<String>,
    /// The GPUs (from `nvidia-smi` where present, else the `--gpu` flags); empty when unknown.
    pub gpus: Vec<Gpu>,
    /// Number of GPUs.
    pub gpu_count: u32,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Event {
    /// Seconds since `started`.
    pub t: f64,
    /// What happened.
    pub text: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct RunRecord {
    /// The record's schema: `speedmatrix.run/1.5` as written now; `speedmatrix.run/1.4` before a rate level's
    /// `saturation`, the server metrics' `measured_tokens` and `tok_s_timing_pct`, `drain_s` and `first_failure` and
    /// the rate phase's `drain_max_s` (which replaced `grace_s`); `speedmatrix.run/1.3` before `tool.client_threads`,
    /// the `ranks` of a cell, a rate level and a burst, prefill rows, rate levels, bursts, mixed-prefill levels and the
    /// sessions phase carrying `server_metrics` and `gpu`, and the settings `metrics_interval_s` and `gpu_metrics`;
    /// `speedmatrix.run/1.2` before the load phases (`phases`), `speedmatrix.run/1.1` before confidence intervals,
    /// adaptive windows and repeats were added, `speedmatrix.run/1` before the service level and capacity. A minor
    /// version only adds optional fields, so a reader of `/1` reads every `/1.N`.
    #[schemars(regex(pattern = r"^speedmatrix\.run/1(\.[0-9]+)?$"))]
    pub schema: String,
    /// The program that wrote this record.
    pub tool: Tool,
    pub status: RunStatus,
    /// UTC, RFC 3339.
    #[schemars(regex(pattern = r"^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}(\.[0-9]+)?Z$"), extend("format" = "date-time"))]
    pub started: String,
    /// When the run ended: UTC, RFC 3339; null while it runs, when it was only planned, or in an imported record whose
    /// file gives no time.
    #[schemars(regex(pattern = r"^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}(\.[0-9]+)?Z$"), extend("format" = "date-time"))]
    pub finished: Option<String>,
    /// A free-text label given with `--label`.
    pub label: Option<String>,
    /// What discovery learnt about the server (methodology §2). Every limit may have been overridden by a flag.
    pub server: ServerInfo,
    pub settings: Settings,
    /// The hardware the server runs on, as far as it is known.
    pub hardware: Hardware,
    /// The server's launch command with secrets replaced by `<redacted>` (`--api-key`, `--hf-token`, values of
    /// `*TOKEN*`, `*KEY*`, `*SECRET*`, `*PASSWORD*`), or null when unknown.
    pub launch_command: Option<String>,
    /// The server's GPUs, what per-GPU figures divide by: `--gpu-count`, else the launch command's tensor ×
    /// pipeline × data parallel sizes; absent when neither says (the host's own GPUs are `hardware`'s).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server_gpus: Option<crate::server_gpus::ServerGpus>,
    /// The plan: every prefill row and decode cell with its planned status, and every skipped context with the reason.
    #[serde(default)]
    pub plan: Vec<PlannedCell>,
    /// The prefill rows, in ascending context.
    pub prefill: Vec<PrefillRow>,
    /// The decode cells in measurement order (first column, first row, then row by row), over-capacity cells included.
    pub decode: Vec<DecodeCell>,
    /// The run's event log.
    pub events: Vec<Event>,
    /// The run's id: the tag at the start of every prompt. A resumed run keeps it,
    /// so it sends the same prompts (and hits the same cache) as before.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("x-nullable" = true))]
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

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct PromptInfo {
    pub context: u64,
    /// Prompt tokens as the server counted them while sizing (null with calibration).
    pub tokens: Option<u64>,
    /// FNV-1a 64-bit hash of the prompt's messages, hex.
    #[schemars(regex(pattern = r"^[0-9a-f]{16}$"))]
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
    use crate::capacity::CapacityRule;

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
        let text = include_str!("../../../../tests/data/run-sample.json");
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

    /// A resumed run reads run.json and writes it again: every figure must come back to the bit,
    /// or each resume would move the last digit of the cells measured before it (serde_json's
    /// default parser is one ulp off for about one such number in eleven; the workspace turns on
    /// its exact one, `float_roundtrip`).
    #[test]
    fn figures_read_back_to_the_bit() {
        let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
        for _ in 0..20_000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let v = (x >> 11) as f64 / (1u64 << 53) as f64 * 1e5;
            let cell = DecodeCell { total_tok_s: Some(v), ..DecodeCell::default() };
            let back: DecodeCell = serde_json::from_str(&serde_json::to_string(&cell).unwrap()).unwrap();
            assert_eq!(back.total_tok_s.map(f64::to_bits), Some(v.to_bits()), "{v}");
        }
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
