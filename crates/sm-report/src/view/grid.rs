//! The matrix's columns, at a cost that grows with the record. A level only the capacity search
//! measured is a column of its own; when the searches of many contexts would each widen the grid
//! (every context bisects to its own levels), the grid grows like contexts × levels while the
//! record grows like their sum. Past [`GRID_PER_CELL`] grid cells per measured or planned cell,
//! those levels are left out of the grid and their cells listed ([`Listed`]): every table that
//! lists measurements still has them, and the pages stay proportional to the record.

use std::collections::{HashMap, HashSet};

use sm_core::record::{PlannedCell, RunRecord};

use super::{Cell, Matrix};

/// The most grid cells (shown or empty) per decode cell and planned decode cell of the run.
pub const GRID_PER_CELL: usize = 4;

/// A cell measured at a level only the capacity search measured, when that level is no column.
pub struct Listed {
    pub context: u64,
    pub label: String,
    pub concurrency: u32,
    pub cell: Cell,
}

/// A measured, planned or skipped cell of the matrix, in the grid or listed under it.
pub struct Shown<'a> {
    pub context: u64,
    pub label: &'a str,
    pub concurrency: u32,
    pub cell: &'a Cell,
}

/// The levels only the capacity search measured: some decode cell has the level, every one that
/// has it is searched, and the plan has none. One pass over the cells and the plan.
pub(super) fn searched_only(record: &RunRecord, plan: &HashMap<(u64, u32), &PlannedCell>) -> HashSet<u32> {
    let mut all_searched: HashMap<u32, bool> = HashMap::new();
    for d in &record.decode {
        *all_searched.entry(d.concurrency).or_insert(true) &= d.searched;
    }
    let planned: HashSet<u32> = plan.keys().map(|&(_, c)| c).collect();
    all_searched.into_iter().filter(|&(c, all)| all && !planned.contains(&c)).map(|(c, _)| c).collect()
}

/// Whether a grid of `rows` × `cols` is too wide for a run of `cells` decode and planned cells.
pub(super) fn too_wide(rows: usize, cols: usize, cells: usize) -> bool {
    rows.saturating_mul(cols) > GRID_PER_CELL.saturating_mul(cells)
}

impl Matrix {
    /// Every cell that is not "not measured": the grid's, row by row, then the listed ones.
    pub fn shown(&self) -> impl Iterator<Item = Shown<'_>> {
        let grid = self.rows.iter().zip(&self.cells).flat_map(move |((context, label), row)| {
            self.cols.iter().zip(row).map(move |(&concurrency, cell)| Shown {
                context: *context,
                label,
                concurrency,
                cell,
            })
        });
        let listed = self.listed.iter().map(|l| Shown {
            context: l.context,
            label: &l.label,
            concurrency: l.concurrency,
            cell: &l.cell,
        });
        grid.chain(listed).filter(|s| s.cell.kind != super::CellKind::NotMeasured)
    }
}

#[cfg(test)]
mod tests {
    use sm_core::record::DecodeCell;

    use super::*;
    use crate::view::{LISTED_NOTE, SEARCHED_NOTE, build};

    /// `contexts` × levels 1 and 2, each context searched at `searched` levels of its own.
    fn run(contexts: u64, searched: u32) -> RunRecord {
        let mut r: RunRecord = serde_json::from_str(include_str!("../../../../tests/data/run-sample.json")).unwrap();
        let cell = r.decode[0].clone();
        let matrix = (0..contexts).flat_map(|i| (1..=2).map(move |c| (i, c, false)));
        let search = (0..contexts).flat_map(|i| (0..searched).map(move |k| (i, 100 + i as u32 * 10 + k, true)));
        r.decode = matrix
            .chain(search)
            .map(|(i, concurrency, searched)| DecodeCell {
                context: 1024 * (i + 1),
                label: format!("{}K", i + 1),
                concurrency,
                searched,
                ..cell.clone()
            })
            .collect();
        r.plan.clear();
        r
    }

    #[test]
    fn a_few_searched_levels_are_columns() {
        let page = build(&run(1, 3));
        assert_eq!(page.matrix.cols, [1, 2, 100, 101, 102]);
        assert_eq!(page.matrix.searched_cols, [false, false, true, true, true]);
        assert!(page.matrix.listed.is_empty() && page.decode_notes.contains(&SEARCHED_NOTE));
    }

    #[test]
    fn searched_levels_of_many_contexts_are_listed_not_columns() {
        let r = run(8, 6);
        let page = build(&r);
        // 8 rows × 50 levels would be 400 grid cells for 64 measured
        assert_eq!(page.matrix.cols, [1, 2]);
        assert_eq!(page.matrix.listed.len(), 48);
        let first = &page.matrix.listed[0];
        assert_eq!((first.context, first.label.as_str(), first.concurrency), (1024, "1K", 100));
        assert!(page.decode_notes.contains(&LISTED_NOTE));
        // every cell is still a line of the measurements, the CSV and the SLO table
        let decode_lines = page.measurements.iter().filter(|m| m[0] == "Sustained decode").count();
        assert_eq!(decode_lines, r.decode.len());
        // (the CSV keeps them too: tests/report/csv_columns.rs, kept there so csv.rs, which reads
        // this view, is not imported back from here)
        assert!(page.measurements.iter().any(|m| m[1] == "8K" && m[2] == "175"), "the last listed cell");
    }
}
