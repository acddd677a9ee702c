//! The range every numeric flag of `speedmatrix run` accepts, in one table. Outside it a run could
//! only produce errors (a 0 s window, streams of 0 tokens, a stall timeout of 0 s) or never end (a
//! window of eleven million years): such a value is refused before anything is sent, with the
//! range and what to give instead. The same checks run on the settings a resume takes from
//! run.json, so a hand-edited record cannot slip past them either.

use std::time::Duration;

use sm_core::Tokens;
use sm_core::units::{ParseError, parse_duration, parse_tokens};

/// The accepted range of a duration flag.
#[derive(Debug, Clone, Copy)]
pub struct DurationLimit {
    pub flag: &'static str,
    pub min: Duration,
    pub max: Duration,
    /// `0s` is accepted as well, with this meaning, below `min`.
    pub zero: Option<&'static str>,
    /// What the value is for, and a usual value.
    pub hint: &'static str,
}

/// The accepted range of a count flag (tokens, streams, GPUs).
#[derive(Debug, Clone, Copy)]
pub struct CountLimit {
    pub flag: &'static str,
    pub min: u64,
    pub max: u64,
    pub hint: &'static str,
}

const SECOND: Duration = Duration::from_secs(1);
const HOUR: Duration = Duration::from_secs(3600);
const DAY: Duration = Duration::from_secs(24 * 3600);

pub const DURATION: DurationLimit = DurationLimit {
    flag: "--duration",
    min: SECOND,
    max: DAY,
    zero: None,
    hint: "each cell's measurement window; the published matrix uses 30s",
};
pub const SERVE_TIMEOUT: DurationLimit = DurationLimit {
    flag: "--serve-timeout",
    min: SECOND,
    max: DAY,
    zero: None,
    hint: "how long a --server-cmd server has to answer; the default is 15m (large models load slowly)",
};
pub const STALL_TIMEOUT: DurationLimit = DurationLimit {
    flag: "--stall-timeout",
    min: SECOND,
    max: HOUR,
    zero: None,
    hint: "the longest silence between two tokens before a stream is an error; the default is 15s",
};
pub const READY_STABLE: DurationLimit = DurationLimit {
    flag: "--ready-stable",
    min: Duration::ZERO,
    max: HOUR,
    zero: None,
    hint: "how long readiness must hold before a window opens; the default is 3s",
};
pub const READY_TIMEOUT: DurationLimit = DurationLimit {
    flag: "--ready-timeout",
    min: SECOND,
    max: DAY,
    zero: None,
    hint: "the longest wait for readiness, and for a stream's first token; the default is 180s",
};
pub const SERVER_WAIT: DurationLimit = DurationLimit {
    flag: "--server-wait",
    min: SECOND,
    max: DAY,
    zero: None,
    hint: "how long to wait for a server that stopped answering; the default is 5m",
};
pub const DRAIN_MAX: DurationLimit = DurationLimit {
    flag: "--drain-max",
    min: SECOND,
    max: DAY,
    zero: None,
    hint: "the longest a rate level waits after its last due time for requests still running; the default is 10m",
};
pub const RANK_WAIT: DurationLimit = DurationLimit {
    flag: "--rank-wait",
    min: SECOND,
    max: DAY,
    zero: None,
    hint: "how long rank 0 waits for every worker rank to join; the default is 5m",
};
pub const WARMUP: DurationLimit = DurationLimit {
    flag: "--warmup",
    min: SECOND,
    max: HOUR,
    zero: Some("0s skips the warm-up"),
    hint: "the hidden warm-up cell's window; the default is 3s",
};
/// `--metrics-interval`: faster than 100 ms would load the server's exporter more than it tells.
pub const METRICS_INTERVAL: DurationLimit = DurationLimit {
    flag: "--metrics-interval",
    min: Duration::from_millis(100),
    max: HOUR,
    zero: Some("0s or off turns the server's series off"),
    hint: "how often the server's /metrics is sampled through each cell; the default is 1s",
};

pub const MIN_DURATION: DurationLimit = DurationLimit {
    flag: "--min-duration",
    min: SECOND,
    max: DAY,
    zero: None,
    hint: "the shortest window with --precision; the default is 5s",
};
pub const REPEATS: CountLimit =
    CountLimit { flag: "--repeats", min: 1, max: 100, hint: "how many times each cell is measured, e.g. 3" };

pub const MAX_TOKENS: CountLimit = CountLimit {
    flag: "--max-tokens",
    min: 2,
    max: 1 << 20,
    hint: "output tokens per decode request: a decode figure needs at least two tokens, one gap; the published matrix uses 4096",
};
/// Each value of `--contexts` and `--prefill-contexts`: a prompt needs room for its tag and text.
pub const CONTEXT: CountLimit =
    CountLimit { flag: "--contexts", min: 128, max: 16 << 20, hint: "prompt tokens, e.g. 8k,16k,32k" };
pub const PREFILL_CONTEXT: CountLimit = CountLimit { flag: "--prefill-contexts", ..CONTEXT };
/// Over all ranks: a fleet behind one gateway holds 100k connections (issue 19). One process is
/// bounded lower by its open files and ephemeral ports (docs/scaling.md), not by this range.
pub const CONCURRENCY: CountLimit = CountLimit {
    flag: "--concurrency",
    min: 1,
    max: 1 << 17,
    hint: "simultaneous requests, e.g. 1,2,4,8 (one connection each)",
};
/// Values in one list flag: the matrix is contexts × concurrency levels.
pub const LIST_LEN: u64 = 32;
pub const KV_BUDGET: CountLimit =
    CountLimit { flag: "--kv-budget", min: 1, max: 1 << 40, hint: "the server's KV cache in tokens, e.g. 500k" };
pub const MAX_MODEL_LEN: CountLimit = CountLimit {
    flag: "--max-model-len",
    min: CONTEXT.min,
    max: CONTEXT.max,
    hint: "the model's context limit in tokens, e.g. 256k",
};
pub const MAX_NUM_SEQS: CountLimit =
    CountLimit { flag: "--max-num-seqs", min: 1, max: 1 << 16, hint: "the server's concurrent sequences, e.g. 256" };
pub const CLIENT_THREADS: CountLimit = CountLimit {
    flag: "--client-threads",
    min: 1,
    max: 1024,
    hint: "the client's worker threads, e.g. 4; the default is one per CPU this process may use (taskset, cgroup quota)",
};
pub const GPU_COUNT: CountLimit = CountLimit { flag: "--gpu-count", min: 1, max: 1024, hint: "e.g. 2" };

impl DurationLimit {
    /// `value` if it is in range, else why not and what to give instead.
    pub fn check(&self, value: Duration) -> Result<Duration, String> {
        if value.is_zero() && self.zero.is_some() {
            return Ok(value);
        }
        let range = match self.zero {
            Some(zero) => format!("0s, or {} to {} ({zero})", show(self.min), show(self.max)),
            None => format!("{} to {}", show(self.min), show(self.max)),
        };
        if value < self.min {
            return Err(format!("{} is too short: give {range}; {}", show(value), self.hint));
        }
        if value > self.max {
            return Err(format!("{} is too long: give {range}; {}", show(value), self.hint));
        }
        Ok(value)
    }

    /// Parses and checks a flag's text; the value parser clap calls.
    pub fn parse(&self, text: &str) -> Result<Duration, String> {
        self.check(parse_duration(text).map_err(|e| e.to_string())?)
    }

    /// Checks a value that did not come through clap (a resume's), naming the flag.
    pub fn check_flag(&self, value: Duration) -> Result<(), String> {
        self.check(value).map(drop).map_err(|e| format!("{}: {e}", self.flag))
    }
}

/// `--metrics-interval`'s value parser: a duration, or `off` for none.
pub fn parse_metrics_interval(text: &str) -> Result<Duration, String> {
    if text.trim().eq_ignore_ascii_case("off") {
        return Ok(Duration::ZERO);
    }
    METRICS_INTERVAL.parse(text)
}

impl CountLimit {
    pub fn check(&self, value: u64) -> Result<u64, String> {
        if (self.min..=self.max).contains(&value) {
            return Ok(value);
        }
        let word = if value < self.min { "too small" } else { "too large" };
        Err(format!("{} is {word}: give {} to {}; {}", Tokens(value), Tokens(self.min), Tokens(self.max), self.hint))
    }

    pub fn parse_tokens(&self, text: &str) -> Result<Tokens, String> {
        let t = parse_tokens(text).map_err(|e| e.to_string())?;
        self.check(t.0).map(Tokens)
    }

    pub fn parse_u32(&self, text: &str) -> Result<u32, String> {
        let n: u32 = text.trim().parse().map_err(|_| ParseError::Integer { input: text.to_string() }.to_string())?;
        self.check(u64::from(n))?;
        Ok(n)
    }

    /// A list's values: each in range, none twice, at least one and at most [`LIST_LEN`].
    pub fn check_list(&self, values: impl IntoIterator<Item = u64>) -> Result<(), String> {
        let mut seen = Vec::new();
        for v in values {
            self.check(v)?;
            if seen.contains(&v) {
                return Err(ParseError::Duplicate { value: v }.to_string());
            }
            seen.push(v);
        }
        if seen.is_empty() {
            return Err(ParseError::EmptyList.to_string());
        }
        if seen.len() as u64 > LIST_LEN {
            return Err(format!(
                "{} values are too many: give at most {LIST_LEN} (the matrix is contexts × concurrency levels)",
                seen.len()
            ));
        }
        Ok(())
    }

    /// Checks a value that did not come through clap, naming the flag.
    pub fn check_flag(&self, value: u64) -> Result<(), String> {
        self.check(value).map(drop).map_err(|e| format!("{}: {e}", self.flag))
    }

    pub fn check_list_flag(&self, values: impl IntoIterator<Item = u64>) -> Result<(), String> {
        self.check_list(values).map_err(|e| format!("{}: {e}", self.flag))
    }
}

/// `--ready-stable` must fit inside `--ready-timeout`, or readiness could never hold long enough
/// before the wait gives up, and every window would open late with a warning.
pub fn check_readiness(stable: Duration, timeout: Duration) -> Result<(), String> {
    if stable > timeout {
        return Err(format!(
            "--ready-stable {} is longer than --ready-timeout {}: readiness could never hold that long before the wait ends; lower --ready-stable or raise --ready-timeout",
            show(stable),
            show(timeout)
        ));
    }
    Ok(())
}

/// `1s`, `1500ms`, `2m`, `24h`: the shortest exact form, as the flags take it.
pub fn show(d: Duration) -> String {
    let ms = d.as_millis();
    if d.is_zero() {
        "0s".into()
    } else if !d.as_nanos().is_multiple_of(1_000_000) {
        format!("{}s", d.as_secs_f64())
    } else if !ms.is_multiple_of(1000) {
        format!("{ms}ms")
    } else if ms.is_multiple_of(3_600_000) {
        format!("{}h", ms / 3_600_000)
    } else if ms.is_multiple_of(60_000) {
        format!("{}m", ms / 60_000)
    } else {
        format!("{}s", ms / 1000)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_duration_flag_refuses_zero_and_overflow_unless_zero_means_something() {
        for limit in [DURATION, STALL_TIMEOUT, READY_TIMEOUT, SERVER_WAIT, SERVE_TIMEOUT] {
            let e = limit.parse("0s").unwrap_err();
            assert!(e.contains("too short") && e.contains("give 1s to"), "{}: {e}", limit.flag);
            let e = limit.parse("99999999999h").unwrap_err();
            assert!(e.contains("too long"), "{}: {e}", limit.flag);
            assert!(limit.parse("1e300s").is_err(), "{}", limit.flag);
            assert_eq!(limit.parse("2m"), Ok(Duration::from_secs(120)), "{}", limit.flag);
        }
        assert_eq!(WARMUP.parse("0s"), Ok(Duration::ZERO));
        let e = WARMUP.parse("10ms").unwrap_err();
        assert!(e.contains("give 0s, or 1s to 1h (0s skips the warm-up)"), "{e}");
        assert_eq!(READY_STABLE.parse("0s"), Ok(Duration::ZERO));
        assert!(READY_STABLE.parse("2h").is_err());
        assert_eq!(parse_metrics_interval("off"), Ok(Duration::ZERO));
        assert_eq!(parse_metrics_interval("0s"), Ok(Duration::ZERO));
        assert_eq!(parse_metrics_interval("250ms"), Ok(Duration::from_millis(250)));
        let e = parse_metrics_interval("10ms").unwrap_err();
        assert!(e.contains("give 0s, or 100ms to 1h (0s or off turns the server's series off)"), "{e}");
        assert!(parse_metrics_interval("2h").unwrap_err().contains("too long"));
    }

    #[test]
    fn every_count_flag_refuses_zero_and_absurd_sizes() {
        assert!(MAX_TOKENS.parse_tokens("0").unwrap_err().contains("too small"));
        assert!(MAX_TOKENS.parse_tokens("1").is_err(), "one token has no gap to time");
        assert_eq!(MAX_TOKENS.parse_tokens("4k"), Ok(Tokens(4096)));
        assert!(MAX_TOKENS.parse_tokens("99999999m").is_err());
        for limit in [MAX_NUM_SEQS, GPU_COUNT, CLIENT_THREADS] {
            assert!(limit.parse_u32("0").is_err(), "{}", limit.flag);
            assert!(limit.parse_u32("4294967296").is_err(), "{}", limit.flag);
            assert_eq!(limit.parse_u32("2"), Ok(2));
        }
        assert!(KV_BUDGET.parse_tokens("0").is_err());
        assert!(MAX_MODEL_LEN.parse_tokens("16").is_err());
        assert!(MAX_MODEL_LEN.parse_tokens("1g").is_err());
    }

    #[test]
    fn lists_refuse_empty_zero_duplicates_out_of_range_and_too_many() {
        assert!(CONCURRENCY.check_list([]).unwrap_err().contains("empty"));
        assert!(CONCURRENCY.check_list([1, 0]).unwrap_err().contains("too small"));
        assert!(CONCURRENCY.check_list([4, 4]).unwrap_err().contains("appears twice"));
        assert!(CONCURRENCY.check_list([1, 200_000]).unwrap_err().contains("too large"));
        assert!(CONTEXT.check_list([8192, 16]).unwrap_err().contains("too small"));
        assert!(CONTEXT.check_list(1..=40).is_err());
        let many = (1..=33).map(|i| i * 1024);
        assert!(CONTEXT.check_list(many).unwrap_err().contains("at most 32"));
        assert!(PREFILL_CONTEXT.check_list_flag([0]).unwrap_err().starts_with("--prefill-contexts: "));
        assert_eq!(CONCURRENCY.check_list([1, 2, 128]), Ok(()));
    }

    #[test]
    fn readiness_must_fit_its_timeout() {
        assert!(check_readiness(Duration::from_secs(3), Duration::from_secs(180)).is_ok());
        let e = check_readiness(Duration::from_secs(10), Duration::from_secs(5)).unwrap_err();
        assert!(e.contains("--ready-stable 10s is longer than --ready-timeout 5s"), "{e}");
    }

    #[test]
    fn durations_are_shown_as_the_flags_take_them() {
        let shown: Vec<String> =
            [0, 500, 1000, 90_000, 120_000, 86_400_000].map(|ms| show(Duration::from_millis(ms))).into();
        assert_eq!(shown, ["0s", "500ms", "1s", "90s", "2m", "24h"]);
    }
}
