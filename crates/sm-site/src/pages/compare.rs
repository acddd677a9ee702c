//! The comparison of 2–4 runs: their capacity answers side by side (with the
//! SLO each used), what differs in their settings and provenance,
//! each run's decode matrix as ratios to the first (B/A per cell, coloured),
//! each figure's difference from the first with its significance (as
//! `speedmatrix compare` prints it), and prefill and decode curves overlaid. Runs are lettered A–D everywhere,
//! with the chart palette's colours, so a legend stays short.

use std::collections::{BTreeMap, BTreeSet};

use maud::{Markup, html};

use sm_core::context::shown;
use sm_core::plan::planned_label;
use sm_core::record::{CellStatus, PlanKind, RunRecord};
use sm_report::charts::{PrefillCharts, PrefillRun};
use sm_report::compare::{Aligned, align};
use sm_report::format::{self, NONE};
use sm_report::svg::{self, Chart, Series};
use sm_report::view::{self, DecodeIndex};

use super::{Nav, banner, compare_order_script, shell, short_time, swatch};
use crate::db::StoredRun;

pub const MAX_RUNS: usize = 4;

/// What an id in the comparison's address may be (the site gives 12 hex digits): letters, digits,
/// `-` and `_`, at most 64; anything else is refused before the database is asked.
pub fn is_run_id(id: &str) -> bool {
    (1..=64).contains(&id.len()) && id.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
}
const LETTERS: [&str; MAX_RUNS] = ["A", "B", "C", "D"];

pub struct Compared {
    pub stored: StoredRun,
    pub record: RunRecord,
}

/// The address of this comparison with run `i` first (the baseline), the others in their order.
pub fn with_baseline(runs: &[Compared], i: usize) -> String {
    let ids: Vec<&str> =
        std::iter::once(i).chain((0..runs.len()).filter(|&j| j != i)).map(|j| runs[j].stored.id.as_str()).collect();
    format!("/compare?ids={}", super::url_encode(&ids.join(",")))
}

fn key(runs: &[Compared]) -> Markup {
    html! {
        p.caption { "A is the baseline: the first run chosen. Every other run is compared with it." }
        ol.runkey {
            @for (i, r) in runs.iter().enumerate() {
                li {
                    (swatch(i, LETTERS[i]))
                    span {
                        a href={ "/runs/" (r.stored.id) } { (view::build(&r.record).title) }
                        " "
                        span.caption {
                            "· @" (r.stored.uploader) " · " (short_time(&r.stored.measured_at))
                            @if !r.stored.label.is_empty() { " · " (r.stored.label) }
                            @if i == 0 {
                                " · baseline"
                            } @else {
                                " · " a.rebase href=(with_baseline(runs, i)) { "make this the baseline" }
                            }
                        }
                    }
                }
            }
        }
    }
}

/// One of the report page's fact sections (Hardware, Engine, Run).
type Section = fn(&view::Page) -> &Vec<(String, String)>;

/// Rows of the settings and provenance table: `(section, name, value per run)`.
fn facts(runs: &[Compared]) -> Vec<(String, Vec<String>)> {
    let pages: Vec<view::Page> = runs.iter().map(|r| view::build(&r.record)).collect();
    let mut rows: Vec<(String, Vec<String>)> = Vec::new();
    let mut push = |name: &str, values: Vec<String>| rows.push((name.to_string(), values));
    push("Uploader", runs.iter().map(|r| format!("@{}", r.stored.uploader)).collect());
    push("Label", runs.iter().map(|r| r.record.label.clone().unwrap_or_else(|| NONE.into())).collect());
    push("Measured", runs.iter().map(|r| short_time(&r.stored.measured_at)).collect());
    let sections: [Section; 3] = [|p| &p.hardware, |p| &p.engine, |p| &p.run];
    for section in sections {
        // every name any run has, in first-seen order
        let mut names: Vec<String> = Vec::new();
        for p in &pages {
            for (k, _) in section(p) {
                if !names.contains(k) {
                    names.push(k.clone());
                }
            }
        }
        for name in names {
            let values = pages
                .iter()
                .map(|p| {
                    section(p).iter().find(|(k, _)| *k == name).map_or_else(|| NONE.to_string(), |(_, v)| v.clone())
                })
                .collect();
            push(&name, values);
        }
    }
    // each context by the one name every page gives it: `256K (257,984)`, never `251K`
    let labels = |r: &RunRecord, kind: PlanKind, ctxs: &[u64]| {
        ctxs.iter().map(|&c| shown(&planned_label(&r.plan, kind, c), c)).collect::<Vec<_>>().join(", ")
    };
    push("Contexts", runs.iter().map(|r| labels(&r.record, PlanKind::Decode, &r.record.settings.contexts)).collect());
    push(
        "Concurrency",
        runs.iter()
            .map(|r| r.record.settings.concurrency.iter().map(u32::to_string).collect::<Vec<_>>().join(", "))
            .collect(),
    );
    push(
        "Prefill contexts",
        runs.iter().map(|r| labels(&r.record, PlanKind::Prefill, &r.record.settings.prefill_contexts)).collect(),
    );
    push("API", runs.iter().map(|r| format!("{:?}", r.record.settings.api).to_lowercase()).collect());
    push("Prompt source", runs.iter().map(|r| r.record.settings.prompt_source.name().to_string()).collect());
    push(
        "Capacity rule",
        runs.iter()
            .map(|r| {
                serde_json::to_value(r.record.settings.capacity_rule)
                    .ok()
                    .and_then(|v| v.as_str().map(str::to_string))
                    .unwrap_or_default()
            })
            .collect(),
    );
    push(
        "Launch command",
        pages.iter().map(|p| p.launch_command.clone().unwrap_or_else(|| "unknown".into())).collect(),
    );
    rows
}

fn settings_table(runs: &[Compared]) -> Markup {
    html! {
        h2 id="settings" { "Settings and provenance" }
        p.caption { "Rows marked ≠ differ between the runs." }
        div.scroll { table.diff {
            colgroup { col.name; }
            thead { tr { th scope="col" {} @for i in 0..runs.len() { th scope="col" { (swatch(i, LETTERS[i])) } } } }
            tbody {
                @for (name, values) in facts(runs) {
                    tr class=[values.iter().any(|v| *v != values[0]).then_some("differs")] {
                        th scope="row" { (name) }
                        @for v in &values {
                            td { @if name == "Launch command" { code { (v) } } @else { (v) } }
                        }
                    }
                }
            }
        } }
    }
}

fn valid_total(run: &DecodeIndex, ctx: Option<u64>, c: u32) -> Option<f64> {
    run.get(ctx?, c).filter(|cell| cell.status() == CellStatus::Valid).and_then(|cell| cell.total_tok_s)
}

fn cell_text(run: &DecodeIndex, ctx: Option<u64>, c: u32) -> String {
    match ctx.and_then(|ctx| run.get(ctx, c)) {
        None => "not measured".into(),
        Some(cell) => view::status_text(cell.status()),
    }
}

/// The runs' decode contexts lined up (the nearest within 1 % of each other are one row, named
/// as every page names them) and the concurrency levels of all their matrices.
fn union_axes(runs: &[&Compared]) -> (Vec<Aligned>, Vec<u32>) {
    let mut cols: BTreeSet<u32> = BTreeSet::new();
    let contexts: Vec<Vec<(u64, String)>> = runs
        .iter()
        .map(|r| {
            let mut ctxs: BTreeMap<u64, String> = BTreeMap::new();
            for cell in &r.record.decode {
                ctxs.entry(cell.context).or_insert_with(|| cell.label.clone());
                cols.insert(cell.concurrency);
            }
            ctxs.into_iter().collect()
        })
        .collect();
    (align(&contexts), cols.into_iter().collect())
}

/// B's matrix divided by A's; `a` and `b` index the two runs' cells, `rows` are their contexts
/// lined up (A's first).
fn ratio_matrix(a: &DecodeIndex, b: &DecodeIndex, bi: usize, rows: &[Aligned], cols: &[u32]) -> Markup {
    html! {
        h3.ratio-title { (swatch(bi, LETTERS[bi])) " / " (swatch(0, "A")) }
        div.scroll { table class="matrix ratio" {
            thead { tr { th.ctx { "Context" } @for c in cols { th scope="col" { (c) } } } }
            tbody {
                @for row in rows {
                    tr {
                        th.ctx scope="row" { (row.name) }
                        @for &c in cols { (ratio_cell(a, b, bi, row, c)) }
                    }
                }
            }
        } }
    }
}

/// One cell of B's matrix divided by A's: the ratio, coloured by how far it is from 1, or a dash
/// with why where either run has no valid figure.
fn ratio_cell(a: &DecodeIndex, b: &DecodeIndex, bi: usize, row: &Aligned, c: u32) -> Markup {
    let (xa, xb) = (row.at[0], row.at[1]);
    match (valid_total(a, xa, c), valid_total(b, xb, c)) {
        (Some(va), Some(vb)) if va > 0.0 => {
            let ratio = vb / va;
            let strength = ratio.log2().abs().min(1.0);
            let class = if ratio >= 1.0 { "up" } else { "down" };
            let (fb, fa) = (format::fixed1(vb), format::fixed1(va));
            let tip = format!("{} context, {c} at once: {} is {fb} tok/s, A is {fa} tok/s", row.name, LETTERS[bi]);
            html! {
                td class={ "cell " (class) } style={ "--r:" (format!("{strength:.3}")) } title=(tip) {
                    span.tot { (format!("{ratio:.2}×")) }
                    span.ttft { (fb) " vs " (fa) }
                }
            }
        }
        _ => {
            let tip = format!("A: {}; {}: {}", cell_text(a, xa, c), LETTERS[bi], cell_text(b, xb, c));
            html! { td class="cell nm" title=(tip) { span.st { "—" } } }
        }
    }
}

fn decode_section(runs: &[Compared]) -> Markup {
    let all: Vec<&Compared> = runs.iter().collect();
    let (rows, cols) = union_axes(&all);
    let index: Vec<DecodeIndex> = runs.iter().map(|r| DecodeIndex::new(&r.record)).collect();
    let records: Vec<&RunRecord> = runs.iter().map(|r| &r.record).collect();
    html! {
        h2 id="decode-ratios" { "Sustained decode, relative to A" }
        p.caption {
            "total tok/s of each run divided by A's, per cell · green is faster than A, red slower · — where \
             either run has no valid figure · contexts within 1 % of each other are one row (A's ≈ the other's)"
        }
        @if rows.is_empty() {
            p.caption { "None of these runs measured decode cells." }
        } @else {
            @for (i, b) in runs.iter().enumerate().skip(1) {
                // each pair on the cells either of the two measured, not all runs' union
                @let (pair_rows, pair_cols) = union_axes(&[&runs[0], b]);
                (ratio_matrix(&index[0], &index[i], i, &pair_rows, &pair_cols))
            }
            p.ratiokey { span { "0.5× or slower" } span.bar aria-hidden="true" {} span { "2× or faster" } }
            (super::compare_diff::section(&records, &LETTERS[..runs.len()]))
            (decode_curves(&index, &rows, &cols))
        }
    }
}

/// Total tok/s by simultaneous requests, a chart per context with every run's line.
fn decode_curves(index: &[DecodeIndex], rows: &[Aligned], cols: &[u32]) -> Markup {
    let x_labels: Vec<String> = cols.iter().map(u32::to_string).collect();
    let chart = |row: &Aligned| {
        let title = format!("Total tok/s at {} context", row.name);
        let series = index
            .iter()
            .enumerate()
            .map(|(i, r)| Series {
                name: LETTERS[i].into(),
                values: cols.iter().map(|&c| valid_total(r, row.at[i], c)).collect(),
                color: Some(i),
            })
            .collect();
        let chart = Chart {
            title: &title,
            x_title: "simultaneous requests",
            y_title: "total tok/s",
            x_labels: x_labels.clone(),
            series,
            value_fmt: format::fixed1,
        };
        svg::line_chart(&chart)
    };
    html! {
        h2 id="decode-curves" { "Decode curves" }
        p.caption { "total tok/s by simultaneous requests, one chart per context, runs overlaid" }
        div.charts {
            // sm_report::svg's charts are maud markup too: their text is escaped where it is spliced
            @for row in rows { figure { (chart(row)) } }
        }
    }
}

fn prefill_section(runs: &[Compared]) -> Markup {
    let lines: Vec<PrefillRun> = runs
        .iter()
        .enumerate()
        .map(|(i, r)| PrefillRun { rows: &r.record.prefill, name: Some(LETTERS[i].into()), color: i })
        .collect();
    let charts = PrefillCharts::new(&lines);
    html! {
        h2 id="prefill-curves" { "Prefill curves" }
        p.caption { "cold prompt by context length, runs overlaid" }
        @if charts.is_empty() {
            p.caption { "None of these runs measured prefill." }
        } @else {
            (charts.html())
        }
    }
}

/// The comparison page of 2–4 runs.
pub fn page(runs: &[Compared]) -> String {
    let sides: Vec<super::capacity::Side> = runs
        .iter()
        .enumerate()
        .map(|(i, r)| super::capacity::Side {
            letter: LETTERS[i],
            record: &r.record,
            judged_from: &r.stored.judged_from,
        })
        .collect();
    let body = html! {
        (key(runs))
        (super::capacity::compare_section(&sides))
        (settings_table(runs))
        (decode_section(runs))
        (prefill_section(runs))
    };
    let title = format!("Comparing {} runs", runs.len());
    shell(Nav::Compare, "speedmatrix results · compare", &title, body)
}

fn picker_row(r: &StoredRun, chosen: &[String]) -> Markup {
    let peak = if r.peak_tok_s > 0.0 { format::fixed1(r.peak_tok_s) } else { NONE.into() };
    html! {
        tr {
            td.pick {
                input type="checkbox" form="compare" name="ids" value=(r.id) checked[chosen.contains(&r.id)]
                    aria-label={ "compare " (r.model) };
            }
            td.model { a href={ "/runs/" (r.id) } { (r.model) } }
            td { (super::gpu_text(&r.gpu, r.gpu_count)) }
            td { (r.engine) " " (r.engine_version) }
            td.num { (peak) }
            td { (short_time(&r.measured_at)) }
            td { "@" (r.uploader) }
        }
    }
}

/// The page shown with fewer than two runs chosen: a picker of recent runs.
pub fn picker(recent: &[StoredRun], chosen: &[String], notice: Option<&str>) -> String {
    let heads = ["Model", "GPU", "Engine", "Peak total tok/s", "Measured", "Uploader"];
    let body = html! {
        @if let Some(n) = notice { (banner(n)) }
        p.caption { "Choose 2 to 4 runs; the first you tick is the baseline (A) the others are divided by." }
        @if recent.is_empty() {
            p.empty { "No runs yet. " a href="/upload" { "Upload one" } "." }
        } @else {
            form #compare method="get" action="/compare" {
                div.scroll { table.runs {
                    thead { tr { th.pick {} @for h in heads { th { (h) } } } }
                    tbody { @for r in recent { (picker_row(r, chosen)) } }
                } }
                div.toolbar { button type="submit" { "Compare" } }
            }
            (compare_order_script())
        }
    };
    shell(Nav::Compare, "speedmatrix results · compare", "Compare runs", body)
}
