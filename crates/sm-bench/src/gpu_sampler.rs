//! GPU telemetry through a cell (methodology §14.3): a task that reads the GPU source at a fixed
//! interval, and reads at the window's start and end, so the energy counter's difference spans
//! the whole window. Kept apart from the server-metrics sampler for now.

use std::sync::Arc;
use std::time::{Duration, Instant};

use sm_client::dcgm::DcgmClient;
use sm_core::gpu_telemetry::{GpuCell, GpuRead, GpuSample, GpuSource};
use std::sync::Mutex;

use tokio::sync::watch;

use crate::window::Window;

/// Until `--metrics-interval` lands: one read a second, dcgm-exporter's own default interval.
pub const GPU_INTERVAL: Duration = Duration::from_secs(1);

/// Where GPU samples come from.
#[derive(Debug)]
pub enum GpuReader {
    Dcgm(DcgmClient),
    Nvml(crate::nvml::LocalGpus),
}

impl GpuReader {
    pub fn source(&self) -> GpuSource {
        match self {
            GpuReader::Dcgm(_) => GpuSource::Dcgm,
            GpuReader::Nvml(_) => GpuSource::Nvml,
        }
    }

    async fn read(&self) -> Result<Vec<GpuSample>, String> {
        match self {
            GpuReader::Dcgm(c) => c.read().await.map_err(|e| e.to_string()),
            GpuReader::Nvml(n) => n.read().await,
        }
    }
}

type Stamped = (Instant, Result<Vec<GpuSample>, String>);

/// The running sampler of one cell: a task reads at the interval; the watcher reads inline at the
/// window's start and end, so the end read lands before the streams are cancelled.
pub(crate) struct GpuSampler {
    reader: Arc<GpuReader>,
    reads: Arc<Mutex<Vec<Stamped>>>,
    /// When the inline reads landed: the end read lands just after the window's end and still
    /// describes it, while an interval read after it may see the streams already cancelled.
    inline: Mutex<Vec<Instant>>,
    stop: watch::Sender<bool>,
    task: tokio::task::JoinHandle<()>,
}

impl GpuSampler {
    pub(crate) fn start(reader: Arc<GpuReader>, interval: Duration) -> GpuSampler {
        let (stop, mut stop_rx) = watch::channel(false);
        let reads: Arc<Mutex<Vec<Stamped>>> = Arc::default();
        let (r, out) = (reader.clone(), reads.clone());
        let task = tokio::spawn(async move {
            let mut tick = tokio::time::interval(interval);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                tokio::select! {
                    biased;
                    _ = stop_rx.wait_for(|s| *s) => break,
                    _ = tick.tick() => {}
                }
                let read = stamped(&r).await;
                out.lock().unwrap_or_else(|p| p.into_inner()).push(read);
            }
        });
        GpuSampler { reader, reads, inline: Mutex::default(), stop, task }
    }

    /// One read now (the window's start or end), kept with the others.
    pub(crate) async fn read_now(&self) {
        let read = stamped(&self.reader).await;
        self.inline.lock().unwrap_or_else(|p| p.into_inner()).push(read.0);
        self.reads.lock().unwrap_or_else(|p| p.into_inner()).push(read);
    }

    /// Stops the task; the window's figures and a warning where reads failed.
    pub(crate) async fn finish(self, window: Option<Window>, output_tokens: u64) -> (Option<GpuCell>, Option<String>) {
        let _ = self.stop.send(true);
        let _ = self.task.await;
        let Some(w) = window else { return (None, None) };
        let mut reads = std::mem::take(&mut *self.reads.lock().unwrap_or_else(|p| p.into_inner()));
        reads.sort_by_key(|(at, _)| *at);
        let inline = self.inline.lock().unwrap_or_else(|p| p.into_inner());
        let end = inline.iter().copied().filter(|at| *at >= w.end).max().unwrap_or(w.end);
        summarize(self.reader.source(), &reads, w, end, output_tokens)
    }
}

/// One read, stamped at its midpoint: a scrape's round trip is unknown to split otherwise.
async fn stamped(reader: &GpuReader) -> Stamped {
    let sent = Instant::now();
    let read = reader.read().await;
    (sent + sent.elapsed() / 2, read)
}

/// The reads from the window's start to `end` (its end read), as seconds after its start, and
/// their figures.
fn summarize(
    source: GpuSource,
    reads: &[Stamped],
    w: Window,
    end: Instant,
    output_tokens: u64,
) -> (Option<GpuCell>, Option<String>) {
    let inside: Vec<&Stamped> = reads.iter().filter(|(at, _)| *at >= w.start && *at <= end).collect();
    let ok: Vec<GpuRead> = inside
        .iter()
        .filter_map(|(at, r)| r.as_ref().ok().map(|g| GpuRead { t: (*at - w.start).as_secs_f64(), gpus: g.clone() }))
        .collect();
    let failed = inside.iter().filter_map(|(_, r)| r.as_ref().err()).next_back();
    let cell = GpuCell::summarize(source, &ok, w.len().as_secs_f64(), output_tokens);
    let warning = match (&cell, failed) {
        (None, Some(e)) => Some(format!("no GPU figures: every read in the window failed ({e})")),
        (Some(_), Some(e)) => {
            Some(format!("{} of {} GPU reads in the window failed ({e})", inside.len() - ok.len(), inside.len()))
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
    fn only_the_window_reads_count_and_failures_are_said() {
        let t0 = Instant::now();
        let at = |s: f64| t0 + Duration::from_secs_f64(s);
        let w = Window { start: at(1.0), end: at(3.0) };
        let reads: Vec<Stamped> = vec![
            (at(0.5), Ok(vec![sample(100.0, 0.0)])),
            (at(1.01), Ok(vec![sample(200.0, 50.0)])),
            (at(2.0), Err("HTTP 502".into())),
            (at(3.01), Ok(vec![sample(200.0, 450.0)])),
            (at(4.0), Ok(vec![sample(100.0, 900.0)])),
        ];
        let (cell, warning) = summarize(GpuSource::Dcgm, &reads, w, at(3.01), 100);
        let cell = cell.unwrap();
        assert_eq!(cell.samples, 2);
        assert_eq!(cell.power_w, Some(200.0));
        // 400 J over the 2 s sampled, over the 2 s window
        assert!((cell.energy_j.unwrap() - 400.0).abs() < 1e-9, "{cell:?}");
        assert_eq!(warning.as_deref(), Some("1 of 3 GPU reads in the window failed (HTTP 502)"));
        let (none, warning) = summarize(GpuSource::Dcgm, &reads[2..3], w, at(3.01), 100);
        assert!(none.is_none() && warning.unwrap().starts_with("no GPU figures"));
    }
}
