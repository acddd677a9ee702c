//! The connection loop: hyper's HTTP/1 server with what a public site needs
//! against slow or idle clients. A connection holds one of a fixed number of
//! slots (beyond them, new connections wait in the listen backlog until one
//! ends); a request head must arrive whole within the header timeout, which
//! also closes a connection that sits idle; and every request, body included,
//! must be done within the request timeout (see `routes`).

use std::sync::Arc;
use std::time::Duration;

use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use tokio::sync::{Semaphore, watch};

/// The bounds on clients; `speedmatrix serve` sets them from its flags.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// Connections served at once.
    pub max_connections: usize,
    /// How long a request head may take to arrive, counted from the end of the
    /// previous request on that connection (or from its opening).
    pub header_timeout: Duration,
    /// How long one request may take, its body included (a 32 MiB upload must
    /// arrive within it).
    pub request_timeout: Duration,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_connections: 256,
            header_timeout: Duration::from_secs(10),
            request_timeout: Duration::from_secs(120),
        }
    }
}

/// Serves `app` on `listener` until `shutdown` completes, then lets the
/// connections finish their requests (at most the request timeout).
pub async fn run(
    app: axum::Router,
    listener: tokio::net::TcpListener,
    limits: Limits,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let slots = Arc::new(Semaphore::new(limits.max_connections.max(1)));
    let (stop_tx, stop_rx) = watch::channel(());
    tokio::pin!(shutdown);
    loop {
        // a slot before the accept: beyond the bound the kernel holds the connection
        let permit = tokio::select! {
            p = slots.clone().acquire_owned() => match p {
                Ok(p) => p,
                Err(_) => break,
            },
            () = &mut shutdown => break,
        };
        let stream = tokio::select! {
            r = listener.accept() => match r {
                Ok((stream, _)) => stream,
                Err(e) => {
                    // out of file descriptors and the like: wait instead of spinning
                    tracing::warn!("accept failed: {e}");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                }
            },
            () = &mut shutdown => break,
        };
        let service = TowerToHyperService::new(app.clone());
        let mut stop = stop_rx.clone();
        let header_timeout = limits.header_timeout;
        tokio::spawn(async move {
            let _slot = permit;
            let mut builder = hyper::server::conn::http1::Builder::new();
            builder.timer(TokioTimer::new()).header_read_timeout(header_timeout);
            let conn = builder.serve_connection(TokioIo::new(stream), service);
            tokio::pin!(conn);
            let mut stopping = false;
            loop {
                tokio::select! {
                    ended = conn.as_mut() => {
                        if let Err(e) = ended {
                            tracing::debug!("connection ended: {e}");
                        }
                        break;
                    }
                    // the sender is dropped at shutdown: finish the request in flight, then close
                    _ = stop.changed(), if !stopping => {
                        stopping = true;
                        conn.as_mut().graceful_shutdown();
                    }
                }
            }
        });
    }
    drop(listener);
    drop(stop_tx);
    // every slot back means every connection ended
    let all = u32::try_from(limits.max_connections.max(1)).unwrap_or(u32::MAX);
    let _ = tokio::time::timeout(limits.request_timeout + Duration::from_secs(1), slots.acquire_many(all)).await;
    Ok(())
}
