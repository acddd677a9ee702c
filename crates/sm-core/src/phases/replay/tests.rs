use super::*;
use crate::phases::rate::{LevelCounts, RequestRate};
use crate::slo::BoundKey;

fn settings() -> ReplaySettings {
    ReplaySettings {
        file: TraceFileInfo { name: "trace.jsonl".into(), hash: "00ff".into(), bytes: 120 },
        format: ReplayFormat::Mooncake,
        block_tokens: Some(512),
        time_scales: vec![1.0],
        find_capacity: true,
        start_s: None,
        duration_s: Some(60.0),
        requests: 240,
        recorded_span_s: 60.0,
        recorded_rps: Some(4.0),
        max_concurrency: None,
        drain_max_s: 600.0,
        max_tokens: 256,
        kv_block_tokens: Some(16),
    }
}

fn measured(completed: u64, failed: u64, saturation: Saturation) -> RateLevel {
    let mut l = RateLevel::unmeasured(
        0,
        "trace.jsonl".into(),
        RequestRate::PerSecond(4.0),
        LevelStatus::Measured,
        String::new(),
    );
    l.reason = None;
    l.counts = LevelCounts {
        scheduled: completed + failed,
        sent: completed + failed,
        completed,
        failed,
        ..Default::default()
    };
    l.saturation = Some(saturation);
    l.saturated = saturation == Saturation::Saturated;
    l
}

fn check(key: &str, holds: bool) -> BoundCheck {
    let bound = BoundName::Key(key.parse::<BoundKey>().unwrap());
    BoundCheck { bound, limit: 1.0, value: Some(1.0), holds }
}

fn level(scale: f64, met: bool) -> ReplayLevel {
    let l = measured(100, 0, Saturation::KeptUp);
    let bounds = vec![check("tok_s_p10", true), check("ttft_p90", met)];
    let verdict = Some(ScaleVerdict::of(&l, bounds));
    ReplayLevel { time_scale: scale, searched: scale != 1.0, level: l, prefix: None, verdict }
}

#[test]
fn a_level_meets_the_slo_only_on_evidence() {
    let ok = ScaleVerdict::of(&measured(100, 0, Saturation::KeptUp), vec![check("ttft_p90", true)]);
    assert!(ok.met && ok.limited_by.is_none());
    let slow = ScaleVerdict::of(&measured(100, 0, Saturation::KeptUp), vec![check("ttft_p90", false)]);
    assert_eq!(slow.limited_by.as_deref(), Some("TTFT p90"));
    let speed = ScaleVerdict::of(&measured(100, 0, Saturation::KeptUp), vec![check("tok_s_p10", false)]);
    assert_eq!(speed.limited_by.as_deref(), Some("tok/s per request p10"));
    let queue = ScaleVerdict::of(&measured(100, 0, Saturation::Saturated), vec![check("ttft_p90", true)]);
    assert!(!queue.met && queue.limited_by.unwrap().starts_with("saturated"));
    let unknown = ScaleVerdict::of(&measured(100, 0, Saturation::Unknown), vec![]);
    assert!(!unknown.met, "an unknown verdict is not evidence that the server kept up");
    // 1 % of the requests failing is too many; fewer is not
    let faults = ScaleVerdict::of(&measured(99, 1, Saturation::KeptUp), vec![]);
    assert_eq!(faults.limited_by.as_deref(), Some("failures (1 of 100 requests)"));
    assert!(ScaleVerdict::of(&measured(999, 1, Saturation::KeptUp), vec![]).met);
    let none = ScaleVerdict::of(&measured(0, 0, Saturation::Unknown), vec![]);
    assert_eq!(none.limited_by.as_deref(), Some("no request completed"));
}

#[test]
fn the_capacity_answer_is_the_bracket_of_the_levels() {
    let mut phase =
        ReplayPhase { settings: settings(), levels: vec![level(1.0, true), level(2.0, true)], capacity: None };
    let a = phase.capacity_answer();
    assert_eq!((a.max_scale, a.max_rps, a.failed_scale, a.converged), (Some(2.0), Some(8.0), None, false));
    phase.levels.push(level(4.0, false));
    phase.levels.push(level(2.83, true));
    phase.levels.push(level(3.36, false));
    phase.levels.push(level(3.08, true));
    phase.levels.push(level(3.22, false));
    let a = phase.capacity_answer();
    assert_eq!((a.max_scale, a.failed_scale), (Some(3.08), Some(3.22)));
    assert_eq!(a.limited_by.as_deref(), Some("TTFT p90"));
    assert!(a.converged, "3.22 / 3.08 is within 5 %");
    // a level not measured says nothing
    let mut skipped = level(16.0, false);
    skipped.verdict = None;
    phase.levels.push(skipped);
    assert_eq!(phase.capacity_answer(), a);
}

#[test]
fn the_section_reads_back_as_written() {
    let mut l = level(1.0, true);
    l.prefix = Some(PrefixReuse {
        prompt_tokens: 4096,
        cached_tokens: 1024,
        reported: 4,
        requests: 4,
        ideal_tokens: Some(1536),
        reached_pct: Some(66.7),
    });
    let phase = ReplayPhase { settings: settings(), levels: vec![l], capacity: None };
    let json = serde_json::to_value(&phase).unwrap();
    // the rate level's figures sit beside the scale, as a rate level's do in its phase
    assert_eq!(json["levels"][0]["time_scale"], 1.0);
    assert_eq!(json["levels"][0]["counts"]["completed"], 100);
    assert_eq!(json["settings"]["format"], "mooncake");
    let back: ReplayPhase = serde_json::from_value(json).unwrap();
    assert_eq!(back, phase);
}
