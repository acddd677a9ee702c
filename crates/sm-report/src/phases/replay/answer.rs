//! The capacity answer on a replayed trace (methodology §13.5) as people read it: the largest time
//! scale that meets the SLO, e.g. "Serves this traffic at up to 3.08× its recorded rate (12.3
//! req/s) at ≥ 20 tok/s each (p10), TTFT p90 ≤ 2 s — limited by TTFT p90 at 3.22×". Every view
//! heads its page with it, after the decode matrix's answer where the run has both.

use sm_core::figures::Unit;
use sm_core::phases::replay::{MAX_SCALE, MIN_SCALE, PRECISION, ReplayCapacity, ReplayPhase};
use sm_core::record::RunRecord;
use sm_core::slo::Slo;

use super::scale;
use crate::capacity::{SloSource, slo_note, slo_words};
use crate::format;

/// The answer as a page opens with it.
#[derive(Debug, Clone, PartialEq)]
pub struct ReplayHeadline {
    pub sentence: String,
    /// Which SLO was used, where the decode matrix's answer does not already say it above.
    pub slo_note: Option<String>,
}

/// The record's answer on its trace: `None` without `--find-capacity`, or before any scale was
/// judged.
pub fn headline(record: &RunRecord) -> Option<ReplayHeadline> {
    let cap = capacity(record.phases.replay.as_ref()?)?;
    let slo = record.settings.slo.as_ref();
    let matrix_says_it = record.settings.matrix && crate::capacity::headline(record).is_some();
    Some(ReplayHeadline {
        sentence: sentence(&cap, slo),
        slo_note: slo.filter(|_| !matrix_says_it).map(|s| slo_note(s, SloSource::Measured)),
    })
}

/// The phase's answer: the one the run recorded, else (a run stopped before the search had a
/// bracket) the one its judged levels give.
pub fn capacity(phase: &ReplayPhase) -> Option<ReplayCapacity> {
    if !phase.settings.find_capacity {
        return None;
    }
    let judged = phase.levels.iter().any(|l| l.verdict.is_some());
    phase.capacity.clone().or_else(|| judged.then(|| phase.capacity_answer()))
}

/// The answer in a sentence, under `slo` (the run's; `None` for a record without one).
pub fn sentence(cap: &ReplayCapacity, slo: Option<&Slo>) -> String {
    let at = slo.map(|s| format!(" at {}", slo_words(s))).unwrap_or_default();
    let limited = |f: f64| {
        let why = cap.limited_by.as_deref().unwrap_or("the SLO");
        format!(" — limited by {why} at {}", scale(f))
    };
    let rps = cap.max_rps.map(|r| format!(" ({} req/s)", format::figure(Unit::ReqPerS, Some(r)))).unwrap_or_default();
    let body = match (cap.max_scale, cap.failed_scale) {
        (Some(s), Some(f)) => {
            format!("Serves this traffic at up to {} its recorded rate{rps}{at}{}", scale(s), limited(f))
        }
        (Some(s), None) if s >= MAX_SCALE * (1.0 - 1e-9) => {
            format!("Serves this traffic at least at {} its recorded rate{rps}{at} (the search's ceiling)", scale(s))
        }
        (Some(s), None) => format!(
            "Serves this traffic at least at {} its recorded rate{rps}{at} (no faster scale was measured)",
            scale(s)
        ),
        (None, Some(f)) if f <= MIN_SCALE * (1.0 + 1e-9) => {
            format!(
                "Does not serve this traffic{at}, not even at 1/{} of its recorded rate{}",
                1.0 / MIN_SCALE,
                limited(f)
            )
        }
        (None, Some(f)) => format!("Does not serve this traffic{at} at {} its recorded rate{}", scale(f), limited(f)),
        (None, None) => format!("No answer on this traffic{at}: no time scale was judged"),
    };
    format!("{body}{}.", if cap.converged { String::new() } else { not_converged(cap) })
}

/// The answer in a few characters, for a list of runs: "up to 2× (8.00 req/s)", "≥ 64×", "below
/// 0.5×".
pub fn short(cap: &ReplayCapacity) -> String {
    let rps = cap.max_rps.map(|r| format!(" ({} req/s)", format::figure(Unit::ReqPerS, Some(r)))).unwrap_or_default();
    let mark = if cap.converged { "" } else { ", not converged" };
    match (cap.max_scale, cap.failed_scale) {
        (Some(s), Some(_)) => format!("up to {}{rps}{mark}", scale(s)),
        (Some(s), None) => format!("≥ {}{rps}{mark}", scale(s)),
        (None, Some(f)) => format!("below {}{mark}", scale(f)),
        (None, None) => format::NONE.to_string(),
    }
}

/// Why the answer is not as precise as the search makes it: it stopped (interrupted, or resumed
/// without the search) before its bracket narrowed to the precision.
fn not_converged(cap: &ReplayCapacity) -> String {
    let pct = PRECISION * 100.0;
    match (cap.max_scale, cap.failed_scale) {
        (Some(s), Some(f)) => format!(
            " (not converged: the answer lies between {} and {}, wider than the search's ±{pct:.0} %)",
            scale(s),
            scale(f)
        ),
        _ => " (not converged: the search stopped before it bracketed the answer)".to_string(),
    }
}
