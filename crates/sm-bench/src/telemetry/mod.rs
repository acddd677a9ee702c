//! The telemetry of one measured span — a decode cell's window, a prefill row's request, a load
//! phase's level or burst (methodology §14.1, §14.3): the server's `/metrics` and the GPU source,
//! each read by its own periodic [`Sampler`] from the span's start to its end, and the figures
//! their reads give. One place, so every span is sampled and summarised the same way.

pub(crate) mod gpu_sampler;
pub(crate) mod nvml;
pub mod sampler;

use std::sync::Arc;
use std::time::{Duration, Instant};

use sm_core::gpu_telemetry::GpuSource;
use sm_core::server_metrics::{Arrived, Ours, ScrapeTime, ServerMetrics, ServerScrape};
use sm_core::telemetry::Telemetry;

use crate::cell::server::{Target, scrape_gauges, server_metrics};
use crate::cell::window::Window;
use crate::telemetry::gpu_sampler::{GPU_INTERVAL, GpuReader, Reading, summarize as gpu_figures};
use crate::telemetry::sampler::Sampler;

/// The sources to sample through a span: the server's `/metrics` (where it has one and
/// `--metrics-interval` is on) and the GPU reader (`--gpu-metrics` or NVML).
#[derive(Clone, Copy)]
pub(crate) struct Sources<'a> {
    pub target: &'a Target,
    pub interval: Option<Duration>,
    pub gpu: Option<&'a Arc<GpuReader>>,
}

/// The samplers running through a span; [`Sampling::stop`] at its end.
pub(crate) struct Sampling {
    origin: Instant,
    interval: Option<Duration>,
    server: Option<Sampler<Timed>>,
    gpu: Option<(Arc<GpuReader>, Sampler<Reading>)>,
}

/// One scrape of the server with when its request was sent and answered: the server read its
/// counters somewhere between the two (methodology §14.1).
pub(crate) struct Timed {
    sent: Instant,
    answered: Instant,
    scrape: ServerScrape,
}

/// The reads of a span, seconds from its start.
pub(crate) struct Reads {
    origin: Instant,
    interval: Option<Duration>,
    gauges: Vec<(ScrapeTime, ServerScrape)>,
    gpu: Option<(GpuSource, Vec<(Duration, Reading)>)>,
}

impl Sources<'_> {
    /// Starts both samplers with `origin` as the span's start: their first reads are taken now.
    pub(crate) fn start(&self, origin: Instant) -> Sampling {
        let interval = self.interval.filter(|_| self.target.metrics);
        let server = interval.map(|i| {
            let target = self.target.clone();
            Sampler::start(origin, i, move || {
                let target = target.clone();
                async move {
                    let sent = Instant::now();
                    let scrape = scrape_gauges(&target).await?;
                    Some(Timed { sent, answered: Instant::now(), scrape })
                }
            })
        });
        // the GPU is read even with the server's series off: energy needs its two ends
        let gpu_interval = self.interval.unwrap_or(GPU_INTERVAL);
        let gpu = self.gpu.map(|g| (g.clone(), g.sample(origin, gpu_interval)));
        Sampling { origin, interval, server, gpu }
    }
}

impl Sampling {
    /// Waits for each source's first read: a span whose requests must all fall between its first
    /// and last reads (a prefill row, a level) sends its first request after this.
    pub(crate) async fn first_taken(&mut self) {
        if let Some(s) = &mut self.server {
            s.first_taken().await;
        }
        if let Some((_, s)) = &mut self.gpu {
            s.first_taken().await;
        }
    }

    /// Takes each source's last read now (the span's end) and returns every read. Both last reads
    /// are taken at once: one after the other, the GPU's would wait out the server's answer, and
    /// its sampled span would overhang the span by that wait (on a busy client, by hundreds of ms
    /// of idle power that dilute the span's mean, methodology §14.3).
    pub(crate) async fn stop(self) -> Reads {
        let origin = self.origin;
        let since = |t: Instant| t.saturating_duration_since(origin).as_secs_f64();
        let server = async {
            match self.server {
                Some(s) => s.stop().await,
                None => Vec::new(),
            }
        };
        // the source after the reads: an exporter's answers say whether it is DCGM's or AMD's
        let gpu = async {
            match self.gpu {
                Some((reader, s)) => {
                    let reads = s.stop().await;
                    Some((reader.source(), reads))
                }
                None => None,
            }
        };
        let (gauges, gpu) = tokio::join!(server, gpu);
        let gauges = gauges
            .into_iter()
            .map(|(_, t)| (ScrapeTime { sent: since(t.sent), answered: since(t.answered) }, t.scrape));
        Reads { origin, interval: self.interval, gauges: gauges.collect(), gpu }
    }
}

impl Reads {
    /// No reads: a span sampled by nothing.
    pub(crate) fn none() -> Reads {
        Reads { origin: Instant::now(), interval: None, gauges: Vec::new(), gpu: None }
    }

    /// The span's figures: `span` its length, `ours` what our requests received to set the
    /// server's count against (`None` where the span has no such figure), `output_tokens` the
    /// tokens that J/token divides by (0: no J/token). Warnings where reads failed or the counts
    /// disagree.
    pub(crate) fn figures(
        &self,
        span: Duration,
        ours: Option<Received<'_>>,
        output_tokens: u64,
    ) -> (Telemetry, Vec<String>) {
        let mut warnings = Vec::new();
        let gpu = self.gpu.as_ref().and_then(|(source, reads)| {
            let (cell, warning) = gpu_figures(*source, reads, span, output_tokens);
            warnings.extend(warning);
            cell
        });
        let origin = self.origin;
        let arriving = |from: f64, to: f64| match ours {
            Some(Received::Arriving(count)) => count(at(origin, from, to)),
            _ => Arrived::default(),
        };
        let ours = ours.map(|o| match o {
            Received::All(n) => Ours::All(n),
            Received::Arriving(_) => Ours::Arriving(&arriving),
        });
        let server = server_metrics(&self.gauges, self.interval, ours);
        warnings.extend(server.as_ref().and_then(ServerMetrics::warning));
        (Telemetry { server_metrics: server, gpu }, warnings)
    }
}

/// What our requests received over a span, for the server's count to be set against (§14.1).
#[derive(Clone, Copy)]
pub(crate) enum Received<'a> {
    /// Every token of the span's requests came between its first and last reads (a load phase
    /// sends its first request after the first read and reads last after its last request).
    All(u64),
    /// Streams ran through the first and last reads (a decode cell): their tokens over a window.
    Arriving(&'a dyn Fn(Window) -> Arrived),
}

/// `[from, to)` seconds after `origin` as a window on the run's clock.
fn at(origin: Instant, from: f64, to: f64) -> Window {
    let instant = |s: f64| origin + Duration::from_secs_f64(s.max(0.0));
    Window { start: instant(from), end: instant(to) }
}
