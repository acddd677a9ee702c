use sm_core::phases::replay::ReplayPhase;

use super::*;

/// A run with a replay of five levels (two searched, one skipped) and its capacity answer.
fn good() -> RunRecord {
    let mut r: RunRecord = serde_json::from_str(include_str!("../../../../../../tests/data/run-replay.json")).unwrap();
    r.settings.slo = Some(sm_core::slo::DEFAULT_SLO.parse().unwrap());
    r
}

fn with(edit: impl FnOnce(&mut ReplayPhase)) -> Result<(), Refusal> {
    let mut r = good();
    edit(r.phases.replay.as_mut().unwrap());
    super::super::super::check(&r)
}

fn bad_figure(result: Result<(), Refusal>) -> &'static str {
    match result {
        Err(Refusal::BadFigure { field, .. }) => field,
        other => panic!("not a bad figure: {other:?}"),
    }
}

#[test]
fn a_replay_the_tool_writes_is_accepted() {
    assert_eq!(super::super::super::check(&good()), Ok(()));
}

#[test]
fn a_scale_is_above_0_and_finite() {
    let e = with(|p| p.levels[0].time_scale = 0.0).unwrap_err();
    assert!(matches!(&e, Refusal::Incoherent { why, .. } if why.contains("above 0")), "{e}");
    assert_eq!(bad_figure(with(|p| p.levels[0].time_scale = -2.0)), "time_scale");
    assert_eq!(bad_figure(with(|p| p.settings.time_scales[1] = f64::NAN)), "time_scale");
    assert_eq!(bad_figure(with(|p| p.levels[1].time_scale = f64::INFINITY)), "time_scale");
    assert_eq!(bad_figure(with(|p| p.capacity.as_mut().unwrap().max_rps = Some(f64::NAN))), "max_rps");
}

#[test]
fn the_figures_are_measurements() {
    assert_eq!(bad_figure(with(|p| p.levels[0].prefix.as_mut().unwrap().reached_pct = Some(-1.0))), "reached_pct");
    assert_eq!(bad_figure(with(|p| p.levels[0].prefix.as_mut().unwrap().reached_pct = Some(1e9))), "reached_pct");
    assert_eq!(bad_figure(with(|p| p.levels[0].level.achieved_rps = Some(f64::NAN))), "achieved_rps");
    assert_eq!(bad_figure(with(|p| p.settings.recorded_rps = Some(-4.0))), "recorded_rps");
    assert_eq!(bad_figure(with(|p| p.settings.start_s = Some(f64::NAN))), "start_s");
    let e = with(|p| p.levels[0].prefix.as_mut().unwrap().cached_tokens = 50_000).unwrap_err();
    assert!(matches!(e, Refusal::Incoherent { .. }), "{e}");
    let e = with(|p| p.levels[0].level.counts.completed = 7).unwrap_err();
    assert!(matches!(e, Refusal::Incoherent { .. }), "counts add up: {e}");
}

#[test]
fn sizes_and_texts_are_bounded() {
    let e = with(|p| p.levels = vec![p.levels[0].clone(); MAX_REPLAY_LEVELS + 1]).unwrap_err();
    assert!(matches!(e, Refusal::TooMany { name: "MAX_REPLAY_LEVELS", .. }), "{e}");
    let e = with(|p| p.settings.time_scales = vec![1.0; MAX_TIME_SCALES + 1]).unwrap_err();
    assert!(matches!(e, Refusal::TooMany { name: "MAX_TIME_SCALES", .. }), "{e}");
    let e = with(|p| p.settings.file.name = "a".repeat(MAX_FILE_NAME_BYTES + 1)).unwrap_err();
    assert!(matches!(e, Refusal::Incoherent { .. }), "{e}");
    let e = with(|p| p.settings.file.hash = "<script>".into()).unwrap_err();
    assert!(matches!(e, Refusal::Incoherent { .. }), "{e}");
    let long = "x".repeat(MAX_LIMITED_BY_BYTES + 1);
    let e = with(|p| p.levels[1].verdict.as_mut().unwrap().limited_by = Some(long.clone())).unwrap_err();
    assert!(matches!(&e, Refusal::Incoherent { why, .. } if why.contains("MAX_LIMITED_BY_BYTES")), "{e}");
    let e = with(|p| p.capacity.as_mut().unwrap().limited_by = Some(long)).unwrap_err();
    assert!(matches!(&e, Refusal::Incoherent { why, .. } if why.contains("MAX_LIMITED_BY_BYTES")), "{e}");
    let e = with(|p| p.levels[2].level.reason = Some("r".repeat(crate::validate::MAX_TEXT_BYTES + 1))).unwrap_err();
    assert!(matches!(e, Refusal::TextTooLong { .. }), "{e}");
}

#[test]
fn a_verdict_and_the_answer_are_coherent() {
    let e = with(|p| p.levels[2].prefix = p.levels[0].prefix).unwrap_err();
    assert!(matches!(e, Refusal::FigureOfInvalid { field: "prefix", .. }), "a skipped level has no prefix: {e}");
    let e = with(|p| p.levels[0].verdict.as_mut().unwrap().limited_by = Some("saturated".into())).unwrap_err();
    assert!(matches!(e, Refusal::Incoherent { .. }), "{e}");
    let e = with(|p| p.capacity.as_mut().unwrap().max_scale = Some(4.0)).unwrap_err();
    assert!(matches!(&e, Refusal::Incoherent { why, .. } if why.contains("max_scale")), "{e}");
    let e = with(|p| p.capacity.as_mut().unwrap().failed_scale = Some(1.0)).unwrap_err();
    assert!(matches!(&e, Refusal::Incoherent { why, .. } if why.contains("failed_scale")), "{e}");
    assert_eq!(with(|p| p.capacity = None), Ok(()));
}
