//! The percentiles of one distribution as the record writes them: one type for every figure that
//! reports a distribution. p50 is always there; which of p90, p99 and the maximum a figure reports
//! is its shape (a rate level's latencies: p50, p90, p99; its send lag: p50, p99, max), and only
//! those are written, so each section writes what it wrote before this type.
//!
//! Serde reads any of them (it stays lenient, like the rest of the record); the schema is per
//! shape: a field names its shape with `#[schemars(with = "…")]` (one of the schema-only structs
//! below), so the published schema requires exactly the shape's keys. [`Percentiles`] itself has
//! no schema on purpose: a field of it cannot be added to the record without saying its shape.

use serde::{Deserialize, Serialize};

use crate::stats::Quantiles;

/// The percentiles of one distribution (ms where the field's name says so): p50, and those of
/// p90, p99 and the maximum that the figure's shape reports.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
pub struct Percentiles {
    pub p50: f64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub p90: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub p99: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max: Option<f64>,
}

impl Percentiles {
    /// p50, p90 and p99.
    pub fn p50_p90_p99(p50: f64, p90: f64, p99: f64) -> Percentiles {
        Percentiles { p50, p90: Some(p90), p99: Some(p99), max: None }
    }

    /// p50, p99 and the maximum.
    pub fn p50_p99_max(p50: f64, p99: f64, max: f64) -> Percentiles {
        Percentiles { p50, p90: None, p99: Some(p99), max: Some(max) }
    }
}

/// p50, p90 and p99 as computed.
impl From<Quantiles> for Percentiles {
    fn from(q: Quantiles) -> Percentiles {
        Percentiles::p50_p90_p99(q.p50, q.p90, q.p99)
    }
}

// The schema of the shape p50, p90, p99 (a rate level's `ttft_ms`, `tbt_ms`, `e2e_ms`), under the
// name it has always had; its doc comment is the schema's description.
/// p50, p90, p99 of a distribution, ms.
#[derive(schemars::JsonSchema)]
#[schemars(rename = "Percentiles")]
#[allow(dead_code)] // a schema only: never built
pub(crate) struct P50P90P99 {
    #[schemars(range(min = 0))]
    p50: f64,
    #[schemars(range(min = 0))]
    p90: f64,
    #[schemars(range(min = 0))]
    p99: f64,
}

// The schema of the shape p50, p99, max (a rate level's `send_lag_ms`), under the name it has
// always had; its doc comment is the schema's description.
/// How late the requests of a level were sent, ms (sent − due).
#[derive(schemars::JsonSchema)]
#[schemars(rename = "SendLag")]
#[allow(dead_code)] // a schema only: never built
pub(crate) struct P50P99Max {
    #[schemars(range(min = 0))]
    p50: f64,
    #[schemars(range(min = 0))]
    p99: f64,
    #[schemars(range(min = 0))]
    max: f64,
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each shape writes its own keys, in the order the sections wrote them, and reads back.
    #[test]
    fn a_shape_writes_its_keys_only() {
        let latency = Percentiles::p50_p90_p99(1.0, 2.0, 3.0);
        let lag = Percentiles::p50_p99_max(0.5, 4.0, 9.25);
        assert_eq!(serde_json::to_string(&latency).unwrap(), r#"{"p50":1.0,"p90":2.0,"p99":3.0}"#);
        assert_eq!(serde_json::to_string(&lag).unwrap(), r#"{"p50":0.5,"p99":4.0,"max":9.25}"#);
        for p in [latency, lag] {
            assert_eq!(serde_json::from_str::<Percentiles>(&serde_json::to_string(&p).unwrap()).unwrap(), p);
        }
        let q = Quantiles { p50: 1.0, p90: 2.0, p99: 3.0 };
        assert_eq!(Percentiles::from(q), latency);
    }
}
