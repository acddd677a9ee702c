//! The speed test matrix page: one self-contained HTML file (inline CSS and
//! SVG, no script, nothing fetched), readable without JavaScript, in light and
//! dark schemes and on paper. The results site reuses this template.
//!
//! The page is a `maud` template, so every value spliced in is escaped by the engine; text from the
//! record goes in as [`Text`], which also shows control characters as U+FFFD. The one piece of
//! markup spliced unescaped is the compiled-in stylesheet.

use maud::{DOCTYPE, Markup, PreEscaped, html};
use sm_core::record::RunRecord;

use crate::capacity::USERS_NOTE;
use crate::charts::{PrefillCharts, PrefillRun};
use crate::escape::Text;
use crate::format::{self, opt};
use crate::view::precision::MarkKind;
use crate::view::{self, Page};

mod matrix;

/// The page's stylesheet; the results site serves its pages with it too.
pub const CSS: &str = include_str!("page.css");

/// The page's policy: nothing but its own inline styles and data: images.
const CSP: &str = "default-src 'none'; style-src 'unsafe-inline'; img-src data:";

/// The `<meta>` tags every speedmatrix page opens its head with (the report, the site's pages):
/// the encoding, the viewport, the generator and the page's own content security policy.
pub fn head_meta(csp: &str) -> Markup {
    html! {
        meta charset="utf-8";
        meta name="viewport" content="width=device-width, initial-scale=1";
        meta name="generator" content="speedmatrix";
        meta http-equiv="Content-Security-Policy" content=(csp);
    }
}

/// Renders the page. `links` are `(text, href)` pairs shown as navigation
/// above the title (the results site passes its own); hrefs with a scheme
/// other than http(s) are dropped.
pub fn html_page(record: &RunRecord, links: &[(String, String)]) -> String {
    let page = view::build(record);
    // a run of load phases only has no matrix: its sections would be empty tables
    let matrix = record.settings.matrix;
    let markup = html! {
        (DOCTYPE)
        html lang="en" {
            head {
                (head_meta(CSP))
                title { (Text(&page.title)) " — speed test matrix" }
                // the stylesheet is this crate's own file, compiled in: no record's text
                style { (PreEscaped(CSS)) }
            }
            body {
                (nav(links))
                (header(&page))
                @if matrix { (answer(&page)) }
                (replay_answer(record))
                (facts(&page))
                (launch(&page))
                @if matrix {
                    (prefill(&page, record))
                    (matrix::decode(&page, &record.decode))
                    (crate::frontier::html(record))
                }
                (crate::phases::html(record))
                (crate::telemetry::html_section(record))
                @if matrix { (all_measurements(&page)) }
                (methodology(&page))
                footer {
                    "Made with speedmatrix — figures defined in the Methodology section; every measurement is also \
                     in measurements.csv and run.json next to this page."
                }
            }
        }
    };
    markup.into_string()
}

fn safe_href(href: &str) -> bool {
    let lower = href.trim().to_ascii_lowercase();
    match lower.split_once(':') {
        // "a:b" without a slash before the colon is a scheme
        Some((scheme, _)) if !scheme.contains('/') => scheme == "http" || scheme == "https",
        _ => true,
    }
}

fn nav(links: &[(String, String)]) -> Markup {
    let links: Vec<_> = links.iter().filter(|(_, h)| safe_href(h)).collect();
    html! {
        @if !links.is_empty() {
            nav class="links" {
                @for (text, href) in links { a href=(Text(href)) { (Text(text)) } }
            }
        }
    }
}

fn spans(parts: &[String]) -> Markup {
    html! { @for p in parts { span { (Text(p)) } } }
}

fn header(page: &Page) -> Markup {
    html! {
        header {
            p class="kicker" { "Speed test matrix" }
            h1 { (Text(&page.title)) }
            p class="subtitle" { (spans(&page.subtitle)) }
            p class="byline" { (spans(&page.byline)) }
            @if let Some(note) = &page.status_note {
                p class="banner" role="note" { (Text(note)) }
            }
        }
    }
}

/// The capacity answer, one sentence per context, with what "users" means and which SLO was used.
fn answer(page: &Page) -> Markup {
    html! {
        @if let Some(a) = &page.answer {
            section class="answer" id="capacity" {
                h2 { "Capacity" }
                ul class="answer-lines" {
                    @for line in &a.sentences { li { (Text(line)) } }
                }
                p { (USERS_NOTE) }
                p class="slo-used" { (Text(&a.slo_note)) }
            }
        }
    }
}

/// The capacity answer on a replayed trace (`--replay` with `--find-capacity`), after the decode
/// matrix's: a run of the replay alone has no matrix, yet its answer still heads the page.
fn replay_answer(record: &RunRecord) -> Markup {
    html! {
        @if let Some(a) = crate::phases::replay::answer::headline(record) {
            section class="answer" id="replay-capacity" {
                h2 { "Capacity on your traffic" }
                ul class="answer-lines" { li { (Text(&a.sentence)) } }
                @if let Some(note) = &a.slo_note { p class="slo-used" { (Text(note)) } }
            }
        }
    }
}

/// A `<dl>` of `(term, value)` lines.
fn terms<K: AsRef<str>, V: AsRef<str>>(lines: &[(K, V)]) -> Markup {
    html! {
        @for (k, v) in lines {
            dt { (Text(k.as_ref())) }
            dd { (Text(v.as_ref())) }
        }
    }
}

fn facts(page: &Page) -> Markup {
    let blocks = [("Hardware", &page.hardware), ("Engine", &page.engine), ("Run", &page.run)];
    html! {
        div class="facts" {
            @for (title, lines) in blocks {
                section {
                    h3 { (title) }
                    dl { (terms(lines)) }
                }
            }
        }
    }
}

fn launch(page: &Page) -> Markup {
    html! {
        h2 id="launch-command" { "Launch command" }
        @match &page.launch_command {
            Some(cmd) => pre class="cmd" { code { (Text(cmd)) } },
            None => p class="caption" { "unknown" },
        }
    }
}

fn prefill(page: &Page, record: &RunRecord) -> Markup {
    html! {
        h2 id="prefill" { "Prefill" }
        p class="caption" { "prompt tok/s by context length" }
        @if page.prefill.is_empty() {
            p class="caption" { "No prefill rows were measured." }
        } @else {
            div class="scroll" {
                table class="prefill" {
                    thead { tr { th { "Context" } th { "Prompt tokens" } th { "Prompt tok/s" } th { "TTFT" } } }
                    tbody { @for p in &page.prefill { (prefill_row(p)) } }
                }
            }
            (footnote_list(&page.notes_for(page.prefill.iter().map(|p| p.footnote))))
            (PrefillCharts::new(&[PrefillRun { rows: &record.prefill, name: None, color: 0 }]).html())
        }
    }
}

fn prefill_row(p: &view::PrefillLine) -> Markup {
    html! {
        tr {
            td class="ctx" { (Text(&p.label)) }
            td { (Text(&opt(p.prompt_tokens, format::count))) }
            @if p.valid() {
                td class="num" { (Text(&opt(p.tok_s, format::kilo))) }
                td class="num" { (Text(&opt(p.ttft_ms, format::ms))) }
            } @else {
                // a row that is not valid says why in the page's numbered footnotes
                td class="num" { (Text(&view::status_text(p.status))) (note_ref(p.footnote)) }
                td class="num" { (format::NONE) }
            }
        }
    }
}

/// The superscript link to footnote `n`.
fn note_ref(n: Option<usize>) -> Markup {
    html! {
        @if let Some(n) = n {
            sup { a href={ "#fn-" (n) } { (n) } }
        }
    }
}

/// Numbered footnotes, each with the page-wide number the view gave it.
fn footnote_list(notes: &[(usize, &str)]) -> Markup {
    html! {
        @if !notes.is_empty() {
            ol class="footnotes" {
                @for (n, text) in notes { li id={ "fn-" (n) } value=(n) { (Text(text)) } }
            }
        }
    }
}

fn all_measurements(page: &Page) -> Markup {
    let columns =
        view::COLUMNS.iter().chain(&page.figure_columns).chain(&page.slo_columns).chain(&page.precision.columns);
    html! {
        h2 id="all-measurements" { "All measurements" }
        p class="caption" { (view::MEASUREMENTS_NOTE) }
        div class="scroll" {
            table class="all" {
                thead { tr { @for c in columns { th scope="col" { (Text(c)) } } } }
                tbody {
                    @for ri in 0..page.measurements.len() { (measurement_row(page, ri)) }
                }
            }
        }
        @if !page.precision.notes.is_empty() {
            ul class="notes precision" {
                @for note in &page.precision.notes { li { (Text(note)) } }
            }
        }
    }
}

/// Row `ri` of the All-measurements table: its figures (with their ± where measured), then the
/// figure table's, the SLO's and the precision's columns.
fn measurement_row(page: &Page, ri: usize) -> Markup {
    let row = &page.measurements[ri];
    let pms = page.precision.pm.get(ri).map_or(&[][..], Vec::as_slice);
    let figures = page.figure_measurements.get(ri).map_or(&[][..], Vec::as_slice);
    let slo = page.slo_measurements.get(ri).map_or(&[][..], Vec::as_slice);
    let precision = page.precision.rows.get(ri).map_or(&[][..], Vec::as_slice);
    html! {
        tr {
            @for (i, v) in row.iter().enumerate() {
                @if i == 3 {
                    td class={ "st-" (Text(&v.to_lowercase().replace(' ', "-"))) } { (Text(v)) }
                } @else if let Some((_, pm)) = pms.iter().find(|(col, _)| *col == i) {
                    td class="pm" title=(Text(&pm.range)) { (Text(&pm.text)) }
                } @else {
                    td { (Text(v)) }
                }
            }
            @for v in figures { td { (Text(v)) } }
            @for v in slo { td { (Text(v)) } }
            @for v in precision {
                td class=[(v.kind == MarkKind::Flag).then_some("flag")] { (Text(&v.text)) }
            }
        }
    }
}

fn methodology(page: &Page) -> Markup {
    html! {
        h2 id="methodology" { "Methodology" }
        dl class="method" { (terms(&page.methodology)) }
        // the notes on the decode matrix and the measurements table stand under them, once
        @if !page.import_notes.is_empty() {
            ul class="notes" {
                @for n in &page.import_notes { li { (Text(n)) } }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hrefs() {
        assert!(safe_href("https://example.org/x"));
        assert!(safe_href("../index.html"));
        assert!(safe_href("runs/a:b.html"));
        assert!(!safe_href("javascript:alert(1)"));
        assert!(!safe_href(" JavaScript:alert(1)"));
        assert!(!safe_href("data:text/html,x"));
    }
}
