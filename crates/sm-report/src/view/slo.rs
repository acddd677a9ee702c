//! The SLO's columns of the All-measurements table: whether each measurement met the SLO, its
//! goodput, and its cost per million tokens with `--cost-per-hour`.

use sm_core::record::{DecodeCell, RunRecord};

use super::{CellKind, DecodeIndex, Matrix, PrefillLine};
use crate::capacity::usd;
use crate::format::{self, NONE, opt};

pub const SLO_MET: &str = "SLO met";
pub const GOODPUT: &str = "Goodput";
pub const GOODPUT_TOK_S: &str = "Goodput tok/s";
pub const USD_PER_MTOK: &str = "$ per million tokens";
pub const SEARCHED: &str = "Searched";

/// The columns (none for a record without an SLO; the cost column only with a price, the
/// searched column only when a capacity search measured a cell) and a row per measurement, in
/// the order of [`super::measurements`].
pub(super) fn slo_measurements(
    prefill: &[PrefillLine],
    matrix: &Matrix,
    record: &RunRecord,
) -> (Vec<&'static str>, Vec<Vec<String>>) {
    if record.settings.slo.is_none() {
        return (Vec::new(), Vec::new());
    }
    let priced = record.settings.cost_per_hour_usd.is_some();
    let searched = record.decode.iter().any(|c| c.searched);
    let mut columns = vec![SLO_MET, GOODPUT, GOODPUT_TOK_S];
    columns.extend(priced.then_some(USD_PER_MTOK));
    columns.extend(searched.then_some(SEARCHED));
    let dashes = || vec![NONE.to_string(); columns.len()];
    let mut rows: Vec<Vec<String>> = prefill.iter().map(|_| dashes()).collect();
    let decode = DecodeIndex::new(record);
    for shown in matrix.shown() {
        let (ctx, c) = (shown.context, shown.concurrency);
        let Some(cell) = decode.get(ctx, c).filter(|_| shown.cell.kind == CellKind::Valid) else {
            let mut row = dashes();
            if searched {
                let was = decode.get(ctx, c).is_some_and(|d| d.searched);
                *row.last_mut().expect("a column") = yes_no(was);
            }
            rows.push(row);
            continue;
        };
        rows.push(row(cell, priced, searched));
    }
    (columns, rows)
}

fn row(cell: &DecodeCell, priced: bool, searched: bool) -> Vec<String> {
    let mut row = vec![opt(cell.slo_met, yes_no), goodput(cell), opt(cell.goodput_tok_s, format::fixed1)];
    if priced {
        row.push(opt(cell.usd_per_million_tokens, usd));
    }
    if searched {
        row.push(yes_no(cell.searched));
    }
    row
}

/// Goodput with the count of requests it is a share of (those that made a token in the window, not
/// only the completed ones: a window of long answers completes none), so "100 %" is never read as
/// a share of nothing. A record without the count shows the share alone; no request, no share.
fn goodput(cell: &DecodeCell) -> String {
    match (cell.goodput_pct, cell.requests) {
        (Some(_), Some(0)) | (None, _) => NONE.to_string(),
        (Some(v), Some(n)) => format!("{} % of {}", format::fixed1(v), sm_core::units::plural(n, "request")),
        (Some(v), None) => format!("{} %", format::fixed1(v)),
    }
}

fn yes_no(b: bool) -> String {
    if b { "yes" } else { "no" }.to_string()
}
