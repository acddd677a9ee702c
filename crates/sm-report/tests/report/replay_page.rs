//! What the page, the Markdown, the console and `replay.csv` show of a replay phase (methodology
//! §13.5): the trace, a row per time scale with the rate table's figures, the prefix cache and
//! the SLO verdict, and the capacity answer on the trace heading the page after the matrix's.

use sm_core::record::RunRecord;

use crate::common::*;

/// The sample run with a replay of five scales (two searched, one skipped) and its answer,
/// judged on import against the default SLO (so the decode matrix has its answer too).
fn with_replay() -> RunRecord {
    sm_report::import_str(&std::fs::read_to_string(data("run-replay.json")).unwrap()).expect("a valid record")
}

const ANSWER: &str = "Serves this traffic at up to 2× its recorded rate (8.00 req/s) at ≥ 20 tok/s each (p10), TTFT \
p90 ≤ 2 s — limited by TTFT p90 <b>&amp; at 3× (not converged: the answer lies between 2× and 3×, wider than the \
search's ±5 %).";

#[test]
fn the_page_heads_with_both_answers_and_has_a_row_per_scale() {
    let r = with_replay();
    let html = sm_report::html_page(&r, &[]);
    let matrix = html.find("id=\"capacity\"").expect("the matrix's answer");
    let replay = html.find("id=\"replay-capacity\"").expect("the replay's answer");
    let facts = html.find("class=\"facts\"").unwrap();
    assert!(matrix < replay && replay < facts, "the matrix's answer first, both before the facts");
    assert!(html.contains(&escaped(ANSWER)), "{html}");
    assert!(!html.contains("<b>&amp;") && !html.contains("conv<script>"), "the record's text is escaped");
    let replay = table(&html, "rate replay");
    assert_eq!(replay.matches("<tr class=\"saturated\">").count(), 2, "the saturated scales stand out");
    let rows = body_rows(&replay.replace("<tr class=\"saturated\">", "<tr>"));
    let text: Vec<Vec<String>> = rows.iter().map(|r| r.iter().map(|c| strip_tags(c)).collect()).collect();
    let scales: Vec<&str> = text.iter().map(|r| r[0].as_str()).collect();
    assert_eq!(scales, ["1×", "2× (searched)", "3× (searched)", "4×", "8×"]);
    assert_eq!(text[1][..4], ["2× (searched)", "8.00", "100 of 100", "7.80"]);
    assert_eq!(text[2][text[2].len() - 2..], ["no: TTFT p90 <b>&amp;", "saturated"]);
    assert_eq!(text[4].last().unwrap(), "not run: the server was already saturated");
    assert!(html.contains("<h2>Your traffic (replay)</h2>"));
    assert!(strip_tags(&html).contains("Trace conv<script>|x.jsonl (mooncake, 512 tokens a block): 1,200 requests"));
}

#[test]
fn the_markdown_and_the_console_carry_the_answer_and_the_rows() {
    let r = with_replay();
    let md = sm_report::markdown(&r);
    let (matrix, replay) = (md.find("## Capacity\n").unwrap(), md.find("## Capacity on your traffic").unwrap());
    assert!(matrix < replay && replay < md.find("## Hardware").unwrap(), "{md}");
    assert!(md_text(&md).contains(&ANSWER.replace("<b>&amp;", "&lt;b&gt;&amp;amp;")), "{md}");
    assert!(md.contains("| 1× | 4.00 | 100 of 100 |") && md.contains("| 8× | 32.00 | — |"), "{md}");
    assert!(md.contains("conv&lt;script&gt;\\|x.jsonl"), "escaped in a table's text: {md}");
    let console = sm_report::capacity_text(&r, 300);
    assert!(console.contains("Capacity on your traffic\nServes this traffic at up to 2×"), "{console}");
    let printed = sm_report::terminal(&r, 300);
    assert!(printed.contains("2× (searched) 8.00 req/s: achieved 7.80 req/s (100 of 100 completed)"), "{printed}");
}

#[test]
fn a_replay_alone_still_heads_its_page_with_its_answer() {
    let mut r = with_replay();
    r.settings.matrix = false;
    let html = sm_report::html_page(&r, &[]);
    assert!(!html.contains("id=\"capacity\"") && html.contains("id=\"replay-capacity\""));
    assert!(strip_tags(&html).contains("Service level (SLO): tok_s_p10>=20,ttft_p90<=2s"), "the SLO used");
    assert!(sm_report::markdown(&r).contains("## Capacity on your traffic"));
}

#[test]
fn replay_csv_has_a_row_per_level() {
    let r = with_replay();
    let files = sm_report::phases::csv_files(&r);
    let (_, text) = files.iter().find(|(name, _)| name == "replay.csv").expect("replay.csv");
    let rows = csv_records(text);
    assert_eq!(rows.len(), 5, "in the order the levels ran");
    let scales: Vec<&str> = rows.iter().map(|r| r["time_scale"].as_str()).collect();
    assert_eq!(scales, ["1", "4", "8", "2", "3"]);
    assert_eq!((rows[3]["searched"].as_str(), rows[3]["rate_rps"].as_str()), ("true", "8"));
    assert_eq!((rows[1]["slo_met"].as_str(), rows[1]["limited_by"].as_str()), ("false", "TTFT p90 <b>&amp;"));
    let p = &rows[0];
    let prefix = [&p["prompt_tokens"], &p["cached_tokens"], &p["ideal_tokens"], &p["reached_pct"]];
    assert_eq!(prefix, ["40000", "10000", "12500", "80"]);
    assert_eq!((rows[2]["status"].as_str(), rows[2]["reached_pct"].as_str()), ("skipped", ""));
    assert!(rows[0].contains_key("ttft_ms_p99") && rows[0].contains_key("saturation") && rows[0].contains_key("note"));
}
