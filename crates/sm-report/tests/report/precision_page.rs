//! What the page, the Markdown and the CSV show of a record's precision (schema 1.2, methodology
//! §12): `±` on the figures of the All-measurements table with the interval in a hover, the
//! matrix's hover, the Precision and Repeats columns with their legend; and nothing of it for a
//! record written before 1.2.

use crate::common::*;
use serde_json::{Value, json};
use sm_core::record::RunRecord;
use sm_report::view::precision::{DISAGREE_NOTE, PM_NOTE, PRECISION, REPEATS, REPEATS_NOTE};

fn sample_json() -> Value {
    serde_json::from_str(&std::fs::read_to_string(data("run-sample.json")).unwrap()).unwrap()
}

fn record(v: Value) -> RunRecord {
    sm_report::import_str(&v.to_string()).expect("a valid record")
}

fn cell_mut(v: &mut Value, ctx: u64, c: u64) -> &mut Value {
    v["decode"].as_array_mut().unwrap().iter_mut().find(|d| d["context"] == ctx && d["concurrency"] == c).unwrap()
}

fn repeat(total: f64) -> Value {
    json!({"total_tok_s": total, "per_request_tok_s": total, "ttft_ms_p50": 60.0, "ttft_ms_p90": 61.0,
           "tbt_ms_p50": 5.7, "tbt_ms_p99": 5.8, "measured_s": 12.0})
}

/// The sample as a 1.2 run with `--precision 1% --repeats 3`: 8K × 1 reached the precision and its
/// repeats agree, 8K × 64 did not and its repeats disagree; the error cell keeps its partial
/// intervals, which the page must not show.
fn precise() -> RunRecord {
    let mut v = sample_json();
    v["schema"] = "speedmatrix.run/1.2".into();
    v["settings"]["precision_pct"] = 1.0.into();
    v["settings"]["repeats"] = 3.into();
    let c = cell_mut(&mut v, 8192, 1);
    c["ci"] = json!({
        "total_tok_s": {"lo": 172.15, "hi": 175.6}, "per_request_tok_s": {"lo": 173.0, "hi": 176.0},
        "ttft_ms_p50": {"lo": 59.0, "hi": 62.45}, "tbt_ms_p50": {"lo": 5.70, "hi": 5.76}
    });
    c["precision_met"] = true.into();
    c["repeats"] = json!([repeat(172.5), repeat(173.9), repeat(175.3)]);
    c["repeats_agree"] = true.into();
    c["phases"] = json!({"before_s": 1.0, "ramp_s": 2.0, "window_s": 12.0, "after_s": 0.5});
    let c = cell_mut(&mut v, 8192, 64);
    c["ci"] = json!({"total_tok_s": {"lo": 4029.4, "hi": 4429.4}});
    c["precision_met"] = false.into();
    c["repeats"] = json!([repeat(3900.0), repeat(4200.0), repeat(4588.2)]);
    c["repeats_agree"] = false.into();
    let c = cell_mut(&mut v, 131072, 64);
    c["total_tok_s"] = 777.7.into();
    c["ci"] = json!({"total_tok_s": {"lo": 770.0, "hi": 780.0}});
    c["precision_met"] = false.into();
    record(v)
}

/// The All-measurements row of `ctx_label` × `c`, as the raw HTML of its cells, and the header.
fn all_row(html: &str, ctx_label: &str, c: &str) -> (Vec<String>, Vec<String>) {
    let t = table(html, "all");
    let head = &t[..t.find("<tbody>").unwrap()];
    let header: Vec<String> =
        head.split("<th scope=\"col\">").skip(1).map(|h| strip_tags(h.split("</th>").next().unwrap())).collect();
    let row = body_rows(t)
        .into_iter()
        .find(|r| r[0] == "Sustained decode" && r[1] == ctx_label && r[2] == c)
        .unwrap_or_else(|| panic!("no row {ctx_label} × {c}"));
    (header, row)
}

fn col(header: &[String], name: &str) -> usize {
    header.iter().position(|h| h == name).unwrap_or_else(|| panic!("no column {name} in {header:?}"))
}

#[test]
fn the_full_table_shows_each_figure_with_its_interval_and_the_marks() {
    let html = sm_report::html_page(&precise(), &[]);
    let (header, row) = all_row(&html, "8K", "1");
    // the published columns keep their names; the precision columns come last, after the SLO's
    assert_eq!(&header[..12], sm_report::view::COLUMNS.map(String::from).as_slice());
    assert_eq!(&header[header.len() - 2..], [PRECISION, REPEATS]);
    let text: Vec<String> = row.iter().map(|c| strip_tags(c)).collect();
    // the larger side of each interval, rounded up in the figure's own format
    assert_eq!(text[col(&header, "Total tok/s")], "173.9 ± 1.8");
    assert_eq!(text[col(&header, "Per request tok/s")], "174.5 ± 1.5");
    assert_eq!(text[col(&header, "TTFT")], "60 ± 2.4 ms");
    assert_eq!(text[col(&header, "Time between tokens")], "5.7 ± 0.1 ms");
    assert_eq!(text[col(&header, "Average active requests")], "1.0", "a figure without an interval is as before");
    assert_eq!(text[col(&header, PRECISION)], "✓");
    assert_eq!(text[col(&header, REPEATS)], "3: 172.5–175.3");
    // the hover gives the interval itself, never narrower than the record's
    let page = unescape(&html);
    assert!(page.contains("title=\"95 % confidence interval 172.1–175.6\">173.9 ± 1.8</td>"), "{}", row[4]);

    let (_, row) = all_row(&html, "8K", "64");
    let text: Vec<String> = row.iter().map(|c| strip_tags(c)).collect();
    assert!(text[4].ends_with("± 200.0"), "{}", text[4]);
    assert_eq!(text[5], row[5], "no interval, no ±: {}", text[5]);
    assert_eq!(text[col(&header, PRECISION)], "✗");
    assert_eq!(text[col(&header, REPEATS)], "⚠ 3: 3,900.0–4,588.2");
    // the class comes from the mark's kind, not its glyph: a missed precision and disagreeing
    // repeats are flagged, a met one is not
    let page = unescape(&html);
    assert!(page.contains("<td class=\"flag\">✗</td>"), "{page}");
    assert!(page.contains("<td class=\"flag\">⚠ 3: 3,900.0–4,588.2</td>"), "{page}");
    assert!(!page.contains("<td class=\"flag\">✓") && page.contains("<td>✓</td>"), "{page}");

    // a cell that is not valid shows no interval and no marks, whatever the record holds
    let (_, row) = all_row(&html, "128K", "64");
    let text: Vec<String> = row.iter().map(|c| strip_tags(c)).collect();
    assert!(!text.iter().any(|t| t.contains('±') || t.contains("777.7")), "{text:?}");
    assert_eq!((text[col(&header, PRECISION)].as_str(), text[col(&header, REPEATS)].as_str()), ("—", "—"));

    // the legend, once each, for the marks shown
    let plain = strip_tags(&html);
    for note in [PM_NOTE, REPEATS_NOTE, DISAGREE_NOTE] {
        assert_eq!(plain.matches(note).count(), 1, "{note}");
    }
    assert!(plain.contains("were within ±1 % (--precision)") && plain.contains("longest window (30 s)"), "{plain}");
}

#[test]
fn the_matrix_keeps_its_face_and_hovers_the_intervals() {
    let r = precise();
    let html = sm_report::html_page(&r, &[]);
    let m = table(&html, "matrix");
    let cells = body_rows(m);
    let shown: Vec<String> = cells.iter().flatten().map(|c| strip_tags(c)).collect();
    assert!(!shown.iter().any(|c| c.contains('±')), "no intervals on the matrix's face: {shown:?}");
    let tip = |needle: &str| -> String {
        let start = m.find(needle).unwrap_or_else(|| panic!("no cell {needle}"));
        let open = m[..start].rfind("<td").unwrap();
        let title = &m[open..][m[open..].find("title=\"").unwrap() + 7..];
        unescape(&title[..title.find('"').unwrap()])
    };
    let one = tip(">173.9<");
    assert!(one.starts_with("8K context, 1 at once: 173.9 ± 1.8 tok/s total, 174.5 ± 1.5 per request"), "{one}");
    assert!(one.contains("TTFT p50 60 ± 2.4 ms, TBT p50 5.7 ± 0.1 ms"), "{one}");
    assert!(one.contains("reached the precision") && one.contains("repeats: 3: 172.5–175.3"), "{one}");
    assert!(!one.contains('⚠'), "{one}");
    let many = tip(">4,229.4<");
    assert!(many.contains("did not reach the precision") && many.contains("⚠ the repeats disagree"), "{many}");
    // repeats that disagree wear the warning mark
    let start = m.find(">4,229.4").unwrap();
    assert!(m[start..start + 120].contains("class=\"warn\""), "{}", &m[start..start + 120]);
    assert!(strip_tags(&html).contains("hover a cell for its figures with their 95 % intervals"));
}

#[test]
fn a_record_before_1_2_shows_nothing_new() {
    let r = record(sample_json());
    let html = sm_report::html_page(&r, &[]);
    let plain = strip_tags(&html);
    assert!(!plain.contains('±') && !plain.contains("confidence interval"), "no intervals");
    for note in [PM_NOTE, REPEATS_NOTE, DISAGREE_NOTE] {
        assert!(!plain.contains(note), "{note}");
    }
    let (header, row) = all_row(&html, "8K", "1");
    assert!(!header.iter().any(|h| h == PRECISION || h == REPEATS), "{header:?}");
    assert_eq!(row.iter().map(|c| strip_tags(c)).collect::<Vec<_>>()[4], "173.9");
    assert!(!html.contains("class=\"pm\""));
    let md = md_text(&sm_report::markdown(&r));
    assert!(!md.contains('±') && !md.contains("| Precision"), "{md}");
}

#[test]
fn markdown_has_the_same_intervals_and_marks() {
    let md = md_text(&sm_report::markdown(&precise()));
    let all = &md[md.find("## All measurements").unwrap()..];
    let header = all.lines().find(|l| l.starts_with("| Phase")).unwrap();
    assert!(header.ends_with("| Precision | Repeats |"), "{header}");
    let row = all.lines().find(|l| l.starts_with("| Sustained decode | 8K | 1 |")).unwrap();
    for want in ["| 173.9 ± 1.8 |", "| 60 ± 2.4 ms |", "| 5.7 ± 0.1 ms |", "| ✓ | 3: 172.5–175.3 |"] {
        assert!(row.contains(want), "{want} in {row}");
    }
    let row = all.lines().find(|l| l.starts_with("| Sustained decode | 8K | 64 |")).unwrap();
    assert!(row.ends_with("| ✗ | ⚠ 3: 3,900.0–4,588.2 |"), "{row}");
    for note in [PM_NOTE, REPEATS_NOTE, DISAGREE_NOTE] {
        assert_eq!(all.matches(note).count(), 1, "{note}");
    }
}

#[test]
fn the_csv_has_the_intervals_and_leaves_them_out_of_a_cell_that_is_not_valid() {
    let rows = csv_records(&sm_report::csv(&precise()));
    let find = |ctx: &str, c: &str| {
        rows.iter()
            .find(|r| r["Phase"] == "Sustained decode" && r["context_tokens"] == ctx && r["concurrency"] == c)
            .unwrap()
    };
    let r = find("8192", "1");
    assert_eq!((r["ci_total_tok_s_lo"].as_str(), r["ci_total_tok_s_hi"].as_str()), ("172.15", "175.6"));
    assert_eq!((r["ci_ttft_ms_p90_lo"].as_str(), r["ci_ttft_ms_p90_hi"].as_str()), ("", ""));
    assert_eq!(
        (r["precision_met"].as_str(), r["repeats"].as_str(), r["repeats_agree"].as_str()),
        ("true", "3", "true")
    );
    assert_eq!((r["phases_ramp_s"].as_str(), r["phases_window_s"].as_str()), ("2", "12"));
    assert_eq!(r["Total tok/s"], "173.9", "the page's columns stay the published ones");
    let r = find("8192", "64");
    assert_eq!((r["precision_met"].as_str(), r["repeats_agree"].as_str()), ("false", "false"));
    let r = find("131072", "64");
    assert_eq!((r["status"].as_str(), r["ci_total_tok_s_lo"].as_str(), r["precision_met"].as_str()), ("error", "", ""));
    let old = csv_records(&sm_report::csv(&record(sample_json())));
    assert!(old.iter().all(|r| r["ci_total_tok_s_lo"].is_empty() && r["repeats"].is_empty()));
}

#[test]
fn the_console_marks_cells_short_of_their_precision_and_repeats_that_disagree() {
    let text = sm_report::terminal(&precise(), 120);
    let row = text.lines().find(|l| l.starts_with("8K ")).unwrap();
    // after the SLO's marks (this record is judged against the default SLO)
    assert!(row.contains("173.9 ✓ "), "{row}");
    assert!(row.contains("4,229.4 ✓~⚠ "), "{row}");
    assert!(text.contains("~ did not reach --precision") && text.contains("⚠ its repeats disagree"), "{text}");
    let old = sm_report::terminal(&record(sample_json()), 120);
    assert!(!old.contains('~') && !old.contains('⚠') && !old.contains("precision"), "{old}");
}
