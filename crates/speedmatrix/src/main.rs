//! `speedmatrix`: the thin binary that wires the pipeline crates together.
//!
//! discover (sm-client) → plan (sm-core) → drive and measure (sm-bench) →
//! report; the simulated engine (sm-sim) beside them.

mod run_cmd;
mod table;
mod sim_cmd;

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

#[derive(Debug, Subcommand)]
enum Command {
    /// Measure a server (or, without --url, the built-in simulated engine) and write the speed test matrix.
    Run(run_cmd::RunArgs),
    /// Serve the built-in simulated inference engine (vLLM's API, driven by a performance profile).
    Sim(sim_cmd::SimArgs),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    init_tracing();
    let runtime = match tokio::runtime::Builder::new_multi_thread().enable_all().build() {
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
        }
    })
}

fn init_tracing() {
    let filter = tracing_subscriber::EnvFilter::try_from_env("SPEEDMATRIX_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn"));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .init();
}
