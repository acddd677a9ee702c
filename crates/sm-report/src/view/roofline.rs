//! The memory-bandwidth roofline of a cell as the page says it (methodology §14.4):
//! "61 % of the H200's memory-bandwidth roofline (bound 4,775 tok/s)".

use sm_core::record::{DecodeCell, RunRecord};
use sm_core::roofline_record::record_bandwidth;

use crate::format;

/// The sentence for a valid cell with a roofline; `None` without one.
pub fn line(record: &RunRecord, cell: &DecodeCell) -> Option<String> {
    let (bound, fraction) = (cell.roofline_tok_s?, cell.roofline_fraction?);
    let gpu = match record_bandwidth(record) {
        Ok((bw, label)) if bw.gpus > 1 => format!("{} × {label}", bw.gpus),
        Ok((_, label)) => label.to_string(),
        Err(_) => "GPU".to_string(),
    };
    let pct = (fraction * 100.0).round();
    Some(format!("{pct:.0} % of the {gpu}'s memory-bandwidth roofline (bound {} tok/s)", format::fixed1(bound)))
}

/// Every roofline sentence of the record, with its cell: `(label × concurrency, sentence)`.
pub fn lines(record: &RunRecord) -> Vec<(String, String)> {
    record.decode.iter().filter_map(|c| Some((format!("{} × {}", c.label, c.concurrency), line(record, c)?))).collect()
}
