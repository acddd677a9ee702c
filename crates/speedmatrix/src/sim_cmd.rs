//! `speedmatrix sim`: serve the built-in simulated inference engine.

use std::io::Write;
use std::net::IpAddr;
use std::path::PathBuf;
use std::process::ExitCode;

use sm_sim::{Flavor, Profile, ServerFault, SimOptions};

const DEFAULT_PROFILE: &str = "seed-ling-3.0-flash-h200nvl-x2";

// Values are taken as text and validated here so that a bad value exits 1 with our own message.
#[derive(Debug, clap::Args)]
pub struct SimArgs {
    /// A built-in profile name or a profile TOML file.
    #[arg(long, value_name = "NAME|FILE", default_value = DEFAULT_PROFILE)]
    profile: String,
    /// Address to bind (loopback by default).
    #[arg(long, default_value = "127.0.0.1")]
    host: String,
    /// Port to bind; 0 picks any free port.
    #[arg(long, default_value = "8000")]
    port: String,
    /// Require `Authorization: Bearer KEY` on /v1/*.
    #[arg(long, value_name = "KEY")]
    api_key: Option<String>,
    /// Served model id (default: the profile's model).
    #[arg(long, value_name = "ID")]
    model: Option<String>,
    /// Which engine's API to imitate: vllm, sglang, llamacpp, tgi, generic.
    #[arg(long, default_value = "vllm")]
    flavor: String,
    /// Inject a fault into every request (repeatable): disconnect-after=N, status=CODE, malformed-sse,
    /// stall-after=N, no-usage, multi-token=K, loop, slow-first-token=MS. `SPEC@KEY=VALUE[,…]` limits
    /// it to some requests: prompt=TEXT (the prompt contains TEXT), max-tokens=N, from=N, to=N (the
    /// N-th matching request on, or up to).
    #[arg(long, value_name = "SPEC[@SCOPE]")]
    fault: Vec<String>,
    /// Write ground truth (one JSON line per finished request) to FILE.
    #[arg(long, value_name = "FILE")]
    trace: Option<PathBuf>,
    /// List the built-in profiles and exit.
    #[arg(long)]
    list_profiles: bool,
    /// Write a Hugging Face tokenizer (tokenizer.json, tokenizer_config.json, config.json) that counts
    /// tokens exactly like the sim into DIR, and exit: for load generators that need a local tokenizer.
    #[arg(long, value_name = "DIR")]
    write_tokenizer: Option<PathBuf>,
}

fn options(args: SimArgs) -> Result<SimOptions, String> {
    let profile = Profile::resolve(&args.profile).map_err(|e| format!("--profile: {e}"))?;
    let host: IpAddr = args
        .host
        .parse()
        .map_err(|_| format!("--host: `{}` is not an IP address (e.g. 127.0.0.1 or ::1)", args.host))?;
    let port: u16 = args
        .port
        .parse()
        .map_err(|_| format!("--port: `{}` is not a port number (0-65535; 0 = any free port)", args.port))?;
    let flavor: Flavor = args.flavor.parse().map_err(|e| format!("--flavor: {e}"))?;
    let faults = args
        .fault
        .iter()
        .map(|f| f.parse::<ServerFault>().map_err(|e| format!("--fault: {e}")))
        .collect::<Result<Vec<_>, _>>()?;
    if args.api_key.as_deref().is_some_and(|k| k.trim().is_empty()) {
        return Err("--api-key: must not be empty".into());
    }
    let mut opts = SimOptions::new(profile);
    opts.host = host;
    opts.port = port;
    opts.api_key = args.api_key;
    opts.model = args.model;
    opts.flavor = flavor;
    opts.faults = faults;
    opts.trace = args.trace;
    Ok(opts)
}

fn list_profiles() {
    for name in Profile::builtin_names() {
        if let Some(p) = Profile::builtin(name) {
            println!(
                "{name}\tmodel {}, max_model_len {}, KV {} tokens, max_num_seqs {}",
                p.model, p.max_model_len, p.kv_cache_tokens, p.max_num_seqs
            );
        }
    }
}

fn write_tokenizer(profile: &str, dir: &std::path::Path) -> ExitCode {
    let profile = match Profile::resolve(profile) {
        Ok(p) => p,
        Err(e) => {
            eprintln!("error: --profile: {e}");
            return ExitCode::from(1);
        }
    };
    match sm_sim::hf_tokenizer::write(dir, profile.max_model_len) {
        Ok(()) => {
            println!("speedmatrix sim: wrote the tokenizer to {}", dir.display());
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("error: --write-tokenizer: cannot write {}: {e}", dir.display());
            ExitCode::from(1)
        }
    }
}

async fn stop_signal() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        if let Ok(mut term) = signal(SignalKind::terminate()) {
            tokio::select! {
                _ = tokio::signal::ctrl_c() => {}
                _ = term.recv() => {}
            }
            return;
        }
    }
    let _ = tokio::signal::ctrl_c().await;
}

pub async fn main(args: SimArgs) -> ExitCode {
    if args.list_profiles {
        list_profiles();
        return ExitCode::SUCCESS;
    }
    if let Some(dir) = args.write_tokenizer.clone() {
        return write_tokenizer(&args.profile, &dir);
    }
    let opts = match options(args) {
        Ok(o) => o,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(1);
        }
    };
    let (profile, flavor) = (opts.profile.name.clone(), opts.flavor);
    let sim = match sm_sim::start(opts).await {
        Ok(s) => s,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(1);
        }
    };
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "speedmatrix sim: serving {profile} ({flavor}) at {}", sim.url());
    let _ = out.flush();
    drop(out);
    stop_signal().await;
    // One line for benchmarks (bench/fidelity): the trace records release times, and this says how
    // much later the HTTP handlers wrote those tokens, which a client's TTFT includes.
    let e = sim.emission_stats();
    eprintln!(
        "speedmatrix sim: emission lateness vs schedule, ms: release p50 {:.3} p99 {:.3}; handler write p50 {:.3} \
         p99 {:.3}; {} tokens",
        e.scheduler.quantile_ms(0.5),
        e.scheduler.quantile_ms(0.99),
        e.handler.quantile_ms(0.5),
        e.handler.quantile_ms(0.99),
        e.handler.count()
    );
    sim.shutdown().await;
    ExitCode::SUCCESS
}
