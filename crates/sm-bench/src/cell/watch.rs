//! Watching a cell's streams: readiness, then the window (fixed, or ended early by
//! `--precision`), sampling the scheduler's gauge and reporting live figures as it goes.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Instant;

use sm_client::discover;
use sm_core::spec_decode::SpecCounters;

use super::{CellTiming, SKIPPED};
use crate::cell::adaptive;
use crate::cell::health::process_cpu_seconds;
use crate::cell::server::{Target, scrape};
use crate::cell::window::{RunningSample, Window};
use crate::ranks::RemoteCell;
use crate::runner::progress::{Controls, LiveSample, Reporter, Step};
use crate::stream::live::Live;
use crate::telemetry::gpu_sampler::GpuReader;
use crate::telemetry::{Reads, Sampling, Sources};

/// How the window went: measured, or stopped before it closed.
pub(super) enum Watched {
    Measured(Box<Measured>),
    Stopped(&'static str),
}

/// A window that closed, and what was read through it.
pub(super) struct Measured {
    pub window: Window,
    pub samples: Vec<RunningSample>,
    pub ready_warning: Option<String>,
    pub cpu_s: Option<f64>,
    /// Speculative-decoding counters at the window's start and end (methodology §14.2).
    pub spec: (Option<SpecCounters>, Option<SpecCounters>),
    /// The server's `/metrics` and the GPU source through the window (§14.1, §14.3).
    pub reads: Reads,
}

pub(super) struct Watcher<'a> {
    pub target: &'a Target,
    pub context: u64,
    pub label: &'a str,
    pub concurrency: u32,
    pub timing: CellTiming,
    pub live: &'a Live,
    pub reporter: &'a dyn Reporter,
    pub gpu: Option<&'a Arc<GpuReader>>,
    pub remote: Option<&'a RemoteCell>,
}

impl Watcher<'_> {
    /// Waits for readiness, then for the window to pass; samples the running gauge.
    pub(super) async fn watch(&self, mut controls: Controls, skip_seen: u64) -> Watched {
        let timing = self.timing;
        let started = Instant::now();
        let mut ready_since: Option<Instant> = None;
        let mut window: Option<Window> = None;
        let mut ready_warning = None;
        let mut samples = Vec::new();
        let mut last_reason = String::new();
        let mut cpu_start = None;
        let mut spec_start = None;
        let mut sampling: Option<Sampling> = None;
        let mut tick = tokio::time::interval(timing.poll);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            let deadline = window.map(|w| w.end);
            tokio::select! {
                biased;
                _ = controls.stop_now.wait_for(|v| *v) => return Watched::Stopped("stopped by the user"),
                _ = controls.skip_cell.wait_for(|n| *n != skip_seen) => return Watched::Stopped(SKIPPED),
                _ = tick.tick() => {}
                _ = sleep_until_opt(deadline) => {}
            }
            if self.live.failed.load(Ordering::Acquire) {
                return Watched::Stopped("a stream failed");
            }
            let state = if self.target.metrics { scrape(self.target).await } else { None };
            let now = Instant::now();
            self.report_live(now, state);
            if let Some(w) = window {
                if let Some(s) = &state {
                    samples.push(RunningSample { at: now, running: s.running });
                }
                let w = if now < w.end && self.settled(w.start, now).await {
                    Window { start: w.start, end: now }
                } else {
                    w
                };
                if now >= w.end {
                    let cpu_s = cpu_start.zip(process_cpu_seconds()).map(|(a, b)| b - a);
                    let spec = (spec_start, state.and_then(|s| s.spec));
                    let reads = match sampling.take() {
                        Some(s) => s.stop().await,
                        None => Reads::none(),
                    };
                    return Watched::Measured(Box::new(Measured {
                        window: w,
                        samples,
                        ready_warning,
                        cpu_s,
                        spec,
                        reads,
                    }));
                }
                continue;
            }
            let streams = self.live.streams_with_token.load(Ordering::Acquire);
            let (ready, why_not) = readiness(self.concurrency, streams, state.as_ref(), self.target.metrics);
            if ready {
                let since = *ready_since.get_or_insert(now);
                if now - since < timing.ready_stable {
                    self.ramp(&mut last_reason, "stable readiness");
                    continue;
                }
            } else {
                ready_since = None;
                self.ramp(&mut last_reason, &why_not);
                if now - started < timing.ready_timeout {
                    continue;
                }
                ready_warning =
                    Some(format!("readiness timed out after {:.0} s: {why_not}", timing.ready_timeout.as_secs_f64()));
            }
            let w = Window { start: now, end: now + timing.duration };
            window = Some(w);
            if let Some(r) = self.remote {
                r.open();
            }
            cpu_start = process_cpu_seconds();
            spec_start = state.and_then(|s| s.spec);
            let sources = Sources { target: self.target, interval: timing.metrics_interval, gpu: self.gpu };
            sampling = Some(sources.start(w.start));
            self.reporter.step(&Step::Measuring {
                context: self.context,
                label: self.label.to_string(),
                concurrency: self.concurrency,
                started: w.start,
                window: timing.duration,
            });
            if let Some(s) = state {
                samples.push(RunningSample { at: now, running: s.running });
            }
        }
    }

    /// With `--precision`, past the shortest window: whether the figures so far have settled. Over
    /// ranks the check is over every rank's streams: each worker sends its sums over the same
    /// window length on its clock, and a check without every worker's does not pass.
    async fn settled(&self, start: Instant, now: Instant) -> bool {
        let Some(p) = self.timing.precision else { return false };
        let window = Window { start, end: now };
        let Some(remote) = self.remote else {
            return adaptive::settled(self.live.mirrors(), window, self.timing.duration, p);
        };
        if window.len() < p.min_duration {
            return false;
        }
        let mut sums = adaptive::sums(self.live.mirrors(), window);
        let Some(theirs) = remote.sums(window.len()).await else { return false };
        theirs.into_iter().all(|s| sums.add(s)) && adaptive::within(&sums, window, self.timing.duration, p)
    }

    fn ramp(&self, last: &mut String, reason: &str) {
        if last != reason {
            reason.clone_into(last);
            self.reporter.step(&Step::Ramp {
                context: self.context,
                label: self.label.to_string(),
                concurrency: self.concurrency,
                waiting_for: reason.to_string(),
            });
        }
    }

    fn report_live(&self, at: Instant, server: Option<discover::SchedulerState>) {
        let (ttft, tbt) = self.live.medians();
        self.reporter.live(&LiveSample {
            at,
            tokens: self.live.tokens(),
            streams_with_token: self.live.streams_with_token.load(Ordering::Acquire),
            concurrency: self.concurrency,
            ttft_ms_p50: ttft,
            ttfa_ms_p50: self.live.ttfa_median(),
            ttftc_ms_p50: self.live.ttftc_median(),
            tbt_ms_p50: tbt,
            server,
        });
    }
}

async fn sleep_until_opt(deadline: Option<Instant>) {
    match deadline {
        Some(d) => tokio::time::sleep_until(d.into()).await,
        None => std::future::pending().await,
    }
}

/// Ready when every stream produced a token and, where the server reports its
/// scheduler, it runs all C requests and queues none.
fn readiness(
    concurrency: u32,
    streams_with_token: usize,
    state: Option<&discover::SchedulerState>,
    metrics: bool,
) -> (bool, String) {
    let c = concurrency as usize;
    if streams_with_token < c {
        return (false, format!("waiting for streams {streams_with_token}/{c}"));
    }
    if !metrics {
        return (true, String::new());
    }
    match state {
        None => (false, "metrics scrape failed".into()),
        Some(s) if s.waiting > 0.0 => (false, format!("queue {}", s.waiting)),
        Some(s) if s.running < concurrency as f64 => (false, format!("running {}/{c}", s.running)),
        Some(_) => (true, String::new()),
    }
}
