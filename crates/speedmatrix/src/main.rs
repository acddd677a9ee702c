//! `speedmatrix`: the thin binary that wires the pipeline crates together.
//!
//! discover (sm-client) → plan (sm-core) → drive and measure (sm-bench) →
//! report; the simulated engine (sm-sim) beside them.

// Every line this binary prints passes the secrets scrubber (`sm_core::secrets`): these shadow
// the standard macros in every module below, so no message (an error that quotes a server's
// answer, a warning, a summary) can print a secret the process was given. A closed terminal or
// pipe is ignored rather than a panic.
macro_rules! println {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stdout().lock(), "{}", sm_core::secrets::scrub(&format!($($arg)*)));
    }};
}
macro_rules! eprintln {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stderr().lock(), "{}", sm_core::secrets::scrub(&format!($($arg)*)));
    }};
}

mod compare_cmd;
mod console;
mod gpu_args;
mod import_cmd;
mod limits;
mod phase_args;
mod rank_args;
mod rank_cmd;
mod report_cmd;
mod roofline_args;
mod run_args;
mod run_cmd;
mod serve_cmd;
mod server_child;
mod settings;
mod signals;
mod sim_cmd;
mod table;
mod tools_args;
mod upload_cmd;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

#[derive(Debug, Parser)]
#[command(
    name = "speedmatrix",
    version,
    about = "Measures how fast an LLM inference server really is: prefill by context, sustained decode by context × concurrency",
    long_about = None
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

// Parsed once at start-up: the size difference between variants costs nothing.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Subcommand)]
enum Command {
    /// Measure a server (or, without --url, the built-in simulated engine) and write the speed test matrix.
    Run(run_cmd::RunArgs),
    /// Serve the built-in simulated inference engine (vLLM's API, driven by a performance profile).
    Sim(sim_cmd::SimArgs),
    /// Render a run (run.json, a run directory, or a reference-tool file) as HTML, Markdown and CSV.
    Report(report_cmd::ReportArgs),
    /// Convert a reference-tool result (llm-inference-bench JSON or lil-bench-result/1) into a speedmatrix run.
    Import(import_cmd::ImportArgs),
    /// Serve the results site (store, browse and compare uploaded runs), or manage its upload tokens.
    Serve(serve_cmd::ServeArgs),
    /// Compare runs cell by cell with each difference's significance; --fail-on gates CI on a regression.
    Compare(compare_cmd::CompareArgs),
    /// Upload a run (run.json, a run directory, or a reference-tool file) to a results site.
    Upload(upload_cmd::UploadArgs),
}

fn main() -> ExitCode {
    // before anything can print or write: the flags and environment variables that hold secrets
    let args: Vec<String> = std::env::args_os().map(|a| a.to_string_lossy().into_owned()).collect();
    let env = std::env::vars_os().map(|(k, v)| (k.to_string_lossy().into_owned(), v.to_string_lossy().into_owned()));
    sm_core::secrets::register_startup(&args, env);
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => return usage_error(&e),
    };
    init_tracing();
    let mut builder = tokio::runtime::Builder::new_multi_thread();
    // tokio's default is also one worker per CPU the process may use; the flag makes it explicit
    // (the record keeps the count: sm_bench::client_threads)
    if let Command::Run(args) = &cli.command
        && let Some(n) = args.client_threads
    {
        builder.worker_threads(n as usize);
    }
    let runtime = match builder.enable_all().build() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: cannot start the async runtime: {e}");
            return ExitCode::from(1);
        }
    };
    runtime.block_on(async move {
        match cli.command {
            Command::Run(args) => run_cmd::main(args).await,
            Command::Sim(args) => sim_cmd::main(args).await,
            Command::Report(args) => report_cmd::main(args),
            Command::Import(args) => import_cmd::main(args),
            Command::Serve(args) => serve_cmd::main(args).await,
            Command::Upload(args) => upload_cmd::main(args).await,
            Command::Compare(args) => compare_cmd::main(args).await,
        }
    })
}

/// clap's message, and its exit code except for `run`: there 2 means "some cells errored", so a bad
/// flag exits 1, like every other failure to start.
fn usage_error(e: &clap::Error) -> ExitCode {
    let _ = e.print();
    let code = e.exit_code();
    let run = std::env::args_os().nth(1).is_some_and(|a| a == "run");
    ExitCode::from(if code == 2 && run { 1 } else { u8::try_from(code).unwrap_or(1) })
}

fn init_tracing() {
    let filter = tracing_subscriber::EnvFilter::try_from_env("SPEEDMATRIX_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn"));
    tracing_subscriber::fmt().with_env_filter(filter).with_writer(|| ScrubbedStderr(Vec::new())).init();
}

/// One log line, collected and then written to stderr without any secret the process was given.
struct ScrubbedStderr(Vec<u8>);

impl std::io::Write for ScrubbedStderr {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.0.extend_from_slice(bytes);
        Ok(bytes.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Drop for ScrubbedStderr {
    fn drop(&mut self) {
        use std::io::Write as _;
        let text = String::from_utf8_lossy(&self.0);
        let _ = std::io::stderr().write_all(sm_core::secrets::scrub(&text).as_bytes());
    }
}
