//! The flags of `speedmatrix run`, their defaults, and the settings a resume takes from run.json.
//! Every numeric value is checked against its range in [`crate::limits`]: by clap as it parses a
//! flag, and by [`RunArgs::validate`] once a resume has filled in the rest.

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context, Result};
use sm_bench::journal::RUN_FILE;
use sm_core::Tokens;
use sm_core::capacity::CapacityRule;
use sm_core::record::{Api, PlanKind, PromptSource, RunRecord};

use crate::limits;

/// The profile the built-in simulated engine uses when no --url is given.
pub const DEMO_PROFILE: &str = "seed-ling-3.0-flash-h200nvl-x2";

#[derive(Debug, clap::Args)]
pub struct RunArgs {
    /// Base URL of an OpenAI-compatible server, e.g. http://127.0.0.1:8000. Without it, the built-in
    /// simulated engine is started and measured with a short demo matrix.
    #[arg(long)]
    pub(crate) url: Option<String>,
    /// API key sent as a bearer token. Never written to any file.
    #[arg(long, env = "OPENAI_API_KEY", hide_env_values = true)]
    pub(crate) api_key: Option<String>,
    /// Model id to measure (default: the first one the server lists).
    #[arg(long)]
    pub(crate) model: Option<String>,
    /// Decode contexts, e.g. 8k,16k,32k (k = 1,024 tokens). Contexts that do not fit the model are trimmed or skipped.
    #[arg(long, value_parser = contexts)]
    pub(crate) contexts: Option<TokenList>,
    /// Concurrency levels, e.g. 1,2,4,8.
    #[arg(long, value_parser = concurrency)]
    pub(crate) concurrency: Option<CountList>,
    /// Length of each cell's measurement window, e.g. 30s or 2m.
    #[arg(long, value_parser = |s: &str| limits::DURATION.parse(s))]
    pub(crate) duration: Option<Duration>,
    /// Output tokens per decode request (max_tokens).
    #[arg(long, value_parser = |s: &str| limits::MAX_TOKENS.parse_tokens(s))]
    pub(crate) max_tokens: Option<Tokens>,
    /// Extra prefill-only contexts, e.g. 256k (every decode context gets a prefill row anyway).
    #[arg(long, value_parser = prefill_contexts)]
    pub(crate) prefill_contexts: Option<TokenList>,
    /// Do not add the largest context that fits max_tokens 1 as a prefill row.
    #[arg(long)]
    pub(crate) no_prefill_at_max: bool,
    /// Output directory (default: results/<UTC time>-<model>/). A directory that holds a run
    /// already is refused: continue that run with --resume DIR, or pass --force to overwrite it.
    #[arg(long)]
    pub(crate) out: Option<PathBuf>,
    /// With --out: overwrite the run that DIR holds (its run.json and reports) instead of refusing.
    #[arg(long, requires = "out")]
    pub(crate) force: bool,
    /// API form: chat (/v1/chat/completions) or completions (/v1/completions).
    #[arg(long, value_parser = ["chat", "completions"], default_value = "chat")]
    pub(crate) api: String,
    /// A local tokenizer.json (or a model directory that has one) to size prompts exactly when the
    /// server has no /tokenize (hosted APIs). Read from disk, never downloaded.
    #[arg(long, value_name = "PATH")]
    pub(crate) tokenizer: Option<PathBuf>,
    /// KV cache budget in tokens; overrides what the server reports.
    #[arg(long, value_parser = |s: &str| limits::KV_BUDGET.parse_tokens(s))]
    pub(crate) kv_budget: Option<Tokens>,
    /// Maximum concurrent sequences of the server; overrides what is discovered.
    #[arg(long, value_parser = |s: &str| limits::MAX_NUM_SEQS.parse_u32(s))]
    pub(crate) max_num_seqs: Option<u32>,
    /// The model's context limit; overrides what the server reports.
    #[arg(long, value_parser = |s: &str| limits::MAX_MODEL_LEN.parse_tokens(s))]
    pub(crate) max_model_len: Option<Tokens>,
    /// Over-capacity rule: reference (C × (ctx + max_tokens)) or prefix-shared.
    #[arg(long, default_value = "reference")]
    pub(crate) capacity_rule: CapacityRule,
    /// The server's launch command, for the record (secrets are redacted).
    #[arg(long)]
    pub(crate) launch_command: Option<String>,
    /// GPU name for the record, when nvidia-smi is not on this host.
    #[arg(long, requires = "gpu_count")]
    pub(crate) gpu: Option<String>,
    /// Number of GPUs, with --gpu.
    #[arg(long, requires = "gpu", value_parser = |s: &str| limits::GPU_COUNT.parse_u32(s))]
    pub(crate) gpu_count: Option<u32>,
    /// A label for this run.
    #[arg(long)]
    pub(crate) label: Option<String>,
    /// Discover and plan only: print the plan and write run.json with status "planned".
    #[arg(long)]
    pub(crate) dry_run: bool,
    // The timing flags have no clap default so that a resume can tell a flag given from one to
    // take from run.json; their defaults are the DEFAULT_* constants below.
    /// How long readiness must hold before the window opens [default: 3s].
    #[arg(long, value_parser = |s: &str| limits::READY_STABLE.parse(s))]
    pub(crate) ready_stable: Option<Duration>,
    /// Longest wait for readiness before the window opens anyway (with a warning) [default: 180s].
    #[arg(long, value_parser = |s: &str| limits::READY_TIMEOUT.parse(s))]
    pub(crate) ready_timeout: Option<Duration>,
    /// A stream that sends nothing for this long between two tokens is an error (before its first
    /// token a stream may wait up to --ready-timeout) [default: 15s].
    #[arg(long, value_parser = |s: &str| limits::STALL_TIMEOUT.parse(s))]
    pub(crate) stall_timeout: Option<Duration>,
    /// How long to wait for a server that stopped responding before the run stops as failed [default: 5m].
    #[arg(long, value_parser = |s: &str| limits::SERVER_WAIT.parse(s))]
    pub(crate) server_wait: Option<Duration>,
    /// Window of the hidden C=1 warm-up cell before the matrix (0 skips it) [default: 3s].
    #[arg(long, value_parser = |s: &str| limits::WARMUP.parse(s))]
    pub(crate) warmup: Option<Duration>,
    /// Simulated-engine profile used when no --url is given.
    #[arg(long, default_value = DEMO_PROFILE)]
    pub(crate) sim_profile: String,
    /// Continue the interrupted run in DIR: finished cells are kept, the rest is measured. Flags not
    /// given are taken from DIR/run.json.
    #[arg(long, value_name = "DIR", conflicts_with_all = ["out", "dry_run"])]
    pub(crate) resume: Option<PathBuf>,
    /// With --resume: measure again the cells that ended error, loop or skipped, and the prefill
    /// rows that failed (e.g. after a transient server fault). Over-capacity cells stay as planned.
    #[arg(long)]
    pub(crate) retry_failed: bool,
    /// Progress display: auto (the dashboard on a terminal, else plain), dashboard, plain (one line
    /// per event), quiet (only the summary).
    #[arg(long, value_parser = ["auto", "dashboard", "plain", "quiet"], default_value = "auto")]
    pub(crate) progress: String,
    /// Print only the final summary (and warnings): the same as --progress quiet.
    #[arg(short, long)]
    pub(crate) quiet: bool,
}

impl RunArgs {
    pub(crate) fn quiet(&self) -> bool {
        self.quiet || self.progress == "quiet"
    }

    /// Every numeric setting in its range, and the ones that depend on each other consistent.
    /// For the values a resume took from run.json (clap checked the flags given).
    pub(crate) fn validate(&self) -> Result<(), String> {
        use limits::*;
        let tokens = |l: &Option<TokenList>| l.iter().flat_map(|l| l.0.iter().map(|t| t.0)).collect::<Vec<_>>();
        if self.contexts.is_some() {
            CONTEXT.check_list_flag(tokens(&self.contexts))?;
        }
        // a run may have no extra prefill rows
        if self.prefill_contexts.as_ref().is_some_and(|l| !l.0.is_empty()) {
            PREFILL_CONTEXT.check_list_flag(tokens(&self.prefill_contexts))?;
        }
        if let Some(c) = &self.concurrency {
            CONCURRENCY.check_list_flag(c.0.iter().map(|&n| u64::from(n)))?;
        }
        let durations = [
            (DURATION, self.duration),
            (STALL_TIMEOUT, self.stall_timeout),
            (READY_STABLE, self.ready_stable),
            (READY_TIMEOUT, self.ready_timeout),
            (SERVER_WAIT, self.server_wait),
            (WARMUP, self.warmup),
        ];
        for (limit, value) in durations {
            value.map_or(Ok(()), |v| limit.check_flag(v))?;
        }
        let counts = [
            (MAX_TOKENS, self.max_tokens.map(|t| t.0)),
            (KV_BUDGET, self.kv_budget.map(|t| t.0)),
            (MAX_MODEL_LEN, self.max_model_len.map(|t| t.0)),
            (MAX_NUM_SEQS, self.max_num_seqs.map(u64::from)),
            (GPU_COUNT, self.gpu_count.map(u64::from)),
        ];
        for (limit, value) in counts {
            value.map_or(Ok(()), |v| limit.check_flag(v))?;
        }
        check_readiness(
            self.ready_stable.unwrap_or(DEFAULT_READY_STABLE),
            self.ready_timeout.unwrap_or(DEFAULT_READY_TIMEOUT),
        )
    }
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

pub(crate) const DEFAULT_READY_STABLE: Duration = Duration::from_secs(3);
pub(crate) const DEFAULT_READY_TIMEOUT: Duration = Duration::from_secs(180);
pub(crate) const DEFAULT_STALL_TIMEOUT: Duration = Duration::from_secs(15);
pub(crate) const DEFAULT_SERVER_WAIT: Duration = Duration::from_secs(300);
pub(crate) const DEFAULT_WARMUP: Duration = Duration::from_secs(3);

/// The published matrix: 8K…256K × 1…128, 30 s windows, 4,096 output tokens.
pub(crate) fn default_contexts() -> Vec<Tokens> {
    [8, 16, 32, 64, 128, 256].iter().map(|k| Tokens(k * K)).collect()
}
pub(crate) fn default_concurrency() -> Vec<u32> {
    vec![1, 2, 4, 8, 16, 32, 64, 128]
}

/// Reads the run to resume and fills every flag the user did not give from it.
pub(crate) fn load_resume(dir: &Path, args: &mut RunArgs) -> Result<RunRecord> {
    let path = dir.join(RUN_FILE);
    let text = std::fs::read_to_string(&path).with_context(|| {
        format!("cannot resume: cannot read {} (is DIR the output directory of a run?)", path.display())
    })?;
    let old: RunRecord = serde_json::from_str(&text)
        .with_context(|| format!("cannot resume: {} is not a speedmatrix run", path.display()))?;
    let simulated = old.launch_command.as_deref().is_some_and(|c| c.starts_with("speedmatrix sim"));
    if args.url.is_none() && !simulated {
        args.url = Some(old.server.url.clone());
    }
    if simulated && let Some(profile) = old.launch_command.as_deref().and_then(|c| c.split_whitespace().nth(3)) {
        args.sim_profile = profile.to_string();
    }
    let s = &old.settings;
    if s.prompt_source == PromptSource::TokenizerFile && args.tokenizer.is_none() {
        anyhow::bail!(
            "cannot resume: this run sized its prompts with a local tokenizer; pass the same --tokenizer PATH again"
        );
    }
    args.model.get_or_insert_with(|| old.server.model.clone());
    // plan again from what the user asked for (256K, not the 257,984 it was fitted to), so rows keep their names
    let mml = old.server.max_model_len.map(Tokens);
    let asked = |kind, list: &[u64], out| {
        TokenList(list.iter().map(|&c| sm_core::plan::planned_request(&old.plan, kind, c, out, mml)).collect())
    };
    args.contexts.get_or_insert_with(|| asked(PlanKind::Decode, &s.contexts, Tokens(s.max_tokens)));
    args.concurrency.get_or_insert_with(|| CountList(s.concurrency.clone()));
    if args.duration.is_none() {
        let window = Duration::try_from_secs_f64(s.duration_s).ok();
        args.duration = Some(window.with_context(|| {
            format!("cannot resume: {} has no valid window ({} s); pass --duration", path.display(), s.duration_s)
        })?);
    }
    args.max_tokens.get_or_insert(Tokens(s.max_tokens));
    args.prefill_contexts.get_or_insert_with(|| asked(PlanKind::Prefill, &s.prefill_contexts, Tokens(1)));
    args.no_prefill_at_max = true;
    args.api = if s.api == Api::Completions { "completions".into() } else { "chat".into() };
    args.capacity_rule = s.capacity_rule;
    // a record written before the timings were kept has none: the flags' defaults apply
    let secs = |v: Option<f64>| v.and_then(|s| Duration::try_from_secs_f64(s).ok());
    let t = &s.timing;
    args.warmup = args.warmup.or(secs(t.warmup_s));
    args.ready_stable = args.ready_stable.or(secs(t.ready_stable_s));
    args.ready_timeout = args.ready_timeout.or(secs(t.ready_timeout_s));
    args.stall_timeout = args.stall_timeout.or(secs(t.stall_timeout_s));
    args.server_wait = args.server_wait.or(secs(t.server_wait_s));
    if args.label.is_none() {
        args.label.clone_from(&old.label);
    }
    args.out = Some(dir.to_path_buf());
    Ok(old)
}
