//! The settings of `speedmatrix run`, resolved once. Each source of settings is a [`Layer`]: the
//! flags, the run being resumed (its run.json), the built-in engine's demo matrix. They are merged
//! field by field, the first that has a value winning, over the defaults; the result,
//! [`Settings`], is what the run works from, and nothing changes it afterwards.

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context, Result};
use sm_bench::RUN_FILE;
use sm_core::Tokens;
use sm_core::capacity::CapacityRule;
use sm_core::record::{Api, PlanKind, PromptSource, RunRecord};
use sm_core::slo::Slo;

use crate::limits;
use crate::run_args::{self as flags, K, Progress, RunArgs};

/// The profile the built-in simulated engine uses when no --url is given.
pub const DEMO_PROFILE: &str = "seed-ling-3.0-flash-h200nvl-x2";
pub use sm_core::engine::SIM_PROFILE_KEY;
/// What a built-in engine's recorded launch command starts with; records written before the
/// profile was kept in `server.extra` are recognised by it.
const SIM_LAUNCH: &str = "speedmatrix sim --profile ";

/// The settings one source gives; `None` where it says nothing.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct Layer {
    pub contexts: Option<Vec<Tokens>>,
    pub concurrency: Option<Vec<u32>>,
    pub duration: Option<Duration>,
    pub max_tokens: Option<Tokens>,
    pub prefill_contexts: Option<Vec<Tokens>>,
    pub prefill_at_max: Option<bool>,
    pub api: Option<Api>,
    pub capacity_rule: Option<CapacityRule>,
    pub ready_stable: Option<Duration>,
    pub ready_timeout: Option<Duration>,
    pub stall_timeout: Option<Duration>,
    pub server_wait: Option<Duration>,
    pub warmup: Option<Duration>,
    pub model: Option<String>,
    pub label: Option<String>,
    pub slo: Option<Slo>,
    pub cost_per_hour: Option<f64>,
    pub find_capacity: Option<bool>,
    pub precision: Option<f64>,
    pub min_duration: Option<Duration>,
    pub repeats: Option<u32>,
    pub save_requests: Option<bool>,
    /// `--metrics-interval`; zero is off.
    pub metrics_interval: Option<Duration>,
}

impl Layer {
    /// Field by field, `self` where it has a value, else `lower`.
    pub(crate) fn or(self, lower: Layer) -> Layer {
        Layer {
            contexts: self.contexts.or(lower.contexts),
            concurrency: self.concurrency.or(lower.concurrency),
            duration: self.duration.or(lower.duration),
            max_tokens: self.max_tokens.or(lower.max_tokens),
            prefill_contexts: self.prefill_contexts.or(lower.prefill_contexts),
            prefill_at_max: self.prefill_at_max.or(lower.prefill_at_max),
            api: self.api.or(lower.api),
            capacity_rule: self.capacity_rule.or(lower.capacity_rule),
            ready_stable: self.ready_stable.or(lower.ready_stable),
            ready_timeout: self.ready_timeout.or(lower.ready_timeout),
            stall_timeout: self.stall_timeout.or(lower.stall_timeout),
            server_wait: self.server_wait.or(lower.server_wait),
            warmup: self.warmup.or(lower.warmup),
            model: self.model.or(lower.model),
            label: self.label.or(lower.label),
            slo: self.slo.or(lower.slo),
            cost_per_hour: self.cost_per_hour.or(lower.cost_per_hour),
            find_capacity: self.find_capacity.or(lower.find_capacity),
            precision: self.precision.or(lower.precision),
            min_duration: self.min_duration.or(lower.min_duration),
            repeats: self.repeats.or(lower.repeats),
            save_requests: self.save_requests.or(lower.save_requests),
            metrics_interval: self.metrics_interval.or(lower.metrics_interval),
        }
    }

    /// Whether the source chose the matrix's shape (then the demo's short matrix is not used).
    fn has_matrix(&self) -> bool {
        self.contexts.is_some() || self.concurrency.is_some() || self.duration.is_some()
    }

    /// The flags given on the command line.
    pub(crate) fn from_flags(args: &RunArgs) -> Layer {
        Layer {
            contexts: args.contexts.clone().map(|l| l.0),
            concurrency: args.concurrency.clone().map(|l| l.0),
            duration: args.duration,
            max_tokens: args.max_tokens,
            prefill_contexts: args.prefill_contexts.clone().map(|l| l.0),
            prefill_at_max: args.no_prefill_at_max.then_some(false),
            api: args.api.map(Api::from),
            capacity_rule: args.capacity_rule,
            ready_stable: args.ready_stable,
            ready_timeout: args.ready_timeout,
            stall_timeout: args.stall_timeout,
            server_wait: args.server_wait,
            warmup: args.warmup,
            model: args.model.clone(),
            label: args.label.clone(),
            slo: args.slo.clone(),
            cost_per_hour: args.cost_per_hour,
            find_capacity: args.find_capacity.then_some(true),
            precision: args.precision,
            min_duration: args.min_duration,
            repeats: args.repeats,
            save_requests: args.save_requests.then_some(true),
            metrics_interval: args.metrics_interval,
        }
    }

    /// What an interrupted run recorded. Its matrix is planned again from what its user asked for
    /// (256K, not the 257,984 it was fitted to), so rows keep their names; its prefill rows already
    /// include the one at the maximum, so that row is not added again.
    pub(crate) fn from_record(old: &RunRecord, path: &Path) -> Result<Layer> {
        let s = &old.settings;
        let mml = old.server.max_model_len.map(Tokens);
        let asked = |kind, list: &[u64], out| {
            list.iter().map(|&c| sm_core::plan::planned_request(&old.plan, kind, c, out, mml)).collect::<Vec<_>>()
        };
        let window = Duration::try_from_secs_f64(s.duration_s).ok().with_context(|| {
            format!("cannot resume: {} has no valid window ({} s); pass --duration", path.display(), s.duration_s)
        })?;
        // a record written before the timings were kept has none: the defaults apply
        let secs = |v: Option<f64>| v.and_then(|s| Duration::try_from_secs_f64(s).ok());
        let t = &s.timing;
        Ok(Layer {
            contexts: Some(asked(PlanKind::Decode, &s.contexts, Tokens(s.max_tokens))),
            concurrency: Some(s.concurrency.clone()),
            duration: Some(window),
            max_tokens: Some(Tokens(s.max_tokens)),
            prefill_contexts: Some(asked(PlanKind::Prefill, &s.prefill_contexts, Tokens(1))),
            prefill_at_max: Some(false),
            api: Some(s.api),
            capacity_rule: Some(s.capacity_rule),
            ready_stable: secs(t.ready_stable_s),
            ready_timeout: secs(t.ready_timeout_s),
            stall_timeout: secs(t.stall_timeout_s),
            server_wait: secs(t.server_wait_s),
            warmup: secs(t.warmup_s),
            model: Some(old.server.model.clone()),
            label: old.label.clone(),
            slo: s.slo.clone(),
            cost_per_hour: s.cost_per_hour_usd,
            find_capacity: s.find_capacity.then_some(true),
            precision: s.precision_pct,
            min_duration: secs(s.min_duration_s),
            repeats: s.repeats,
            save_requests: s.save_requests.then_some(true),
            metrics_interval: secs(t.metrics_interval_s),
        })
    }

    /// The built-in engine's demo: short enough to finish in about two minutes, and wide enough to
    /// show an over-capacity cell.
    fn demo(profile: &str) -> Layer {
        Layer {
            contexts: Some(vec![Tokens(8 * K), Tokens(64 * K), Tokens(256 * K)]),
            concurrency: Some(vec![1, 16, 64]),
            duration: Some(Duration::from_secs(5)),
            ready_stable: Some(Duration::from_secs(1)),
            warmup: Some(Duration::ZERO),
            ..Layer::demo_label(profile)
        }
    }

    fn demo_label(profile: &str) -> Layer {
        Layer { label: Some(format!("simulated engine, profile {profile}")), ..Layer::default() }
    }

    /// Every value in its range and the ones that depend on each other consistent: clap checked
    /// the flags given, this also covers what a resume took from run.json.
    pub(crate) fn validate(&self) -> Result<(), String> {
        use limits::*;
        if let Some(c) = &self.contexts {
            CONTEXT.check_list_flag(c.iter().map(|t| t.0))?;
        }
        // a run may have no extra prefill rows
        if let Some(c) = self.prefill_contexts.as_ref().filter(|c| !c.is_empty()) {
            PREFILL_CONTEXT.check_list_flag(c.iter().map(|t| t.0))?;
        }
        if let Some(c) = &self.concurrency {
            CONCURRENCY.check_list_flag(c.iter().map(|&n| u64::from(n)))?;
        }
        let durations = [
            (DURATION, self.duration),
            (STALL_TIMEOUT, self.stall_timeout),
            (READY_STABLE, self.ready_stable),
            (READY_TIMEOUT, self.ready_timeout),
            (SERVER_WAIT, self.server_wait),
            (WARMUP, self.warmup),
            (MIN_DURATION, self.min_duration),
        ];
        for (limit, value) in durations {
            value.map_or(Ok(()), |v| limit.check_flag(v))?;
        }
        if let Some(t) = self.max_tokens {
            MAX_TOKENS.check_flag(t.0)?;
        }
        if let Some(n) = self.repeats {
            REPEATS.check_flag(u64::from(n))?;
        }
        if let (Some(min), Some(_)) = (self.min_duration, self.precision) {
            let max = self.duration.unwrap_or(flags::DEFAULT_DURATION);
            if min > max {
                return Err(format!(
                    "--min-duration {} is longer than --duration {}: with --precision, --duration is the longest window",
                    show(min),
                    show(max)
                ));
            }
        }
        check_readiness(
            self.ready_stable.unwrap_or(flags::DEFAULT_READY_STABLE),
            self.ready_timeout.unwrap_or(flags::DEFAULT_READY_TIMEOUT),
        )
    }
}

/// The server the run measures.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Engine {
    /// A server at a URL (`--url`, or the URL a resumed run recorded).
    Server { url: String },
    /// The built-in simulated engine, started by the run; `port` is the one a resumed run used.
    Demo { profile: String, port: Option<u16>, demo_matrix: bool },
}

/// Where the run's files go.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Output {
    /// `results/<UTC time>-<model>/`, named once the model is known.
    Default,
    /// `--out DIR`; with `force`, a run already there is replaced.
    New { dir: PathBuf, force: bool },
    /// `--resume DIR`: the run there is continued.
    Resume { dir: PathBuf, retry_failed: bool },
}

/// Everything `speedmatrix run` works from, resolved once.
#[derive(Debug)]
pub(crate) struct Settings {
    pub engine: Engine,
    pub output: Output,
    pub api_key: Option<String>,
    /// `--model`, or the model a resumed run measured.
    pub model: Option<String>,
    /// The model was named by the user, not taken from a resumed run.
    pub model_from_user: bool,
    pub tokenizer: Option<PathBuf>,
    pub contexts: Vec<Tokens>,
    pub concurrency: Vec<u32>,
    pub duration: Duration,
    pub max_tokens: Tokens,
    pub prefill_contexts: Vec<Tokens>,
    pub prefill_at_max: bool,
    pub api: Api,
    pub capacity_rule: CapacityRule,
    pub ready_stable: Duration,
    pub ready_timeout: Duration,
    pub stall_timeout: Duration,
    pub server_wait: Duration,
    pub warmup: Duration,
    pub label: Option<String>,
    pub slo: Slo,
    pub cost_per_hour: Option<f64>,
    pub find_capacity: bool,
    /// `--precision` with `--min-duration`: adaptive windows.
    pub precision: Option<(f64, Duration)>,
    pub repeats: u32,
    pub save_requests: bool,
    /// `--metrics-interval`; zero turns the server's series off.
    pub metrics_interval: Duration,
    /// `--gpu-metrics`, or the source a resumed run recorded.
    pub gpu_metrics: crate::gpu_args::GpuMetrics,
    pub kv_budget: Option<Tokens>,
    pub max_num_seqs: Option<u32>,
    pub max_model_len: Option<Tokens>,
    pub launch_command: Option<String>,
    pub gpu: Option<(String, u32)>,
    pub dry_run: bool,
    pub progress: Progress,
    /// The record of the run to continue (`--resume`).
    pub resumed: Option<RunRecord>,
    /// Whether the decode matrix runs, and the load phases (issue 17) with their settings.
    pub phases: sm_bench::PhaseConfig,
    /// `--rank R --ranks N` (or a launcher's variables): this process's place in a run of several.
    pub ranks: Option<crate::rank_args::Ranks>,
    /// What the user should know before the run starts: flags given that nothing asked for uses.
    pub warnings: Vec<String>,
}

impl Settings {
    /// Flags, over the resumed run's settings, over the demo matrix (the built-in engine and no
    /// matrix chosen), over the defaults.
    pub(crate) fn resolve(args: RunArgs) -> Result<Settings> {
        // clap's `requires` does not fire for a plain bool flag
        anyhow::ensure!(
            !args.retry_failed || args.resume.is_some(),
            "--retry-failed works with --resume DIR: it measures again the failed cells of the run in DIR"
        );
        let resumed = args.resume.as_deref().map(read_record).transpose()?;
        if let Some(old) = &resumed
            && old.settings.prompt_source == PromptSource::TokenizerFile
            && args.tokenizer.is_none()
        {
            anyhow::bail!(
                "cannot resume: this run sized its prompts with a local tokenizer; pass the same --tokenizer PATH again"
            );
        }
        let given = Layer::from_flags(&args);
        let model_from_user = given.model.is_some();
        let recorded = match (&resumed, &args.resume) {
            (Some(old), Some(dir)) => Layer::from_record(old, &dir.join(RUN_FILE))?,
            _ => Layer::default(),
        };
        let chosen = given.or(recorded);
        let engine = engine(&args, resumed.as_ref(), chosen.has_matrix());
        let layer = match &engine {
            Engine::Demo { profile, demo_matrix: true, .. } => chosen.or(Layer::demo(profile)),
            Engine::Demo { profile, .. } => chosen.or(Layer::demo_label(profile)),
            Engine::Server { .. } => chosen,
        };
        layer.validate().map_err(anyhow::Error::msg).with_context(|| match &args.resume {
            Some(dir) => {
                format!("cannot resume {}: a setting (from its run.json or a flag) is out of range", dir.display())
            }
            None => "a setting is out of range".to_string(),
        })?;
        let phases = args.phases.resolve(resumed.as_ref())?;
        let warnings = crate::phase_args::unused(matrix_flags(&args), &phases);
        let ranks = crate::rank_args::resolve(&args.ranks, &|k| std::env::var(k).ok()).map_err(anyhow::Error::msg)?;
        if let Some(r) = &ranks {
            let server = matches!(engine, Engine::Server { .. });
            crate::rank_args::fits(r, server, &phases).map_err(anyhow::Error::msg)?;
        }
        let gpu_metrics = gpu_metrics(&args, resumed.as_ref())?;
        let output = match (args.resume, args.out) {
            (Some(dir), _) => Output::Resume { dir, retry_failed: args.retry_failed },
            (None, Some(dir)) => Output::New { dir, force: args.force },
            (None, None) => Output::Default,
        };
        Ok(Settings {
            engine,
            output,
            api_key: args.api_key,
            model: layer.model,
            model_from_user,
            tokenizer: args.tokenizer,
            contexts: layer.contexts.unwrap_or_else(flags::default_contexts),
            concurrency: layer.concurrency.unwrap_or_else(flags::default_concurrency),
            duration: layer.duration.unwrap_or(flags::DEFAULT_DURATION),
            max_tokens: layer.max_tokens.unwrap_or(flags::DEFAULT_MAX_TOKENS),
            prefill_contexts: layer.prefill_contexts.unwrap_or_default(),
            prefill_at_max: layer.prefill_at_max.unwrap_or(true),
            api: layer.api.unwrap_or(Api::Chat),
            capacity_rule: layer.capacity_rule.unwrap_or(CapacityRule::Reference),
            ready_stable: layer.ready_stable.unwrap_or(flags::DEFAULT_READY_STABLE),
            ready_timeout: layer.ready_timeout.unwrap_or(flags::DEFAULT_READY_TIMEOUT),
            stall_timeout: layer.stall_timeout.unwrap_or(flags::DEFAULT_STALL_TIMEOUT),
            server_wait: layer.server_wait.unwrap_or(flags::DEFAULT_SERVER_WAIT),
            warmup: layer.warmup.unwrap_or(flags::DEFAULT_WARMUP),
            label: layer.label,
            slo: layer.slo.unwrap_or_default(),
            cost_per_hour: layer.cost_per_hour,
            find_capacity: layer.find_capacity.unwrap_or(false),
            precision: layer.precision.map(|p| {
                let longest = layer.duration.unwrap_or(flags::DEFAULT_DURATION);
                (p, layer.min_duration.unwrap_or(flags::DEFAULT_MIN_DURATION).min(longest))
            }),
            repeats: layer.repeats.unwrap_or(1),
            save_requests: layer.save_requests.unwrap_or(false),
            phases,
            metrics_interval: layer.metrics_interval.unwrap_or(flags::DEFAULT_METRICS_INTERVAL),
            gpu_metrics,
            kv_budget: args.kv_budget,
            max_num_seqs: args.max_num_seqs,
            max_model_len: args.max_model_len,
            launch_command: args.launch_command,
            gpu: args.gpu.zip(args.gpu_count),
            dry_run: args.dry_run,
            progress: if args.quiet { Progress::Quiet } else { args.progress },
            resumed,
            ranks,
            warnings,
        })
    }

    pub(crate) fn quiet(&self) -> bool {
        self.progress == Progress::Quiet
    }
}

/// Which of the decode matrix's flags were given on the command line.
fn matrix_flags(args: &RunArgs) -> crate::phase_args::MatrixFlags {
    crate::phase_args::MatrixFlags {
        contexts: args.contexts.as_ref().map(|l| l.0.len()),
        concurrency: args.concurrency.is_some(),
        duration: args.duration.is_some(),
        prefill_contexts: args.prefill_contexts.is_some(),
        warmup: args.warmup.is_some(),
        find_capacity: args.find_capacity,
        precision: args.precision.is_some(),
        repeats: args.repeats.is_some(),
    }
}

/// `--gpu-metrics`; else the source the resumed run recorded (a record before 1.4 has none: the
/// default); else the default, NVML where it fits.
fn gpu_metrics(args: &RunArgs, resumed: Option<&RunRecord>) -> Result<crate::gpu_args::GpuMetrics> {
    use crate::gpu_args::GpuMetrics;
    match (&args.gpu_metrics, resumed.and_then(|r| r.settings.gpu_metrics.as_deref())) {
        (Some(g), _) => Ok(g.clone()),
        (None, Some(text)) => GpuMetrics::from_recorded(text).map_err(anyhow::Error::msg),
        (None, None) => Ok(GpuMetrics::Auto),
    }
}

pub(crate) fn read_record(dir: &Path) -> Result<RunRecord> {
    let path = dir.join(RUN_FILE);
    let text = std::fs::read_to_string(&path).with_context(|| {
        format!("cannot resume: cannot read {} (is DIR the output directory of a run?)", path.display())
    })?;
    serde_json::from_str(&text).with_context(|| format!("cannot resume: {} is not a speedmatrix run", path.display()))
}

/// `--url`; else the resumed run's server, or its built-in engine on the port it used; else the
/// built-in engine. The demo matrix applies to a built-in engine whose matrix nobody chose.
fn engine(args: &RunArgs, resumed: Option<&RunRecord>, matrix_chosen: bool) -> Engine {
    if let Some(url) = &args.url {
        return Engine::Server { url: url.clone() };
    }
    match resumed {
        Some(old) => match recorded_profile(old) {
            Some(profile) => Engine::Demo { profile, port: local_port(&old.server.url), demo_matrix: false },
            None => Engine::Server { url: old.server.url.clone() },
        },
        None => Engine::Demo {
            profile: args.sim_profile.clone().unwrap_or_else(|| DEMO_PROFILE.to_string()),
            port: None,
            demo_matrix: !matrix_chosen,
        },
    }
}

/// The built-in engine's profile a run recorded; `None` when it measured another server.
pub(crate) fn recorded_profile(old: &RunRecord) -> Option<String> {
    if let Some(name) = old.server.extra.get(SIM_PROFILE_KEY).and_then(|v| v.as_str()) {
        return Some(name.to_string());
    }
    let rest = old.launch_command.as_deref()?.strip_prefix(SIM_LAUNCH)?;
    rest.split_whitespace().next().map(str::to_string)
}

/// The port of a URL that points at this host.
pub(crate) fn local_port(base: &str) -> Option<u16> {
    let rest = base.split_once("://")?.1;
    let hostport = rest.split('/').next()?;
    let (host, port) = hostport.rsplit_once(':')?;
    let local = matches!(host, "127.0.0.1" | "localhost" | "[::1]" | "0.0.0.0") || host.starts_with("127.");
    local.then(|| port.parse().ok()).flatten()
}

#[cfg(test)]
mod tests;
