//! Import of the 0.4.18 bench JSON, rejection of other files, escaping of
//! hostile text, and renders of a speedmatrix run.

use crate::common::*;
use sm_core::record::{CellStatus, RunRecord};
use sm_report::ImportError;

fn sample() -> RunRecord {
    sm_report::load_any(&data("run-sample.json")).expect("run-sample.json")
}

#[test]
fn imports_llm_inference_bench_0_4_18() {
    let r = sm_report::load_any(&reference(BENCH_0418)).expect("0.4.18 import");
    assert_eq!(r.tool.name, "llm-inference-bench");
    assert_eq!(r.tool.version, "0.4.18");
    assert_eq!(r.server.model, "tiny-llama");
    assert_eq!(r.settings.duration_s, 6.0);
    assert_eq!(r.settings.max_tokens, 512);
    let labels: Vec<&str> = r.prefill.iter().map(|p| p.label.as_str()).collect();
    assert_eq!(labels, ["1K", "4K", "8K"]);
    assert_eq!(r.prefill[0].prompt_tokens, Some(1256));
    assert!((r.prefill[0].ttft_ms.unwrap() - 37.0).abs() < 1e-5);
    assert_eq!(r.decode.len(), 9);
    assert!(r.decode.iter().all(|c| c.status == Some(CellStatus::Valid)));
    // measurement order: first column, first row, then row by row
    let order: Vec<(u64, u32)> = r.decode.iter().map(|c| (c.context, c.concurrency)).collect();
    assert_eq!(order[..5], [(0, 1), (1024, 1), (4096, 1), (0, 2), (0, 4)]);
    let c = r.decode_cell(0, 1).unwrap();
    assert!((c.total_tok_s.unwrap() - 469.4954534842854).abs() < 1e-5);
    assert!((c.per_request_tok_s.unwrap() - 472.74554753431187).abs() < 1e-5);
    assert!((c.ttft_ms.p50.unwrap() - 9.191571999508596).abs() < 1e-5);
    assert!((c.tbt_ms.p50.unwrap() - 2.115_302_841).abs() < 1e-5);
    assert_eq!((c.completed, c.output_tokens, c.requests), (Some(10), Some(2817), Some(11)));
    assert!((c.measured_s.unwrap() - 6.000123).abs() < 1e-5);
    assert!(!r.events.is_empty());

    let html = sm_report::html_page(&r, &[]);
    let all = body_rows(table(&html, "all"));
    assert_eq!(all.len(), 3 + 9);
    let first_decode: Vec<String> = all[3].iter().map(|c| strip_tags(c)).collect();
    assert_eq!(
        first_decode,
        [
            "Sustained decode",
            "0",
            "1",
            "Valid",
            "469.5",
            "472.7",
            "9.2 ms",
            "2.1 ms",
            "1.0",
            "10",
            "2,817",
            "6.0 s",
            // the tails the figure table heads: TTFT p90 and p99, time between tokens p90 and p99
            "9.5 ms",
            "16.5 ms",
            "2.1 ms",
            "2.3 ms",
            // judged against the default SLO from its summary figures: no goodput
            if c.slo_met == Some(true) { "yes" } else { "no" },
            "—",
            "—"
        ]
    );
    assert!(html.contains("(local time)"), "the bench JSON's timestamp has no zone");
}

#[test]
fn the_import_command_output_is_a_run_record_again() {
    let r = sm_report::load_any(&reference(LIL)).unwrap();
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("run.json"), serde_json::to_string_pretty(&r).unwrap()).unwrap();
    let again = sm_report::load_any(dir.path()).expect("a run directory");
    let (a, b) = (serde_json::to_value(&again).unwrap(), serde_json::to_value(&r).unwrap());
    assert_eq!(a, b, "JSON round trip");
    assert!(again == r, "struct round trip");
    let over: Vec<_> = r.decode.iter().filter(|c| c.status == Some(CellStatus::OverCapacity)).collect();
    assert_eq!(over.len(), 3);
    assert!(over.iter().all(|c| c.kv_need_tokens.is_some() && c.reason.as_deref().unwrap().contains("KV tokens")));
    assert_eq!(r.decode.iter().filter(|c| c.status == Some(CellStatus::Valid)).count(), 45);
}

#[test]
fn rejects_other_files_naming_the_accepted_formats() {
    for text in [r#"{"hello": "world"}"#, "[1, 2]", "not json at all", r#"{"schema": "other/2"}"#] {
        let err = sm_report::import_str(text).expect_err(text);
        let msg = err.to_string();
        for accepted in ["speedmatrix.run/1", "llm-inference-bench", "lil-bench-result/1"] {
            assert!(msg.contains(accepted), "{text}: {msg}");
        }
    }
    let dir = tempfile::tempdir().unwrap();
    assert!(matches!(sm_report::load_any(dir.path()), Err(ImportError::NoRunInDirectory { .. })));
    let err = sm_report::import_str(r#"{"schema": "lil-bench-result/1", "results": {}}"#).unwrap_err();
    assert!(err.to_string().contains("results.bench"), "{err}");
}

#[test]
fn hostile_text_is_escaped() {
    let mut r = sample();
    let evil = "<script>alert(1)</script>";
    r.server.model = evil.into();
    r.label = Some(format!("{evil} | pipe"));
    r.launch_command = Some(format!("vllm serve {evil} --port 1"));
    if let Some(c) = r.decode.iter_mut().find(|c| c.status == Some(CellStatus::Error)) {
        c.reason = Some(evil.into());
    }
    let html =
        sm_report::html_page(&r, &[("x".into(), "javascript:alert(1)".into()), ("<b>".into(), "../index.html".into())]);
    assert!(!html.contains("<script"), "raw script tag in the page");
    assert!(!html.contains("javascript:"), "unsafe link kept");
    assert!(html.contains("&lt;script&gt;alert(1)&lt;/script&gt;"));
    assert!(html.contains("<a href=\"../index.html\">&lt;b&gt;</a>"));
    let md = sm_report::markdown(&r);
    assert!(!md.lines().filter(|l| !l.starts_with("vllm serve")).any(|l| l.contains("<script")), "{md}");
    assert!(md.contains("\\| pipe"));
}

/// Text from a record reaches the page as text, in an element and in an attribute: the template
/// escapes markup and quotes, and a control character is shown as U+FFFD.
#[test]
fn record_text_is_only_text_on_the_page() {
    let mut r = sample();
    let hostile = "<script>alert(1)</script> \"quoted\" it's \u{7}bell";
    r.server.model = hostile.into();
    let cell = r.decode.iter_mut().find(|c| c.status == Some(CellStatus::Error)).expect("the sample's error cell");
    cell.reason = Some(hostile.into());
    let html = sm_report::html_page(&r, &[]);
    let shown = "&lt;script&gt;alert(1)&lt;/script&gt; &quot;quoted&quot; it's \u{FFFD}bell";
    assert!(html.contains(&format!("<dt>Served model</dt><dd>{shown}</dd>")), "the model as text");
    assert!(html.contains(&format!("title=\"{shown}\"")), "the reason as the error cell's hover");
    assert!(html.matches(shown).count() >= 3, "and as its footnote");
    assert!(!html.contains("<script") && !html.contains('\u{7}'), "nothing of it as markup or a control");
    assert_eq!(html.matches("<dd>").count(), html.matches("</dd>").count(), "no element left open");
}

#[test]
fn renders_a_speedmatrix_run_with_every_section() {
    let r = sample();
    let html = sm_report::html_page(&r, &[]);
    let mut last = 0;
    for id in [
        "<h1>",
        "<h3>Hardware",
        "<h3>Engine",
        "<h3>Run",
        "id=\"launch-command\"",
        "id=\"prefill\"",
        "id=\"sustained-decode\"",
        "id=\"all-measurements\"",
        "id=\"methodology\"",
    ] {
        let at = html.find(id).unwrap_or_else(|| panic!("section {id}"));
        assert!(at > last, "{id} out of order");
        last = at;
    }
    assert!(!html.contains("src=") && !html.contains("<script") && !html.contains("@import") && !html.contains("url("));
    let all = body_rows(table(&html, "all"));
    let valid_prefill = r.prefill.iter().filter(|p| p.status == CellStatus::Valid).count();
    assert_eq!(all.len(), r.prefill.len() + r.decode.len());
    assert!(valid_prefill > 0);
    // the record's own numbers: the 8K × 1 cell
    let cell = r.decode_cell(8192, 1).unwrap();
    let row = all
        .iter()
        .map(|r| r.iter().map(|c| strip_tags(c)).collect::<Vec<_>>())
        .find(|r| r[0] == "Sustained decode" && r[1] == "8K" && r[2] == "1")
        .unwrap();
    assert_eq!(row[4], sm_report::format::fixed1(cell.total_tok_s.unwrap()));
    assert_eq!(row[7], sm_report::format::ms1(cell.tbt_ms.p50.unwrap()));
    // the error cell's reason is both a tooltip and a footnote
    if let Some(err) = r.decode.iter().find(|c| c.status == Some(CellStatus::Error)) {
        let reason = escaped(err.reason.as_deref().unwrap());
        assert!(html.contains(&format!("title=\"{reason}\"")) && html.contains("id=\"fn-1\""), "error reason shown");
    }

    let md = sm_report::markdown(&r);
    for h in [
        "## Hardware",
        "## Engine",
        "## Run",
        "## Launch command",
        "## Prefill",
        "## Sustained decode",
        "## All measurements",
        "## Methodology",
    ] {
        assert!(md.contains(h), "{h}");
    }
    let csv = sm_report::csv(&r);
    let lines: Vec<&str> = csv.lines().collect();
    assert_eq!(lines.len(), 1 + r.prefill.len() + r.decode.len());
    assert!(lines[0].starts_with("Phase,Context,Requests at once,Status,Total tok/s"));
    assert!(lines[0].contains("ttft_ms_p99") && lines[0].contains("chunk_gap_ms_p99"));

    for width in [40, 80, 200] {
        let t = sm_report::terminal(&r, width);
        assert!(t.lines().all(|l| l.chars().count() <= width), "width {width}:\n{t}");
        assert!(t.contains("173.9"), "{t}");
    }

    let dir = tempfile::tempdir().unwrap();
    let written = sm_report::write_all(&r, dir.path()).unwrap();
    assert_eq!(written.len(), 3);
    assert!(written.iter().all(|p| p.is_file()));
}
