//! The fields speedmatrix.run/1.2 added (methodology §12), checked like the rest: each interval
//! finite, within the figure's range and not upside down, and carried only by a valid cell that
//! has the figure; repeats no more than `--repeats` makes, their figures and intervals numbers;
//! the phases of a cell's wall time non-negative seconds; the precision settings in range.

use sm_core::figures::Figures as _;
use sm_core::figures::intervals::WithInterval;
use sm_core::precision::Interval;
use sm_core::record::{CellIntervals, CellStatus, DecodeCell, Repeat, RunRecord};

use super::sections::bound;
use super::{MAX_S, MAX_TOK_S, Refusal, figure};

/// Measurements of one cell: `--repeats` takes at most 100.
pub const MAX_REPEATS: usize = 100;

/// An interval's text in a refusal: `1.7e308` as such, not as 309 digits.
fn number(v: f64) -> String {
    if v.is_finite() && v.abs() >= 1e15 { format!("{v:e}") } else { v.to_string() }
}

/// One interval: both ends finite numbers within ±`max` (a batch-means interval of a noisy figure
/// may reach below 0), `lo` ≤ `hi`.
fn interval(at: &str, field: &'static str, i: Option<Interval>, max: f64) -> Result<(), Refusal> {
    let Some(i) = i else { return Ok(()) };
    let why = if !(i.lo.is_finite() && i.hi.is_finite()) || i.lo.abs() > max || i.hi.abs() > max {
        format!("its ends must be finite numbers within ±{max:e}")
    } else if i.lo > i.hi {
        "its lower end is above its upper end".to_string()
    } else {
        return Ok(());
    };
    let (lo, hi) = (number(i.lo), number(i.hi));
    Err(Refusal::Incoherent { at: at.to_string(), why: format!("ci.{field} is [{lo}, {hi}], not an interval: {why}") })
}

/// Figures and intervals of a cell or of one repeat (`value` reads a figure of either): each
/// figure with an interval ([`CellIntervals::FIGURES`]) in its unit's range, an interval only
/// around a figure.
fn figures_and_intervals(
    at: &str,
    value: impl Fn(&WithInterval) -> Option<f64>,
    ci: Option<&CellIntervals>,
) -> Result<(), Refusal> {
    let none = CellIntervals::default();
    for f in CellIntervals::FIGURES {
        let field = f.name;
        let max = DecodeCell::figure(field).map_or(f64::MAX, |d| bound(d.unit));
        let (value, i) = (value(f), (f.interval)(ci.unwrap_or(&none)));
        figure(at, field, value, max)?;
        interval(at, field, i, max)?;
        if i.is_some() && value.is_none() {
            return Err(Refusal::Incoherent { at: at.to_string(), why: format!("ci.{field} without {field}") });
        }
    }
    Ok(())
}

fn repeat(at: &str, k: usize, r: &Repeat) -> Result<(), Refusal> {
    let at = format!("{at}, repeat {}", k + 1);
    figures_and_intervals(&at, |f| (f.repeat)(r), r.ci.as_ref())?;
    figure(&at, "measured_s", r.measured_s, MAX_S)?;
    figure(&at, "goodput_tok_s", r.goodput_tok_s, MAX_TOK_S)
}

/// A decode cell's intervals, repeats and phases.
pub fn cell(at: &str, c: &DecodeCell) -> Result<(), Refusal> {
    let status = c.status();
    if status != CellStatus::Valid && c.ci.is_some() {
        return Err(Refusal::FigureOfInvalid { at: at.to_string(), status: status.name(), field: "ci" });
    }
    let value = |f: &WithInterval| DecodeCell::figure(f.name).and_then(|d| d.of(c));
    figures_and_intervals(at, value, c.ci.as_ref())?;
    if c.repeats.len() > MAX_REPEATS {
        return Err(Refusal::TooMany {
            what: "repeats of one decode cell",
            name: "MAX_REPEATS",
            found: c.repeats.len(),
            limit: MAX_REPEATS,
        });
    }
    c.repeats.iter().enumerate().try_for_each(|(k, r)| repeat(at, k, r))?;
    if let Some(p) = &c.phases {
        for (field, v) in [
            ("phases.before_s", p.before_s),
            ("phases.ramp_s", p.ramp_s),
            ("phases.window_s", p.window_s),
            ("phases.after_s", p.after_s),
        ] {
            figure(at, field, Some(v), MAX_S)?;
        }
    }
    Ok(())
}

/// `--precision`, `--min-duration` and `--repeats` as run.json records them.
pub fn settings(record: &RunRecord) -> Result<(), Refusal> {
    let s = &record.settings;
    if let Some(p) = s.precision_pct.filter(|p| !(p.is_finite() && *p > 0.0 && *p <= 100.0)) {
        return Err(Refusal::Incoherent {
            at: "settings".into(),
            why: format!("precision_pct is {}, not a precision: a half-width above 0 and at most 100 %", number(p)),
        });
    }
    figure("settings", "min_duration_s", s.min_duration_s, MAX_S)?;
    match s.repeats {
        Some(n) if n == 0 || n as usize > MAX_REPEATS => Err(Refusal::Incoherent {
            at: "settings".into(),
            why: format!("repeats is {n}; a cell is measured from 1 to {MAX_REPEATS} times"),
        }),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use sm_core::record::{CellPhases, Repeat};

    use super::super::check;
    use super::*;

    /// The sample run with a 1.2 cell: intervals, two repeats, phases and the precision settings.
    fn sample() -> (RunRecord, usize) {
        let mut r: RunRecord = serde_json::from_str(include_str!("../../../../tests/data/run-sample.json")).unwrap();
        let i = r.decode.iter().position(|c| c.status() == CellStatus::Valid).unwrap();
        let c = &mut r.decode[i];
        let around = |v: Option<f64>| v.map(|v| Interval { lo: v * 0.99, hi: v * 1.01 });
        let ci = CellIntervals {
            total_tok_s: around(c.total_tok_s),
            tbt_ms_p50: around(c.tbt_ms.p50),
            ttft_ms_p90: around(c.ttft_ms.p90),
            ..CellIntervals::default()
        };
        c.ci = Some(ci);
        let one = Repeat {
            total_tok_s: c.total_tok_s,
            ttft_ms_p90: c.ttft_ms.p90,
            tbt_ms_p50: c.tbt_ms.p50,
            measured_s: Some(5.0),
            ci: Some(ci),
            ..Repeat::default()
        };
        c.repeats = vec![one.clone(), one];
        c.phases = Some(CellPhases { before_s: 0.5, ramp_s: 1.0, window_s: 5.0, after_s: 0.2 });
        r.settings.precision_pct = Some(1.0);
        r.settings.min_duration_s = Some(5.0);
        r.settings.repeats = Some(2);
        (r, i)
    }

    #[test]
    fn a_run_with_intervals_repeats_and_phases_is_accepted() {
        assert_eq!(check(&sample().0), Ok(()));
        // an interval of a noisy figure may reach below 0
        let (mut r, i) = sample();
        r.decode[i].ci.as_mut().unwrap().total_tok_s = Some(Interval { lo: -3.0, hi: 5.0 });
        assert_eq!(check(&r), Ok(()));
    }

    #[test]
    fn bad_precision_fields_are_named() {
        type Change = Box<dyn Fn(&mut RunRecord, usize)>;
        fn ci(r: &mut RunRecord, i: usize) -> &mut CellIntervals {
            r.decode[i].ci.as_mut().unwrap()
        }
        let cases: Vec<(Change, &str)> = vec![
            (
                Box::new(|r, i| ci(r, i).total_tok_s = Some(Interval { lo: 10.0, hi: 5.0 })),
                "ci.total_tok_s is [10, 5], not an interval: its lower end is above its upper end",
            ),
            (
                Box::new(|r, i| ci(r, i).tbt_ms_p50 = Some(Interval { lo: 1.0, hi: f64::INFINITY })),
                "ci.tbt_ms_p50 is [1, inf]",
            ),
            (Box::new(|r, i| ci(r, i).ttft_ms_p90 = Some(Interval { lo: 0.0, hi: 1.7e308 })), "[0, 1.7e308]"),
            (
                Box::new(|r, i| ci(r, i).ttft_ms_p50 = Some(Interval { lo: f64::NAN, hi: 1.0 })),
                "ci.ttft_ms_p50 is [NaN, 1]",
            ),
            (
                Box::new(move |r, i| {
                    r.decode[i].ttft_ms.p90 = None;
                }),
                "ci.ttft_ms_p90 without ttft_ms_p90",
            ),
            (Box::new(|r, i| r.decode[i].status = Some(CellStatus::Error)), "is error, yet carries ci"),
            (
                Box::new(|r, i| r.decode[i].repeats = vec![Repeat::default(); MAX_REPEATS + 1]),
                "101 repeats of one decode cell; the site takes at most 100 (limit MAX_REPEATS)",
            ),
            (Box::new(|r, i| r.decode[i].repeats[1].total_tok_s = Some(-1.0)), "repeat 2: total_tok_s is -1"),
            (Box::new(|r, i| r.decode[i].repeats[0].measured_s = Some(1e300)), "repeat 1: measured_s is 1e300"),
            (
                Box::new(|r, i| {
                    r.decode[i].repeats[0].ci.as_mut().unwrap().total_tok_s = Some(Interval { lo: 2.0, hi: 1.0 })
                }),
                "repeat 1: ci.total_tok_s is [2, 1]",
            ),
            (Box::new(|r, i| r.decode[i].phases.as_mut().unwrap().ramp_s = -0.5), "phases.ramp_s is -0.5"),
            (Box::new(|r, _| r.settings.precision_pct = Some(0.0)), "precision_pct is 0"),
            (Box::new(|r, _| r.settings.precision_pct = Some(250.0)), "precision_pct is 250"),
            (Box::new(|r, _| r.settings.min_duration_s = Some(-5.0)), "min_duration_s is -5"),
            (Box::new(|r, _| r.settings.repeats = Some(0)), "repeats is 0"),
            (Box::new(|r, _| r.settings.repeats = Some(1000)), "repeats is 1000"),
        ];
        for (change, expected) in cases {
            let (mut r, i) = sample();
            change(&mut r, i);
            let err = check(&r).expect_err(expected).to_string();
            assert!(err.contains(expected), "{expected}: {err}");
        }
    }
}
