//! GPU power and energy on the page (methodology §14.3): a line per cell in its hover and under
//! the Markdown matrix ("312 W · 1.9 J/token"); the CSV's `gpu_*` columns are `csv::raw::Gpu`.

use sm_core::gpu_telemetry::{EnergyFrom, GpuCell};
use sm_core::record::{CellStatus, DecodeCell};

fn valid(cells: &[DecodeCell]) -> impl Iterator<Item = (&DecodeCell, &GpuCell)> {
    cells.iter().filter(|c| c.status() == CellStatus::Valid).filter_map(|c| c.gpu.as_ref().map(|g| (c, g)))
}

/// A valid cell's hover line: "GPU: 312 W · 1.9 J/token".
pub fn cell_line(cell: &DecodeCell) -> Option<String> {
    let g = cell.gpu.as_ref().filter(|_| cell.status() == CellStatus::Valid)?;
    let text = g.to_string();
    (!text.is_empty()).then(|| format!("GPU: {text}"))
}

/// Markdown: one line per valid cell with figures, and where they came from.
pub fn markdown_lines(decode: &[DecodeCell]) -> Vec<String> {
    valid(decode).map(|(c, g)| format!("{} × {}: {g}{}", c.label, c.concurrency, details(g))).collect()
}

/// What follows a [`GpuCell`]'s own line: Wh per million tokens, then where the figures came from.
pub fn details(g: &GpuCell) -> String {
    let mut line = String::new();
    if let Some(wh) = g.wh_per_million_tokens {
        line.push_str(&format!(" · {wh:.0} Wh per million tokens"));
    }
    let from = match g.energy_from {
        Some(EnergyFrom::Counter) => ", energy from the energy counter",
        Some(EnergyFrom::PowerIntegral) => ", energy from power samples",
        None => "",
    };
    line.push_str(&format!(" ({}{from}, {} reads)", g.source.name(), g.samples));
    line
}

#[cfg(test)]
mod tests {
    use super::*;
    use sm_core::gpu_telemetry::{GpuSource, Throttle};

    #[test]
    fn lines_say_power_energy_per_token_and_source() {
        let g = GpuCell {
            source: GpuSource::Dcgm,
            samples: 5,
            power_w: Some(312.4),
            energy_j: Some(9372.0),
            energy_from: Some(EnergyFrom::Counter),
            joules_per_token: Some(1.94),
            wh_per_million_tokens: Some(538.9),
            throttle: Some(Throttle::None),
            gpus: vec![],
        };
        let mut cell = DecodeCell {
            label: "8K".into(),
            concurrency: 4,
            status: Some(CellStatus::Valid),
            gpu: Some(g),
            ..Default::default()
        };
        assert_eq!(cell_line(&cell).unwrap(), "GPU: 312 W · 1.9 J/token");
        assert_eq!(
            markdown_lines(std::slice::from_ref(&cell)),
            ["8K × 4: 312 W · 1.9 J/token · 539 Wh per million tokens (dcgm, energy from the energy counter, 5 reads)"]
        );
        cell.status = Some(CellStatus::Error);
        assert_eq!(cell_line(&cell), None);
        assert!(markdown_lines(&[cell]).is_empty());
    }
}
