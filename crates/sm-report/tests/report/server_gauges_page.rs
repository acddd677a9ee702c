//! The server's gauges per cell (methodology §14.1) on the page, in the Markdown and the CSV: only
//! cells that carry them show them, and a run without them shows nothing of them.

use crate::common::*;
use sm_core::record::{CellStatus, RunRecord};
use sm_core::server_metrics::{ServerMetrics, ServerPoint};

fn gauges() -> ServerMetrics {
    let p = |t_s, running, kv| ServerPoint { t_s, running, waiting: 0.0, kv_usage: Some(kv) };
    ServerMetrics {
        interval_s: 1.0,
        scrapes: 4,
        span_s: 3.0,
        series: vec![p(0.0, 8.0, 0.2), p(1.0, 8.0, 0.25), p(2.0, 7.0, 0.3), p(3.0, 8.0, 0.35)],
        running_mean: 7.75,
        kv_usage_max: Some(0.35),
        preemptions: Some(2),
        server_tok_s: Some(1234.5),
        tok_s_diff_pct: Some(-3.1),
        ..ServerMetrics::default()
    }
}

#[test]
fn a_cell_with_the_servers_gauges_shows_them_and_others_do_not() {
    let mut record: RunRecord = sm_report::load_any(&data("run-sample.json")).unwrap();
    let plain_html = sm_report::html_page(&record, &[]);
    assert!(!plain_html.contains("server-gauges"), "no gauges, no section");
    assert!(!sm_report::markdown(&record).contains("gauges per cell"));

    let cell = record.decode.iter_mut().find(|c| c.status() == CellStatus::Valid).unwrap();
    cell.server_metrics = Some(gauges());
    let name = format!("{} × {}", cell.label, cell.concurrency);
    let html = sm_report::html_page(&record, &[]);
    let section = &html[html.find("class=\"server-gauges\"").expect("section")..];
    // up to the next section (the frontier's chart follows)
    let section = &section[..section.find("<h2").unwrap_or(section.len())];
    let summary = format!(
        "<details><summary>{name}: server 1234.5 tok/s (-3.1 % vs measured), 7.8 running, 0 waiting at most, KV cache up to 35 %, 2 preemptions</summary>"
    );
    assert!(section.contains(&summary), "{section}");
    assert_eq!(section.matches("<svg").count(), 2, "running/waiting and KV usage");
    assert_eq!(section.matches("<details>").count(), 1, "one cell");

    let md = md_text(&sm_report::markdown(&record));
    assert!(md.contains(&format!("{name}: server 1234.5 tok/s (-3.1 % vs measured)")), "{md}");
    let rows = csv_records(&sm_report::csv(&record));
    let row = rows.iter().find(|r| !r["server_metrics_server_tok_s"].is_empty()).expect("a row with the figure");
    assert_eq!(
        (row["server_metrics_tok_s_diff_pct"].as_str(), row["server_metrics_preemptions"].as_str()),
        ("-3.1", "2")
    );
    assert_eq!(rows.iter().filter(|r| !r["server_metrics_scrapes"].is_empty()).count(), 1);
}

/// Every id on a page is unique (the server's charts were once `chart-requests-at-the-server`
/// once per cell), the cells' gauges are listed in the matrix's order, a change that rounds to
/// nothing is not "-0.0", and a span's line says "server" once.
#[test]
fn ids_are_unique_gauges_come_in_matrix_order_and_no_figure_reads_minus_zero() {
    let mut record: RunRecord = sm_report::load_any(&data("run-sample.json")).unwrap();
    let mut tiny = gauges();
    tiny.tok_s_diff_pct = Some(-0.04);
    for cell in record.decode.iter_mut().filter(|c| c.status() == CellStatus::Valid) {
        cell.server_metrics = Some(tiny.clone());
    }
    for row in record.prefill.iter_mut() {
        row.telemetry.server_metrics = Some(tiny.clone());
    }
    // measured column-first, as a run measures them
    record.decode.sort_by_key(|c| (c.concurrency, c.context));
    let html = sm_report::html_page(&record, &[]);
    let ids = element_ids(&html);
    assert!(ids.len() > 5, "{ids:?}");
    let mut seen = std::collections::HashSet::new();
    for id in &ids {
        assert!(seen.insert(id), "the id {id:?} is on the page twice");
    }
    let md = md_text(&sm_report::markdown(&record));
    assert!(!md.contains("-0.0") && !html.contains("-0.0 %"), "{md}");
    assert!(md.contains("(0.0 % vs measured)"), "{md}");
    assert!(!md.contains("server: server") && !html.contains("server: server"), "{md}");
    let listed: Vec<(u64, u32)> = record
        .decode
        .iter()
        .filter(|c| c.status() == CellStatus::Valid)
        .map(|c| (c.context, c.concurrency))
        .collect::<std::collections::BTreeSet<_>>()
        .into_iter()
        .collect();
    let at = |c: &(u64, u32)| {
        let cell = record.decode.iter().find(|d| (d.context, d.concurrency) == *c).unwrap();
        md.find(&format!("{} × {}: server", cell.label, cell.concurrency)).expect("a line per cell")
    };
    assert!(listed.windows(2).all(|w| at(&w[0]) < at(&w[1])), "by context, then concurrency: {md}");
}

/// The value of every `id` attribute of the page's elements.
fn element_ids(html: &str) -> Vec<String> {
    let mut ids = Vec::new();
    for tag in html.split('<').skip(1) {
        let tag = tag.split('>').next().unwrap_or("");
        for quote in ['"', '\''] {
            for (i, _) in tag.match_indices(&format!("id={quote}")) {
                let before = tag[..i].chars().last();
                if before.is_some_and(char::is_whitespace) {
                    let rest = &tag[i + 4..];
                    ids.push(rest[..rest.find(quote).unwrap_or(rest.len())].to_string());
                }
            }
        }
    }
    ids
}
