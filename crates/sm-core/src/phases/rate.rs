//! Issue 17 §1 — open-loop arrivals at a rate (`--request-rate`): the phase's section of `run.json`
//! (methodology §13.1). Its settings, typed, and one [`RateLevel`] per context × rate.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

// from its own file, not through `record`, which holds the phases: no circle of imports
use crate::record::percentiles::{P50P90P99, P50P99Max, Percentiles};

/// The highest finite rate accepted, requests/s: above it the gaps are shorter than the client's
/// own timer resolution, and `inf` says what is meant.
pub const MAX_RATE: f64 = 100_000.0;

/// The largest coefficient of variation `gamma:CV` accepts (shape 1/CV² ≥ 0.01).
pub const MAX_CV: f64 = 10.0;

/// One rate level: requests per second, or every request at once.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum RequestRate {
    PerSecond(f64),
    /// `inf`: every request of the level is due at its start.
    Inf,
}

impl RequestRate {
    /// The rate, `None` for `inf`.
    pub fn per_second(self) -> Option<f64> {
        match self {
            RequestRate::PerSecond(r) => Some(r),
            RequestRate::Inf => None,
        }
    }

    /// Sort key: finite rates ascending, `inf` last.
    pub fn order(self) -> f64 {
        self.per_second().unwrap_or(f64::INFINITY)
    }
}

/// Why a rate or an arrival process was refused; each says what to give instead.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum RateError {
    #[error("'{0}' is not a request rate: give requests per second above 0 (e.g. 2, 0.5) or 'inf' (all at once)")]
    Rate(String),
    #[error("'{0}': the request rate must be above 0 and at most {MAX_RATE} requests/s; 'inf' sends all at once")]
    RateRange(String),
    #[error(
        "'{0}' is not an arrival process: use poisson, constant or gamma:CV (e.g. gamma:2 for burstier than poisson)"
    )]
    Arrival(String),
    #[error("'{0}': the gamma CV must be a number above 0 and at most {MAX_CV} (1 is poisson)")]
    Cv(String),
}

impl FromStr for RequestRate {
    type Err = RateError;
    fn from_str(s: &str) -> Result<RequestRate, RateError> {
        let t = s.trim();
        if t.eq_ignore_ascii_case("inf") {
            return Ok(RequestRate::Inf);
        }
        let r: f64 = t.parse().map_err(|_| RateError::Rate(t.to_string()))?;
        if !r.is_finite() || r <= 0.0 || r > MAX_RATE {
            return Err(RateError::RateRange(t.to_string()));
        }
        Ok(RequestRate::PerSecond(r))
    }
}

impl fmt::Display for RequestRate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RequestRate::PerSecond(r) => write!(f, "{}", trim(*r)),
            RequestRate::Inf => f.write_str("inf"),
        }
    }
}

/// A rate is written as its number, `inf` as the string `"inf"` (JSON has no infinity).
impl Serialize for RequestRate {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            RequestRate::PerSecond(r) => s.serialize_f64(*r),
            RequestRate::Inf => s.serialize_str("inf"),
        }
    }
}

impl<'de> Deserialize<'de> for RequestRate {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Raw {
            N(f64),
            S(String),
        }
        match Raw::deserialize(d)? {
            Raw::N(r) => RequestRate::from_str(&r.to_string()).map_err(serde::de::Error::custom),
            Raw::S(s) => s.parse().map_err(serde::de::Error::custom),
        }
    }
}

crate::record::schema::written_as!(RequestRate, "RequestRate", {
    "description": "Requests per second, or `\"inf\"`: every request due at once.",
    "oneOf": [{ "type": "number", "exclusiveMinimum": 0 }, { "const": "inf" }]
});

/// How the gaps between the due times of a level's requests are drawn (methodology §13.1).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Arrival {
    /// Exponential gaps: a Poisson process (independent users).
    Poisson,
    /// Every gap is 1/rate.
    Constant,
    /// Gamma gaps of mean 1/rate and this coefficient of variation (shape 1/CV²): CV 1 is
    /// Poisson, above 1 burstier, below 1 more regular.
    Gamma { cv: f64 },
}

impl FromStr for Arrival {
    type Err = RateError;
    fn from_str(s: &str) -> Result<Arrival, RateError> {
        let t = s.trim();
        match t.to_ascii_lowercase().as_str() {
            "poisson" => return Ok(Arrival::Poisson),
            "constant" => return Ok(Arrival::Constant),
            _ => {}
        }
        let Some(cv) = t.strip_prefix("gamma:") else {
            return Err(RateError::Arrival(t.to_string()));
        };
        match cv.trim().parse::<f64>() {
            Ok(cv) if cv.is_finite() && cv > 0.0 && cv <= MAX_CV => Ok(Arrival::Gamma { cv }),
            _ => Err(RateError::Cv(t.to_string())),
        }
    }
}

impl fmt::Display for Arrival {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Arrival::Poisson => f.write_str("poisson"),
            Arrival::Constant => f.write_str("constant"),
            Arrival::Gamma { cv } => write!(f, "gamma:{}", trim(*cv)),
        }
    }
}

impl Serialize for Arrival {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for Arrival {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        String::deserialize(d)?.parse().map_err(serde::de::Error::custom)
    }
}

crate::record::schema::written_as!(Arrival, "Arrival", {
    "type": "string",
    "pattern": "^(poisson|constant|gamma:[0-9.]+)$",
    "description": "`--arrival`: `poisson`, `constant` or `gamma:<cv>`."
});

fn trim(v: f64) -> String {
    let s = format!("{v:.6}");
    s.trim_end_matches('0').trim_end_matches('.').to_string()
}

/// The phase's settings as the run resolved them.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct RateSettings {
    /// The levels, in the order they run (ascending, `inf` last).
    pub rates: Vec<RequestRate>,
    pub arrival: Arrival,
    /// `--max-concurrency`: the most requests in flight at once; `None` without a cap.
    #[schemars(range(min = 1))]
    pub max_concurrency: Option<u32>,
    /// `--requests`: requests per level; `None` when a level is a window of `window_s`.
    #[schemars(range(min = 1))]
    pub requests: Option<u64>,
    /// The level's window (its due times fall inside it) when `requests` is `None`.
    #[schemars(range(min = 0))]
    pub window_s: Option<f64>,
    /// The seed of the schedule's generator.
    pub seed: u64,
    /// `--drain-max`: the longest a level waits, after its last due time, for requests still
    /// running before the client cuts them (methodology §13.1). Within it the level's own bound
    /// ends the wait. Records before 1.5 have `grace_s`, the fixed wait of those runs, instead.
    #[serde(default = "default_drain_max_s")]
    #[schemars(range(min = 0))]
    #[schemars(extend("x-optional" = true))]
    pub drain_max_s: f64,
    /// Before 1.5: the fixed wait after the last due time (`max(--duration, 5 s)`); kept as read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0))]
    pub grace_s: Option<f64>,
    /// `--max-tokens` of the synthetic prompts (a `--prompts` line's own `max_tokens` wins).
    #[schemars(range(min = 1))]
    pub max_tokens: u64,
}

/// The default of `--drain-max`, s.
pub const DEFAULT_DRAIN_MAX_S: f64 = 600.0;

fn default_drain_max_s() -> f64 {
    DEFAULT_DRAIN_MAX_S
}

/// Whether a level was measured.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum LevelStatus {
    Measured,
    /// Not run: the two levels below it were saturated, or its prompt could not be made.
    Skipped,
    /// No request of the level completed, and some failed (or the server went away); `reason`
    /// says why. Never saturated: a fault, not load.
    Error,
}

/// Whether the server kept up with a measured level (methodology §13.1), from queueing evidence.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Saturation {
    /// The requests' wait for their first token did not grow beyond one service time.
    KeptUp,
    /// Requests waited longer and longer for their first token: a queue grew (at the server, or
    /// at the client's cap).
    Saturated,
    /// Not enough evidence either way: the client cut requests before they ended (and the rest
    /// show no queue), or too few requests got a first token to judge.
    Unknown,
}

impl Saturation {
    /// In a sentence's middle: "kept up", "saturated", "unknown".
    pub fn as_str(self) -> &'static str {
        match self {
            Saturation::KeptUp => "kept up",
            Saturation::Saturated => "saturated",
            Saturation::Unknown => "unknown",
        }
    }
}

impl fmt::Display for Saturation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Every request of a level by how it ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, schemars::JsonSchema)]
pub struct LevelCounts {
    /// Requests the schedule made due.
    pub scheduled: u64,
    /// Of those, sent to the server.
    pub sent: u64,
    /// Finished by the server.
    pub completed: u64,
    /// Failed (reason in requests.jsonl).
    pub failed: u64,
    /// Sent, then cut by the client: still running when the level's wait ran out (methodology
    /// §13.1). Never counted against the server: not failed, not behind.
    pub cancelled: u64,
    /// Due but never sent: the client's wait ran out while they waited for a slot under the cap.
    pub unsent: u64,
    /// Sent more than [`LATE_MS`] after their due time.
    pub late: u64,
}

/// A send this much after its due time (ms) counts as late.
pub const LATE_MS: f64 = 10.0;

/// One context × rate level.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct RateLevel {
    /// Prompt tokens as planned (the run's exact-length prompt of this context; 0 with `--prompts`).
    pub context: u64,
    /// The row's name as the page shows it.
    pub label: String,
    pub rate: RequestRate,
    pub status: LevelStatus,
    /// Why the level was skipped or is an error.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    #[serde(default)]
    pub counts: LevelCounts,
    /// From the level's start (its first due time) to the last end of a request, s.
    #[schemars(range(min = 0))]
    pub span_s: Option<f64>,
    /// Completed requests ÷ `span_s`.
    #[schemars(range(min = 0))]
    pub achieved_rps: Option<f64>,
    /// Output tokens received (every request) ÷ `span_s`.
    #[schemars(range(min = 0))]
    pub output_tok_s: Option<f64>,
    /// Prompt tokens of the completed requests (server usage) ÷ `span_s`.
    #[schemars(range(min = 0))]
    pub input_tok_s: Option<f64>,
    /// From the due time, completed requests.
    #[schemars(with = "Option<P50P90P99>")]
    pub ttft_ms: Option<Percentiles>,
    #[schemars(with = "Option<P50P90P99>")]
    pub tbt_ms: Option<Percentiles>,
    #[schemars(with = "Option<P50P90P99>")]
    pub e2e_ms: Option<Percentiles>,
    /// A reasoning model's level (issue 33): TTFA from the due time, the mean thinking tokens and
    /// the requests left without an answer; absent where no request thought.
    #[serde(flatten)]
    pub thinking: super::answers::ThinkingFigures,
    /// A run with `--tools` (methodology §7.3.1): time to the first tool call from the due time,
    /// the calls' tokens, whether their arguments parse, the requests that made none; absent where
    /// the requests carried no tools.
    #[serde(flatten)]
    pub tool_calls: super::answers::ToolCallFigures,
    #[schemars(with = "Option<P50P99Max>")]
    pub send_lag_ms: Option<Percentiles>,
    /// Time-weighted mean of the requests in flight (sent, not ended) over the span.
    #[schemars(range(min = 0))]
    pub in_flight_mean: Option<f64>,
    /// The most requests in flight at once.
    pub in_flight_max: Option<u64>,
    /// Share of the scheduled requests that completed and met every bound of `settings.slo`, %.
    #[schemars(range(min = 0, max = 100))]
    pub goodput_pct: Option<f64>,
    /// Those requests ÷ `span_s`.
    #[schemars(range(min = 0))]
    pub goodput_rps: Option<f64>,
    /// The server (or the cap) did not keep up (methodology §13.1): `saturation` is `saturated`.
    #[serde(default)]
    pub saturated: bool,
    /// The verdict (1.5); absent in older records, where `saturated` alone was kept.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub saturation: Option<Saturation>,
    /// Of the requests that got a first token, the share (%) that waited for it longer than the
    /// level's base wait plus one service time (methodology §13.1).
    #[schemars(range(min = 0, max = 100))]
    pub backlog_pct: Option<f64>,
    /// How long the level waited after its last due time for requests still running, s (1.5):
    /// the level's own bound, at most `--drain-max`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0))]
    pub drain_s: Option<f64>,
    /// The first failure's reason when requests of a measured level failed (1.5): a fault, named
    /// as one, not load.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub first_failure: Option<String>,
    /// The server's gauges and the GPUs through the level (methodology §14).
    #[serde(flatten)]
    pub telemetry: crate::telemetry::Telemetry,
    /// With `--ranks N` (1.4): each client process's part of the level; absent with one.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ranks: Vec<crate::ranks::RankLevel>,
}

impl RateLevel {
    /// A level that was not measured, with why.
    pub fn unmeasured(context: u64, label: String, rate: RequestRate, status: LevelStatus, reason: String) -> Self {
        RateLevel {
            context,
            label,
            rate,
            status,
            reason: Some(reason),
            counts: LevelCounts::default(),
            span_s: None,
            achieved_rps: None,
            output_tok_s: None,
            input_tok_s: None,
            ttft_ms: None,
            tbt_ms: None,
            e2e_ms: None,
            thinking: Default::default(),
            tool_calls: Default::default(),
            send_lag_ms: None,
            in_flight_mean: None,
            in_flight_max: None,
            goodput_pct: None,
            goodput_rps: None,
            saturated: false,
            saturation: None,
            backlog_pct: None,
            drain_s: None,
            first_failure: None,
            telemetry: Default::default(),
            ranks: Vec::new(),
        }
    }
}

impl RateLevel {
    /// The verdict of a measured level; a record before 1.5 kept only `saturated`.
    pub fn verdict(&self) -> Option<Saturation> {
        (self.status == LevelStatus::Measured)
            .then(|| self.saturation.unwrap_or(if self.saturated { Saturation::Saturated } else { Saturation::KeptUp }))
    }

    /// The requests the client cut: still running when the level's wait ran out, or never sent.
    pub fn cut(&self) -> u64 {
        self.counts.cancelled + self.counts.unsent
    }

    /// What a reader must know beside a measured level's figures (empty when nothing).
    pub fn note(&self) -> LevelNote<'_> {
        LevelNote(self)
    }
}

/// A measured level's failures (a fault, not load), the requests the client cut, and why the
/// verdict is unknown, in words (methodology §13.1).
pub struct LevelNote<'a>(&'a RateLevel);

impl fmt::Display for LevelNote<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let l = self.0;
        if l.status != LevelStatus::Measured {
            return Ok(());
        }
        let c = &l.counts;
        let mut sep = "";
        if c.failed > 0 {
            write!(f, "{} of {} requests failed (a fault, not load", c.failed, c.scheduled)?;
            if let Some(why) = &l.first_failure {
                write!(f, "; the first: {why}")?;
            }
            f.write_str(")")?;
            sep = "; ";
        }
        if l.cut() > 0 {
            f.write_str(sep)?;
            f.write_str("the client cut ")?;
            match (c.cancelled, c.unsent) {
                (n, 0) => write!(f, "{n} {} still running", plural(n, "request", "requests"))?,
                (0, u) => write!(f, "{u} {} still waiting for a slot", plural(u, "request", "requests"))?,
                (n, u) => {
                    write!(f, "{n} {} still running and {u} waiting for a slot", plural(n, "request", "requests"))?
                }
            }
            if let Some(d) = l.drain_s {
                write!(f, " {d:.1} s after the last due time")?;
            }
            write!(
                f,
                " (the level's own bound, at most --drain-max): the figures rest on the {} completed",
                c.completed
            )?;
            if l.verdict() == Some(Saturation::Unknown) {
                f.write_str(", and whether the server kept up is unknown")?;
            }
        } else if l.verdict() == Some(Saturation::Unknown) {
            f.write_str(sep)?;
            write!(f, "too few requests got a first token to judge whether the server kept up")?;
        }
        Ok(())
    }
}

fn plural<'a>(n: u64, one: &'a str, many: &'a str) -> &'a str {
    if n == 1 { one } else { many }
}

/// The phase's section of `run.json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct RatePhase {
    pub settings: RateSettings,
    /// One per context × rate, in the order measured; a resumed run adds the missing ones.
    pub levels: Vec<RateLevel>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rates_parse_with_decimals_and_inf_and_refuse_the_rest() {
        assert_eq!("2".parse::<RequestRate>(), Ok(RequestRate::PerSecond(2.0)));
        assert_eq!(" 0.5 ".parse::<RequestRate>(), Ok(RequestRate::PerSecond(0.5)));
        assert_eq!("INF".parse::<RequestRate>(), Ok(RequestRate::Inf));
        for bad in ["0", "-1", "nan", "1e9"] {
            let e = bad.parse::<RequestRate>().unwrap_err().to_string();
            assert!(e.contains("above 0") && e.contains("inf"), "{bad}: {e}");
        }
        assert!("fast".parse::<RequestRate>().unwrap_err().to_string().contains("requests per second"));
    }

    #[test]
    fn arrivals_parse_and_print_back() {
        assert_eq!("poisson".parse::<Arrival>(), Ok(Arrival::Poisson));
        assert_eq!("Constant".parse::<Arrival>(), Ok(Arrival::Constant));
        assert_eq!("gamma:0.5".parse::<Arrival>(), Ok(Arrival::Gamma { cv: 0.5 }));
        assert_eq!(Arrival::Gamma { cv: 2.0 }.to_string(), "gamma:2");
        assert!("foo".parse::<Arrival>().unwrap_err().to_string().contains("poisson, constant or gamma:CV"));
        for bad in ["gamma:-1", "gamma:0", "gamma:x", "gamma:11"] {
            assert!(bad.parse::<Arrival>().unwrap_err().to_string().contains("CV must be"), "{bad}");
        }
    }

    #[test]
    fn rates_and_arrivals_round_trip_through_json() {
        let rates = vec![RequestRate::PerSecond(2.5), RequestRate::Inf];
        let v = serde_json::to_value(&rates).unwrap();
        assert_eq!(v, serde_json::json!([2.5, "inf"]));
        assert_eq!(serde_json::from_value::<Vec<RequestRate>>(v).unwrap(), rates);
        let a = serde_json::to_value(Arrival::Gamma { cv: 1.5 }).unwrap();
        assert_eq!(a, "gamma:1.5");
        assert_eq!(serde_json::from_value::<Arrival>(a).unwrap(), Arrival::Gamma { cv: 1.5 });
        assert!(serde_json::from_value::<RequestRate>(serde_json::json!(0)).is_err());
    }
}
