//! Speculative decoding on the page (methodology §14.2): a line per cell in its hover and under
//! the Markdown matrix, and the range over the run's cells in the facts.

use sm_core::record::{CellStatus, DecodeCell};
use sm_core::spec_decode::SpecDecode;

fn valid(cells: &[DecodeCell]) -> impl Iterator<Item = (&DecodeCell, SpecDecode)> {
    cells.iter().filter(|c| c.status() == CellStatus::Valid).filter_map(|c| c.spec_decode.map(|s| (c, s)))
}

/// A valid cell's line: "speculative decoding: 2.6 tokens per step (acceptance 53 %)".
pub fn cell_line(cell: &DecodeCell) -> Option<String> {
    cell.spec_decode.filter(|_| cell.status() == CellStatus::Valid).map(|s| s.to_string())
}

/// The facts' line: the range of tokens per step and acceptance over the run's valid cells.
pub fn fact(decode: &[DecodeCell]) -> Option<(String, String)> {
    let cells: Vec<SpecDecode> = valid(decode).map(|(_, s)| s).collect();
    let range = |get: fn(&SpecDecode) -> f64, fmt: fn(f64) -> String| {
        let lo = cells.iter().map(get).fold(f64::INFINITY, f64::min);
        let hi = cells.iter().map(get).fold(f64::NEG_INFINITY, f64::max);
        if fmt(lo) == fmt(hi) { fmt(lo) } else { format!("{}–{}", fmt(lo), fmt(hi)) }
    };
    (!cells.is_empty()).then(|| {
        let len = range(|s| s.acceptance_length, |x| format!("{x:.1}"));
        let rate = range(|s| s.acceptance_rate, |x| format!("{:.0}", x * 100.0));
        (
            "Speculative decoding".into(),
            format!("{len} tokens per step (acceptance {rate} %), from the engine's counters"),
        )
    })
}

/// Markdown: one line per valid cell with figures, under the decode matrix.
pub fn markdown_lines(decode: &[DecodeCell]) -> Vec<String> {
    valid(decode).map(|(c, s)| format!("{} × {}: {s}", c.label, c.concurrency)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cell(label: &str, c: u32, len: f64, rate: f64) -> DecodeCell {
        DecodeCell {
            label: label.into(),
            concurrency: c,
            status: Some(CellStatus::Valid),
            spec_decode: Some(SpecDecode { acceptance_length: len, acceptance_rate: rate, drafts: 10, accepted: 5 }),
            ..Default::default()
        }
    }

    #[test]
    fn lines_and_facts_say_tokens_per_step_and_acceptance() {
        let mut decode = vec![cell("1K", 4, 2.6, 0.53), cell("8K", 4, 2.2, 0.4)];
        assert_eq!(cell_line(&decode[0]).unwrap(), "speculative decoding: 2.6 tokens per step (acceptance 53 %)");
        assert_eq!(
            fact(&decode).unwrap().1,
            "2.2–2.6 tokens per step (acceptance 40–53 %), from the engine's counters"
        );
        assert_eq!(markdown_lines(&decode)[1], "8K × 4: speculative decoding: 2.2 tokens per step (acceptance 40 %)");
        decode[1].status = Some(CellStatus::Error);
        assert_eq!(fact(&decode).unwrap().1, "2.6 tokens per step (acceptance 53 %), from the engine's counters");
        decode.clear();
        assert_eq!(fact(&decode), None);
    }
}
