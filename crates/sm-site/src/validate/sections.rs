//! A record section's figures checked from its table ([`sm_core::figures`]): each in its unit's
//! range, and carried only by a section whose status allows it. A figure added to a table is
//! checked here without naming it.

use sm_core::figures::{Figures, Unit};

use super::{MAX_MS, MAX_S, MAX_TOK_S, Refusal, figure};

/// Requests per second, and requests in flight or streams active at once: far above any server's.
const MAX_RPS: f64 = 1e7;
const MAX_STREAMS: f64 = 1e7;
/// A client's CPU in percent of one core: a million cores.
const MAX_CPU_PCT: f64 = 1e6;
/// The largest slowdown or fraction taken: a loaded TTFT a million times the idle one is a typo.
const MAX_RATIO: f64 = 1e6;
/// The largest price taken: USD per hour for the server, or per million tokens.
pub(super) const MAX_USD: f64 = 1e9;
/// The largest context taken, in tokens: far above any model's.
pub const MAX_CONTEXT_TOKENS: f64 = 1e12;

/// The largest value a figure of `unit` takes; every unit starts at 0.
pub fn bound(unit: Unit) -> f64 {
    match unit {
        Unit::Ms => MAX_MS,
        Unit::Seconds => MAX_S,
        Unit::TokPerS => MAX_TOK_S,
        Unit::ReqPerS => MAX_RPS,
        Unit::Percent => 100.0,
        Unit::CorePercent => MAX_CPU_PCT,
        Unit::Streams => MAX_STREAMS,
        Unit::Count => f64::MAX,
        Unit::Tokens => MAX_CONTEXT_TOKENS,
        Unit::Ratio => MAX_RATIO,
        Unit::Share => 1.0,
        Unit::Usd => MAX_USD,
    }
}

/// Every figure of `section` (named `at` in a refusal): carried only where its status allows,
/// and a measurement in its unit's range.
pub(super) fn check<T: Figures>(at: &str, section: &T) -> Result<(), Refusal> {
    let status = section.status();
    for f in T::FIGURES {
        let value = f.of(section);
        if value.is_some() && !f.carried.allows(status) {
            return Err(Refusal::FigureOfInvalid { at: at.to_string(), status: status.name(), field: f.name });
        }
        figure(at, f.name, value, bound(f.unit))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests;
