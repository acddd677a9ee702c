//! The flags of issue 32: a recorded trace replayed (`--replay FILE`, methodology §13.5).

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result, bail};
use sm_bench::{RateConfig, ReplayConfig, Trace};
use sm_core::record::RunRecord;
use sm_core::replay::{DEFAULT_BLOCK_TOKENS, ReplayFormat, ReplaySpec};

/// The most scales one `--time-scale` may list.
const MAX_SCALES: usize = 16;
/// The scales accepted: from 1/1000 of the recorded speed to 1000 times it.
const SCALE_RANGE: (f64, f64) = (0.001, 1000.0);

/// `--time-scale 1,2,4` parsed (one value holding a list, as `--request-rate`'s).
#[derive(Debug, Clone, PartialEq)]
pub struct ScaleList(pub Vec<f64>);

fn scale_list(text: &str) -> Result<ScaleList, String> {
    scales(text).map(ScaleList)
}

fn scales(text: &str) -> Result<Vec<f64>, String> {
    let mut out: Vec<f64> = Vec::new();
    for part in text.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let x = part.trim_end_matches(['x', '×']);
        match x.parse::<f64>() {
            Ok(s) if s.is_finite() && (SCALE_RANGE.0..=SCALE_RANGE.1).contains(&s) => {
                if !out.contains(&s) {
                    out.push(s);
                }
            }
            _ => {
                return Err(format!(
                    "'{part}' is not a time scale: give how many times faster than recorded, {} to {} (2 = twice as fast, 0.5 = half speed)",
                    SCALE_RANGE.0, SCALE_RANGE.1
                ));
            }
        }
    }
    match out.len() {
        0 => Err("give at least one time scale, e.g. 1 or 1,2,4".into()),
        n if n > MAX_SCALES => Err(format!("{n} time scales are too many: give at most {MAX_SCALES}")),
        _ => Ok(out),
    }
}

fn format(text: &str) -> Result<ReplayFormat, String> {
    text.parse().map_err(|e: sm_core::replay::FormatError| e.to_string())
}

fn block_tokens(text: &str) -> Result<u32, String> {
    match text.trim().parse::<u32>() {
        Ok(n) if (1..=1 << 20).contains(&n) => Ok(n),
        _ => Err(format!("'{text}' is not a block size: give the tokens each Mooncake hash id stands for, e.g. 512")),
    }
}

fn trace_time(text: &str) -> Result<Duration, String> {
    sm_core::units::parse_duration(text)
        .map_err(|e| format!("'{text}' is not a length of trace time ({e}): give e.g. 90s, 10m or 1h"))
}

#[derive(Debug, Default, clap::Args)]
pub struct ReplayArgs {
    /// Replay a recorded trace (JSON Lines): Mooncake ({"timestamp": ms, "input_length",
    /// "output_length", "hash_ids"}) or timestamped messages ({"timestamp": s, "messages" | "prompt",
    /// "max_tokens", "session_id"}). Open loop at the trace's times; with --find-capacity, the
    /// largest time scale that meets --slo. Only the file's name, hash and size are recorded.
    #[arg(long, value_name = "FILE.jsonl")]
    pub(crate) replay: Option<PathBuf>,
    /// With --replay: the trace's format, mooncake or messages [default: told from its first line].
    #[arg(long, value_name = "FORMAT", value_parser = format)]
    pub(crate) replay_format: Option<ReplayFormat>,
    /// With --replay (Mooncake): the tokens each hash id stands for [default: 512].
    #[arg(long, value_name = "TOKENS", value_parser = block_tokens)]
    pub(crate) replay_block_tokens: Option<u32>,
    /// With --replay: how many times faster than recorded to send it, one level each, e.g. 1,2,4
    /// [default: 1]; with --find-capacity the search starts from the first.
    #[arg(long, value_name = "X[,Y…]", value_parser = scale_list)]
    pub(crate) time_scale: Option<ScaleList>,
    /// With --replay: skip this much of the trace's start (trace time), e.g. 10m [default: 0s].
    #[arg(long, value_name = "DURATION", value_parser = trace_time)]
    pub(crate) replay_start: Option<Duration>,
    /// With --replay: replay only this much of the trace (trace time) from --replay-start, e.g. 5m
    /// [default: to the trace's end].
    #[arg(long, value_name = "DURATION", value_parser = trace_time)]
    pub(crate) replay_duration: Option<Duration>,
}

impl ReplayArgs {
    pub(crate) fn given(&self) -> bool {
        self.replay.is_some()
    }

    /// The phase's settings, or `None` when it does not run. The trace is read here, before the
    /// server is asked anything: a bad line is refused at once, with its number.
    pub(crate) fn resolve(
        &self,
        resumed: Option<&RunRecord>,
        find_capacity: bool,
        max_concurrency: Option<u32>,
        drain_max: Option<Duration>,
    ) -> Result<Option<ReplayConfig>> {
        let recorded = resumed.and_then(|r| r.phases.replay.as_ref());
        let Some(path) = &self.replay else {
            let stray = self.replay_format.is_some()
                || self.replay_block_tokens.is_some()
                || self.time_scale.is_some()
                || self.replay_start.is_some()
                || self.replay_duration.is_some();
            if stray {
                bail!(
                    "--replay-format, --replay-block-tokens, --time-scale, --replay-start and --replay-duration go with --replay FILE"
                );
            }
            if let Some(p) = recorded {
                bail!(
                    "this run replays the trace {} (hash {}): give --replay with that file to resume it",
                    p.settings.file.name,
                    p.settings.file.hash
                );
            }
            return Ok(None);
        };
        if self.replay_duration == Some(Duration::ZERO) {
            bail!("--replay-duration must be above 0: the length of trace to replay from --replay-start (e.g. 10m)");
        }
        // on resume, what a flag does not say is as the run recorded it
        let old = recorded.map(|p| &p.settings);
        let secs = |s: Option<f64>| s.map(Duration::from_secs_f64);
        let spec = ReplaySpec {
            format: self.replay_format.or(old.map(|o| o.format)),
            block_tokens: self.replay_block_tokens.or(old.and_then(|o| o.block_tokens)).unwrap_or(DEFAULT_BLOCK_TOKENS),
            time_scale: 1.0,
            start: self.replay_start.or(secs(old.and_then(|o| o.start_s))),
            duration: self.replay_duration.or(secs(old.and_then(|o| o.duration_s))),
        };
        if let Some(old) = old {
            let info = Trace::file_info(path).context("cannot replay the trace")?;
            if old.file.hash != info.hash {
                bail!(
                    "--resume: the run replayed {} (hash {}), and {} is different (hash {}): give the same file",
                    old.file.name,
                    old.file.hash,
                    path.display(),
                    info.hash
                );
            }
        }
        let trace = Trace::load(path, spec).context("cannot replay the trace")?;
        let scales = self.time_scale.clone().map(|l| l.0).or(old.map(|o| o.time_scales.clone()));
        let config = ReplayConfig {
            trace: Arc::new(trace),
            time_scales: scales.filter(|s| !s.is_empty()).unwrap_or_else(|| vec![1.0]),
            find_capacity: find_capacity || old.is_some_and(|o| o.find_capacity),
            max_concurrency: max_concurrency.or(old.and_then(|o| o.max_concurrency)),
            drain_max: drain_max.or(secs(old.map(|o| o.drain_max_s))).unwrap_or(RateConfig::DEFAULT_DRAIN_MAX),
        };
        if let Some(old) = recorded
            && old.settings.requests != config.trace.requests.len() as u64
        {
            bail!(
                "--resume: the replay's slice holds other requests now: give the --replay-start and --replay-duration of the run"
            );
        }
        Ok(Some(config))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn time_scales_are_speeds_in_range() {
        assert_eq!(scales("1,2,4").unwrap(), [1.0, 2.0, 4.0]);
        assert_eq!(scales("0.5x, 2×,2").unwrap(), [0.5, 2.0]);
        for bad in ["0", "-1", "inf", "nan", "fast", "", "2000"] {
            let e = scales(bad).unwrap_err();
            assert!(e.contains("time scale"), "{bad}: {e}");
        }
        let many: Vec<String> = (1..=17).map(|i| i.to_string()).collect();
        assert!(scales(&many.join(",")).unwrap_err().contains("too many"));
    }

    #[test]
    fn the_other_flags_say_what_to_give() {
        assert_eq!(format("Mooncake").unwrap(), ReplayFormat::Mooncake);
        assert!(format("csv").unwrap_err().contains("mooncake|messages"));
        assert!(block_tokens("0").unwrap_err().contains("512"));
        assert_eq!(trace_time("10m").unwrap(), Duration::from_secs(600));
        assert!(trace_time("soon").unwrap_err().contains("90s"));
    }
}
