//! The mixed-prefill phase's section (methodology §13.3) on the page, in Markdown, on the console
//! and in `mixed_prefill.csv`: one row per probe with the figures as recorded, the level's summary,
//! the median probe's timeline as an SVG of one bar per bin; nothing of it without the phase.

use crate::common::*;
use serde_json::{Value, json};
use sm_core::record::RunRecord;

fn sample_json() -> Value {
    serde_json::from_str(&std::fs::read_to_string(data("run-sample.json")).unwrap()).unwrap()
}

fn probe(ttft: f64, bins: usize) -> Value {
    json!({"sent_s": 12.5, "ttft_ms": ttft, "prompt_tokens": 8192, "cached_tokens": 0, "slowdown": ttft / 100.0,
           "before_tok_s": 1600.0, "during_tok_s": 212.5, "after_tok_s": 1590.3, "longest_stall_ms": 43.5,
           "steady": true,
           "timeline": {"start_s": -1.0, "bin_ms": 100.0, "tokens": vec![7u64; bins], "first_token_s": ttft / 1000.0}})
}

fn with_phase() -> RunRecord {
    let mut v = sample_json();
    v["schema"] = "speedmatrix.run/1.3".into();
    v["phases"] = json!({"mixed_prefill": {"levels": [{
        "prompt_context": 8192, "background": 4, "background_context": 1024, "background_max_tokens": 512,
        "window_s": 1.0, "probes_planned": 3,
        "idle": {"ttft_ms": 100.0, "prompt_tokens": 8192, "cached_tokens": 0, "source": "measured"},
        "probes": [probe(300.0, 23), probe(250.0, 25),
                   {"sent_s": 20.0, "steady": false, "error": "not a cold prefill, \"cached\""}],
        "ttft_ms_median": 275.0, "slowdown": 2.75
    }]}});
    sm_report::import_str(&v.to_string()).expect("a valid record")
}

#[test]
fn the_page_shows_each_probe_the_summary_and_the_median_probes_timeline() {
    let record = with_phase();
    let page = sm_report::html_page(&record, &[]);
    assert!(page.contains("id=\"mixed-prefill\""));
    let rows = body_rows(table(&page, "mixed"));
    assert_eq!(rows.len(), 3, "one row per probe");
    assert_eq!(rows[0][..4], ["1", "300 ms", "3.00×", "1,600.0"]);
    assert_eq!(rows[0][4..7], ["212.5", "1,590.3", "43.5 ms"]);
    assert!(rows[2][1].contains("failed: not a cold prefill"), "{:?}", rows[2]);
    let text = unescape(&strip_tags(&page));
    assert!(text.contains("idle TTFT 100 ms · loaded TTFT median 275 ms · slowdown 2.75× · 3 of 3 probes"), "{text}");
    // 300 and 250 are as near the median 275: the first of them, with 23 bins, is drawn
    let svg_start = page.find("Background tokens per 100 ms around probe 1").expect("the timeline");
    let svg = &page[svg_start..svg_start + page[svg_start..].find("</svg>").unwrap()];
    assert_eq!(svg.matches("<rect").count(), 23, "one bar per bin");
    assert!(svg.contains(">sent<") && svg.contains(">first token<"));

    let md = sm_report::markdown(&record);
    assert!(md.contains("## A new user under load"));
    assert!(md.contains("| 2 | 250 ms | 2.50× | 1,600.0 | 212.5 | 1,590.3 | 43.5 ms | yes |"), "{md}");
    let console = sm_report::terminal(&record, 120);
    assert!(
        console.contains("probe 1: TTFT 300 ms (3.00×), background 1,600.0 → 212.5 → 1,590.3 tok/s, stall 43.5 ms"),
        "{console}"
    );
}

#[test]
fn the_csv_has_one_row_per_probe_and_no_file_without_the_phase() {
    let files = sm_report::phases::csv_files(&with_phase());
    let (name, text) = files.iter().find(|(n, _)| n == "mixed_prefill.csv").expect("the phase's file");
    assert_eq!(name, "mixed_prefill.csv");
    let rows = csv_records(text);
    assert_eq!(rows.len(), 3);
    assert_eq!(rows[0]["ttft_ms"], "300");
    assert_eq!(rows[0]["idle_ttft_ms"], "100");
    assert_eq!(rows[1]["slowdown"], "2.5");
    assert_eq!(rows[1]["probe"], "2");
    assert_eq!(rows[0]["longest_stall_ms"], "43.5");
    assert_eq!(rows[2]["ttft_ms"], "");
    assert_eq!(rows[2]["error"], "not a cold prefill, \"cached\"");
    let plain = sm_report::import_str(&sample_json().to_string()).unwrap();
    assert!(sm_report::phases::csv_files(&plain).is_empty());
    assert!(!sm_report::html_page(&plain, &[]).contains("mixed-prefill"));
}
