//! What the page says about cells and rows that have no figure, and how it
//! names and places contexts: each note once, one footnote numbering for the
//! whole page, the over-capacity reason on the page, "simulated" hardware, a
//! trimmed context's exact count beside its label, the prefill charts' log axis.

use crate::common::*;
use serde_json::{Value, json};
use sm_core::record::RunRecord;
use sm_report::view::{MEASUREMENTS_NOTE, NOT_MEASURED_NOTE, OVER_CAPACITY_NOTE, TTFT_NOTE};

fn sample_json() -> Value {
    serde_json::from_str(&std::fs::read_to_string(data("run-sample.json")).unwrap()).unwrap()
}

fn record(v: Value) -> RunRecord {
    sm_report::import_str(&v.to_string()).expect("a valid record")
}

/// The sample (an error cell and an over-capacity cell at 128K) with its 8K prefill row failed.
fn with_failed_prefill() -> RunRecord {
    let mut v = sample_json();
    let row = v["prefill"].as_array_mut().unwrap().iter_mut().find(|p| p["context"] == 8192).unwrap();
    for f in ["prompt_tok_s", "ttft_ms"] {
        row[f] = Value::Null;
    }
    row["status"] = "error".into();
    row["reason"] = "HTTP 503 from the server".into();
    record(v)
}

const KV_REASON: &str = "needs 17,301,504 KV tokens, the server has 12,582,912";

#[test]
fn every_note_is_printed_once() {
    let r = with_failed_prefill();
    let html = strip_tags(&sm_report::html_page(&r, &[]));
    let md = md_text(&sm_report::markdown(&r));
    for note in [TTFT_NOTE, MEASUREMENTS_NOTE, OVER_CAPACITY_NOTE] {
        assert_eq!(html.matches(note).count(), 1, "HTML: {note}");
        assert_eq!(md.matches(note).count(), 1, "Markdown: {note}\n{md}");
    }
    assert!(!html.contains(NOT_MEASURED_NOTE), "every planned cell was measured");
}

#[test]
fn footnotes_are_numbered_once_over_the_whole_page() {
    let r = with_failed_prefill();
    let page = sm_report::view::build(&r);
    assert_eq!(
        page.footnotes,
        [
            "Prefill 8K: HTTP 503 from the server".to_string(),
            format!("128K × 64: {}", r.decode_cell(131_072, 64).unwrap().reason.clone().unwrap()),
            format!("128K × 128: over capacity, {KV_REASON}"),
        ]
    );
    let html = sm_report::html_page(&r, &[]);
    for n in 1..=3 {
        assert_eq!(html.matches(&format!("id=\"fn-{n}\"")).count(), 1, "footnote {n} in the HTML");
        assert_eq!(html.matches(&format!("href=\"#fn-{n}\"")).count(), 1, "one reference to footnote {n}");
    }
    let md = md_text(&sm_report::markdown(&r));
    for n in 1..=3 {
        assert_eq!(md.lines().filter(|l| l.starts_with(&format!("{n}. "))).count(), 1, "footnote {n}:\n{md}");
    }
    assert!(md.contains("| 8K | 8,192 | Error [1] |"), "{md}");
    assert!(md.contains("Error [2]") && md.contains("Over capacity [3]"), "{md}");
    let term = sm_report::terminal(&r, 120);
    for n in 1..=3 {
        assert_eq!(term.lines().filter(|l| l.starts_with(&format!("[{n}] "))).count(), 1, "[{n}]:\n{term}");
    }
}

#[test]
fn an_over_capacity_cell_says_why_on_the_page() {
    let r = record(sample_json());
    // the visible text, not only a tooltip
    let html = strip_tags(&sm_report::html_page(&r, &[]));
    assert!(html.contains(&format!("128K × 128: over capacity, {KV_REASON}")), "HTML");
    let md = md_text(&sm_report::markdown(&r));
    assert!(md.contains(&format!("128K × 128: over capacity, {KV_REASON}")), "{md}");
    let term = sm_report::terminal(&r, 120);
    assert!(term.contains("over cap [2]") && term.contains(KV_REASON), "{term}");
}

fn hardware_card(r: &RunRecord) -> Vec<(String, String)> {
    sm_report::view::build(r).hardware
}

#[test]
fn the_simulated_engine_has_simulated_hardware() {
    let mut v = sample_json();
    v["launch_command"] = "speedmatrix sim --profile seed-ling-3.0-flash-h200nvl-x2".into();
    v["hardware"] = json!({ "os": "linux", "gpus": [], "gpu_count": 0 });
    let card = hardware_card(&record(v.clone()));
    let value = |k: &str| card.iter().find(|(key, _)| key == k).map(|(_, v)| v.as_str()).unwrap();
    for k in ["Type", "GPU", "GPU count", "VRAM"] {
        assert_eq!(value(k), "simulated", "{k}");
    }
    assert_eq!(value("OS"), "linux");
    // a real server whose hardware is not known stays unknown
    v["launch_command"] = "vllm serve m".into();
    let card = hardware_card(&record(v));
    assert!(card.iter().filter(|(k, _)| k != "OS").all(|(_, v)| v == "unknown"), "{card:?}");
}

/// The simulated engine is known by the profile `run` records in `server.extra`, whatever the
/// launch command says (it is free text, and a label or a redaction may change it).
#[test]
fn the_simulated_engine_is_known_by_its_recorded_profile() {
    let mut v = sample_json();
    v["launch_command"] = serde_json::Value::Null;
    v["server"]["extra"]["sim_profile"] = "tiny".into();
    v["hardware"] = json!({ "os": "linux", "gpus": [], "gpu_count": 0 });
    let card = hardware_card(&record(v));
    let value = |k: &str| card.iter().find(|(key, _)| key == k).map(|(_, v)| v.as_str()).unwrap();
    assert_eq!(value("GPU"), "simulated");
}

/// The sample as a run measured today: the scout-only row at the model's maximum asked for
/// 256K and named so in the plan, and a decode row asked for as 256K, trimmed to 257,984.
fn named_by_request() -> RunRecord {
    let mut v = sample_json();
    for list in ["plan", "prefill"] {
        for p in v[list].as_array_mut().unwrap().iter_mut().filter(|p| p["context"] == 262_079) {
            p["label"] = "256K".into();
        }
    }
    let mut cell = v["decode"].as_array().unwrap().iter().find(|c| c["context"] == 8192).unwrap().clone();
    cell["context"] = 257_984.into();
    cell["label"] = "256K".into();
    cell["concurrency"] = 1.into();
    v["decode"].as_array_mut().unwrap().retain(|c| c["context"] != 257_984);
    v["decode"].as_array_mut().unwrap().push(cell);
    record(v)
}

#[test]
fn a_trimmed_context_keeps_its_name_and_shows_its_count() {
    let r = named_by_request();
    let page = sm_report::view::build(&r);
    let prefill: Vec<&str> = page.prefill.iter().map(|p| p.label.as_str()).collect();
    assert_eq!(prefill, ["8K", "128K", "256K (262,079)"]);
    assert!(page.matrix.rows.iter().any(|(ctx, l)| *ctx == 257_984 && l == "256K (257,984)"), "{:?}", page.matrix.rows);
    let html = sm_report::html_page(&r, &[]);
    assert!(html.contains("<th class=\"ctx\" scope=\"row\">256K (257,984)</th>"));
    let md = md_text(&sm_report::markdown(&r));
    assert!(md.contains("| 256K (262,079) | ") && md.contains("| 256K (257,984) | "), "{md}");
    let csv = csv_records(&sm_report::csv(&r));
    let at = |tokens: &str| csv.iter().find(|row| row["context_tokens"] == tokens).unwrap()["Context"].clone();
    assert_eq!((at("262079"), at("257984")), ("256K (262,079)".to_string(), "256K (257,984)".to_string()));
    // a label that says its count exactly stands alone
    assert!(csv.iter().any(|row| row["context_tokens"] == "8192" && row["Context"] == "8K"));
}

/// The x of every point of the chart titled `title`.
fn point_xs(html: &str, title: &str) -> Vec<f64> {
    let start = html.find(&format!("aria-label=\"{title}\"")).unwrap_or_else(|| panic!("chart {title}"));
    let svg = &html[start..start + html[start..].find("</svg>").unwrap()];
    svg.split("<circle")
        .skip(1)
        .map(|c| c.split("cx=\"").nth(1).unwrap().split('"').next().unwrap().parse().unwrap())
        .collect()
}

#[test]
fn prefill_charts_place_contexts_on_a_log_axis() {
    // contexts 8K, 128K and 262,079: four doublings, then one
    let html = sm_report::html_page(&record(sample_json()), &[]);
    for title in ["Prompt tok/s by context", "TTFT by context (cold prompt)"] {
        let x = point_xs(&html, title);
        assert_eq!(x.len(), 3, "{title}");
        let ratio = (x[1] - x[0]) / (x[2] - x[1]);
        let doublings = (131_072f64 / 8192.0).log2() / (262_079f64 / 131_072.0).log2();
        assert!((ratio - doublings).abs() < 0.05, "{title}: {x:?}");
    }
}
