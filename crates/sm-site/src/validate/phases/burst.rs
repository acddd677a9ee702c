//! What the site accepts in a run's burst phase (methodology §13.2): bursts, rounds, contexts and
//! levels bounded; figures finite and in range; a burst that was not sent carries none.

use std::collections::BTreeSet;

use sm_core::phases::burst::BurstPhase;
use sm_core::record::RunRecord;

use super::super::{MAX_CONCURRENCY_LEVELS, MAX_CONTEXT_TOKENS, MAX_CONTEXTS, Refusal, at_most, figure, sections};

/// Rounds of each burst (`--burst-rounds` accepts 1 to 10).
pub(super) const MAX_BURST_ROUNDS: usize = 10;
/// Bursts of a run: every context × concurrency of the plan, each round.
pub(super) const MAX_BURSTS: usize = MAX_CONTEXTS * MAX_CONCURRENCY_LEVELS * MAX_BURST_ROUNDS;

pub(super) fn limits(record: &RunRecord) -> Result<(), Refusal> {
    record.phases.burst.as_ref().map_or(Ok(()), burst_limits)
}

pub(super) fn figures(record: &RunRecord) -> Result<(), Refusal> {
    record.phases.burst.as_ref().map_or(Ok(()), burst_figures)
}

fn burst_limits(p: &BurstPhase) -> Result<(), Refusal> {
    at_most("bursts", "MAX_BURSTS", p.bursts.len(), MAX_BURSTS)?;
    at_most("burst rounds", "MAX_BURST_ROUNDS", p.rounds as usize, MAX_BURST_ROUNDS)?;
    let contexts: BTreeSet<Option<u64>> = p.bursts.iter().map(|b| b.context).collect();
    at_most("distinct burst contexts", "MAX_CONTEXTS", contexts.len(), MAX_CONTEXTS)?;
    let levels: BTreeSet<u32> = p.bursts.iter().map(|b| b.concurrency).collect();
    at_most("distinct burst concurrency levels", "MAX_CONCURRENCY_LEVELS", levels.len(), MAX_CONCURRENCY_LEVELS)?;
    let most = p.bursts.iter().map(|b| b.round as usize).max().unwrap_or(0);
    at_most("rounds of one burst", "MAX_BURST_ROUNDS", most, MAX_BURST_ROUNDS)
}

fn burst_figures(p: &BurstPhase) -> Result<(), Refusal> {
    for b in &p.bursts {
        let at = format!("burst {} × {} round {}", b.label, b.concurrency, b.round);
        if b.concurrency < 1 {
            return Err(Refusal::NoConcurrency { at });
        }
        if b.completed.checked_add(b.failed).is_none_or(|n| n > b.requests) {
            let why = format!("{} completed and {} failed of {} requests", b.completed, b.failed, b.requests);
            return Err(Refusal::Incoherent { at, why });
        }
        // a burst that was not sent has nothing to show
        sections::check(&at, b)?;
        figure(&at, "context", b.context.map(|c| c as f64), MAX_CONTEXT_TOKENS)?;
        // telemetry as a decode cell's (methodology §14): only a valid burst carries it
        super::super::gpu::check(&at, b.status, b.telemetry.gpu.as_ref(), b.output_tokens)?;
        super::super::server_metrics::check(&at, b.status, b.telemetry.server_metrics.as_ref())?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use sm_core::phases::burst::Burst;
    use sm_core::record::{CellStatus, Percentiles};

    use super::*;

    fn record(bursts: Vec<Burst>, rounds: u32) -> RunRecord {
        let mut r: RunRecord = serde_json::from_str(include_str!("../../../../../tests/data/run-sample.json")).unwrap();
        r.phases.burst = Some(BurstPhase { max_tokens: 64, ignore_eos: true, rounds, imported_from: None, bursts });
        r
    }

    fn valid() -> Burst {
        Burst {
            context: Some(1024),
            label: "1K".into(),
            concurrency: 4,
            status: CellStatus::Valid,
            requests: 4,
            completed: 4,
            e2e_ms: Percentiles::median(120.0),
            last_completion_ms: Some(150.0),
            total_tok_s: Some(800.0),
            ..Burst::default()
        }
    }

    #[test]
    fn a_measured_burst_phase_passes_and_bad_figures_or_sizes_do_not() {
        assert_eq!(super::super::super::check(&record(vec![valid()], 1)), Ok(()));
        let bad = [
            (Burst { e2e_ms: Percentiles::median(f64::NAN), ..valid() }, "e2e_ms_p50"),
            (Burst { total_tok_s: Some(-1.0), ..valid() }, "total_tok_s"),
            (Burst { completed: 5, ..valid() }, "5 completed"),
            (Burst { concurrency: 0, ..valid() }, "at least 1"),
            (Burst { status: CellStatus::OverCapacity, ..valid() }, "over_capacity"),
        ];
        for (b, says) in bad {
            let e = figures(&record(vec![b], 1)).unwrap_err().to_string();
            assert!(e.contains(says), "{says}: {e}");
        }
        let e = limits(&record(vec![valid()], 11)).unwrap_err();
        assert!(matches!(e, Refusal::TooMany { name: "MAX_BURST_ROUNDS", .. }), "{e}");
        let many = (0..=MAX_BURSTS).map(|_| valid()).collect();
        let e = limits(&record(many, 1)).unwrap_err();
        assert!(matches!(e, Refusal::TooMany { name: "MAX_BURSTS", .. }), "{e}");
        let levels = (1..=MAX_CONCURRENCY_LEVELS as u32 + 1).map(|c| Burst { concurrency: c, ..valid() }).collect();
        let e = limits(&record(levels, 1)).unwrap_err();
        assert!(matches!(e, Refusal::TooMany { name: "MAX_CONCURRENCY_LEVELS", .. }), "{e}");
    }
}
