//! A comparison of runs as the terminal, a CI comment (Markdown) and a program (JSON) read it.
//! Each run after the first is compared with the first (A, the baseline); the gate's failures are
//! listed by run, cell and bound.

use std::fmt::Write;

use serde_json::{Value, json};
use sm_core::record::RunRecord;

use super::gate::{Failure, Gate, Why};
use super::{CapacityPair, CellComparison, Comparison, Figure, FigureDiff, Outcome, Significance, compare};
use crate::escape::markdown_cell;
use crate::{format, view};

/// The JSON output's format name; a change that is not an addition bumps it.
pub const JSON_FORMAT: &str = "speedmatrix.compare/1";

/// Runs A, B, C… lettered in order.
pub const LETTERS: [&str; 26] = [
    "A", "B", "C", "D", "E", "F", "G", "H", "I", "J", "K", "L", "M", "N", "O", "P", "Q", "R", "S", "T", "U", "V", "W",
    "X", "Y", "Z",
];

/// One run of the comparison: where it came from (as the user named it) and its record.
pub struct Run {
    pub source: String,
    pub record: RunRecord,
}

/// Every run after the first compared with the first, and the gate's verdict.
pub struct Report<'a> {
    pub runs: &'a [Run],
    /// One per run after the first.
    pub comparisons: Vec<Comparison>,
    pub gate: Option<&'a Gate>,
    /// One list per comparison.
    pub failures: Vec<Vec<Failure>>,
}

impl<'a> Report<'a> {
    /// `runs[0]` is the baseline; at most 26 runs (one letter each).
    pub fn new(runs: &'a [Run], gate: Option<&'a Gate>) -> Report<'a> {
        let runs = &runs[..runs.len().min(LETTERS.len())];
        let comparisons: Vec<Comparison> = runs.iter().skip(1).map(|b| compare(&runs[0].record, &b.record)).collect();
        let failures = comparisons.iter().map(|c| gate.map(|g| g.check(c)).unwrap_or_default()).collect();
        Report { runs, comparisons, gate, failures }
    }

    /// No cell of any comparison failed the gate (true without a gate).
    pub fn passed(&self) -> bool {
        self.failures.iter().all(Vec::is_empty)
    }

    fn any(&self, s: Significance) -> bool {
        self.comparisons.iter().any(|c| c.any(s))
    }
}

/// A difference as printed: `+5.1 %`, `-0.3 %`, `—` when the baseline is 0.
pub fn pct_text(pct: Option<f64>) -> String {
    match pct {
        Some(p) if p.is_finite() => {
            let s = format!("{:+.1} %", p);
            // -0.04 rounds to "-0.0 %", which reads as a fall
            if s == "-0.0 %" { "+0.0 %".into() } else { s }
        }
        _ => format::NONE.into(),
    }
}

/// A figure's difference with its mark: `-5.1 %*`, `+0.2 %`, `+0.3 %?`; `— (n < 6)` where either
/// figure rests on fewer requests than a change in it needs (methodology §12.5).
pub fn diff_text(d: &FigureDiff) -> String {
    match d.figure.min_requests().filter(|_| d.too_few) {
        Some(min) => format!("{} (n < {min})", format::NONE),
        None => format!("{}{}", pct_text(d.pct), d.significance.mark()),
    }
}

/// What `— (n < 6)` means, for legends and tooltips.
pub const TOO_FEW_MEANING: &str = "n < 6 (or 36): TTFT (and TTFA, TTFTC) has one sample per request, and a run's cell rests on \
     fewer requests than its percentile's interval needs (6 for p50, 36 for p90), so no change is given";

/// The requests each run's cell rests on: `40/38`, `?` where a run does not say.
pub fn requests_text(requests: (Option<u64>, Option<u64>)) -> String {
    let n = |r: Option<u64>| r.map_or_else(|| "?".to_string(), |n| n.to_string());
    format!("{}/{}", n(requests.0), n(requests.1))
}

/// What a cell that was not compared says in place of its figures; `b` is the other run's letter.
pub fn outcome_text(outcome: &Outcome, b: &str) -> String {
    match outcome {
        Outcome::Compared(_) => String::new(),
        Outcome::NotValid { a, b: sb } => {
            format!("not compared: {} in A, {} in {b}", a.word(), sb.word())
        }
        Outcome::OnlyInA(s) => format!("only in A ({})", s.word()),
        Outcome::OnlyInB(s) => format!("only in {b} ({})", s.word()),
    }
}

/// A capacity answer as a table prints it: `11 (slo:tok_s_p10)`.
pub fn capacity_text(c: &sm_core::answer::Capacity) -> String {
    format!("{} ({})", c.max_users, c.bounded_by)
}

/// What failed, as one line: `1K × 4: total_tok_s -5.1 % (bound total_tok_s<-3%)`.
pub fn failure_text(f: &Failure) -> String {
    let cell = format!("{} × {}", f.label, f.concurrency);
    match &f.why {
        Why::Bound { bound, pct } => {
            format!("{cell}: {} {} is past {bound} and beyond the noise", bound.figure.name(), pct_text(Some(*pct)))
        }
        Why::Lost { status } => format!("{cell}: valid in A, {} in this run", status.word()),
    }
}

/// Text from a record, safe in a terminal: no control characters.
fn plain(text: &str) -> String {
    text.chars().map(|c| if c.is_control() { ' ' } else { c }).collect()
}

/// A run as its key line names it: source, title, label, date.
fn run_line(run: &Run) -> String {
    let r = &run.record;
    let mut line = format!("{}  {}", plain(&run.source), plain(&view::build(r).title));
    if let Some(label) = r.label.as_deref().filter(|l| !l.is_empty()) {
        let _ = write!(line, " · {}", plain(label));
    }
    let _ = write!(line, " · {}", plain(&format::date(&r.started)));
    line
}

fn counts(c: &Comparison, b: &str) -> String {
    let n = |f: fn(&Outcome) -> bool| c.cells.iter().filter(|x| f(&x.outcome)).count();
    let mut parts = vec![format!("{} cells compared", n(|o| matches!(o, Outcome::Compared(_))))];
    for (what, k) in [
        ("not valid in both", n(|o| matches!(o, Outcome::NotValid { .. }))),
        ("only in A", n(|o| matches!(o, Outcome::OnlyInA(_)))),
        ("only in ", n(|o| matches!(o, Outcome::OnlyInB(_)))),
    ] {
        if k > 0 {
            let what = if what.ends_with(' ') { format!("{what}{b}") } else { what.to_string() };
            parts.push(format!("{k} {what}"));
        }
    }
    parts.join(", ")
}

/// The figures' texts of a compared cell, `—` where either run lacks one.
fn figure_texts(figures: &[Figure], diffs: &[FigureDiff]) -> Vec<String> {
    figures
        .iter()
        .map(|f| diffs.iter().find(|d| d.figure == *f).map_or_else(|| format::NONE.to_string(), diff_text))
        .collect()
}

fn legend(report: &Report) -> Vec<String> {
    let mut out = vec![format!(
        "differences in % of A; requests: each run's requests in the cell (A/B); contexts within 1 % are paired \
         (A's ≈ the other's); * {}",
        Significance::Significant.meaning()
    )];
    if report.any(Significance::NoInterval) {
        out.push(format!("? {}", Significance::NoInterval.meaning()));
    }
    if report.comparisons.iter().any(|c| c.compared().any(|(_, f)| f.iter().any(|d| d.too_few))) {
        out.push(TOO_FEW_MEANING.to_string());
    }
    out
}

fn gate_lines(report: &Report, letter_of: impl Fn(usize) -> String) -> Vec<String> {
    let Some(gate) = report.gate else { return Vec::new() };
    let failed: usize = report.failures.iter().map(Vec::len).sum();
    let mut out = vec![if failed == 0 {
        format!("--fail-on {gate}: passed (no significant difference past a bound)")
    } else {
        format!("--fail-on {gate}: FAILED ({failed} failure{})", if failed == 1 { "" } else { "s" })
    }];
    for (i, failures) in report.failures.iter().enumerate() {
        out.extend(failures.iter().map(|f| format!("{} {}", letter_of(i + 1), plain(&failure_text(f)))));
    }
    out
}

/// Left-aligned first columns, right-aligned figures, two spaces between. A shorter row (a cell
/// that was not compared) ends in a note that runs on past the columns, left-aligned, and does not
/// widen them.
fn table(rows: &[Vec<String>], left: usize) -> String {
    let full = rows[0].len();
    let widths: Vec<usize> = (0..full)
        .map(|i| {
            let width = |r: &Vec<String>| if r.len() == full || i + 1 < r.len() { r[i].chars().count() } else { 0 };
            rows.iter().filter(|r| i < r.len()).map(width).max().unwrap_or(0)
        })
        .collect();
    let mut out = String::new();
    for row in rows {
        let mut line = String::new();
        for (i, cell) in row.iter().enumerate() {
            let pad = widths[i].saturating_sub(cell.chars().count());
            if i > 0 {
                line.push_str("  ");
            }
            if i < left || row.len() < widths.len() {
                line.push_str(cell);
                line.push_str(&" ".repeat(pad));
            } else {
                line.push_str(&" ".repeat(pad));
                line.push_str(cell);
            }
        }
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out
}

fn text_rows(c: &Comparison, b: &str) -> Vec<Vec<String>> {
    let figures = c.figures();
    let mut rows = vec![
        ["context", "users", "requests"]
            .iter()
            .map(|s| s.to_string())
            .chain(figures.iter().map(|f| f.title().to_string()))
            .collect::<Vec<_>>(),
    ];
    for cell in &c.cells {
        let mut row = vec![plain(&cell.label), cell.concurrency.to_string(), requests_text(cell.requests)];
        match &cell.outcome {
            Outcome::Compared(d) => row.extend(figure_texts(&figures, d)),
            other => row.push(outcome_text(other, b)),
        }
        rows.push(row);
    }
    rows
}

fn capacity_rows(pairs: &[CapacityPair], b: &str) -> Vec<Vec<String>> {
    let mut rows = vec![vec!["context".to_string(), "A".to_string(), b.to_string()]];
    rows.extend(pairs.iter().map(|p| vec![plain(&p.label), capacity_text(&p.a), capacity_text(&p.b)]));
    rows
}

/// For a terminal.
pub fn text(report: &Report) -> String {
    let mut s = String::new();
    for (i, run) in report.runs.iter().enumerate() {
        let _ = writeln!(s, "{}  {}", LETTERS[i], run_line(run));
    }
    for (i, c) in report.comparisons.iter().enumerate() {
        let letter = LETTERS[i + 1];
        let _ = writeln!(s, "\n{letter} compared with A: {}", counts(c, letter));
        s.push_str(&table(&text_rows(c, letter), 2));
        if !c.capacity.is_empty() {
            let _ = writeln!(s, "\ncapacity, max users (bounded by):");
            s.push_str(&table(&capacity_rows(&c.capacity, letter), 1));
        }
    }
    s.push('\n');
    for line in legend(report).into_iter().chain(gate_lines(report, |i| LETTERS[i].to_string())) {
        let _ = writeln!(s, "{line}");
    }
    s
}

fn md_row(cells: &[String]) -> String {
    format!("| {} |\n", cells.join(" | "))
}

fn md_cell_row(figures: &[Figure], cell: &CellComparison, b: &str, failed: bool) -> String {
    let mut row = vec![markdown_cell(&cell.label), cell.concurrency.to_string(), requests_text(cell.requests)];
    match &cell.outcome {
        Outcome::Compared(diffs) => row.extend(figures.iter().map(|f| match diffs.iter().find(|d| d.figure == *f) {
            None => format::NONE.to_string(),
            Some(d) if d.significance == Significance::Significant => {
                format!("**{}**", markdown_cell(&diff_text(d)))
            }
            Some(d) => markdown_cell(&diff_text(d)),
        })),
        other => {
            row.push(markdown_cell(&outcome_text(other, b)));
            row.extend(std::iter::repeat_n(String::new(), figures.len() - 1));
        }
    }
    if failed {
        row[0] = format!("❌ {}", row[0]);
    }
    md_row(&row)
}

/// For a CI comment (GitHub-flavoured Markdown); significant differences in bold.
pub fn markdown(report: &Report) -> String {
    let mut s = String::from("## speedmatrix compare\n\n");
    for (i, run) in report.runs.iter().enumerate() {
        let _ = writeln!(s, "- **{}** {}", LETTERS[i], markdown_cell(&run_line(run)));
    }
    for (i, c) in report.comparisons.iter().enumerate() {
        let letter = LETTERS[i + 1];
        let _ = writeln!(s, "\n### {letter} compared with A\n\n{}\n", counts(c, letter));
        let figures = c.figures();
        let head: Vec<String> = ["Context", "Users", "Requests"]
            .iter()
            .map(|h| h.to_string())
            .chain(figures.iter().map(|f| f.title().to_string()))
            .collect();
        s.push_str(&md_row(&head));
        let _ = writeln!(s, "|---|{}", "---:|".repeat(head.len() - 1));
        for cell in &c.cells {
            let failed =
                report.failures[i].iter().any(|f| f.context == cell.context && f.concurrency == cell.concurrency);
            s.push_str(&md_cell_row(&figures, cell, letter, failed));
        }
        if !c.capacity.is_empty() {
            let _ = write!(s, "\nCapacity, max users (bounded by):\n\n| Context | A | {letter} |\n|---|---:|---:|\n");
            for p in &c.capacity {
                s.push_str(&md_row(&[
                    markdown_cell(&p.label),
                    markdown_cell(&capacity_text(&p.a)),
                    markdown_cell(&capacity_text(&p.b)),
                ]));
            }
        }
    }
    s.push('\n');
    for line in legend(report) {
        let _ = writeln!(s, "{}  ", markdown_cell(&line));
    }
    let gate = gate_lines(report, |i| LETTERS[i].to_string());
    if let Some((head, rest)) = gate.split_first() {
        let _ = writeln!(s, "\n**{}**\n", markdown_cell(head));
        for line in rest {
            let _ = writeln!(s, "- {}", markdown_cell(line));
        }
    }
    s
}

fn json_cell(cell: &CellComparison) -> Value {
    let mut v = json!({ "context": cell.context, "label": cell.label, "concurrency": cell.concurrency,
                        "requests": { "a": cell.requests.0, "b": cell.requests.1 } });
    if let Some(b) = cell.b_context {
        v["b_context"] = json!(b);
    }
    match &cell.outcome {
        Outcome::Compared(diffs) => {
            v["outcome"] = json!("compared");
            let figures: serde_json::Map<String, Value> = diffs
                .iter()
                .map(|d| {
                    let pct = d.pct.filter(|p| p.is_finite());
                    (
                        d.figure.name().to_string(),
                        json!({ "a": d.a, "b": d.b, "diff_pct": pct, "significance": d.significance.name(),
                               "too_few_requests": d.too_few }),
                    )
                })
                .collect();
            v["figures"] = Value::Object(figures);
        }
        Outcome::NotValid { a, b } => {
            v["outcome"] = json!("not_valid");
            v["a_status"] = json!(a);
            v["b_status"] = json!(b);
        }
        Outcome::OnlyInA(a) => {
            v["outcome"] = json!("only_in_a");
            v["a_status"] = json!(a);
        }
        Outcome::OnlyInB(b) => {
            v["outcome"] = json!("only_in_b");
            v["b_status"] = json!(b);
        }
    }
    v
}

fn json_failure(f: &Failure) -> Value {
    let mut v = json!({ "context": f.context, "label": f.label, "concurrency": f.concurrency });
    match &f.why {
        Why::Bound { bound, pct } => {
            v["bound"] = json!(bound.to_string());
            v["figure"] = json!(bound.figure.name());
            v["diff_pct"] = json!(pct);
        }
        Why::Lost { status } => {
            v["lost"] = json!(true);
            v["b_status"] = json!(status);
        }
    }
    v
}

fn json_run(letter: &str, run: &Run) -> Value {
    let r = &run.record;
    json!({ "letter": letter, "source": run.source, "title": view::build(r).title, "label": r.label, "started": r.started,
            "schema": r.schema, "run_id": r.run_id })
}

/// For programs: `speedmatrix.compare/1`, documented in docs/compare.md.
pub fn json(report: &Report) -> String {
    let comparisons: Vec<Value> = report
        .comparisons
        .iter()
        .enumerate()
        .map(|(i, c)| {
            let capacity: Vec<Value> = c
                .capacity
                .iter()
                .map(
                    |p| json!({ "context": p.context, "b_context": p.b_context, "label": p.label, "a": p.a, "b": p.b }),
                )
                .collect();
            json!({
                "run": LETTERS[i + 1],
                "cells": c.cells.iter().map(json_cell).collect::<Vec<_>>(),
                "capacity": capacity,
                "failures": report.failures[i].iter().map(json_failure).collect::<Vec<_>>(),
            })
        })
        .collect();
    let gate = report.gate.map(|g| json!({ "fail_on": g.to_string(), "passed": report.passed() }));
    let out = json!({
        "format": JSON_FORMAT,
        "runs": report.runs.iter().enumerate().map(|(i, r)| json_run(LETTERS[i], r)).collect::<Vec<_>>(),
        "comparisons": comparisons,
        "gate": gate,
    });
    serde_json::to_string_pretty(&out).unwrap_or_default() + "\n"
}
