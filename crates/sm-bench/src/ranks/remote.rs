//! Rank 0's side of one cell: every worker holds its share of the streams, opens and closes its
//! window on rank 0's word, and sends its requests back; [`merge`] puts them on rank 0's clock.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use serde_json::Value;
use sm_core::ranks::RankCell;
use sm_core::record::CellStatus;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use super::wire::{CellOrder, RankReport, ToCoordinator, ToWorker};
use super::{Cmd, Conn, RankGroup, broadcast, share};
use crate::cell::adaptive::Sums;
use crate::cell::server::Target;
use crate::cell::window::{Window, figures};
use crate::stream::live::Live;
use crate::stream::request::StreamTimeouts;
use crate::stream::request_log::RequestLog;
use crate::stream::tokens::ChunkRatio;

/// What one worker brought back from a cell.
pub(crate) struct PeerOutcome {
    rank: u32,
    streams: u32,
    report: RankReport,
    rtt: Option<Duration>,
}

type Driven = (Result<Conn, String>, Result<PeerOutcome, String>);

/// The workers' part of a cell in progress.
pub(crate) struct RemoteCell {
    own: u32,
    cmds: Vec<mpsc::UnboundedSender<Cmd>>,
    tasks: Vec<JoinHandle<Driven>>,
    /// The workers' answers to `--precision`'s checks, by check.
    answers: tokio::sync::Mutex<mpsc::UnboundedReceiver<(u64, Sums)>>,
    checks: AtomicU64,
}

/// How long rank 0 waits for every worker's sums at a check; a check without them does not pass.
const CHECK_TIMEOUT: Duration = Duration::from_secs(1);

/// How long a worker gets to send its requests after the close (they may be many).
const REPORT_TIMEOUT: Duration = Duration::from_secs(60);

impl RemoteCell {
    /// Sends every worker its share of the cell. Fails (nothing sent) when a worker is gone: the
    /// cell is never measured at a smaller concurrency than asked.
    pub(crate) async fn start(
        group: &RankGroup,
        concurrency: u32,
        target: &Target,
        path: &str,
        body: &Value,
        timeouts: StreamTimeouts,
        live: Arc<Live>,
    ) -> Result<RemoteCell, String> {
        let peers = group.take("cell", "the cell cannot hold its concurrency").await?;
        let (answer, answers) = mpsc::unbounded_channel();
        let mut cell = RemoteCell {
            own: share(concurrency, group.ranks, 0),
            cmds: Vec::new(),
            tasks: Vec::new(),
            answers: tokio::sync::Mutex::new(answers),
            checks: AtomicU64::new(0),
        };
        for (rank, conn) in peers {
            let order = CellOrder {
                path: path.to_string(),
                body: body.clone(),
                streams: share(concurrency, group.ranks, rank),
                first_token_timeout_ms: timeouts.first_token.as_millis() as u64,
                stall_timeout_ms: timeouts.stall.as_millis() as u64,
                abort_request: target.client.aborts_on_cancel(),
                mirrored: live.mirrored(),
            };
            let (tx, rx) = mpsc::unbounded_channel();
            cell.cmds.push(tx);
            cell.tasks.push(tokio::spawn(drive(rank, conn, order, rx, live.clone(), answer.clone())));
        }
        Ok(cell)
    }

    /// The streams rank 0 holds itself.
    pub(crate) fn own_streams(&self) -> u32 {
        self.own
    }

    pub(crate) fn open(&self) {
        broadcast(&self.cmds, Cmd::Open);
    }

    /// With `--precision`: every worker's sums over its window's first `len`, the same window on
    /// its clock (methodology §12.3); `None` when one did not answer within a second.
    pub(crate) async fn sums(&self, len: Duration) -> Option<Vec<Sums>> {
        let id = self.checks.fetch_add(1, Ordering::Relaxed);
        broadcast(&self.cmds, Cmd::Check { id, len });
        let mut answers = self.answers.lock().await;
        let deadline = tokio::time::Instant::now() + CHECK_TIMEOUT;
        let mut got = Vec::with_capacity(self.cmds.len());
        while got.len() < self.cmds.len() {
            match tokio::time::timeout_at(deadline, answers.recv()).await {
                Ok(Some((answered, sums))) if answered == id => got.push(sums),
                // a late answer to an earlier check
                Ok(Some(_)) => {}
                Ok(None) | Err(_) => return None,
            }
        }
        Some(got)
    }

    pub(crate) fn close(&self) {
        broadcast(&self.cmds, Cmd::Close);
    }

    /// Every worker's report; a worker that is lost or does not report fails the cell (`live`),
    /// and is gone for the rest of the run.
    pub(crate) async fn finish(self, group: &RankGroup, live: &Live) -> Vec<PeerOutcome> {
        drop(self.cmds);
        let mut reports = Vec::new();
        let mut peers = group.peers.lock().await;
        for (i, task) in self.tasks.into_iter().enumerate() {
            let rank = i + 1;
            let (conn, outcome) = match tokio::time::timeout(REPORT_TIMEOUT, task).await {
                Ok(Ok(driven)) => driven,
                Ok(Err(e)) => lost(rank as u32, &format!("its driver crashed: {e}"), live),
                Err(_) => lost(rank as u32, "it sent no report within 60 s of the close", live),
            };
            peers[i] = conn;
            match outcome {
                Ok(o) => reports.push(o),
                Err(reason) => live.fail(CellStatus::Error, reason),
            }
        }
        reports
    }
}

/// A worker lost mid-cell: the cell fails, never measured at a smaller concurrency.
fn lost(rank: u32, why: &str, live: &Live) -> Driven {
    let reason =
        format!("rank {rank} was lost mid-cell ({why}): the cell cannot hold its concurrency without its streams");
    live.fail(CellStatus::Error, reason.clone());
    (Err(reason.clone()), Err(reason))
}

/// Drives one worker through a cell: the order, the window's open and close, its readiness and
/// failures into `live`, and its report.
async fn drive(
    rank: u32,
    mut conn: Conn,
    order: CellOrder,
    mut cmds: mpsc::UnboundedReceiver<Cmd>,
    live: Arc<Live>,
    answers: mpsc::UnboundedSender<(u64, Sums)>,
) -> Driven {
    let streams = order.streams;
    if let Err(e) = conn.send(&ToWorker::Cell(order)).await {
        return lost(rank, &e.to_string(), &live);
    }
    let (mut with_token, mut open_sent, mut rtt, mut commanded) = (0u32, None, None, true);
    loop {
        tokio::select! {
            cmd = cmds.recv(), if commanded => {
                let message = match cmd {
                    Some(Cmd::Open) => {
                        open_sent = Some(Instant::now());
                        ToWorker::Open
                    }
                    Some(Cmd::Check { id, len }) => ToWorker::Check { id, len_ns: len.as_nanos() as u64 },
                    Some(Cmd::Close) | None => {
                        commanded = false;
                        ToWorker::Close
                    }
                };
                if let Err(e) = conn.send(&message).await {
                    return lost(rank, &e.to_string(), &live);
                }
            }
            message = conn.recv::<ToCoordinator>() => match message {
                Ok(Some(ToCoordinator::Streams { with_token: n })) => {
                    live.streams_with_token.fetch_add(n.saturating_sub(with_token) as usize, Ordering::AcqRel);
                    with_token = with_token.max(n);
                }
                Ok(Some(ToCoordinator::Failed { status, reason })) => live.fail(status, format!("rank {rank}: {reason}")),
                Ok(Some(ToCoordinator::Opened)) => rtt = open_sent.map(|t: Instant| t.elapsed()),
                Ok(Some(ToCoordinator::Sums { id, sums })) => {
                    let _ = answers.send((id, sums));
                }
                Ok(Some(ToCoordinator::Report(report))) => {
                    return (Ok(conn), Ok(PeerOutcome { rank, streams, report, rtt }));
                }
                // a level's messages have no place in a cell
                Ok(Some(ToCoordinator::Hello { .. } | ToCoordinator::Ready | ToCoordinator::LevelReport(_))) => {}
                Ok(None) => return lost(rank, "it closed the connection", &live),
                Err(e) => return lost(rank, &e.to_string(), &live),
            }
        }
    }
}

/// The cell's requests from every rank on rank 0's clock (rank 0's own first), and each rank's
/// share of the window. A worker's requests are timed from its window's open, which is placed at
/// rank 0's: every figure is then computed over all the requests exactly as over one process's,
/// so percentiles keep their definitions and token counts add.
pub(crate) fn merge(
    own: Vec<RequestLog>,
    own_streams: u32,
    workers: Vec<PeerOutcome>,
    window: Window,
) -> (Vec<RequestLog>, Vec<RankCell>) {
    let mut by_rank = vec![(0, own_streams, own, None, None, None)];
    for w in workers {
        let logs = w.report.logs.iter().map(|l| l.to_log(window.start)).collect();
        by_rank.push((w.rank, w.streams, logs, w.report.lag_ms_p99, w.report.cpu_pct, w.rtt));
    }
    let all: Vec<RequestLog> = by_rank.iter().flat_map(|r| r.2.iter().cloned()).collect();
    // one tokens-per-chunk for every rank, the merged figures' own: the ranks' tokens add up
    let ratio = ChunkRatio::of_logs(&all);
    let cells = by_rank
        .iter()
        .map(|(rank, streams, logs, lag, cpu, rtt)| {
            let f = figures(logs, window, &[], ratio);
            RankCell {
                rank: *rank,
                streams: *streams,
                output_tokens: Some(f.output_tokens),
                requests: Some(f.requests),
                client_lag_ms_p99: *lag,
                client_cpu_pct: *cpu,
                open_rtt_ms: rtt.map(|d| d.as_secs_f64() * 1000.0),
            }
        })
        .collect();
    (all, cells)
}

#[cfg(test)]
mod tests;
