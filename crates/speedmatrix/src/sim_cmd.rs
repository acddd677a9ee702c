//! `speedmatrix sim`: serve the built-in simulated inference engine.

use std::io::Write;
use std::net::IpAddr;
use std::path::PathBuf;
use std::process::ExitCode;

use sm_sim::speculative::{Speculative, SpeculativeError};
use sm_sim::{Flavor, Profile, Reasoning, ReasoningField, ServerFault, SimOptions};

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
    /// stall-after=N, no-usage, multi-token=K, loop, slow-first-token=MS, counter-skew=PCT (the
    /// /metrics generation counter reads PCT % of the truth). `SPEC@KEY=VALUE[,…]` limits
    /// it to some requests: prompt=TEXT (the prompt contains TEXT), max-tokens=N, from=N, to=N (the
    /// N-th matching request on, or up to).
    #[arg(long, value_name = "SPEC[@SCOPE]")]
    fault: Vec<String>,
    /// The scheduler's running-sequence limit (1 to 65536; vLLM's --max-num-seqs), overriding the
    /// profile's `max_num_seqs`: requests beyond it wait. Discovery sees it where the flavor reports it
    /// (sglang, tgi, llamacpp; vLLM's /metrics does not say).
    #[arg(long, value_name = "N")]
    max_num_seqs: Option<String>,
    /// The KV cache budget in tokens, overriding the profile's `kv_cache_tokens`; rounded down to whole
    /// blocks of the profile's `block_size`, and at least its `max_model_len`. Discovery sees it (vLLM:
    /// `vllm:cache_config_info` num_gpu_blocks × block_size), and so does over-capacity planning.
    #[arg(long, value_name = "TOKENS")]
    kv_cache_tokens: Option<String>,
    /// Multiply every decode step's and prefill's duration by X (0.1 to 10): a slower (above 1) or
    /// faster (below 1) GPU with the profile's shape.
    #[arg(long, value_name = "X")]
    step_scale: Option<String>,
    /// Vary each decode step's duration randomly with this coefficient of variation (0 to 2; mean kept),
    /// overriding the profile's `[noise] step_cv`.
    #[arg(long, value_name = "CV")]
    step_noise: Option<String>,
    /// Slow the decode steps by this % of the profile's time per minute since start (0 to 600), like a
    /// throttling server, overriding the profile's `[noise] drift_pct_per_min`.
    #[arg(long, value_name = "PCT_PER_MIN")]
    drift: Option<String>,
    /// Speculative decoding: verify K draft tokens per decode step (1 to 64), overriding the profile's
    /// `[speculative] draft_tokens`; needs an acceptance (here or in the profile).
    #[arg(long, value_name = "K")]
    spec_draft: Option<String>,
    /// Speculative decoding: each draft token is accepted with probability P (0 to 1) until the first
    /// rejection, overriding the profile's `[speculative] acceptance`.
    #[arg(long, value_name = "P")]
    spec_acceptance: Option<String>,
    /// A reasoning model: each chat answer starts with N thinking tokens, or a uniform draw from
    /// MIN-MAX per request, overriding the profile's `[reasoning] tokens`.
    #[arg(long, value_name = "N|MIN-MAX")]
    reasoning_tokens: Option<String>,
    /// The delta field thinking is streamed in: reasoning_content (default) or reasoning, overriding
    /// the profile's `[reasoning] field`; needs a count (here or in the profile).
    #[arg(long, value_name = "FIELD")]
    reasoning_field: Option<String>,
    /// Of the tool calls (chat requests with `tools`), the share whose arguments are deliberately
    /// not valid JSON (0 to 1, drawn per request), overriding the profile's `[tools] invalid_json`.
    #[arg(long, value_name = "SHARE")]
    tools_invalid_json: Option<String>,
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

/// `--max-num-seqs` / `--kv-cache-tokens` / `--step-scale` over the profile's scheduler, KV and speed.
fn engine_overrides(
    profile: &mut Profile,
    max_num_seqs: Option<&str>,
    kv_cache_tokens: Option<&str>,
    step_scale: Option<&str>,
) -> Result<(), String> {
    let whole = |flag: &str, v: &str, example: &str| -> Result<u64, String> {
        let t = v.trim();
        match t.parse::<u64>() {
            Ok(n) => Ok(n),
            Err(_) if t.starts_with('-') && t[1..].parse::<u64>().is_ok() => {
                Err(format!("{flag}: must be positive, got {t}"))
            }
            Err(_) if t.chars().all(|c| c.is_ascii_digit()) && !t.is_empty() => {
                Err(format!("{flag}: `{v}` is too large"))
            }
            Err(_) => Err(format!("{flag}: `{v}` is not a whole number (e.g. {example})")),
        }
    };
    if let Some(v) = max_num_seqs {
        let n = whole("--max-num-seqs", v, "256")?;
        *profile = profile.clone().with_max_num_seqs(n).map_err(|e| format!("--max-num-seqs: {e}"))?;
    }
    if let Some(v) = kv_cache_tokens {
        let n = whole("--kv-cache-tokens", v, "1048576")?;
        *profile = profile.clone().with_kv_cache_tokens(n).map_err(|e| format!("--kv-cache-tokens: {e}"))?;
    }
    if let Some(v) = step_scale {
        let x = v
            .trim()
            .parse::<f64>()
            .map_err(|_| format!("--step-scale: `{v}` is not a number (e.g. 2 for a GPU half as fast)"))?;
        *profile = profile.clone().with_step_scale(x).map_err(|e| format!("--step-scale: {e}"))?;
    }
    Ok(())
}

/// `--step-noise` / `--drift` over the profile's `[noise]`.
fn noise_overrides(profile: &mut Profile, step_noise: Option<&str>, drift: Option<&str>) -> Result<(), String> {
    let number = |flag: &str, v: &str, example: &str| -> Result<f64, String> {
        v.trim().parse::<f64>().map_err(|_| format!("{flag}: `{v}` is not a number (e.g. {example})"))
    };
    if let Some(v) = step_noise {
        let cv = number("--step-noise", v, "0.2 for steps that vary by 20 %")?;
        profile.noise = profile.noise.with_step_cv(cv).map_err(|e| format!("--step-noise: {e}"))?;
    }
    if let Some(v) = drift {
        let pct = number("--drift", v, "5 for 5 % slower per minute")?;
        profile.noise = profile.noise.with_drift(pct).map_err(|e| format!("--drift: {e}"))?;
    }
    Ok(())
}

/// `--spec-draft` / `--spec-acceptance` over the profile's `[speculative]`.
fn spec_overrides(profile: &mut Profile, draft: Option<&str>, acceptance: Option<&str>) -> Result<(), String> {
    if draft.is_none() && acceptance.is_none() {
        return Ok(());
    }
    let base = profile.speculative;
    let k = match draft {
        Some(v) => {
            v.trim().parse::<u32>().map_err(|_| format!("--spec-draft: `{v}` is not a whole number (e.g. 4)"))?
        }
        None => {
            base.map(|s| s.draft_tokens).ok_or("--spec-acceptance: needs --spec-draft K (draft tokens per step)")?
        }
    };
    let p = match acceptance {
        Some(v) => {
            v.trim().parse::<f64>().map_err(|_| format!("--spec-acceptance: `{v}` is not a number (e.g. 0.7)"))?
        }
        None => base.map(|s| s.acceptance).ok_or("--spec-draft: needs --spec-acceptance P (0 to 1)")?,
    };
    let seed = base.map_or(0, |s| s.seed);
    profile.speculative = Some(Speculative::new(k, p, seed).map_err(|e| {
        let flag = match e {
            SpeculativeError::DraftTokens(_) => "--spec-draft",
            SpeculativeError::Acceptance(_) => "--spec-acceptance",
        };
        format!("{flag}: {e}")
    })?);
    Ok(())
}

/// `--reasoning-tokens` / `--reasoning-field` over the profile's `[reasoning]`.
fn reasoning_overrides(profile: &mut Profile, tokens: Option<&str>, field: Option<&str>) -> Result<(), String> {
    if tokens.is_none() && field.is_none() {
        return Ok(());
    }
    let base = profile.reasoning;
    let (min, max) = match tokens {
        Some(v) => sm_sim::reasoning::parse_tokens(v).map_err(|e| format!("--reasoning-tokens: {e}"))?,
        None => base.map(|r| (r.min, r.max)).ok_or("--reasoning-field: needs --reasoning-tokens N|MIN-MAX")?,
    };
    let field = match field {
        Some(v) => v.parse::<ReasoningField>().map_err(|e| format!("--reasoning-field: {e}"))?,
        None => base.map_or(ReasoningField::default(), |r| r.field),
    };
    let seed = base.map_or(0, |r| r.seed);
    profile.reasoning = Some(Reasoning::new(min, max, field, seed).map_err(|e| format!("--reasoning-tokens: {e}"))?);
    Ok(())
}

/// `--tools-invalid-json` over the profile's `[tools]`.
fn tools_override(profile: &mut Profile, share: Option<&str>) -> Result<(), String> {
    let Some(v) = share else { return Ok(()) };
    let share: f64 = v.trim().parse().map_err(|_| format!("--tools-invalid-json: `{v}` is not a number"))?;
    profile.tools = sm_sim::Tools::new(share, profile.tools.seed).map_err(|e| format!("--tools-invalid-json: {e}"))?;
    Ok(())
}

fn options(args: SimArgs) -> Result<SimOptions, String> {
    let mut profile = Profile::resolve(&args.profile).map_err(|e| format!("--profile: {e}"))?;
    engine_overrides(
        &mut profile,
        args.max_num_seqs.as_deref(),
        args.kv_cache_tokens.as_deref(),
        args.step_scale.as_deref(),
    )?;
    noise_overrides(&mut profile, args.step_noise.as_deref(), args.drift.as_deref())?;
    spec_overrides(&mut profile, args.spec_draft.as_deref(), args.spec_acceptance.as_deref())?;
    reasoning_overrides(&mut profile, args.reasoning_tokens.as_deref(), args.reasoning_field.as_deref())?;
    tools_override(&mut profile, args.tools_invalid_json.as_deref())?;
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn noise_flags_override_the_profile_and_check_their_values() {
        let text = "[noise]\nstep_cv = 0.1\ndrift_pct_per_min = 2\nseed = 9\n";
        let base = Profile::from_toml_str(&format!(
            "{}\n{text}",
            "name = \"n\"\nmodel = \"n\"\nmax_model_len = 1024\nkv_cache_tokens = 4096\nblock_size = 16\n\
             max_num_seqs = 4\nmax_num_batched_tokens = 512\n[prefill]\ncontexts = [1024]\ntokens_per_s = [1000]\n\
             [decode]\nbatch = [1]\ncontexts = [1024]\nstep_ms = [[5]]\n[overhead]\ncached_prefill_ms = 1\n"
        ))
        .unwrap();
        let mut p = base.clone();
        noise_overrides(&mut p, None, None).unwrap();
        assert_eq!(p.noise, base.noise);
        noise_overrides(&mut p, Some("0.4"), Some("7.5")).unwrap();
        assert_eq!((p.noise.step_cv, p.noise.drift_pct_per_min, p.noise.seed), (0.4, 7.5, 9));
        let mut p = base.clone();
        noise_overrides(&mut p, None, Some("0")).unwrap();
        assert_eq!((p.noise.step_cv, p.noise.drift_pct_per_min), (0.1, 0.0), "one flag leaves the other key");
        for (cv, drift, want) in [
            (Some("x"), None, "--step-noise: `x` is not a number"),
            (Some("2.5"), None, "--step-noise: must be a number from 0 to 2, got 2.5"),
            (None, Some("-1"), "--drift: must be a number from 0 to 600, got -1"),
            (None, Some("5%"), "--drift: `5%` is not a number"),
        ] {
            let e = noise_overrides(&mut base.clone(), cv, drift).unwrap_err();
            assert!(e.starts_with(want), "{e}");
        }
    }

    #[test]
    fn engine_flags_override_the_profile_and_check_their_values() {
        let tiny = Profile::builtin("tiny").unwrap();
        let mut p = tiny.clone();
        engine_overrides(&mut p, None, None, None).unwrap();
        assert_eq!(p, tiny);
        engine_overrides(&mut p, Some("8"), Some("40010"), Some("2")).unwrap();
        assert_eq!((p.max_num_seqs, p.kv_cache_tokens, p.num_gpu_blocks()), (8, 40_000, 2_500));
        assert!((p.step_ms(1.0, 1024.0) - 4.0).abs() < 1e-9);
        for (n, kv, x, want) in [
            (Some("0"), None, None, "--max-num-seqs: must be from 1 to 65536, got 0"),
            (Some("-4"), None, None, "--max-num-seqs: must be positive, got -4"),
            (Some("1e3"), None, None, "--max-num-seqs: `1e3` is not a whole number (e.g. 256)"),
            (Some("100000"), None, None, "--max-num-seqs: must be from 1 to 65536, got 100000"),
            (None, Some("99999999999999999999999"), None, "--kv-cache-tokens: `99999999999999999999999` is too large"),
            (None, Some("1000"), None, "--kv-cache-tokens: 1000 (in whole blocks of 16: 992) is less than"),
            (None, Some("lots"), None, "--kv-cache-tokens: `lots` is not a whole number"),
            (None, None, Some("0"), "--step-scale: must be a number from 0.1 to 10, got 0"),
            (None, None, Some("-1"), "--step-scale: must be a number from 0.1 to 10, got -1"),
            (None, None, Some("20"), "--step-scale: must be a number from 0.1 to 10, got 20"),
            (None, None, Some("fast"), "--step-scale: `fast` is not a number"),
        ] {
            let e = engine_overrides(&mut tiny.clone(), n, kv, x).unwrap_err();
            assert!(e.starts_with(want), "{e}");
        }
    }

    #[test]
    fn spec_flags_set_the_profile_and_check_their_values() {
        let mut p = Profile::builtin("tiny").unwrap();
        spec_overrides(&mut p, None, None).unwrap();
        assert!(p.speculative.is_none());
        spec_overrides(&mut p, Some("4"), Some("0.6")).unwrap();
        let s = p.speculative.unwrap();
        assert_eq!((s.draft_tokens, s.acceptance), (4, 0.6));
        spec_overrides(&mut p, None, Some("0.3")).unwrap();
        assert_eq!(p.speculative.unwrap().draft_tokens, 4, "one flag keeps the other");
        for (k, a, want) in [
            (Some("x"), Some("0.5"), "--spec-draft: `x` is not a whole number"),
            (Some("0"), Some("0.5"), "--spec-draft: draft_tokens must be from 1 to 64"),
            (Some("3"), Some("1.5"), "--spec-acceptance: acceptance must be a probability"),
            (Some("3"), None, "--spec-draft: needs --spec-acceptance"),
        ] {
            let e = spec_overrides(&mut Profile::builtin("tiny").unwrap(), k, a).unwrap_err();
            assert!(e.starts_with(want), "{e}");
        }
    }

    #[test]
    fn the_tools_flag_sets_the_invalid_share() {
        let mut p = Profile::builtin("tiny").unwrap();
        tools_override(&mut p, None).unwrap();
        assert_eq!(p.tools.invalid_json, 0.0);
        tools_override(&mut p, Some("0.25")).unwrap();
        assert_eq!(p.tools.invalid_json, 0.25);
        let e = tools_override(&mut p, Some("2")).unwrap_err();
        assert!(e.starts_with("--tools-invalid-json: must be a share between 0 and 1"), "{e}");
        assert!(tools_override(&mut p, Some("x")).unwrap_err().contains("is not a number"));
    }

    #[test]
    fn reasoning_flags_set_the_profile_and_check_their_values() {
        let mut p = Profile::builtin("tiny").unwrap();
        reasoning_overrides(&mut p, None, None).unwrap();
        assert!(p.reasoning.is_none());
        reasoning_overrides(&mut p, Some("100-400"), None).unwrap();
        let r = p.reasoning.unwrap();
        assert_eq!((r.min, r.max, r.field), (100, 400, ReasoningField::ReasoningContent));
        reasoning_overrides(&mut p, None, Some("reasoning")).unwrap();
        let r = p.reasoning.unwrap();
        assert_eq!((r.min, r.max, r.field), (100, 400, ReasoningField::Reasoning), "one flag keeps the other");
        reasoning_overrides(&mut p, Some("64"), None).unwrap();
        assert_eq!((p.reasoning.unwrap().min, p.reasoning.unwrap().max), (64, 64));
        for (n, f, want) in [
            (Some("x"), None, "--reasoning-tokens: `x` is not N or MIN-MAX"),
            (Some("9-3"), None, "--reasoning-tokens: the range's MIN 9 is above its MAX 3"),
            (Some("8"), Some("think"), "--reasoning-field: `think` is not a reasoning field"),
            (None, Some("reasoning"), "--reasoning-field: needs --reasoning-tokens"),
        ] {
            let e = reasoning_overrides(&mut Profile::builtin("tiny").unwrap(), n, f).unwrap_err();
            assert!(e.starts_with(want), "{e}");
        }
    }
}
