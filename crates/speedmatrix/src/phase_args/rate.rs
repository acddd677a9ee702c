//! The flags of issue 17 §1 open-loop arrivals at a rate (methodology §13.1).

use anyhow::{Result, bail};
use sm_bench::RateConfig;
use sm_core::phases::rate::{Arrival, RequestRate};
use sm_core::record::RunRecord;

/// `--request-rate 2,4,8,16` parsed.
#[derive(Debug, Clone, PartialEq)]
pub struct RateList(pub Vec<RequestRate>);

/// The most levels one sweep may list.
const MAX_LEVELS: usize = 32;

fn rate_list(text: &str) -> Result<RateList, String> {
    let rates: Vec<RequestRate> = text
        .split(',')
        .filter(|p| !p.trim().is_empty())
        .map(str::parse)
        .collect::<Result<_, sm_core::phases::rate::RateError>>()
        .map_err(|e| e.to_string())?;
    if rates.is_empty() {
        return Err("give at least one rate, e.g. 2,4,8 (requests/s) or inf".into());
    }
    if rates.len() > MAX_LEVELS {
        return Err(format!("{} rates are too many: give at most {MAX_LEVELS}", rates.len()));
    }
    Ok(RateList(rates))
}

fn arrival(text: &str) -> Result<Arrival, String> {
    text.parse().map_err(|e: sm_core::phases::rate::RateError| e.to_string())
}

fn max_concurrency(text: &str) -> Result<u32, String> {
    match text.trim().parse::<u32>() {
        Ok(n) if (1..=100_000).contains(&n) => Ok(n),
        _ => Err(format!("'{text}' is not a cap: give the most requests in flight at once, 1 to 100000")),
    }
}

fn requests(text: &str) -> Result<u64, String> {
    match text.trim().parse::<u64>() {
        Ok(n) if (1..=RateConfig::MAX_LEVEL_REQUESTS).contains(&n) => Ok(n),
        _ => Err(format!(
            "'{text}' is not a request count: give requests per level, 1 to {}",
            RateConfig::MAX_LEVEL_REQUESTS
        )),
    }
}

#[derive(Debug, Default, clap::Args)]
pub struct RateArgs {
    /// Open-loop arrivals: one level per rate, in requests/s (decimals allowed; `inf` sends every
    /// request of the level at once), e.g. 2,4,8,16. Each level runs for --duration (or
    /// --requests); a sweep stops after two saturated levels.
    #[arg(long, value_name = "RATES", value_parser = rate_list)]
    pub(crate) request_rate: Option<RateList>,
    /// With --request-rate: how the gaps between due times are drawn: poisson, constant, or gamma:CV
    /// (a coefficient of variation above 0; 1 is poisson, above 1 burstier) [default: poisson].
    #[arg(long, value_name = "PROCESS", value_parser = arrival)]
    pub(crate) arrival: Option<Arrival>,
    /// With --request-rate: the most requests in flight at once (as in `vllm bench serve`); a
    /// request due while the cap is full waits, and its wait counts in its latency [default: no cap].
    #[arg(long, value_name = "N", value_parser = max_concurrency)]
    pub(crate) max_concurrency: Option<u32>,
    /// With --request-rate: send this many requests per level instead of a --duration window
    /// (required with `inf`) [default: a --duration window per level].
    #[arg(long, value_name = "N", value_parser = requests)]
    pub(crate) requests: Option<u64>,
    /// With --request-rate: the seed of the schedule's generator; the same seed sends the same
    /// schedule [default: 17].
    #[arg(long, value_name = "N")]
    pub(crate) seed: Option<u64>,
    /// With --request-rate: the longest a level waits, after its last due time, for requests still
    /// running [default: 10m]. Within it the level's own bound ends the wait: twice the sum of its
    /// TTFT p90 and its TBT p90 × max tokens, at least 5s. Requests still running then are cut by
    /// the client: never counted against the server, they make the level's verdict unknown.
    #[arg(long, value_name = "DURATION", value_parser = |s: &str| crate::limits::DRAIN_MAX.parse(s))]
    pub(crate) drain_max: Option<std::time::Duration>,
}

impl RateArgs {
    /// Whether any of this phase's flags was given.
    pub(crate) fn given(&self) -> bool {
        self.request_rate.is_some()
    }

    /// The phase's settings, or `None` when it does not run.
    /// `replay`: whether `--replay` was given, which takes `--max-concurrency` and `--drain-max` too.
    pub(crate) fn resolve(&self, resumed: Option<&RunRecord>, replay: bool) -> Result<Option<RateConfig>> {
        let Some(RateList(rates)) = &self.request_rate else {
            let stray = [
                ("--arrival", self.arrival.is_some()),
                ("--max-concurrency", self.max_concurrency.is_some() && !replay),
                ("--requests", self.requests.is_some()),
                ("--seed", self.seed.is_some()),
                ("--drain-max", self.drain_max.is_some() && !replay),
            ];
            if let Some((flag, _)) = stray.iter().find(|(_, given)| *given) {
                if resumed.is_none() {
                    bail!("{flag} goes with --request-rate: add e.g. --request-rate 2,4,8");
                }
                bail!("{flag} cannot change a resumed run's rate phase: resume without it");
            }
            return Ok(resumed.and_then(|r| r.phases.rate.as_ref()).map(|p| RateConfig {
                rates: p.settings.rates.clone(),
                arrival: p.settings.arrival,
                max_concurrency: p.settings.max_concurrency,
                requests: p.settings.requests,
                seed: p.settings.seed,
                drain_max: std::time::Duration::from_secs_f64(p.settings.drain_max_s),
            }));
        };
        if rates.contains(&RequestRate::Inf) && self.requests.is_none() {
            bail!("--request-rate inf sends every request of the level at once, so it needs a count: add --requests N");
        }
        Ok(Some(RateConfig {
            rates: RateConfig::ordered(rates.clone()),
            arrival: self.arrival.unwrap_or(Arrival::Poisson),
            max_concurrency: self.max_concurrency,
            requests: self.requests,
            seed: self.seed.unwrap_or(RateConfig::DEFAULT_SEED),
            drain_max: self.drain_max.unwrap_or(RateConfig::DEFAULT_DRAIN_MAX),
        }))
    }
}
