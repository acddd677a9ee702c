//! The end-of-run console view: the capacity answer, then the prefill table and the decode
//! matrix, split into column blocks so that no line is wider than the terminal.

use std::fmt::Write;

use crate::wrap::{clip, wrap};

use sm_core::record::RunRecord;

use crate::format::{self, opt};
use crate::view::{self, CellKind, Page};

/// `width` is the terminal's width in columns (80 when unknown); every line
/// of the result fits in it, except a single column that cannot.
pub fn terminal(record: &RunRecord, width: usize) -> String {
    let page = view::build(record);
    let width = width.max(20);
    let mut s = String::new();
    let _ = writeln!(s, "{}", clip(&page.title, width));
    if record.settings.matrix {
        answer(&mut s, &page, width);
    }
    replay_answer(&mut s, record, width);
    if record.settings.matrix {
        prefill(&mut s, &page, width);
        decode(&mut s, &page, width);
    }
    crate::phases::terminal(&mut s, record, width);
    s
}

/// The capacity answer as [`terminal`] opens with it (empty for a record without one), for
/// commands that print the answer without the matrix (`speedmatrix report`).
pub fn capacity_text(record: &RunRecord, width: usize) -> String {
    let mut s = String::new();
    answer(&mut s, &view::build(record), width.max(20));
    replay_answer(&mut s, record, width.max(20));
    s.trim_start().to_string()
}

/// The capacity answer on a replayed trace, after the matrix's (a replay alone has no matrix).
fn replay_answer(s: &mut String, record: &RunRecord, width: usize) {
    let Some(a) = crate::phases::replay::answer::headline(record) else {
        return;
    };
    let _ = writeln!(s, "\nCapacity on your traffic");
    let _ = writeln!(s, "{}", wrap(&a.sentence, width));
    if let Some(note) = &a.slo_note {
        let _ = writeln!(s, "{}", wrap(note, width));
    }
}

/// The capacity answer, a sentence per context, with what "users" means and the SLO used.
fn answer(s: &mut String, page: &Page, width: usize) {
    let Some(a) = &page.answer else {
        return;
    };
    let _ = writeln!(s, "\nCapacity");
    for line in &a.sentences {
        let _ = writeln!(s, "{}", wrap(line, width));
    }
    let _ = writeln!(s, "{}", wrap(crate::capacity::USERS_NOTE, width));
    let _ = writeln!(s, "{}", wrap(&a.slo_note, width));
}

/// The prefill table; a row that is not valid says why in a numbered note under it.
fn prefill(s: &mut String, page: &Page, width: usize) {
    if page.prefill.is_empty() {
        return;
    }
    // a row that is not valid says why in the page's numbered footnotes, under the table
    let rows: Vec<[String; 4]> = page
        .prefill
        .iter()
        .map(|p| {
            let tok_s = if p.valid() { opt(p.tok_s, format::kilo) } else { marked(p.status.word(), p.footnote) };
            [p.label.clone(), opt(p.prompt_tokens, format::count), tok_s, opt(p.ttft_ms, format::ms)]
        })
        .collect();
    let header = ["Context", "Prompt tokens", "Prompt tok/s", "TTFT"];
    let widths: Vec<usize> =
        (0..4).map(|i| rows.iter().map(|r| r[i].chars().count()).chain([header[i].len()]).max().unwrap_or(0)).collect();
    // the prompt-token count is the column a narrow terminal can spare
    let full: usize = widths.iter().sum::<usize>() + 6;
    let keep: Vec<usize> = if full <= width { vec![0, 1, 2, 3] } else { vec![0, 2, 3] };
    let line = |cells: &[&str]| -> String {
        keep.iter().map(|&i| format!("{:>w$}", cells[i], w = widths[i])).collect::<Vec<_>>().join("  ")
    };
    let _ = writeln!(s, "\nPrefill");
    let _ = writeln!(s, "{}", clip(&line(&header), width));
    for r in &rows {
        let cells: Vec<&str> = r.iter().map(String::as_str).collect();
        let _ = writeln!(s, "{}", clip(&line(&cells), width));
    }
    for (n, text) in page.notes_for(page.prefill.iter().map(|p| p.footnote)) {
        let _ = writeln!(s, "{}", wrap(&format!("[{n}] {text}"), width));
    }
}

/// The decode matrix in column blocks as wide as the terminal, with its notes.
fn decode(s: &mut String, page: &Page, width: usize) {
    let m = &page.matrix;
    if m.rows.is_empty() {
        return;
    }
    let heading = "Sustained decode: total tok/s, TTFT below (rows: context, columns: simultaneous requests)";
    let _ = writeln!(s, "\n{}", wrap(heading, width));
    let col_names: Vec<String> =
        m.cols.iter().zip(&m.searched_cols).map(|(c, s)| if *s { format!("{c}s") } else { c.to_string() }).collect();
    let texts: Vec<Vec<(String, String)>> = m
        .cells
        .iter()
        .map(|row| {
            row.iter()
                .map(|c| match c.kind {
                    CellKind::Valid => (marks(c, opt(c.total, format::fixed1)), opt(c.ttft_ms, format::ms)),
                    CellKind::OverCapacity => (marked("over cap", c.footnote), String::new()),
                    CellKind::NotMeasured => (format::NONE.into(), String::new()),
                    kind => (marked(&view::kind_text(kind).to_lowercase(), c.footnote), String::new()),
                })
                .collect()
        })
        .collect();
    let cell_w = texts
        .iter()
        .flatten()
        .map(|(a, b)| a.chars().count().max(b.chars().count()))
        .chain(col_names.iter().map(|c| c.chars().count()))
        .max()
        .unwrap_or(4)
        + 2;
    let ctx_w = m.rows.iter().map(|(_, l)| l.chars().count()).chain(["Context".len()]).max().unwrap_or(7);
    let per_block = (width.saturating_sub(ctx_w) / cell_w).max(1);
    for (bi, block) in (0..m.cols.len()).collect::<Vec<_>>().chunks(per_block).enumerate() {
        if bi > 0 {
            s.push('\n');
        }
        let mut header = format!("{:<ctx_w$}", "Context");
        for &ci in block {
            let _ = write!(header, "{:>cell_w$}", col_names[ci]);
        }
        let _ = writeln!(s, "{header}");
        for (ri, (_, label)) in m.rows.iter().enumerate() {
            let mut top = format!("{label:<ctx_w$}");
            let mut bottom = " ".repeat(ctx_w);
            for &ci in block {
                let (a, b) = &texts[ri][ci];
                let _ = write!(top, "{a:>cell_w$}");
                let _ = write!(bottom, "{b:>cell_w$}");
            }
            let _ = writeln!(s, "{top}");
            if !bottom.trim().is_empty() {
                let _ = writeln!(s, "{bottom}");
            }
        }
    }
    // the console has no room for the TTFT note: the heading says where TTFT is
    // the console marks what the page marks, in characters a terminal has
    let notes = page
        .decode_notes
        .iter()
        .filter(|n| **n != view::TTFT_NOTE && **n != view::SEARCHED_NOTE)
        .map(|n| n.to_string())
        .chain(marks_key(m));
    let refs = page.notes_for(m.cells.iter().flatten().chain(m.listed.iter().map(|l| &l.cell)).map(|c| c.footnote));
    let lines: Vec<String> = notes.chain(refs.iter().map(|(n, f)| format!("[{n}] {f}"))).collect();
    if !lines.is_empty() {
        s.push('\n');
    }
    for line in lines {
        let _ = writeln!(s, "{}", wrap(&line, width));
    }
}

/// A valid cell's total with its marks: ✓ it meets the SLO, * it is its context's capacity,
/// ~ it did not reach `--precision`, ⚠ its repeats disagree.
fn marks(cell: &view::Cell, total: String) -> String {
    let met = if cell.slo_met == Some(true) { " ✓" } else { "" };
    let cap = if cell.capacity { "*" } else { "" };
    let p = cell.precision.as_ref();
    let rough = if p.is_some_and(|p| p.met == Some(false)) { "~" } else { "" };
    let disagree = if p.is_some_and(|p| p.disagree()) { "⚠" } else { "" };
    format!("{total}{met}{cap}{rough}{disagree}")
}

/// What the matrix's marks mean, for the marks it shows.
fn marks_key(m: &view::Matrix) -> Option<String> {
    let cells = || m.cells.iter().flatten();
    let keys: Vec<&str> = [
        cells().any(|c| c.slo_met.is_some()).then_some("✓ meets the SLO"),
        cells().any(|c| c.capacity).then_some("* the capacity: the most users that meet it"),
        m.searched_cols.contains(&true).then_some("Ns: a level only the capacity search (--find-capacity) measured"),
        cells()
            .any(|c| c.precision.as_ref().is_some_and(|p| p.met == Some(false)))
            .then_some("~ did not reach --precision within the longest window"),
        cells()
            .any(|c| c.precision.as_ref().is_some_and(|p| p.disagree()))
            .then_some("⚠ its repeats disagree: the server was not stationary"),
    ]
    .into_iter()
    .flatten()
    .collect();
    (!keys.is_empty()).then(|| keys.join(" · "))
}

/// A status with the number of the footnote that explains it.
fn marked(text: &str, footnote: Option<usize>) -> String {
    match footnote {
        Some(n) => format!("{text} [{n}]"),
        None => text.to_string(),
    }
}
