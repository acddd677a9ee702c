use super::*;

fn req(tokens: f64, ttft: f64, tbt: f64) -> RequestFigures {
    RequestFigures {
        tokens,
        ttft_ms: Some(ttft),
        ttfa_ms: Some(ttft),
        ttftc_ms: None,
        tbt_ms: Some(tbt),
        silent_ms: None,
    }
}

#[test]
fn expressions_parse_and_print_canonically() {
    let slo: Slo = "tok_s>=30, ttft_p90<=2s,tbt_p99<=100ms".parse().unwrap();
    assert_eq!(slo.to_string(), "tok_s_p50>=30,ttft_p90<=2s,tbt_p99<=100ms");
    assert_eq!(slo.bounds[0], Bound { figure: Figure::TokS, percentile: 50, limit: 30.0 });
    assert_eq!(slo.bounds[1].limit, 2000.0);
    assert_eq!(slo.to_string().parse::<Slo>().unwrap(), slo, "the printed form reads back");
    let s: Slo = "tok_s_p10>=12.5,ttft_p99<=1500ms,ttft<=0.25s".parse().unwrap();
    assert_eq!(s.to_string(), "tok_s_p10>=12.5,ttft_p99<=1500ms,ttft_p50<=250ms");
    assert_eq!(Slo::default().to_string(), DEFAULT_SLO);
    let json = serde_json::to_string(&s).unwrap();
    assert_eq!(serde_json::from_str::<Slo>(&json).unwrap(), s);
}

#[test]
fn bad_expressions_say_what_to_write() {
    let cases = [
        ("", "empty"),
        ("tok_s=30", "FIGURE[_pNN]"),
        ("e2e_p90<=2s", "tok_s, ttft, ttfa, ttftc or tbt"),
        ("itl_p50<=20ms", "tok_s, ttft, ttfa, ttftc or tbt"),
        ("tok_s_p100>=3", "1 to 99"),
        ("tok_s_p0>=3", "1 to 99"),
        ("ttft_p90>=2s", "bounded from above"),
        ("tok_s<=30", "bounded from below"),
        ("ttft_p90<=2", "with a unit"),
        ("tbt_p99<=-5ms", "positive"),
        ("tok_s>=fast", "tokens/s"),
        ("tok_s>=30,tok_s_p50>=40", "twice"),
    ];
    for (expr, says) in cases {
        let err = expr.parse::<Slo>().unwrap_err().to_string();
        assert!(err.contains(says), "{expr:?}: {err}");
    }
    assert!(serde_json::from_str::<Slo>("\"ttft<=2\"").is_err());
}

#[test]
fn a_cell_is_judged_at_each_bounds_percentile() {
    // ten requests at 10, 20, …, 100 tok/s (TBT 100 … 10 ms), TTFT 100 … 1000 ms
    let requests: Vec<RequestFigures> =
        (1..=10).map(|i| req(50.0, f64::from(i) * 100.0, 1000.0 / (f64::from(i) * 10.0))).collect();
    let slo: Slo = "tok_s_p10>=15,ttft_p90<=950ms".parse().unwrap();
    let j = slo.judge(&requests, 10.0);
    // p10 of 10..100 at rank 0.9 = 19; p90 of TTFT 100..1000 at rank 8.1 = 910
    assert!((j.bounds[0].value.unwrap() - 19.0).abs() < 1e-9, "{j:?}");
    assert!((j.bounds[1].value.unwrap() - 910.0).abs() < 1e-9, "{j:?}");
    assert!(j.met && j.first_failed().is_none());
    // goodput: a request meets every bound on its own figures (≥ 15 tok/s and ≤ 950 ms): 2…9
    assert_eq!(j.goodput_pct, Some(80.0));
    assert_eq!(j.goodput_tok_s, Some(8.0 * 50.0 / 10.0));
    let strict: Slo = "tok_s_p10>=15,ttft_p90<=900ms".parse().unwrap();
    let j = strict.judge(&requests, 10.0);
    assert!(!j.met);
    assert_eq!(j.first_failed(), Some(&BoundName::Key(BoundKey { figure: Figure::Ttft, percentile: 90 })));
}

#[test]
fn requests_without_a_speed_count_but_are_judged_on_what_they_have() {
    let one_token = RequestFigures {
        tokens: 1.0,
        ttft_ms: Some(100.0),
        ttfa_ms: None,
        ttftc_ms: None,
        tbt_ms: None,
        silent_ms: None,
    };
    let slo: Slo = "tok_s>=10".parse().unwrap();
    let j = slo.judge(&[req(20.0, 100.0, 50.0), one_token], 1.0);
    assert_eq!(j.bounds[0].value, Some(20.0), "the speed is over the requests that have one");
    assert_eq!((j.goodput_pct, j.goodput_tok_s), (Some(100.0), Some(21.0)));
    let j = slo.judge(&[one_token], 1.0);
    assert!(!j.met && j.bounds[0].value.is_none(), "no speed measured: not met");
    assert_eq!(slo.judge(&[], 1.0).goodput_pct, None);
}

/// A request that went silent in the window (fewer than two tokens there) fails a speed or TBT
/// bound it had the time to meet; one that had too little time (it began just before the window's
/// end) is judged on its TTFT alone. It never enters the bound's percentile either way.
#[test]
fn a_silent_request_fails_the_bounds_its_silence_breaks() {
    let silent = |ms| RequestFigures { tokens: 1.0, ttft_ms: Some(100.0), silent_ms: Some(ms), ..Default::default() };
    let slo: Slo = "tok_s>=10,ttft_p90<=1s".parse().unwrap();
    let j = slo.judge(&[req(20.0, 100.0, 50.0), silent(1900.0)], 2.0);
    assert_eq!(j.bounds[0].value, Some(20.0), "the speed is over the requests that have one");
    assert_eq!((j.goodput_pct, j.goodput_tok_s), (Some(50.0), Some(10.0)), "the stalled request is not good");
    // 10 tok/s allows 100 ms between tokens: 80 ms of silence could still be on pace
    let j = slo.judge(&[req(20.0, 100.0, 50.0), silent(80.0)], 2.0);
    assert_eq!(j.goodput_pct, Some(100.0));
    let tbt: Slo = "tbt_p99<=50ms".parse().unwrap();
    assert!(!tbt.meets(&silent(60.0)) && tbt.meets(&silent(40.0)));
    let ttft_only: Slo = "ttft_p90<=1s".parse().unwrap();
    assert!(ttft_only.meets(&silent(1900.0)), "a TTFT bound does not look at the silence");
    let measured = RequestFigures { silent_ms: Some(1900.0), ..req(20.0, 100.0, 50.0) };
    assert!(slo.meets(&measured), "a request with a speed is judged by it");
}

#[test]
fn summaries_give_tok_s_percentiles_through_tbt() {
    let s = SummaryFigures {
        per_request_tok_s: Some(40.0),
        ttft_ms: [Some(100.0), Some(300.0), None],
        ttfa_ms: [None; 3],
        ttftc_ms: [None; 3],
        tbt_ms: [Some(25.0), Some(50.0), Some(80.0)],
    };
    let slo: Slo = "tok_s_p10>=20,tok_s>=35,tbt_p99<=80ms,ttft_p90<=0.3s".parse().unwrap();
    let j = slo.judge_summary(&s).unwrap();
    let values: Vec<f64> = j.bounds.iter().map(|b| b.value.unwrap()).collect();
    assert_eq!(values, [20.0, 40.0, 80.0, 300.0]);
    assert!(j.met && j.goodput_pct.is_none());
    let missing: Slo = "ttft_p99<=1s".parse().unwrap();
    assert_eq!(missing.judge_summary(&s).unwrap_err(), "ttft_p99");
    let odd: Slo = "tok_s_p25>=1,ttft_p95<=1s".parse().unwrap();
    assert_eq!(odd.unjudgeable_from_summary(), ["tok_s_p25", "ttft_p95"]);
    assert!(Slo::default().unjudgeable_from_summary().is_empty(), "the default SLO judges any summary");
}

#[test]
fn a_checked_bound_reads_its_name_once_and_writes_it_back_the_same() {
    let read = |s: &str| serde_json::from_str::<BoundName>(&format!("\"{s}\"")).unwrap();
    assert_eq!(read("tok_s_p10"), BoundName::Key(BoundKey { figure: Figure::TokS, percentile: 10 }));
    assert_eq!(read("tbt_p99").figure(), Some(Figure::Tbt));
    assert_eq!(read("slo"), BoundName::Whole);
    // text that is not a key as run.json writes one is kept, to be refused by name
    for odd in ["latency_p50", "tok_s", "tok_s_p010", "ttft_p0", "ttft_p100", "<b>tok_s_p10"] {
        assert_eq!(read(odd), BoundName::Unknown(odd.to_string()), "{odd}");
    }
    for s in ["tok_s_p10", "ttft_p90", "slo", "latency_p50"] {
        assert_eq!(serde_json::to_string(&read(s)).unwrap(), format!("\"{s}\""));
    }
    let slo: Slo = "tok_s_p10>=30".parse().unwrap();
    let check = slo.judge(&[req(1.0, 10.0, 50.0)], 1.0).bounds.remove(0);
    assert_eq!(serde_json::to_value(&check).unwrap()["bound"], "tok_s_p10");
}

#[test]
fn a_bound_on_the_first_answer_token_counts_a_request_that_never_answered_as_failing() {
    let slo: Slo = "ttfa_p50<=2s".parse().unwrap();
    assert_eq!(slo.to_string(), "ttfa_p50<=2s");
    assert!("ttfa_p90>=2s".parse::<Slo>().is_err(), "a wait is bounded from above");
    let answered = |ms| RequestFigures { tokens: 10.0, ttft_ms: Some(100.0), ttfa_ms: Some(ms), ..Default::default() };
    let never = RequestFigures { ttfa_ms: Some(f64::INFINITY), ..answered(0.0) };
    // TTFT holds for all three; the first answer came in time for two
    let cell = [answered(500.0), answered(1500.0), never];
    let j = slo.judge(&cell, 10.0);
    assert_eq!((j.met, j.bounds[0].value), (true, Some(1500.0)));
    assert_eq!(j.goodput_pct.map(f64::round), Some(67.0), "the one with no answer is not good");
    // the median falls on the one that never answered: failed, with no finite value to show
    let j = slo.judge(&[answered(500.0), never, never], 10.0);
    assert_eq!((j.met, j.bounds[0].value, j.bounds[0].holds), (false, None, false));
    let p90: Slo = "ttfa_p90<=2s".parse().unwrap();
    assert!(!p90.judge(&cell, 10.0).met, "p90 lies between the slower answer and the one never given");
}

/// A run sent with tools: a request that ended with no tool call waited forever for it, as one
/// that never answered waits forever for its answer.
#[test]
fn a_bound_on_the_first_tool_call_counts_a_request_that_never_called_as_failing() {
    let slo: Slo = "ttftc_p50<=2s".parse().unwrap();
    assert_eq!(slo.to_string(), "ttftc_p50<=2s");
    assert_eq!("ttftc<=150ms".parse::<Slo>().unwrap().bounds[0].key().to_string(), "ttftc_p50");
    assert_eq!("ttftc_p90".parse::<BoundKey>().map(|k| k.figure), Ok(Figure::Ttftc));
    assert!("ttftc_p90>=2s".parse::<Slo>().is_err(), "a wait is bounded from above");
    assert!("ttftc_p90<=2".parse::<Slo>().unwrap_err().to_string().contains("with a unit"));
    let called = |ms| RequestFigures { tokens: 10.0, ttft_ms: Some(100.0), ttftc_ms: Some(ms), ..Default::default() };
    let never = RequestFigures { ttftc_ms: Some(f64::INFINITY), ..called(0.0) };
    // TTFT holds for all three; the first call came in time for two
    let cell = [called(500.0), called(1500.0), never];
    let j = slo.judge(&cell, 10.0);
    assert_eq!((j.met, j.bounds[0].value), (true, Some(1500.0)));
    assert_eq!(j.goodput_pct.map(f64::round), Some(67.0), "the one with no call is not good");
    assert!(!slo.meets(&never) && slo.meets(&called(1999.0)));
    // the median falls on a request that never called: failed, with no finite value to show
    let j = slo.judge(&[called(500.0), never, never], 10.0);
    assert_eq!((j.met, j.bounds[0].value, j.bounds[0].holds), (false, None, false));
    let p90: Slo = "ttftc_p90<=2s".parse().unwrap();
    assert!(!p90.judge(&cell, 10.0).met, "p90 lies between the slower call and the one never made");
    // a request whose call is not known yet (still open at the window's end) is not judged on it
    let open = RequestFigures { ttftc_ms: None, ..called(0.0) };
    assert!(slo.meets(&open));
    assert_eq!(slo.judge(&[called(500.0), open], 10.0).bounds[0].value, Some(500.0));
    // from a summary: only where the cell stored it
    let s = SummaryFigures { ttftc_ms: [Some(300.0), Some(900.0), None], ..Default::default() };
    assert!(p90.judge_summary(&s).unwrap().met);
    assert_eq!("ttftc_p99<=2s".parse::<Slo>().unwrap().judge_summary(&s).unwrap_err(), "ttftc_p99");
}
