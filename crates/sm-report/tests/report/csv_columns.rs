//! measurements.csv carries every field of a prefill row and a decode cell
//! (docs/report.md), and its values are the record's, unformatted.

use std::collections::BTreeMap;

use crate::common::*;
use serde_json::Value;
use sm_core::precision::Interval;
use sm_core::record::{
    CellIntervals, CellPhases, CellStatus, DecodeCell, Percentiles, PrefillRow, Repeat, RunRecord, TokenSource,
};

/// Every field set, written out without `..Default::default()`: a field added
/// to `DecodeCell` stops this test compiling until it is set here, and then
/// the test fails until the CSV has a column for it.
fn full_cell() -> DecodeCell {
    DecodeCell {
        context: 8192,
        label: "8K".into(),
        concurrency: 4,
        status: Some(CellStatus::Valid),
        reason: Some("a reason, with a comma".into()),
        total_tok_s: Some(401.3),
        per_request_tok_s: Some(100.5),
        ttft_ms: Percentiles::p50_p90_p99(61.5, 72.25, 80.125),
        tbt_ms: Percentiles::p50_p90_p99(9.5, 11.25, 14.75),
        chunk_gap_ms: Percentiles { p50: Some(9.75), p99: Some(15.5), ..Percentiles::default() },
        avg_active: Some(3.875),
        completed: Some(7),
        output_tokens: Some(12_038),
        measured_s: Some(30.0),
        requests: Some(11),
        token_source: Some(TokenSource::UsageAtEnd),
        kv_need_tokens: Some(36_864),
        client_lag_ms_p99: Some(1.625),
        client_cpu_pct: Some(42.5),
        prompt_cache_hit_pct: Some(99.5),
        client_retries: Some(2),
        ttfa_ms: Percentiles::p50_p90_p99(900.5, 1200.25, 1500.125),
        reasoning_tokens_mean: Some(312.5),
        no_answer: Some(1),
        answer_tokens_mean: Some(620.0),
        answer_tok_s: Some(31.5),
        usage_reasoning_tokens_mean: Some(1200.0),
        reasoning_disagree: Some(0),
        ttftc_ms: Percentiles::p50_p90_p99(950.5, 1250.25, 1550.125),
        tool_call_tokens_mean: Some(42.5),
        tool_args_valid: Some(0.875),
        no_tool_call: Some(2),
        warnings: vec!["capacity limited".into(), "second warning".into()],
        slo_met: Some(false),
        slo_bounds: vec![
            sm_core::slo::BoundCheck { bound: "tok_s_p10".into(), limit: 20.0, value: Some(88.5), holds: true },
            sm_core::slo::BoundCheck { bound: "ttft_p90".into(), limit: 50.0, value: Some(72.25), holds: false },
        ],
        goodput_pct: Some(63.6),
        goodput_tok_s: Some(255.25),
        usd_per_million_tokens: Some(4.1525),
        searched: true,
        ci: Some(CellIntervals {
            total_tok_s: Some(Interval { lo: 395.5, hi: 407.25 }),
            per_request_tok_s: Some(Interval { lo: 99.5, hi: 101.5 }),
            ttft_ms_p50: Some(Interval { lo: 60.5, hi: 63.0 }),
            ttft_ms_p90: None,
            tbt_ms_p50: Some(Interval { lo: 9.25, hi: 9.75 }),
            tbt_ms_p99: Some(Interval { lo: 13.5, hi: 16.0 }),
            ttfa_ms_p50: None,
            ttfa_ms_p90: None,
            ttftc_ms_p50: None,
            ttftc_ms_p90: None,
        }),
        precision_met: Some(true),
        repeats: vec![repeat(398.5), repeat(404.0), Repeat { reason: Some("server error".into()), ..repeat(0.0) }],
        repeats_agree: Some(true),
        phases: Some(CellPhases { before_s: 1.5, ramp_s: 3.25, window_s: 30.0, after_s: 0.5 }),
        roofline_tok_s: Some(4775.25),
        roofline_fraction: Some(0.5),
        spec_decode: Some(sm_core::spec_decode::SpecDecode {
            acceptance_length: 2.6,
            acceptance_rate: 0.4,
            drafts: 10,
            accepted: 16,
        }),
        gpu: Some(sm_core::gpu_telemetry::GpuCell {
            source: sm_core::gpu_telemetry::GpuSource::Dcgm,
            samples: 31,
            power_w: Some(1250.5),
            energy_j: Some(37515.0),
            energy_from: Some(sm_core::gpu_telemetry::EnergyFrom::Counter),
            joules_per_token: Some(3.116),
            wh_per_million_tokens: Some(865.556),
            throttle: Some(sm_core::gpu_telemetry::Throttle::Power),
            gpus: vec![Default::default(), Default::default()],
        }),
        server_metrics: Some(server_metrics()),
        ranks: vec![
            sm_core::ranks::RankCell { rank: 0, streams: 2, ..Default::default() },
            sm_core::ranks::RankCell { rank: 1, streams: 2, open_rtt_ms: Some(0.4), ..Default::default() },
        ],
    }
}

/// The server's gauges with every field set (methodology §14.1).
fn server_metrics() -> sm_core::server_metrics::ServerMetrics {
    let point = |t_s| sm_core::server_metrics::ServerPoint { t_s, running: 4.0, waiting: 1.0, kv_usage: Some(0.5) };
    sm_core::server_metrics::ServerMetrics {
        interval_s: 1.0,
        scrapes: 31,
        span_s: 30.25,
        series: vec![point(0.0), point(30.25)],
        running_mean: 3.75,
        waiting_max: 1.0,
        kv_usage_mean: Some(0.5),
        kv_usage_max: Some(0.625),
        preemptions: Some(3),
        prefix_hit_pct: Some(87.5),
        prompt_tokens: Some(4096),
        generation_tokens: Some(12_100),
        server_tok_s: Some(400.0),
        measured_tokens: Some(12_139),
        tok_s_diff_pct: Some(-0.32),
        tok_s_timing_pct: Some(0.41),
        queue_time_ms_p50: Some(2.5),
        queue_time_ms_mean: Some(3.25),
    }
}

/// One measurement of a repeated cell, every field set.
fn repeat(total: f64) -> Repeat {
    Repeat {
        total_tok_s: Some(total),
        per_request_tok_s: Some(total / 4.0),
        ttft_ms_p50: Some(61.0),
        ttft_ms_p90: Some(72.0),
        tbt_ms_p50: Some(9.5),
        tbt_ms_p99: Some(14.5),
        measured_s: Some(30.0),
        goodput_tok_s: Some(250.0),
        ci: Some(CellIntervals {
            total_tok_s: Some(Interval { lo: total - 5.0, hi: total + 5.0 }),
            ..Default::default()
        }),
        reason: None,
    }
}

fn full_prefill() -> PrefillRow {
    PrefillRow {
        context: 8192,
        label: "8K".into(),
        prompt_tokens: Some(8201),
        ttft_ms: Some(314.5),
        prompt_tok_s: Some(26_076.3),
        cached_tokens: Some(0),
        status: CellStatus::Valid,
        reason: Some("cold".into()),
        telemetry: Default::default(),
    }
}

/// The CSV cell a record value should become.
fn expected(v: &Value) -> String {
    match v {
        Value::Number(n) => n.as_u64().map_or_else(|| n.as_f64().unwrap().to_string(), |i| i.to_string()),
        Value::String(s) => s.clone(),
        Value::Bool(b) => b.to_string(),
        Value::Array(a) => a.iter().map(|x| x.as_str().unwrap().to_string()).collect::<Vec<_>>().join("; "),
        other => panic!("unexpected value {other}"),
    }
}

/// Every key of `item` (but the label, which is the page's Context column)
/// has a column holding its value.
fn assert_all_fields(item: &Value, row: &BTreeMap<String, String>, what: &str) {
    let mut numeric = 0;
    for (key, v) in item.as_object().unwrap() {
        let column = match key.as_str() {
            "label" => continue,
            // two columns per bound: its value and whether it holds (docs/report.md)
            "slo_bounds" => {
                for b in v.as_array().unwrap() {
                    let bound = b["bound"].as_str().unwrap();
                    let value =
                        row.get(&format!("slo_{bound}")).unwrap_or_else(|| panic!("{what}: no column for {bound}"));
                    assert_eq!(value, &expected(&b["value"]), "{what}: {bound}");
                    assert_eq!(row[&format!("slo_{bound}_holds")], expected(&b["holds"]), "{what}: {bound} holds");
                }
                continue;
            }
            // two columns per interval, `ci_<figure>_lo` and `_hi`
            "ci" => {
                for (figure, interval) in v.as_object().unwrap() {
                    for end in ["lo", "hi"] {
                        let column = format!("ci_{figure}_{end}");
                        let got = row.get(&column).unwrap_or_else(|| panic!("{what}: no column {column}"));
                        assert_eq!(got, &expected(&interval[end]), "{what}: {column}");
                    }
                }
                continue;
            }
            "ranks" => {
                assert_eq!(row["rank_count"], v.as_array().unwrap().len().to_string(), "{what}: rank_count");
                continue;
            }
            "phases" | "spec_decode" | "server_metrics" => {
                // the server's series stays in run.json
                for (phase, seconds) in v.as_object().unwrap().iter().filter(|(k, _)| *k != "series") {
                    let column = format!("{key}_{phase}");
                    let got = row.get(&column).unwrap_or_else(|| panic!("{what}: no column {column}"));
                    assert_eq!(got, &expected(seconds), "{what}: {column}");
                }
                continue;
            }
            // the scalar figures as `gpu_<figure>`, and how many GPUs: each GPU's stay in run.json
            "gpu" => {
                for (figure, x) in v.as_object().unwrap() {
                    let (column, want) = match figure.as_str() {
                        "gpus" => ("gpu_count".to_string(), x.as_array().unwrap().len().to_string()),
                        f => (format!("gpu_{f}"), expected(x)),
                    };
                    let got = row.get(&column).unwrap_or_else(|| panic!("{what}: no column {column}"));
                    assert_eq!(got, &want, "{what}: {column}");
                }
                continue;
            }
            // the count; each repeat's figures stay in run.json
            "repeats" => {
                assert_eq!(row["repeats"], v.as_array().unwrap().len().to_string(), "{what}: repeats");
                continue;
            }
            "context" => "context_tokens",
            k => k,
        };
        let got = row.get(column).unwrap_or_else(|| panic!("{what}: no CSV column for the field {key}"));
        assert_eq!(got, &expected(v), "{what}: column {column}");
        numeric += usize::from(v.is_number());
    }
    assert!(numeric >= 4, "{what}: the record's numbers were compared");
}

#[test]
fn every_field_of_a_decode_cell_and_a_prefill_row_is_a_column() {
    let mut record: RunRecord = sm_report::load_any(&data("run-sample.json")).unwrap();
    record.plan.clear();
    record.prefill = vec![full_prefill()];
    record.decode = vec![full_cell()];
    let rows = csv_records(&sm_report::csv(&record));
    assert_eq!(rows.len(), 2);

    let cell = serde_json::to_value(full_cell()).unwrap();
    assert_all_fields(&cell, &rows[1], "decode cell");
    assert_eq!(rows[1]["Phase"], "Sustained decode");
    assert_eq!(rows[1]["Total tok/s"], "401.3");
    // a prefill row leaves the decode columns empty
    assert_eq!(rows[0]["total_tok_s"], "");

    let prefill = serde_json::to_value(full_prefill()).unwrap();
    assert_all_fields(&prefill, &rows[0], "prefill row");
    assert_eq!((rows[0]["Phase"].as_str(), rows[0]["concurrency"].as_str()), ("Prefill", "1"));
    assert_eq!(rows[1]["prompt_tok_s"], "", "a decode row leaves the prefill columns empty");
}

/// Every field set, written out: a field added to `Capacity` stops this compiling until it is set
/// here, and then the test below fails until the CSV has a column for it.
fn full_capacity(context: u64) -> sm_core::answer::Capacity {
    sm_core::answer::Capacity {
        context,
        label: "8K".into(),
        max_users: 4,
        bounded_by: sm_core::answer::BoundedBy::Slo("ttft_p90".into()),
        cell: Some(4),
        failed_cell: Some(6),
        fit_limit: Some(33),
        usd_per_user_hour: Some(2.5),
        usd_per_million_tokens: Some(4.1525),
    }
}

#[test]
fn every_field_of_the_capacity_answer_is_a_column_on_its_contexts_decode_rows() {
    let mut record: RunRecord = sm_report::load_any(&data("run-sample.json")).unwrap();
    record.plan.clear();
    record.prefill = vec![full_prefill()];
    record.decode = vec![DecodeCell { concurrency: 2, searched: false, ..full_cell() }, full_cell()];
    record.capacity = vec![full_capacity(8192)];
    let rows = csv_records(&sm_report::csv(&record));
    let cap = serde_json::to_value(full_capacity(8192)).unwrap();
    for (key, v) in cap.as_object().unwrap() {
        let column = match key.as_str() {
            // which row it is, and the proving cell's price, are the row's own columns
            "context" | "label" | "usd_per_million_tokens" => continue,
            "cell" => "capacity".to_string(),
            k => format!("capacity_{k}"),
        };
        let column = column.as_str();
        let want = if key == "cell" { "true".to_string() } else { expected(v) };
        assert_eq!(rows[2][column], want, "the proving cell's row: {column}");
        let want = if key == "cell" { "false".to_string() } else { expected(v) };
        assert_eq!(rows[1][column], want, "another row of the context: {column}");
        assert_eq!(rows[0][column], "", "a prefill row has no answer: {column}");
    }
    assert_eq!(rows[2]["usd_per_million_tokens"], "4.1525");
    // a context without an answer (no SLO) leaves the columns empty
    record.capacity.clear();
    let rows = csv_records(&sm_report::csv(&record));
    assert!(rows.iter().all(|r| r["capacity"].is_empty() && r["capacity_bounded_by"].is_empty()));
}

/// The published page's All-measurements rows, by (phase, context label, requests at once).
fn published_rows() -> BTreeMap<(String, String, String), Vec<String>> {
    let text = std::fs::read_to_string(reference(PAGE_TEXT)).unwrap();
    text.lines()
        .filter(|l| l.starts_with("Prefill\t") || l.starts_with("Sustained decode\t"))
        .map(|l| {
            let cells: Vec<String> = l.trim_end().split('\t').map(str::to_string).collect();
            ((cells[0].clone(), cells[1].clone(), cells[2].clone()), cells)
        })
        .collect()
}

fn num(row: &BTreeMap<String, String>, column: &str) -> f64 {
    row[column].parse().unwrap_or_else(|_| panic!("{column} = {:?} is a number", row[column]))
}

#[test]
fn csv_values_of_the_reference_import_are_the_files_numbers() {
    let doc: Value = serde_json::from_str(&std::fs::read_to_string(reference(LIL)).unwrap()).unwrap();
    let bench = &doc["results"]["bench"];
    let record = sm_report::load_any(&reference(LIL)).unwrap();
    let rows = csv_records(&sm_report::csv(&record));
    assert_eq!(rows.len(), 7 + 48);
    let published = published_rows();
    let find = |phase: &str, ctx: u64, c: u32| {
        rows.iter()
            .find(|r| {
                r["Phase"] == phase && r["context_tokens"] == ctx.to_string() && r["concurrency"] == c.to_string()
            })
            .unwrap_or_else(|| panic!("no CSV row {phase} {ctx} × {c}"))
    };

    // the page's columns are the published page's, character for character
    for r in &rows {
        let key = (r["Phase"].clone(), r["Context"].clone(), r["Requests at once"].clone());
        let shown: Vec<String> = sm_report::view::COLUMNS.iter().map(|c| r[*c].clone()).collect();
        assert_eq!(Some(&shown), published.get(&key), "{key:?}");
    }

    let p = find("Prefill", 8192, 1);
    let src = &bench["prefill"]["8192"];
    assert_eq!(num(p, "prompt_tok_s"), src["tok_per_sec"].as_f64().unwrap());
    assert!((num(p, "ttft_ms") - src["ttft_seconds"].as_f64().unwrap() * 1000.0).abs() < 1e-6);
    assert_eq!(p["prompt_tokens"], src["prompt_tokens"].to_string());
    assert_eq!(p["status"], "valid");

    for (ctx, c) in [(8192, 1), (65536, 16), (257024, 32)] {
        let row = find("Sustained decode", ctx, c);
        let src = bench["results"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["context_tokens"] == ctx && r["concurrency"] == c)
            .unwrap();
        let f = |k: &str| src[k].as_f64().unwrap();
        assert_eq!(num(row, "total_tok_s"), f("aggregate_tps"), "{ctx} × {c}");
        assert_eq!(num(row, "per_request_tok_s"), f("output_tps_per_user_p50"));
        assert!((num(row, "ttft_ms_p50") - f("ttft_p50") * 1000.0).abs() < 1e-6);
        assert!((num(row, "tbt_ms_p50") - f("inter_token_latency_p50") * 1000.0).abs() < 1e-6);
        assert_eq!(num(row, "avg_active"), f("avg_running_reqs"));
        assert_eq!(num(row, "completed"), f("completed_request_count"));
        assert_eq!(num(row, "output_tokens"), f("client_output_tokens"));
        assert_eq!(num(row, "measured_s"), f("measurement_wall_seconds"));
        assert_eq!(row["status"], "valid");
    }

    let over = find("Sustained decode", 131072, 128);
    assert_eq!((over["Status"].as_str(), over["status"].as_str()), ("Over capacity", "over_capacity"));
    assert_eq!(over["kv_need_tokens"], (128 * (131072 + 4096)).to_string());
    assert!(over["reason"].contains("KV tokens"), "{}", over["reason"]);
    assert_eq!(over["total_tok_s"], "");
}

/// Searched levels of many contexts leave the page's grid for a list (docs/site.md): every one
/// of them is still a line of the CSV.
#[test]
fn searched_levels_listed_off_the_grid_are_still_csv_rows() {
    let mut r: RunRecord = serde_json::from_str(include_str!("../../../../tests/data/run-sample.json")).unwrap();
    let cell = r.decode[0].clone();
    let matrix = (0..8u64).flat_map(|i| (1..=2).map(move |c| (i, c, false)));
    let search = (0..8u64).flat_map(|i| (0..6).map(move |k| (i, 100 + i as u32 * 10 + k, true)));
    r.decode = matrix
        .chain(search)
        .map(|(i, concurrency, searched)| DecodeCell {
            context: 1024 * (i + 1),
            label: format!("{}K", i + 1),
            concurrency,
            searched,
            ..cell.clone()
        })
        .collect();
    r.plan.clear();
    let page = sm_report::view::build(&r);
    assert!(!page.matrix.listed.is_empty(), "the grid lists these levels");
    let csv = sm_report::csv(&r);
    assert_eq!(csv.lines().count(), 1 + r.prefill.len() + r.decode.len());
}
