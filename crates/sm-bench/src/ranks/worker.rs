//! A worker rank (1..N−1): joins rank 0, then holds its share of every cell's streams, opening
//! and closing its window when rank 0 says, and sends its requests back timed from its open.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use sm_client::{Client, JsonBody};
use sm_core::engine::Engine;
use tokio::net::TcpStream;
use tokio::sync::watch;

use super::wire::{
    CellOrder, LevelOrder, LevelReport, PROTOCOL, RankReport, ToCoordinator, ToWorker, WireLog, WireSent,
};
use super::{Conn, RankError};
use crate::cell::adaptive::{self, Sums};
use crate::cell::health::{Probe, process_cpu_seconds};
use crate::cell::server::Target;
use crate::cell::window::Window;
use crate::runner::phases::open_loop::{LevelRun, Part, Ran};
use crate::stream::live::{Cancel, Live};
use crate::stream::request::StreamTimeouts;
use crate::stream::streams;

/// How often a worker tells rank 0 how many of its streams have a token, and checks for a failure.
const TELL_EVERY: Duration = Duration::from_millis(20);

/// What a worker drove before rank 0 ended the run.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Served {
    pub cells: u32,
    /// Rate levels and bursts: schedules of requests.
    pub levels: u32,
}

/// Serves rank 0 at `coordinator` until it ends the run.
pub async fn serve(
    client: Client,
    rank: u32,
    ranks: u32,
    coordinator: &str,
    wait: Duration,
) -> Result<Served, RankError> {
    let mut conn = connect(rank, coordinator, wait).await?;
    let hello = ToCoordinator::Hello { protocol: PROTOCOL, rank, ranks, version: env!("CARGO_PKG_VERSION").into() };
    conn.send(&hello).await.map_err(broken)?;
    match conn.recv::<ToWorker>().await {
        Ok(Some(ToWorker::Welcome)) => {}
        Ok(Some(ToWorker::Refused { reason })) => return Err(RankError::Refused { rank, reason }),
        Ok(_) => return Err(RankError::Broken("rank 0 did not answer the hello".into())),
        // a rank 0 of another protocol version may not even speak our messages
        Err(e) => {
            return Err(RankError::Refused { rank, reason: format!("its answer is not one this version reads ({e})") });
        }
    }
    tracing::info!("rank {rank} of {ranks} joined rank 0 at {coordinator}");
    let mut served = Served::default();
    let part = Part { rank: rank as usize, ranks: ranks as usize };
    loop {
        match conn.recv::<ToWorker>().await.map_err(broken)? {
            Some(ToWorker::Cell(order)) => {
                drive_cell(&mut conn, &client, order).await?;
                served.cells += 1;
            }
            Some(ToWorker::Level(order)) => {
                drive_level(&mut conn, &client, order, part).await?;
                served.levels += 1;
            }
            Some(ToWorker::Bye) => return Ok(served),
            // a close for a cell this rank already reported on
            Some(_) => {}
            None => return Err(RankError::Broken("rank 0 closed the connection before the run ended".into())),
        }
    }
}

fn broken(e: std::io::Error) -> RankError {
    RankError::Broken(e.to_string())
}

/// Connects to rank 0, retrying until `wait` has passed: the ranks of a job start in any order.
async fn connect(rank: u32, addr: &str, wait: Duration) -> Result<Conn, RankError> {
    let deadline = Instant::now() + wait;
    loop {
        match tokio::time::timeout_at(deadline.into(), TcpStream::connect(addr)).await {
            Ok(Ok(stream)) => return Ok(Conn::new(stream)),
            Ok(Err(e)) if Instant::now() + Duration::from_millis(500) < deadline => {
                tracing::debug!("rank 0 at {addr} not reachable yet: {e}");
                tokio::time::sleep(Duration::from_millis(500)).await;
            }
            last => {
                let last = match last {
                    Ok(Err(e)) => e.to_string(),
                    _ => "connect timed out".into(),
                };
                return Err(RankError::Unreachable { rank, addr: addr.into(), waited: wait, last });
            }
        }
    }
}

/// The request paths a cell may use: the streams need them for the whole process.
fn known_path(path: &str) -> Option<&'static str> {
    ["/v1/chat/completions", "/v1/completions"].into_iter().find(|p| *p == path)
}

/// One cell: the streams from the order until rank 0's close, the window between its open and
/// close, and the report.
async fn drive_cell(conn: &mut Conn, client: &Client, order: CellOrder) -> Result<(), RankError> {
    let live = Arc::new(Live::new(order.streams, order.mirrored));
    let Some(path) = known_path(&order.path) else {
        let reason = format!("this rank cannot send requests to {}: run the same version on every rank", order.path);
        live.fail(sm_core::record::CellStatus::Error, reason);
        return answer(conn, &live, None).await;
    };
    // the scheduler's gauges are rank 0's to read; this rank only streams
    let client = client.clone().with_abort_on_cancel(order.abort_request);
    let target = Target { client, engine: Engine::Generic, metrics: false };
    let timeouts = StreamTimeouts {
        first_token: Duration::from_millis(order.first_token_timeout_ms),
        stall: Duration::from_millis(order.stall_timeout_ms),
    };
    let (cancel, receivers) = Cancel::new(order.streams as usize);
    let body = JsonBody::new(&order.body);
    let workers = streams::spawn(&target, path, &body, timeouts, receivers, &live);
    let probe = Probe::start();
    let (window, result) = follow(conn, &live).await;
    let closed = Instant::now();
    let cpu_end = process_cpu_seconds();
    cancel.cancel();
    let logs = streams::collect(workers, &live).await;
    result?;
    let report = window.map(|(opened, cpu_start)| {
        let len = (closed - opened).as_secs_f64();
        let cpu_pct = cpu_start.zip(cpu_end).map(|(a, b)| (b - a) / len * 100.0);
        let health = probe.finish(opened, closed, cpu_pct);
        RankReport {
            opened: true,
            window_s: len,
            logs: logs.iter().map(|l| WireLog::from_log(l, opened)).collect(),
            lag_ms_p99: health.map(|h| h.lag_ms_p99),
            cpu_pct,
        }
    });
    answer(conn, &live, report).await
}

/// Until rank 0's close: tells it the streams with a token and a failure, and notes the window's
/// open (with the CPU time then). The error is a broken connection to rank 0.
async fn follow(conn: &mut Conn, live: &Live) -> (Option<(Instant, Option<f64>)>, Result<(), RankError>) {
    let (mut told, mut failure_told, mut window) = (None, false, None);
    let mut tick = tokio::time::interval(TELL_EVERY);
    loop {
        let sent = tokio::select! {
            _ = tick.tick() => {
                let n = live.streams_with_token.load(Ordering::Acquire) as u32;
                if told != Some(n) {
                    told = Some(n);
                    conn.send(&ToCoordinator::Streams { with_token: n }).await
                } else if let Some((status, reason)) = live.failure().filter(|_| !failure_told) {
                    failure_told = true;
                    conn.send(&ToCoordinator::Failed { status, reason }).await
                } else {
                    Ok(())
                }
            }
            message = conn.recv::<ToWorker>() => match message {
                Ok(Some(ToWorker::Open)) => {
                    window = Some((Instant::now(), process_cpu_seconds()));
                    conn.send(&ToCoordinator::Opened).await
                }
                Ok(Some(ToWorker::Close)) => return (window, Ok(())),
                Ok(Some(ToWorker::Check { id, len_ns })) => {
                    let sums = match window {
                        Some((opened, _)) => {
                            let w = Window { start: opened, end: opened + Duration::from_nanos(len_ns) };
                            adaptive::sums(live.mirrors(), w)
                        }
                        None => Sums::new(),
                    };
                    conn.send(&ToCoordinator::Sums { id, sums }).await
                }
                Ok(Some(other)) => return (window, Err(RankError::Broken(format!("rank 0 sent {other:?} inside a cell")))),
                Ok(None) => return (window, Err(RankError::Broken("rank 0 closed the connection mid-cell".into()))),
                Err(e) => return (window, Err(broken(e))),
            }
        };
        if let Err(e) = sent {
            return (window, Err(broken(e)));
        }
    }
}

/// The cell's end on this rank: a failure rank 0 has not heard of yet, then the report.
async fn answer(conn: &mut Conn, live: &Live, report: Option<RankReport>) -> Result<(), RankError> {
    if let Some((status, reason)) = live.failure() {
        conn.send(&ToCoordinator::Failed { status, reason }).await.map_err(broken)?;
    }
    conn.send(&ToCoordinator::Report(report.unwrap_or_default())).await.map_err(broken)
}

/// One load level: this rank's part of the schedule, from rank 0's open, until its last request
/// ended or its wait after the last due time ran out (or rank 0 stopped the level); then the report.
async fn drive_level(conn: &mut Conn, client: &Client, order: LevelOrder, part: Part) -> Result<(), RankError> {
    let Some(path) = known_path(&order.path) else {
        let failure = Some(format!(
            "rank {} cannot send requests to {}: run the same version on every rank",
            part.rank, order.path
        ));
        return conn
            .send(&ToCoordinator::LevelReport(LevelReport { failure, requests: Vec::new() }))
            .await
            .map_err(broken);
    };
    let bodies: Arc<[JsonBody]> = order.bodies.iter().map(JsonBody::new).collect();
    if bodies.is_empty() {
        let failure = Some("the level's order has no request body".to_string());
        return conn
            .send(&ToCoordinator::LevelReport(LevelReport { failure, requests: Vec::new() }))
            .await
            .map_err(broken);
    }
    let run = LevelRun {
        client: &client.clone().with_abort_on_cancel(order.abort_request),
        path,
        bodies: bodies.into(),
        due: &order.due,
        part,
        max_concurrency: order.max_concurrency,
        drain_max: order.drain_max_ms.map(Duration::from_millis),
        timeouts: StreamTimeouts {
            first_token: Duration::from_millis(order.first_token_timeout_ms),
            stall: Duration::from_millis(order.stall_timeout_ms),
        },
    };
    conn.send(&ToCoordinator::Ready).await.map_err(broken)?;
    match conn.recv::<ToWorker>().await.map_err(broken)? {
        Some(ToWorker::Open) => conn.send(&ToCoordinator::Opened).await.map_err(broken)?,
        // stopped before it began
        Some(ToWorker::Close) => {
            return conn.send(&ToCoordinator::LevelReport(LevelReport::default())).await.map_err(broken);
        }
        Some(other) => return Err(RankError::Broken(format!("rank 0 sent {other:?} before a level's open"))),
        None => return Err(RankError::Broken("rank 0 closed the connection before a level began".into())),
    }
    let (stop, stopped) = watch::channel(false);
    let ran = run.run(stopped);
    tokio::pin!(ran);
    let ran = loop {
        tokio::select! {
            ran = &mut ran => break ran,
            message = conn.recv::<ToWorker>() => match message {
                Ok(Some(ToWorker::Close)) => { let _ = stop.send(true); }
                Ok(Some(other)) => return Err(RankError::Broken(format!("rank 0 sent {other:?} inside a level"))),
                // dropping the level cancels its requests
                Ok(None) => return Err(RankError::Broken("rank 0 closed the connection mid-level".into())),
                Err(e) => return Err(broken(e)),
            }
        }
    };
    let requests = match ran {
        Ran::Done { start, requests, .. } => requests.iter().map(|s| WireSent::from_sent(s, start)).collect(),
        Ran::Stopped => Vec::new(),
    };
    conn.send(&ToCoordinator::LevelReport(LevelReport { failure: None, requests })).await.map_err(broken)
}
