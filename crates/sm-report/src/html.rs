//! The speed test matrix page: one self-contained HTML file (inline CSS and
//! SVG, no script, nothing fetched), readable without JavaScript, in light and
//! dark schemes and on paper. The results site reuses this template.

use std::fmt::Write;

use sm_core::record::RunRecord;

use crate::capacity::{self, USERS_NOTE};
use crate::charts::{PrefillCharts, PrefillRun};
use crate::escape::html as esc;
use crate::format::{self, opt};
use crate::svg::{self, Chart, Limit, Series};
use crate::view::{self, Cell, CellKind, Matrix, Page};

/// The page's stylesheet; the results site serves its pages with it too.
pub const CSS: &str = include_str!("page.css");

/// Renders the page. `links` are `(text, href)` pairs shown as navigation
/// above the title (the results site passes its own); hrefs with a scheme
/// other than http(s) are dropped.
pub fn html_page(record: &RunRecord, links: &[(String, String)]) -> String {
    let page = view::build(record);
    let mut s = String::with_capacity(64 * 1024);
    let _ = writeln!(
        s,
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n\
         <meta name=\"generator\" content=\"speedmatrix\">\n\
         <meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; style-src 'unsafe-inline'; img-src data:\">\n\
         <title>{} — speed test matrix</title>\n<style>\n{CSS}</style>\n</head>\n<body>",
        esc(&page.title)
    );
    nav(&mut s, links);
    header(&mut s, &page);
    // a run of load phases only has no matrix: its sections would be empty tables
    let matrix = record.settings.matrix;
    if matrix {
        answer(&mut s, &page);
    }
    facts(&mut s, &page);
    launch(&mut s, &page);
    if matrix {
        prefill(&mut s, &page, record);
        decode(&mut s, &page, &record.decode);
    }
    crate::phases::html(&mut s, record);
    crate::telemetry::html_section(&mut s, record);
    if matrix {
        all_measurements(&mut s, &page);
    }
    methodology(&mut s, &page);
    let _ = writeln!(
        s,
        "<footer>Made with speedmatrix — figures defined in the Methodology section; every measurement is also in \
         measurements.csv and run.json next to this page.</footer>\n</body>\n</html>"
    );
    s
}

fn safe_href(href: &str) -> bool {
    let lower = href.trim().to_ascii_lowercase();
    match lower.split_once(':') {
        // "a:b" without a slash before the colon is a scheme
        Some((scheme, _)) if !scheme.contains('/') => scheme == "http" || scheme == "https",
        _ => true,
    }
}

fn nav(s: &mut String, links: &[(String, String)]) {
    let links: Vec<_> = links.iter().filter(|(_, h)| safe_href(h)).collect();
    if links.is_empty() {
        return;
    }
    s.push_str("<nav class=\"links\">");
    for (text, href) in links {
        let _ = write!(s, "<a href=\"{}\">{}</a>", esc(href), esc(text));
    }
    s.push_str("</nav>\n");
}

fn spans(parts: &[String]) -> String {
    parts.iter().map(|p| format!("<span>{}</span>", esc(p))).collect()
}

fn header(s: &mut String, page: &Page) {
    let _ = writeln!(
        s,
        "<header>\n<p class=\"kicker\">Speed test matrix</p>\n<h1>{}</h1>\n<p class=\"subtitle\">{}</p>\n<p class=\"byline\">{}</p>",
        esc(&page.title),
        spans(&page.subtitle),
        spans(&page.byline)
    );
    if let Some(note) = &page.status_note {
        let _ = writeln!(s, "<p class=\"banner\" role=\"note\">{}</p>", esc(note));
    }
    s.push_str("</header>\n");
}

/// The capacity answer, one sentence per context, with what "users" means and which SLO was used.
fn answer(s: &mut String, page: &Page) {
    let Some(a) = &page.answer else {
        return;
    };
    s.push_str("<section class=\"answer\" id=\"capacity\">\n<h2>Capacity</h2>\n<ul class=\"answer-lines\">");
    for line in &a.sentences {
        let _ = write!(s, "<li>{}</li>", esc(line));
    }
    let _ =
        writeln!(s, "</ul>\n<p>{}</p>\n<p class=\"slo-used\">{}</p>\n</section>", esc(USERS_NOTE), esc(&a.slo_note));
}

fn dl(s: &mut String, title: &str, lines: &[(String, String)]) {
    let _ = write!(s, "<section>\n<h3>{}</h3>\n<dl>", esc(title));
    for (k, v) in lines {
        let _ = write!(s, "<dt>{}</dt><dd>{}</dd>", esc(k), esc(v));
    }
    s.push_str("</dl>\n</section>\n");
}

fn facts(s: &mut String, page: &Page) {
    s.push_str("<div class=\"facts\">\n");
    dl(s, "Hardware", &page.hardware);
    dl(s, "Engine", &page.engine);
    dl(s, "Run", &page.run);
    s.push_str("</div>\n");
}

fn launch(s: &mut String, page: &Page) {
    s.push_str("<h2 id=\"launch-command\">Launch command</h2>\n");
    match &page.launch_command {
        Some(cmd) => {
            let _ = writeln!(s, "<pre class=\"cmd\"><code>{}</code></pre>", esc(cmd));
        }
        None => s.push_str("<p class=\"caption\">unknown</p>\n"),
    }
}

fn prefill(s: &mut String, page: &Page, record: &RunRecord) {
    s.push_str("<h2 id=\"prefill\">Prefill</h2>\n<p class=\"caption\">prompt tok/s by context length</p>\n");
    if page.prefill.is_empty() {
        s.push_str("<p class=\"caption\">No prefill rows were measured.</p>\n");
        return;
    }
    s.push_str(
        "<div class=\"scroll\"><table class=\"prefill\">\n<thead><tr><th>Context</th><th>Prompt tokens</th>\
         <th>Prompt tok/s</th><th>TTFT</th></tr></thead>\n<tbody>\n",
    );
    for p in &page.prefill {
        // a row that is not valid says why in the page's numbered footnotes
        let (tok, ttft) = if p.valid() {
            (esc(&opt(p.tok_s, format::kilo)), esc(&opt(p.ttft_ms, format::ms)))
        } else {
            (format!("{}{}", esc(&view::status_text(p.status)), note_ref(p.footnote)), format::NONE.to_string())
        };
        let _ = writeln!(
            s,
            "<tr><td class=\"ctx\">{}</td><td>{}</td><td class=\"num\">{tok}</td><td class=\"num\">{ttft}</td></tr>",
            esc(&p.label),
            esc(&opt(p.prompt_tokens, format::count)),
        );
    }
    s.push_str("</tbody></table></div>\n");
    footnote_list(s, &page.notes_for(page.prefill.iter().map(|p| p.footnote)));
    s.push_str(&PrefillCharts::new(&[PrefillRun { rows: &record.prefill, name: None, color: 0 }]).html());
}

/// The superscript link to footnote `n`.
fn note_ref(n: Option<usize>) -> String {
    n.map(|n| format!("<sup><a href=\"#fn-{n}\">{n}</a></sup>")).unwrap_or_default()
}

/// Numbered footnotes, each with the page-wide number the view gave it.
fn footnote_list(s: &mut String, notes: &[(usize, &str)]) {
    if notes.is_empty() {
        return;
    }
    s.push_str("<ol class=\"footnotes\">");
    for (n, text) in notes {
        let _ = write!(s, "<li id=\"fn-{n}\" value=\"{n}\">{}</li>", esc(text));
    }
    s.push_str("</ol>\n");
}

/// Position of a figure on the heat-map's scale, 0 … 1. Logarithmic, because
/// totals span two orders of magnitude and a linear scale would leave the
/// single-user column indistinguishable.
fn heat(v: f64, min: f64, max: f64) -> f64 {
    if max <= min || v <= 0.0 || min <= 0.0 {
        return 1.0;
    }
    ((v / min).ln() / (max / min).ln()).clamp(0.0, 1.0)
}

/// The SLO marks of a valid cell: classes for its outline and the marks in its corner (before
/// its figures, so the figures read the same with or without an SLO).
fn slo_marks(cell: &Cell) -> (String, String) {
    let mut classes = String::new();
    let mut marks = Vec::new();
    match cell.slo_met {
        Some(true) => {
            classes.push_str(" ok");
            marks.push("<span aria-label=\"meets the SLO\">✓</span>");
        }
        Some(false) => classes.push_str(" miss"),
        None => {}
    }
    if cell.capacity {
        classes.push_str(" cap");
        marks.push("<span aria-label=\"capacity\">★</span>");
    }
    if cell.searched {
        classes.push_str(" searched");
        marks.push("<span aria-label=\"searched\">s</span>");
    }
    let marks =
        if marks.is_empty() { String::new() } else { format!("<span class=\"marks\">{}</span>", marks.join(" ")) };
    (classes, marks)
}

fn matrix_cell(s: &mut String, cell: &Cell, min: f64, max: f64, ctx_label: &str, c: u32) {
    match cell.kind {
        CellKind::Valid => {
            let total = cell.total.unwrap_or(0.0);
            let t = heat(total, min, max);
            let prec = cell.precision.as_ref();
            let total_text =
                prec.and_then(|p| p.total.as_ref()).map_or_else(|| format::fixed1(total), |p| p.text.clone());
            let mut tip = format!("{ctx_label} context, {c} at once: {total_text} tok/s total");
            if let Some(p) = cell.per_request {
                let text =
                    prec.and_then(|p| p.per_request.as_ref()).map_or_else(|| format::fixed1(p), |p| p.text.clone());
                tip.push_str(&format!(", {text} per request"));
            }
            // the intervals, the precision verdict and the repeats: in the hover, not on the cell
            for line in prec.map(|p| p.tip.as_slice()).unwrap_or_default() {
                tip.push_str(&format!("\n{line}"));
            }
            let lines = [
                cell.verdict.as_deref(),
                cell.roofline.as_deref(),
                cell.capacity.then_some("the capacity of this context"),
            ];
            for line in lines {
                tip.extend(line.map(|l| format!("\n{l}")));
            }
            if cell.searched {
                tip.push_str("\nmeasured by the capacity search (--find-capacity)");
            }
            tip.extend(cell.spec_decode.as_ref().map(|l| format!("\n{l}")));
            tip.extend(cell.gpu.as_ref().map(|l| format!("\n{l}")));
            for w in &cell.warnings {
                tip.push_str(&format!("\n⚠ {w}"));
            }
            // repeats that disagree are a warning about the figures, like the record's own warnings
            let disagree = prec.is_some_and(|p| p.disagree());
            let warn = if cell.warnings.is_empty() && !disagree {
                ""
            } else {
                "<span class=\"warn\" aria-label=\"warning\"> ⚠</span>"
            };
            let (classes, marks) = slo_marks(cell);
            let _ = write!(
                s,
                "<td class=\"cell v{}{classes}\" style=\"--t:{t:.3}\" title=\"{}\">{marks}<span class=\"tot\">{}{warn}</span><span class=\"ttft\">{}</span></td>",
                if t > 0.55 { " hot" } else { "" },
                esc(&tip),
                esc(&format::fixed1(total)),
                esc(&opt(cell.ttft_ms, |v| format!("{} TTFT", format::ms(v)))),
            );
        }
        CellKind::OverCapacity => {
            let _ = write!(
                s,
                "<td class=\"cell oc\" title=\"{}\"><span class=\"st\">Over capacity{}</span></td>",
                esc(cell.reason.as_deref().unwrap_or(view::OVER_CAPACITY_NOTE)),
                note_ref(cell.footnote),
            );
        }
        CellKind::NotMeasured => {
            s.push_str("<td class=\"cell nm\" title=\"not measured\"><span class=\"st\">—</span></td>")
        }
        kind => {
            let _ = write!(
                s,
                "<td class=\"cell err\" title=\"{}\"><span class=\"st\">{}{}</span></td>",
                esc(&cell.reason.clone().unwrap_or_else(|| view::kind_text(kind))),
                esc(&view::kind_text(kind)),
                note_ref(cell.footnote),
            );
        }
    }
}

fn matrix_table(s: &mut String, m: &Matrix) {
    let max = m.max_total();
    let min = m.cells.iter().flatten().filter_map(|c| c.total).filter(|v| *v > 0.0).fold(f64::INFINITY, f64::min);
    s.push_str("<div class=\"scroll\"><table class=\"matrix\">\n<thead><tr><th class=\"ctx\">Context</th>");
    for (c, searched) in m.cols.iter().zip(&m.searched_cols) {
        if *searched {
            let _ = write!(s, "<th scope=\"col\" class=\"searched\">{c}<span class=\"sub\">searched</span></th>");
        } else {
            let _ = write!(s, "<th scope=\"col\">{c}</th>");
        }
    }
    s.push_str("</tr></thead>\n<tbody>\n");
    for (ri, (_, label)) in m.rows.iter().enumerate() {
        let _ = write!(s, "<tr><th class=\"ctx\" scope=\"row\">{}</th>", esc(label));
        for (ci, cell) in m.cells[ri].iter().enumerate() {
            matrix_cell(s, cell, min, max, label, m.cols[ci]);
        }
        s.push_str("</tr>\n");
    }
    s.push_str("</tbody></table></div>\n");
    if max > 0.0 && min.is_finite() {
        let _ = writeln!(
            s,
            "<p class=\"heatkey\"><span>{}</span><span class=\"bar\" aria-hidden=\"true\"></span><span>{} total tok/s (colour on a log scale)</span></p>",
            esc(&format::fixed1(min)),
            esc(&format::fixed1(max))
        );
    }
    matrix_key(s, m);
}

/// The legend of the SLO marks, for the marks the matrix shows.
fn matrix_key(s: &mut String, m: &Matrix) {
    let cells = || m.cells.iter().flatten();
    let mut keys = Vec::new();
    if cells().any(|c| c.slo_met.is_some()) {
        keys.push("✓ meets the SLO (no mark: misses it)".to_string());
    }
    if cells().any(|c| c.capacity) {
        keys.push("<span class=\"cap\">★ outlined</span> the capacity: the most users that meet the SLO".into());
    }
    if cells().any(|c| c.searched) {
        keys.push("s measured by the capacity search".into());
    }
    if cells().any(|c| c.precision.as_ref().is_some_and(|p| p.total.is_some())) {
        keys.push("hover a cell for its figures with their 95 % intervals (±)".into());
    }
    if cells().any(|c| c.precision.as_ref().is_some_and(|p| p.disagree())) {
        keys.push("⚠ on a cell whose repeats disagree: the server was not stationary".into());
    }
    if !keys.is_empty() {
        let _ = writeln!(s, "<p class=\"matrixkey\">{}</p>", keys.join(" · "));
    }
}

fn decode(s: &mut String, page: &Page, cells: &[sm_core::record::DecodeCell]) {
    let m = &page.matrix;
    s.push_str(
        "<h2 id=\"sustained-decode\">Sustained decode</h2>\n<p class=\"caption\">total tok/s · rows are context length, \
         columns are simultaneous requests</p>\n",
    );
    if m.rows.is_empty() {
        s.push_str("<p class=\"caption\">No decode cells were measured.</p>\n");
        return;
    }
    matrix_table(s, m);
    s.push_str("<ul class=\"notes\">");
    for note in &page.decode_notes {
        let _ = write!(s, "<li>{}</li>", esc(note));
    }
    s.push_str("</ul>\n");
    footnote_list(
        s,
        &page.notes_for(m.cells.iter().flatten().chain(m.listed.iter().map(|l| &l.cell)).map(|c| c.footnote)),
    );
    let x_labels: Vec<String> = m.cols.iter().map(u32::to_string).collect();
    let series = |get: fn(&Cell) -> Option<f64>| -> Vec<Series> {
        m.rows
            .iter()
            .enumerate()
            .map(|(ri, (_, label))| Series {
                name: label.clone(),
                values: m.cells[ri].iter().map(get).collect(),
                color: None,
            })
            .collect()
    };
    let charts = [
        Chart {
            title: "Total tok/s by simultaneous requests",
            x_title: "simultaneous requests",
            y_title: "total tok/s",
            x_labels: x_labels.clone(),
            series: series(|c| c.total),
            value_fmt: format::fixed1,
        },
        Chart {
            title: "Per request tok/s by simultaneous requests",
            x_title: "simultaneous requests",
            y_title: "tok/s per request",
            x_labels,
            series: series(|c| c.per_request),
            value_fmt: format::fixed1,
        },
    ];
    s.push_str(&svg::charts_row(&charts));
    s.push_str(&slo_chart(page));
    crate::server_metrics::html_section(s, cells);
}

/// Per-user tok/s against simultaneous requests, one line per context, with the SLO's floor.
fn slo_chart(page: &Page) -> String {
    let m = &page.matrix;
    let Some(answer) = &page.answer else {
        return String::new();
    };
    let title = "Per-user tok/s against the SLO";
    let y_title = match &answer.tok_s_limit {
        Some((_, key)) => format!("{} (per user)", capacity::bound_name(key)),
        None => "median tok/s per user".to_string(),
    };
    let chart = Chart {
        title,
        x_title: "simultaneous users",
        y_title: &y_title,
        x_labels: m.cols.iter().map(u32::to_string).collect(),
        series: m
            .rows
            .iter()
            .enumerate()
            .map(|(ri, (_, label))| Series {
                name: label.clone(),
                values: m.cells[ri].iter().map(|c| c.user_tok_s).collect(),
                color: None,
            })
            .collect(),
        value_fmt: format::fixed1,
    };
    let limit = answer.tok_s_limit.as_ref().map(|(value, key)| Limit {
        value: *value,
        label: format!("SLO: {} ≥ {}", capacity::bound_name(key), capacity::limit_words(key, *value)),
    });
    format!(
        "<div class=\"charts one\">\n<figure>{}</figure>\n</div>\n",
        svg::line_chart_with_limit(&chart, limit.as_ref())
    )
}

fn all_measurements(s: &mut String, page: &Page) {
    let _ = write!(
        s,
        "<h2 id=\"all-measurements\">All measurements</h2>\n<p class=\"caption\">{}</p>\n<div class=\"scroll\"><table class=\"all\">\n<thead><tr>",
        esc(view::MEASUREMENTS_NOTE)
    );
    for c in view::COLUMNS.iter().chain(&page.slo_columns).chain(&page.precision.columns) {
        let _ = write!(s, "<th scope=\"col\">{}</th>", esc(c));
    }
    s.push_str("</tr></thead>\n<tbody>\n");
    let (no_slo, no_pm, no_prec) = (Vec::new(), Vec::new(), Vec::new());
    for (ri, row) in page.measurements.iter().enumerate() {
        s.push_str("<tr>");
        let pms = page.precision.pm.get(ri).unwrap_or(&no_pm);
        for (i, v) in row.iter().enumerate() {
            if i == 3 {
                let class = v.to_lowercase().replace(' ', "-");
                let _ = write!(s, "<td class=\"st-{}\">{}</td>", esc(&class), esc(v));
            } else if let Some((_, pm)) = pms.iter().find(|(col, _)| *col == i) {
                let _ = write!(s, "<td class=\"pm\" title=\"{}\">{}</td>", esc(&pm.range), esc(&pm.text));
            } else {
                let _ = write!(s, "<td>{}</td>", esc(v));
            }
        }
        for v in page.slo_measurements.get(ri).unwrap_or(&no_slo) {
            let _ = write!(s, "<td>{}</td>", esc(v));
        }
        for v in page.precision.rows.get(ri).unwrap_or(&no_prec) {
            let class = if v.starts_with('⚠') || v.starts_with('✗') { " class=\"flag\"" } else { "" };
            let _ = write!(s, "<td{class}>{}</td>", esc(v));
        }
        s.push_str("</tr>\n");
    }
    s.push_str("</tbody></table></div>\n");
    if !page.precision.notes.is_empty() {
        s.push_str("<ul class=\"notes precision\">");
        for note in &page.precision.notes {
            let _ = write!(s, "<li>{}</li>", esc(note));
        }
        s.push_str("</ul>\n");
    }
}

fn methodology(s: &mut String, page: &Page) {
    s.push_str("<h2 id=\"methodology\">Methodology</h2>\n<dl class=\"method\">");
    for (k, v) in &page.methodology {
        let _ = write!(s, "<dt>{}</dt><dd>{}</dd>", esc(k), esc(v));
    }
    s.push_str("</dl>\n");
    // the notes on the decode matrix and the measurements table stand under them, once
    if !page.import_notes.is_empty() {
        s.push_str("<ul class=\"notes\">");
        for n in &page.import_notes {
            let _ = write!(s, "<li>{}</li>", esc(n));
        }
        s.push_str("</ul>\n");
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

    #[test]
    fn heat_scale() {
        assert_eq!(heat(10.0, 10.0, 1000.0), 0.0);
        assert_eq!(heat(1000.0, 10.0, 1000.0), 1.0);
        assert!((heat(100.0, 10.0, 1000.0) - 0.5).abs() < 1e-9);
    }
}
