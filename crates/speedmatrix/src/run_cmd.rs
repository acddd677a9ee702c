//! `speedmatrix run`: flags → discovery → plan → measurement → files and a summary.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result};
use sm_bench::RunConfig;
use sm_bench::cell::CellTiming;
use sm_bench::journal::Journal;
use sm_bench::tokenizer::LocalTokenizer;
use sm_client::Client;
use sm_client::discover::{self, Overrides};
use sm_core::capacity::CapacityRule;
use sm_core::record::{Api, CellStatus, Gpu, RunRecord, RunStatus};
use sm_core::units::{parse_count_list, parse_duration, parse_token_list, parse_tokens};
use sm_core::{Tokens, redact};

use crate::console::{Console, Mode};
use crate::signals::{Signal, Signals};
use crate::table;

/// The profile the built-in simulated engine uses when no --url is given.
pub const DEMO_PROFILE: &str = "seed-ling-3.0-flash-h200nvl-x2";

#[derive(Debug, clap::Args)]
pub struct RunArgs {
    /// Base URL of an OpenAI-compatible server, e.g. http://127.0.0.1:8000. Without it, the built-in
    /// simulated engine is started and measured with a short demo matrix.
    #[arg(long)]
    url: Option<String>,
    /// API key sent as a bearer token. Never written to any file.
    #[arg(long, env = "OPENAI_API_KEY", hide_env_values = true)]
    api_key: Option<String>,
    /// Model id to measure (default: the first one the server lists).
    #[arg(long)]
    model: Option<String>,
    /// Decode contexts, e.g. 8k,16k,32k (k = 1,024 tokens). Contexts that do not fit the model are trimmed or skipped.
    #[arg(long, value_parser = token_list)]
    contexts: Option<TokenList>,
    /// Concurrency levels, e.g. 1,2,4,8.
    #[arg(long, value_parser = count_list)]
    concurrency: Option<CountList>,
    /// Length of each cell's measurement window, e.g. 30s or 2m.
    #[arg(long, value_parser = duration)]
    duration: Option<Duration>,
    /// Output tokens per decode request (max_tokens).
    #[arg(long, value_parser = tokens)]
    max_tokens: Option<Tokens>,
    /// Extra prefill-only contexts, e.g. 256k (every decode context gets a prefill row anyway).
    #[arg(long, value_parser = token_list)]
    prefill_contexts: Option<TokenList>,
    /// Do not add the largest context that fits max_tokens 1 as a prefill row.
    #[arg(long)]
    no_prefill_at_max: bool,
    /// Output directory (default: results/<UTC time>-<model>/).
    #[arg(long)]
    out: Option<PathBuf>,
    /// API form: chat (/v1/chat/completions) or completions (/v1/completions).
    #[arg(long, value_parser = ["chat", "completions"], default_value = "chat")]
    api: String,
    /// A local tokenizer.json (or a model directory that has one) to size prompts exactly when the
    /// server has no /tokenize (hosted APIs). Read from disk, never downloaded.
    #[arg(long, value_name = "PATH")]
    tokenizer: Option<PathBuf>,
    /// KV cache budget in tokens; overrides what the server reports.
    #[arg(long, value_parser = tokens)]
    kv_budget: Option<Tokens>,
    /// Maximum concurrent sequences of the server; overrides what is discovered.
    #[arg(long)]
    max_num_seqs: Option<u32>,
    /// The model's context limit; overrides what the server reports.
    #[arg(long, value_parser = tokens)]
    max_model_len: Option<Tokens>,
    /// Over-capacity rule: reference (C × (ctx + max_tokens)) or prefix-shared.
    #[arg(long, default_value = "reference")]
    capacity_rule: CapacityRule,
    /// The server's launch command, for the record (secrets are redacted).
    #[arg(long)]
    launch_command: Option<String>,
    /// GPU name for the record, when nvidia-smi is not on this host.
    #[arg(long, requires = "gpu_count")]
    gpu: Option<String>,
    /// Number of GPUs, with --gpu.
    #[arg(long, requires = "gpu")]
    gpu_count: Option<u32>,
    /// A label for this run.
    #[arg(long)]
    label: Option<String>,
    /// Discover and plan only: print the plan and write run.json with status "planned".
    #[arg(long)]
    dry_run: bool,
    // The timing flags have no clap default so that a resume can tell a flag given from one to
    // take from run.json; their defaults are the DEFAULT_* constants below.
    /// How long readiness must hold before the window opens [default: 3s].
    #[arg(long, value_parser = duration)]
    ready_stable: Option<Duration>,
    /// Longest wait for readiness before the window opens anyway (with a warning) [default: 180s].
    #[arg(long, value_parser = duration)]
    ready_timeout: Option<Duration>,
    /// A stream that sends nothing for this long between two tokens is an error (before its first
    /// token a stream may wait up to --ready-timeout) [default: 15s].
    #[arg(long, value_parser = duration)]
    stall_timeout: Option<Duration>,
    /// How long to wait for a server that stopped responding before the run stops as failed [default: 5m].
    #[arg(long, value_parser = duration)]
    server_wait: Option<Duration>,
    /// Window of the hidden C=1 warm-up cell before the matrix (0 skips it) [default: 3s].
    #[arg(long, value_parser = duration)]
    warmup: Option<Duration>,
    /// Simulated-engine profile used when no --url is given.
    #[arg(long, default_value = DEMO_PROFILE)]
    sim_profile: String,
    /// Continue the interrupted run in DIR: finished cells are kept, the rest is measured. Flags not
    /// given are taken from DIR/run.json.
    #[arg(long, value_name = "DIR", conflicts_with_all = ["out", "dry_run"])]
    resume: Option<PathBuf>,
    /// With --resume: measure again the cells that ended error, loop or skipped, and the prefill
    /// rows that failed (e.g. after a transient server fault). Over-capacity cells stay as planned.
    #[arg(long)]
    retry_failed: bool,
    /// Progress display: auto (the dashboard on a terminal, else plain), dashboard, plain (one line
    /// per event), quiet (only the summary).
    #[arg(long, value_parser = ["auto", "dashboard", "plain", "quiet"], default_value = "auto")]
    progress: String,
    /// Print only the final summary (and warnings): the same as --progress quiet.
    #[arg(short, long)]
    quiet: bool,
}

impl RunArgs {
    fn quiet(&self) -> bool {
        self.quiet || self.progress == "quiet"
    }
}

/// A parsed `8k,16k` list (a newtype so clap treats it as one value).
#[derive(Debug, Clone, PartialEq)]
struct TokenList(Vec<Tokens>);
/// A parsed `1,2,4` list.
#[derive(Debug, Clone, PartialEq)]
struct CountList(Vec<u32>);

fn token_list(s: &str) -> Result<TokenList, String> {
    parse_token_list(s).map(TokenList).map_err(|e| e.to_string())
}
fn count_list(s: &str) -> Result<CountList, String> {
    parse_count_list(s).map(CountList).map_err(|e| e.to_string())
}
fn duration(s: &str) -> Result<Duration, String> {
    parse_duration(s).map_err(|e| e.to_string())
}
fn tokens(s: &str) -> Result<Tokens, String> {
    parse_tokens(s).map_err(|e| e.to_string())
}

const K: u64 = 1024;

const DEFAULT_READY_STABLE: Duration = Duration::from_secs(3);
const DEFAULT_READY_TIMEOUT: Duration = Duration::from_secs(180);
const DEFAULT_STALL_TIMEOUT: Duration = Duration::from_secs(15);
const DEFAULT_SERVER_WAIT: Duration = Duration::from_secs(300);
const DEFAULT_WARMUP: Duration = Duration::from_secs(3);

/// The published matrix: 8K…256K × 1…128, 30 s windows, 4,096 output tokens.
fn default_contexts() -> Vec<Tokens> {
    [8, 16, 32, 64, 128, 256].iter().map(|k| Tokens(k * K)).collect()
}
fn default_concurrency() -> Vec<u32> {
    vec![1, 2, 4, 8, 16, 32, 64, 128]
}

pub async fn main(args: RunArgs) -> ExitCode {
    match run(args).await {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::from(1)
        }
    }
}

async fn run(mut args: RunArgs) -> Result<ExitCode> {
    let secrets: Vec<String> = args.api_key.iter().cloned().collect();
    let user_model = args.model.is_some();
    // clap's `requires` does not fire for a plain bool flag
    anyhow::ensure!(
        !args.retry_failed || args.resume.is_some(),
        "--retry-failed works with --resume DIR: it measures again the failed cells of the run in DIR"
    );
    let (resumed, locked) = match args.resume.clone() {
        Some(dir) => {
            let old = load_resume(&dir, &mut args)?;
            // at once: a second process must not even restart the simulated engine on the old port
            (Some(old), Some(Journal::create(&dir)?))
        }
        None => (None, None),
    };
    // read before anything else so that a wrong path fails in a second, not after discovery
    let tokenizer = args.tokenizer.as_deref().map(LocalTokenizer::load).transpose()?.map(Arc::new);
    let sim = match &args.url {
        Some(_) => None,
        None => Some(start_demo_sim(&mut args, resumed.as_ref()).await?),
    };
    let url = match (&args.url, &sim) {
        (Some(u), _) => u.clone(),
        (None, Some(h)) => h.url(),
        (None, None) => unreachable!("a URL or the simulated engine"),
    };
    let concurrency = args.concurrency.clone().map_or_else(default_concurrency, |c| c.0);
    let pool = concurrency.iter().copied().max().unwrap_or(1) as usize;
    let client = Client::new(&url, args.api_key.clone(), pool)?;
    let launch_command = launch_command(&args, &client, sim.is_some());
    let overrides = Overrides {
        model: args.model.clone(),
        kv_budget: args.kv_budget.map(|t| t.0),
        max_num_seqs: args.max_num_seqs,
        max_model_len: args.max_model_len.map(|t| t.0),
        launch_command: launch_command.clone(),
    };
    let facts = match discover::discover(&client, &overrides).await {
        // resuming against a server without the old model: the refusal lists that with every other difference
        Err(discover::DiscoverError::UnknownModel { .. }) if resumed.is_some() && !user_model => {
            discover::discover(&client, &Overrides { model: None, ..overrides }).await?
        }
        r => r?,
    };
    if !args.quiet() {
        print_facts(&facts);
    }
    print_warnings(&facts);
    let mut config = config(&args, concurrency, launch_command, secrets);
    config.resume = resumed;
    config.tokenizer = tokenizer;
    let out = out_dir(&args, &facts.model);
    let journal = match locked {
        Some(journal) => journal,
        None => Journal::create(&out)?,
    };
    let (handle, controls) = sm_bench::controls();
    let display = if config.dry_run { Display::Quiet } else { Display::choose(&args) };
    let (reporter, display) = progress_display(display, handle.clone());
    let signals = Signals::watch(handle, signal_notice(&reporter, display)).context("cannot watch for signals")?;
    let dry_run = config.dry_run;
    let record = sm_bench::run(client, facts, config, journal.clone(), reporter.as_ref(), controls).await?;
    // gives the terminal back before the summary is printed on it
    drop(reporter);
    if let Some(h) = sim {
        h.shutdown().await;
    }
    if dry_run {
        print_plan(&record);
        println!("results: {}", journal.path().display());
        return Ok(exit_code(&record, None));
    }
    // the files first: after SIGHUP there may be no terminal to print the summary on
    let reports = sm_report::write_all(&record, journal.dir())
        .with_context(|| format!("cannot write the reports into {}", journal.dir().display()))?;
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "\n{}", sm_report::terminal(&record, terminal_width()));
    let _ = writeln!(out, "results: {}", journal.path().display());
    for path in reports {
        let _ = writeln!(out, "         {}", path.display());
    }
    Ok(exit_code(&record, signals.first()))
}

/// How progress is shown while the run works.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Display {
    Dashboard,
    Plain,
    Quiet,
}

impl Display {
    fn choose(args: &RunArgs) -> Display {
        use std::io::IsTerminal;
        match args.progress.as_str() {
            _ if args.quiet() => Display::Quiet,
            "dashboard" => Display::Dashboard,
            "auto" if std::io::stdout().is_terminal() => Display::Dashboard,
            _ => Display::Plain,
        }
    }
}

/// Where the first signal's notice goes: the dashboard's event log (printing would smear its screen),
/// a plain progress line, or stderr when progress is quiet. The reporter is held weakly so that
/// dropping it at the end of the run still gives the terminal back.
fn signal_notice(reporter: &Arc<dyn sm_bench::Reporter>, display: Display) -> impl Fn(&str) + Send + 'static {
    let reporter = Arc::downgrade(reporter);
    move |text: &str| match reporter.upgrade() {
        Some(r) if display != Display::Quiet => r.event(text),
        // the terminal may be gone (SIGHUP): a failed write must not panic
        _ => {
            let _ = writeln!(std::io::stderr(), "{text}");
        }
    }
}

/// Starts the progress display, falling back to plain lines when the terminal cannot be taken
/// over. `handle` lets the dashboard steer the run (finish after the cell, skip the cell, stop);
/// dropping the returned reporter must restore the terminal.
fn progress_display(display: Display, handle: sm_bench::ControlHandle) -> (Arc<dyn sm_bench::Reporter>, Display) {
    match display {
        Display::Quiet => (Arc::new(Console::new(Mode::Quiet)), display),
        Display::Plain => (Arc::new(Console::new(Mode::Plain)), display),
        Display::Dashboard => match sm_tui::Dashboard::start(handle) {
            Ok(d) => (Arc::new(d), display),
            Err(e) => {
                eprintln!("warning: {e}; showing plain progress instead");
                (Arc::new(Console::new(Mode::Plain)), Display::Plain)
            }
        },
    }
}

/// Columns of the terminal for the summary (`COLUMNS`, else the terminal's own, else 100).
fn terminal_width() -> usize {
    std::env::var("COLUMNS")
        .ok()
        .and_then(|c| c.parse().ok())
        .or_else(sm_tui::terminal_width)
        .unwrap_or(100)
        .clamp(40, 400)
}

/// Exit codes: 0 complete, 2 some cells errored, 130 interrupted by Ctrl-C or `q`, 143 by SIGTERM,
/// 129 by SIGHUP (1 is for failures to start).
fn exit_code(record: &RunRecord, signal: Option<Signal>) -> ExitCode {
    match record.status {
        RunStatus::Interrupted => ExitCode::from(signal.map_or(130, Signal::exit_code)),
        RunStatus::Failed => ExitCode::from(1),
        _ if record.decode.iter().any(|c| matches!(c.status(), CellStatus::Error | CellStatus::Loop))
            || record.prefill.iter().any(|p| p.status != CellStatus::Valid) =>
        {
            ExitCode::from(2)
        }
        _ => ExitCode::SUCCESS,
    }
}

async fn start_demo_sim(args: &mut RunArgs, resumed: Option<&RunRecord>) -> Result<sm_sim::SimHandle> {
    let profile = sm_sim::Profile::resolve(&args.sim_profile)?;
    let name = profile.name.clone();
    let mut options = sm_sim::SimOptions::new(profile);
    // a resumed run must find the engine at the URL it recorded
    if let Some(port) = resumed.and_then(|r| local_port(&r.server.url)) {
        options.port = port;
    }
    let handle = sm_sim::start(options).await.context("cannot start the built-in simulated engine")?;
    let user_matrix = args.contexts.is_some() || args.concurrency.is_some() || args.duration.is_some();
    if !user_matrix {
        // Short enough to finish in about two minutes, and wide enough to show an over-capacity cell.
        args.contexts = Some(TokenList(vec![Tokens(8 * K), Tokens(64 * K), Tokens(256 * K)]));
        args.concurrency = Some(CountList(vec![1, 16, 64]));
        args.duration = Some(Duration::from_secs(5));
        args.ready_stable = Some(Duration::from_secs(1));
        args.warmup = Some(Duration::ZERO);
    }
    args.label.get_or_insert_with(|| format!("simulated engine, profile {name}"));
    if args.quiet() {
        return Ok(handle);
    }
    eprintln!(
        "No --url given: measuring the built-in simulated engine (profile {name}) at {}{}.\nPass --url to measure a real server.",
        handle.url(),
        if user_matrix { "" } else { " with a short demo matrix (8K, 64K, 256K × 1, 16, 64; 5 s windows)" }
    );
    Ok(handle)
}

fn launch_command(args: &RunArgs, client: &Client, simulated: bool) -> Option<String> {
    if let Some(cmd) = &args.launch_command {
        return Some(redact::redact_command(cmd));
    }
    if simulated {
        return Some(format!("speedmatrix sim --profile {}", args.sim_profile));
    }
    local_port(client.base()).and_then(discover::launch_command_for_port)
}

/// The port of a URL that points at this host.
fn local_port(base: &str) -> Option<u16> {
    let rest = base.split_once("://")?.1;
    let hostport = rest.split('/').next()?;
    let (host, port) = hostport.rsplit_once(':')?;
    let local = matches!(host, "127.0.0.1" | "localhost" | "[::1]" | "0.0.0.0") || host.starts_with("127.");
    local.then(|| port.parse().ok()).flatten()
}

fn config(args: &RunArgs, concurrency: Vec<u32>, launch_command: Option<String>, secrets: Vec<String>) -> RunConfig {
    let mut hardware = discover::hardware();
    if let (Some(name), Some(count)) = (&args.gpu, args.gpu_count) {
        hardware.gpus = (0..count).map(|_| Gpu { name: name.clone(), memory_mib: None }).collect();
        hardware.gpu_count = count;
    }
    RunConfig {
        contexts: args.contexts.clone().map_or_else(default_contexts, |c| c.0),
        concurrency,
        max_tokens: args.max_tokens.unwrap_or(Tokens(4096)),
        prefill_contexts: args.prefill_contexts.clone().map(|c| c.0).unwrap_or_default(),
        prefill_at_max: !args.no_prefill_at_max,
        api: if args.api == "completions" { Api::Completions } else { Api::Chat },
        rule: args.capacity_rule,
        timing: CellTiming {
            duration: args.duration.unwrap_or(Duration::from_secs(30)),
            ready_stable: args.ready_stable.unwrap_or(DEFAULT_READY_STABLE),
            ready_timeout: args.ready_timeout.unwrap_or(DEFAULT_READY_TIMEOUT),
            idle_timeout: args.stall_timeout.unwrap_or(DEFAULT_STALL_TIMEOUT),
            ..CellTiming::default()
        },
        warmup: args.warmup.unwrap_or(DEFAULT_WARMUP),
        idle_gap: Duration::from_millis(500),
        ignore_eos: true,
        temperature: None,
        // a label is free text: a secret written into it is redacted like one in a launch command
        label: args.label.as_deref().map(redact::redact_command),
        launch_command,
        hardware,
        dry_run: args.dry_run,
        tool_version: env!("CARGO_PKG_VERSION").to_string(),
        secrets,
        resume: None,
        retry_failed: args.retry_failed,
        server_wait: args.server_wait.unwrap_or(DEFAULT_SERVER_WAIT),
        tokenizer: None,
    }
}

/// Reads the run to resume and fills every flag the user did not give from it.
fn load_resume(dir: &Path, args: &mut RunArgs) -> Result<RunRecord> {
    let path = dir.join("run.json");
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
    if s.prompt_source == "tokenizer_file" && args.tokenizer.is_none() {
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
    args.contexts.get_or_insert_with(|| asked("decode", &s.contexts, Tokens(s.max_tokens)));
    args.concurrency.get_or_insert_with(|| CountList(s.concurrency.clone()));
    args.duration.get_or_insert(Duration::from_secs_f64(s.duration_s));
    args.max_tokens.get_or_insert(Tokens(s.max_tokens));
    args.prefill_contexts.get_or_insert_with(|| asked("prefill", &s.prefill_contexts, Tokens(1)));
    args.no_prefill_at_max = true;
    args.api = if s.api == Api::Completions { "completions".into() } else { "chat".into() };
    args.capacity_rule = s.capacity_rule;
    // a record written before the timings were kept has none: the flags' defaults apply
    let secs = |v: Option<f64>| v.filter(|s| s.is_finite() && *s >= 0.0).map(Duration::from_secs_f64);
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

fn out_dir(args: &RunArgs, model: &str) -> PathBuf {
    if let Some(out) = &args.out {
        return out.clone();
    }
    let stamp = sm_core::record::now_rfc3339().replace([':', '-'], "");
    let safe: String =
        model.chars().map(|c| if c.is_ascii_alphanumeric() || c == '.' || c == '_' { c } else { '-' }).collect();
    Path::new("results").join(format!("{stamp}-{safe}"))
}

fn print_facts(f: &discover::ServerFacts) {
    let opt = |v: Option<u64>| v.map_or("unknown".to_string(), |n| Tokens(n).to_string());
    eprintln!(
        "server: {} {} · model {} · max_model_len {} · KV budget {} ({}) · max sequences {} · metrics {} · tokenize {}",
        f.engine,
        f.engine_version.as_deref().unwrap_or("(version unknown)"),
        f.model,
        opt(f.max_model_len),
        opt(f.kv_budget),
        f.kv_budget_source,
        f.max_num_seqs.map_or("unknown".into(), |n| n.to_string()),
        if f.metrics_available { "yes" } else { "no" },
        if matches!(f.tokenize, discover::TokenizeApi::None) { "no" } else { "yes" },
    );
}

/// Printed even with --quiet: a warning may mean the figures need a second look.
fn print_warnings(f: &discover::ServerFacts) {
    for w in &f.warnings {
        eprintln!("warning: {w}");
    }
}

fn print_plan(record: &RunRecord) {
    println!("{}", table::plan(record));
}
