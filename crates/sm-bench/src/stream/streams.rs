//! A cell's streams: each one sends its request again as soon as the last one ends, until the
//! cancel, and logs what every request saw. Rank 0's cell driver and a worker rank drive their
//! share of a cell's streams with the same code.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use sm_client::JsonBody;
use sm_core::record::CellStatus;
use tokio::sync::watch;
use tokio::task::JoinHandle;

use crate::cell::server::Target;
use crate::stream::live::Live;
use crate::stream::request::{Outcome, StreamTimeouts, stream_request};
use crate::stream::request_log::RequestLog;

/// Starts one stream of the request `body` to `path` per cancel receiver (each stream has its
/// own, so that no lock is shared on the per-token path); they stop at the [`Cancel`].
///
/// [`Cancel`]: crate::stream::live::Cancel
pub(crate) fn spawn(
    target: &Target,
    path: &'static str,
    body: &JsonBody,
    timeouts: StreamTimeouts,
    cancels: Vec<watch::Receiver<bool>>,
    live: &Arc<Live>,
) -> Vec<JoinHandle<Vec<RequestLog>>> {
    cancels
        .into_iter()
        .enumerate()
        .map(|(stream, cancel)| {
            tokio::spawn(worker(stream, target.clone(), path, body.clone(), timeouts, cancel, live.clone()))
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

async fn worker(
    stream: usize,
    target: Target,
    path: &'static str,
    body: JsonBody,
    timeouts: StreamTimeouts,
    mut cancel: watch::Receiver<bool>,
    live: Arc<Live>,
) -> Vec<RequestLog> {
    let observer = live.observer(stream);
    let mut logs = Vec::new();
    // a request the cancel would drop before sending it is not sent (nor logged)
    while !*cancel.borrow() {
        let mut run = stream_request(&target.client, path, &body, timeouts, &mut cancel, &observer).await;
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
