//! One CSV row per measurement: the All-measurements columns as the page
//! prints them, then every field of the record unformatted ([`raw`]), so a
//! spreadsheet can both show the page and compute with it. The SLO's figures
//! come last: two per bound of the SLO (docs/report.md). Written through the
//! `csv` crate ([`table`]), as the load phases' files are.

mod raw;
pub(crate) mod table;

use sm_core::record::{CellStatus, DecodeCell, PrefillRow, RunRecord};
use sm_core::slo::BoundName;

use crate::view::{self, CellKind, Page};
use raw::{CapacityColumns, Extras, Figures, Gpu, Intervals, Keys, Notes, Prefill, Ranks, Raw, Server};
use table::{Ending, Guarded, Num, Table, guarded};

/// A bound's two columns: the cell's value at the bound's percentile, and whether it holds.
type Bound = (Option<Num>, Option<bool>);

/// The CSV's header: the page's All-measurements columns, then the raw ones, then two per bound
/// of the SLO: `slo_<bound>` and `slo_<bound>_holds`.
fn columns(bounds: &[BoundName]) -> Vec<String> {
    let page = view::COLUMNS.iter().map(|c| c.to_string());
    let slo = bounds.iter().flat_map(|b| [format!("slo_{b}"), format!("slo_{b}_holds")]);
    page.chain(raw::raw_header()).chain(slo).collect()
}

/// The bounds with columns: the record's SLO's, in its order, then any other a cell was judged
/// against (a record edited by hand), so that no judged figure is left out.
fn bound_keys(record: &RunRecord) -> Vec<BoundName> {
    let mut keys: Vec<BoundName> =
        record.settings.slo.iter().flat_map(|s| s.bounds.iter().map(|b| b.key().into())).collect();
    for check in record.decode.iter().flat_map(|c| &c.slo_bounds) {
        if !keys.contains(&check.bound) {
            keys.push(check.bound.clone());
        }
    }
    keys
}

/// A valid cell's value and verdict for each bound in `keys`; empty where it has none.
fn bound_cells(cell: &DecodeCell, keys: &[BoundName]) -> Vec<Bound> {
    let valid = cell.status() == CellStatus::Valid;
    let judged = |k: &BoundName| cell.slo_bounds.iter().find(|b| &b.bound == k).filter(|_| valid);
    keys.iter().map(|k| judged(k).map_or((None, None), |b| (b.value.map(Num), Some(b.holds)))).collect()
}

/// A prefill row's raw columns: no decode figures, no capacity answer, no SLO judgement.
fn prefill_row(p: &PrefillRow, bounds: usize) -> (Raw<'_>, Vec<Bound>) {
    let valid = p.status == CellStatus::Valid;
    let raw = (
        Keys { context_tokens: p.context, concurrency: 1, status: p.status.name(), reason: guarded(&p.reason) },
        Prefill::of(p),
        Figures::default(),
        Notes::default(),
        Intervals::default(),
        Extras::default(),
        Gpu::of(p.telemetry.gpu.as_ref(), valid),
        Server::of(p.telemetry.server_metrics.as_ref()),
        Ranks::default(),
        CapacityColumns::default(),
    );
    (raw, vec![(None, None); bounds])
}

/// A measured decode cell's raw columns.
fn decode_row<'a>(record: &RunRecord, cell: &'a DecodeCell, bounds: &[BoundName]) -> (Raw<'a>, Vec<Bound>) {
    let valid = cell.status() == CellStatus::Valid;
    let keys = Keys {
        context_tokens: cell.context,
        concurrency: cell.concurrency,
        status: cell.status().name(),
        reason: guarded(&cell.reason),
    };
    let raw = (
        keys,
        Prefill::default(),
        Figures::of(cell),
        Notes::of(cell, valid),
        Intervals::of(cell.ci.as_ref(), valid),
        Extras::of(cell, valid),
        Gpu::of(cell.gpu.as_ref(), valid),
        Server::of(cell.server_metrics.as_ref()),
        Ranks::of(cell),
        capacity(record, cell.context, cell.concurrency),
    );
    (raw, bound_cells(cell, bounds))
}

fn capacity(record: &RunRecord, context: u64, concurrency: u32) -> CapacityColumns {
    CapacityColumns::of(record.capacity.iter().find(|k| k.context == context), concurrency)
}

/// The raw columns of each row of the page's All-measurements table, in its order: prefill by
/// context, then the matrix row by row.
fn raw_rows<'a>(record: &'a RunRecord, page: &'a Page, bounds: &[BoundName]) -> Vec<(Raw<'a>, Vec<Bound>)> {
    let mut prefill: Vec<_> = record.prefill.iter().collect();
    prefill.sort_by_key(|p| p.context);
    let mut rows: Vec<_> = prefill.into_iter().map(|p| prefill_row(p, bounds.len())).collect();
    let decode = view::DecodeIndex::new(record);
    for at in page.matrix.shown() {
        rows.push(match (at.cell.kind, decode.get(at.context, at.concurrency)) {
            (CellKind::NotMeasured, _) => continue,
            (_, Some(cell)) => decode_row(record, cell, bounds),
            // not run by the plan (over capacity, skipped): no decode entry to read
            (kind, None) => {
                let status = if kind == CellKind::Skipped { CellStatus::Skipped } else { CellStatus::OverCapacity };
                let mut raw = Raw::default();
                raw.0 = Keys {
                    context_tokens: at.context,
                    concurrency: at.concurrency,
                    status: status.name(),
                    reason: guarded(&at.cell.reason),
                };
                raw.9 = capacity(record, at.context, at.concurrency);
                (raw, vec![(None, None); bounds.len()])
            }
        });
    }
    rows
}

pub fn csv(record: &RunRecord) -> String {
    let page = view::build(record);
    let bounds = bound_keys(record);
    let mut table = Table::new(columns(&bounds), Ending::Crlf);
    for (shown, (raw, judged)) in page.measurements.iter().zip(raw_rows(record, &page, &bounds)) {
        table.row((shown.each_ref().map(|s| Guarded(s.as_str())), raw, judged));
    }
    table.finish()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> RunRecord {
        serde_json::from_str(include_str!("../../../tests/data/run-sample.json")).unwrap()
    }

    /// A cell or row that is not valid exports no figures, even when the record holds some.
    #[test]
    fn rows_that_are_not_valid_export_no_figures() {
        let mut record = sample();
        let cell = record.decode.iter_mut().find(|c| c.status() == CellStatus::Valid).unwrap();
        cell.status = Some(CellStatus::Error);
        cell.total_tok_s = Some(4242.5);
        cell.kv_need_tokens = Some(77);
        let (ctx, c) = (cell.context.to_string(), cell.concurrency.to_string());
        record.prefill[0].status = CellStatus::Error;
        record.prefill[0].prompt_tok_s = Some(9191.5);
        let out = csv(&record);
        assert!(!out.contains("4242.5") && !out.contains("9191.5"), "{out}");
        let header: Vec<&str> = out.lines().next().unwrap().split(',').collect();
        let at = |name: &str| header.iter().position(|h| *h == name).unwrap();
        let row = out.lines().find(|l| {
            let f: Vec<&str> = l.split(',').collect();
            f[0] == "Sustained decode"
                && f.get(at("context_tokens")) == Some(&ctx.as_str())
                && f.get(at("concurrency")) == Some(&c.as_str())
        });
        let row: Vec<&str> = row.expect("the error cell has a row").split(',').collect();
        assert_eq!(
            (row[at("status")], row[at("kv_need_tokens")], row[at("total_tok_s")]),
            ("error", "77", ""),
            "{row:?}"
        );
    }

    /// Record text with a comma, a quote, a line break and a leading `=` comes out quoted and
    /// guarded, through the public writer, as the hand-written CSV wrote it.
    #[test]
    fn hostile_record_text_is_quoted_and_guarded() {
        let mut record = sample();
        let cell = record.decode.iter_mut().find(|c| c.status() == CellStatus::Valid).unwrap();
        cell.reason = Some("=HYPERLINK(\"x\"),\nsecond line".into());
        cell.warnings = vec!["-oops".into(), "@cmd".into()];
        let out = csv(&record);
        assert!(out.contains(",\"'=HYPERLINK(\"\"x\"\"),\nsecond line\","), "{out}");
        assert!(out.contains(",'-oops; @cmd,"), "{out}");
        // the line break inside the quotes is the text's own; every row ends in CRLF
        assert_eq!(out.matches("\r\n").count(), 1 + view::build(&record).measurements.len());
    }
}
