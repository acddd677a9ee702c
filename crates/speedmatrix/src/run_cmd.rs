//! `speedmatrix run`: flags → discovery → plan → measurement → files and a summary.

use std::io::Write;
use std::path::Path;
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::{Context, Result};
use sm_bench::LocalTokenizer;
use sm_bench::RunStart;
use sm_bench::{Journal, JournalError};
use sm_client::Client;
use sm_client::discover::{self, Overrides};
use sm_core::record::{CellStatus, Gpu, Hardware, RunRecord, RunStatus};
use sm_core::requests::REQUESTS_FILE;
use sm_core::roofline_record::RecordedShape;
use sm_core::server_gpus::ServerGpus;
use sm_core::{Tokens, redact};

use crate::console::{Console, Mode};
use crate::run_args::Progress;
pub use crate::run_args::RunArgs;
use crate::server_child::{self, ServerChild};
use crate::settings::{Engine, Output, SIM_PROFILE_KEY, Settings, local_port};
use crate::signals::{Signal, Signals, Stop};
use crate::table;

pub async fn main(args: RunArgs) -> ExitCode {
    match run(args).await {
        Ok(code) => code,
        Err(e) => {
            // the terminal may be gone (SIGHUP): a failed write must not turn into a panic
            let _ = writeln!(std::io::stderr(), "error: {e:#}");
            ExitCode::from(1)
        }
    }
}

async fn run(mut args: RunArgs) -> Result<ExitCode> {
    let server_cmd = ServerCmd::take(&mut args)?;
    let settings = Settings::resolve(args)?;
    for w in &settings.warnings {
        eprintln!("warning: {w}");
    }
    if let Some(r) = settings.ranks.as_ref().filter(|r| r.rank > 0) {
        return crate::rank_cmd::worker(&settings, r).await;
    }
    // at once, before the engine starts or a request is sent: a second process must not even
    // restart the simulated engine on the old port, and a refused directory costs nothing
    let locked = match &settings.output {
        Output::Resume { dir, .. } => Some(Journal::create(dir)?),
        Output::New { dir, force } => Some(claim_out(dir, *force)?),
        Output::Default => None,
    };
    // read before anything else so that a wrong path fails in a second, not after discovery
    let tokenizer = settings.tokenizer.as_deref().map(LocalTokenizer::load).transpose()?.map(Arc::new);
    let mut server = match &server_cmd {
        Some(cmd) => Some(cmd.start(&settings, locked.as_ref()).await?),
        None => None,
    };
    let result = measure(settings, locked, tokenizer, &mut server).await;
    // on every way out that returns (an error included); a second signal kills the group instead
    if let Some(s) = server.as_mut() {
        s.stop().await;
    }
    result
}

/// Everything after the server is up: discovery, the measurement, the files.
async fn measure(
    settings: Settings,
    locked: Option<Journal>,
    tokenizer: Option<Arc<LocalTokenizer>>,
    server: &mut Option<ServerChild>,
) -> Result<ExitCode> {
    let sim = match &settings.engine {
        Engine::Server { .. } => None,
        Engine::Demo { profile, port, demo_matrix } => {
            Some(start_demo_sim(profile, *port, *demo_matrix, &settings).await?)
        }
    };
    let url = match (&settings.engine, &sim) {
        (Engine::Server { url }, _) => url.clone(),
        (Engine::Demo { .. }, Some(h)) => h.url(),
        (Engine::Demo { .. }, None) => unreachable!("the simulated engine was started"),
    };
    let pool = settings.run.concurrency.iter().copied().max().unwrap_or(1) as usize;
    let client = Client::new(&url, settings.api_key.clone(), pool)?;
    let launch_command = launch_command(&settings, &client);
    let server_gpus = ServerGpus::resolve(settings.gpu_count, launch_command.as_deref());
    let facts = discover_server(&settings, &client, launch_command.clone()).await?;
    if !settings.quiet() {
        print_facts(&facts);
    }
    print_warnings(&facts);
    let (gpu, gpu_warning) = crate::gpu_args::reader(&settings.gpu_metrics, &url, sim.is_some());
    if let Some(w) = gpu_warning {
        eprintln!("warning: {w}");
    }
    let journal = match locked {
        Some(journal) => journal,
        None => claim_default(Path::new("results"), &facts.model)?,
    };
    if let Some(s) = server.as_mut() {
        move_log(s, &journal);
    }
    let (handle, controls) = sm_bench::controls();
    let stop = Stop::new(handle.clone());
    let dry_run = settings.dry_run;
    let display = if dry_run { Display::Quiet } else { Display::choose(settings.progress) };
    let (reporter, display) = progress_display(display, handle, stop.clone());
    let _signals =
        Signals::watch(stop.clone(), signal_notice(&reporter, display)).context("cannot watch for signals")?;
    let ranks = match settings.ranks.as_ref().filter(|_| !dry_run) {
        Some(r) => Some(crate::rank_cmd::gather(r, settings.quiet()).await?),
        None => None,
    };
    let start = RunStart {
        resume: settings.resumed.clone(),
        retry_failed: matches!(settings.output, Output::Resume { retry_failed: true, .. }),
        dry_run,
        hardware: hardware(&settings),
        launch_command,
        server_gpus,
        tool_version: env!("CARGO_PKG_VERSION").to_string(),
        secrets: settings.api_key.iter().cloned().collect(),
        tokenizer,
        gpu,
        ranks: ranks.clone(),
    };
    let run = settings.run.clone();
    let mut record = sm_bench::run(client, facts, run, start, journal.clone(), reporter.as_ref(), controls).await?;
    if let Some(g) = ranks {
        g.dismiss().await;
    }
    apply_roofline(&mut record, settings.model_shape.clone(), &journal)?;
    // gives the terminal back before the summary is printed on it
    drop(reporter);
    if let Some(h) = sim {
        h.shutdown().await;
    }
    if let Some(s) = server.as_mut() {
        s.stop().await;
    }
    if dry_run {
        print_plan(&record);
        println!("results: {}", journal.path().display());
        return Ok(exit_code(&record, None));
    }
    publish(&record, &journal)?;
    Ok(exit_code(&record, stop.first()))
}

/// What the server is and holds, with `--model` and the limits the user gave; a built-in engine's
/// profile is added as data.
async fn discover_server(
    settings: &Settings,
    client: &Client,
    launch_command: Option<String>,
) -> Result<discover::ServerFacts> {
    let overrides = Overrides {
        model: settings.model.clone(),
        kv_budget: settings.kv_budget.map(|t| t.0),
        max_num_seqs: settings.max_num_seqs,
        max_model_len: settings.max_model_len.map(|t| t.0),
        launch_command,
    };
    let mut facts = match discover::discover(client, &overrides).await {
        // resuming against a server without the old model: the refusal lists that with every other difference
        Err(discover::DiscoverError::UnknownModel { .. })
            if settings.resumed.is_some() && !settings.model_from_user =>
        {
            discover::discover(client, &Overrides { model: None, ..overrides }).await?
        }
        r => r?,
    };
    if let Engine::Demo { profile, .. } = &settings.engine {
        // so that a resume restarts the same engine without reading it back out of a command line
        facts.extra.insert(SIM_PROFILE_KEY.into(), profile.clone().into());
    }
    Ok(facts)
}

/// Writes the reports beside run.json, then prints the summary and where the files are.
/// The roofline is derived from the finished record, so it is added once the cells are measured
/// and written at once; an unknown GPU is a note, not a failed run.
fn apply_roofline(record: &mut RunRecord, shape: Option<RecordedShape>, journal: &Journal) -> Result<()> {
    let Some(shape) = shape else { return Ok(()) };
    match sm_report::judge(record, &sm_report::Judging { slo: None, shape: Some(shape) }) {
        Ok(()) => journal.write(record).context("cannot write run.json with the roofline"),
        Err(e) => {
            eprintln!("{e}");
            Ok(())
        }
    }
}

fn publish(record: &RunRecord, journal: &Journal) -> Result<()> {
    // the files first: after SIGHUP there may be no terminal to print the summary on
    let reports = sm_report::write_all(record, journal.dir())
        .with_context(|| format!("cannot write the reports into {}", journal.dir().display()))?;
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "\n{}", sm_report::terminal(record, terminal_width()));
    let _ = writeln!(out, "results: {}", journal.path().display());
    for path in reports {
        let _ = writeln!(out, "         {}", path.display());
    }
    Ok(())
}

/// How progress is shown while the run works.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Display {
    Dashboard,
    Plain,
    Quiet,
}

impl Display {
    fn choose(progress: Progress) -> Display {
        use std::io::IsTerminal;
        match progress {
            Progress::Quiet => Display::Quiet,
            Progress::Dashboard => Display::Dashboard,
            Progress::Auto if std::io::stdout().is_terminal() => Display::Dashboard,
            Progress::Auto | Progress::Plain => Display::Plain,
        }
    }
}

/// Where the first signal's notice goes: the dashboard's event log (printing would smear its screen),
/// a plain progress line, or stderr when progress is quiet. The reporter is held weakly so that
/// dropping it at the end of the run still gives the terminal back.
fn signal_notice(reporter: &Arc<dyn sm_bench::Reporter>, display: Display) -> impl Fn(&str) + Send + 'static {
    let reporter = Arc::downgrade(reporter);
    move |text: &str| match reporter.upgrade() {
        Some(r) if display != Display::Quiet => r.event(&sm_bench::RunEvent::Notice(text.to_string())),
        // the terminal may be gone (SIGHUP): a failed write must not panic
        _ => {
            let _ = writeln!(std::io::stderr(), "{text}");
        }
    }
}

/// Starts the progress display, falling back to plain lines when the terminal cannot be taken
/// over. `handle` lets the dashboard steer the run (finish after the cell, skip the cell, stop);
/// dropping the returned reporter must restore the terminal. A dashboard whose terminal goes away
/// stops the run as SIGHUP does: nobody can see it or steer it any more.
fn progress_display(
    display: Display,
    handle: sm_bench::ControlHandle,
    stop: Stop,
) -> (Arc<dyn sm_bench::Reporter>, Display) {
    match display {
        Display::Quiet => (Arc::new(Console::new(Mode::Quiet)), display),
        Display::Plain => (Arc::new(Console::new(Mode::Plain)), display),
        Display::Dashboard => match sm_tui::Dashboard::start(
            handle,
            move |why: &str| stop.terminal_lost(why),
            sm_bench::remove_held_locks,
        ) {
            Ok(d) => (Arc::new(d), display),
            Err(e) => {
                eprintln!("warning: {e}; showing plain progress instead");
                (Arc::new(Console::new(Mode::Plain)), Display::Plain)
            }
        },
    }
}

/// Columns of the terminal for the summary and the capacity sentences (`COLUMNS`, else the
/// terminal's own, else 100).
pub(crate) fn terminal_width() -> usize {
    std::env::var("COLUMNS")
        .ok()
        .and_then(|c| c.parse().ok())
        .or_else(sm_tui::terminal_width)
        .unwrap_or(100)
        .clamp(40, 400)
}

/// Exit codes: 0 complete, 2 some cells, prefill rows or load-phase units errored, 130 interrupted by Ctrl-C or `q`, 143 by SIGTERM,
/// 129 by SIGHUP (1 is for failures to start).
fn exit_code(record: &RunRecord, signal: Option<Signal>) -> ExitCode {
    match record.status {
        RunStatus::Interrupted => ExitCode::from(signal.map_or(130, Signal::exit_code)),
        RunStatus::Failed => ExitCode::from(1),
        _ if record.decode.iter().any(|c| matches!(c.status(), CellStatus::Error | CellStatus::Loop))
            || record.prefill.iter().any(|p| p.status != CellStatus::Valid)
            || record.phases.errored() =>
        {
            ExitCode::from(2)
        }
        _ => ExitCode::SUCCESS,
    }
}

async fn start_demo_sim(
    profile: &str,
    port: Option<u16>,
    demo_matrix: bool,
    settings: &Settings,
) -> Result<sm_sim::SimHandle> {
    let mut options = sm_sim::SimOptions::new(sm_sim::Profile::resolve(profile)?);
    // a resumed run must find the engine at the URL it recorded
    if let Some(port) = port {
        options.port = port;
    }
    let handle = sm_sim::start(options).await.context("cannot start the built-in simulated engine")?;
    if !settings.quiet() {
        eprintln!(
            "No --url given: measuring the built-in simulated engine (profile {profile}) at {}{}.\nPass --url to measure a real server.",
            handle.url(),
            if demo_matrix { " with a short demo matrix (8K, 64K, 256K × 1, 16, 64; 5 s windows)" } else { "" }
        );
    }
    Ok(handle)
}

/// `--server-cmd`: the command with its port chosen, taken out of the flags, which then name the
/// server's URL and its launch command as `--url` and `--launch-command` would.
struct ServerCmd {
    cmd: String,
    port: u16,
    timeout: std::time::Duration,
}

/// How long a `--server-cmd` server has to answer when --serve-timeout is not given.
const SERVE_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(15 * 60);
/// The server's output, beside run.json.
const SERVER_LOG: &str = "server.log";

impl ServerCmd {
    fn take(args: &mut RunArgs) -> Result<Option<ServerCmd>> {
        let Some(cmd) = args.server_cmd.take() else { return Ok(None) };
        // refused before a port is even looked for
        server_child::substitute(&cmd, 0)?;
        // a resumed run must find its server at the URL it recorded, as the built-in engine does
        let recorded = match args.resume.as_deref() {
            Some(dir) => local_port(&crate::settings::read_record(dir)?.server.url),
            None => None,
        };
        let port = match recorded {
            Some(port) => port,
            None => server_child::free_port()?,
        };
        let cmd = server_child::substitute(&cmd, port)?;
        args.url = Some(format!("http://127.0.0.1:{port}"));
        args.launch_command = Some(cmd.clone());
        Ok(Some(ServerCmd { cmd, port, timeout: args.serve_timeout.unwrap_or(SERVE_TIMEOUT) }))
    }

    /// Starts the server and waits for it to answer. Its log goes into the output directory when
    /// that is known already; otherwise beside the default directories, until the run's is chosen.
    async fn start(&self, settings: &Settings, locked: Option<&Journal>) -> Result<ServerChild> {
        let log = match locked {
            Some(j) => j.dir().join(SERVER_LOG),
            None => {
                let root = Path::new("results");
                std::fs::create_dir_all(root).with_context(|| format!("cannot create {}", root.display()))?;
                root.join(format!(".server-{}.log", self.port))
            }
        };
        // a resumed run's log goes on after the first part's
        let append = settings.resumed.is_some();
        let mut child = ServerChild::start(&self.cmd, self.port, &log, append)?;
        if !settings.quiet() {
            eprintln!(
                "Starting the server: {}
  its output: {}; waiting up to {} s for it to answer at {}",
                redact::redact_command(&self.cmd),
                log.display(),
                self.timeout.as_secs(),
                child.url()
            );
        }
        let started = std::time::Instant::now();
        child.wait_ready(settings.api_key.as_deref(), self.timeout).await?;
        if !settings.quiet() {
            eprintln!("The server answered after {:.1} s.", started.elapsed().as_secs_f64());
        }
        Ok(child)
    }
}

/// The server's log, written beside the default directories until the run's was chosen, moved into
/// it (the server keeps writing to the same file).
fn move_log(server: &mut ServerChild, journal: &Journal) {
    let to = journal.dir().join(SERVER_LOG);
    if server.log() == to {
        return;
    }
    match std::fs::rename(server.log(), &to) {
        Ok(()) => server.set_log(to),
        Err(e) => eprintln!("warning: cannot move {} to {}: {e}", server.log().display(), to.display()),
    }
}

fn launch_command(settings: &Settings, client: &Client) -> Option<String> {
    if let Some(cmd) = &settings.launch_command {
        return Some(redact::redact_command(cmd));
    }
    if let Engine::Demo { profile, .. } = &settings.engine {
        return Some(format!("speedmatrix sim --profile {profile}"));
    }
    local_port(client.base()).and_then(discover::launch_command_for_port)
}

/// This machine, with the GPUs the user named (`--gpu NAME --gpu-count N`) in place of the ones seen.
fn hardware(s: &Settings) -> Hardware {
    let mut hardware = discover::hardware();
    if let Some((name, count)) = &s.gpu {
        hardware.gpus = (0..*count).map(|_| Gpu { name: name.clone(), memory_mib: None }).collect();
        hardware.gpu_count = *count;
    }
    hardware
}

/// Takes `--out DIR` for a new run: refused when DIR holds a run already, unless `--force`, which
/// also removes the old reports and request lines (the new run.json replaces the old one when
/// the run starts).
fn claim_out(dir: &Path, force: bool) -> Result<Journal> {
    match Journal::create_new(dir, force) {
        Ok(journal) => {
            if force {
                let files = [sm_report::HTML_FILE, sm_report::MARKDOWN_FILE, sm_report::CSV_FILE, REQUESTS_FILE];
                for name in files {
                    match std::fs::remove_file(dir.join(name)) {
                        Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                            return Err(e).with_context(|| format!("--force: cannot remove the old {name}"));
                        }
                        _ => {}
                    }
                }
            }
            Ok(journal)
        }
        Err(JournalError::HoldsRun { dir }) => anyhow::bail!(
            "{} already holds a run (run.json): to continue it, use --resume {}; to keep it, choose another --out directory; to replace it, add --force",
            dir.display(),
            dir.display()
        ),
        Err(e) => Err(e.into()),
    }
}

/// The default output directory, `results/<UTC time>-<model>/`. The user did not choose that name,
/// so a directory that holds a run already (or is in use by a run started in the same second)
/// is passed over for the same name with `-2`, `-3`, … rather than refused.
fn claim_default(root: &Path, model: &str) -> Result<Journal> {
    let stamp = sm_core::record::now_rfc3339().replace([':', '-'], "");
    let safe: String =
        model.chars().map(|c| if c.is_ascii_alphanumeric() || c == '.' || c == '_' { c } else { '-' }).collect();
    claim_free(root, &format!("{stamp}-{safe}"))
}

fn claim_free(root: &Path, base: &str) -> Result<Journal> {
    for n in 1..=100 {
        let name = if n == 1 { base.to_string() } else { format!("{base}-{n}") };
        match Journal::create_new(&root.join(name), false) {
            Err(JournalError::HoldsRun { .. } | JournalError::Busy { .. }) => continue,
            r => return Ok(r?),
        }
    }
    anyhow::bail!(
        "{} and 99 more names like it hold runs already; choose a directory with --out",
        root.join(base).display()
    )
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_directory_passes_over_names_that_hold_a_run_or_are_in_use() {
        let root = tempfile::tempdir().unwrap();
        let base = "20261204T093500Z-tiny";
        std::fs::create_dir_all(root.path().join(base)).unwrap();
        std::fs::write(root.path().join(base).join("run.json"), "{}").unwrap();
        let busy = Journal::create(&root.path().join(format!("{base}-2"))).unwrap();
        let claimed = claim_free(root.path(), base).unwrap();
        assert_eq!(claimed.dir(), root.path().join(format!("{base}-3")));
        drop((busy, claimed));
        // a free name is taken as it is
        let other = claim_free(root.path(), "20261204T093501Z-tiny").unwrap();
        assert_eq!(other.dir(), root.path().join("20261204T093501Z-tiny"));
    }
}
