//! GPU telemetry through a cell (methodology §14.3): where the GPU figures come from, and the
//! window's figures from the reads that the cell's [`Sampler`] took — the same periodic sampler
//! as the server's `/metrics`, started when the window opens (its first read is the window's
//! start) and stopped when it closes (its last read is the window's end, before the streams are
//! cancelled), so an energy counter's difference spans the whole window.

use std::sync::Arc;
use std::time::{Duration, Instant};

use sm_client::dcgm::DcgmClient;
use sm_core::gpu_telemetry::{GpuCell, GpuRead, GpuSample, GpuSource};

use crate::telemetry::sampler::Sampler;

/// The read interval when `--metrics-interval` is off: dcgm-exporter's own fastest usual setting.
pub const GPU_INTERVAL: Duration = Duration::from_secs(1);

/// One read of every GPU, or why it failed (kept, so the cell can say how many failed).
pub(crate) type Reading = Result<Vec<GpuSample>, String>;

/// Where GPU samples come from.
#[derive(Debug)]
pub enum GpuReader {
    Dcgm(DcgmClient),
    Nvml(crate::telemetry::nvml::LocalGpus),
}

impl GpuReader {
    pub fn source(&self) -> GpuSource {
        match self {
            // DCGM or AMD: the exporter's answers said which
            GpuReader::Dcgm(c) => c.source(),
            GpuReader::Nvml(_) => GpuSource::Nvml,
        }
    }

    async fn read(&self) -> Reading {
        match self {
            GpuReader::Dcgm(c) => c.read().await.map_err(|e| e.to_string()),
            GpuReader::Nvml(n) => n.read().await,
        }
    }

    /// Starts reading every `interval` from `origin` (the window's start); a failed read is kept.
    pub(crate) fn sample(self: &Arc<Self>, origin: Instant, interval: Duration) -> Sampler<Reading> {
        let reader = self.clone();
        Sampler::start(origin, interval, move || {
            let reader = reader.clone();
            async move { Some(reader.read().await) }
        })
    }
}

/// The window's figures from its reads (seconds after its start), and a warning where reads
/// failed.
pub(crate) fn summarize(
    source: GpuSource,
    reads: &[(Duration, Reading)],
    window: Duration,
    output_tokens: u64,
) -> (Option<GpuCell>, Option<String>) {
    let ok: Vec<GpuRead> = reads
        .iter()
        .filter_map(|(t, r)| r.as_ref().ok().map(|g| GpuRead { t: t.as_secs_f64(), gpus: g.clone() }))
        .collect();
    let failed = reads.iter().filter_map(|(_, r)| r.as_ref().err()).next_back();
    let cell = GpuCell::summarize(source, &ok, window.as_secs_f64(), output_tokens);
    let warning = match (&cell, failed) {
        (None, Some(e)) => Some(format!("no GPU figures: every read in the window failed ({e})")),
        (Some(_), Some(e)) => {
            Some(format!("{} of {} GPU reads in the window failed ({e})", reads.len() - ok.len(), reads.len()))
        }
        (_, None) => None,
    };
    (cell, warning)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(power: f64, energy: f64) -> GpuSample {
        GpuSample { gpu: "0".into(), power_w: Some(power), energy_j: Some(energy), ..GpuSample::default() }
    }

    #[test]
    fn the_window_reads_give_its_figures_and_failures_are_said() {
        let at = Duration::from_secs_f64;
        let reads: Vec<(Duration, Reading)> = vec![
            (at(0.01), Ok(vec![sample(200.0, 50.0)])),
            (at(1.0), Err("HTTP 502".into())),
            (at(2.01), Ok(vec![sample(200.0, 450.0)])),
        ];
        let (cell, warning) = summarize(GpuSource::Dcgm, &reads, at(2.0), 100);
        let cell = cell.unwrap();
        assert_eq!(cell.samples, 2);
        assert_eq!(cell.power_w, Some(200.0));
        // 400 J over the 2 s sampled, over the 2 s window
        assert!((cell.energy_j.unwrap() - 400.0).abs() < 1e-9, "{cell:?}");
        assert_eq!(warning.as_deref(), Some("1 of 3 GPU reads in the window failed (HTTP 502)"));
        let (none, warning) = summarize(GpuSource::Dcgm, &reads[1..2], at(2.0), 100);
        assert!(none.is_none() && warning.unwrap().starts_with("no GPU figures"));
    }
}
