//! The burst phase's section (methodology §13.2) on the page, in Markdown, on the console and in
//! `burst.csv`: a measured phase (rounds summarised as medians, an over-capacity cell, a failed
//! burst whose reason is escaped) and a reference-tool file's Burst/E2E matrix, whose missing
//! figures show as missing.

use crate::common::*;
use sm_core::phases::burst::{Burst, BurstPhase};
use sm_core::record::{CellStatus, Percentiles, RunRecord};

fn measured() -> RunRecord {
    let mut r: RunRecord = serde_json::from_str(&std::fs::read_to_string(data("run-sample.json")).unwrap()).unwrap();
    let b = |c: u32, round: u32, e2e: f64| Burst {
        context: Some(1024),
        label: "1K".into(),
        concurrency: c,
        round,
        status: CellStatus::Valid,
        requests: u64::from(c),
        completed: u64::from(c),
        e2e_ms: Percentiles::p50_p90_max(e2e, e2e * 1.2, e2e * 1.5),
        last_completion_ms: Some(e2e * 1.5),
        ttft_ms: Percentiles::median(12.0),
        output_tokens: Some(64 * u64::from(c)),
        total_tok_s: Some(64.0 * f64::from(c) / (e2e * 1.5 / 1000.0)),
        send_spread_ms: Some(0.4),
        ..Burst::default()
    };
    let failed = Burst {
        context: Some(8192),
        label: "8K".into(),
        concurrency: 2,
        requests: 2,
        completed: 1,
        failed: 1,
        reason: Some("1 of 2 requests failed; the first: <script>x</script>".into()),
        e2e_ms: Percentiles::median(900.0),
        ..Burst::default()
    };
    let over = Burst {
        context: Some(8192),
        label: "8K".into(),
        concurrency: 8,
        status: CellStatus::OverCapacity,
        reason: Some("needs 66,048 KV tokens".into()),
        ..Burst::default()
    };
    let bursts = vec![b(2, 1, 100.0), b(2, 2, 300.0), b(2, 3, 200.0), b(8, 1, 400.0), failed, over];
    r.phases.burst = Some(BurstPhase { max_tokens: 64, ignore_eos: false, rounds: 3, imported_from: None, bursts });
    r
}

#[test]
fn a_measured_phase_shows_the_median_of_its_rounds_and_what_did_not_run() {
    let r = measured();
    let page = sm_report::html_page(&r, &[]);
    let section = &page[page.find("<h2 id=\"bursts\">").expect("the section")..];
    assert!(
        section.contains("the median of 3 rounds") && section.contains("each ending on its own, at most 64 tokens"),
        "{section}"
    );
    // 1K × 2: rounds of 100, 300 and 200 ms → the median 200 ms, last 300 ms
    assert!(section.contains("p50 200 ms") && section.contains("last 300 ms"), "{section}");
    assert!(section.contains("over capacity") && section.contains("needs 66,048 KV tokens"));
    assert!(section.contains("1K context, 2 at once: 6 of 6 completed") && section.contains("the median of 3 rounds"));
    assert!(section.contains("&lt;script&gt;") && !section.contains("<script>x"), "reasons are escaped");
    let md = sm_report::markdown(&r);
    let md = &md[md.find("## Bursts").expect("Markdown section")..];
    let row = md.lines().find(|l| l.starts_with("| 1K |")).unwrap();
    assert!(row.contains("p50 200 ms / last 300 ms / 426.7 tok/s"), "{row}");
    assert!(md.lines().any(|l| l.starts_with("| 8K |") && l.contains("over capacity") && l.contains("error:")), "{md}");
    let console = sm_report::terminal(&r, 100);
    assert!(
        console.contains("Bursts (context × requests at once)") && console.contains("1K       × 2    p50 200 ms"),
        "{console}"
    );
    assert!(console.lines().all(|l| l.chars().count() <= 100));

    let files = sm_report::phases::csv_files(&r);
    let (name, csv) = files.iter().find(|(n, _)| n == "burst.csv").expect("burst.csv");
    assert_eq!(name, "burst.csv");
    let lines: Vec<&str> = csv.lines().collect();
    assert_eq!(lines.len(), 1 + 6, "a header and one row per burst sent, every round:\n{csv}");
    assert!(lines[0].starts_with("context_tokens,label,concurrency,round,status,reason,requests"));
    assert!(lines[1].starts_with("1024,1K,2,1,valid,,2,2,0,,100,120,150,150,12,"), "{}", lines[1]);
    assert!(lines[6].starts_with("8192,8K,8,1,over_capacity,\"needs 66,048 KV tokens\",0,0,0,"), "{}", lines[6]);
}

#[test]
fn a_reference_file_with_a_burst_matrix_shows_it_with_missing_figures_missing() {
    let r = sm_report::load_any(&bench("burst-0.7.0.json")).expect("import");
    let p = r.phases.burst.as_ref().expect("the file's Burst/E2E matrix");
    assert!(p.imported_from.as_deref().is_some_and(|f| f.contains("llm-inference-bench 0.7.0")), "{p:?}");
    assert_eq!(p.bursts.len(), 2);
    let one = &p.bursts[0];
    assert_eq!((one.context, one.concurrency, one.requests, one.completed), (Some(16384), 1, 5, 5));
    assert_eq!((one.e2e_ms.p50, one.e2e_ms.max, one.ttft_ms.max), (Some(6000.0), Some(7000.0), Some(90.0)));
    assert_eq!((one.last_completion_ms, one.total_tok_s, one.send_spread_ms), (Some(25_000.0), Some(40.0), None));
    let four = &p.bursts[1];
    assert_eq!((four.e2e_ms.max, four.ttft_ms.max), (None, None), "no samples in the file: no maximum");
    let page = sm_report::html_page(&r, &[]);
    let section = &page[page.find("<h2 id=\"bursts\">").expect("the section")..];
    assert!(section.contains("figures the file does not have are shown as —"), "{section}");
    assert!(section.contains("p50 7,500 ms") && section.contains("120.0 tok/s"), "{section}");
    // the file without a burst matrix has no section
    assert_eq!(r.decode.len(), 2, "the burst cells are not decode cells");
    let plain = sm_report::load_any(&bench("bench-0.5.3.json")).unwrap();
    assert!(plain.phases.burst.is_none());
    assert!(!sm_report::html_page(&plain, &[]).contains("id=\"bursts\""));
}
