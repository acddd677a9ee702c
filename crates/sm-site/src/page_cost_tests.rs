//! What a page of the largest run the site accepts costs: its bytes grow with the record, not with
//! the record's contexts times its concurrency levels (docs/site.md, "What a run may hold").

use sm_core::record::{DecodeCell, PlanKind, PlanStatus, PlannedCell, RunRecord};

use crate::validate::{self, MAX_CONTEXTS, MAX_REPLAY_LEVELS, MAX_SEARCHED_PER_CONTEXT};

/// The most a run page, its Markdown or its CSV may weigh per byte of the record (compact JSON).
const BYTES_PER_RECORD_BYTE: usize = 4;

/// 32 decode contexts × 32 levels, each context with its own 64 levels found by the capacity
/// search, and planned decode cells at as many other contexts as the limit leaves: the widest and
/// tallest matrix within the limits, for the fewest bytes of record.
fn largest() -> RunRecord {
    let mut r: RunRecord = serde_json::from_str(include_str!("../../../tests/data/run-sample.json")).unwrap();
    let cell = DecodeCell { warnings: Vec::new(), reason: None, ..r.decode[0].clone() };
    let ctx = |i: u64| 1024 * (i + 1);
    let matrix = (0..32u64).flat_map(|i| (1..=32u32).map(move |c| (i, c, false)));
    let searched =
        (0..32u64).flat_map(|i| (0..MAX_SEARCHED_PER_CONTEXT as u32).map(move |k| (i, 33 + i as u32 * 100 + k, true)));
    r.decode = matrix
        .chain(searched)
        .map(|(i, concurrency, searched)| DecodeCell { context: ctx(i), concurrency, searched, ..cell.clone() })
        .collect();
    r.prefill.clear();
    r.events.clear();
    r.prompts.clear();
    r.capacity.clear();
    r.plan = (32..MAX_CONTEXTS as u64)
        .map(|i| PlannedCell {
            kind: PlanKind::Decode,
            requested_context: ctx(i),
            context: ctx(i),
            label: format!("{}K", i + 1),
            concurrency: 1,
            status: PlanStatus::Planned,
            reason: None,
        })
        .collect();
    r.settings.contexts = (0..MAX_CONTEXTS as u64).map(ctx).collect();
    r.settings.prefill_contexts.clear();
    r.settings.concurrency = (1..=32).collect();
    r
}

#[test]
fn pages_of_the_largest_run_grow_with_the_record() {
    let r = largest();
    assert_eq!(validate::check(&r), Ok(()), "the site accepts it");
    let record = serde_json::to_string(&r).unwrap().len();
    let page = sm_report::html_page(&r, &[]);
    let markdown = sm_report::markdown(&r);
    let csv = sm_report::csv(&r);
    for (what, bytes) in [("page", page.len()), ("Markdown", markdown.len()), ("CSV", csv.len())] {
        assert!(
            bytes <= BYTES_PER_RECORD_BYTE * record,
            "the {what} is {bytes} bytes for a record of {record}: more than {BYTES_PER_RECORD_BYTE} per byte"
        );
    }
}

/// A replay of as many levels as the site takes, each with the longest verdict it takes: its
/// section, its answer and replay.csv grow with the record too.
#[test]
fn pages_of_the_largest_replay_grow_with_the_record() {
    let mut r: RunRecord = serde_json::from_str(include_str!("../../../tests/data/run-replay.json")).unwrap();
    let phase = r.phases.replay.as_mut().unwrap();
    let mut failed = phase.levels[1].clone();
    failed.verdict.as_mut().unwrap().limited_by = Some("<".repeat(validate::MAX_LIMITED_BY_BYTES));
    phase.levels = (0..MAX_REPLAY_LEVELS)
        .map(|i| sm_core::phases::replay::ReplayLevel { time_scale: 1.0 + i as f64 / 64.0, ..failed.clone() })
        .collect();
    phase.capacity = Some(phase.capacity_answer());
    assert_eq!(validate::check(&r), Ok(()), "the site accepts it");
    let record = serde_json::to_string(&r).unwrap().len();
    let page = sm_report::html_page(&r, &[]);
    let markdown = sm_report::markdown(&r);
    let files = sm_report::phases::csv_files(&r);
    let csv = files.iter().find(|(name, _)| name == "replay.csv").map(|(_, text)| text.len()).unwrap();
    for (what, bytes) in [("page", page.len()), ("Markdown", markdown.len()), ("replay.csv", csv)] {
        assert!(
            bytes <= BYTES_PER_RECORD_BYTE * record,
            "the {what} is {bytes} bytes for a record of {record}: more than {BYTES_PER_RECORD_BYTE} per byte"
        );
    }
}
