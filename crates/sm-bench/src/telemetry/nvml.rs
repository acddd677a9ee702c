//! Local GPUs through NVML (methodology §14.3), by `nvml-wrapper`, which loads `libnvidia-ml` when
//! the run starts: a machine without NVIDIA's driver builds and runs the same binary, and simply
//! has no local source. The mapping of NVML's units to a sample is pure
//! ([`sm_core::gpu_telemetry::NvmlValues`]) and tested without a GPU.

use std::sync::Arc;

use nvml_wrapper::Nvml;
use nvml_wrapper::enum_wrappers::device::{Clock, EccCounter, MemoryError, TemperatureSensor};
use sm_core::gpu_telemetry::{GpuSample, NvmlValues};

/// The GPUs this machine's NVML sees.
#[derive(Debug, Clone)]
pub struct LocalGpus {
    nvml: Arc<Nvml>,
}

impl LocalGpus {
    /// NVML with one GPU at least; else why not (no driver, no GPU), for the run's warnings.
    pub fn open() -> Result<LocalGpus, String> {
        let nvml = Nvml::init().map_err(|e| format!("no local GPU telemetry: NVML is not available ({e})"))?;
        match nvml.device_count() {
            Ok(n) if n > 0 => Ok(LocalGpus { nvml: Arc::new(nvml) }),
            Ok(_) => Err("no local GPU telemetry: NVML sees no GPU".into()),
            Err(e) => Err(format!("no local GPU telemetry: NVML cannot count the GPUs ({e})")),
        }
    }

    /// Every GPU now; NVML's calls block, so they run off the async workers.
    pub async fn read(&self) -> Result<Vec<GpuSample>, String> {
        let nvml = self.nvml.clone();
        tokio::task::spawn_blocking(move || read_all(&nvml)).await.map_err(|e| format!("NVML read crashed: {e}"))?
    }
}

fn read_all(nvml: &Nvml) -> Result<Vec<GpuSample>, String> {
    let n = nvml.device_count().map_err(|e| format!("NVML: {e}"))?;
    (0..n)
        .map(|i| {
            let d = nvml.device_by_index(i).map_err(|e| format!("NVML GPU {i}: {e}"))?;
            let ecc = |kind| d.total_ecc_errors(kind, EccCounter::Volatile).ok();
            let values = NvmlValues {
                index: i,
                name: d.name().ok(),
                power_mw: d.power_usage().ok(),
                energy_mj: d.total_energy_consumption().ok(),
                sm_clock_mhz: d.clock_info(Clock::SM).ok(),
                mem_clock_mhz: d.clock_info(Clock::Memory).ok(),
                temp_c: d.temperature(TemperatureSensor::Gpu).ok(),
                util_pct: d.utilization_rates().ok().map(|u| u.gpu),
                mem_used_bytes: d.memory_info().ok().map(|m| m.used),
                throttle_reasons: d.current_throttle_reasons().ok().map(|r| r.bits()),
                ecc_errors: ecc(MemoryError::Corrected).zip(ecc(MemoryError::Uncorrected)).map(|(a, b)| a + b),
            };
            Ok(GpuSample::from(values))
        })
        .collect()
}
