//! The percentiles of one distribution: one Rust type, [`Percentiles`], for every figure of the
//! record that reports a distribution (a decode cell's TTFT, TBT and chunk gaps, a burst's E2E and
//! TTFT, a sessions phase's TTFT and latency, a rate level's latencies and send lag). Each of p50,
//! p90, p99 and the maximum is an `Option`: which of them a figure reports is its shape, and a
//! section may lack any one of them (a burst's summary takes each key's median over the rounds
//! that have it; an imported file may give a p90 without a maximum).
//!
//! run.json writes it in one of two ways, as each section always has:
//! - **nested** (a rate level: `"ttft_ms": {"p50": …, "p90": …, "p99": …}`): the type's own serde,
//!   which writes the keys present. The schema is per shape: the field names its shape with
//!   `#[schemars(with = "…")]` (one of the schema-only structs [`P50P90P99`], [`P50P99Max`] below).
//!   [`Percentiles`] itself has no schema on purpose: a field of it cannot be added to the record
//!   without saying its shape.
//! - **flat** (every other section: `"ttft_ms_p50": …, "ttft_ms_p90": …`): the field is
//!   `#[serde(flatten, with = "keys")]` and `#[schemars(with = "keys::Keys")]`, where `keys` is a
//!   module that `flat_keys!` makes beside the section from the keys' JSON names, their docs and
//!   their attributes. The keys' attributes say, as they did when each was a field, whether an
//!   absent key is written as null or left out and what the schema allows, so run.json and
//!   schema/run.schema.json are what they were when each key was a field of its own.
//!
//! Serde reads any of them leniently, like the rest of the record: a missing key reads as `None`.

use serde::{Deserialize, Serialize};

use crate::stats::Quantiles;

/// The percentiles of one distribution (ms where the field's name says so): those of p50, p90,
/// p99 and the maximum that the figure's shape reports and the section measured.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
pub struct Percentiles {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub p50: Option<f64>,
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
        Percentiles { p50: Some(p50), p90: Some(p90), p99: Some(p99), max: None }
    }

    /// p50 alone.
    pub fn median(p50: f64) -> Percentiles {
        Percentiles { p50: Some(p50), ..Percentiles::default() }
    }

    /// p50, p99 and the maximum.
    pub fn p50_p99_max(p50: f64, p99: f64, max: f64) -> Percentiles {
        Percentiles { p50: Some(p50), p90: None, p99: Some(p99), max: Some(max) }
    }

    /// p50, p90 and the maximum.
    pub fn p50_p90_max(p50: f64, p90: f64, max: f64) -> Percentiles {
        Percentiles { p50: Some(p50), p90: Some(p90), p99: None, max: Some(max) }
    }

    /// Each value present passed through `f` (a rounding).
    pub fn map(self, f: impl Fn(f64) -> f64) -> Percentiles {
        Percentiles { p50: self.p50.map(&f), p90: self.p90.map(&f), p99: self.p99.map(&f), max: self.max.map(&f) }
    }

    /// Each percentile made by `f` from how to read that percentile of a [`Percentiles`] (the
    /// median over several of them, key by key: a key none of them has stays absent).
    pub fn each(f: impl Fn(fn(&Percentiles) -> Option<f64>) -> Option<f64>) -> Percentiles {
        Percentiles { p50: f(|p| p.p50), p90: f(|p| p.p90), p99: f(|p| p.p99), max: f(|p| p.max) }
    }

    /// Whether the distribution has no value at all (not measured).
    pub fn is_empty(&self) -> bool {
        [self.p50, self.p90, self.p99, self.max].iter().all(Option::is_none)
    }
}

/// p50, p90 and p99 as computed.
impl From<Quantiles> for Percentiles {
    fn from(q: Quantiles) -> Percentiles {
        Percentiles::p50_p90_p99(q.p50, q.p90, q.p99)
    }
}

/// A section's flat keys of one distribution (`ttft_ms_p50`, `ttft_ms_p90`, …) as one
/// [`Percentiles`] field: makes the module `$module` that the field names in
/// `#[serde(flatten, with = "$module")]` and `#[schemars(with = "$module::Keys")]`. Each key is
/// the percentile it holds (`p50`, `p90`, `p99` or `max`), its JSON name, and the docs and
/// attributes it had as a field of its own (its doc is its description in the schema; its
/// `#[serde(...)]` says whether it is left out or written as null when absent).
macro_rules! flat_keys {
    ($(#[$doc:meta])* mod $module:ident { $($(#[$attr:meta])* $q:ident: $key:tt,)+ }) => {
        $(#[$doc])*
        mod $module {
            use $crate::record::percentiles::Percentiles;

            // no doc comment: the schema's description is the section's own
            #[derive(serde::Serialize, serde::Deserialize, schemars::JsonSchema)]
            pub(crate) struct Keys {
                $($(#[$attr])* #[serde(rename = $key)] $q: Option<f64>,)+
            }

            pub(crate) fn serialize<S: serde::Serializer>(p: &Percentiles, s: S) -> Result<S::Ok, S::Error> {
                serde::Serialize::serialize(&Keys { $($q: p.$q,)+ }, s)
            }

            pub(crate) fn deserialize<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Percentiles, D::Error> {
                let keys = <Keys as serde::Deserialize>::deserialize(d)?;
                Ok(Percentiles { $($q: keys.$q,)+ ..Percentiles::default() })
            }
        }
    };
}
pub(crate) use flat_keys;

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
