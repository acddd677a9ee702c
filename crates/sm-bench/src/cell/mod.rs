//! The sustained-decode cell driver (methodology §1.6): C saturated streams,
//! readiness, a fixed window (or one that ends at `--precision`, §12.3), cancel, drain barrier.

pub(crate) mod adaptive;
pub(crate) mod health;
pub(crate) mod server;
pub(crate) mod spec_note;
pub(crate) mod thinking;
pub(crate) mod tool_calls;
pub(crate) mod verdict;
mod watch;
pub(crate) mod window;

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use serde_json::Value;
use sm_client::JsonBody;
use sm_core::ranks::RankCell;
use sm_core::record::{CellPhases, CellStatus, TokenSource};
use tokio::task::JoinHandle;

pub use crate::cell::adaptive::Precision;
use crate::cell::health::Probe;
use crate::cell::server::{DrainError, IDLE_FOR, Target, answers, drain};
use crate::cell::verdict::{CellOutcome, judge};
use crate::cell::window::{Figures, RunningSample, Window, arrivals, figures};
use crate::ranks::{RankGroup, RemoteCell, merge};
use crate::runner::progress::{Controls, Reporter, Step};
use crate::runner::requests::CellRequests;
use crate::stream::live::{Cancel, Live};
use crate::stream::request::StreamTimeouts;
use crate::stream::request_log::RequestLog;
use crate::stream::scout::probe_chunk_ratio;
use crate::stream::streams;
use crate::stream::tokens::ChunkRatio;
use crate::telemetry::Received;
use crate::telemetry::gpu_sampler::GpuReader;
use watch::{Measured, Watched, Watcher};

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

/// Runs one cell: prepare (the barrier before it, the ranks, the streams) → drive (readiness, the
/// window, then every stream's log) → collect (the outcome). Stopping (Ctrl-C) or skipping (`s`)
/// ends it early as `skipped`.
pub async fn run_cell(spec: CellSpec<'_>, reporter: &dyn Reporter, controls: &Controls) -> CellOutcome {
    let begun = Instant::now();
    let started = match prepare(&spec, controls).await {
        Ok(started) => started,
        Err(outcome) => return outcome,
    };
    let driven = drive(&spec, started, reporter, controls).await;
    collect(&spec, driven, begun).await
}

/// A cell whose streams are running.
struct Started {
    live: Arc<Live>,
    remote: Option<RemoteCell>,
    /// The streams this process holds (all of them without ranks).
    own: u32,
    cancel: Cancel,
    workers: Vec<JoinHandle<Vec<RequestLog>>>,
    spawned: Instant,
    probe: Probe,
}

/// Waits for an idle server, starts the ranks' share and spawns this process's streams; `Err` is
/// the outcome of a cell that could not start.
async fn prepare(spec: &CellSpec<'_>, controls: &Controls) -> Result<Started, CellOutcome> {
    let (target, timing) = (spec.target, spec.timing);
    let live = Arc::new(Live::new(spec.concurrency, timing.precision.is_some()));
    if target.metrics
        // one idle scrape: the barrier after the previous cell held idleness for IDLE_FOR, and only
        // the scout (which completed) ran since; a busy server (another client, the streams of a
        // process that was stopped) is still waited for
        && let Err(e) = drain(target, timing.drain_timeout, Duration::ZERO).await
    {
        let lost = matches!(e, DrainError::Unreachable);
        return Err(CellOutcome { server_lost: lost, ..CellOutcome::failed(CellStatus::Error, before_reason(e)) });
    }
    if *controls.skip_cell.borrow() != spec.skip_seen {
        return Err(CellOutcome::failed(CellStatus::Skipped, SKIPPED));
    }
    let remote = match spec.ranks {
        Some(group) => {
            let timeouts = timing.stream_timeouts();
            let started =
                RemoteCell::start(group, spec.concurrency, target, spec.path, &spec.body, timeouts, live.clone()).await;
            Some(started.map_err(|reason| CellOutcome::failed(CellStatus::Error, reason))?)
        }
        None => None,
    };
    let own = remote.as_ref().map_or(spec.concurrency, RemoteCell::own_streams);
    let (cancel, receivers) = Cancel::new(own as usize);
    let wire = JsonBody::new(&spec.body);
    let spawned = Instant::now();
    let workers = streams::spawn(target, spec.path, &wire, timing.stream_timeouts(), receivers, &live);
    Ok(Started { live, remote, own, cancel, workers, spawned, probe: Probe::start() })
}

/// What driving the streams gathered: how the window went, every rank's request logs, and what
/// was seen around them.
struct Driven {
    watched: Watched,
    logs: Vec<RequestLog>,
    by_rank: Vec<RankCell>,
    warnings: Vec<String>,
    server_lost: bool,
    live: Arc<Live>,
    probe: Probe,
    spawned: Instant,
}

/// Watches readiness and the window, then cancels the streams, gathers their logs (and the
/// ranks') and waits for the server to be idle again.
async fn drive(spec: &CellSpec<'_>, started: Started, reporter: &dyn Reporter, controls: &Controls) -> Driven {
    let Started { live, remote, own, cancel, workers, spawned, probe } = started;
    let target = spec.target;
    let watcher = Watcher {
        target,
        context: spec.context,
        label: &spec.label,
        concurrency: spec.concurrency,
        timing: spec.timing,
        live: &live,
        reporter,
        gpu: spec.gpu.as_ref(),
        remote: remote.as_ref(),
    };
    let watched = watcher.watch(controls.clone(), spec.skip_seen).await;
    cancel.cancel();
    if let Some(r) = &remote {
        r.close();
    }
    // asked at once: a server that restarts quickly must still be reported as having gone away
    let mut server_lost =
        live.connection_lost.load(Ordering::Acquire) && !answers(&target.client, ANSWER_AFTER_BREAK).await;
    reporter.step(&Step::Drain { context: spec.context, label: spec.label.clone(), concurrency: spec.concurrency });
    let mut logs = streams::collect(workers, &live).await;
    let mut by_rank = Vec::new();
    if let (Some(r), Some(group)) = (remote, spec.ranks) {
        let reports = r.finish(group, &live).await;
        if let Watched::Measured(m) = &watched {
            (logs, by_rank) = merge(logs, own, reports, m.window);
        }
    }
    let mut warnings: Vec<String> = retry_warning(&logs).into_iter().collect();
    if target.metrics {
        match drain(target, spec.timing.drain_timeout, IDLE_FOR).await {
            Ok(()) => {}
            Err(DrainError::Unreachable) => server_lost = true,
            Err(e) => warnings.push(format!("after the cell: {e}")),
        }
    }
    Driven { watched, logs, by_rank, warnings, server_lost, live, probe, spawned }
}

/// The cell's outcome: a failure, a stop, or the measured cell; then whether the server went away.
async fn collect(spec: &CellSpec<'_>, driven: Driven, begun: Instant) -> CellOutcome {
    let Driven { watched, logs, by_rank, mut warnings, server_lost, live, probe, spawned } = driven;
    let mut counted = CellRequests {
        window: None,
        per_chunk: ChunkRatio::of_logs(&logs).map(|r| r.tokens_per_chunk),
        logs: Vec::new(),
    };
    let mut outcome = match (watched, live.failure()) {
        (_, Some((status, reason))) => CellOutcome::failed(status, reason),
        (Watched::Stopped(reason), None) => CellOutcome::failed(CellStatus::Skipped, reason),
        (Watched::Measured(mut m), None) => {
            warnings.extend(m.ready_warning.take());
            let window = m.window;
            let parts = Parts { spec, logs: &logs, by_rank, probe, begun, spawned };
            let (outcome, per_chunk) = measured(parts, *m).await;
            counted.window = Some(window);
            counted.per_chunk = per_chunk;
            outcome
        }
    };
    if server_lost && outcome.status == CellStatus::Error {
        outcome.reason = outcome.reason.as_deref().map(lost_reason);
        outcome.server_lost = true;
    } else if server_lost {
        warnings.push("the server stopped responding after the cell".into());
    }
    outcome.warnings.splice(0..0, warnings);
    counted.logs = logs;
    outcome.requests = Some(counted);
    outcome
}

/// What a measured cell is made of besides its window.
struct Parts<'a, 's> {
    spec: &'a CellSpec<'s>,
    logs: &'a [RequestLog],
    by_rank: Vec<RankCell>,
    probe: Probe,
    begun: Instant,
    spawned: Instant,
}

/// The one constructor of a measured cell: its window's figures judged, then the client's health,
/// each rank's share, speculative decoding, the telemetry and where the cell's wall time went.
/// Also the tokens per chunk its figures counted with.
async fn measured(parts: Parts<'_, '_>, m: Measured) -> (CellOutcome, Option<f64>) {
    let Parts { spec, logs, mut by_rank, probe, begun, spawned } = parts;
    let Measured { window, samples, cpu_s, spec: counters, reads, .. } = m;
    let (target, timing) = (spec.target, spec.timing);
    let cpu_pct = cpu_s.map(|s| s / window.len().as_secs_f64() * 100.0);
    let health = probe.finish(window.start, window.end, cpu_pct);
    if let (Some(rank0), Some(h)) = (by_rank.first_mut(), health) {
        (rank0.client_lag_ms_p99, rank0.client_cpu_pct) = (Some(h.lag_ms_p99), Some(h.cpu_pct));
    }
    let (mut f, ratio) = count(logs, window, &samples, spec.usage_at_end, || {
        probe_chunk_ratio(&target.client, spec.path, &spec.body, timing.stream_timeouts().first_token, spec.concurrency)
    })
    .await;
    adaptive::account_for_position(&mut f, timing.duration);
    let per_chunk = ratio.map(|r| r.tokens_per_chunk);
    let mut outcome = judge(f, spec.concurrency, target.metrics, timing.idle_timeout);
    if let Some(h) = health {
        outcome.warnings.extend(h.warnings());
    }
    outcome.health = health;
    outcome.ranks = by_rank;
    let (spec_decode, note) = spec_note::spec_decode(counters.0, counters.1, spec_note::tokens_per_chunk(logs));
    outcome.spec_decode = spec_decode;
    outcome.warnings.extend(note);
    let tokens = outcome.figures.as_ref().map_or(0, |f| f.output_tokens);
    // the server's count is set against the tokens that arrived over the scrapes' own span
    let arrived = |w: Window| arrivals(logs, per_chunk, w);
    let ours = outcome.figures.as_ref().map(|_| Received::Arriving(&arrived));
    let (telemetry, telemetry_warnings) = reads.figures(window.len(), ours, tokens);
    outcome.gpu = telemetry.gpu;
    outcome.server_metrics = telemetry.server_metrics;
    outcome.warnings.extend(telemetry_warnings);
    outcome.phases = Some(CellPhases {
        before_s: (spawned - begun).as_secs_f64(),
        ramp_s: (window.start - spawned).as_secs_f64(),
        window_s: window.len().as_secs_f64(),
        after_s: window.end.elapsed().as_secs_f64(),
    });
    (outcome, per_chunk)
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

/// How a unit's reason starts when the server went away during it or before it.
const SERVER_LOST: &str = "server stopped responding";

/// `saw`, what a unit saw fail, marked as a loss of the server: `server stopped responding (saw)`.
/// Marked once, by what the unit's state says (a cell's `server_lost`, a burst found gone before
/// it began), never by reading the text back.
pub(crate) fn lost_reason(saw: &str) -> String {
    if saw.is_empty() { SERVER_LOST.to_string() } else { format!("{SERVER_LOST} ({saw})") }
}

/// The reason of a unit (`cell`, `burst`) that found the server gone before it sent anything.
pub(crate) fn lost_before(unit: &str) -> String {
    format!("{SERVER_LOST} before the {unit}")
}

fn before_reason(e: DrainError) -> String {
    match e {
        DrainError::Unreachable => lost_before("cell"),
        e => format!("before the cell: {e}"),
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
