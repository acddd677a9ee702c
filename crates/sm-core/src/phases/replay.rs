//! Issue 32 — a recorded trace replayed (`--replay FILE`): the phase's section of `run.json`
//! (methodology §13.5). One level per time scale, each measured as a rate level is (latency from
//! the request's due time, send lag, saturation verdict), with the prefix cache's reuse against
//! the trace's ideal; with `--find-capacity`, the largest time scale that meets the SLO.

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use super::rate::{LevelStatus, RateLevel, Saturation};
use crate::replay::ReplayFormat;
use crate::slo::{BoundCheck, BoundName};

mod search;

pub use search::{CapacitySearch, MAX_SCALE, MIN_SCALE, Next, PRECISION, same_scale};

impl Serialize for ReplayFormat {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.name())
    }
}

impl<'de> Deserialize<'de> for ReplayFormat {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        String::deserialize(d)?.parse().map_err(serde::de::Error::custom)
    }
}

crate::record::schema::written_as!(ReplayFormat, "ReplayFormat", {
    "type": "string",
    "enum": ["mooncake", "messages"],
    "description": "`--replay-format`: a Mooncake trace (token counts and block ids) or timestamped messages."
});

/// The trace file as the record keeps it: never its content, only what identifies it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct TraceFileInfo {
    /// The file's name without its directories (a path can name a user).
    pub name: String,
    /// FNV-1a 64-bit hash of the file's bytes, hex.
    pub hash: String,
    /// The file's size, bytes.
    pub bytes: u64,
}

/// The phase's settings as the run resolved them.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ReplaySettings {
    pub file: TraceFileInfo,
    pub format: ReplayFormat,
    /// Mooncake: the tokens each hash id stands for (`--replay-block-tokens`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub block_tokens: Option<u32>,
    /// `--time-scale`: the scales asked for, in the order they run (2 replays twice as fast).
    pub time_scales: Vec<f64>,
    /// `--find-capacity`: the search adds the scales it needs.
    #[serde(default)]
    pub find_capacity: bool,
    /// `--replay-start`: trace time before the slice, s.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0))]
    pub start_s: Option<f64>,
    /// `--replay-duration`: the slice's length in trace time, s.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0))]
    pub duration_s: Option<f64>,
    /// Requests in the slice.
    #[schemars(range(min = 1))]
    pub requests: u64,
    /// From the slice's first request to its last, at the recorded speed, s.
    #[schemars(range(min = 0))]
    pub recorded_span_s: f64,
    /// The slice's requests ÷ `recorded_span_s`: the recorded rate a scale multiplies.
    #[schemars(range(min = 0))]
    pub recorded_rps: Option<f64>,
    /// `--max-concurrency`, where given.
    #[schemars(range(min = 1))]
    pub max_concurrency: Option<u32>,
    /// `--drain-max`, s.
    #[schemars(range(min = 0))]
    pub drain_max_s: f64,
    /// `--max-tokens`: for a messages line without its own.
    #[schemars(range(min = 1))]
    pub max_tokens: u64,
    /// The server's KV-cache block, tokens (discovery): the ideal is rounded down to it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub kv_block_tokens: Option<u64>,
}

/// What the server's prefix cache reused over a level, against the trace's ideal (methodology
/// §13.5), over the completed requests.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize, schemars::JsonSchema)]
pub struct PrefixReuse {
    /// Prompt tokens of the completed requests (server usage).
    pub prompt_tokens: u64,
    /// Tokens the server reported served from its cache (`usage.prompt_tokens_details.cached_tokens`),
    /// over the completed requests that reported it.
    pub cached_tokens: u64,
    /// Completed requests whose usage reported cached tokens.
    pub reported: u64,
    /// Completed requests.
    pub requests: u64,
    /// The ideal over the same requests: each one's longest prefix shared with any earlier request
    /// of the replay, rounded down to the KV block; `None` where the trace does not say (messages).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ideal_tokens: Option<u64>,
    /// `cached_tokens ÷ ideal_tokens`, % (over the requests that reported); `None` when either is
    /// unknown or the ideal is 0.
    #[schemars(range(min = 0))]
    pub reached_pct: Option<f64>,
}

/// Whether a level meets the SLO as the capacity search judges it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ScaleVerdict {
    pub met: bool,
    /// Why not, as the page words it: the first bound that failed, "saturated", the failures.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limited_by: Option<String>,
    /// The SLO's bounds, each at its percentile over the completed requests.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub bounds: Vec<BoundCheck>,
}

/// The most failures (share of the requests judged) a level meeting the SLO may have, %.
pub const MAX_FAILED_PCT: f64 = 1.0;

impl ScaleVerdict {
    /// A measured level meets the SLO when its bounds hold over the completed requests, the
    /// server kept up (an unknown verdict is not evidence that it did), and under 1 % of the
    /// requests failed (methodology §13.5).
    pub fn of(level: &RateLevel, bounds: Vec<BoundCheck>) -> ScaleVerdict {
        let first_failed = bounds.iter().find(|b| !b.holds).map(|b| b.bound.clone());
        let c = &level.counts;
        let judged = c.completed + c.failed;
        let failed_pct = if judged == 0 { 100.0 } else { c.failed as f64 * 100.0 / judged as f64 };
        let limited_by = if level.status != LevelStatus::Measured || c.completed == 0 {
            Some("no request completed".to_string())
        } else if failed_pct >= MAX_FAILED_PCT {
            Some(format!("failures ({} of {judged} requests)", c.failed))
        } else if let Some(b) = first_failed {
            Some(bound_words(&b))
        } else {
            match level.verdict() {
                Some(Saturation::KeptUp) => None,
                Some(Saturation::Saturated) => Some("saturated (a queue grew)".to_string()),
                _ => Some("saturation unknown (too little evidence that the server kept up)".to_string()),
            }
        };
        ScaleVerdict { met: limited_by.is_none(), limited_by, bounds }
    }
}

/// `ttft_p90` → "TTFT p90".
fn bound_words(b: &BoundName) -> String {
    let key = b.to_string();
    let (figure, pct) = key.rsplit_once('_').unwrap_or((key.as_str(), ""));
    let figure = match figure {
        "tok_s" => "tok/s per request",
        "ttft" => "TTFT",
        "ttfa" => "TTFA",
        "tbt" => "TBT",
        other => other,
    };
    if pct.is_empty() { figure.to_string() } else { format!("{figure} {pct}") }
}

/// One time scale of the replay.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ReplayLevel {
    /// 2 = the trace sent twice as fast as recorded.
    #[schemars(extend("exclusiveMinimum" = 0))]
    pub time_scale: f64,
    /// Whether a capacity search chose this scale (not one asked for with `--time-scale`).
    #[serde(default)]
    pub searched: bool,
    /// The figures of a rate level; `rate` is the recorded rate × the scale (`inf` for a trace of
    /// one instant).
    #[serde(flatten)]
    pub level: RateLevel,
    /// The prefix cache against the ideal; `None` for a level not measured.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prefix: Option<PrefixReuse>,
    /// Against the run's SLO, for the capacity search; `None` for a level not measured.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub verdict: Option<ScaleVerdict>,
}

/// The capacity answer on the trace: the largest time scale that meets the SLO.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ReplayCapacity {
    /// The largest scale measured that met the SLO with no smaller scale failing; `None` when even
    /// the smallest tried failed.
    pub max_scale: Option<f64>,
    /// The recorded rate × `max_scale`, req/s.
    pub max_rps: Option<f64>,
    /// The smallest scale that failed above it; `None` when none did up to the search's ceiling.
    pub failed_scale: Option<f64>,
    /// What failed at `failed_scale`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limited_by: Option<String>,
    /// Whether the bracket is as narrow as the search's precision (±5 % of the scale).
    pub converged: bool,
}

/// The phase's section.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ReplayPhase {
    pub settings: ReplaySettings,
    /// In the order they ran.
    pub levels: Vec<ReplayLevel>,
    /// With `--find-capacity`, once the search has a bracket.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub capacity: Option<ReplayCapacity>,
}

impl ReplayPhase {
    /// The measured levels by scale, ascending.
    pub fn by_scale(&self) -> Vec<&ReplayLevel> {
        let mut levels: Vec<&ReplayLevel> = self.levels.iter().collect();
        levels.sort_by(|a, b| a.time_scale.total_cmp(&b.time_scale));
        levels
    }

    /// Whether a level ended in an error (makes `run` exit 2).
    pub fn errored(&self) -> bool {
        self.levels.iter().any(|l| l.level.status == LevelStatus::Error)
    }

    /// The capacity search's verdicts so far: a level not measured (skipped, an error) says
    /// nothing about the load.
    pub fn search(&self) -> CapacitySearch {
        CapacitySearch::new(self.levels.iter().filter_map(|l| Some((l.time_scale, l.verdict.as_ref()?.met))))
    }

    /// The capacity answer from the levels measured so far (methodology §13.5).
    pub fn capacity_answer(&self) -> ReplayCapacity {
        let search = self.search();
        let (max_scale, failed_scale) = search.bracket();
        let limited_by = failed_scale.and_then(|f| {
            let level = self.levels.iter().rev().find(|l| l.time_scale == f && l.verdict.is_some())?;
            level.verdict.as_ref()?.limited_by.clone()
        });
        let first = self.settings.time_scales.first().copied().unwrap_or(1.0);
        ReplayCapacity {
            max_scale,
            max_rps: max_scale.zip(self.settings.recorded_rps).map(|(s, r)| s * r),
            failed_scale,
            limited_by,
            converged: search.next(first) == Next::Done,
        }
    }
}

#[cfg(test)]
mod tests;
