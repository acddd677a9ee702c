//! The import path on small synthetic reference-tool files (tests/data/bench):
//! sentinels and failures, the shapes of bench versions 0.5–0.7, request-count
//! runs, missing metadata, and lil-bench plan cells skipped for a reason other
//! than capacity. Each test renders the page too: a status the importer gets
//! right can still be shown wrong.

use crate::common::*;
use serde_json::{Value, json};
use sm_core::record::{CellStatus, PlanKind, PlanStatus, RunRecord, TokenSource};

fn status(r: &RunRecord, ctx: u64, c: u32) -> (CellStatus, String) {
    let cell = r.decode_cell(ctx, c).unwrap_or_else(|| panic!("no cell {ctx} × {c}"));
    (cell.status(), cell.reason.clone().unwrap_or_default())
}

/// The `<li>` texts of the page's footnotes (under the prefill table and under the matrix), in
/// page order: one numbering for the whole page.
fn footnotes(html: &str) -> Vec<String> {
    html.split("<ol class=\"footnotes\">")
        .skip(1)
        .flat_map(|list| {
            let list = &list[..list.find("</ol>").unwrap()];
            list.split("<li").skip(1).map(|li| strip_tags(&format!("<li{li}"))).collect::<Vec<_>>()
        })
        .collect()
}

/// The cells of the Markdown decode matrix's row `first`.
fn md_row(md: &str, first: &str) -> Vec<String> {
    let decode = &md[md.find("## Sustained decode").expect("decode section")..];
    let line = decode
        .lines()
        .find(|l| l.starts_with(&format!("| {first} |")))
        .unwrap_or_else(|| panic!("no Markdown row {first}:\n{md}"));
    line.trim_matches('|').split(" | ").map(|c| c.trim().to_string()).collect()
}

#[test]
fn sentinels_failures_and_recovered_cells_keep_their_status_and_reason() {
    let r = sm_report::load_any(&bench("sentinels-0.6.2.json")).expect("import");
    assert_eq!(status(&r, 1024, 1).0, CellStatus::Valid);
    assert_eq!(status(&r, 1024, 2), (CellStatus::Skipped, "skipped by the user".into()));
    assert_eq!(status(&r, 1024, 4), (CellStatus::Loop, "loop: a stream repeated its text".into()));
    assert_eq!(status(&r, 2048, 1), (CellStatus::Error, "ERROR in the summary table; no details in the file".into()));
    assert_eq!(status(&r, 2048, 2), (CellStatus::Loop, "a stream repeated 64 characters 40 times".into()));
    assert_eq!(status(&r, 2048, 4).0, CellStatus::Valid);
    assert_eq!(status(&r, 4096, 1), (CellStatus::Error, "HTTP 500 Internal Server Error from the engine".into()));
    assert_eq!(status(&r, 4096, 2), (CellStatus::Error, "2 streams ended without [DONE]".into()));
    // no plan: recovered from the grid, 4 × (4096 + 1000) > 20000
    let (st, reason) = status(&r, 4096, 4);
    assert_eq!(st, CellStatus::OverCapacity, "{reason}");
    assert_eq!(r.decode_cell(4096, 4).unwrap().kv_need_tokens, Some(4 * (4096 + 1000)));
    assert_eq!(r.decode.len(), 9);
    // only valid cells carry figures
    assert!(r.decode.iter().filter(|c| c.status() != CellStatus::Valid).all(|c| c.total_tok_s.is_none()));
    let bad_prefill = r.prefill.iter().find(|p| p.context == 4096).unwrap();
    assert_eq!(bad_prefill.status, CellStatus::Error);
    assert_eq!(bad_prefill.reason.as_deref(), Some("the server counted 2 prefills for one request"));

    let html = sm_report::html_page(&r, &[]);
    assert_eq!(
        footnotes(&html),
        // one numbering for the page: the prefill row's first, then the matrix row by row
        [
            "Prefill 4K: the server counted 2 prefills for one request",
            "1K × 2: skipped by the user",
            "1K × 4: loop: a stream repeated its text",
            "2K × 1: ERROR in the summary table; no details in the file",
            "2K × 2: a stream repeated 64 characters 40 times",
            "4K × 1: HTTP 500 Internal Server Error from the engine",
            "4K × 2: 2 streams ended without [DONE]",
            "4K × 4: over capacity, needs 20,384 KV tokens, the server has 20,000",
        ]
    );
    assert!(html.contains("title=\"HTTP 500 Internal Server Error from the engine\""), "the reason on hover");
    assert_eq!(html.matches("<td class=\"cell oc\"").count(), 1);

    let md = md_text(&sm_report::markdown(&r));
    assert_eq!(md_row(&md, "1K"), ["1K", "100.0 (50 ms TTFT)", "Skipped [2]", "Loop [3]"]);
    assert_eq!(md_row(&md, "4K")[1..], ["Error [6]", "Error [7]", "Over capacity [8]"]);
    assert!(md.contains("6. 4K × 1: HTTP 500 Internal Server Error from the engine"), "{md}");
    // the prefill error's reason, under the prefill table
    assert!(md.contains("| 4K | 4,100 | Error [1] | — |"), "{md}");
    assert!(md.contains("1. Prefill 4K: the server counted 2 prefills for one request"), "{md}");

    let term = sm_report::terminal(&r, 100);
    assert!(term.contains("error [1]") && term.contains("[1] Prefill 4K: the server counted 2 prefills"), "{term}");
    assert!(term.contains("[6] 4K × 1: HTTP 500"), "{term}");
    assert!(term.contains("over cap [8]"), "{term}");

    let csv = csv_records(&sm_report::csv(&r));
    let loop_row = csv.iter().find(|row| row["context_tokens"] == "2048" && row["concurrency"] == "2").unwrap();
    assert_eq!((loop_row["status"].as_str(), loop_row["Status"].as_str()), ("loop", "Loop"));
    assert_eq!(loop_row["reason"], "a stream repeated 64 characters 40 times");
}

#[test]
fn bench_0_5_shape_client_prefill_token_window_and_total_tokens() {
    let r = sm_report::load_any(&bench("bench-0.5.3.json")).expect("import 0.5");
    assert_eq!((r.tool.version.as_str(), r.server.engine.as_str()), ("0.5.3", "sglang"));
    assert_eq!(r.server.url, "http://10.0.0.1:30000", "credentials stripped");
    let p = &r.prefill[0];
    assert_eq!((p.status, p.prompt_tok_s, p.ttft_ms), (CellStatus::Valid, Some(16400.0), Some(500.0)));
    let c = r.decode_cell(8192, 2).unwrap();
    assert_eq!((c.status(), c.total_tok_s, c.output_tokens), (CellStatus::Valid, Some(101.25), Some(2015)));
    assert_eq!((c.measured_s, c.completed, c.tbt_ms.p50), (Some(19.9), Some(1), Some(19.5)));
    assert_eq!(r.started, "2026-05-02T08:30:00Z");
    let html = sm_report::html_page(&r, &[]);
    // 0.5 files do not say how they measured decode or prefill
    assert!(html.contains("<dt>Decode test</dt><dd>unknown</dd>"), "decode test");
    assert!(html.contains("<dt>Prefill mode</dt><dd>unknown</dd>"), "prefill mode");
    assert!(html.contains("<dt>Time per measurement</dt><dd>20 s</dd>"));
    assert!(html.contains("Measured May 2, 2026, 08:30 (local time)"));
}

#[test]
fn bench_0_7_shape_burst_rows_fallbacks_and_warnings() {
    let r = sm_report::load_any(&bench("bench-0.7.0.json")).expect("import 0.7");
    assert_eq!(r.decode.len(), 2, "the burst-e2e row is not a sustained-decode cell");
    assert_eq!(r.server.engine, sm_core::record::Engine::Generic);
    assert_eq!(r.server.extra["engine_reported"], "openai_proxy");
    assert_eq!(r.server.kv_budget_tokens, None, "max_total_tokens 0 is unknown");
    let one = r.decode_cell(16384, 1).unwrap();
    assert_eq!(one.token_source, Some(TokenSource::Chunks));
    assert_eq!(one.warnings, ["throughput source: openai_stream_chunks_fallback"]);
    let four = r.decode_cell(16384, 4).unwrap();
    assert_eq!(four.total_tok_s, Some(120.5), "a number written as a string");
    assert_eq!(
        four.warnings,
        [
            "capacity limited: the server ran 3.0 of 4 requests at once",
            "readiness timed out: readiness not reached in 180 s"
        ]
    );
    let p = &r.prefill[0];
    assert_eq!((p.prompt_tok_s, p.ttft_ms), (Some(13300.0), Some(1234.0)), "the server-side figure first");
    let html = sm_report::html_page(&r, &[]);
    assert!(html.contains("<dt>Prefill mode</dt><dd>Measured during decode warm-up</dd>"));
    assert!(html.contains("<dt>Decode test</dt><dd>Fixed duration</dd>"));
    assert!(html.contains("capacity limited: the server ran 3.0 of 4"), "warnings on hover");
}

#[test]
fn a_request_count_run_says_so() {
    let r = sm_report::load_any(&bench("request-count-0.6.0.json")).expect("import");
    for page in [sm_report::html_page(&r, &[]), sm_report::markdown(&r)] {
        let text = strip_tags(&page);
        assert!(text.contains("Decode test: Fixed request count") || page.contains("<dd>Fixed request count</dd>"));
        assert!(!page.contains("Fixed duration"), "the hard-coded wording");
        assert!(page.contains("Requests per measurement"), "the count, not a time");
        assert!(!page.contains("Time per measurement"));
    }
    let md = sm_report::markdown(&r);
    assert!(md.contains("- Decode test: Fixed request count\n") && md.contains("- Requests per measurement: 16\n"));
}

#[test]
fn missing_metadata_shows_as_unknown_not_as_placeholders() {
    let doc = json!({"metadata": {}, "results": [
        {"context_tokens": 1024, "concurrency": 1, "aggregate_tps": 50.0, "client_output_tokens": 500,
         "ttft_p50": 0.1, "inter_token_latency_p50": 0.02}
    ]});
    let r = sm_report::import_str(&doc.to_string()).expect("import");
    // the record stays valid against the schema's required fields
    let again: RunRecord = serde_json::from_value(serde_json::to_value(&r).unwrap()).unwrap();
    assert_eq!(again, r);
    let html = sm_report::html_page(&r, &[]);
    let md = sm_report::markdown(&r);
    for page in [&html, &md] {
        for wrong in ["1970", "vunknown", ": 0 s", "0 tokens", "Cold request per context", "generic"] {
            assert!(!page.contains(wrong), "{wrong:?} on the page");
        }
    }
    for (k, v) in [
        ("Time per measurement", "unknown"),
        ("Max output", "unknown"),
        ("Prefill mode", "unknown"),
        ("Decode test", "unknown"),
        ("Engine", "unknown"),
        ("Benchmark tool", "llm-inference-bench, version unknown"),
    ] {
        assert!(md.contains(&format!("- {k}: {v}\n")), "{k}: {v}\n{md}");
    }
    assert!(md.contains("Measured on an unknown date"));
    assert!(html.contains("<dt>Engine</dt><dd>unknown</dd>"));

    // a file that gives them shows them
    let full = sm_report::load_any(&bench("bench-0.5.3.json")).unwrap();
    assert!(full.server.extra.get(sm_report::meta::UNKNOWN).is_none(), "{:?}", full.server.extra);
}

/// The reference upload with one decode cell taken out of the results and
/// skipped by the plan for a reason other than KV or the sequence limit.
fn lil_with_plan_skip(reason: &str) -> Value {
    let mut doc: Value = serde_json::from_str(&std::fs::read_to_string(reference(LIL)).unwrap()).unwrap();
    let bench = &mut doc["results"]["bench"];
    bench["results"].as_array_mut().unwrap().retain(|r| !(r["context_tokens"] == 257024 && r["concurrency"] == 32));
    bench["summary_table"]["257024"].as_object_mut().unwrap().remove("32");
    let plan = doc["plan"].as_array_mut().unwrap();
    let entry = plan.iter_mut().find(|p| p["context"] == 257024 && p["concurrency"] == 32 && p["kind"] == "decode");
    let entry = entry.expect("a plan entry for 251K × 32");
    entry["status"] = json!("skipped");
    entry["reason"] = json!(reason);
    doc
}

#[test]
fn a_plan_cell_skipped_for_another_reason_keeps_its_reason() {
    let reason = "context 257024 + 4096 output tokens exceeds max_model_len 260000";
    let r = sm_report::import_str(&lil_with_plan_skip(reason).to_string()).expect("import");
    let planned =
        r.plan.iter().find(|p| p.kind == PlanKind::Decode && p.context == 257024 && p.concurrency == 32).unwrap();
    assert_eq!((planned.status, planned.reason.as_deref()), (PlanStatus::Skipped, Some(reason)));

    let html = sm_report::html_page(&r, &[]);
    assert!(!html.contains("planned but not measured"), "a complete run's plan skip is not 'the run stopped first'");
    let over =
        |c: u32, need: &str| format!("251K × {c}: over capacity, needs {need} KV tokens, the server has 12,582,912");
    assert_eq!(
        footnotes(&html),
        [
            "128K × 128: over capacity, needs 17,301,504 KV tokens, the server has 12,582,912".to_string(),
            format!("251K × 32: {reason}"),
            over(64, "16,711,680"),
            over(128, "33,423,360"),
        ]
    );
    assert!(html.contains(&format!("title=\"{reason}\"")));
    let all: Vec<Vec<String>> =
        body_rows(table(&html, "all")).iter().map(|r| r.iter().map(|c| strip_tags(c)).collect()).collect();
    assert_eq!(all.len(), 7 + 48, "the skipped cell is a row");
    assert!(all.iter().any(|r| r[1] == "251K" && r[2] == "32" && r[3] == "Skipped"));

    let md = md_text(&sm_report::markdown(&r));
    assert_eq!(md_row(&md, "251K")[6], "Skipped [2]");
    assert!(md.contains(&format!("2. 251K × 32: {reason}")));
    let term = sm_report::terminal(&r, 200);
    assert!(term.contains("skipped [2]") && term.contains(reason), "{term}");
    let csv = csv_records(&sm_report::csv(&r));
    let row = csv.iter().find(|row| row["context_tokens"] == "257024" && row["concurrency"] == "32").unwrap();
    assert_eq!((row["status"].as_str(), row["reason"].as_str()), ("skipped", reason));

    // a KV reason is still over capacity
    let r = sm_report::import_str(&lil_with_plan_skip("needs 9,000,000 KV tokens").to_string()).unwrap();
    assert_eq!(r.decode_cell(257024, 32).map(|c| c.status()), Some(CellStatus::OverCapacity));
}
