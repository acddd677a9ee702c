//! More than one client process (ranks, docs/distributed.md). Rank 0 is an ordinary run; ranks
//! 1..N−1 are workers that hold their share of every decode cell's streams, and send their part of
//! every `--request-rate` level's schedule. Rank 0 gates readiness,
//! opens and closes every window, and merges: each worker times its requests on its own monotonic
//! clock from the moment its window opened, and rank 0 places them on its clock from the moment
//! its own window opened (monotonic clocks of two machines cannot be compared; the open message's
//! round trip, kept per rank, bounds the offset this leaves).

mod conn;
mod level;
mod remote;
mod wire;
mod worker;

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use tokio::net::TcpListener;
use tokio::sync::Mutex;

pub(crate) use conn::Conn;
pub(crate) use level::{RemoteLevel, merge as merge_level};
pub(crate) use remote::{RemoteCell, merge};
pub(crate) use wire::LevelOrder;
use wire::{PROTOCOL, ToCoordinator, ToWorker};
pub use worker::{Served, serve};

#[derive(Debug, thiserror::Error)]
pub enum RankError {
    #[error(
        "rank 0 cannot listen on {addr}: {source}. Give --coordinator HOST:PORT a free port on this machine (the same on every rank)"
    )]
    Listen { addr: String, source: std::io::Error },
    #[error(
        "only {joined} of the {expected} worker rank(s) joined within {:.0} s (missing: {missing}). Start every rank with the same --ranks and --coordinator, or raise --rank-wait",
        .waited.as_secs_f64()
    )]
    Missing { joined: u32, expected: u32, missing: String, waited: Duration },
    #[error(
        "rank {rank} cannot reach rank 0 at {addr} within {:.0} s: {last}. Start rank 0 with the same --coordinator, and check that this machine can reach that address",
        .waited.as_secs_f64()
    )]
    Unreachable { rank: u32, addr: String, waited: Duration, last: String },
    #[error("rank 0 refused rank {rank}: {reason}")]
    Refused { rank: u32, reason: String },
    #[error("the connection to rank 0 broke: {0}")]
    Broken(String),
}

/// Rank 0's word to the task driving one worker through a cell or a level.
#[derive(Debug, Clone, Copy)]
enum Cmd {
    Open,
    /// With `--precision`: ask for the sums over the window's first `len`.
    Check {
        id: u64,
        len: Duration,
    },
    Close,
}

/// Tells every worker's driver at once (a driver already gone has nothing left to be told).
fn broadcast(drivers: &[tokio::sync::mpsc::UnboundedSender<Cmd>], cmd: Cmd) {
    for tx in drivers {
        let _ = tx.send(cmd);
    }
}

/// Rank 0's side: the connected workers, held between cells.
#[derive(Debug)]
pub struct RankGroup {
    ranks: u32,
    /// Index r − 1 holds rank r; `Err` says why it is gone (every later cell fails with that).
    peers: Mutex<Vec<Result<Conn, String>>>,
}

/// The streams rank `rank` of `ranks` holds of a cell of `concurrency`: as even as can be, the
/// lower ranks taking one more where it does not divide.
pub fn share(concurrency: u32, ranks: u32, rank: u32) -> u32 {
    concurrency / ranks + u32::from(rank < concurrency % ranks)
}

impl RankGroup {
    /// Listens on `addr` and waits up to `wait` for ranks 1..`ranks`−1 to say hello.
    pub async fn gather(addr: SocketAddr, ranks: u32, wait: Duration) -> Result<RankGroup, RankError> {
        let listener =
            TcpListener::bind(addr).await.map_err(|source| RankError::Listen { addr: addr.to_string(), source })?;
        let deadline = Instant::now() + wait;
        let mut slots: Vec<Option<Conn>> = (1..ranks).map(|_| None).collect();
        while slots.iter().any(Option::is_none) {
            let accepted = tokio::time::timeout_at(deadline.into(), listener.accept()).await;
            let Ok(accepted) = accepted else {
                let missing: Vec<String> =
                    slots.iter().enumerate().filter(|(_, s)| s.is_none()).map(|(i, _)| (i + 1).to_string()).collect();
                return Err(RankError::Missing {
                    joined: slots.iter().filter(|s| s.is_some()).count() as u32,
                    expected: ranks - 1,
                    missing: missing.join(", "),
                    waited: wait,
                });
            };
            let Ok((stream, from)) = accepted else { continue };
            let mut conn = Conn::new(stream);
            match welcome(&mut conn, ranks, &slots).await {
                Ok(rank) => {
                    tracing::info!("rank {rank} joined from {from}");
                    slots[rank as usize - 1] = Some(conn);
                }
                Err(reason) => {
                    tracing::warn!("refused a rank from {from}: {reason}");
                    let _ = conn.send(&ToWorker::Refused { reason }).await;
                }
            }
        }
        Ok(RankGroup {
            ranks,
            peers: Mutex::new(slots.into_iter().map(|s| Ok(s.expect("every slot is filled"))).collect()),
        })
    }

    pub fn ranks(&self) -> u32 {
        self.ranks
    }

    /// Every worker's connection, `(rank, conn)`, for a cell or a level (`what`) to drive; their
    /// drivers give them back at its end. `Err` names the first worker gone, `why` filling in what
    /// that stops: nothing is taken then, and nothing runs short of a rank.
    async fn take(&self, what: &str, why: &str) -> Result<Vec<(u32, Conn)>, String> {
        let mut peers = self.peers.lock().await;
        if let Some((i, Err(gone))) = peers.iter().enumerate().find(|(_, p)| p.is_err()) {
            return Err(format!("rank {} is gone ({gone}): {why}", i + 1));
        }
        let busy = || Err(format!("busy with a {what}"));
        let taken = peers.iter_mut().map(|slot| std::mem::replace(slot, busy()));
        Ok(taken.enumerate().filter_map(|(i, c)| Some((i as u32 + 1, c.ok()?))).collect())
    }

    /// Tells every worker the run is over.
    pub async fn dismiss(&self) {
        for conn in self.peers.lock().await.iter_mut().flatten() {
            let _ = conn.send(&ToWorker::Bye).await;
        }
    }
}

const HELLO_TIMEOUT: Duration = Duration::from_secs(10);

/// Reads a worker's hello and accepts it: the rank it claims, when that is one we wait for.
async fn welcome(conn: &mut Conn, ranks: u32, slots: &[Option<Conn>]) -> Result<u32, String> {
    let hello = match tokio::time::timeout(HELLO_TIMEOUT, conn.recv::<ToCoordinator>()).await {
        Ok(Ok(Some(m))) => m,
        Ok(Ok(None)) => return Err("it closed the connection before its hello".into()),
        Ok(Err(e)) => return Err(format!("its hello is not one this version reads ({e})")),
        Err(_) => return Err("no hello within 10 s".into()),
    };
    let ToCoordinator::Hello { protocol, rank, ranks: theirs, version } = hello else {
        return Err("it spoke before its hello".into());
    };
    if protocol != PROTOCOL {
        return Err(format!(
            "rank protocol {protocol} (speedmatrix {version}), rank 0 speaks {PROTOCOL} (speedmatrix {}): run the same version on every rank",
            env!("CARGO_PKG_VERSION")
        ));
    }
    if theirs != ranks {
        return Err(format!("it was started with --ranks {theirs}, rank 0 with --ranks {ranks}"));
    }
    if rank == 0 || rank >= ranks {
        return Err(format!("rank {rank} is not a worker rank of {ranks} (1..{})", ranks - 1));
    }
    if slots[rank as usize - 1].is_some() {
        return Err(format!("rank {rank} has joined already: give every process its own --rank"));
    }
    conn.send(&ToWorker::Welcome).await.map_err(|e| e.to_string())?;
    Ok(rank)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shares_add_up_and_differ_by_at_most_one() {
        for ranks in 1..6 {
            for c in 0..40 {
                let s: Vec<u32> = (0..ranks).map(|r| share(c, ranks, r)).collect();
                assert_eq!(s.iter().sum::<u32>(), c, "{c} over {ranks}: {s:?}");
                assert!(s.iter().max().unwrap() - s.iter().min().unwrap() <= 1, "{s:?}");
            }
        }
        assert_eq!((0..3).map(|r| share(7, 3, r)).collect::<Vec<_>>(), [3, 2, 2]);
    }

    /// A worker's hello over loopback; what rank 0 answered.
    async fn hello(port: u16, protocol: u32, rank: u32, ranks: u32) -> ToWorker {
        let stream = loop {
            match tokio::net::TcpStream::connect(("127.0.0.1", port)).await {
                Ok(s) => break s,
                Err(_) => tokio::time::sleep(Duration::from_millis(20)).await,
            }
        };
        let mut conn = Conn::new(stream);
        conn.send(&ToCoordinator::Hello { protocol, rank, ranks, version: "x".into() }).await.unwrap();
        conn.recv().await.unwrap().unwrap()
    }

    #[tokio::test]
    async fn rank_0_refuses_another_protocol_or_ranks_and_says_who_is_missing() {
        let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let addr = SocketAddr::from(([127, 0, 0, 1], port));
        let group = tokio::spawn(RankGroup::gather(addr, 3, Duration::from_secs(2)));
        let refused = |m: ToWorker| match m {
            ToWorker::Refused { reason } => reason,
            other => panic!("accepted: {other:?}"),
        };
        let e = refused(hello(port, PROTOCOL + 1, 1, 3).await);
        assert!(
            e.contains(&format!("rank protocol {}", PROTOCOL + 1)) && e.contains("same version on every rank"),
            "{e}"
        );
        let e = refused(hello(port, PROTOCOL, 1, 4).await);
        assert!(e.contains("started with --ranks 4, rank 0 with --ranks 3"), "{e}");
        assert_eq!(hello(port, PROTOCOL, 2, 3).await, ToWorker::Welcome);
        let e = refused(hello(port, PROTOCOL, 2, 3).await);
        assert!(e.contains("rank 2 has joined already"), "{e}");
        let e = group.await.unwrap().unwrap_err().to_string();
        assert!(e.contains("only 1 of the 2 worker rank(s) joined within 2 s (missing: 1)"), "{e}");
    }
}
