//! The page's sustained-decode section: the heat-mapped matrix of cells with their SLO marks and
//! hovers, its key and notes, the charts by simultaneous requests and the server's gauges.

use maud::{Markup, html};
use sm_core::record::DecodeCell;

use super::{footnote_list, note_ref};
use crate::capacity;
use crate::escape::Text;
use crate::format::{self, opt};
use crate::svg::{self, Chart, Limit, Series};
use crate::view::{self, Cell, CellKind, Matrix, Page};

pub(super) fn decode(page: &Page, cells: &[DecodeCell]) -> Markup {
    let m = &page.matrix;
    html! {
        h2 id="sustained-decode" { "Sustained decode" }
        p class="caption" { "total tok/s · rows are context length, columns are simultaneous requests" }
        @if m.rows.is_empty() {
            p class="caption" { "No decode cells were measured." }
        } @else {
            (matrix_table(m))
            ul class="notes" {
                @for note in &page.decode_notes { li { (note) } }
            }
            (footnote_list(&page.notes_for(
                m.cells.iter().flatten().chain(m.listed.iter().map(|l| &l.cell)).map(|c| c.footnote),
            )))
            (svg::charts_row(&decode_charts(m)))
            (slo_chart(page))
            (crate::server_metrics::html_section(cells))
        }
    }
}

/// Total and per-request tok/s by simultaneous requests, a line per context.
fn decode_charts(m: &Matrix) -> [Chart<'static>; 2] {
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
    [
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
    ]
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

fn matrix_table(m: &Matrix) -> Markup {
    let max = m.max_total();
    let min = m.cells.iter().flatten().filter_map(|c| c.total).filter(|v| *v > 0.0).fold(f64::INFINITY, f64::min);
    html! {
        div class="scroll" {
            table class="matrix" {
                thead {
                    tr {
                        th class="ctx" { "Context" }
                        @for (c, searched) in m.cols.iter().zip(&m.searched_cols) {
                            @if *searched {
                                th scope="col" class="searched" { (c) span class="sub" { "searched" } }
                            } @else {
                                th scope="col" { (c) }
                            }
                        }
                    }
                }
                tbody {
                    @for (ri, (_, label)) in m.rows.iter().enumerate() {
                        tr {
                            th class="ctx" scope="row" { (Text(label)) }
                            @for (ci, cell) in m.cells[ri].iter().enumerate() {
                                (matrix_cell(cell, min, max, label, m.cols[ci]))
                            }
                        }
                    }
                }
            }
        }
        @if max > 0.0 && min.is_finite() {
            p class="heatkey" {
                span { (Text(&format::fixed1(min))) }
                span class="bar" aria-hidden="true" {}
                span { (Text(&format::fixed1(max))) " total tok/s (colour on a log scale)" }
            }
        }
        (matrix_key(m))
    }
}

fn matrix_cell(cell: &Cell, min: f64, max: f64, ctx_label: &str, c: u32) -> Markup {
    match cell.kind {
        CellKind::Valid => valid_cell(cell, min, max, ctx_label, c),
        CellKind::OverCapacity => html! {
            td class="cell oc" title=(Text(cell.reason.as_deref().unwrap_or(view::OVER_CAPACITY_NOTE))) {
                span class="st" { "Over capacity" (note_ref(cell.footnote)) }
            }
        },
        CellKind::NotMeasured => html! {
            td class="cell nm" title="not measured" { span class="st" { "—" } }
        },
        kind => html! {
            td class="cell err" title=(Text(&cell.reason.clone().unwrap_or_else(|| view::kind_text(kind)))) {
                span class="st" { (Text(&view::kind_text(kind))) (note_ref(cell.footnote)) }
            }
        },
    }
}

/// A measured cell: coloured by its total on the heat scale, its SLO marks in the corner (before
/// its figures, so the figures read the same with or without an SLO), every figure in its hover.
fn valid_cell(cell: &Cell, min: f64, max: f64, ctx_label: &str, c: u32) -> Markup {
    let total = cell.total.unwrap_or(0.0);
    let t = heat(total, min, max);
    let mut class = format!("cell v{}", if t > 0.55 { " hot" } else { "" });
    match cell.slo_met {
        Some(true) => class.push_str(" ok"),
        Some(false) => class.push_str(" miss"),
        None => {}
    }
    if cell.capacity {
        class.push_str(" cap");
    }
    if cell.searched {
        class.push_str(" searched");
    }
    let marks = [
        (cell.slo_met == Some(true), "meets the SLO", "✓"),
        (cell.capacity, "capacity", "★"),
        (cell.searched, "searched", "s"),
    ];
    let marks: Vec<_> = marks.into_iter().filter(|(on, ..)| *on).collect();
    // repeats that disagree are a warning about the figures, like the record's own warnings
    let disagree = cell.precision.as_ref().is_some_and(|p| p.disagree());
    html! {
        td class=(class) style={ "--t:" (format!("{t:.3}")) } title=(Text(&cell_tip(cell, total, ctx_label, c))) {
            @if !marks.is_empty() {
                span class="marks" {
                    @for (i, (_, label, mark)) in marks.iter().enumerate() {
                        @if i > 0 { " " }
                        span aria-label=(label) { (mark) }
                    }
                }
            }
            span class="tot" {
                (Text(&format::fixed1(total)))
                @if !cell.warnings.is_empty() || disagree {
                    span class="warn" aria-label="warning" { " ⚠" }
                }
            }
            span class="ttft" { (Text(&opt(cell.ttft_ms, |v| format!("{} TTFT", format::ms(v))))) }
        }
    }
}

/// A valid cell's hover: its figures, their intervals and precision, its verdict and where it came
/// from, one line each.
fn cell_tip(cell: &Cell, total: f64, ctx_label: &str, c: u32) -> String {
    let prec = cell.precision.as_ref();
    let total_text = prec.and_then(|p| p.total.as_ref()).map_or_else(|| format::fixed1(total), |p| p.text.clone());
    let mut tip = format!("{ctx_label} context, {c} at once: {total_text} tok/s total");
    if let Some(p) = cell.per_request {
        let text = prec.and_then(|p| p.per_request.as_ref()).map_or_else(|| format::fixed1(p), |p| p.text.clone());
        tip.push_str(&format!(", {text} per request"));
    }
    // the intervals, the precision verdict and the repeats: in the hover, not on the cell
    for line in prec.map(|p| p.tip.as_slice()).unwrap_or_default() {
        tip.push_str(&format!("\n{line}"));
    }
    let lines =
        [cell.verdict.as_deref(), cell.roofline.as_deref(), cell.capacity.then_some("the capacity of this context")];
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
    tip
}

/// The legend of the SLO marks, for the marks the matrix shows.
fn matrix_key(m: &Matrix) -> Markup {
    let cells = || m.cells.iter().flatten();
    let mut keys: Vec<Markup> = Vec::new();
    if cells().any(|c| c.slo_met.is_some()) {
        keys.push(html! { "✓ meets the SLO (no mark: misses it)" });
    }
    if cells().any(|c| c.capacity) {
        keys.push(html! { span class="cap" { "★ outlined" } " the capacity: the most users that meet the SLO" });
    }
    if cells().any(|c| c.searched) {
        keys.push(html! { "s measured by the capacity search" });
    }
    if cells().any(|c| c.precision.as_ref().is_some_and(|p| p.total.is_some())) {
        keys.push(html! { "hover a cell for its figures with their 95 % intervals (±)" });
    }
    if cells().any(|c| c.precision.as_ref().is_some_and(|p| p.disagree())) {
        keys.push(html! { "⚠ on a cell whose repeats disagree: the server was not stationary" });
    }
    html! {
        @if !keys.is_empty() {
            p class="matrixkey" {
                @for (i, key) in keys.iter().enumerate() {
                    @if i > 0 { " · " }
                    (key)
                }
            }
        }
    }
}

/// Per-user tok/s against simultaneous requests, one line per context, with the SLO's floor.
fn slo_chart(page: &Page) -> Markup {
    let m = &page.matrix;
    let Some(answer) = &page.answer else {
        return html! {};
    };
    let y_title = match &answer.tok_s_limit {
        Some((_, key)) => format!("{} (per user)", capacity::bound_name(key)),
        None => "median tok/s per user".to_string(),
    };
    let chart = Chart {
        title: "Per-user tok/s against the SLO",
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
    html! {
        div class="charts one" {
            figure { (svg::line_chart_with_limit(&chart, limit.as_ref())) }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn heat_scale() {
        assert_eq!(heat(10.0, 10.0, 1000.0), 0.0);
        assert_eq!(heat(1000.0, 10.0, 1000.0), 1.0);
        assert!((heat(100.0, 10.0, 1000.0) - 0.5).abs() < 1e-9);
    }
}
