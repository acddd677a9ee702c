//! Helpers shared by the integration tests: the repository's test data and a
//! minimal reader of the tables in the page this crate writes.

#![allow(dead_code)]

use std::path::PathBuf;

pub fn data(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/data").join(name)
}

pub fn reference(name: &str) -> PathBuf {
    data("reference").join(name)
}

pub const LIL: &str = "ling-3.0-flash-int4-2xh200nvl.lil-bench-result.json";
pub const PAGE_TEXT: &str = "ling-3.0-flash-int4-2xh200nvl.speed-test-matrix.txt";
pub const BENCH_0418: &str = "llm-inference-bench-0.4.18.vllm-cpu-tiny.json";

/// `text` as the page writes it: through the template's escaping ([`sm_report::escape::Text`]).
pub fn escaped(text: &str) -> String {
    maud::Render::render(&sm_report::escape::Text(text)).into_string()
}

pub fn unescape(s: &str) -> String {
    s.replace("&lt;", "<").replace("&gt;", ">").replace("&quot;", "\"").replace("&#39;", "'").replace("&amp;", "&")
}

/// Text of an element with its tags removed.
pub fn strip_tags(s: &str) -> String {
    let mut out = String::new();
    let mut in_tag = false;
    for c in s.chars() {
        match c {
            '<' => in_tag = true,
            '>' => in_tag = false,
            c if !in_tag => out.push(c),
            _ => {}
        }
    }
    unescape(&out)
}

/// The part of `html` from the table whose opening tag contains `class` up to its end.
pub fn table<'a>(html: &'a str, class: &str) -> &'a str {
    let start = html.find(&format!("<table class=\"{class}\"")).unwrap_or_else(|| panic!("no table {class}"));
    let end = html[start..].find("</table>").expect("table end") + start;
    &html[start..end]
}

/// Body rows of a table: every `<tr>` after `<tbody>`, as the raw HTML of each `<td>`/`<th>`.
pub fn body_rows(table: &str) -> Vec<Vec<String>> {
    let body = &table[table.find("<tbody>").expect("tbody")..];
    body.split("<tr>")
        .skip(1)
        .map(|row| {
            let mut cells = Vec::new();
            let mut rest = row;
            while let Some(i) = rest.find('<') {
                let tail = &rest[i..];
                if tail.starts_with("<td") || tail.starts_with("<th") {
                    let open_end = tail.find('>').unwrap() + 1;
                    let close = tail.find("</td>").into_iter().chain(tail.find("</th>")).min().unwrap();
                    cells.push(tail[open_end..close].to_string());
                    rest = &tail[close + 5..];
                } else {
                    rest = &tail[1..];
                }
            }
            cells
        })
        .collect()
}

/// The small synthetic reference-tool files under tests/data/bench.
pub fn bench(name: &str) -> PathBuf {
    data("bench").join(name)
}

/// A CSV as rows of fields (RFC 4180 quoting; rows end in CRLF).
pub fn csv_rows(text: &str) -> Vec<Vec<String>> {
    let mut rows = Vec::new();
    let (mut row, mut field, mut quoted) = (Vec::new(), String::new(), false);
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        match (c, quoted) {
            ('"', true) if chars.peek() == Some(&'"') => {
                chars.next();
                field.push('"');
            }
            ('"', _) => quoted = !quoted,
            (',', false) => row.push(std::mem::take(&mut field)),
            ('\r', false) => {}
            ('\n', false) => {
                row.push(std::mem::take(&mut field));
                rows.push(std::mem::take(&mut row));
            }
            (c, _) => field.push(c),
        }
    }
    rows
}

/// The CSV's rows as maps from column name to value.
pub fn csv_records(text: &str) -> Vec<std::collections::BTreeMap<String, String>> {
    let rows = csv_rows(text);
    let header = &rows[0];
    for r in &rows[1..] {
        assert_eq!(r.len(), header.len(), "a CSV row as wide as the header: {r:?}");
    }
    rows[1..].iter().map(|r| header.iter().cloned().zip(r.iter().cloned()).collect()).collect()
}

/// Markdown with its backslash escapes removed: the text a reader sees.
pub fn md_text(md: &str) -> String {
    let mut out = String::with_capacity(md.len());
    let mut chars = md.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '\\' && chars.peek().is_some_and(|n| n.is_ascii_punctuation()) {
            continue;
        }
        out.push(c);
    }
    out
}
