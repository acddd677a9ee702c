//! The decode figures with 95 % intervals (methodology §12): one table that ties a figure of the
//! decode cell's table to its interval in `ci` and to its value in each of `repeats[]`, which the
//! site's checks and `compare` iterate. A figure gets an interval by a field in [`CellIntervals`]
//! and in [`Repeat`], and a line here.

use crate::precision::Interval;
use crate::record::{CellIntervals, Repeat};

/// A decode-cell figure that has an interval.
pub struct WithInterval {
    /// The figure's name in the decode cell's table, in `ci` and in a repeat.
    pub name: &'static str,
    /// Its 95 % interval in a cell's or a repeat's `ci`.
    pub interval: fn(&CellIntervals) -> Option<Interval>,
    /// Its value in one measurement of the cell (`repeats[]`).
    pub repeat: fn(&Repeat) -> Option<f64>,
}

/// A figure read from the fields of the same name of `ci` and of a repeat.
macro_rules! with_interval {
    ($name:ident) => {
        WithInterval { name: stringify!($name), interval: |ci| ci.$name, repeat: |r| r.$name }
    };
    // a figure `--repeats` does not average: each measurement keeps its own interval only
    ($name:ident, not_repeated) => {
        WithInterval { name: stringify!($name), interval: |ci| ci.$name, repeat: |_| None }
    };
}

impl CellIntervals {
    /// Every figure with an interval, in the order `compare` shows them.
    pub const FIGURES: &'static [WithInterval] = &[
        with_interval!(total_tok_s),
        with_interval!(per_request_tok_s),
        with_interval!(ttft_ms_p50),
        with_interval!(ttft_ms_p90),
        with_interval!(tbt_ms_p50),
        with_interval!(tbt_ms_p99),
        with_interval!(ttfa_ms_p50, not_repeated),
        with_interval!(ttfa_ms_p90, not_repeated),
        with_interval!(ttftc_ms_p50, not_repeated),
        with_interval!(ttftc_ms_p90, not_repeated),
    ];

    /// The figure with an interval named `name`, if there is one.
    pub fn figure(name: &str) -> Option<&'static WithInterval> {
        Self::FIGURES.iter().find(|f| f.name == name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::figures::Figures;
    use crate::record::DecodeCell;

    #[test]
    fn each_figure_with_an_interval_is_a_figure_of_the_decode_cell_and_of_a_repeat() {
        for f in CellIntervals::FIGURES {
            assert!(DecodeCell::figure(f.name).is_some(), "{} is not a decode-cell figure", f.name);
            let ci = serde_json::json!({ f.name: { "lo": 1.0, "hi": 2.0 } });
            let ci: CellIntervals = serde_json::from_value(ci).unwrap();
            assert_eq!((f.interval)(&ci), Some(Interval { lo: 1.0, hi: 2.0 }), "{}", f.name);
            if f.name.starts_with("ttfa_") || f.name.starts_with("ttftc_") {
                continue; // not a figure of a repeat
            }
            let repeat: Repeat = serde_json::from_value(serde_json::json!({ f.name: 3.5 })).unwrap();
            assert_eq!((f.repeat)(&repeat), Some(3.5), "{}", f.name);
        }
    }

    #[test]
    fn every_interval_of_the_record_type_is_in_the_table() {
        // a field added to CellIntervals without its line here is written but never checked
        let all = serde_json::to_value(CellIntervals {
            total_tok_s: Some(Interval { lo: 0.0, hi: 1.0 }),
            per_request_tok_s: Some(Interval { lo: 0.0, hi: 1.0 }),
            ttft_ms_p50: Some(Interval { lo: 0.0, hi: 1.0 }),
            ttft_ms_p90: Some(Interval { lo: 0.0, hi: 1.0 }),
            tbt_ms_p50: Some(Interval { lo: 0.0, hi: 1.0 }),
            tbt_ms_p99: Some(Interval { lo: 0.0, hi: 1.0 }),
            ttfa_ms_p50: Some(Interval { lo: 0.0, hi: 1.0 }),
            ttfa_ms_p90: Some(Interval { lo: 0.0, hi: 1.0 }),
            ttftc_ms_p50: Some(Interval { lo: 0.0, hi: 1.0 }),
            ttftc_ms_p90: Some(Interval { lo: 0.0, hi: 1.0 }),
        })
        .unwrap();
        let keys: Vec<&str> = all.as_object().unwrap().keys().map(String::as_str).collect();
        let names: Vec<&str> = CellIntervals::FIGURES.iter().map(|f| f.name).collect();
        assert_eq!(keys.len(), names.len(), "{keys:?} against {names:?}");
        assert!(keys.iter().all(|k| names.contains(k)), "{keys:?} against {names:?}");
    }
}
