//! What the site accepts in a run's load phases (issue 17): each phase's section is bounded in
//! size (so its page section costs little) and its figures are measurements (finite, in range).
//! Each phase checks its own section in its function below.

use sm_core::phases::rate::{LevelStatus, RateLevel};
use sm_core::record::{CellStatus, RunRecord};

use super::{MAX_S, Refusal, at_most, bound, figure, sections};
use sm_core::figures::Unit;

mod burst;
mod mixed;
mod replay;
pub use replay::{MAX_LIMITED_BY_BYTES, MAX_REPLAY_LEVELS};
mod sessions;

/// The size limits of every phase's section.
pub(super) fn limits(record: &RunRecord) -> Result<(), Refusal> {
    rate_limits(record)?;
    burst::limits(record)?;
    mixed::limits(record)?;
    sessions::limits(record)?;
    replay::limits(record)?;
    Ok(())
}

/// The figures of every phase's section.
pub(super) fn figures(record: &RunRecord) -> Result<(), Refusal> {
    rate_figures(record)?;
    burst::figures(record)?;
    mixed::figures(record)?;
    sessions::figures(record)?;
    replay::figures(record)?;
    Ok(())
}

/// The most rate levels a run may hold (contexts × rates).
const MAX_RATE_LEVELS: usize = 256;
/// The most rates one sweep may list.
const MAX_RATES: usize = 32;

fn rate_limits(record: &RunRecord) -> Result<(), Refusal> {
    let Some(phase) = &record.phases.rate else { return Ok(()) };
    at_most("rate levels", "MAX_RATE_LEVELS", phase.levels.len(), MAX_RATE_LEVELS)?;
    at_most("request rates", "MAX_RATES", phase.settings.rates.len(), MAX_RATES)
}

fn rate_figures(record: &RunRecord) -> Result<(), Refusal> {
    let Some(phase) = &record.phases.rate else { return Ok(()) };
    for r in &phase.settings.rates {
        figure("phases.rate.settings", "rates", r.per_second(), bound(Unit::ReqPerS))?;
    }
    figure("phases.rate.settings", "drain_max_s", Some(phase.settings.drain_max_s), MAX_S)?;
    figure("phases.rate.settings", "grace_s", phase.settings.grace_s, MAX_S)?;
    for l in &phase.levels {
        rate_level(&format!("phases.rate level {} req/s at {}", l.rate, l.label), l)?;
    }
    Ok(())
}

/// A rate level's figures, telemetry and counts; a replay level is checked as one too.
fn rate_level(at: &str, l: &RateLevel) -> Result<(), Refusal> {
    sections::check(at, l)?;
    // telemetry as a decode cell's (methodology §14): only a measured level carries it
    let status = if l.status == LevelStatus::Measured { CellStatus::Valid } else { CellStatus::Error };
    let tokens = l.output_tok_s.zip(l.span_s).map(|(r, s)| (r * s).round() as u64);
    super::gpu::check(at, status, l.telemetry.gpu.as_ref(), tokens)?;
    super::server_metrics::check(at, status, l.telemetry.server_metrics.as_ref())?;
    let c = &l.counts;
    if c.completed + c.failed + c.cancelled + c.unsent != c.scheduled || c.sent > c.scheduled {
        let why = "its request counts do not add up (completed + failed + cancelled + unsent = scheduled)".into();
        return Err(Refusal::Incoherent { at: at.to_string(), why });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use sm_core::phases::rate::{Arrival, LevelCounts, LevelStatus, RateLevel, RatePhase, RateSettings, RequestRate};
    use sm_core::record::Percentiles;

    use super::*;

    fn with_level(level: RateLevel, levels: usize) -> RunRecord {
        let mut r: RunRecord = serde_json::from_str(include_str!("../../../../tests/data/run-sample.json")).unwrap();
        r.phases.rate = Some(RatePhase {
            settings: RateSettings {
                rates: vec![RequestRate::PerSecond(2.0)],
                arrival: Arrival::Poisson,
                max_concurrency: None,
                requests: Some(4),
                window_s: None,
                seed: 17,
                drain_max_s: 600.0,
                grace_s: None,
                max_tokens: 32,
            },
            levels: vec![level; levels],
        });
        r
    }

    fn good() -> RateLevel {
        let mut l =
            RateLevel::unmeasured(1024, "1K".into(), RequestRate::PerSecond(2.0), LevelStatus::Measured, String::new());
        l.counts = LevelCounts { scheduled: 4, sent: 4, completed: 3, failed: 1, ..LevelCounts::default() };
        l.achieved_rps = Some(1.5);
        l.ttft_ms = Some(Percentiles::p50_p90_p99(10.0, 20.0, 30.0));
        l.goodput_pct = Some(75.0);
        l
    }

    #[test]
    fn a_rate_section_is_bounded_and_its_figures_are_measurements() {
        assert_eq!(super::super::check(&with_level(good(), 3)), Ok(()));
        let err = limits(&with_level(good(), MAX_RATE_LEVELS + 1)).unwrap_err();
        assert!(matches!(err, Refusal::TooMany { name: "MAX_RATE_LEVELS", .. }), "{err}");
        let mut nan = good();
        nan.ttft_ms = Some(Percentiles::p50_p90_p99(f64::NAN, 1.0, 1.0));
        assert!(matches!(figures(&with_level(nan, 1)), Err(Refusal::BadFigure { field: "ttft_ms_p50", .. })));
        let mut over = good();
        over.goodput_pct = Some(150.0);
        assert!(matches!(figures(&with_level(over, 1)), Err(Refusal::BadFigure { field: "goodput_pct", .. })));
        let mut counts = good();
        counts.counts.completed = 9;
        assert!(matches!(figures(&with_level(counts, 1)), Err(Refusal::Incoherent { .. })));
    }
}
