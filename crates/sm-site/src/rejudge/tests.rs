use super::*;

const SAMPLE: &str = include_str!("../../../../tests/data/run-sample.json");

fn shown(record: &RunRecord) -> Vec<CapacityRow> {
    rows(record)
}

#[test]
fn the_site_re_judges_with_sm_cores_answer_at_the_contexts_shown() {
    let mut record: RunRecord = serde_json::from_str(SAMPLE).unwrap();
    crate::answer::ensure(&mut record).unwrap();
    let viewer: Slo = "ttft_p99<=3s,tbt_p50<=60ms".parse().unwrap();
    let mut expected: RunRecord = serde_json::from_str(SAMPLE).unwrap();
    sm_core::answer::judge_from_summaries(&mut expected, &viewer).unwrap();
    let all = of(&record, &viewer, Measured::Summaries, &shown(&record));
    assert_eq!(all, Rejudged::Answer(rows(&expected)));
    // filtered by one context, the page shows that context's answer only
    let at_8k: Vec<CapacityRow> = shown(&record).into_iter().filter(|r| r.context == 8192).collect();
    let Rejudged::Answer(one) = of(&record, &viewer, Measured::Summaries, &at_8k) else { panic!() };
    assert_eq!(one.iter().map(|r| r.context).collect::<Vec<_>>(), [8192]);
}

#[test]
fn a_bound_without_its_figure_says_so() {
    let mut record: RunRecord = serde_json::from_str(SAMPLE).unwrap();
    crate::answer::ensure(&mut record).unwrap();
    let got = of(&record, &"tok_s_p10>=25".parse().unwrap(), Measured::Summaries, &shown(&record));
    assert_eq!(got, Rejudged::Cannot("cannot answer tok_s_p10 (the run stored p50 only)".into()));
    assert_eq!(measured("requests"), Some(Measured::Requests));
    assert_eq!(measured("none"), None);
}
