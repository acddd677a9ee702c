//! The run's `settings` section: what was asked for, so that a report can say it and a resume can
//! hold the run to it.

use serde::{Deserialize, Serialize};

use crate::capacity::CapacityRule;
use crate::slo::Slo;

/// How prompt lengths were made exact (methodology: prompt sizing).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
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
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
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

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Api {
    #[default]
    Chat,
    Completions,
}

/// `--thinking`: a reasoning model's thinking asked on or off through the chat template
/// (`chat_template_kwargs.enable_thinking`, what vLLM, SGLang and llama.cpp pass to templates that
/// read it); without it nothing is sent and the template's default holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum ThinkingMode {
    On,
    Off,
}

/// `--reasoning-effort`: sent as `reasoning_effort` (OpenAI's chat field, which vLLM passes to
/// models that take it, e.g. gpt-oss).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum ReasoningEffort {
    Low,
    Medium,
    High,
}

impl std::fmt::Display for ThinkingMode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(if *self == ThinkingMode::On { "on" } else { "off" })
    }
}

impl std::fmt::Display for ReasoningEffort {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl ReasoningEffort {
    pub fn as_str(self) -> &'static str {
        match self {
            ReasoningEffort::Low => "low",
            ReasoningEffort::Medium => "medium",
            ReasoningEffort::High => "high",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Settings {
    /// The decode contexts in tokens as fitted to `max_model_len` (a requested 256K = 262144 is measured as 257984 at
    /// max_model_len 262144 with 4096 output tokens); what was requested is in `plan[].requested_context`.
    pub contexts: Vec<u64>,
    /// The requested concurrency levels (requests at once), the matrix's columns.
    pub concurrency: Vec<u32>,
    /// Length of every decode cell's measurement window, in seconds (default 30).
    #[schemars(range(min = 0))]
    pub duration_s: f64,
    /// `max_tokens` of every decode request (default 4,096).
    pub max_tokens: u64,
    /// Extra prefill-only contexts in tokens, before fitting (every decode context gets a prefill row anyway).
    pub prefill_contexts: Vec<u64>,
    pub capacity_rule: CapacityRule,
    /// The OpenAI endpoint the requests go to: `chat` = `/v1/chat/completions` (messages, the default), `completions` =
    /// `/v1/completions` (a prompt string, for servers without a chat template).
    pub api: Api,
    /// How prompt lengths were made exact: `server_tokenize`, `tokenizer_file`, `usage_calibration`.
    pub prompt_source: PromptSource,
    /// Whether decode requests send `ignore_eos: true` (so every request produces `max_tokens` unless cancelled).
    pub ignore_eos: bool,
    /// The sampling temperature sent, or null when none was sent (the server's default).
    pub temperature: Option<f64>,
    /// `--thinking`: `chat_template_kwargs.enable_thinking` sent on every chat request (and its
    /// prompt's token count); absent when not sent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub thinking: Option<ThinkingMode>,
    /// `--reasoning-effort`: `reasoning_effort` sent on every request; absent when not sent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reasoning_effort: Option<ReasoningEffort>,
    /// The waits and limits of the run; absent (null) in records written before they were recorded.
    #[serde(flatten, default)]
    pub timing: TimingSettings,
    /// `--slo`: the service level every valid decode cell is judged against (absent before 1.1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub slo: Option<Slo>,
    /// `--cost-per-hour`: the price of the whole server, USD per hour.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("exclusiveMinimum" = 0))]
    pub cost_per_hour_usd: Option<f64>,
    /// `--find-capacity`: levels between the matrix's were searched for the capacity answer.
    #[serde(default, skip_serializing_if = "is_false")]
    pub find_capacity: bool,
    /// `--precision`: the half-width (% of the figure) each cell measured towards; `duration_s` is
    /// then the longest window and `min_duration_s` the shortest.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("exclusiveMinimum" = 0))]
    pub precision_pct: Option<f64>,
    /// `--min-duration`: the shortest window with `--precision`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("exclusiveMinimum" = 0))]
    pub min_duration_s: Option<f64>,
    /// `--repeats`: how many times each cell is measured (absent: once).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 2))]
    pub repeats: Option<u32>,
    /// `--save-requests`: every measured request has a line in `requests.jsonl` beside the record
    /// ([`crate::requests`]).
    #[serde(default, skip_serializing_if = "is_false")]
    pub save_requests: bool,
    /// `--prompts FILE.jsonl`: the phases sent these prompts in place of synthetic text.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prompts_file: Option<crate::phases::PromptsFileInfo>,
    /// `--tools FILE.json`: the tool definitions every chat request carried (methodology §7.3.1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tools: Option<crate::tools::ToolsInfo>,
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
    #[schemars(extend("x-nullable" = true))]
    pub gpu_metrics: Option<String>,
}

fn yes() -> bool {
    true
}

fn is_true(b: &bool) -> bool {
    *b
}

pub(super) fn is_false(b: &bool) -> bool {
    !*b
}

/// The timing flags of a run, so that a resume uses the same ones. `None` in a record written
/// before they were recorded: a resume then takes the flags' defaults.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize, schemars::JsonSchema)]
pub struct TimingSettings {
    /// `--warmup`: window of the hidden C=1 warm-up cell (0: none).
    #[serde(default)]
    #[schemars(range(min = 0))]
    #[schemars(extend("x-optional" = true, "x-nullable" = true))]
    pub warmup_s: Option<f64>,
    /// `--ready-stable`: how long readiness must hold before the window opens.
    #[serde(default)]
    #[schemars(range(min = 0))]
    #[schemars(extend("x-optional" = true, "x-nullable" = true))]
    pub ready_stable_s: Option<f64>,
    /// `--ready-timeout`: the longest wait for readiness.
    #[serde(default)]
    #[schemars(range(min = 0))]
    #[schemars(extend("x-optional" = true, "x-nullable" = true))]
    pub ready_timeout_s: Option<f64>,
    /// `--stall-timeout`: the longest silence between two tokens of a stream.
    #[serde(default)]
    #[schemars(range(min = 0))]
    #[schemars(extend("x-optional" = true, "x-nullable" = true))]
    pub stall_timeout_s: Option<f64>,
    /// `--server-wait`: how long to wait for a server that stopped responding.
    #[serde(default)]
    #[schemars(range(min = 0))]
    #[schemars(extend("x-optional" = true, "x-nullable" = true))]
    pub server_wait_s: Option<f64>,
    /// `--metrics-interval` (0: off): how often the server's /metrics and the GPUs were read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0))]
    #[schemars(extend("x-nullable" = true))]
    pub metrics_interval_s: Option<f64>,
}
