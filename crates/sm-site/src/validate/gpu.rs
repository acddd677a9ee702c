//! A decode cell's GPU telemetry (methodology §14.3), checked like the rest: only a valid cell
//! carries it; every figure finite and within what a server's GPUs can show; J/token agreeing
//! with energy ÷ the cell's output tokens, and Wh per million tokens with J/token, as the
//! record's rounding allows.

use sm_core::gpu_telemetry::GpuCell;
use sm_core::record::{CellStatus, DecodeCell};

use super::{Refusal, figure};

/// GPUs of one server: a rack-scale system has 72; room for more, not for thousands.
pub const MAX_GPUS: usize = 256;
/// Watts of one server's GPUs together: 256 GPUs at 2 kW.
const MAX_POWER_W: f64 = 512_000.0;
/// Joules of one cell: the total power over a 24 h window.
const MAX_ENERGY_J: f64 = MAX_POWER_W * 86_400.0;
const MAX_J_PER_TOKEN: f64 = 1e6;
const MAX_CLOCK_MHZ: f64 = 100_000.0;
const MAX_TEMP_C: f64 = 1000.0;
const MAX_MIB: f64 = 1e9;
const MAX_NAME: usize = 200;

pub fn cell(at: &str, c: &DecodeCell) -> Result<(), Refusal> {
    check(at, c.status(), c.gpu.as_ref(), c.output_tokens)
}

/// The figures of any measured span — a decode cell, a prefill row, a load phase's level — of
/// `status`, whose J/token divides by `output_tokens` where it has them.
pub fn check(at: &str, status: CellStatus, g: Option<&GpuCell>, output_tokens: Option<u64>) -> Result<(), Refusal> {
    let Some(g) = g else { return Ok(()) };
    if status != CellStatus::Valid {
        return Err(Refusal::FigureOfInvalid { at: at.to_string(), status: status.name(), field: "gpu" });
    }
    let incoherent = |why: String| Err(Refusal::Incoherent { at: at.to_string(), why });
    if g.gpus.is_empty() || g.gpus.len() > MAX_GPUS {
        return incoherent(format!("gpu.gpus holds {} GPUs (1 to {MAX_GPUS})", g.gpus.len()));
    }
    figure(at, "gpu.power_w", g.power_w, MAX_POWER_W)?;
    figure(at, "gpu.energy_j", g.energy_j, MAX_ENERGY_J)?;
    figure(at, "gpu.joules_per_token", g.joules_per_token, MAX_J_PER_TOKEN)?;
    figure(at, "gpu.wh_per_million_tokens", g.wh_per_million_tokens, MAX_J_PER_TOKEN * 1e6 / 3600.0)?;
    if g.energy_j.is_some() != g.energy_from.is_some() {
        return incoherent("gpu.energy_j and gpu.energy_from go together".into());
    }
    if let (Some(e), Some(j), Some(tokens)) = (g.energy_j, g.joules_per_token, output_tokens) {
        let want = e / tokens.max(1) as f64;
        if (j - want).abs() > 0.01 * want + 1e-6 {
            return incoherent(format!("gpu.joules_per_token is {j} but energy ÷ output tokens is {want:.6}"));
        }
    }
    if let (Some(j), Some(wh)) = (g.joules_per_token, g.wh_per_million_tokens) {
        let want = j * 1e6 / 3600.0;
        if (wh - want).abs() > 0.01 * want + 1e-3 {
            return incoherent(format!("gpu.wh_per_million_tokens is {wh} but J/token × 10⁶ ÷ 3600 is {want:.3}"));
        }
    }
    for f in &g.gpus {
        if f.gpu.len() > MAX_NAME || f.name.as_ref().is_some_and(|n| n.len() > MAX_NAME) {
            return incoherent(format!("a GPU's id or name is longer than {MAX_NAME} characters"));
        }
        figure(at, "gpu.gpus[].power_w", f.power_w, MAX_POWER_W)?;
        figure(at, "gpu.gpus[].sm_clock_mhz", f.sm_clock_mhz, MAX_CLOCK_MHZ)?;
        figure(at, "gpu.gpus[].mem_clock_mhz", f.mem_clock_mhz, MAX_CLOCK_MHZ)?;
        figure(at, "gpu.gpus[].temp_c_max", f.temp_c_max, MAX_TEMP_C)?;
        figure(at, "gpu.gpus[].util_pct", f.util_pct, 100.0)?;
        figure(at, "gpu.gpus[].mem_used_mib_max", f.mem_used_mib_max, MAX_MIB)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use sm_core::gpu_telemetry::{EnergyFrom, GpuCell, GpuFigures, GpuSource, Throttle};

    use super::*;

    #[test]
    fn figures_are_checked_for_range_and_coherence() {
        let ok = GpuCell {
            source: GpuSource::Dcgm,
            samples: 4,
            power_w: Some(300.0),
            energy_j: Some(900.0),
            energy_from: Some(EnergyFrom::Counter),
            joules_per_token: Some(0.9),
            wh_per_million_tokens: Some(250.0),
            throttle: Some(Throttle::None),
            gpus: vec![GpuFigures { gpu: "0".into(), power_w: Some(300.0), ..Default::default() }],
        };
        let c = |g: GpuCell, status| DecodeCell {
            status: Some(status),
            output_tokens: Some(1000),
            gpu: Some(g),
            ..Default::default()
        };
        assert!(cell("x", &c(ok.clone(), CellStatus::Valid)).is_ok());
        assert!(cell("x", &DecodeCell::default()).is_ok());
        assert!(matches!(cell("x", &c(ok.clone(), CellStatus::Error)), Err(Refusal::FigureOfInvalid { .. })));
        let hot = GpuFigures { temp_c_max: Some(f64::NAN), ..ok.gpus[0].clone() };
        for bad in [
            GpuCell { power_w: Some(-1.0), ..ok.clone() },
            GpuCell { energy_j: Some(f64::INFINITY), ..ok.clone() },
            GpuCell { joules_per_token: Some(2.0), ..ok.clone() },
            GpuCell { wh_per_million_tokens: Some(1.0), ..ok.clone() },
            GpuCell { energy_from: None, ..ok.clone() },
            GpuCell { gpus: vec![], ..ok.clone() },
            GpuCell { gpus: vec![hot], ..ok.clone() },
        ] {
            assert!(cell("x", &c(bad.clone(), CellStatus::Valid)).is_err(), "{bad:?}");
        }
    }
}
