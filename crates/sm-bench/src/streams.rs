//! A cell's streams: each one sends its request again as soon as the last one ends, until the
//! cancel, and logs what every request saw. Rank 0's cell driver and a worker rank drive their
//! share of a cell's streams with the same code.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use sm_client::JsonBody;
use sm_client::discover;
use sm_core::record::CellStatus;
use tokio::sync::watch;
use tokio::task::JoinHandle;

use crate::live::{LIVE_TBT_KEEP, Live};
use crate::request::{Observer, Outcome, StreamTimeouts, stream_request};
use crate::request_log::{Point, RequestLog};
use crate::server::Target;

/// Starts `n` streams of the request `body` to `path`; they stop at the cancel.
pub(crate) fn spawn(
    n: u32,
    target: &Target,
    path: &'static str,
    body: &JsonBody,
    timeouts: StreamTimeouts,
    cancel: &watch::Receiver<bool>,
    live: &Arc<Live>,
) -> Vec<JoinHandle<Vec<RequestLog>>> {
    (0..n as usize)
        .map(|stream| {
            tokio::spawn(worker(stream, target.clone(), path, body.clone(), timeouts, cancel.clone(), live.clone()))
        })
        .collect()
}

/// Every stream's requests once the streams stopped (after the cancel); a stream that crashed
/// or did not stop fails the cell.
pub(crate) async fn collect(workers: Vec<JoinHandle<Vec<RequestLog>>>, live: &Live) -> Vec<RequestLog> {
    let mut logs = Vec::new();
    for w in workers {
        match tokio::time::timeout(Duration::from_secs(30), w).await {
            Ok(Ok(worker_logs)) => logs.extend(worker_logs),
            Ok(Err(e)) => live.fail(CellStatus::Error, format!("a stream worker crashed: {e}")),
            Err(_) => live.fail(CellStatus::Error, "a stream did not stop within 30 s of the cancel".into()),
        }
    }
    logs
}

struct WorkerObserver {
    live: Arc<Live>,
    has_token: AtomicBool,
    /// This stream's index into `live.mirrors`.
    stream: usize,
}

impl Observer for WorkerObserver {
    fn first_token(&self, ttft: Duration) {
        if !self.has_token.swap(true, Ordering::AcqRel) {
            self.live.streams_with_token.fetch_add(1, Ordering::AcqRel);
        }
        let mut s = self.live.stats.lock().unwrap_or_else(|p| p.into_inner());
        s.ttft_ms.push(ttft.as_secs_f64() * 1000.0);
    }
    fn tokens(&self, tokens: u64, since_last: Option<Duration>) {
        self.live.tokens.fetch_add(tokens, Ordering::Relaxed);
        if let Some(gap) = since_last {
            let mut s = self.live.stats.lock().unwrap_or_else(|p| p.into_inner());
            if s.tbt_ms.len() == LIVE_TBT_KEEP {
                s.tbt_ms.pop_front();
            }
            s.tbt_ms.push_back(gap.as_secs_f64() * 1000.0 / tokens as f64);
        }
    }
    fn point(&self, sent: Instant, point: Point) {
        let Some(mirror) = self.live.mirrors.get(self.stream) else { return };
        let mut logs = mirror.lock().unwrap_or_else(|p| p.into_inner());
        if logs.last().is_none_or(|l| l.sent != sent) {
            logs.push(RequestLog { first_token: Some(point.at), ..RequestLog::new(sent) });
        }
        if let Some(log) = logs.last_mut() {
            log.points.push(point);
        }
    }
}

async fn worker(
    stream: usize,
    target: Target,
    path: &'static str,
    body: JsonBody,
    timeouts: StreamTimeouts,
    mut cancel: watch::Receiver<bool>,
    live: Arc<Live>,
) -> Vec<RequestLog> {
    let observer = WorkerObserver { live: live.clone(), has_token: AtomicBool::new(false), stream };
    let mut logs = Vec::new();
    // a request the cancel would drop before sending it is not sent (nor logged)
    while !*cancel.borrow() {
        let mut run = stream_request(&target.client, path, &body, timeouts, &mut cancel, &observer, |id| {
            let target = &target;
            async move {
                if let (true, Some(rid)) = (target.abort_request, id) {
                    let _ = discover::abort_request(&target.client, &rid).await;
                }
            }
        })
        .await;
        let lost = matches!(run.outcome, Outcome::Lost(_));
        run.log.id = run.id.take();
        match run.outcome {
            Outcome::Completed => {
                logs.push(run.log);
                continue;
            }
            Outcome::Cancelled => {
                logs.push(run.log);
                break;
            }
            Outcome::Failed(reason) | Outcome::Lost(reason) => {
                // A failure after the cancel is the cancel's doing, not the server's.
                if !*cancel.borrow() {
                    if lost {
                        live.connection_lost.store(true, Ordering::Release);
                    }
                    run.log.failure = Some(reason.clone());
                    live.fail(CellStatus::Error, reason);
                }
                logs.push(run.log);
                break;
            }
            Outcome::Loop(f) => {
                let reason = format!(
                    "a stream repeated the same {} characters {} times",
                    f.period_chars,
                    f.repeated_chars / f.period_chars
                );
                run.log.failure = Some(reason.clone());
                logs.push(run.log);
                live.fail(CellStatus::Loop, reason);
                break;
            }
        }
    }
    logs
}
