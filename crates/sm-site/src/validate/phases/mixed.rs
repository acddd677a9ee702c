//! The mixed-prefill section (methodology §13.3) as the site accepts it: levels, probes and
//! timeline bins bounded by the consts the runner keeps to, every figure finite and in range.

use sm_core::phases::mixed::{MAX_LEVELS, MAX_PROBES, MAX_TIMELINE_BINS, MixedLevel, MixedProbe};
use sm_core::record::{CellStatus, RunRecord};

use super::super::{MAX_MS, MAX_S, Refusal, sections};

/// The largest bin count of a timeline (tokens in 100 ms or more).
const MAX_BIN_TOKENS: u64 = 1 << 40;

fn levels(record: &RunRecord) -> &[MixedLevel] {
    record.phases.mixed_prefill.as_ref().map_or(&[], |m| m.levels.as_slice())
}

pub(super) fn limits(record: &RunRecord) -> Result<(), Refusal> {
    let levels = levels(record);
    let too_many = |what, name, found, limit| Err(Refusal::TooMany { what, name, found, limit });
    if levels.len() > MAX_LEVELS {
        return too_many("mixed-prefill levels", "MAX_LEVELS", levels.len(), MAX_LEVELS);
    }
    for l in levels {
        if l.probes.len() > MAX_PROBES as usize || l.probes_planned > MAX_PROBES {
            let found = l.probes.len().max(l.probes_planned as usize);
            return too_many("mixed-prefill probes in a level", "MAX_PROBES", found, MAX_PROBES as usize);
        }
        for p in &l.probes {
            let bins = p.timeline.as_ref().map_or(0, |t| t.tokens.len());
            if bins > MAX_TIMELINE_BINS {
                return too_many("bins in a mixed-prefill timeline", "MAX_TIMELINE_BINS", bins, MAX_TIMELINE_BINS);
            }
        }
    }
    Ok(())
}

pub(super) fn figures(record: &RunRecord) -> Result<(), Refusal> {
    for l in levels(record) {
        let at = format!("mixed prefill {}@{}", l.prompt_context, l.background);
        if l.background == 0 || l.prompt_context == 0 {
            return Err(Refusal::Incoherent {
                at,
                why: "a level needs a prompt and at least one background stream".into(),
            });
        }
        sections::check(&at, l)?;
        // telemetry as a decode cell's (methodology §14), without J/token: only a level without an error
        let status = if l.error.is_none() { CellStatus::Valid } else { CellStatus::Error };
        super::super::gpu::check(&at, status, l.telemetry.gpu.as_ref(), None)?;
        super::super::server_metrics::check(&at, status, l.telemetry.server_metrics.as_ref())?;
        for (i, p) in l.probes.iter().enumerate() {
            probe(&format!("{at} probe {}", i + 1), p)?;
        }
    }
    Ok(())
}

fn probe(at: &str, p: &MixedProbe) -> Result<(), Refusal> {
    sections::check(at, p)?;
    if p.error.is_some() && p.ttft_ms.is_some() {
        return Err(Refusal::Incoherent { at: at.into(), why: "a failed probe carries a TTFT".into() });
    }
    let Some(t) = &p.timeline else { return Ok(()) };
    let incoherent = |why: &str| Err(Refusal::Incoherent { at: at.into(), why: format!("timeline: {why}") });
    if !(t.bin_ms.is_finite() && t.bin_ms > 0.0 && t.bin_ms <= MAX_MS) {
        return incoherent("bin_ms must be a positive number of milliseconds");
    }
    if !(t.start_s.is_finite()
        && t.start_s.abs() <= MAX_S
        && t.first_token_s.is_finite()
        && t.first_token_s.abs() <= MAX_S)
    {
        return incoherent("start_s and first_token_s must be finite seconds");
    }
    if t.tokens.iter().any(|&n| n > MAX_BIN_TOKENS) {
        return incoherent("a bin holds more tokens than any server makes");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use sm_core::phases::mixed::{MixedPrefillPhase, Timeline};

    use super::super::super::check;
    use super::*;

    fn sample() -> RunRecord {
        let mut r: RunRecord = serde_json::from_str(include_str!("../../../../../tests/data/run-sample.json")).unwrap();
        let probe = MixedProbe {
            sent_s: 3.0,
            ttft_ms: Some(250.0),
            prompt_tokens: Some(8192),
            cached_tokens: Some(0),
            slowdown: Some(2.5),
            before_tok_s: Some(1600.0),
            during_tok_s: Some(200.0),
            after_tok_s: Some(1590.0),
            longest_stall_ms: Some(43.0),
            steady: true,
            timeline: Some(Timeline { start_s: -1.0, bin_ms: 100.0, tokens: vec![5; 30], first_token_s: 0.25 }),
            error: None,
        };
        let level = MixedLevel {
            prompt_context: 8192,
            background: 4,
            background_context: 1024,
            background_max_tokens: 512,
            window_s: 1.0,
            probes_planned: 3,
            idle: None,
            probes: vec![probe; 3],
            ttft_ms_median: Some(250.0),
            slowdown: None,
            error: None,
            telemetry: Default::default(),
        };
        r.phases.mixed_prefill = Some(MixedPrefillPhase { levels: vec![level] });
        r
    }

    fn probe_mut(r: &mut RunRecord) -> &mut MixedProbe {
        &mut r.phases.mixed_prefill.as_mut().unwrap().levels[0].probes[1]
    }

    #[test]
    fn a_bounded_finite_section_is_taken_and_anything_else_is_refused() {
        assert_eq!(check(&sample()), Ok(()));
        let mut r = sample();
        probe_mut(&mut r).timeline.as_mut().unwrap().tokens = vec![1; MAX_TIMELINE_BINS + 1];
        assert!(matches!(check(&r), Err(Refusal::TooMany { name: "MAX_TIMELINE_BINS", .. })), "{:?}", check(&r));
        let mut r = sample();
        r.phases.mixed_prefill.as_mut().unwrap().levels[0].probes = vec![probe_mut(&mut sample()).clone(); 21];
        assert!(matches!(check(&r), Err(Refusal::TooMany { name: "MAX_PROBES", .. })));
        let mut r = sample();
        probe_mut(&mut r).during_tok_s = Some(f64::NAN);
        assert!(matches!(check(&r), Err(Refusal::BadFigure { field: "during_tok_s", .. })));
        let mut r = sample();
        probe_mut(&mut r).longest_stall_ms = Some(-1.0);
        assert!(matches!(check(&r), Err(Refusal::BadFigure { field: "longest_stall_ms", .. })));
        let mut r = sample();
        probe_mut(&mut r).timeline.as_mut().unwrap().bin_ms = f64::INFINITY;
        assert!(matches!(check(&r), Err(Refusal::Incoherent { .. })));
        let mut r = sample();
        probe_mut(&mut r).error = Some("failed".into());
        assert!(matches!(check(&r), Err(Refusal::Incoherent { .. })));
    }
}
