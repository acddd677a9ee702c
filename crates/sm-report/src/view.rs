//! The page's content, worked out once from a record so that the HTML,
//! Markdown, CSV and terminal views cannot disagree about a figure.

use std::collections::{BTreeSet, HashMap, HashSet};

use sm_core::context::shown;
use sm_core::plan::planned_label;
use sm_core::record::{CellStatus, DecodeCell, PlanKind, PlanStatus, PlannedCell, RunRecord, RunStatus};
use sm_core::redact;
use sm_core::slo::Figure;

use crate::capacity::{self, Headline};
use crate::facts::{engine, engine_name, gib, gpu_count, gpu_short, hardware, import_notes, run};
use crate::format::{self, NONE, opt};
use crate::meta;
pub use crate::methodology::METHODOLOGY;

mod figures;
mod grid;
pub mod precision;
pub mod roofline;
mod slo;
use figures::figure_measurements;
pub use grid::{GRID_PER_CELL, Listed, Shown};
use precision::CellPrecision;
use slo::slo_measurements;
pub use slo::{GOODPUT, GOODPUT_TOK_S, SEARCHED, SLO_MET, USD_PER_MTOK};

/// The page's sentence for over-capacity cells.
pub const OVER_CAPACITY_NOTE: &str =
    "Over capacity: not run because this many requests at this context would exceed the server's KV cache.";
/// The page's note on decode TTFT.
pub const TTFT_NOTE: &str =
    "TTFT is measured after the benchmark warms the server's prompt cache, so it mostly excludes prefill.";
/// What `—` in the matrix means.
pub const NOT_MEASURED_NOTE: &str = "— : planned but not measured (the run stopped first).";
/// What a column of levels only the capacity search measured means.
pub const SEARCHED_NOTE: &str = "Levels marked \"searched\" were measured by the capacity search \
(--find-capacity) after the matrix, each a normal cell with the run's window; — in such a column: not searched at \
that context.";
/// Why levels only the capacity search measured are not columns ([`grid`]).
pub const LISTED_NOTE: &str = "The capacity search (--find-capacity) measured levels of its own at so many contexts \
that a column for each would make the matrix mostly empty: those cells are not in the matrix; each is a line of the \
measurements table.";
pub const MEASUREMENTS_NOTE: &str = "Latencies are medians. Total tok/s is output across all simultaneous requests.";

/// The All-measurements columns, exactly as the published page names them.
pub const COLUMNS: [&str; 12] = [
    "Phase",
    "Context",
    "Requests at once",
    "Status",
    "Total tok/s",
    "Per request tok/s",
    "TTFT",
    "Time between tokens",
    "Average active requests",
    "Completed requests",
    "Output tokens",
    "Measured for",
];

pub struct Page {
    pub title: String,
    /// The capacity answer the page opens with; `None` for a record without an SLO or decode cells.
    pub answer: Option<Headline>,
    /// Engine · version · quantization · the matrix's shape · prefill contexts.
    pub subtitle: Vec<String>,
    /// Who, what label, when.
    pub byline: Vec<String>,
    /// Set when the run did not complete, so a reader knows cells may be missing.
    pub status_note: Option<String>,
    pub hardware: Vec<(String, String)>,
    pub engine: Vec<(String, String)>,
    pub run: Vec<(String, String)>,
    pub launch_command: Option<String>,
    pub prefill: Vec<PrefillLine>,
    pub matrix: Matrix,
    /// The sentences under the matrix that explain it, each said once on the page.
    pub decode_notes: Vec<&'static str>,
    /// Why a prefill row or a matrix cell is not a figure, numbered from 1 over the whole page
    /// (prefill rows first, then the matrix row by row), so that no number is used twice.
    pub footnotes: Vec<String>,
    pub measurements: Vec<[String; 12]>,
    /// The decode figures the figure table heads, as columns after [`COLUMNS`], and their values, a
    /// row per row of `measurements` ([`figures`]).
    pub figure_columns: Vec<&'static str>,
    pub figure_measurements: Vec<Vec<String>>,
    /// The SLO's columns of the All-measurements table after [`COLUMNS`], and their values, a row per
    /// row of `measurements`.
    pub slo_columns: Vec<&'static str>,
    pub slo_measurements: Vec<Vec<String>>,
    /// The precision of the All-measurements rows (methodology §12): `±` on their figures, the
    /// Precision and Repeats columns after the SLO's, and their legend; empty before schema 1.2.
    pub precision: precision::Table,
    pub methodology: Vec<(&'static str, &'static str)>,
    /// Extra notes on an imported record (whose definitions are the other tool's).
    pub import_notes: Vec<String>,
}

pub struct PrefillLine {
    /// The label with the exact token count beside it where the label does not say it.
    pub label: String,
    /// The context in tokens: where the row sits on the charts' context axis.
    pub context: u64,
    pub prompt_tokens: Option<u64>,
    pub tok_s: Option<f64>,
    pub ttft_ms: Option<f64>,
    pub status: CellStatus,
    pub reason: Option<String>,
    /// 1-based number of the page footnote that says why a row that is not valid has no figure.
    pub footnote: Option<usize>,
}

impl Page {
    /// The footnotes that `refs` (a section's rows or cells) point at, `(number, text)` in order.
    pub fn notes_for(&self, refs: impl Iterator<Item = Option<usize>>) -> Vec<(usize, &str)> {
        let mut numbers: Vec<usize> = refs.flatten().collect();
        numbers.sort_unstable();
        numbers.dedup();
        numbers.into_iter().filter_map(|n| Some((n, self.footnotes.get(n - 1)?.as_str()))).collect()
    }
}

impl PrefillLine {
    pub fn valid(&self) -> bool {
        self.status == CellStatus::Valid
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CellKind {
    Valid,
    OverCapacity,
    Error,
    Loop,
    Skipped,
    /// Planned but not measured (the run stopped first).
    NotMeasured,
}

pub struct Cell {
    pub kind: CellKind,
    pub total: Option<f64>,
    pub per_request: Option<f64>,
    pub ttft_ms: Option<f64>,
    pub reason: Option<String>,
    /// 1-based number of the page footnote that explains this cell.
    pub footnote: Option<usize>,
    pub warnings: Vec<String>,
    /// Whether the cell met the SLO (valid cells that were judged).
    pub slo_met: Option<bool>,
    /// "meets the SLO", or which bounds it missed and by how much.
    pub verdict: Option<String>,
    /// This cell proves its context's capacity answer.
    pub capacity: bool,
    /// Measured by the capacity search, not planned by the matrix.
    pub searched: bool,
    /// What one user got: the SLO's tok/s bound at its percentile, else the median per request.
    pub user_tok_s: Option<f64>,
    /// A valid cell's intervals, precision verdict and repeats, for its hover.
    pub precision: Option<CellPrecision>,
    /// "61 % of the H200's memory-bandwidth roofline", for its hover (methodology §14.4).
    pub roofline: Option<String>,
    /// "speculative decoding: 2.6 tokens per step (acceptance 53 %)", for its hover.
    pub spec_decode: Option<String>,
    /// "GPU: 312 W · 1.9 J/token", for its hover (methodology §14.3).
    pub gpu: Option<String>,
}

pub struct Matrix {
    /// `(context, label)`, ascending; the label shows the exact count where it does not say it.
    pub rows: Vec<(u64, String)>,
    pub cols: Vec<u32>,
    /// Per column: only the capacity search measured this level (every cell in it is searched).
    pub searched_cols: Vec<bool>,
    /// `cells[row][col]`.
    pub cells: Vec<Vec<Cell>>,
    /// Cells of levels only the capacity search measured, where such levels would make the grid
    /// too wide to be columns ([`grid`]); by context, then level.
    pub listed: Vec<Listed>,
}

impl Matrix {
    pub fn max_total(&self) -> f64 {
        self.cells.iter().flatten().filter_map(|c| c.total).fold(0.0, f64::max)
    }
    pub fn any(&self, kind: CellKind) -> bool {
        self.cells.iter().flatten().any(|c| c.kind == kind)
    }
    pub fn count(&self, kind: CellKind) -> usize {
        self.cells.iter().flatten().filter(|c| c.kind == kind).count()
    }
}

/// A status as the page's tables show it: [`CellStatus::word`] with a capital ("Over capacity").
pub fn status_text(status: CellStatus) -> String {
    let word = status.word();
    let mut chars = word.chars();
    chars.next().map_or_else(String::new, |first| first.to_uppercase().chain(chars).collect())
}

/// A cell as the page shows it: its status's word, or "Not measured".
pub fn kind_text(kind: CellKind) -> String {
    kind.status().map_or_else(|| "Not measured".to_string(), status_text)
}

impl CellKind {
    /// The measured status this kind shows; `None` for a cell that was not measured.
    pub fn status(self) -> Option<CellStatus> {
        match self {
            CellKind::Valid => Some(CellStatus::Valid),
            CellKind::OverCapacity => Some(CellStatus::OverCapacity),
            CellKind::Error => Some(CellStatus::Error),
            CellKind::Loop => Some(CellStatus::Loop),
            CellKind::Skipped => Some(CellStatus::Skipped),
            CellKind::NotMeasured => None,
        }
    }
}

pub fn build(record: &RunRecord) -> Page {
    let mut footnotes = Vec::new();
    let prefill = prefill(record, &mut footnotes);
    let matrix = matrix(record, &mut footnotes);
    let (figure_columns, figure_measurements) = figure_measurements(&prefill, &matrix, record);
    let (slo_columns, slo_measurements) = slo_measurements(&prefill, &matrix, record);
    let precision = precision::table(&prefill, &matrix, record);
    Page {
        title: title(record),
        answer: capacity::headline(record),
        subtitle: subtitle(record, &matrix, &prefill),
        byline: byline(record),
        status_note: status_note(record),
        hardware: hardware(record),
        engine: engine(record),
        run: run(record),
        launch_command: record.launch_command.as_deref().map(redact::redact_command),
        measurements: measurements(&prefill, &matrix, record),
        figure_columns,
        figure_measurements,
        slo_columns,
        slo_measurements,
        precision,
        decode_notes: decode_notes(&matrix),
        footnotes,
        prefill,
        matrix,
        methodology: METHODOLOGY.to_vec(),
        import_notes: import_notes(record),
    }
}

/// Adds `text` to the page's footnotes and returns its number.
fn footnote(footnotes: &mut Vec<String>, text: String) -> usize {
    footnotes.push(text);
    footnotes.len()
}

fn prefill(record: &RunRecord, footnotes: &mut Vec<String>) -> Vec<PrefillLine> {
    let mut by_context: Vec<_> = record.prefill.iter().collect();
    by_context.sort_by_key(|p| p.context);
    by_context
        .into_iter()
        .map(|p| {
            let valid = p.status == CellStatus::Valid;
            let label = shown(&p.label, p.context);
            let why = p.reason.clone().unwrap_or_else(|| status_text(p.status));
            PrefillLine {
                footnote: (!valid).then(|| footnote(footnotes, format!("Prefill {label}: {why}"))),
                label,
                context: p.context,
                prompt_tokens: p.prompt_tokens,
                tok_s: p.prompt_tok_s.filter(|_| valid),
                ttft_ms: p.ttft_ms.filter(|_| valid),
                status: p.status,
                reason: p.reason.clone(),
            }
        })
        .collect()
}

/// The notes under the matrix: each sentence once, and only where a cell needs it.
fn decode_notes(matrix: &Matrix) -> Vec<&'static str> {
    let mut notes = Vec::new();
    if matrix.any(CellKind::OverCapacity) {
        notes.push(OVER_CAPACITY_NOTE);
    }
    notes.push(TTFT_NOTE);
    let planned_gap = matrix.cells.iter().any(|row| {
        row.iter().zip(&matrix.searched_cols).any(|(c, searched)| c.kind == CellKind::NotMeasured && !searched)
    });
    if planned_gap {
        notes.push(NOT_MEASURED_NOTE);
    }
    if matrix.searched_cols.contains(&true) || matrix.cells.iter().flatten().any(|c| c.searched) {
        notes.push(SEARCHED_NOTE);
    }
    if !matrix.listed.is_empty() {
        notes.push(LISTED_NOTE);
    }
    notes
}

/// The model as people name it: the last part of the weights' path, else the
/// model argument of a `serve` launch command, else the served name.
pub fn model_name(record: &RunRecord) -> String {
    let from_root = meta::text(record, meta::MODEL_ROOT).map(str::to_string);
    let from_launch = || {
        let cmd = record.launch_command.as_deref()?;
        let mut words = cmd.split_whitespace();
        words.by_ref().find(|w| *w == "serve")?;
        words.next().filter(|w| !w.starts_with('-')).map(|w| w.trim_matches(['"', '\'']).to_string())
    };
    let name = from_root.or_else(from_launch).unwrap_or_else(|| record.server.model.clone());
    let name = name.trim_end_matches('/');
    name.rsplit('/').next().filter(|s| !s.is_empty()).unwrap_or(name).to_string()
}

fn title(record: &RunRecord) -> String {
    let model = model_name(record);
    let Some(gpu) = record.hardware.gpus.first() else {
        return model;
    };
    let memory = gpu.memory_mib.map(|m| format!(" {}GB", gib(m))).unwrap_or_default();
    format!("{model} on {}{memory} ×{}", gpu_short(&gpu.name), gpu_count(record))
}

fn plural(n: usize, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

fn subtitle(record: &RunRecord, matrix: &Matrix, prefill: &[PrefillLine]) -> Vec<String> {
    let mut parts = vec![engine_name(record)];
    parts.extend(record.server.engine_version.clone());
    parts.extend(meta::text(record, meta::QUANTIZATION).map(str::to_string));
    if !record.settings.matrix {
        // the plan's contexts and concurrency levels were not measured as a matrix: name what ran
        let phases: Vec<String> = record.phases.kinds().iter().map(|k| k.title().to_lowercase()).collect();
        parts.push(format!("load phases only: {}", phases.join(", ")));
    } else if let (Some(first), Some(last)) = (matrix.rows.first(), matrix.rows.last()) {
        let ctx_range = if matrix.rows.len() == 1 { first.1.clone() } else { format!("{}–{}", first.1, last.1) };
        let c_first = matrix.cols.first().copied().unwrap_or(0);
        let c_last = matrix.cols.last().copied().unwrap_or(0);
        let c_range = if matrix.cols.len() == 1 { c_first.to_string() } else { format!("{c_first}–{c_last}") };
        parts.push(format!(
            "{} ({ctx_range}) × {} ({c_range})",
            plural(matrix.rows.len(), "context", "contexts"),
            plural(matrix.cols.len(), "concurrency level", "concurrency levels"),
        ));
    }
    if !prefill.is_empty() {
        let labels: Vec<&str> = prefill.iter().map(|p| p.label.as_str()).collect();
        parts.push(format!("prefill at {}", labels.join(", ")));
    }
    parts
}

fn byline(record: &RunRecord) -> Vec<String> {
    let mut parts = Vec::new();
    if let Some(who) = meta::text(record, meta::UPLOADER) {
        parts.push(format!("by @{}", who.trim_start_matches('@')));
    }
    parts.extend(record.label.clone().filter(|l| !l.trim().is_empty()));
    let when = record.finished.as_deref().unwrap_or(&record.started);
    if record.finished.is_none() && meta::unknown(record, meta::STARTED) {
        parts.push("Measured on an unknown date".into());
        return parts;
    }
    let mut date = format::date(when);
    if meta::local_time(record) {
        date = format!("{} (local time)", date.trim_end_matches(" UTC"));
    }
    parts.push(format!("Measured {date}"));
    parts
}

fn status_note(record: &RunRecord) -> Option<String> {
    match record.status {
        RunStatus::Complete => None,
        RunStatus::Interrupted => {
            Some("This run was interrupted: only the cells measured before it stopped are shown.".into())
        }
        RunStatus::Failed => {
            Some("This run failed before it finished: only the cells measured before it stopped are shown.".into())
        }
        RunStatus::Running => Some("This run is still in progress: the page shows the cells measured so far.".into()),
        RunStatus::Planned => Some("This run was only planned (--dry-run): nothing was measured.".into()),
    }
}

fn cell_kind(cell: &DecodeCell) -> CellKind {
    match cell.status() {
        CellStatus::Valid => CellKind::Valid,
        CellStatus::OverCapacity => CellKind::OverCapacity,
        CellStatus::Error => CellKind::Error,
        CellStatus::Loop => CellKind::Loop,
        CellStatus::Skipped => CellKind::Skipped,
    }
}

/// The record's decode cells by `(context, concurrency)`, the first of each
/// pair as [`RunRecord::decode_cell`] finds it: one lookup per matrix cell
/// instead of a scan of every cell, so a page costs the size of its matrix.
pub struct DecodeIndex<'a>(HashMap<(u64, u32), &'a DecodeCell>);

impl<'a> DecodeIndex<'a> {
    pub fn new(record: &'a RunRecord) -> DecodeIndex<'a> {
        let mut map = HashMap::with_capacity(record.decode.len());
        for cell in &record.decode {
            map.entry((cell.context, cell.concurrency)).or_insert(cell);
        }
        DecodeIndex(map)
    }

    pub fn get(&self, context: u64, concurrency: u32) -> Option<&'a DecodeCell> {
        self.0.get(&(context, concurrency)).copied()
    }
}

/// The plan's decode cells by `(context, concurrency)`, the first of each pair.
fn planned_decode(record: &RunRecord) -> HashMap<(u64, u32), &PlannedCell> {
    let mut map = HashMap::new();
    for p in record.plan.iter().filter(|p| p.kind == PlanKind::Decode) {
        map.entry((p.context, p.concurrency)).or_insert(p);
    }
    map
}

/// A matrix position the record has no decode cell for: over capacity or
/// skipped by the plan, else planned but not measured.
fn unmeasured_cell(planned: Option<&PlannedCell>, row_label: &str, c: u32, footnotes: &mut Vec<String>) -> Cell {
    let (kind, reason) = match planned {
        Some(p) if p.status == PlanStatus::OverCapacity => (CellKind::OverCapacity, p.reason.clone()),
        // skipped by the plan for another reason (an imported lil-bench plan): not
        // run, and the reason says why, so it is not "the run stopped first"
        Some(p) if p.status == PlanStatus::Skipped => (CellKind::Skipped, p.reason.clone()),
        _ => (CellKind::NotMeasured, None),
    };
    let footnote = match (kind, reason.as_deref()) {
        (CellKind::Skipped, why) => {
            let why = why.unwrap_or("skipped by the plan");
            Some(footnote(footnotes, format!("{row_label} × {c}: {why}")))
        }
        // the page says why a cell was not run: tokens needed against the KV budget
        (CellKind::OverCapacity, Some(why)) => {
            Some(footnote(footnotes, format!("{row_label} × {c}: over capacity, {why}")))
        }
        _ => None,
    };
    Cell {
        kind,
        total: None,
        per_request: None,
        ttft_ms: None,
        reason,
        footnote,
        warnings: vec![],
        slo_met: None,
        verdict: None,
        capacity: false,
        searched: false,
        user_tok_s: None,
        precision: None,
        roofline: None,
        spec_decode: None,
        gpu: None,
    }
}

fn measured_cell(cell: &DecodeCell, row_label: &str, c: u32, footnotes: &mut Vec<String>) -> Cell {
    let kind = cell_kind(cell);
    let valid = kind == CellKind::Valid;
    let why = cell.reason.as_deref();
    let footnote = match (kind, why) {
        (CellKind::Error | CellKind::Loop | CellKind::Skipped, _) => {
            let why = why.map_or_else(|| kind_text(kind), str::to_string);
            Some(footnote(footnotes, format!("{row_label} × {c}: {why}")))
        }
        (CellKind::OverCapacity, Some(why)) => {
            Some(footnote(footnotes, format!("{row_label} × {c}: over capacity, {why}")))
        }
        _ => None,
    };
    Cell {
        kind,
        total: cell.total_tok_s.filter(|_| valid),
        per_request: cell.per_request_tok_s.filter(|_| valid),
        ttft_ms: cell.ttft_ms.p50.filter(|_| valid),
        reason: cell.reason.clone(),
        footnote,
        warnings: cell.warnings.clone(),
        slo_met: cell.slo_met.filter(|_| valid),
        verdict: capacity::verdict(cell),
        capacity: false,
        searched: cell.searched,
        user_tok_s: user_tok_s(cell).filter(|_| valid),
        precision: precision::cell_precision(cell),
        roofline: None,
        spec_decode: crate::spec_decode::cell_line(cell),
        gpu: crate::gpu::cell_line(cell),
    }
}

/// What one user of the cell got, as the SLO chart draws it: the SLO's tok/s bound's value at its
/// percentile where the SLO bounds tok/s, else the median per-request tok/s.
pub fn user_tok_s(cell: &DecodeCell) -> Option<f64> {
    match cell.slo_bounds.iter().find(|b| b.bound.figure() == Some(Figure::TokS)) {
        Some(b) => b.value,
        None => cell.per_request_tok_s,
    }
}

/// The page's matrix: every decode position the record measured or planned. It walks the plan
/// itself rather than through [`sm_core::plan::PlanSummary`], whose rows are what a run will
/// measure, because the page shows what a record holds: rows sorted by context, cells the plan
/// skipped (an imported plan says why) with their reason, and cells the plan never had (a
/// capacity search's, a record without a plan).
fn matrix(record: &RunRecord, footnotes: &mut Vec<String>) -> Matrix {
    let mut ctxs: BTreeSet<u64> = record.decode.iter().map(|c| c.context).collect();
    let mut cols: BTreeSet<u32> = record.decode.iter().map(|c| c.concurrency).collect();
    for p in record.plan.iter().filter(|p| p.kind == PlanKind::Decode && p.context > 0 && p.concurrency > 0) {
        ctxs.insert(p.context);
        cols.insert(p.concurrency);
    }
    let mut labels: HashMap<u64, &str> = HashMap::new();
    for c in &record.decode {
        labels.entry(c.context).or_insert(&c.label);
    }
    let rows: Vec<(u64, String)> = ctxs
        .into_iter()
        .map(|ctx| {
            let l = labels.get(&ctx).map(|l| l.to_string());
            (ctx, shown(&l.unwrap_or_else(|| planned_label(&record.plan, PlanKind::Decode, ctx)), ctx))
        })
        .collect();
    let plan = planned_decode(record);
    let searched_only = grid::searched_only(record, &plan);
    let wide = grid::too_wide(rows.len(), cols.len(), record.decode.len() + plan.len());
    let cols: Vec<u32> = cols.into_iter().filter(|c| !(wide && searched_only.contains(c))).collect();
    let decode = DecodeIndex::new(record);
    let proving: HashSet<(u64, u32)> = record.capacity.iter().filter_map(|a| a.cell.map(|c| (a.context, c))).collect();
    let shown_cell = |cell: &DecodeCell, row_label: &str, footnotes: &mut Vec<String>| {
        let mut shown = measured_cell(cell, row_label, cell.concurrency, footnotes);
        shown.capacity = shown.kind == CellKind::Valid && proving.contains(&(cell.context, cell.concurrency));
        shown.roofline = roofline::line(record, cell);
        shown
    };
    let cells: Vec<Vec<Cell>> = rows
        .iter()
        .map(|(ctx, row_label)| {
            cols.iter()
                .map(|&c| match decode.get(*ctx, c) {
                    Some(cell) => shown_cell(cell, row_label, footnotes),
                    None => unmeasured_cell(plan.get(&(*ctx, c)).copied(), row_label, c, footnotes),
                })
                .collect()
        })
        .collect();
    let mut left_out: Vec<(u64, u32)> = record.decode.iter().map(|d| (d.context, d.concurrency)).collect();
    left_out.retain(|(_, c)| wide && searched_only.contains(c));
    left_out.sort_unstable();
    left_out.dedup();
    let listed = left_out
        .into_iter()
        .filter_map(|(context, concurrency)| {
            let label = &rows[rows.binary_search_by_key(&context, |r| r.0).ok()?].1;
            let cell = shown_cell(decode.get(context, concurrency)?, label, footnotes);
            Some(Listed { context, label: label.clone(), concurrency, cell })
        })
        .collect();
    let searched_cols = cols.iter().map(|c| searched_only.contains(c)).collect();
    Matrix { rows, cols, searched_cols, cells, listed }
}

fn measurements(prefill: &[PrefillLine], matrix: &Matrix, record: &RunRecord) -> Vec<[String; 12]> {
    let dash = || NONE.to_string();
    let decode = DecodeIndex::new(record);
    let mut rows = Vec::new();
    for p in prefill {
        let valid = p.valid();
        rows.push([
            "Prefill".into(),
            p.label.clone(),
            "1".into(),
            status_text(p.status),
            opt(p.tok_s, format::kilo),
            dash(),
            opt(p.ttft_ms, format::ms),
            dash(),
            dash(),
            if valid { "1".into() } else { dash() },
            dash(),
            dash(),
        ]);
    }
    for shown in matrix.shown() {
        let kind = shown.cell.kind;
        let cell = decode.get(shown.context, shown.concurrency).filter(|_| kind == CellKind::Valid);
        let f = |get: fn(&DecodeCell) -> Option<f64>, fmt: fn(f64) -> String| opt(cell.and_then(get), fmt);
        let n = |get: fn(&DecodeCell) -> Option<u64>| opt(cell.and_then(get), format::count);
        rows.push([
            "Sustained decode".into(),
            shown.label.to_string(),
            shown.concurrency.to_string(),
            kind_text(kind),
            f(|c| c.total_tok_s, format::fixed1),
            f(|c| c.per_request_tok_s, format::fixed1),
            f(|c| c.ttft_ms.p50, format::ms),
            f(|c| c.tbt_ms.p50, format::ms1),
            f(|c| c.avg_active, format::fixed1),
            n(|c| c.completed),
            n(|c| c.output_tokens),
            f(|c| c.measured_s, format::secs1),
        ]);
    }
    rows
}
