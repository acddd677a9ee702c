//! The roofline applied to a run record (methodology §14.4): each valid decode cell gets its
//! bound and achieved fraction from the record's GPUs and the model shape the run was given.
//! Works on old records too, since it needs only what every record holds.

use crate::record::{CellStatus, DecodeCell, RunRecord};
use crate::roofline::{Bandwidth, bound_tok_s, fraction, judge, lookup_gpu};
pub use crate::roofline::{RecordedShape, ShapeSource};

/// Why no roofline could be computed for a record.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum RooflineError {
    #[error("the record names no GPU; give --gpu NAME --gpu-count N for the roofline")]
    NoGpu,
    #[error("GPU `{0}` is not in the roofline's bandwidth table (docs/methodology.md §14.4)")]
    UnknownGpu(String),
}

/// The record's GPUs as one summed bandwidth, and the table's short name of the first.
pub fn record_bandwidth(record: &RunRecord) -> Result<(Bandwidth, &'static str), RooflineError> {
    let gpu = record.hardware.gpus.first().ok_or(RooflineError::NoGpu)?;
    let known = lookup_gpu(&gpu.name).ok_or_else(|| RooflineError::UnknownGpu(gpu.name.clone()))?;
    let gpus = record.hardware.gpu_count.max(record.hardware.gpus.len() as u32);
    Ok((Bandwidth { gb_s_per_gpu: known.gb_s, gpus }, known.label))
}

/// Chunks carried several tokens when the time between tokens is clearly below the time between
/// chunks: the sign of speculative decoding (or of an engine that batches its stream).
fn multi_token_chunks(cell: &DecodeCell) -> bool {
    match (cell.tbt_ms.p50, cell.chunk_gap_ms.p50) {
        (Some(tbt), Some(gap)) if gap > 0.0 => tbt < 0.75 * gap,
        _ => false,
    }
}

/// Sets each valid cell's `roofline_tok_s` and `roofline_fraction`, and a warning on a cell above
/// its bound. Records the shape in the settings.
pub fn apply(record: &mut RunRecord, shape: RecordedShape) -> Result<(), RooflineError> {
    let (bw, _) = record_bandwidth(record)?;
    for cell in record.decode.iter_mut().filter(|c| c.status() == CellStatus::Valid) {
        // the warning a previous `apply` gave, found from the figures it came from and not by
        // reading the warnings: replaced by the one for this shape
        let stale = roofline_warning(cell);
        let bound = bound_tok_s(&shape.shape, bw, cell.concurrency, cell.context);
        cell.roofline_tok_s = bound;
        cell.roofline_fraction = fraction(cell.total_tok_s, bound);
        cell.warnings.retain(|w| Some(w) != stale.as_ref());
        cell.warnings.extend(roofline_warning(cell));
    }
    record.settings.model_shape = Some(shape);
    Ok(())
}

/// The warning of a cell above its roofline, from its recorded `roofline_fraction`.
fn roofline_warning(cell: &DecodeCell) -> Option<String> {
    let f = cell.roofline_fraction?;
    let reason = judge(f, multi_token_chunks(cell))?;
    Some(format!("tok/s above the memory-bandwidth roofline ({:.0} %): {reason}", f * 100.0))
}
