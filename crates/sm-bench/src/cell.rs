//! The sustained-decode cell driver (methodology §1.6): C saturated streams,
//! readiness, a fixed window (or one that ends at `--precision`, §12.3), cancel, drain barrier.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use serde_json::Value;
use sm_client::JsonBody;
use sm_client::discover;
use sm_core::record::{CellPhases, CellStatus, TokenSource};
use sm_core::spec_decode::SpecCounters;

use crate::adaptive;
pub use crate::adaptive::Precision;
use crate::gpu_sampler::GpuReader;
use crate::health::{Probe, process_cpu_seconds};
use crate::live::{Cancel, Live};
use crate::progress::{Controls, LiveSample, Reporter, Step};
use crate::ranks::{RankGroup, RemoteCell, merge};
use crate::request::StreamTimeouts;
use crate::scout::probe_chunk_ratio;

use crate::request_log::RequestLog;
use crate::requests::CellRequests;
use crate::server::{DrainError, IDLE_FOR, Target, answers, drain, scrape};
use crate::spec_note;
use crate::streams;
use crate::telemetry::{Reads, Sampling, Sources};
use crate::tokens::ChunkRatio;
use crate::verdict::{CellOutcome, judge};
use crate::window::{Figures, RunningSample, Window, figures};

/// Timing knobs of a cell.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CellTiming {
    pub duration: Duration,
    pub ready_stable: Duration,
    pub ready_timeout: Duration,
    /// The longest silence between two tokens of a stream (`--stall-timeout`). Before its first
    /// token a stream may wait as long as `ready_timeout`: prefill and queueing take time.
    pub idle_timeout: Duration,
    pub drain_timeout: Duration,
    pub poll: Duration,
    /// `--precision`: `duration` is then the longest window.
    pub precision: Option<Precision>,
    /// `--metrics-interval`: how often the server's `/metrics` is sampled through the window
    /// (methodology §14.1); `None` turns the series off.
    pub metrics_interval: Option<Duration>,
}

impl Default for CellTiming {
    fn default() -> Self {
        CellTiming {
            duration: CellTiming::DEFAULT_DURATION,
            ready_stable: CellTiming::DEFAULT_READY_STABLE,
            ready_timeout: CellTiming::DEFAULT_READY_TIMEOUT,
            idle_timeout: CellTiming::DEFAULT_STALL_TIMEOUT,
            drain_timeout: Duration::from_secs(300),
            poll: Duration::from_millis(250),
            precision: None,
            metrics_interval: Some(Duration::from_secs(1)),
        }
    }
}

impl CellTiming {
    /// The defaults of `--duration`, `--ready-stable`, `--ready-timeout` and `--stall-timeout`:
    /// defined here only, the CLI's flags take them from here.
    pub const DEFAULT_DURATION: Duration = Duration::from_secs(30);
    pub const DEFAULT_READY_STABLE: Duration = Duration::from_secs(3);
    pub const DEFAULT_READY_TIMEOUT: Duration = Duration::from_secs(180);
    pub const DEFAULT_STALL_TIMEOUT: Duration = Duration::from_secs(15);

    pub fn stream_timeouts(&self) -> StreamTimeouts {
        StreamTimeouts { first_token: self.ready_timeout.max(self.idle_timeout), stall: self.idle_timeout }
    }
}

/// One decode cell to run.
pub struct CellSpec<'a> {
    pub target: &'a Target,
    pub path: &'static str,
    pub body: Arc<Value>,
    /// The context in tokens (what progress listeners match on) and its shown label.
    pub context: u64,
    pub label: String,
    pub concurrency: u32,
    pub timing: CellTiming,
    /// The scout saw the server report usage: streams without usage on their
    /// chunks get it at the end (none may end inside a short window).
    pub usage_at_end: bool,
    /// The skip counter (`Controls::skip_cell`) as read before the cell's scout: a skip pressed
    /// since then, during the scout or the drain before the cell, skips this cell.
    pub skip_seen: u64,
    /// `--gpu-metrics` or NVML: sampled through the cell (methodology §14.3).
    pub gpu: Option<Arc<GpuReader>>,
    /// With `--ranks N`: the worker ranks that hold their share of the streams (docs/distributed.md).
    pub ranks: Option<&'a RankGroup>,
}

/// Runs one cell. Stopping (Ctrl-C) or skipping (`s`) ends it early as `skipped`.
pub async fn run_cell(spec: CellSpec<'_>, reporter: &dyn Reporter, controls: &Controls) -> CellOutcome {
    let CellSpec { target, path, body, context, ref label, concurrency, timing, usage_at_end, skip_seen, gpu, ranks } =
        spec;
    let begun = Instant::now();
    let live = Arc::new(Live::new(concurrency, timing.precision.is_some()));
    if target.metrics
        // one idle scrape: the barrier after the previous cell held idleness for IDLE_FOR, and only
        // the scout (which completed) ran since; a busy server (another client, the streams of a
        // process that was stopped) is still waited for
        && let Err(e) = drain(target, timing.drain_timeout, Duration::ZERO).await
    {
        let lost = matches!(e, DrainError::Unreachable);
        return CellOutcome { server_lost: lost, ..CellOutcome::failed(CellStatus::Error, before_reason(e)) };
    }
    if *controls.skip_cell.borrow() != skip_seen {
        return CellOutcome::failed(CellStatus::Skipped, SKIPPED);
    }
    let remote = match ranks {
        Some(group) => {
            match RemoteCell::start(group, concurrency, target, path, &body, timing.stream_timeouts(), live.clone())
                .await
            {
                Ok(r) => Some(r),
                Err(reason) => return CellOutcome::failed(CellStatus::Error, reason),
            }
        }
        None => None,
    };
    let own = remote.as_ref().map_or(concurrency, RemoteCell::own_streams);
    let (cancel, receivers) = Cancel::new(own as usize);
    let wire = JsonBody::new(&body);
    let spawned = Instant::now();
    let workers = streams::spawn(target, path, &wire, timing.stream_timeouts(), receivers, &live);
    let probe = Probe::start();
    let watcher = Watcher {
        target,
        context,
        label,
        concurrency,
        timing,
        live: &live,
        reporter,
        gpu: gpu.as_ref(),
        remote: remote.as_ref(),
    };
    let phase = watcher.watch(controls.clone(), skip_seen).await;
    cancel.cancel();
    if let Some(r) = &remote {
        r.close();
    }
    // asked at once: a server that restarts quickly must still be reported as having gone away
    let mut server_lost =
        live.connection_lost.load(Ordering::Acquire) && !answers(&target.client, ANSWER_AFTER_BREAK).await;
    reporter.step(&Step::Drain { context, label: label.clone(), concurrency });
    let mut logs = streams::collect(workers, &live).await;
    let mut by_rank = Vec::new();
    if let (Some(r), Some(group)) = (remote, ranks) {
        let reports = r.finish(group, &live).await;
        if let Phase::Measured { window, .. } = &phase {
            (logs, by_rank) = merge(logs, own, reports, *window);
        }
    }
    let mut warnings: Vec<String> = retry_warning(&logs).into_iter().collect();
    if target.metrics {
        match drain(target, timing.drain_timeout, IDLE_FOR).await {
            Ok(()) => {}
            Err(DrainError::Unreachable) => server_lost = true,
            Err(e) => warnings.push(format!("after the cell: {e}")),
        }
    }
    let mut counted = CellRequests {
        window: None,
        per_chunk: ChunkRatio::of_logs(&logs).map(|r| r.tokens_per_chunk),
        logs: Vec::new(),
    };
    let mut outcome = match (phase, live.failure()) {
        (_, Some((status, reason))) => CellOutcome::failed(status, reason),
        (Phase::Stopped(reason), None) => CellOutcome::failed(CellStatus::Skipped, reason),
        (Phase::Measured { window, samples, ready_warning, cpu_s, spec, reads }, None) => {
            warnings.extend(ready_warning);
            let cpu_pct = cpu_s.map(|s| s / window.len().as_secs_f64() * 100.0);
            let health = probe.finish(window.start, window.end, cpu_pct);
            if let (Some(rank0), Some(h)) = (by_rank.first_mut(), health) {
                (rank0.client_lag_ms_p99, rank0.client_cpu_pct) = (Some(h.lag_ms_p99), Some(h.cpu_pct));
            }
            let (mut f, ratio) = count(&logs, window, &samples, usage_at_end, || {
                probe_chunk_ratio(&target.client, path, &body, timing.stream_timeouts().first_token, concurrency)
            })
            .await;
            adaptive::account_for_position(&mut f, timing.duration);
            counted.window = Some(window);
            counted.per_chunk = ratio.map(|r| r.tokens_per_chunk);
            let mut outcome = judge(f, concurrency, target.metrics, timing.idle_timeout);
            if let Some(h) = health {
                outcome.warnings.extend(h.warnings());
            }
            outcome.health = health;
            outcome.ranks = std::mem::take(&mut by_rank);
            let (spec_decode, note) = spec_note::spec_decode(spec.0, spec.1, spec_note::tokens_per_chunk(&logs));
            outcome.spec_decode = spec_decode;
            outcome.warnings.extend(note);
            let tokens = outcome.figures.as_ref().map_or(0, |f| f.output_tokens);
            let tok_s = outcome.figures.as_ref().map(|f| f.total_tok_s);
            let (telemetry, telemetry_warnings) = reads.figures(window.len(), tok_s, tokens);
            outcome.gpu = telemetry.gpu;
            outcome.server_metrics = telemetry.server_metrics;
            outcome.warnings.extend(telemetry_warnings);
            outcome.phases = Some(CellPhases {
                before_s: (spawned - begun).as_secs_f64(),
                ramp_s: (window.start - spawned).as_secs_f64(),
                window_s: window.len().as_secs_f64(),
                after_s: window.end.elapsed().as_secs_f64(),
            });
            outcome
        }
    };
    if server_lost && outcome.status == CellStatus::Error {
        outcome.reason = outcome.reason.map(|r| format!("{SERVER_LOST} ({r})"));
        outcome.server_lost = true;
    } else if server_lost {
        warnings.push("the server stopped responding after the cell".into());
    }
    outcome.warnings.splice(0..0, warnings);
    counted.logs = logs;
    outcome.requests = Some(counted);
    outcome
}

/// Said on any cell, valid or not: a retry is never silent (methodology §6.7).
fn retry_warning(logs: &[RequestLog]) -> Option<String> {
    let n = logs.iter().filter(|r| r.retried).count();
    (n > 0).then(|| {
        format!(
            "{n} request(s) were sent a second time: their connection broke before any byte of the answer (a pooled keep-alive connection the server had closed)"
        )
    })
}

/// The cell's figures, and the tokens per chunk they counted with. Chunks after their request's
/// last usage carry the tokens per chunk of the cell's requests that ended with a usage total; when none ended but the server reports usage
/// (`usage_at_end`, from the scout), one probe request on the now idle server measures it.
async fn count<F, Fut>(
    logs: &[RequestLog],
    window: Window,
    samples: &[RunningSample],
    usage_at_end: bool,
    probe: F,
) -> (Figures, Option<ChunkRatio>)
where
    F: FnOnce() -> Fut,
    Fut: std::future::Future<Output = Option<ChunkRatio>>,
{
    let ratio = ChunkRatio::of_logs(logs);
    let mut f = figures(logs, window, samples, ratio);
    // a request that ended without any usage total shows the server sent none for it: its tokens
    // are counted from chunks, whatever the scout saw, and the cell says so
    let ended_without_usage = logs.iter().any(|r| r.ended.is_some() && !r.usage && !r.usage_at_end);
    if usage_at_end && !ended_without_usage && f.token_source == Some(TokenSource::Chunks) {
        f.token_source = Some(TokenSource::UsageAtEnd);
    }
    if ratio.is_none() && f.estimated_tokens > 0 && f.token_source == Some(TokenSource::UsageAtEnd) {
        let probed = probe().await;
        f = Figures { token_source: f.token_source, ..figures(logs, window, samples, probed) };
        return (f, probed);
    }
    (f, ratio)
}

/// How long a server that just broke a stream gets to show it is still there.
const ANSWER_AFTER_BREAK: Duration = Duration::from_secs(2);

const SKIPPED: &str = "skipped by the user";

/// How a cell's reason starts when the server went away during it.
pub const SERVER_LOST: &str = "server stopped responding";

fn before_reason(e: DrainError) -> String {
    match e {
        DrainError::Unreachable => format!("{SERVER_LOST} before the cell"),
        e => format!("before the cell: {e}"),
    }
}

enum Phase {
    Measured {
        window: Window,
        samples: Vec<RunningSample>,
        ready_warning: Option<String>,
        cpu_s: Option<f64>,
        /// Speculative-decoding counters at the window's start and end (methodology §14.2).
        spec: (Option<SpecCounters>, Option<SpecCounters>),
        /// The server's `/metrics` and the GPU source through the window (§14.1, §14.3).
        reads: Box<Reads>,
    },
    Stopped(&'static str),
}

struct Watcher<'a> {
    target: &'a Target,
    context: u64,
    label: &'a str,
    concurrency: u32,
    timing: CellTiming,
    live: &'a Live,
    reporter: &'a dyn Reporter,
    gpu: Option<&'a Arc<GpuReader>>,
    remote: Option<&'a RemoteCell>,
}

impl Watcher<'_> {
    /// Waits for readiness, then for the window to pass; samples the running gauge.
    async fn watch(&self, mut controls: Controls, skip_seen: u64) -> Phase {
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
                _ = controls.stop_now.wait_for(|v| *v) => return Phase::Stopped("stopped by the user"),
                _ = controls.skip_cell.wait_for(|n| *n != skip_seen) => return Phase::Stopped(SKIPPED),
                _ = tick.tick() => {}
                _ = sleep_until_opt(deadline) => {}
            }
            if self.live.failed.load(Ordering::Acquire) {
                return Phase::Stopped("a stream failed");
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
                        None => Reads::default(),
                    };
                    return Phase::Measured { window: w, samples, ready_warning, cpu_s, spec, reads: Box::new(reads) };
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_retry_is_said() {
        let mut logs = vec![RequestLog::new(Instant::now()); 3];
        assert_eq!(retry_warning(&logs), None);
        logs[1].retried = true;
        assert!(retry_warning(&logs).is_some_and(|w| w.starts_with("1 request(s) were sent a second time")));
    }
}
