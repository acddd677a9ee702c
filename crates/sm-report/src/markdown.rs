//! The page as GitHub-flavoured Markdown, for pasting into issues and pull
//! requests: the same sections, tables instead of charts.

use std::fmt::Write;

use sm_core::record::RunRecord;

use sm_core::context::shown;

use crate::capacity::{USERS_NOTE, usd};
use crate::escape::markdown_cell as md;
use crate::format::{self, opt};
use crate::view::{self, CellKind, Page};

pub fn markdown(record: &RunRecord) -> String {
    let page = view::build(record);
    let mut s = String::new();
    let _ = writeln!(s, "# {}\n", md(&page.title));
    let _ = writeln!(s, "{}\n", page.subtitle.iter().map(|p| md(p)).collect::<Vec<_>>().join(" · "));
    let _ = writeln!(s, "{}\n", page.byline.iter().map(|p| md(p)).collect::<Vec<_>>().join(" · "));
    if let Some(note) = &page.status_note {
        let _ = writeln!(s, "> **{}**\n", md(note));
    }
    // a run of load phases only has no matrix: its sections would be empty tables
    let matrix = record.settings.matrix;
    if matrix {
        answer(&mut s, &page, record);
    }
    replay_answer(&mut s, record);
    facts(&mut s, &page);
    launch(&mut s, &page);
    if matrix {
        prefill(&mut s, &page);
        decode(&mut s, &page, &record.decode);
        crate::frontier::markdown(&mut s, record);
        roofline(&mut s, record);
    }
    crate::phases::markdown(&mut s, record);
    crate::telemetry::markdown(&mut s, record);
    if matrix {
        all(&mut s, &page);
    }
    let _ = writeln!(s, "## Methodology\n");
    for (k, v) in &page.methodology {
        let _ = writeln!(s, "- **{}**: {}", md(k), md(v));
    }
    // the notes on the decode matrix and the measurements table stand under them, once
    for n in &page.import_notes {
        let _ = writeln!(s, "\n{}", md(n));
    }
    s
}

/// Each cell's share of the memory-bandwidth roofline (methodology §14.4), where the run had one.
fn roofline(s: &mut String, record: &RunRecord) {
    let lines = view::roofline::lines(record);
    if lines.is_empty() {
        return;
    }
    let _ = writeln!(
        s,
        "## Memory-bandwidth roofline
"
    );
    for (cell, line) in lines {
        let _ = writeln!(s, "- {}: {}", md(&cell), md(&line));
    }
    let _ = writeln!(s);
}

/// The capacity answer: its sentences, what "users" means, the SLO used, and a table of it.
fn answer(s: &mut String, page: &Page, record: &RunRecord) {
    let Some(a) = &page.answer else {
        return;
    };
    let _ = writeln!(s, "## Capacity\n");
    for line in &a.sentences {
        let _ = writeln!(s, "- {}", md(line));
    }
    let _ = writeln!(s, "\n{}\n\n{}\n", md(USERS_NOTE), md(&a.slo_note));
    let priced = record.settings.cost_per_hour_usd.is_some();
    let mut header = vec!["Context", "Users", "Bounded by", "Proved by", "Fails at", "Fits at most"];
    if priced {
        header.extend(["$ per million tokens", "$ per user-hour"]);
    }
    let rows: Vec<Vec<String>> = record
        .capacity
        .iter()
        .map(|c| {
            let mut row = vec![
                shown(&c.label, c.context),
                format::count(u64::from(c.max_users)),
                c.bounded_by.to_string(),
                opt(c.cell, |n| format!("{n} at once")),
                opt(c.failed_cell, |n| format!("{n} at once")),
                opt(c.fit_limit, |n| format::count(u64::from(n))),
            ];
            if priced {
                row.push(opt(c.usd_per_million_tokens, usd));
                row.push(opt(c.usd_per_user_hour, usd));
            }
            row
        })
        .collect();
    table(s, &header, &rows);
}

/// The capacity answer on a replayed trace, after the matrix's (a replay alone has no matrix).
fn replay_answer(s: &mut String, record: &RunRecord) {
    let Some(a) = crate::phases::replay::answer::headline(record) else {
        return;
    };
    let _ = writeln!(s, "## Capacity on your traffic\n\n- {}\n", md(&a.sentence));
    if let Some(note) = &a.slo_note {
        let _ = writeln!(s, "{}\n", md(note));
    }
}

fn table(s: &mut String, header: &[&str], rows: &[Vec<String>]) {
    let _ = writeln!(s, "| {} |", header.iter().map(|h| md(h)).collect::<Vec<_>>().join(" | "));
    let _ = writeln!(
        s,
        "|{}",
        header.iter().enumerate().map(|(i, _)| if i == 0 { "---|" } else { "---:|" }).collect::<String>()
    );
    for r in rows {
        let _ = writeln!(s, "| {} |", r.iter().map(|c| md(c)).collect::<Vec<_>>().join(" | "));
    }
    s.push('\n');
}

fn facts(s: &mut String, page: &Page) {
    for (title, lines) in [("Hardware", &page.hardware), ("Engine", &page.engine), ("Run", &page.run)] {
        let _ = writeln!(s, "## {title}\n");
        for (k, v) in lines {
            let _ = writeln!(s, "- {}: {}", md(k), md(v));
        }
        s.push('\n');
    }
}

fn launch(s: &mut String, page: &Page) {
    let _ = writeln!(s, "## Launch command\n");
    match &page.launch_command {
        Some(cmd) => {
            // a fence longer than any backtick run inside keeps the block closed
            let longest = cmd.split(|c| c != '`').map(str::len).max().unwrap_or(0);
            let fence = "`".repeat(longest.max(2) + 1);
            let _ = writeln!(s, "{fence}sh\n{}\n{fence}\n", cmd.replace(['\n', '\r'], " "));
        }
        None => s.push_str("unknown\n\n"),
    }
}

fn prefill(s: &mut String, page: &Page) {
    let _ = writeln!(s, "## Prefill\n\nprompt tok/s by context length\n");
    if page.prefill.is_empty() {
        let _ = writeln!(s, "No prefill rows were measured.\n");
        return;
    }
    // a row that is not valid says why in the page's numbered footnotes, under the table
    let rows: Vec<Vec<String>> = page
        .prefill
        .iter()
        .map(|p| {
            let tok_s =
                if p.valid() { opt(p.tok_s, format::kilo) } else { marked(&view::status_text(p.status), p.footnote) };
            vec![p.label.clone(), opt(p.prompt_tokens, format::count), tok_s, opt(p.ttft_ms, format::ms)]
        })
        .collect();
    table(s, &["Context", "Prompt tokens", "Prompt tok/s", "TTFT"], &rows);
    footnotes(s, &page.notes_for(page.prefill.iter().map(|p| p.footnote)));
}

/// A status with the number of the footnote that explains it.
fn marked(text: &str, footnote: Option<usize>) -> String {
    match footnote {
        Some(n) => format!("{text} [{n}]"),
        None => text.to_string(),
    }
}

fn footnotes(s: &mut String, notes: &[(usize, &str)]) {
    for (n, f) in notes {
        let _ = writeln!(s, "{n}. {}", md(f));
    }
    if !notes.is_empty() {
        s.push('\n');
    }
}

fn decode(s: &mut String, page: &Page, decode_cells: &[sm_core::record::DecodeCell]) {
    let m = &page.matrix;
    let _ = writeln!(
        s,
        "## Sustained decode\n\ntotal tok/s · rows are context length, columns are simultaneous requests\n"
    );
    if m.rows.is_empty() {
        let _ = writeln!(s, "No decode cells were measured.\n");
        return;
    }
    let cols: Vec<String> = std::iter::once("Context".to_string()).chain(m.cols.iter().map(u32::to_string)).collect();
    let header: Vec<&str> = cols.iter().map(String::as_str).collect();
    let rows: Vec<Vec<String>> = m
        .rows
        .iter()
        .enumerate()
        .map(|(ri, (_, label))| {
            std::iter::once(label.clone())
                .chain(m.cells[ri].iter().map(|c| match c.kind {
                    CellKind::Valid => format!(
                        "{} ({})",
                        opt(c.total, format::fixed1),
                        opt(c.ttft_ms, |v| format!("{} TTFT", format::ms(v)))
                    ),
                    CellKind::NotMeasured => format::NONE.to_string(),
                    kind => marked(&view::kind_text(kind), c.footnote),
                }))
                .collect()
        })
        .collect();
    table(s, &header, &rows);
    for note in &page.decode_notes {
        let _ = writeln!(s, "{}\n", md(note));
    }
    footnotes(s, &page.notes_for(m.cells.iter().flatten().chain(m.listed.iter().map(|l| &l.cell)).map(|c| c.footnote)));
    let spec: Vec<String> = m.cells.iter().flatten().filter_map(|c| c.spec_decode.clone()).collect();
    if !spec.is_empty() {
        let lines = crate::spec_decode::markdown_lines(decode_cells);
        let _ = writeln!(s, "Speculative decoding per cell (methodology §14.2):\n");
        for l in lines {
            let _ = writeln!(s, "- {}", md(&l));
        }
        let _ = writeln!(s);
    }
    let gpu = crate::gpu::markdown_lines(decode_cells);
    if !gpu.is_empty() {
        let _ = writeln!(s, "GPU power and energy per cell (methodology §14.3):\n");
        for l in gpu {
            let _ = writeln!(s, "- {}", md(&l));
        }
        let _ = writeln!(s);
    }
    let gauges = crate::server_metrics::markdown_lines(decode_cells);
    if !gauges.is_empty() {
        let _ = writeln!(s, "The server's gauges per cell, from its /metrics (methodology §14.1):\n");
        for l in gauges {
            let _ = writeln!(s, "- {}", md(&l));
        }
        let _ = writeln!(s);
    }
}

fn all(s: &mut String, page: &Page) {
    let _ = writeln!(s, "## All measurements\n\n{}\n", md(view::MEASUREMENTS_NOTE));
    let rows: Vec<Vec<String>> = page
        .measurements
        .iter()
        .enumerate()
        .map(|(i, r)| {
            // a figure with an interval reads `401.3 ± 6.0`
            let pms = page.precision.pm.get(i);
            let shown = r.iter().enumerate().map(|(col, v)| {
                pms.and_then(|p| p.iter().find(|(c, _)| *c == col)).map_or_else(|| v.clone(), |(_, pm)| pm.text.clone())
            });
            shown
                .chain(page.figure_measurements.get(i).into_iter().flatten().cloned())
                .chain(page.slo_measurements.get(i).into_iter().flatten().cloned())
                .chain(page.precision.rows.get(i).into_iter().flatten().map(|m| m.text.clone()))
                .collect()
        })
        .collect();
    let header = view::COLUMNS.iter().chain(&page.figure_columns).chain(&page.slo_columns);
    let header: Vec<&str> = header.chain(&page.precision.columns).copied().collect();
    table(s, &header, &rows);
    for note in &page.precision.notes {
        let _ = writeln!(s, "{}\n", md(note));
    }
}
