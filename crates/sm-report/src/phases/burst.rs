//! The burst phase's section of each view (methodology §13.2): a context × concurrency matrix of
//! end-to-end p50, time to the last completion and tok/s (the median over rounds), a table of
//! every figure per cell, a console summary, and `burst.csv` with one row per burst sent.

use std::fmt::Write;

use maud::{Markup, html};
use serde::Serialize;
use sm_core::figures::Figures;
use sm_core::phases::burst::{Burst, BurstPhase};
use sm_core::record::{CellStatus, RunRecord};

use crate::csv::table::{self, Ending, Guarded, Num, Table, guarded, num};
use crate::escape::{Text, markdown_cell as md};
use crate::format::{self, NONE, opt};
use crate::telemetry::CsvColumns;

/// The cells' grid: row labels (with their context), concurrency columns, each cell's summary.
struct Grid {
    rows: Vec<(Option<u64>, String)>,
    cols: Vec<u32>,
    cells: Vec<Vec<Option<Burst>>>,
}

fn grid(phase: &BurstPhase) -> Grid {
    let mut rows: Vec<(Option<u64>, String)> = Vec::new();
    let mut cols: Vec<u32> = Vec::new();
    for (context, label, c) in phase.cells() {
        if !rows.iter().any(|(r, _)| *r == context) {
            // named as every view names a context: `256K (257,984)`; a file's prompts stay `file`
            rows.push((context, context.map_or_else(|| label.clone(), |c| sm_core::context::shown(&label, c))));
        }
        if !cols.contains(&c) {
            cols.push(c);
        }
    }
    rows.sort_by_key(|(c, _)| *c);
    cols.sort_unstable();
    let cells = rows.iter().map(|(ctx, _)| cols.iter().map(|&c| phase.summary(*ctx, c)).collect()).collect();
    Grid { rows, cols, cells }
}

/// The three figures a matrix cell shows.
fn cell_lines(b: &Burst) -> [String; 3] {
    [
        format!("p50 {}", opt(b.e2e_ms.p50, format::ms)),
        format!("last {}", opt(b.last_completion_ms, format::ms)),
        format!("{} tok/s", opt(b.total_tok_s, format::fixed1)),
    ]
}

fn caption(phase: &BurstPhase) -> String {
    let tokens = format::count(phase.max_tokens);
    let eos = if phase.ignore_eos {
        format!("each {tokens} tokens long")
    } else {
        format!("each ending on its own, at most {tokens} tokens")
    };
    let mut text =
        format!("C requests due at once, each read to its end ({eos}); latencies from the instant the burst was due");
    if phase.rounds > 1 {
        let _ = write!(text, "; the median of {} rounds", phase.rounds);
    }
    if let Some(from) = &phase.imported_from {
        let _ = write!(text, "; imported from {from}: figures the file does not have are shown as {NONE}");
    }
    text
}

pub(super) fn html(record: &RunRecord) -> Markup {
    let Some(phase) = &record.phases.burst else { return html! {} };
    let g = grid(phase);
    html! {
        h2 id="bursts" { "Bursts" }
        p class="caption" { (Text(&caption(phase))) }
        div class="scroll" {
            table class="matrix burst" {
                thead { tr { th class="ctx" { "Context" } @for c in &g.cols { th scope="col" { (c) } } } }
                tbody {
                    @for (ri, (_, label)) in g.rows.iter().enumerate() {
                        tr {
                            th class="ctx" scope="row" { (Text(label)) }
                            @for (ci, cell) in g.cells[ri].iter().enumerate() {
                                (html_cell(cell.as_ref(), &format!("{label} context, {} at once", g.cols[ci])))
                            }
                        }
                    }
                }
            }
        }
        p class="caption" { "each cell: end-to-end p50 · time to the last completion · output tok/s over the burst" }
        div class="scroll" {
            table class="all" {
                thead { tr { @for h in detail_header(&g) { th { (h) } } } }
                tbody {
                    @for row in detail_rows(&g) {
                        tr { @for c in &row { td { (Text(c)) } } }
                    }
                }
            }
        }
    }
}

/// A cell's hover text: every figure the burst's table heads and the burst holds (from the
/// table, so a new figure shows here too), and why it is not valid.
fn tip(b: &Burst, cell: &str) -> String {
    let mut t = format!("{cell}: {} of {} completed", format::count(b.completed), format::count(b.requests));
    for f in Burst::FIGURES {
        if let (Some(label), Some(v)) = (f.label, f.of(b)) {
            let _ = write!(t, "\n{label} {}", format::figure(f.unit, Some(v)));
        }
    }
    if b.round > 1 {
        let _ = write!(t, "\nthe median of {} rounds", b.round);
    }
    if let Some(r) = &b.reason {
        let _ = write!(t, "\n{r}");
    }
    t
}

fn html_cell(cell: Option<&Burst>, where_: &str) -> Markup {
    match cell {
        None => html! { td class="cell nm" { "—" } },
        Some(b) if b.status == CellStatus::OverCapacity => html! {
            td class="cell oc" title=(Text(b.reason.as_deref().unwrap_or("over capacity"))) {
                span class="st" { "over capacity" }
            }
        },
        Some(b) => {
            let [e2e, last, tok] = cell_lines(b);
            let valid = b.status == CellStatus::Valid;
            html! {
                td class=(if valid { "cell" } else { "cell err" }) title=(Text(&tip(b, where_))) {
                    @if !valid { span class="st" { (b.status.word()) } }
                    span class="tot" { (Text(&e2e)) }
                    span class="ttft" { (Text(&last)) }
                    span class="ttft" { (Text(&tok)) }
                }
            }
        }
    }
}

/// The detail table's headings: which cell it is, what became of it, then each figure of the
/// burst's table that the page shows, in the table's order.
fn detail_header(g: &Grid) -> Vec<&'static str> {
    let figures = shown(g).into_iter().filter_map(|f| f.label);
    ["Context", "C", "Status", "Completed"].into_iter().chain(figures).collect()
}

/// The figures the detail table shows: a reasoning model's and a run's tool calls only where some
/// burst carries them.
fn shown(g: &Grid) -> Vec<&'static sm_core::figures::Figure<Burst>> {
    super::shown(g.cells.iter().flatten().flatten())
}

fn detail_rows(g: &Grid) -> Vec<Vec<String>> {
    let mut rows = Vec::new();
    for (ri, (_, label)) in g.rows.iter().enumerate() {
        for (ci, cell) in g.cells[ri].iter().enumerate() {
            let Some(b) = cell else { continue };
            let keys = [
                label.clone(),
                g.cols[ci].to_string(),
                status_text(b),
                format!("{} of {}", format::count(b.completed), format::count(b.requests)),
            ];
            let figures = shown(g).into_iter().map(|f| format::figure(f.unit, f.of(b)));
            rows.push(keys.into_iter().chain(figures).collect());
        }
    }
    rows
}

fn status_text(b: &Burst) -> String {
    match (&b.status, &b.reason) {
        (CellStatus::Valid, _) => "valid".into(),
        (status, Some(reason)) => format!("{}: {reason}", status.word()),
        (status, None) => status.word().into(),
    }
}

pub(super) fn markdown(s: &mut String, record: &RunRecord) {
    let Some(phase) = &record.phases.burst else { return };
    let g = grid(phase);
    let _ = writeln!(s, "## Bursts\n\n{}\n", md(&caption(phase)));
    s.push_str("End-to-end p50 / time to the last completion / output tok/s over the burst.\n\n");
    let _ = write!(s, "| Context |");
    for c in &g.cols {
        let _ = write!(s, " {c} |");
    }
    let _ = writeln!(s, "\n|---|{}", "---:|".repeat(g.cols.len()));
    for (ri, (_, label)) in g.rows.iter().enumerate() {
        let _ = write!(s, "| {} |", md(label));
        for cell in &g.cells[ri] {
            let text = match cell {
                None => NONE.to_string(),
                Some(b) if b.status == CellStatus::OverCapacity => "over capacity".into(),
                Some(b) => {
                    let figures = cell_lines(b).join(" / ");
                    if b.status == CellStatus::Valid { figures } else { format!("{}: {figures}", b.status.word()) }
                }
            };
            let _ = write!(s, " {} |", md(&text));
        }
        s.push('\n');
    }
    s.push('\n');
    let header = detail_header(&g);
    let _ = writeln!(s, "| {} |", header.iter().map(|h| md(h)).collect::<Vec<_>>().join(" | "));
    let _ = writeln!(s, "|---|{}", "---:|".repeat(header.len() - 1));
    for row in detail_rows(&g) {
        let _ = writeln!(s, "| {} |", row.iter().map(|c| md(c)).collect::<Vec<_>>().join(" | "));
    }
    s.push('\n');
}

pub(super) fn terminal(s: &mut String, record: &RunRecord, width: usize) {
    let Some(phase) = &record.phases.burst else { return };
    let g = grid(phase);
    let _ = writeln!(
        s,
        "\n{}",
        clip("Bursts (context × requests at once): end-to-end p50 · time to the last completion · tok/s", width)
    );
    for (ri, (_, label)) in g.rows.iter().enumerate() {
        for (ci, cell) in g.cells[ri].iter().enumerate() {
            let Some(b) = cell else { continue };
            let text = match b.status {
                CellStatus::OverCapacity => "over capacity".to_string(),
                CellStatus::Valid => cell_lines(b).join(" · "),
                _ => status_text(b),
            };
            let _ = writeln!(s, "{}", clip(&format!("{label:<8} × {:<4} {text}", g.cols[ci]), width));
        }
    }
}

fn clip(line: &str, width: usize) -> String {
    if line.chars().count() <= width {
        line.to_string()
    } else {
        line.chars().take(width.saturating_sub(1)).chain(['…']).collect()
    }
}

/// The columns of a row of `burst.csv` before the burst's figures: which burst it is, and what
/// became of its requests.
#[derive(Serialize, Default)]
struct CsvKeys<'a> {
    context_tokens: Option<u64>,
    label: Guarded<&'a str>,
    concurrency: u32,
    round: u32,
    status: String,
    reason: Guarded<&'a str>,
    requests: u64,
    completed: u64,
    failed: u64,
}

/// A row of `burst.csv`: the burst's keys, unformatted, then its figure table in order, then the
/// telemetry columns rate.csv has ([`CsvColumns`]).
fn csv_row(b: &Burst) -> (CsvKeys<'_>, Vec<Option<Num>>, CsvColumns) {
    let keys = CsvKeys {
        context_tokens: b.context,
        label: Guarded(&b.label),
        concurrency: b.concurrency,
        round: b.round,
        status: b.status.word().replace(' ', "_"),
        reason: guarded(&b.reason),
        requests: b.requests,
        completed: b.completed,
        failed: b.failed,
    };
    let figures = Burst::FIGURES.iter().map(|f| num(f.of(b))).collect();
    (keys, figures, CsvColumns::of(&b.telemetry))
}

/// The header of `burst.csv`: the keys, each figure's name, the telemetry's columns.
fn csv_header() -> Vec<String> {
    let figures = Burst::FIGURES.iter().map(|f| f.name.to_string());
    table::header::<CsvKeys>().into_iter().chain(figures).chain(table::header::<CsvColumns>()).collect()
}

/// The phase's CSV file, `None` when the phase did not run.
pub(super) fn csv(record: &RunRecord) -> Option<String> {
    let phase = record.phases.burst.as_ref()?;
    let mut file = Table::new(csv_header(), Ending::Lf);
    phase.bursts.iter().for_each(|b| file.row(csv_row(b)));
    Some(file.finish())
}
