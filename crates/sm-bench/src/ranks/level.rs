//! Rank 0's side of a rate level or a burst over ranks (docs/distributed.md): every worker
//! sends its part of the one schedule from rank 0's open, and its requests come back timed from its
//! own start, which rank 0 places at its own (as a cell's are placed at its window's open).

use std::time::{Duration, Instant};

use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinHandle;

use super::wire::{LevelOrder, ToCoordinator, ToWorker, WireSent};
use super::{Cmd, Conn, RankGroup, broadcast, share};
use sm_core::ranks::RankLevel;
use sm_core::stats::percentile;

use crate::runner::phases::open_loop::{End, Sent};

/// What one worker sent back: its requests, and the open's round trip.
pub(crate) struct WorkerPart {
    rank: u32,
    requests: Vec<WireSent>,
    rtt: Option<Duration>,
}

/// A worker's connection back (or why it is gone), and its part (or why it has none).
type Driven = (Result<Conn, String>, Result<WorkerPart, String>);

/// The workers' part of a level in progress.
pub(crate) struct RemoteLevel {
    cmds: Vec<mpsc::UnboundedSender<Cmd>>,
    tasks: Vec<JoinHandle<Driven>>,
}

/// How long a worker gets to read a level's order, and to report after rank 0's part ended.
const READY_TIMEOUT: Duration = Duration::from_secs(60);
const REPORT_TIMEOUT: Duration = Duration::from_secs(60);

impl RemoteLevel {
    /// Sends every worker the level (its share of `cap`) and waits until each is ready to start.
    /// Fails when a worker is gone or cannot take it: a level never runs at less than its rate.
    pub(crate) async fn start(group: &RankGroup, order: LevelOrder, cap: Option<u32>) -> Result<RemoteLevel, String> {
        let mut readies = Vec::new();
        let mut level = RemoteLevel { cmds: Vec::new(), tasks: Vec::new() };
        for (rank, conn) in group.take("level", "the level cannot keep its rate").await? {
            let order = LevelOrder { max_concurrency: cap.map(|c| share(c, group.ranks, rank)), ..order.clone() };
            let (tx, rx) = mpsc::unbounded_channel();
            let (ready_tx, ready_rx) = oneshot::channel();
            level.cmds.push(tx);
            level.tasks.push(tokio::spawn(drive(rank, conn, order, ready_tx, rx)));
            readies.push(ready_rx);
        }
        for (i, ready) in readies.into_iter().enumerate() {
            let why = match tokio::time::timeout(READY_TIMEOUT, ready).await {
                Ok(Ok(Ok(()))) => continue,
                Ok(Ok(Err(why))) => why,
                Ok(Err(_)) => "its driver ended before it was ready".to_string(),
                Err(_) => format!("it was not ready within {} s", READY_TIMEOUT.as_secs()),
            };
            level.close();
            // the ready ones answer the close with an empty report; their connections stay
            let _ = level.finish(group).await;
            return Err(format!("rank {} could not take the level: {why}", i + 1));
        }
        Ok(level)
    }

    /// Every worker starts its part now.
    pub(crate) fn open(&self) {
        broadcast(&self.cmds, Cmd::Open);
    }

    /// Every worker stops its part (the user stopped the run).
    pub(crate) fn close(&self) {
        broadcast(&self.cmds, Cmd::Close);
    }

    /// The workers' requests on rank 0's clock, `start` standing for each worker's own start. A
    /// worker lost, or without a report within a minute of rank 0's part, fails the level, and is
    /// gone for the rest of the run.
    pub(crate) async fn finish(self, group: &RankGroup) -> Result<Vec<WorkerPart>, String> {
        drop(self.cmds);
        let mut peers = group.peers.lock().await;
        let mut parts = Vec::new();
        let mut failure = None;
        for (i, task) in self.tasks.into_iter().enumerate() {
            let rank = i + 1;
            let (conn, part) = match tokio::time::timeout(REPORT_TIMEOUT, task).await {
                Ok(Ok(driven)) => driven,
                Ok(Err(e)) => lost(rank, &format!("its driver crashed: {e}")),
                Err(_) => lost(rank, "it sent no report within 60 s of rank 0's part"),
            };
            peers[i] = conn;
            match part {
                Ok(p) => parts.push(p),
                Err(why) => failure = failure.or(Some(why)),
            }
        }
        failure.map_or(Ok(parts), Err)
    }
}

/// The merged level: rank 0's requests and every worker's, placed from `start`, in due order; and
/// each rank's part.
pub(crate) fn merge(own: Vec<Sent>, workers: Vec<WorkerPart>, start: Instant) -> (Vec<Sent>, Vec<RankLevel>) {
    let mut parts = vec![rank_level(0, &own, None)];
    let mut all = own;
    for w in workers {
        let theirs: Vec<Sent> = w.requests.iter().map(|r| r.to_sent(start)).collect();
        parts.push(rank_level(w.rank, &theirs, w.rtt));
        all.extend(theirs);
    }
    all.sort_by_key(|s| s.due);
    (all, parts)
}

fn rank_level(rank: u32, requests: &[Sent], rtt: Option<Duration>) -> RankLevel {
    let lags: Vec<f64> = requests
        .iter()
        .filter_map(|r| r.log.as_ref().map(|l| l.sent.saturating_duration_since(r.due).as_secs_f64() * 1000.0))
        .collect();
    RankLevel {
        rank,
        scheduled: requests.len() as u64,
        sent: lags.len() as u64,
        completed: requests.iter().filter(|r| r.end == End::Completed).count() as u64,
        send_lag_ms_p99: percentile(&lags, 99.0),
        open_rtt_ms: rtt.map(|d| d.as_secs_f64() * 1000.0),
    }
}

fn lost(rank: usize, why: &str) -> Driven {
    let reason = format!("rank {rank} was lost mid-level ({why}): the level cannot keep its rate without its requests");
    (Err(reason.clone()), Err(reason))
}

/// Drives one worker through a level: the order, its readiness, the open (or a close), and its
/// report.
async fn drive(
    rank: u32,
    mut conn: Conn,
    order: LevelOrder,
    ready: oneshot::Sender<Result<(), String>>,
    mut cmds: mpsc::UnboundedReceiver<Cmd>,
) -> Driven {
    let rank_u = rank as usize;
    if let Err(e) = conn.send(&ToWorker::Level(order)).await {
        let _ = ready.send(Err(e.to_string()));
        return lost(rank_u, &e.to_string());
    }
    let mut ready = Some(ready);
    let (mut commanded, mut open_sent, mut rtt) = (true, None, None);
    loop {
        tokio::select! {
            cmd = cmds.recv(), if commanded => {
                let message = match cmd {
                    Some(Cmd::Open) => {
                        open_sent = Some(Instant::now());
                        ToWorker::Open
                    }
                    Some(Cmd::Close) => {
                        commanded = false;
                        ToWorker::Close
                    }
                    // a level has no adaptive window
                    Some(Cmd::Check { .. }) => continue,
                    // rank 0's part ended: the worker's ends on its own (the same deadline)
                    None => {
                        commanded = false;
                        continue;
                    }
                };
                if let Err(e) = conn.send(&message).await {
                    return lost(rank_u, &e.to_string());
                }
            }
            message = conn.recv::<ToCoordinator>() => match message {
                Ok(Some(ToCoordinator::Ready)) => {
                    if let Some(r) = ready.take() {
                        let _ = r.send(Ok(()));
                    }
                }
                Ok(Some(ToCoordinator::Opened)) => rtt = open_sent.map(|t: Instant| t.elapsed()),
                Ok(Some(ToCoordinator::LevelReport(report))) => {
                    let part = match report.failure {
                        Some(why) => Err(format!("rank {rank}: {why}")),
                        None => Ok(WorkerPart { rank, requests: report.requests, rtt }),
                    };
                    if let (Some(r), Err(why)) = (ready.take(), &part) {
                        let _ = r.send(Err(why.clone()));
                    }
                    return (Ok(conn), part);
                }
                Ok(Some(_)) => {}
                Ok(None) => return lost(rank_u, "it closed the connection"),
                Err(e) => return lost(rank_u, &e.to_string()),
            }
        }
    }
}
