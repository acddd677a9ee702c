//! The All-measurements columns that come from the decode cell's figure table
//! (`sm_core::figures`): one per figure the table gives a heading, after the published page's
//! twelve ([`super::COLUMNS`]), so that a decode-cell figure with a heading is on the page and in
//! report.md without a line here.

use sm_core::figures::{Figure, Figures};
use sm_core::record::{DecodeCell, RunRecord};

use super::{DecodeIndex, Matrix, PrefillLine};
use crate::format::{self, NONE};

/// The headed figures a shown cell carries (a record without them gets no column, so an older
/// record's page is what it was), and a row per measurement in the order of
/// [`super::measurements`]: `—` on a prefill row and wherever a cell does not carry the figure.
pub(super) fn figure_measurements(
    prefill: &[PrefillLine],
    matrix: &Matrix,
    record: &RunRecord,
) -> (Vec<&'static str>, Vec<Vec<String>>) {
    let decode = DecodeIndex::new(record);
    let cells: Vec<Option<&DecodeCell>> = matrix.shown().map(|s| decode.get(s.context, s.concurrency)).collect();
    let headed: Vec<&Figure<DecodeCell>> =
        DecodeCell::headed().filter(|f| cells.iter().flatten().any(|c| carried(f, c).is_some())).collect();
    let columns = headed.iter().filter_map(|f| f.label).collect();
    let dashes = || vec![NONE.to_string(); headed.len()];
    let mut rows: Vec<Vec<String>> = prefill.iter().map(|_| dashes()).collect();
    for cell in cells {
        rows.push(match cell {
            Some(c) => headed.iter().map(|f| format::figure(f.unit, carried(f, c))).collect(),
            None => dashes(),
        });
    }
    (columns, rows)
}

/// The figure's value where the cell's status lets it carry one (an error's numbers are not a
/// measurement, whatever the record holds).
fn carried(f: &Figure<DecodeCell>, cell: &DecodeCell) -> Option<f64> {
    f.of(cell).filter(|_| f.carried.allows(cell.status()))
}

#[cfg(test)]
mod tests {
    use sm_core::record::{CellStatus, DecodeCell, Percentiles, RunRecord};

    use crate::view::build;

    /// The sample run with two cells at one context: level 1 and level 2.
    fn record(cells: [(CellStatus, Option<f64>); 2]) -> RunRecord {
        let mut r: RunRecord = serde_json::from_str(include_str!("../../../../tests/data/run-sample.json")).unwrap();
        let first = r.decode[0].clone();
        r.decode = cells
            .into_iter()
            .zip(1..)
            .map(|((status, p99), concurrency)| DecodeCell {
                concurrency,
                status: Some(status),
                ttft_ms: Percentiles { p99, ..first.ttft_ms },
                ..first.clone()
            })
            .collect();
        r.plan.clear();
        r.prefill.clear();
        r
    }

    #[test]
    fn a_headed_figure_is_a_column_with_a_value_per_cell_that_carries_it() {
        // an error's number is not shown, whatever the record holds
        let page = build(&record([(CellStatus::Valid, Some(1234.0)), (CellStatus::Error, Some(99.0))]));
        let col = page.figure_columns.iter().position(|c| *c == "TTFT p99").expect("a TTFT p99 column");
        let values: Vec<&str> = page.figure_measurements.iter().map(|r| r[col].as_str()).collect();
        assert_eq!(values, ["1,234 ms", "—"]);
        assert_eq!(page.figure_measurements.len(), page.measurements.len(), "a row per measurement");
    }

    #[test]
    fn a_figure_no_cell_carries_has_no_column() {
        let page = build(&record([(CellStatus::Valid, None), (CellStatus::Error, Some(99.0))]));
        assert!(!page.figure_columns.contains(&"TTFT p99"), "{:?}", page.figure_columns);
        assert!(page.figure_measurements.iter().all(|r| r.len() == page.figure_columns.len()));
    }
}
