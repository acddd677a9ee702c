//! The telemetry of one measured span — a decode cell's window, a prefill row's request, a load
//! phase's level or burst (methodology §14.1, §14.3): the server's `/metrics` and the GPU source,
//! each read by its own periodic [`Sampler`] from the span's start to its end, and the figures
//! their reads give. One place, so every span is sampled and summarised the same way.

use std::sync::Arc;
use std::time::{Duration, Instant};

use sm_core::gpu_telemetry::GpuSource;
use sm_core::server_metrics::{ServerMetrics, ServerScrape};
use sm_core::telemetry::Telemetry;

use crate::gpu_sampler::{GPU_INTERVAL, GpuReader, Reading, summarize as gpu_figures};
use crate::sampler::Sampler;
use crate::server::{Target, scrape_gauges, server_metrics};

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
    interval: Option<Duration>,
    server: Option<Sampler<ServerScrape>>,
    gpu: Option<(Arc<GpuReader>, Sampler<Reading>)>,
}

/// The reads of a span, seconds from its start.
#[derive(Default)]
pub(crate) struct Reads {
    interval: Option<Duration>,
    gauges: Vec<(Duration, ServerScrape)>,
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
                async move { scrape_gauges(&target).await }
            })
        });
        // the GPU is read even with the server's series off: energy needs its two ends
        let gpu_interval = self.interval.unwrap_or(GPU_INTERVAL);
        let gpu = self.gpu.map(|g| (g.clone(), g.sample(origin, gpu_interval)));
        Sampling { interval, server, gpu }
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

    /// Takes each source's last read now (the span's end) and returns every read.
    pub(crate) async fn stop(self) -> Reads {
        let gauges = match self.server {
            Some(s) => s.stop().await,
            None => Vec::new(),
        };
        // the source after the reads: an exporter's answers say whether it is DCGM's or AMD's
        let gpu = match self.gpu {
            Some((reader, s)) => {
                let reads = s.stop().await;
                Some((reader.source(), reads))
            }
            None => None,
        };
        Reads { interval: self.interval, gauges, gpu }
    }
}

impl Reads {
    /// The span's figures: `span` its length, `ours_tok_s` our output tok/s over it (the server's
    /// is set against it; `None` where the span has no such figure), `output_tokens` the tokens
    /// that J/token divides by (0: no J/token). Warnings where reads failed or the counts disagree.
    pub(crate) fn figures(
        &self,
        span: Duration,
        ours_tok_s: Option<f64>,
        output_tokens: u64,
    ) -> (Telemetry, Vec<String>) {
        let mut warnings = Vec::new();
        let gpu = self.gpu.as_ref().and_then(|(source, reads)| {
            let (cell, warning) = gpu_figures(*source, reads, span, output_tokens);
            warnings.extend(warning);
            cell
        });
        let server = server_metrics(&self.gauges, self.interval, ours_tok_s);
        warnings.extend(server.as_ref().and_then(ServerMetrics::warning));
        (Telemetry { server_metrics: server, gpu }, warnings)
    }
}
