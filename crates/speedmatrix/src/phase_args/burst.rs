//! The flags of issue 17 §2 bursts.

use anyhow::Result;
use sm_bench::BurstConfig;
use sm_core::record::RunRecord;

use crate::limits::CountLimit;

/// `--burst-rounds`: each round sends every burst again; 10 rounds give a steady median, and keep a
/// full plan's bursts within what the site takes (sm-site `MAX_BURST_ROUNDS`).
pub const BURST_ROUNDS: CountLimit = CountLimit {
    flag: "--burst-rounds",
    min: 1,
    max: 10,
    hint: "how many times each burst is sent (the page shows the median); the default is 1",
};

#[derive(Debug, Default, clap::Args)]
pub struct BurstArgs {
    /// Bursts: for each context × concurrency of the plan, send exactly C requests at once, each to
    /// its end (--max-tokens; --no-ignore-eos lets it stop early), and report end-to-end latency,
    /// time to the last completion, TTFT and tok/s over the burst. The server is drained between
    /// bursts. With --prompts, one burst per concurrency, each request its own line of the file.
    #[arg(long)]
    pub(crate) burst: bool,
    /// With --burst: send each burst this many times (1 to 10) and report the median of each figure
    /// [default: 1].
    #[arg(long, value_name = "N", value_parser = |s: &str| BURST_ROUNDS.parse_u32(s))]
    pub(crate) burst_rounds: Option<u32>,
    /// With --burst: let each request end where the model stops on its own (at most --max-tokens),
    /// instead of asking the server to ignore end-of-sequence. The decode matrix always ignores it.
    #[arg(long)]
    pub(crate) no_ignore_eos: bool,
}

impl BurstArgs {
    /// Whether any of this phase's flags was given.
    pub(crate) fn given(&self) -> bool {
        self.burst || self.burst_rounds.is_some() || self.no_ignore_eos
    }

    /// The phase's settings, or `None` when it does not run. On `--resume` without `--burst`, the
    /// recorded phase continues with its recorded rounds.
    pub(crate) fn resolve(&self, resumed: Option<&RunRecord>) -> Result<Option<BurstConfig>> {
        anyhow::ensure!(
            self.burst || self.burst_rounds.is_none(),
            "--burst-rounds sets how often each burst is sent: add --burst (or leave --burst-rounds out)"
        );
        anyhow::ensure!(
            self.burst || !self.no_ignore_eos,
            "--no-ignore-eos lets the bursts' requests end on their own: add --burst (the decode matrix always ignores end-of-sequence)"
        );
        let recorded = resumed.and_then(|r| r.phases.burst.as_ref()).filter(|p| p.imported_from.is_none());
        if self.burst {
            let rounds = self.burst_rounds.or(recorded.map(|p| p.rounds)).unwrap_or(1);
            if let Some(old) = recorded.filter(|p| p.rounds != rounds) {
                anyhow::bail!(
                    "cannot resume: this run sent each burst {} time(s), not {rounds}; leave --burst-rounds out to go on",
                    old.rounds
                );
            }
            let ignore_eos = !self.no_ignore_eos;
            if let Some(old) = recorded.filter(|p| p.ignore_eos != ignore_eos) {
                let (was, now) = if old.ignore_eos { ("without", "with") } else { ("with", "without") };
                anyhow::bail!(
                    "cannot resume: this run's bursts ran {was} --no-ignore-eos, not {now}; give the same flags"
                );
            }
            return Ok(Some(BurstConfig { rounds, ignore_eos }));
        }
        Ok(recorded.map(|p| BurstConfig {
            rounds: BURST_ROUNDS.check(u64::from(p.rounds)).map_or(1, |r| r as u32),
            ignore_eos: p.ignore_eos,
        }))
    }
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        burst: BurstArgs,
    }

    fn parse(args: &[&str]) -> Result<BurstArgs, String> {
        Cli::try_parse_from([&["x"], args].concat()).map(|c| c.burst).map_err(|e| e.to_string())
    }

    #[test]
    fn rounds_default_to_one_and_are_checked() {
        let a = parse(&["--burst"]).unwrap();
        assert_eq!(a.resolve(None).unwrap(), Some(BurstConfig { rounds: 1, ignore_eos: true }));
        let a = parse(&["--burst", "--burst-rounds", "3", "--no-ignore-eos"]).unwrap();
        assert_eq!(a.resolve(None).unwrap(), Some(BurstConfig { rounds: 3, ignore_eos: false }));
        for bad in ["0", "11", "x"] {
            let e = parse(&["--burst", "--burst-rounds", bad]).unwrap_err();
            assert!(e.contains("--burst-rounds") || e.contains("1 to 10") || e.contains("integer"), "{bad}: {e}");
        }
        let e = parse(&["--burst-rounds", "2"]).unwrap().resolve(None).unwrap_err().to_string();
        assert!(e.contains("add --burst"), "{e}");
        let e = parse(&["--no-ignore-eos"]).unwrap().resolve(None).unwrap_err().to_string();
        assert!(e.contains("add --burst"), "{e}");
        assert_eq!(parse(&[]).unwrap().resolve(None).unwrap(), None);
    }
}
