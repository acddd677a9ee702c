//! The comparison of 2–4 runs: their capacity answers side by side (with the
//! SLO each used), what differs in their settings and provenance,
//! each run's decode matrix as ratios to the first (B/A per cell, coloured),
//! each figure's difference from the first with its significance (as
//! `speedmatrix compare` prints it), and prefill and decode curves overlaid. Runs are lettered A–D everywhere,
//! with the chart palette's colours, so a legend stays short.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write;

use sm_core::record::{CellStatus, RunRecord};
use sm_report::charts::{PrefillCharts, PrefillRun};
use sm_report::format::{self, NONE};
use sm_report::svg::{self, Chart, Series};
use sm_report::view::{self, DecodeIndex};

use super::{Nav, esc, shell, short_time};
use crate::db::StoredRun;

pub const MAX_RUNS: usize = 4;
const LETTERS: [&str; MAX_RUNS] = ["A", "B", "C", "D"];

pub struct Compared {
    pub stored: StoredRun,
    pub record: RunRecord,
}

fn key(s: &mut String, runs: &[Compared]) {
    s.push_str("<ol class=\"runkey\">");
    for (i, r) in runs.iter().enumerate() {
        let title = view::build(&r.record).title;
        let _ = write!(
            s,
            "<li><span class=\"swatch s{i}\">{}</span><span><a href=\"/runs/{}\">{}</a> <span class=\"caption\">· @{} · {}{}</span></span></li>",
            LETTERS[i],
            esc(&r.stored.id),
            esc(&title),
            esc(&r.stored.uploader),
            esc(&short_time(&r.stored.measured_at)),
            if r.stored.label.is_empty() { String::new() } else { format!(" · {}", esc(&r.stored.label)) },
        );
    }
    s.push_str("</ol>\n");
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
    let labels = |ctxs: Vec<u64>| {
        ctxs.into_iter().map(|c| sm_core::context::label(sm_core::Tokens(c))).collect::<Vec<_>>().join(", ")
    };
    push("Contexts", runs.iter().map(|r| labels(r.record.settings.contexts.clone())).collect());
    push(
        "Concurrency",
        runs.iter()
            .map(|r| r.record.settings.concurrency.iter().map(u32::to_string).collect::<Vec<_>>().join(", "))
            .collect(),
    );
    push("Prefill contexts", runs.iter().map(|r| labels(r.record.settings.prefill_contexts.clone())).collect());
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

fn settings_table(s: &mut String, runs: &[Compared]) {
    s.push_str(
        "<h2 id=\"settings\">Settings and provenance</h2>\n<p class=\"caption\">Rows marked ≠ differ between the runs.</p>\n\
         <div class=\"scroll\"><table class=\"diff\">\n<colgroup><col class=\"name\"></colgroup>\n<thead><tr><th scope=\"col\"></th>",
    );
    for (i, _) in runs.iter().enumerate() {
        let _ = write!(s, "<th scope=\"col\"><span class=\"swatch s{i}\">{}</span></th>", LETTERS[i]);
    }
    s.push_str("</tr></thead>\n<tbody>\n");
    for (name, values) in facts(runs) {
        let differs = values.iter().any(|v| *v != values[0]);
        let _ =
            write!(s, "<tr{}><th scope=\"row\">{}</th>", if differs { " class=\"differs\"" } else { "" }, esc(&name));
        for v in &values {
            if name == "Launch command" {
                let _ = write!(s, "<td><code>{}</code></td>", esc(v));
            } else {
                let _ = write!(s, "<td>{}</td>", esc(v));
            }
        }
        s.push_str("</tr>\n");
    }
    s.push_str("</tbody></table></div>\n");
}

fn valid_total(run: &DecodeIndex, ctx: u64, c: u32) -> Option<f64> {
    run.get(ctx, c).filter(|cell| cell.status() == CellStatus::Valid).and_then(|cell| cell.total_tok_s)
}

fn cell_text(run: &DecodeIndex, ctx: u64, c: u32) -> String {
    match run.get(ctx, c) {
        None => "not measured".into(),
        Some(cell) => view::status_text(cell.status()),
    }
}

/// Contexts (with their labels) and concurrency levels of all runs' matrices.
fn union_axes(runs: &[&Compared]) -> (Vec<(u64, String)>, Vec<u32>) {
    let mut ctxs: BTreeMap<u64, String> = BTreeMap::new();
    let mut cols: BTreeSet<u32> = BTreeSet::new();
    for r in runs {
        for cell in &r.record.decode {
            ctxs.entry(cell.context).or_insert_with(|| cell.label.clone());
            cols.insert(cell.concurrency);
        }
    }
    (ctxs.into_iter().collect(), cols.into_iter().collect())
}

/// B's matrix divided by A's; `a` and `b` index the two runs' cells.
fn ratio_matrix(s: &mut String, a: &DecodeIndex, b: &DecodeIndex, bi: usize, rows: &[(u64, String)], cols: &[u32]) {
    let _ = write!(
        s,
        "<h3 class=\"ratio-title\"><span class=\"swatch s{bi}\">{}</span> / <span class=\"swatch s0\">A</span></h3>\n\
         <div class=\"scroll\"><table class=\"matrix ratio\">\n<thead><tr><th class=\"ctx\">Context</th>",
        LETTERS[bi]
    );
    for c in cols {
        let _ = write!(s, "<th scope=\"col\">{c}</th>");
    }
    s.push_str("</tr></thead>\n<tbody>\n");
    for (ctx, label) in rows {
        let _ = write!(s, "<tr><th class=\"ctx\" scope=\"row\">{}</th>", esc(label));
        for &c in cols {
            match (valid_total(a, *ctx, c), valid_total(b, *ctx, c)) {
                (Some(va), Some(vb)) if va > 0.0 => {
                    let ratio = vb / va;
                    let strength = ratio.log2().abs().min(1.0);
                    let class = if ratio >= 1.0 { "up" } else { "down" };
                    let tip = format!(
                        "{label} context, {c} at once: {} is {} tok/s, A is {} tok/s",
                        LETTERS[bi],
                        format::fixed1(vb),
                        format::fixed1(va)
                    );
                    let _ = write!(
                        s,
                        "<td class=\"cell {class}\" style=\"--r:{strength:.3}\" title=\"{}\"><span class=\"tot\">{:.2}×</span><span class=\"ttft\">{} vs {}</span></td>",
                        esc(&tip),
                        ratio,
                        esc(&format::fixed1(vb)),
                        esc(&format::fixed1(va)),
                    );
                }
                _ => {
                    let tip = format!("A: {}; {}: {}", cell_text(a, *ctx, c), LETTERS[bi], cell_text(b, *ctx, c));
                    let _ = write!(s, "<td class=\"cell nm\" title=\"{}\"><span class=\"st\">—</span></td>", esc(&tip));
                }
            }
        }
        s.push_str("</tr>\n");
    }
    s.push_str("</tbody></table></div>\n");
}

fn decode_section(s: &mut String, runs: &[Compared]) {
    let all: Vec<&Compared> = runs.iter().collect();
    let (rows, cols) = union_axes(&all);
    s.push_str(
        "<h2 id=\"decode-ratios\">Sustained decode, relative to A</h2>\n<p class=\"caption\">total tok/s of each run divided by \
         A's, per cell · green is faster than A, red slower · — where either run has no valid figure</p>\n",
    );
    if rows.is_empty() {
        s.push_str("<p class=\"caption\">None of these runs measured decode cells.</p>\n");
        return;
    }
    let index: Vec<DecodeIndex> = runs.iter().map(|r| DecodeIndex::new(&r.record)).collect();
    for (i, b) in runs.iter().enumerate().skip(1) {
        // each pair on the cells either of the two measured, not all runs' union
        let (pair_rows, pair_cols) = union_axes(&[&runs[0], b]);
        ratio_matrix(s, &index[0], &index[i], i, &pair_rows, &pair_cols);
    }
    s.push_str("<p class=\"ratiokey\"><span>0.5× or slower</span><span class=\"bar\" aria-hidden=\"true\"></span><span>2× or faster</span></p>\n");
    let records: Vec<&RunRecord> = runs.iter().map(|r| &r.record).collect();
    super::compare_diff::section(s, &records, &LETTERS[..runs.len()]);

    s.push_str("<h2 id=\"decode-curves\">Decode curves</h2>\n<p class=\"caption\">total tok/s by simultaneous requests, one chart per context, runs overlaid</p>\n<div class=\"charts\">\n");
    let x_labels: Vec<String> = cols.iter().map(u32::to_string).collect();
    for (ctx, label) in &rows {
        let title = format!("Total tok/s at {label} context");
        let chart = Chart {
            title: &title,
            x_title: "simultaneous requests",
            y_title: "total tok/s",
            x_labels: x_labels.clone(),
            series: index
                .iter()
                .enumerate()
                .map(|(i, r)| Series {
                    name: LETTERS[i].into(),
                    values: cols.iter().map(|&c| valid_total(r, *ctx, c)).collect(),
                    color: Some(i),
                })
                .collect(),
            value_fmt: format::fixed1,
        };
        let _ = writeln!(s, "<figure>{}</figure>", svg::line_chart(&chart));
    }
    s.push_str("</div>\n");
}

fn prefill_section(s: &mut String, runs: &[Compared]) {
    let lines: Vec<PrefillRun> = runs
        .iter()
        .enumerate()
        .map(|(i, r)| PrefillRun { rows: &r.record.prefill, name: Some(LETTERS[i].into()), color: i })
        .collect();
    let charts = PrefillCharts::new(&lines);
    s.push_str("<h2 id=\"prefill-curves\">Prefill curves</h2>\n<p class=\"caption\">cold prompt by context length, runs overlaid</p>\n");
    if charts.is_empty() {
        s.push_str("<p class=\"caption\">None of these runs measured prefill.</p>\n");
        return;
    }
    s.push_str(&charts.html());
}

/// The comparison page of 2–4 runs.
pub fn page(runs: &[Compared]) -> String {
    let mut s = String::new();
    key(&mut s, runs);
    let sides: Vec<super::capacity::Side> = runs
        .iter()
        .enumerate()
        .map(|(i, r)| super::capacity::Side {
            letter: LETTERS[i],
            record: &r.record,
            judged_from: &r.stored.judged_from,
        })
        .collect();
    super::capacity::compare_section(&mut s, &sides);
    settings_table(&mut s, runs);
    decode_section(&mut s, runs);
    prefill_section(&mut s, runs);
    let title = format!("Comparing {} runs", runs.len());
    shell(Nav::Compare, "speedmatrix results · compare", &title, &s)
}

/// The page shown with fewer than two runs chosen: a picker of recent runs.
pub fn picker(recent: &[StoredRun], chosen: &[String], notice: Option<&str>) -> String {
    let mut s = String::new();
    if let Some(n) = notice {
        let _ = writeln!(s, "<p class=\"banner\" role=\"alert\">{}</p>", esc(n));
    }
    s.push_str(
        "<p class=\"caption\">Choose 2 to 4 runs; the first is the baseline (A) the others are divided by.</p>\n",
    );
    if recent.is_empty() {
        s.push_str("<p class=\"empty\">No runs yet. <a href=\"/upload\">Upload one</a>.</p>\n");
        return shell(Nav::Compare, "speedmatrix results · compare", "Compare runs", &s);
    }
    s.push_str("<form method=\"get\" action=\"/compare\">\n<div class=\"scroll\"><table class=\"runs\">\n<thead><tr><th class=\"pick\"></th><th>Model</th><th>GPU</th><th>Engine</th><th>Peak total tok/s</th><th>Measured</th><th>Uploader</th></tr></thead>\n<tbody>\n");
    for r in recent {
        let checked = if chosen.contains(&r.id) { " checked" } else { "" };
        let _ = writeln!(
            s,
            "<tr><td class=\"pick\"><input type=\"checkbox\" name=\"ids\" value=\"{id}\"{checked} aria-label=\"compare {m}\"></td><td class=\"model\"><a href=\"/runs/{id}\">{m}</a></td><td>{g}</td><td>{e}</td><td class=\"num\">{p}</td><td>{t}</td><td>@{u}</td></tr>",
            id = esc(&r.id),
            m = esc(&r.model),
            g = esc(&super::gpu_text(&r.gpu, r.gpu_count)),
            e = esc(&format!("{} {}", r.engine, r.engine_version)),
            p = esc(&if r.peak_tok_s > 0.0 { format::fixed1(r.peak_tok_s) } else { NONE.into() }),
            t = esc(&short_time(&r.measured_at)),
            u = esc(&r.uploader),
        );
    }
    s.push_str(
        "</tbody></table></div>\n<div class=\"toolbar\"><button type=\"submit\">Compare</button></div>\n</form>\n",
    );
    shell(Nav::Compare, "speedmatrix results · compare", "Compare runs", &s)
}
