//! The settings of `speedmatrix run`, resolved once. The flags are laid over the run being resumed
//! (its run.json, read once), or else over the built-in engine's demo matrix, or else over the
//! defaults ([`RunSettings::default`]); the result is checked as a whole and nothing changes it
//! afterwards. Two shapes, as ripgrep has: the flags as parsed ([`RunArgs`]) and what the run
//! works from ([`Settings`], whose [`RunSettings`] is what run.json's `settings` section records).

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context, Result};
use sm_bench::{Precision, RUN_FILE, RunSettings};
use sm_core::Tokens;
use sm_core::record::{PromptSource, RunRecord};
use sm_core::redact;
use sm_core::roofline_record::RecordedShape;

use crate::limits;
use crate::run_args::{K, Progress, RunArgs};

/// The profile the built-in simulated engine uses when no --url is given.
pub const DEMO_PROFILE: &str = "seed-ling-3.0-flash-h200nvl-x2";
pub use sm_core::engine::SIM_PROFILE_KEY;
/// What a built-in engine's recorded launch command starts with; records written before the
/// profile was kept in `server.extra` are recognised by it.
const SIM_LAUNCH: &str = "speedmatrix sim --profile ";

/// The built-in engine's demo: short enough to finish in about two minutes, and wide enough to
/// show an over-capacity cell.
fn demo(defaults: RunSettings) -> RunSettings {
    let mut s = RunSettings {
        contexts: vec![Tokens(8 * K), Tokens(64 * K), Tokens(256 * K)],
        concurrency: vec![1, 16, 64],
        warmup: None,
        ..defaults
    };
    s.timing.duration = Duration::from_secs(5);
    s.timing.ready_stable = Duration::from_secs(1);
    s
}

fn demo_label(profile: &str) -> String {
    format!("simulated engine, profile {profile}")
}

/// Lays the flags given over `s`, the settings of the run being resumed, the demo's or the
/// defaults. A flag that turns something off (`--warmup 0`, `--metrics-interval 0`) sets `None`.
fn lay_flags(args: &RunArgs, s: &mut RunSettings) -> Result<(), String> {
    let set = |to: &mut Duration, flag: Option<Duration>| *to = flag.unwrap_or(*to);
    if let Some(l) = &args.contexts {
        s.contexts = l.0.clone();
    }
    if let Some(l) = &args.concurrency {
        s.concurrency = l.0.clone();
    }
    if let Some(l) = &args.prefill_contexts {
        s.prefill_contexts = l.0.clone();
    }
    s.max_tokens = args.max_tokens.unwrap_or(s.max_tokens);
    s.prefill_at_max &= !args.no_prefill_at_max;
    s.api = args.api.map_or(s.api, Into::into);
    s.reasoning.thinking = args.thinking.map(Into::into).or(s.reasoning.thinking);
    s.reasoning.effort = args.reasoning_effort.map(Into::into).or(s.reasoning.effort);
    s.rule = args.capacity_rule.unwrap_or(s.rule);
    set(&mut s.timing.duration, args.duration);
    set(&mut s.timing.ready_stable, args.ready_stable);
    set(&mut s.timing.ready_timeout, args.ready_timeout);
    set(&mut s.timing.idle_timeout, args.stall_timeout);
    set(&mut s.server_wait, args.server_wait);
    let on = |d: Duration| Some(d).filter(|d| !d.is_zero());
    s.warmup = args.warmup.map_or(s.warmup, on);
    s.timing.metrics_interval = args.metrics_interval.map_or(s.timing.metrics_interval, on);
    if let Some(label) = &args.label {
        // a label is free text: a secret written into it is redacted like one in a launch command
        s.label = Some(redact::redact_command(label));
    }
    s.slo = args.slo.clone().unwrap_or_else(|| s.slo.clone());
    s.cost_per_hour = args.cost_per_hour.or(s.cost_per_hour);
    s.find_capacity |= args.find_capacity;
    s.repeats = args.repeats.unwrap_or(s.repeats);
    s.save_requests |= args.save_requests;
    s.timing.precision = precision(args, s)?;
    Ok(())
}

/// `--precision` with its shortest window: the flag's or the resumed run's; a shortest window
/// given (or recorded) must fit in the longest, the default one is cut to it.
fn precision(args: &RunArgs, s: &RunSettings) -> Result<Option<Precision>, String> {
    let recorded = s.timing.precision;
    let Some(pct) = args.precision.or(recorded.map(|p| p.pct)) else { return Ok(None) };
    let longest = s.timing.duration;
    let min_duration = match args.min_duration.or(recorded.map(|p| p.min_duration)) {
        Some(min) if min > longest => {
            return Err(format!(
                "--min-duration {} is longer than --duration {}: with --precision, --duration is the longest window",
                limits::show(min),
                limits::show(longest)
            ));
        }
        Some(min) => min,
        None => sm_bench::DEFAULT_MIN_DURATION.min(longest),
    };
    Ok(Some(Precision { pct, min_duration }))
}

/// Every value in its range and the ones that depend on each other consistent: clap checked the
/// flags given, this also covers what a resume took from run.json.
fn validate(s: &RunSettings) -> Result<(), String> {
    use limits::*;
    CONTEXT.check_list_flag(s.contexts.iter().map(|t| t.0))?;
    // a run may have no extra prefill rows
    if !s.prefill_contexts.is_empty() {
        PREFILL_CONTEXT.check_list_flag(s.prefill_contexts.iter().map(|t| t.0))?;
    }
    CONCURRENCY.check_list_flag(s.concurrency.iter().map(|&n| u64::from(n)))?;
    let t = &s.timing;
    let durations = [
        (DURATION, Some(t.duration)),
        (STALL_TIMEOUT, Some(t.idle_timeout)),
        (READY_STABLE, Some(t.ready_stable)),
        (READY_TIMEOUT, Some(t.ready_timeout)),
        (SERVER_WAIT, Some(s.server_wait)),
        (WARMUP, s.warmup),
        (METRICS_INTERVAL, t.metrics_interval),
        (MIN_DURATION, t.precision.map(|p| p.min_duration)),
    ];
    for (limit, value) in durations {
        value.map_or(Ok(()), |v| limit.check_flag(v))?;
    }
    MAX_TOKENS.check_flag(s.max_tokens.0)?;
    REPEATS.check_flag(u64::from(s.repeats))?;

    limits::check_readiness(t.ready_stable, t.ready_timeout)
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
    /// What the run is asked to measure and how; run.json's `settings` section.
    pub run: RunSettings,
    pub engine: Engine,
    pub output: Output,
    pub api_key: Option<String>,
    /// `--model`, or the model a resumed run measured.
    pub model: Option<String>,
    /// The model was named by the user, not taken from a resumed run.
    pub model_from_user: bool,
    pub tokenizer: Option<PathBuf>,
    /// `--gpu-metrics`, or the source a resumed run recorded.
    pub gpu_metrics: crate::gpu_args::GpuMetrics,
    /// `--model-config` or `--active-params …`, or the shape a resumed run was given: the new
    /// cells get theirs too.
    pub model_shape: Option<RecordedShape>,
    pub kv_budget: Option<Tokens>,
    pub max_num_seqs: Option<u32>,
    pub max_model_len: Option<Tokens>,
    pub launch_command: Option<String>,
    /// `--gpu NAME --gpu-count N`: the hardware the record names in place of nvidia-smi's.
    pub gpu: Option<(String, u32)>,
    /// `--gpu-count N`: the server's GPUs, what per-GPU figures divide by.
    pub gpu_count: Option<u32>,
    pub dry_run: bool,
    pub progress: Progress,
    /// The record of the run to continue (`--resume`).
    pub resumed: Option<RunRecord>,
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
        // read and checked first, so that a wrong --model-config fails before anything is measured
        let shape = args.roofline.shape()?;
        let resumed = args.resume.as_deref().map(read_record).transpose()?;
        if let Some(old) = &resumed
            && old.settings.prompt_source == PromptSource::TokenizerFile
            && args.tokenizer.is_none()
        {
            anyhow::bail!(
                "cannot resume: this run sized its prompts with a local tokenizer; pass the same --tokenizer PATH again"
            );
        }
        let engine = engine(&args, resumed.as_ref(), matrix_chosen(&args));
        let run = run_settings(&args, resumed.as_ref(), &engine)?;
        let warnings = crate::phase_args::unused(matrix_flags(&args), &run.phases);
        let ranks = crate::rank_args::resolve(&args.ranks, &|k| std::env::var(k).ok()).map_err(anyhow::Error::msg)?;
        if let Some(r) = &ranks {
            let server = matches!(engine, Engine::Server { .. });
            crate::rank_args::fits(r, server, &run.phases).map_err(anyhow::Error::msg)?;
        }
        let gpu_metrics = gpu_metrics(&args, resumed.as_ref())?;
        let output = match (args.resume, args.out) {
            (Some(dir), _) => Output::Resume { dir, retry_failed: args.retry_failed },
            (None, Some(dir)) => Output::New { dir, force: args.force },
            (None, None) => Output::Default,
        };
        let model = args.model.clone().or_else(|| resumed.as_ref().map(|old| old.server.model.clone()));
        Ok(Settings {
            run: RunSettings { gpu_metrics: Some(gpu_metrics.recorded()), ..run },
            engine,
            output,
            api_key: args.api_key,
            model,
            model_from_user: args.model.is_some(),
            tokenizer: args.tokenizer,
            gpu_metrics,
            model_shape: shape.or_else(|| resumed.as_ref().and_then(|old| old.settings.model_shape.clone())),
            kv_budget: args.kv_budget,
            max_num_seqs: args.max_num_seqs,
            max_model_len: args.max_model_len,
            launch_command: args.launch_command,
            gpu: args.gpu.clone().zip(args.gpu_count),
            gpu_count: args.gpu_count,
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

/// The flags over what they lie on, checked as a whole, with the load phases resolved from the
/// flags and the resumed run's phase sections.
fn run_settings(args: &RunArgs, resumed: Option<&RunRecord>, engine: &Engine) -> Result<RunSettings> {
    let mut run = match (resumed, &args.resume) {
        (Some(old), Some(dir)) => RunSettings::from_record(old, RunSettings::default())
            .with_context(|| format!("cannot resume: {}", dir.join(RUN_FILE).display()))?,
        _ => match engine {
            Engine::Demo { demo_matrix: true, .. } => demo(RunSettings::default()),
            _ => RunSettings::default(),
        },
    };
    if let (None, Engine::Demo { profile, .. }) = (&run.label, engine) {
        run.label = Some(demo_label(profile));
    }
    lay_flags(args, &mut run).and_then(|()| validate(&run)).map_err(anyhow::Error::msg).with_context(|| match &args
        .resume
    {
        Some(dir) => {
            format!("cannot resume {}: a setting (from its run.json or a flag) is out of range", dir.display())
        }
        None => "a setting is out of range".to_string(),
    })?;
    anyhow::ensure!(
        run.api == sm_core::record::Api::Chat || run.reasoning == sm_client::openai::Reasoning::default(),
        "--thinking and --reasoning-effort are chat settings (the chat template reads them): use them with --api chat"
    );
    run.phases = args.phases.resolve(resumed, run.find_capacity)?;
    run.tools = crate::tools_args::resolve(args.tools.as_deref(), run.api, resumed)?;
    if let (None, Some(b)) = (&run.tools, run.slo.bounds.iter().find(|b| b.figure == sm_core::slo::Figure::Ttftc)) {
        anyhow::bail!(
            "--slo {}: ttftc is the wait for the first tool call, and a run without --tools sends no tools to \
             call: give --tools FILE.json, or drop the ttftc bound",
            b.key()
        );
    }
    Ok(run)
}

/// Whether the flags chose the matrix's shape (then the demo's short matrix is not used).
fn matrix_chosen(args: &RunArgs) -> bool {
    args.contexts.is_some() || args.concurrency.is_some() || args.duration.is_some()
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
