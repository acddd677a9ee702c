use sm_core::precision::Interval;
use sm_core::record::{CellIntervals, CellStatus, RunRecord};

use super::gate::{Bound, Direction, Gate, GateError, Why};
use super::render::{self, Report, Run};
use super::*;
use serde_json::json;

/// A run recorded before speedmatrix.run/1.2 (no intervals), read as every reader reads it: judged
/// against the default SLO, with its capacity answer.
fn sample() -> RunRecord {
    crate::import_str(include_str!("../../../../tests/data/run-sample.json")).unwrap()
}

/// Every valid cell's six figures given an interval of ±`pct` %.
fn with_intervals(mut r: RunRecord, pct: f64) -> RunRecord {
    for c in r.decode.iter_mut().filter(|c| c.status() == CellStatus::Valid) {
        let i = |v: Option<f64>| v.map(|v| Interval { lo: v * (1.0 - pct / 100.0), hi: v * (1.0 + pct / 100.0) });
        c.ci = Some(CellIntervals {
            total_tok_s: i(c.total_tok_s),
            per_request_tok_s: i(c.per_request_tok_s),
            ttft_ms_p50: i(c.ttft_ms.p50),
            ttft_ms_p90: i(c.ttft_ms.p90),
            tbt_ms_p50: i(c.tbt_ms.p50),
            tbt_ms_p99: i(c.tbt_ms.p99),
            ttfa_ms_p50: i(c.ttfa_ms.p50),
            ttfa_ms_p90: i(c.ttfa_ms.p90),
            ttftc_ms_p50: i(c.ttftc_ms.p50),
            ttftc_ms_p90: i(c.ttftc_ms.p90),
        });
    }
    r
}

/// Every valid cell 5 % slower: tok/s down, times up, intervals moved along.
fn slower(r: &RunRecord) -> RunRecord {
    let mut r = r.clone();
    for c in r.decode.iter_mut().filter(|c| c.status() == CellStatus::Valid) {
        let scale = |v: &mut Option<f64>, k: f64| *v = v.map(|v| v * k);
        let scale_i = |v: &mut Option<Interval>, k: f64| *v = v.map(|i| Interval { lo: i.lo * k, hi: i.hi * k });
        scale(&mut c.total_tok_s, 1.0 / 1.05);
        scale(&mut c.per_request_tok_s, 1.0 / 1.05);
        scale(&mut c.ttft_ms.p90, 1.05);
        scale(&mut c.tbt_ms.p50, 1.05);
        if let Some(ci) = c.ci.as_mut() {
            scale_i(&mut ci.total_tok_s, 1.0 / 1.05);
            scale_i(&mut ci.per_request_tok_s, 1.0 / 1.05);
            scale_i(&mut ci.ttft_ms_p90, 1.05);
            scale_i(&mut ci.tbt_ms_p50, 1.05);
        }
    }
    r
}

fn valid_cells(r: &RunRecord) -> usize {
    r.decode.iter().filter(|c| c.status() == CellStatus::Valid).count()
}

#[test]
fn the_gate_parses_bounds_that_say_their_direction() {
    let g: Gate = " total_tok_s<-3% , ttft_p90>+10%".parse().unwrap();
    assert_eq!(
        g.bounds,
        [
            Bound { figure: Figure::TotalTokS, direction: Direction::Below, pct: -3.0 },
            Bound { figure: Figure::TtftP90, direction: Direction::Above, pct: 10.0 },
        ]
    );
    assert_eq!(g.to_string(), "total_tok_s<-3%,ttft_p90>+10%");
    assert_eq!(g.to_string().parse::<Gate>().unwrap(), g);
    // run.json's field names and `<=` read the same; decimals are kept
    let g: Gate = "tbt_ms_p99>=+2.5%,per_request_tok_s<-0.5%".parse().unwrap();
    assert_eq!(g.bounds[0], Bound { figure: Figure::TbtP99, direction: Direction::Above, pct: 2.5 });
    assert_eq!(g.bounds[1].figure, Figure::PerRequestTokS);
    assert!(g.bounds[1].beyond(-0.6) && !g.bounds[1].beyond(-0.5) && !g.bounds[1].beyond(3.0));
}

#[test]
fn a_bad_gate_says_what_is_accepted() {
    let err = |s: &str| s.parse::<Gate>().unwrap_err();
    assert_eq!(err(""), GateError::Empty);
    assert_eq!(err(" , "), GateError::Empty);
    assert!(matches!(err("total_tok_s=-3%"), GateError::NoOperator { .. }));
    let unknown = err("speed<-3%");
    assert!(matches!(unknown, GateError::UnknownFigure { ref name, .. } if name == "speed"));
    let text = unknown.to_string();
    for f in Figure::ALL {
        assert!(text.contains(f.name()), "{text}");
    }
    // an unsigned bound is ambiguous: is 3% a fall or a rise?
    for bad in
        ["total_tok_s<3%", "total_tok_s<-3", "total_tok_s<-x%", "total_tok_s<-inf%", "total_tok_s<-1e9%", "ttft_p90>"]
    {
        let e = err(bad);
        assert!(matches!(e, GateError::BadPercent { .. }), "{bad}: {e}");
        assert!(e.to_string().contains("-3%") && e.to_string().contains(bad), "{e}");
    }
    assert!(matches!(err("total_tok_s<-3%,bogus"), GateError::NoOperator { .. }));
}

/// Two runs without intervals (before 1.2, or imported): a 5 % difference is reported, never
/// called significant, and fails no bound.
#[test]
fn runs_without_intervals_are_never_significant() {
    let a = sample();
    let b = slower(&a);
    let c = compare(&a, &b);
    assert_eq!(c.compared().count(), valid_cells(&a));
    for (_, diffs) in c.compared() {
        assert!(diffs.iter().all(|d| d.significance == Significance::NoInterval), "{diffs:?}");
        let total = diffs.iter().find(|d| d.figure == Figure::TotalTokS).unwrap();
        assert!((total.pct.unwrap() + 4.76).abs() < 0.01, "{total:?}");
    }
    let gate: Gate = "total_tok_s<-3%,ttft_p90>+1%".parse().unwrap();
    assert!(gate.check(&c).is_empty());
    // one run with intervals is not enough either
    let c = compare(&with_intervals(a.clone(), 0.5), &b);
    assert!(c.compared().all(|(_, d)| d.iter().all(|d| d.significance == Significance::NoInterval)));
    assert!(gate.check(&c).is_empty());
}

#[test]
fn a_regression_beyond_the_noise_fails_the_bound_that_catches_it() {
    let a = with_intervals(sample(), 1.0);
    let c = compare(&a, &slower(&a));
    let total = |c: &Comparison| -> Vec<Significance> {
        c.compared().map(|(_, d)| d.iter().find(|d| d.figure == Figure::TotalTokS).unwrap().significance).collect()
    };
    assert!(total(&c).iter().all(|s| *s == Significance::Significant));
    // unchanged figures are within the noise
    assert!(
        c.compared()
            .all(|(_, d)| d.iter().find(|d| d.figure == Figure::TbtP99).unwrap().significance
                == Significance::WithinNoise)
    );
    let failures = "total_tok_s<-3%,ttft_p90>+10%,tbt_p50>+4%".parse::<Gate>().unwrap().check(&c);
    // each valid cell: total tok/s fell 4.8 % (past -3 %) and TBT p50 rose 5 % (past +4 %)
    assert_eq!(failures.len(), 2 * valid_cells(&a), "{failures:?}");
    for f in &failures {
        let Why::Bound { bound, pct } = f.why else { panic!("{f:?}") };
        assert!(matches!(bound.figure, Figure::TotalTokS | Figure::TbtP50), "{f:?}");
        assert!((pct.abs() - 4.9).abs() < 0.2, "{f:?}");
    }
    // a bound further than the change, or the wrong way, fails nothing
    assert!("total_tok_s<-6%,total_tok_s>+3%".parse::<Gate>().unwrap().check(&c).is_empty());
    // the same change within ±5 % intervals is noise
    let wide = with_intervals(sample(), 5.0);
    let c = compare(&wide, &slower(&wide));
    assert!(total(&c).iter().all(|s| *s == Significance::WithinNoise));
    assert!("total_tok_s<-3%".parse::<Gate>().unwrap().check(&c).is_empty());
}

#[test]
fn cells_only_one_run_has_are_listed_and_lost_cells_fail() {
    let a = with_intervals(sample(), 1.0);
    let mut b = a.clone();
    let lost = b.decode.iter().position(|c| c.status() == CellStatus::Valid).unwrap();
    let key = (b.decode[lost].context, b.decode[lost].concurrency);
    b.decode[lost].status = Some(CellStatus::Error);
    let gone = b.decode.pop().unwrap();
    let mut extra = b.decode[0].clone();
    extra.concurrency = 999;
    b.decode.push(extra);
    let c = compare(&a, &b);
    let find = |ctx: u64, conc: u32| c.cells.iter().find(|x| x.context == ctx && x.concurrency == conc).unwrap();
    assert_eq!(find(key.0, key.1).outcome, Outcome::NotValid { a: CellStatus::Valid, b: CellStatus::Error });
    assert!(matches!(find(gone.context, gone.concurrency).outcome, Outcome::OnlyInA(_)));
    assert!(matches!(find(b.decode[0].context, 999).outcome, Outcome::OnlyInB(_)));
    let failures = "total_tok_s<-3%".parse::<Gate>().unwrap().check(&c);
    assert_eq!(failures.len(), 1, "{failures:?}");
    assert_eq!(failures[0].why, Why::Lost { status: CellStatus::Error });
    assert_eq!((failures[0].context, failures[0].concurrency), key);
}

#[test]
fn the_renderings_agree_and_name_the_failures() {
    let a = with_intervals(sample(), 1.0);
    let b = slower(&a);
    assert!(!a.capacity.is_empty());
    let runs = vec![Run { source: "a/run.json".into(), record: a.clone() }, Run { source: "b".into(), record: b }];
    let gate: Gate = "total_tok_s<-3%".parse().unwrap();
    let report = Report::new(&runs, Some(&gate));
    assert!(!report.passed());
    let json: serde_json::Value = serde_json::from_str(&render::json(&report)).unwrap();
    assert_eq!(json["format"], render::JSON_FORMAT);
    assert_eq!(json["runs"][1]["source"], "b");
    assert_eq!(json["gate"]["passed"], false);
    let cmp = &json["comparisons"][0];
    assert_eq!(cmp["run"], "B");
    let compared: Vec<&serde_json::Value> =
        cmp["cells"].as_array().unwrap().iter().filter(|c| c["outcome"] == "compared").collect();
    assert_eq!(compared.len(), valid_cells(&a));
    assert_eq!(compared[0]["figures"]["total_tok_s"]["significance"], "significant");
    assert_eq!(cmp["failures"].as_array().unwrap().len(), valid_cells(&a));
    assert_eq!(cmp["failures"][0]["bound"], "total_tok_s<-3%");
    let text = render::text(&report);
    assert!(
        text.contains("-4.8 %*") && text.contains("FAILED") && text.contains("B 8K × 1: total_tok_s -4.8 %"),
        "{text}"
    );
    let md = render::markdown(&report);
    assert!(
        md.contains("| Context | Users | Requests | total tok/s |")
            && md.contains("**-4.8 %\\***")
            && md.contains("❌ 8K"),
        "{md}"
    );
    // the capacity answers side by side, in every format
    assert!(text.contains("capacity, max users (bounded by)") && md.contains("Capacity, max users"), "{text}");
    assert_eq!(cmp["capacity"][0]["a"]["max_users"], json!(a.capacity[0].max_users));
}

/// The same run measured at contexts 0.4 % away (a 256K fitted to the model against the reference
/// tool's 251K row): one context, compared, named with both runs' names and tokens.
#[test]
fn contexts_within_one_percent_are_paired_and_show_both_counts() {
    let a = with_intervals(sample(), 1.0);
    let mut b = a.clone();
    for c in &mut b.decode {
        // 131,072 → 130,548 (−0.4 %), named as the reference tool names it: 127K
        if c.context == 131_072 {
            c.context = 130_548;
            c.label = "127K".into();
        }
    }
    for cap in &mut b.capacity {
        if cap.context == 131_072 {
            cap.context = 130_548;
            cap.label = "127K".into();
        }
    }
    let c = compare(&a, &b);
    let at = |ctx: u64| c.cells.iter().filter(|x| x.context == ctx).collect::<Vec<_>>();
    assert!(at(130_548).is_empty(), "{:?}", c.cells);
    let paired = at(131_072);
    assert_eq!(paired.len(), 3, "{paired:?}");
    assert!(paired.iter().all(|x| x.label == "128K ≈ 127K (130,548)" && x.b_context == Some(130_548)), "{paired:?}");
    assert!(paired.iter().all(|x| !matches!(x.outcome, Outcome::OnlyInA(_) | Outcome::OnlyInB(_))), "{paired:?}");
    assert_eq!(c.compared().count(), valid_cells(&a));
    let unpaired = c.cells.iter().filter(|x| x.context == 8192).all(|x| x.label == "8K" && x.b_context.is_none());
    assert!(unpaired, "{:?}", c.cells);
    if a.capacity.iter().any(|k| k.context == 131_072) {
        assert!(c.capacity.iter().any(|p| p.label == "128K ≈ 127K (130,548)"), "{:?}", c.capacity);
    }
    // 2 % away is another context: each only in its run
    for cell in &mut b.decode {
        if cell.context == 130_548 {
            cell.context = 128_450;
        }
    }
    let c = compare(&a, &b);
    assert!(c.cells.iter().filter(|x| x.context == 131_072).all(|x| matches!(x.outcome, Outcome::OnlyInA(_))));
    assert!(c.cells.iter().filter(|x| x.context == 128_450).all(|x| matches!(x.outcome, Outcome::OnlyInB(_))));
}

/// TTFT has one sample per request: from 2 requests a cell gives no percentage change, says how
/// many requests each run's cell rests on, and fails no bound however large the difference.
#[test]
fn a_ttft_from_too_few_requests_gives_no_percentage() {
    let a = sample();
    let mut b = a.clone();
    for c in &mut b.decode {
        c.ttft_ms.p50 = c.ttft_ms.p50.map(|v| v * 50.0);
    }
    let c = compare(&a, &b);
    let one = |conc: u32, f: Figure| {
        let (cell, diffs) = c.compared().find(|(x, _)| x.context == 8192 && x.concurrency == conc).unwrap();
        (cell.requests, *diffs.iter().find(|d| d.figure == f).unwrap())
    };
    // 8K × 1 rests on 2 requests in each run: no change is given
    let (requests, ttft) = one(1, Figure::TtftP50);
    assert_eq!(requests, (Some(2), Some(2)));
    assert!(ttft.too_few && ttft.pct.is_none(), "{ttft:?}");
    assert_eq!(render::diff_text(&ttft), "— (n < 6)");
    assert_eq!(render::requests_text(requests), "2/2");
    // its total tok/s rests on the window's tokens, not on a count of requests
    assert!(one(1, Figure::TotalTokS).1.pct.is_some());
    // 8K × 64 rests on 64: the change is given (p90 needs 36)
    let (_, ttft) = one(64, Figure::TtftP90);
    assert!(!ttft.too_few, "{ttft:?}");
    let (_, ttft) = one(64, Figure::TtftP50);
    assert!((ttft.pct.unwrap() - 4900.0).abs() < 0.01, "{ttft:?}");
    // a run with intervals but none for its TTFT had too few requests for one
    let mut few = with_intervals(a.clone(), 1.0);
    for cell in &mut few.decode {
        if let Some(ci) = cell.ci.as_mut() {
            ci.ttft_ms_p90 = None;
        }
    }
    let c2 = compare(&few, &few);
    assert!(c2.compared().all(|(_, d)| d.iter().find(|d| d.figure == Figure::TtftP90).is_none_or(|d| d.too_few)));
    let runs = vec![Run { source: "a".into(), record: a }, Run { source: "b".into(), record: b }];
    let report = Report::new(&runs, None);
    let text = render::text(&report);
    assert!(text.contains("— (n < 6)") && text.contains("fewer requests than") && text.contains("2/2"), "{text}");
    assert!(!text.contains("+4900.0 %?") || text.contains("64/64"), "{text}");
    let json: serde_json::Value = serde_json::from_str(&render::json(&report)).unwrap();
    let cell = &json["comparisons"][0]["cells"][0];
    assert_eq!(cell["requests"], json!({ "a": 2, "b": 2 }));
    assert_eq!(cell["figures"]["ttft_p50"]["diff_pct"], serde_json::Value::Null);
    assert_eq!(cell["figures"]["ttft_p50"]["too_few_requests"], true);
    let gate: Gate = "ttft_p50>+1%".parse().unwrap();
    assert!(gate.check(&compare(&with_intervals(runs[0].record.clone(), 1.0), &runs[1].record)).is_empty());
}

/// Each compared figure is an entry of the decode cell's table, so it reads what every other
/// output reads: a field renamed or dropped from the table fails here, not as a silent `None`.
#[test]
fn every_compared_figure_is_in_the_decode_table() {
    use sm_core::figures::Figures;
    for f in Figure::ALL {
        assert!(DecodeCell::figure(f.field()).is_some(), "{}", f.field());
    }
    let cell = sample().decode.into_iter().find(|c| c.status() == CellStatus::Valid).unwrap();
    assert_eq!(Figure::TotalTokS.value(&cell), cell.total_tok_s);
}

#[test]
fn compare_names_every_figure_with_an_interval_in_the_tables_order() {
    // a figure given an interval is compared (and gated) once compare names it
    let fields: Vec<&str> = Figure::ALL.iter().map(|f| f.field()).collect();
    let table: Vec<&str> = sm_core::record::CellIntervals::FIGURES.iter().map(|f| f.name).collect();
    assert_eq!(fields, table);
    let ci: sm_core::record::CellIntervals = serde_json::from_value(serde_json::json!({
        "total_tok_s": {"lo": 1.0, "hi": 2.0}, "per_request_tok_s": {"lo": 3.0, "hi": 4.0},
        "ttft_ms_p50": {"lo": 5.0, "hi": 6.0}, "ttft_ms_p90": {"lo": 7.0, "hi": 8.0},
        "tbt_ms_p50": {"lo": 9.0, "hi": 10.0}, "tbt_ms_p99": {"lo": 11.0, "hi": 12.0},
        "ttfa_ms_p50": {"lo": 13.0, "hi": 14.0}, "ttfa_ms_p90": {"lo": 15.0, "hi": 16.0},
        "ttftc_ms_p50": {"lo": 17.0, "hi": 18.0}, "ttftc_ms_p90": {"lo": 19.0, "hi": 20.0}
    }))
    .unwrap();
    let los: Vec<f64> = Figure::ALL.iter().map(|f| f.interval(&ci).unwrap().lo).collect();
    assert_eq!(los, [1.0, 3.0, 5.0, 7.0, 9.0, 11.0, 13.0, 15.0, 17.0, 19.0], "each figure reads its own interval");
}

/// A reasoning model's wait for the answer is compared where both cells thought, with its order
/// statistics' intervals, and gated like TTFT; cells that did not think have no TTFA to compare.
#[test]
fn the_wait_for_the_answer_is_compared_where_both_cells_thought() {
    let think = |mut r: RunRecord, ttfa: f64| {
        let i = r.decode.iter().position(|c| c.status() == CellStatus::Valid).unwrap();
        let c = &mut r.decode[i];
        c.ttfa_ms.p50 = Some(ttfa);
        c.ttfa_ms.p90 = Some(ttfa * 1.5);
        c.requests = Some(200);
        let around = |v: f64| Some(Interval { lo: v * 0.98, hi: v * 1.02 });
        c.ci = Some(CellIntervals { ttfa_ms_p50: around(ttfa), ttfa_ms_p90: around(ttfa * 1.5), ..Default::default() });
        r
    };
    let (a, b) = (think(sample(), 4000.0), think(sample(), 6000.0));
    let c = compare(&a, &b);
    let ttfa: Vec<&FigureDiff> =
        c.compared().flat_map(|(_, d)| d.iter().filter(|d| d.figure == Figure::TtfaP90)).collect();
    assert_eq!(ttfa.len(), 1, "only the cell that thought in both runs");
    assert_eq!((ttfa[0].pct.map(f64::round), ttfa[0].significance), (Some(50.0), Significance::Significant));
    assert_eq!(Figure::from_name("ttfa_ms_p90"), Some(Figure::TtfaP90));
    let gate: Gate = "ttfa_p90>+10%".parse().unwrap();
    assert_eq!(gate.check(&c).len(), 1, "a 50 % longer wait for the answer fails the gate");
    // a run whose cells did not think: nothing to compare
    assert!(compare(&sample(), &sample()).compared().all(|(_, d)| d.iter().all(|d| d.figure != Figure::TtfaP50)));
}

/// A run sent with tools: the wait for the first tool call is compared where both cells' requests
/// carried tools, with its order statistics' intervals, gated like TTFT, and shown as columns only
/// where some cell compared it; a run without tools has no TTFTC to compare, and no such column.
#[test]
fn the_wait_for_the_tool_call_is_compared_where_both_cells_sent_tools() {
    let tools = |mut r: RunRecord, ttftc: f64| {
        let i = r.decode.iter().position(|c| c.status() == CellStatus::Valid).unwrap();
        let c = &mut r.decode[i];
        c.ttftc_ms.p50 = Some(ttftc);
        c.ttftc_ms.p90 = Some(ttftc * 1.5);
        c.requests = Some(200);
        let around = |v: f64| Some(Interval { lo: v * 0.98, hi: v * 1.02 });
        c.ci = Some(CellIntervals {
            ttftc_ms_p50: around(ttftc),
            ttftc_ms_p90: around(ttftc * 1.5),
            ..Default::default()
        });
        r
    };
    let (a, b) = (tools(sample(), 400.0), tools(sample(), 404.0));
    let c = compare(&a, &tools(sample(), 600.0));
    let ttftc: Vec<&FigureDiff> =
        c.compared().flat_map(|(_, d)| d.iter().filter(|d| d.figure == Figure::TtftcP90)).collect();
    assert_eq!(ttftc.len(), 1, "only the cell sent with tools in both runs");
    assert_eq!((ttftc[0].pct.map(f64::round), ttftc[0].significance), (Some(50.0), Significance::Significant));
    assert_eq!(Figure::from_name("ttftc_ms_p50"), Some(Figure::TtftcP50));
    assert_eq!(Figure::from_name("ttftc_p90"), Some(Figure::TtftcP90));
    let gate: Gate = "ttftc_p90>+10%".parse().unwrap();
    assert_eq!(gate.check(&c).len(), 1, "a 50 % longer wait for the call fails the gate");
    // 1 % apart, inside both runs' 2 % intervals: noise, and the gate holds
    let near = compare(&a, &b);
    let d = near.compared().flat_map(|(_, d)| d.iter().find(|d| d.figure == Figure::TtftcP50)).next().unwrap();
    assert_eq!(d.significance, Significance::WithinNoise);
    assert!(gate.check(&near).is_empty());
    // few requests: no change is given, as for TTFT
    let mut few = tools(sample(), 600.0);
    let i = few.decode.iter().position(|c| c.ttftc_ms.p50.is_some()).unwrap();
    (few.decode[i].requests, few.decode[i].ci) = (Some(3), None);
    let c_few = compare(&a, &few);
    let d = c_few.compared().flat_map(|(_, d)| d.iter().find(|d| d.figure == Figure::TtftcP50)).next().unwrap();
    assert!(d.too_few && d.pct.is_none());

    // the columns: TTFTC where compared, none for runs without tools
    let shown = c.figures();
    assert!(shown.contains(&Figure::TtftcP50) && shown.contains(&Figure::TtftcP90), "{shown:?}");
    assert!(!shown.contains(&Figure::TtfaP50), "no cell thought: {shown:?}");
    let plain = compare(&sample(), &sample());
    assert!(plain.compared().all(|(_, d)| d.iter().all(|d| d.figure != Figure::TtftcP50)));
    assert!(!plain.figures().contains(&Figure::TtftcP90));
    // only in one run: nothing compared, no column
    assert!(!compare(&a, &sample()).figures().contains(&Figure::TtftcP50));
    let runs =
        |b: RunRecord| vec![Run { source: "a".into(), record: a.clone() }, Run { source: "b".into(), record: b }];
    let md = render::markdown(&Report::new(&runs(tools(sample(), 600.0)), None));
    assert!(md.contains("| TTFTC p50 | TTFTC p90 |") && md.contains("+50.0 %"), "{md}");
    assert!(render::text(&Report::new(&runs(tools(sample(), 600.0)), None)).contains("TTFTC p90"));
    let md = render::markdown(&Report::new(&runs(sample()), None));
    assert!(!md.contains("TTFTC p50 |"), "no column where no cell compared it: {md}");
}
