//! The flags of `speedmatrix run` and the defaults of what they set. Every numeric value is
//! checked against its range in [`crate::limits`] by clap as it parses a flag; the settings are
//! resolved from the flags (and a resumed run) in [`crate::settings`].

use std::path::PathBuf;
use std::time::Duration;

use sm_core::Tokens;
use sm_core::capacity::CapacityRule;
use sm_core::record::{Api, ReasoningEffort, ThinkingMode};
use sm_core::slo::Slo;

use crate::limits;

/// The headings `speedmatrix run --help` groups its flags under, in the order they are shown
/// (the order of `RunArgs`' fields).
pub(crate) mod heading {
    pub const MEASURE: &str = "What to measure";
    pub const PHASES: &str = "Load phases";
    pub const SERVER: &str = "Server";
    pub const OUTPUT: &str = "Output";
    pub const ADVANCED: &str = "Advanced";
}

/// The flags of `speedmatrix run`, grouped by heading. A default applied when the settings are
/// resolved (an `Option` here, so that a resume can tell a flag given from one not given) is
/// written into the flag's help as `[default: …]`, as clap writes its own.
#[derive(Debug, clap::Args)]
pub struct RunArgs {
    /// Decode contexts, e.g. 8k,16k,32k (k = 1,024 tokens). Contexts that do not fit the model are
    /// trimmed or skipped [default: 8k,16k,32k,64k,128k,256k; 8k,64k,256k in the demo].
    #[arg(long, help_heading = heading::MEASURE, value_parser = contexts)]
    pub(crate) contexts: Option<TokenList>,
    /// Concurrency levels, e.g. 1,2,4,8 [default: 1,2,4,8,16,32,64,128; 1,16,64 in the demo].
    #[arg(long, help_heading = heading::MEASURE, value_parser = concurrency)]
    pub(crate) concurrency: Option<CountList>,
    /// Length of each cell's measurement window, e.g. 30s or 2m (with --precision, the longest one)
    /// [default: 30s; 5s in the demo].
    #[arg(long, help_heading = heading::MEASURE, value_parser = |s: &str| limits::DURATION.parse(s))]
    pub(crate) duration: Option<Duration>,
    /// Output tokens per decode request (max_tokens) [default: 4096].
    #[arg(long, help_heading = heading::MEASURE, value_parser = |s: &str| limits::MAX_TOKENS.parse_tokens(s))]
    pub(crate) max_tokens: Option<Tokens>,
    /// Extra prefill-only contexts, e.g. 256k (every decode context gets a prefill row anyway).
    #[arg(long, help_heading = heading::MEASURE, value_parser = prefill_contexts)]
    pub(crate) prefill_contexts: Option<TokenList>,
    /// Do not add the largest context that fits max_tokens 1 as a prefill row.
    #[arg(long, help_heading = heading::MEASURE)]
    pub(crate) no_prefill_at_max: bool,
    /// The service level each user must get, e.g. 'tok_s_p10>=30,ttft_p90<=2s,tbt_p99<=100ms':
    /// every valid cell is judged against it and the capacity per context is the most users that
    /// meet it [default: tok_s_p10>=20,ttft_p90<=2s].
    #[arg(long, help_heading = heading::MEASURE, value_name = "EXPR", value_parser = |s: &str| s.parse::<Slo>().map_err(|e| e.to_string()))]
    pub(crate) slo: Option<Slo>,
    /// After the matrix, measure the concurrency levels that pin each context's capacity down
    /// (to within 5 %), and probe upward when every level met the SLO; with --replay, search the
    /// largest time scale of the trace that meets the SLO (docs/replay.md).
    #[arg(long, help_heading = heading::MEASURE)]
    pub(crate) find_capacity: bool,
    /// The price of the whole server in USD per hour: adds $ per million output tokens to every
    /// cell and $ per user-hour to the capacity answer.
    #[arg(long, help_heading = heading::MEASURE, value_name = "USD", value_parser = cost_per_hour)]
    pub(crate) cost_per_hour: Option<f64>,
    /// Adaptive windows: each cell measures until its total tok/s and TBT p50 are known within
    /// this (95 % intervals), between --min-duration and --duration, e.g. 1%.
    #[arg(long, help_heading = heading::MEASURE, value_name = "PCT", value_parser = precision)]
    pub(crate) precision: Option<f64>,
    /// The shortest window with --precision [default: 5s].
    #[arg(long, help_heading = heading::MEASURE, requires = "precision", value_parser = |s: &str| limits::MIN_DURATION.parse(s))]
    pub(crate) min_duration: Option<Duration>,
    /// Measure each cell N times, in interleaved passes over the matrix: the cell reports the mean,
    /// its interval and the spread, and is flagged when the repeats disagree [default: 1].
    #[arg(long, help_heading = heading::MEASURE, value_name = "N", value_parser = |s: &str| limits::REPEATS.parse_u32(s))]
    pub(crate) repeats: Option<u32>,
    #[command(flatten, next_help_heading = heading::PHASES)]
    pub(crate) phases: crate::phase_args::PhaseArgs,
    /// Base URL of an OpenAI-compatible server, e.g. http://127.0.0.1:8000. Without it, the built-in
    /// simulated engine is started and measured, with a short demo matrix when --contexts,
    /// --concurrency and --duration are not given either ("the demo" of the defaults).
    #[arg(long, help_heading = heading::SERVER)]
    pub(crate) url: Option<String>,
    /// Start the server with this shell command and stop it afterwards, e.g. 'vllm serve MODEL
    /// --port {port}': {port} becomes a free loopback port, the server's output goes to server.log
    /// in the output directory, and the command (port filled in, secrets redacted) is the recorded
    /// launch command.
    #[arg(long, help_heading = heading::SERVER, value_name = "CMD", conflicts_with_all = ["url", "launch_command"])]
    pub(crate) server_cmd: Option<String>,
    /// How long the --server-cmd server has to answer /health and /v1/models [default: 15m].
    #[arg(long, help_heading = heading::SERVER, requires = "server_cmd", value_parser = |s: &str| limits::SERVE_TIMEOUT.parse(s))]
    pub(crate) serve_timeout: Option<Duration>,
    /// API key sent as a bearer token. Never written to any file.
    #[arg(long, help_heading = heading::SERVER, env = "OPENAI_API_KEY", hide_env_values = true)]
    pub(crate) api_key: Option<String>,
    /// Model id to measure [default: the first model the server lists].
    #[arg(long, help_heading = heading::SERVER)]
    pub(crate) model: Option<String>,
    /// API form: chat (/v1/chat/completions) or completions (/v1/completions) [default: chat].
    #[arg(long, help_heading = heading::SERVER, value_enum)]
    pub(crate) api: Option<ApiFlag>,
    /// A reasoning model's thinking on or off, sent as chat_template_kwargs.enable_thinking (and
    /// used to count each prompt) [default: not sent, the template's default].
    #[arg(long, help_heading = heading::SERVER, value_enum, value_name = "on|off")]
    pub(crate) thinking: Option<ThinkingFlag>,
    /// Sent as reasoning_effort, for models that take it (e.g. gpt-oss) [default: not sent].
    #[arg(long, help_heading = heading::SERVER, value_enum)]
    pub(crate) reasoning_effort: Option<EffortFlag>,
    /// OpenAI tool definitions (a JSON array of {"type": "function", "function": {"name", …}}) sent
    /// with every chat request, whose prompts then ask for a call: time to the first tool call, the
    /// call's tokens and whether its arguments parse. Only the file's name, hash, size and tool
    /// names are recorded.
    #[arg(long, help_heading = heading::SERVER, value_name = "FILE.json")]
    pub(crate) tools: Option<PathBuf>,
    /// A local tokenizer.json (or a model directory that has one) to size prompts exactly when the
    /// server has no /tokenize (hosted APIs). Read from disk, never downloaded.
    #[arg(long, help_heading = heading::SERVER, value_name = "PATH")]
    pub(crate) tokenizer: Option<PathBuf>,
    /// KV cache budget in tokens; overrides what the server reports [default: what the server
    /// reports].
    #[arg(long, help_heading = heading::SERVER, value_parser = |s: &str| limits::KV_BUDGET.parse_tokens(s))]
    pub(crate) kv_budget: Option<Tokens>,
    /// Maximum concurrent sequences of the server; overrides what is discovered [default: what
    /// discovery finds].
    #[arg(long, help_heading = heading::SERVER, value_parser = |s: &str| limits::MAX_NUM_SEQS.parse_u32(s))]
    pub(crate) max_num_seqs: Option<u32>,
    /// The model's context limit; overrides what the server reports [default: what the server
    /// reports].
    #[arg(long, help_heading = heading::SERVER, value_parser = |s: &str| limits::MAX_MODEL_LEN.parse_tokens(s))]
    pub(crate) max_model_len: Option<Tokens>,
    /// The server's launch command, for the record (secrets are redacted) [default: read from /proc
    /// for a server on this machine].
    #[arg(long, help_heading = heading::SERVER)]
    pub(crate) launch_command: Option<String>,
    /// GPU name for the record (and the roofline), when nvidia-smi is not on this host [default:
    /// what nvidia-smi reports].
    #[arg(long, help_heading = heading::SERVER, requires = "gpu_count")]
    pub(crate) gpu: Option<String>,
    /// The server's GPUs: what the per-GPU figures (the frontier, tok/s per GPU) divide by; with
    /// --gpu also the hardware's count [default: the launch command's tensor × pipeline × data
    /// parallel sizes; the GPUs of this host are never assumed to be the server's].
    #[arg(long, help_heading = heading::SERVER, value_parser = |s: &str| limits::GPU_COUNT.parse_u32(s))]
    pub(crate) gpu_count: Option<u32>,
    /// GPU power, energy and throttling per decode cell: a DCGM exporter's URL (e.g.
    /// http://gpu-host:9400/metrics), `nvml` for this machine's GPUs, or `off` [default: NVML when
    /// the server runs on this machine and the driver is there].
    #[arg(long, help_heading = heading::SERVER, value_name = "URL|nvml|off", value_parser = |s: &str| s.parse::<crate::gpu_args::GpuMetrics>())]
    pub(crate) gpu_metrics: Option<crate::gpu_args::GpuMetrics>,
    /// How often the server's /metrics (and the GPU source) is sampled through each cell, prefill
    /// row and load-phase level, for the server's gauges and its own tok/s (0s or off: not sampled)
    /// [default: 1s].
    #[arg(long, help_heading = heading::SERVER, value_parser = limits::parse_metrics_interval)]
    pub(crate) metrics_interval: Option<Duration>,
    /// Simulated-engine profile used when no --url is given [default: seed-ling-3.0-flash-h200nvl-x2].
    #[arg(long, help_heading = heading::SERVER)]
    pub(crate) sim_profile: Option<String>,
    #[command(flatten, next_help_heading = heading::SERVER)]
    pub(crate) roofline: crate::roofline_args::RooflineArgs,
    /// Output directory. A directory that holds a run already is refused: continue that run with
    /// --resume DIR, or pass --force to overwrite it [default: results/<UTC time>-<model>/].
    #[arg(long, help_heading = heading::OUTPUT)]
    pub(crate) out: Option<PathBuf>,
    /// With --out: overwrite the run that DIR holds (its run.json and reports) instead of refusing.
    #[arg(long, help_heading = heading::OUTPUT, requires = "out")]
    pub(crate) force: bool,
    /// A label for this run.
    #[arg(long, help_heading = heading::OUTPUT)]
    pub(crate) label: Option<String>,
    /// Write one line per measured request (send, first and last token times, tokens, cached
    /// tokens, status) to requests.jsonl beside run.json; never prompt or completion text.
    #[arg(long, help_heading = heading::OUTPUT)]
    pub(crate) save_requests: bool,
    /// Discover and plan only: print the plan and write run.json with status "planned".
    #[arg(long, help_heading = heading::OUTPUT)]
    pub(crate) dry_run: bool,
    /// Continue the interrupted run in DIR: finished cells are kept, the rest is measured. Flags not
    /// given are taken from DIR/run.json.
    #[arg(long, help_heading = heading::OUTPUT, value_name = "DIR", conflicts_with_all = ["out", "dry_run"])]
    pub(crate) resume: Option<PathBuf>,
    /// With --resume: measure again the cells that ended error, loop or skipped, and the prefill
    /// rows that failed (e.g. after a transient server fault). Over-capacity cells stay as planned.
    #[arg(long, help_heading = heading::OUTPUT)]
    pub(crate) retry_failed: bool,
    /// Progress display: auto (the dashboard on a terminal, else plain), dashboard, plain (one line
    /// per event), quiet (only the summary).
    #[arg(long, help_heading = heading::OUTPUT, value_enum, default_value_t = Progress::Auto)]
    pub(crate) progress: Progress,
    /// Print only the final summary (and warnings): the same as --progress quiet.
    #[arg(short, long, help_heading = heading::OUTPUT)]
    pub(crate) quiet: bool,
    /// Over-capacity rule: reference (C × (ctx + max_tokens)) or prefix-shared [default: reference].
    #[arg(long, help_heading = heading::ADVANCED)]
    pub(crate) capacity_rule: Option<CapacityRule>,
    /// Worker threads of the measuring runtime, each able to keep one core busy reading streams
    /// [default: one per CPU this process may use, e.g. under taskset] (docs/scaling.md).
    #[arg(long, help_heading = heading::ADVANCED, value_name = "N", value_parser = |s: &str| limits::CLIENT_THREADS.parse_u32(s))]
    pub(crate) client_threads: Option<u32>,
    // The flags that a resume can take from run.json have no clap default, so that a flag given can
    // be told from one not given; their defaults are the DEFAULT_* constants below.
    /// How long readiness must hold before the window opens [default: 3s; 1s in the demo].
    #[arg(long, help_heading = heading::ADVANCED, value_parser = |s: &str| limits::READY_STABLE.parse(s))]
    pub(crate) ready_stable: Option<Duration>,
    /// Longest wait for readiness before the window opens anyway (with a warning) [default: 180s].
    #[arg(long, help_heading = heading::ADVANCED, value_parser = |s: &str| limits::READY_TIMEOUT.parse(s))]
    pub(crate) ready_timeout: Option<Duration>,
    /// A stream that sends nothing for this long between two tokens is an error (before its first
    /// token a stream may wait up to --ready-timeout) [default: 15s].
    #[arg(long, help_heading = heading::ADVANCED, value_parser = |s: &str| limits::STALL_TIMEOUT.parse(s))]
    pub(crate) stall_timeout: Option<Duration>,
    /// How long to wait for a server that stopped responding before the run stops as failed [default: 5m].
    #[arg(long, help_heading = heading::ADVANCED, value_parser = |s: &str| limits::SERVER_WAIT.parse(s))]
    pub(crate) server_wait: Option<Duration>,
    /// Window of the hidden C=1 warm-up cell before the matrix (0 skips it) [default: 3s; 0s in the
    /// demo].
    #[arg(long, help_heading = heading::ADVANCED, value_parser = |s: &str| limits::WARMUP.parse(s))]
    pub(crate) warmup: Option<Duration>,
    #[command(flatten, next_help_heading = heading::ADVANCED)]
    pub(crate) ranks: crate::rank_args::RankArgs,
}

/// `--api`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum ApiFlag {
    Chat,
    Completions,
}

impl From<ApiFlag> for Api {
    fn from(f: ApiFlag) -> Api {
        match f {
            ApiFlag::Chat => Api::Chat,
            ApiFlag::Completions => Api::Completions,
        }
    }
}

/// `--thinking`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum ThinkingFlag {
    On,
    Off,
}

impl From<ThinkingFlag> for ThinkingMode {
    fn from(f: ThinkingFlag) -> ThinkingMode {
        match f {
            ThinkingFlag::On => ThinkingMode::On,
            ThinkingFlag::Off => ThinkingMode::Off,
        }
    }
}

/// `--reasoning-effort`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum EffortFlag {
    Low,
    Medium,
    High,
}

impl From<EffortFlag> for ReasoningEffort {
    fn from(f: EffortFlag) -> ReasoningEffort {
        match f {
            EffortFlag::Low => ReasoningEffort::Low,
            EffortFlag::Medium => ReasoningEffort::Medium,
            EffortFlag::High => ReasoningEffort::High,
        }
    }
}

/// `--progress`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum Progress {
    Auto,
    Dashboard,
    Plain,
    Quiet,
}

/// A parsed `8k,16k` list (a newtype so clap treats it as one value).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct TokenList(pub(crate) Vec<Tokens>);
/// A parsed `1,2,4` list.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct CountList(pub(crate) Vec<u32>);

fn token_list(text: &str, limit: limits::CountLimit) -> Result<TokenList, String> {
    let values = split_list(text).map(sm_core::units::parse_tokens).collect::<Result<Vec<_>, _>>();
    let values = values.map_err(|e| e.to_string())?;
    limit.check_list(values.iter().map(|t| t.0))?;
    Ok(TokenList(values))
}
fn contexts(text: &str) -> Result<TokenList, String> {
    token_list(text, limits::CONTEXT)
}
fn prefill_contexts(text: &str) -> Result<TokenList, String> {
    token_list(text, limits::PREFILL_CONTEXT)
}
fn concurrency(text: &str) -> Result<CountList, String> {
    let values = split_list(text).map(|s| limits::CONCURRENCY.parse_u32(s)).collect::<Result<Vec<_>, _>>()?;
    limits::CONCURRENCY.check_list(values.iter().map(|&n| u64::from(n)))?;
    Ok(CountList(values))
}
fn split_list(text: &str) -> impl Iterator<Item = &str> {
    text.split(',').map(str::trim).filter(|s| !s.is_empty())
}

pub(crate) const K: u64 = 1024;

/// `--cost-per-hour`: a positive price, USD per hour.
fn precision(s: &str) -> Result<f64, String> {
    let v: f64 = s.trim().trim_end_matches('%').trim().parse().map_err(|_| {
        format!("'{s}' is not a precision: give the half-width of the 95 % interval in percent, e.g. 1%")
    })?;
    if !(v.is_finite() && (0.1..=50.0).contains(&v)) {
        return Err(format!("'{s}': the precision must be between 0.1% and 50%"));
    }
    Ok(v)
}

fn cost_per_hour(s: &str) -> Result<f64, String> {
    let v: f64 = s
        .trim()
        .trim_start_matches('$')
        .parse()
        .map_err(|_| format!("'{s}' is not a price: give the server's cost in USD per hour, e.g. 7.5"))?;
    if !(v.is_finite() && v > 0.0 && v <= 1e6) {
        return Err(format!("'{s}': the price must be more than 0 and at most 1,000,000 USD per hour"));
    }
    Ok(v)
}
