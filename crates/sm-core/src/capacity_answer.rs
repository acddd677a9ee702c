//! The capacity answer as run.json's `capacity[]` holds it (methodology §11.3): the types only,
//! so that the record can hold them while `answer` computes them from the record's cells.

use std::fmt;

use serde::{Deserialize, Serialize};

use crate::slo::BoundName;

/// What kept the capacity from being larger.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BoundedBy {
    /// The first level above failed this bound of the SLO (`tok_s_p10`).
    Slo(BoundName),
    /// One more user would not fit the KV cache (under the run's capacity rule).
    KvCache,
    /// One more user would be above the server's `max_num_seqs`.
    MaxNumSeqs,
    /// Every measured level passed: the true capacity may be higher.
    MatrixTop,
    /// The next level could not be measured (error, loop, skipped): the answer is a lower bound.
    Unmeasured,
    /// Even the lowest level failed the SLO.
    None,
}

impl fmt::Display for BoundedBy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            BoundedBy::Slo(bound) => write!(f, "slo:{bound}"),
            BoundedBy::KvCache => f.write_str("kv_cache"),
            BoundedBy::MaxNumSeqs => f.write_str("max_num_seqs"),
            BoundedBy::MatrixTop => f.write_str("matrix_top"),
            BoundedBy::Unmeasured => f.write_str("unmeasured"),
            BoundedBy::None => f.write_str("none"),
        }
    }
}

impl std::str::FromStr for BoundedBy {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        Ok(match s {
            "kv_cache" => BoundedBy::KvCache,
            "max_num_seqs" => BoundedBy::MaxNumSeqs,
            "matrix_top" => BoundedBy::MatrixTop,
            "unmeasured" => BoundedBy::Unmeasured,
            "none" => BoundedBy::None,
            _ => match s.strip_prefix("slo:") {
                Some(b) if !b.is_empty() => BoundedBy::Slo(BoundName::from(b)),
                _ => return Err(format!("unknown bounded_by '{s}'")),
            },
        })
    }
}

impl Serialize for BoundedBy {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for BoundedBy {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        String::deserialize(d)?.parse().map_err(serde::de::Error::custom)
    }
}

crate::record::schema::written_as!(BoundedBy, "BoundedBy", {
    "type": "string",
    "pattern": "^(slo:(tok_s|ttft|ttfa|ttftc|tbt)_p[0-9]{1,2}|kv_cache|max_num_seqs|matrix_top|unmeasured|none)$",
    "description": "What kept it from being larger: `slo:<bound>` (the next level failed that bound), `kv_cache` or `max_num_seqs` (one more user would not fit), `matrix_top` (every level measured passed), `unmeasured` (the next level ended error, loop or skipped: a lower bound), `none` (C=1 failed)."
});

/// The capacity answer of one decode context, as run.json's `capacity[]` holds it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Capacity {
    /// The decode context answered; 0 for a reference-tool file's row without a prompt prefix.
    pub context: u64,
    pub label: String,
    /// The largest concurrency whose cell met the SLO; 0 when none did.
    pub max_users: u32,
    pub bounded_by: BoundedBy,
    /// The concurrency of the cell that proves `max_users` (null when 0).
    #[schemars(range(min = 1))]
    pub cell: Option<u32>,
    /// The concurrency of the measured cell that failed (with `slo:` or `unmeasured`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub failed_cell: Option<u32>,
    /// The most users the KV cache and `max_num_seqs` allow at this context, where known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fit_limit: Option<u32>,
    /// `--cost-per-hour` ÷ `max_users`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0))]
    pub usd_per_user_hour: Option<f64>,
    /// The capacity cell's cost of a million output tokens.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0))]
    pub usd_per_million_tokens: Option<f64>,
}
