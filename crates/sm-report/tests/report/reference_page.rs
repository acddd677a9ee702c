//! Acceptance (issue 4): the lil-bench-result/1 reference, imported and
//! rendered, gives the published page's numbers cell by cell. The expected
//! values are read from the published page's text, never typed in here.

use std::collections::BTreeMap;

use crate::common::*;
use serde_json::Value;

struct Published {
    header: Vec<String>,
    facts: BTreeMap<String, String>,
    launch: String,
    /// label → (prompt tok/s, TTFT)
    prefill: Vec<(String, String, String)>,
    /// (row label, column) → cell text ("173.9", "60 ms") or ("Over capacity", "")
    matrix: BTreeMap<(String, String), (String, String)>,
    columns: Vec<String>,
    measurements: Vec<Vec<String>>,
}

fn section<'a>(lines: &'a [&'a str], title: &str) -> &'a [&'a str] {
    let titles = ["Hardware", "Engine", "Run", "Launch command", "Prefill", "Sustained decode", "All measurements"];
    let start = lines.iter().position(|l| *l == title).unwrap_or_else(|| panic!("no section {title}")) + 1;
    let end = lines[start..].iter().position(|l| titles.contains(l)).map_or(lines.len(), |i| i + start);
    &lines[start..end]
}

/// "173.960 ms TTFT" → ("173.9", "60 ms"): a total has exactly one decimal.
fn split_matrix_cell(cell: &str) -> (String, String) {
    if cell == "Over capacity" {
        return (cell.into(), String::new());
    }
    let dot = cell.find('.').expect("decimal point");
    let (total, rest) = cell.split_at(dot + 2);
    (total.to_string(), rest.trim_end_matches(" TTFT").to_string())
}

fn published() -> Published {
    let text = std::fs::read_to_string(reference(PAGE_TEXT)).unwrap();
    let lines: Vec<&str> = text.lines().map(str::trim_end).collect();
    let header =
        lines.iter().take_while(|l| **l != "Hardware").filter(|l| !l.is_empty()).map(|l| l.to_string()).collect();
    let mut facts = BTreeMap::new();
    for s in ["Hardware", "Engine", "Run"] {
        for l in section(&lines, s).iter().filter(|l| !l.is_empty()) {
            let (k, v) = l.split_once(": ").unwrap();
            facts.insert(k.to_string(), v.to_string());
        }
    }
    let launch = section(&lines, "Launch command").iter().find(|l| !l.is_empty()).unwrap().to_string();
    let prefill = section(&lines, "Prefill")
        .iter()
        .filter(|l| l.ends_with(" TTFT"))
        .filter_map(|l| l.split_once(" context"))
        .map(|(label, rest)| {
            let k = rest.find('K').expect("prompt tok/s in K") + 1;
            (label.to_string(), rest[..k].to_string(), rest[k..].trim_end_matches(" TTFT").to_string())
        })
        .collect();
    let decode = section(&lines, "Sustained decode");
    let head = decode.iter().position(|l| l.starts_with("Context\t")).unwrap();
    let columns: Vec<String> = decode[head].split('\t').skip(1).map(str::to_string).collect();
    let mut matrix = BTreeMap::new();
    for row in decode[head + 1..].iter().take_while(|l| l.contains('\t')) {
        let mut cells = row.split('\t');
        let label = cells.next().unwrap().to_string();
        for (col, cell) in columns.iter().zip(cells) {
            matrix.insert((label.clone(), col.clone()), split_matrix_cell(cell));
        }
    }
    let all = section(&lines, "All measurements");
    let measurements = all
        .iter()
        .filter(|l| l.starts_with("Prefill\t") || l.starts_with("Sustained decode\t"))
        .map(|l| l.split('\t').map(str::to_string).collect())
        .collect();
    Published { header, facts, launch, prefill, matrix, columns, measurements }
}

fn rendered() -> (String, String, String) {
    let record = sm_report::load_any(&reference(LIL)).expect("import the lil-bench reference");
    (sm_report::html_page(&record, &[]), sm_report::markdown(&record), serde_json::to_string(&record).unwrap())
}

#[test]
fn every_prefill_and_decode_number_matches_the_published_page() {
    let p = published();
    let (html, _, _) = rendered();

    let prefill = body_rows(table(&html, "prefill"));
    assert_eq!(prefill.len(), p.prefill.len(), "prefill rows");
    for (row, (label, tok_s, ttft)) in prefill.iter().zip(&p.prefill) {
        let row: Vec<String> = row.iter().map(|c| strip_tags(c)).collect();
        assert_eq!((&row[0], &row[2], &row[3]), (label, tok_s, ttft), "prefill row {label}");
    }

    let m = table(&html, "matrix");
    let head: Vec<String> =
        m[..m.find("</thead>").unwrap()].split("</th>").map(strip_tags).filter(|c| !c.is_empty()).skip(1).collect();
    assert_eq!(head, p.columns, "matrix columns");
    let rows = body_rows(m);
    let (mut valued, mut over) = (0, 0);
    for row in &rows {
        let label = strip_tags(&row[0]);
        for (col, cell) in p.columns.iter().zip(&row[1..]) {
            let expected =
                p.matrix.get(&(label.clone(), col.clone())).unwrap_or_else(|| panic!("published {label}×{col}"));
            let got = if cell.contains("class=\"tot\"") {
                let tot = cell.split("class=\"tot\">").nth(1).unwrap();
                let ttft = cell.split("class=\"ttft\">").nth(1).unwrap();
                valued += 1;
                (
                    strip_tags(&tot[..tot.find("</span>").unwrap()]),
                    strip_tags(ttft).trim_end_matches(" TTFT").to_string(),
                )
            } else {
                // the page adds the reason as a numbered footnote, which the published page lacks
                let text = match cell.find("<sup>") {
                    Some(at) => strip_tags(&cell[..at]),
                    None => strip_tags(cell),
                };
                over += usize::from(text == "Over capacity" && cell.contains("href=\"#fn-"));
                (text, String::new())
            };
            assert_eq!(&got, expected, "decode cell {label} × {col}");
        }
    }
    assert_eq!(rows.len() * p.columns.len(), p.matrix.len(), "every published cell was compared");
    assert_eq!((valued, over), (45, 3));
    assert!(html.contains(&escaped(sm_report::view::OVER_CAPACITY_NOTE)));

    let all: Vec<Vec<String>> =
        body_rows(table(&html, "all")).iter().map(|r| r.iter().map(|c| strip_tags(c)).collect()).collect();
    assert_eq!(published_part(&all), p.measurements, "All measurements, row by row");
    assert_eq!(all.len(), 7 + 48);
    slo_part_agrees_with_the_record(&all);
}

/// The published page's columns of each All-measurements row; the SLO's columns follow them.
fn published_part(rows: &[Vec<String>]) -> Vec<Vec<String>> {
    rows.iter().map(|r| r[..sm_report::view::COLUMNS.len()].to_vec()).collect()
}

/// The imported file's cells are judged against the default SLO from their summaries: SLO met
/// says what the record says, and there is no goodput (summaries have no requests).
fn slo_part_agrees_with_the_record(rows: &[Vec<String>]) {
    let record = sm_report::load_any(&reference(LIL)).unwrap();
    let (mut yes, mut no) = (0, 0);
    for r in rows.iter().filter(|r| r[0] == "Sustained decode") {
        let extra = &r[sm_report::view::COLUMNS.len()..];
        assert_eq!(extra.len(), 3, "SLO met, goodput, goodput tok/s: {r:?}");
        let cell = record
            .decode
            .iter()
            .find(|c| sm_core::context::shown(&c.label, c.context) == r[1] && c.concurrency.to_string() == r[2])
            .unwrap_or_else(|| panic!("{r:?}"));
        let want = match cell.slo_met {
            Some(true) => "yes",
            Some(false) => "no",
            None => "—",
        };
        assert_eq!(extra[0], want, "{r:?}");
        assert_eq!((extra[1].as_str(), extra[2].as_str()), ("—", "—"), "no goodput from summaries");
        yes += usize::from(want == "yes");
        no += usize::from(want == "no");
    }
    assert!(yes > 0 && no > 0, "the default SLO passes some cells and fails others: {yes} / {no}");
}

#[test]
fn header_and_facts_match_the_published_page() {
    let p = published();
    let (html, md, _) = rendered();
    assert_eq!(p.header[1], "Ling-3.0-flash-int4 on H200 NVL 141GB ×2");
    assert!(html.contains(&format!("<h1>{}</h1>", p.header[1])), "title");
    assert!(md.starts_with(&format!("# {}\n", p.header[1])));
    for (k, v) in &p.facts {
        let expected = format!("<dt>{k}</dt><dd>{v}</dd>");
        assert!(html.contains(&expected), "fact {expected}");
    }
    assert!(html.contains("prefill at 8K, 16K, 32K, 64K, 128K, 251K, 256K"));
    assert!(html.contains("6 contexts (8K–251K) × 8 concurrency levels (1–128)"));
    assert!(html.contains("by @keennaylmx") && html.contains("Measured Sep 3, 2026, 17:22 UTC"));
}

#[test]
fn launch_command_is_the_published_one_and_leaks_no_secret() {
    let p = published();
    let (html, md, json) = rendered();
    assert!(p.launch.contains("--api-key <redacted>"));
    assert!(html.contains(&format!("<code>{}</code>", escaped(&p.launch))), "launch command in HTML");
    assert!(md.contains(&p.launch), "launch command in Markdown");

    let doc: Value = serde_json::from_str(&std::fs::read_to_string(reference(LIL)).unwrap()).unwrap();
    let argv: Vec<&str> = doc["server"]["argv"].as_array().unwrap().iter().map(|v| v.as_str().unwrap()).collect();
    let key = argv[argv.iter().position(|w| *w == "--api-key").unwrap() + 1];
    let hf = doc["server"]["environment"]["HF_TOKEN"].as_str().unwrap();
    let record = sm_report::load_any(&reference(LIL)).unwrap();
    let csv = sm_report::csv(&record);
    let term = sm_report::terminal(&record, 120);
    for secret in [key, hf] {
        // no fragment of 6 characters either, so a partial redaction fails too
        let chars: Vec<char> = secret.chars().collect();
        for w in chars.windows(6) {
            let frag: String = w.iter().collect();
            for (name, out) in [("html", &html), ("md", &md), ("json", &json), ("csv", &csv), ("terminal", &term)] {
                assert!(!out.contains(&frag), "{name} contains {frag:?} of a secret");
            }
        }
    }
}

/// The body rows of the first Markdown table under `## {section}`.
fn md_table(md: &str, section: &str) -> Vec<Vec<String>> {
    let start = md.find(&format!("## {section}\n")).unwrap_or_else(|| panic!("no section {section}"));
    md[start..]
        .lines()
        .skip_while(|l| !l.starts_with('|'))
        .take_while(|l| l.starts_with('|'))
        .skip(2)
        .map(|l| l.trim_matches('|').split(" | ").map(|c| md_text(c.trim())).collect())
        .collect()
}

#[test]
fn every_markdown_number_matches_the_published_page() {
    let p = published();
    let (_, md, _) = rendered();

    let prefill = md_table(&md, "Prefill");
    assert_eq!(prefill.len(), p.prefill.len(), "prefill rows");
    for (row, (label, tok_s, ttft)) in prefill.iter().zip(&p.prefill) {
        assert_eq!((&row[0], &row[2], &row[3]), (label, tok_s, ttft), "Markdown prefill row {label}");
    }

    let matrix = md_table(&md, "Sustained decode");
    let (mut valued, mut over) = (0, 0);
    for row in &matrix {
        assert_eq!(row.len(), 1 + p.columns.len(), "{row:?}");
        for (col, cell) in p.columns.iter().zip(&row[1..]) {
            let expected = &p.matrix[&(row[0].clone(), col.clone())];
            // "173.9 (60 ms TTFT)" or "Over capacity"
            let got = match cell.split_once(" (") {
                Some((total, ttft)) => {
                    valued += 1;
                    (total.to_string(), ttft.trim_end_matches(" TTFT)").to_string())
                }
                None => {
                    // "Over capacity [n]": the reason is footnote n, which the published page lacks
                    let text = cell.split(" [").next().unwrap_or_default().to_string();
                    over += usize::from(text == "Over capacity" && cell.ends_with(']'));
                    (text, String::new())
                }
            };
            assert_eq!(&got, expected, "Markdown decode cell {} × {col}", row[0]);
        }
    }
    assert_eq!(matrix.len() * p.columns.len(), p.matrix.len(), "every published cell was compared");
    assert_eq!((valued, over), (45, 3));
    assert!(md_text(&md).contains(sm_report::view::OVER_CAPACITY_NOTE));

    let all = md_table(&md, "All measurements");
    assert_eq!(published_part(&all), p.measurements, "Markdown All measurements, row by row");
    slo_part_agrees_with_the_record(&all);
}

/// The `<svg>` of the chart titled `title`.
fn chart<'a>(html: &'a str, title: &str) -> &'a str {
    let at = html.find(&format!(">{title}</title>")).unwrap_or_else(|| panic!("no chart {title}"));
    let start = html[..at].rfind("<svg").unwrap();
    &html[start..at + html[at..].find("</svg>").unwrap()]
}

#[test]
fn the_page_has_the_prefill_and_decode_charts_with_a_line_per_context() {
    let (html, _, _) = rendered();
    let record = sm_report::load_any(&reference(LIL)).unwrap();
    for title in ["Prompt tok/s by context", "TTFT by context (cold prompt)"] {
        let svg = chart(&html, title);
        assert_eq!(svg.matches("<path class=\"line").count(), 1, "{title}: one line");
        assert_eq!(svg.matches("<circle").count(), record.prefill.len(), "{title}: a point per context");
    }
    for title in ["Total tok/s by simultaneous requests", "Per request tok/s by simultaneous requests"] {
        let svg = chart(&html, title);
        assert_eq!(svg.matches("<path class=\"line").count(), 6, "{title}: one line per context");
        for label in ["8K", "16K", "32K", "64K", "128K", "251K"] {
            assert!(
                svg.contains(&format!(">{label}</text>")) || svg.contains(&format!("{label} · ")),
                "{title}: {label}"
            );
        }
        assert_eq!(svg.matches("<circle").count(), 45, "{title}: a point per valued cell");
    }
}
