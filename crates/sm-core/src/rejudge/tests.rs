use super::*;
use crate::answer::{capacities, judge_from_summaries};
use crate::slo::RequestFigures;
use crate::stats::{Quantiles, percentile};

const SAMPLE: &str = include_str!("../../../../tests/data/run-sample.json");

/// A cell's requests: TTFT and TBT growing with the users, spread so percentiles interpolate.
fn requests(users: u32, seed: u32) -> Vec<RequestFigures> {
    (0..23u32)
        .map(|i| {
            let spread = f64::from((i * 7 + seed) % 23);
            RequestFigures {
                tokens: 100.0,
                ttft_ms: Some(100.0 + f64::from(users) * 9.0 + spread * 31.0),
                ttfa_ms: None,
                ttftc_ms: None,
                tbt_ms: Some(10.0 + f64::from(users) * 0.4 + spread * 1.3),
                silent_ms: None,
            }
        })
        .collect()
}

/// The sample's cells as a run measures them: figures from their requests, judged under `slo`
/// from the requests (as sm-bench's cell record does), and the answer from those judgements.
fn measured(slo: &Slo) -> RunRecord {
    measured_with(slo, |_| {})
}

/// As [`measured`], with each cell's requests changed by `change` first; a cell whose requests
/// have a time to first tool call stores TTFTC (over those that called) and its no-call count, as
/// sm-bench's cell record does.
fn measured_with(slo: &Slo, change: impl Fn(&mut Vec<RequestFigures>)) -> RunRecord {
    let mut record: RunRecord = serde_json::from_str(SAMPLE).unwrap();
    for (i, cell) in record.decode.iter_mut().enumerate().filter(|(_, c)| c.status() == CellStatus::Valid) {
        let mut reqs = requests(cell.concurrency, i as u32);
        change(&mut reqs);
        if reqs.iter().any(|r| r.ttftc_ms.is_some()) {
            let called: Vec<f64> = reqs.iter().filter_map(|r| r.ttftc_ms).filter(|v| v.is_finite()).collect();
            cell.ttftc_ms = Quantiles::of(&called).unwrap().into();
            cell.no_tool_call = Some((reqs.len() - called.len()) as u64);
        }
        if reqs.iter().any(|r| r.ttfa_ms.is_some()) {
            let answered: Vec<f64> = reqs.iter().filter_map(|r| r.ttfa_ms).filter(|v| v.is_finite()).collect();
            cell.ttfa_ms = Quantiles::of(&answered).unwrap().into();
            cell.no_answer = Some((reqs.len() - answered.len()) as u64);
        }
        let ttft: Vec<f64> = reqs.iter().filter_map(|r| r.ttft_ms).collect();
        let tbt: Vec<f64> = reqs.iter().filter_map(|r| r.tbt_ms).collect();
        let speeds: Vec<f64> = tbt.iter().map(|t| 1000.0 / t).collect();
        let (t, b) = (Quantiles::of(&ttft).unwrap(), Quantiles::of(&tbt).unwrap());
        (cell.ttft_ms, cell.tbt_ms) = (t.into(), b.into());
        cell.per_request_tok_s = percentile(&speeds, 50.0);
        let j = slo.judge(&reqs, 10.0);
        cell.slo_met = Some(j.met);
        cell.slo_bounds = j.bounds;
    }
    record.settings.slo = Some(slo.clone());
    record.capacity = capacities(&record);
    record
}

#[test]
fn a_run_re_judged_under_another_slo_answers_as_if_it_had_been_measured_under_it() {
    let a: Slo = "tok_s_p10>=20,ttft_p90<=2s".parse().unwrap();
    // tok_s_p10 is the one figure of B no summary holds: the run's own bound under A gives it
    for b in ["tok_s_p10>=15,ttft_p99<=2.5s", "tok_s_p10>=30", "tbt_p50<=40ms,ttft_p50<=900ms,tok_s_p50>=30"] {
        let b: Slo = b.parse().unwrap();
        let under_b = measured(&b);
        let again = rejudge(&measured(&a), &b, Measured::Requests).unwrap();
        assert_eq!(again, under_b.capacity, "{b}");
    }
    // the two SLOs do give different answers here, so the test tells them apart
    let strict: Slo = "tok_s_p10>=15,ttft_p99<=2.5s".parse().unwrap();
    assert_ne!(measured(&a).capacity, measured(&strict).capacity);
}

#[test]
fn a_bound_no_stored_figure_gives_exactly_is_refused_not_approximated() {
    let a: Slo = "tok_s_p10>=20,ttft_p90<=2s".parse().unwrap();
    // tok/s p20 would be 1000 / TBT p80 only between two requests' speeds: not stored, refused
    let err = rejudge(&measured(&a), &"tok_s_p20>=30".parse().unwrap(), Measured::Requests).unwrap_err();
    assert_eq!(err.to_string(), "cannot answer tok_s_p20 (the run stored p10, p50 only)");
    let err = rejudge(&measured(&a), &"ttft_p95<=2s".parse().unwrap(), Measured::Requests).unwrap_err();
    assert_eq!(err.to_string(), "cannot answer ttft_p95 (the run stored p50, p90, p99 only)");
}

#[test]
fn an_import_with_p50_only_says_what_it_cannot_answer() {
    let mut record: RunRecord = serde_json::from_str(SAMPLE).unwrap();
    for cell in &mut record.decode {
        (cell.ttft_ms.p90, cell.ttft_ms.p99, cell.tbt_ms.p90, cell.tbt_ms.p99) = (None, None, None, None);
    }
    let p50: Slo = "tok_s_p50>=20,ttft_p50<=2s".parse().unwrap();
    judge_from_summaries(&mut record, &p50).unwrap();
    let err = rejudge(&record, &"ttft_p90<=2s".parse().unwrap(), Measured::Summaries).unwrap_err();
    assert_eq!(err.to_string(), "cannot answer ttft_p90 (the run stored p50 only)");
    // under another p50 SLO it answers, as judging its summaries under that SLO would
    let other: Slo = "tok_s_p50>=50,ttft_p50<=300ms".parse().unwrap();
    let mut expected: RunRecord = serde_json::from_str(SAMPLE).unwrap();
    judge_from_summaries(&mut expected, &other).unwrap();
    assert_eq!(rejudge(&record, &other, Measured::Summaries).unwrap(), expected.capacity);
}

#[test]
fn a_run_judged_from_summaries_does_not_lend_its_derived_speeds() {
    // judged after the fact, its tok_s_p10 was read off the TBT p90: not a stored figure
    let mut record: RunRecord = serde_json::from_str(SAMPLE).unwrap();
    judge_from_summaries(&mut record, &Slo::default()).unwrap();
    assert!(record.decode.iter().any(|c| c.slo_bounds.iter().any(|b| b.bound == BoundName::from("tok_s_p10"))));
    let err = rejudge(&record, &"tok_s_p10>=30".parse().unwrap(), Measured::Summaries).unwrap_err();
    assert_eq!(err.to_string(), "cannot answer tok_s_p10 (the run stored p50 only)");
    assert!(rejudge(&record, &"tok_s_p10>=30".parse().unwrap(), Measured::Requests).is_ok());
}

/// A run sent with tools re-judged under a bound on the first tool call: from its stored TTFTC
/// where every request called; where some never did, the stored percentiles leave those out (the
/// bound counts them as waiting forever), so only the run's own judged bound answers.
#[test]
fn a_bound_on_the_first_tool_call_is_re_judged_only_from_figures_that_count_every_request() {
    let call = |reqs: &mut Vec<RequestFigures>| {
        for r in reqs.iter_mut() {
            r.ttftc_ms = r.ttft_ms.map(|t| t + 150.0);
        }
    };
    let a: Slo = "tok_s_p10>=20,ttft_p90<=2s".parse().unwrap();
    for b in ["ttftc_p90<=1.5s", "tok_s_p10>=15,ttftc_p50<=1s,ttftc_p99<=3s"] {
        let b: Slo = b.parse().unwrap();
        let again = rejudge(&measured_with(&a, call), &b, Measured::Requests).unwrap();
        assert_eq!(again, measured_with(&b, call).capacity, "{b}");
    }
    let tight: Slo = "ttftc_p90<=1s".parse().unwrap();
    assert_ne!(measured_with(&tight, call).capacity, measured_with(&a, call).capacity, "the bound tells them apart");
    // a run sent without tools stored no TTFTC
    let err = rejudge(&measured(&a), &tight, Measured::Requests).unwrap_err();
    assert_eq!(err.to_string(), "cannot answer ttftc_p90 (the run stored no such figure)");

    // one request in each cell never called: the summary is not the bound's figure
    let some_never = |reqs: &mut Vec<RequestFigures>| {
        call(reqs);
        reqs[0].ttftc_ms = Some(f64::INFINITY);
    };
    let err = rejudge(&measured_with(&a, some_never), &tight, Measured::Requests).unwrap_err();
    assert_eq!(err.to_string(), "cannot answer ttftc_p90 (the run stored no such figure)");
    // the run's own bound, judged over every request, answers its percentile
    let loose: Slo = "ttftc_p50<=5s".parse().unwrap();
    let again = rejudge(&measured_with(&loose, some_never), &"ttftc_p50<=1s".parse().unwrap(), Measured::Requests);
    assert_eq!(again.unwrap(), measured_with(&"ttftc_p50<=1s".parse().unwrap(), some_never).capacity);
}

/// The same for the first answer token: a cell's stored TTFA is over the requests that answered,
/// so where one thought until max_tokens, only the run's own judged bound answers.
#[test]
fn a_bound_on_the_first_answer_is_re_judged_only_from_figures_that_count_every_request() {
    let think = |reqs: &mut Vec<RequestFigures>| {
        for r in reqs.iter_mut() {
            r.ttfa_ms = r.ttft_ms.map(|t| t + 300.0);
        }
    };
    let a: Slo = "tok_s_p10>=20,ttft_p90<=2s".parse().unwrap();
    let b: Slo = "ttfa_p90<=1.5s".parse().unwrap();
    assert_eq!(rejudge(&measured_with(&a, think), &b, Measured::Requests).unwrap(), measured_with(&b, think).capacity);
    let never = |reqs: &mut Vec<RequestFigures>| {
        think(reqs);
        reqs[0].ttfa_ms = Some(f64::INFINITY);
    };
    let err = rejudge(&measured_with(&a, never), &b, Measured::Requests).unwrap_err();
    assert_eq!(err.to_string(), "cannot answer ttfa_p90 (the run stored no such figure)");
}
