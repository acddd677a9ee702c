//! GPU telemetry from AMD's Device Metrics Exporter (`--gpu-metrics URL` pointed at it): its
//! Prometheus text, one series per GPU by the `gpu_id` label, names as in the exporter's
//! documented metrics list (ROCm/device-metrics-exporter, docs/configuration/metricslist.md),
//! lower-cased as the exporter serves them. Units are the exporter's: W, µJ, °C, %, MB, MHz.

use sm_core::gpu_telemetry::GpuSample;

use crate::metrics::{Labels, Metrics};

/// Watts; the package (socket) power stands in where a GPU has no `gpu_power_usage`.
pub const POWER: &str = "gpu_power_usage";
pub const PACKAGE_POWER: &str = "gpu_package_power";
/// Microjoules consumed, cumulative.
pub const ENERGY_UJ: &str = "gpu_energy_consumed";
/// The hotspot temperature, the one that throttles; the edge temperature where it is missing.
pub const JUNCTION_TEMP: &str = "gpu_junction_temperature";
pub const EDGE_TEMP: &str = "gpu_edge_temperature";
pub const GFX_ACTIVITY: &str = "gpu_gfx_activity";
/// MB, taken as MiB (amd-smi's MB are 2²⁰ bytes).
pub const USED_VRAM: &str = "gpu_used_vram";
/// MHz, one series per clock: `clock_type` names which.
pub const CLOCK: &str = "gpu_clock";
pub const ECC: [&str; 2] = ["gpu_ecc_correct_total", "gpu_ecc_uncorrect_total"];

const NAMES: [&str; 10] =
    [POWER, PACKAGE_POWER, ENERGY_UJ, JUNCTION_TEMP, EDGE_TEMP, GFX_ACTIVITY, USED_VRAM, CLOCK, ECC[0], ECC[1]];

/// Every GPU of one scrape, in the order the exporter first names them; empty when the text has
/// no AMD exporter series.
pub fn samples(m: &Metrics) -> Vec<GpuSample> {
    let add = |g: &mut GpuSample, name: &str, labels: &Labels, value: f64| {
        if g.name.is_none() {
            g.name = labels.get("card_model").or_else(|| labels.get("card_series")).map(str::to_string);
        }
        set(g, name, labels, value);
    };
    m.grouped(&NAMES, gpu_id, add).into_iter().map(|(gpu, g)| GpuSample { gpu, ..g }).collect()
}

fn gpu_id(labels: &Labels) -> Option<&str> {
    labels.get("gpu_id").filter(|s| !s.is_empty())
}

fn set(g: &mut GpuSample, name: &str, labels: &Labels, v: f64) {
    match name {
        POWER => g.power_w = Some(v),
        PACKAGE_POWER => g.power_w = g.power_w.or(Some(v)),
        ENERGY_UJ => g.energy_j = Some(v / 1e6),
        JUNCTION_TEMP => g.temp_c = Some(v),
        EDGE_TEMP => g.temp_c = g.temp_c.or(Some(v)),
        GFX_ACTIVITY => g.util_pct = Some(v),
        USED_VRAM => g.mem_used_mib = Some(v),
        // several clocks of a kind (one per XCD): the first stands for the GPU
        CLOCK => match labels.get("clock_type") {
            Some("GPU_CLOCK_TYPE_SYSTEM") => g.sm_clock_mhz = g.sm_clock_mhz.or(Some(v)),
            Some("GPU_CLOCK_TYPE_MEMORY") => g.mem_clock_mhz = g.mem_clock_mhz.or(Some(v)),
            _ => {}
        },
        n if ECC.contains(&n) => g.ecc_errors = Some(g.ecc_errors.unwrap_or(0.0) + v.max(0.0)),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Built from the exporter's documented metric names and labels (not captured from a live
    /// exporter: none was at hand), two MI300X GPUs, the second without a power gauge.
    const AMD: &str = r#"# HELP gpu_power_usage GPU power usage in Watts
# TYPE gpu_power_usage gauge
gpu_power_usage{card_model="AMD Instinct MI300X",card_series="MI300X",gpu_id="0",hostname="h1",serial_number="S0"} 612
# TYPE gpu_package_power gauge
gpu_package_power{card_model="AMD Instinct MI300X",gpu_id="0",hostname="h1"} 600
gpu_package_power{card_model="AMD Instinct MI300X",gpu_id="1",hostname="h1"} 455
# TYPE gpu_energy_consumed gauge
gpu_energy_consumed{card_model="AMD Instinct MI300X",gpu_id="0",hostname="h1"} 9.8765e+12
# TYPE gpu_junction_temperature gauge
gpu_junction_temperature{card_model="AMD Instinct MI300X",gpu_id="0",hostname="h1"} 71
# TYPE gpu_edge_temperature gauge
gpu_edge_temperature{card_model="AMD Instinct MI300X",gpu_id="0",hostname="h1"} 52
gpu_edge_temperature{card_model="AMD Instinct MI300X",gpu_id="1",hostname="h1"} 48
# TYPE gpu_gfx_activity gauge
gpu_gfx_activity{card_model="AMD Instinct MI300X",gpu_id="0",hostname="h1"} 93
# TYPE gpu_used_vram gauge
gpu_used_vram{card_model="AMD Instinct MI300X",gpu_id="0",hostname="h1"} 180000
# TYPE gpu_clock gauge
gpu_clock{card_model="AMD Instinct MI300X",clock_index="0",clock_type="GPU_CLOCK_TYPE_SYSTEM",gpu_id="0",hostname="h1"} 2100
gpu_clock{card_model="AMD Instinct MI300X",clock_index="1",clock_type="GPU_CLOCK_TYPE_SYSTEM",gpu_id="0",hostname="h1"} 2050
gpu_clock{card_model="AMD Instinct MI300X",clock_index="0",clock_type="GPU_CLOCK_TYPE_MEMORY",gpu_id="0",hostname="h1"} 1300
gpu_clock{card_model="AMD Instinct MI300X",clock_index="0",clock_type="GPU_CLOCK_TYPE_SOC",gpu_id="0",hostname="h1"} 1000
# TYPE gpu_ecc_correct_total gauge
gpu_ecc_correct_total{card_model="AMD Instinct MI300X",gpu_id="0",hostname="h1"} 2
gpu_ecc_uncorrect_total{card_model="AMD Instinct MI300X",gpu_id="0",hostname="h1"} 1
gpu_power_usage{hostname="h1"} 5
"#;

    #[test]
    fn one_sample_per_gpu_in_record_units() {
        let g = samples(&Metrics::parse(AMD));
        assert_eq!(g.iter().map(|g| g.gpu.as_str()).collect::<Vec<_>>(), ["0", "1"], "unlabelled series skipped");
        assert_eq!(g[0].name.as_deref(), Some("AMD Instinct MI300X"));
        // µJ to J; the power gauge before the package power
        assert_eq!((g[0].power_w, g[0].energy_j), (Some(612.0), Some(9_876_500.0)));
        assert_eq!((g[0].sm_clock_mhz, g[0].mem_clock_mhz, g[0].temp_c), (Some(2100.0), Some(1300.0), Some(71.0)));
        assert_eq!((g[0].util_pct, g[0].mem_used_mib, g[0].ecc_errors), (Some(93.0), Some(180000.0), Some(3.0)));
        assert_eq!((g[0].throttle_reasons, g[0].xid), (None, None), "the exporter has no such bits");
        assert_eq!((g[1].power_w, g[1].temp_c, g[1].energy_j), (Some(455.0), Some(48.0), None), "fallbacks");
        assert!(samples(&Metrics::parse("DCGM_FI_DEV_POWER_USAGE{gpu=\"0\"} 1")).is_empty());
    }
}
