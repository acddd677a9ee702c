//! Which rank this process is of a multi-process run (docs/distributed.md): from the flags, else
//! from the environment a launcher sets — plain `SPEEDMATRIX_*`, a Kubernetes Indexed Job
//! (`JOB_COMPLETION_INDEX`), Slurm (`SLURM_PROCID`, `SLURM_NTASKS`) — resolved once.

use std::time::Duration;

use sm_bench::PhaseConfig;

use crate::limits;

/// The port rank 0 listens on when `--coordinator` names none.
pub(crate) const DEFAULT_PORT: u16 = 7478;
/// The most ranks one run may have.
const MAX_RANKS: u32 = 1024;
/// How long rank 0 waits for the workers, and a worker for rank 0, by default.
pub(crate) const DEFAULT_RANK_WAIT: Duration = Duration::from_secs(300);

#[derive(Debug, clap::Args)]
pub struct RankArgs {
    /// This process's rank, 0..N−1, in a run spread over N processes (docs/distributed.md); rank 0
    /// runs the plan and writes the results, the others drive their share of every decode cell's
    /// streams [env: SPEEDMATRIX_RANK, JOB_COMPLETION_INDEX, SLURM_PROCID] [default: 0].
    #[arg(long)]
    pub(crate) rank: Option<u32>,
    /// How many processes the run is spread over [env: SPEEDMATRIX_RANKS, SLURM_NTASKS] [default: 1].
    #[arg(long)]
    pub(crate) ranks: Option<u32>,
    /// HOST:PORT of rank 0, the same on every rank (a HOST alone gets port 7478); rank 0 listens on
    /// PORT on every interface [env: SPEEDMATRIX_COORDINATOR] [default: 0.0.0.0:7478 on rank 0; the
    /// other ranks need it].
    #[arg(long, value_name = "HOST:PORT")]
    pub(crate) coordinator: Option<String>,
    /// How long rank 0 waits for every worker to join, and a worker for rank 0 [default: 5m].
    #[arg(long, value_parser = |s: &str| limits::RANK_WAIT.parse(s))]
    pub(crate) rank_wait: Option<Duration>,
}

/// This process's place in a run of several ranks (`ranks` ≥ 2).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Ranks {
    pub rank: u32,
    pub ranks: u32,
    /// Rank 0's address as HOST:PORT.
    pub coordinator: String,
    pub wait: Duration,
}

impl Ranks {
    pub(crate) fn port(&self) -> u16 {
        self.coordinator.rsplit_once(':').and_then(|(_, p)| p.parse().ok()).unwrap_or(DEFAULT_PORT)
    }
}

/// A value and where it came from (a flag or a variable), for the error that names it.
fn number(
    flag: Option<u32>,
    flag_name: &str,
    vars: &[&str],
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<Option<(u32, String)>, String> {
    if let Some(v) = flag {
        return Ok(Some((v, format!("{flag_name} {v}"))));
    }
    for var in vars {
        if let Some(text) = env(var).filter(|t| !t.trim().is_empty()) {
            let v = text.trim().parse::<u32>().map_err(|_| {
                format!(
                    "{var}={text} is not a whole number: set it to this process's {} or pass {flag_name}",
                    &flag_name[2..]
                )
            })?;
            return Ok(Some((v, format!("{var}={v}"))));
        }
    }
    Ok(None)
}

/// The rank settings from the flags over the environment; `None` for an ordinary single run.
pub(crate) fn resolve(args: &RankArgs, env: &dyn Fn(&str) -> Option<String>) -> Result<Option<Ranks>, String> {
    let rank = number(args.rank, "--rank", &["SPEEDMATRIX_RANK", "JOB_COMPLETION_INDEX", "SLURM_PROCID"], env)?;
    let ranks = number(args.ranks, "--ranks", &["SPEEDMATRIX_RANKS", "SLURM_NTASKS"], env)?;
    let Some((n, n_from)) = ranks else {
        // a launcher's index alone (an Indexed Job of independent runs) is no multi-rank run
        return match (args.rank, &args.coordinator) {
            (Some(r), _) => Err(format!("--rank {r} needs --ranks N: how many processes the run is spread over")),
            (None, Some(_)) => Err("--coordinator needs --ranks N: how many processes the run is spread over".into()),
            (None, None) => Ok(None),
        };
    };
    if n == 0 || n > MAX_RANKS {
        return Err(format!("{n_from}: a run has 1 to {MAX_RANKS} ranks (processes)"));
    }
    let (r, r_from) = rank.unwrap_or((0, "the default rank 0".into()));
    if r >= n {
        return Err(format!("{r_from} is not below {n_from}: ranks are numbered 0 to {}", n - 1));
    }
    if n == 1 {
        return Ok(None);
    }
    let coordinator =
        args.coordinator.clone().or_else(|| env("SPEEDMATRIX_COORDINATOR").filter(|c| !c.trim().is_empty()));
    let coordinator = match coordinator {
        Some(c) => address(c.trim())?,
        None if r == 0 => format!("0.0.0.0:{DEFAULT_PORT}"),
        None => {
            return Err(format!(
                "rank {r} of {n} needs rank 0's address: pass --coordinator HOST:PORT or set SPEEDMATRIX_COORDINATOR"
            ));
        }
    };
    Ok(Some(Ranks { rank: r, ranks: n, coordinator, wait: args.rank_wait.unwrap_or(DEFAULT_RANK_WAIT) }))
}

/// What a run of several ranks cannot do yet, refused before anything starts.
pub(crate) fn fits(r: &Ranks, server: bool, phases: &PhaseConfig) -> Result<(), String> {
    let n = r.ranks;
    if !server {
        return Err(format!(
            "--ranks {n} measures a server every rank can reach: give every rank the same --url (the built-in engine is rank 0's alone)"
        ));
    }
    let one_process = [
        (phases.mixed_prefill.is_some(), "--mixed-prefill"),
        (phases.sessions.is_some(), "--sessions"),
        // every rank would need every prompt of the trace up front
        (phases.replay.is_some(), "--replay"),
    ];
    if let Some((_, flag)) = one_process.iter().find(|(asked, _)| *asked) {
        return Err(format!(
            "{flag} runs in one process: measure it without --ranks {n} (ranks share the decode matrix, --request-rate and --burst)"
        ));
    }
    if let Some(cap) = phases.rate.as_ref().and_then(|c| c.max_concurrency).filter(|&c| c < n) {
        return Err(format!(
            "--max-concurrency {cap} is shared out over the {n} ranks: give at least one per rank (--max-concurrency {n} or more)"
        ));
    }
    Ok(())
}

/// HOST:PORT, or HOST with the default port.
fn address(text: &str) -> Result<String, String> {
    let bad = || format!("--coordinator {text} is not HOST:PORT (e.g. speedmatrix-0.speedmatrix:{DEFAULT_PORT})");
    match text.rsplit_once(':') {
        // an IPv6 address is written [::1]:PORT
        Some((host, port)) if !host.is_empty() && !text.ends_with(']') => {
            port.parse::<u16>().ok().filter(|p| *p > 0).ok_or_else(bad)?;
            Ok(text.to_string())
        }
        _ if text.is_empty() || text.contains('/') => Err(bad()),
        _ => Ok(format!("{text}:{DEFAULT_PORT}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(rank: Option<u32>, ranks: Option<u32>, coordinator: Option<&str>) -> RankArgs {
        RankArgs { rank, ranks, coordinator: coordinator.map(str::to_string), rank_wait: None }
    }

    fn with(vars: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
        let vars: Vec<(String, String)> = vars.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        move |k| vars.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone())
    }

    #[test]
    fn no_ranks_is_a_single_run() {
        assert_eq!(resolve(&args(None, None, None), &with(&[])), Ok(None));
        // an Indexed Job of independent runs: the index alone does not make ranks
        assert_eq!(resolve(&args(None, None, None), &with(&[("JOB_COMPLETION_INDEX", "3")])), Ok(None));
        assert_eq!(resolve(&args(None, Some(1), None), &with(&[])), Ok(None));
    }

    #[test]
    fn flags_come_before_the_launchers() {
        let env = with(&[("SLURM_PROCID", "2"), ("SLURM_NTASKS", "4"), ("SPEEDMATRIX_COORDINATOR", "node1")]);
        let r = resolve(&args(None, None, None), &env).unwrap().unwrap();
        assert_eq!((r.rank, r.ranks, r.coordinator.as_str(), r.port()), (2, 4, "node1:7478", 7478));
        let r = resolve(&args(Some(1), Some(3), Some("10.0.0.5:9000")), &env).unwrap().unwrap();
        assert_eq!((r.rank, r.ranks, r.coordinator.as_str(), r.port()), (1, 3, "10.0.0.5:9000", 9000));
        let k8s = with(&[("JOB_COMPLETION_INDEX", "0"), ("SPEEDMATRIX_RANKS", "3")]);
        let r = resolve(&args(None, None, None), &k8s).unwrap().unwrap();
        assert_eq!((r.rank, r.coordinator.as_str()), (0, "0.0.0.0:7478"));
    }

    #[test]
    fn bad_ranks_are_refused_with_what_to_do() {
        let e = resolve(&args(Some(3), Some(3), Some("h:1")), &with(&[])).unwrap_err();
        assert!(e.contains("--rank 3 is not below --ranks 3") && e.contains("0 to 2"), "{e}");
        let e = resolve(&args(Some(1), None, None), &with(&[])).unwrap_err();
        assert!(e.contains("needs --ranks N"), "{e}");
        let e = resolve(&args(None, Some(2), None), &with(&[("SLURM_PROCID", "x")])).unwrap_err();
        assert!(e.contains("SLURM_PROCID=x is not a whole number"), "{e}");
        let e = resolve(&args(Some(1), Some(2), None), &with(&[])).unwrap_err();
        assert!(e.contains("needs rank 0's address"), "{e}");
        let e = resolve(&args(Some(1), Some(2), Some("h:0")), &with(&[])).unwrap_err();
        assert!(e.contains("is not HOST:PORT"), "{e}");
        assert!(resolve(&args(None, Some(0), None), &with(&[])).unwrap_err().contains("1 to 1024"));
    }
}
