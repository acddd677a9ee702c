//! The server's scheduler as the cell driver sees it: one scrape, and the drain
//! barrier that makes sure the next cell starts on an idle server
//! (a closed HTTP stream may keep generating inside the engine).

use std::time::{Duration, Instant};

use sm_client::discover::{self, Engine, SchedulerState};
use sm_client::{Client, ClientError};
use sm_core::server_metrics::{Ours, ScrapeTime, ServerMetrics, ServerScrape};

/// What the driver needs to know about the server.
#[derive(Debug, Clone)]
pub struct Target {
    pub client: Client,
    pub engine: Engine,
    pub metrics: bool,
}

/// Whether the server still answers its model list within `timeout`: the one test of "is it
/// there?" that the cell (after a broken stream) and the runner (waiting for it) both use.
pub async fn answers(client: &Client, timeout: Duration) -> bool {
    matches!(client.get("/v1/models", timeout).await, Ok(r) if r.is_success())
}

const SCRAPE_TIMEOUT: Duration = Duration::from_secs(5);
const DRAIN_POLL: Duration = Duration::from_millis(200);
/// How long the server must stay idle after a cell's cancel (methodology §6.6).
pub const IDLE_FOR: Duration = Duration::from_millis(500);

/// A server that refuses connections this long is gone, not busy.
const UNREACHABLE_FOR: Duration = Duration::from_secs(5);

/// One scrape of the scheduler gauges; `None` when it failed or has none.
pub async fn scrape(target: &Target) -> Option<SchedulerState> {
    scrape_checked(target).await.ok().flatten()
}

/// Like [`scrape`], but tells a server that cannot be reached from one without gauges.
async fn scrape_checked(target: &Target) -> Result<Option<SchedulerState>, Unreachable> {
    match tokio::time::timeout(SCRAPE_TIMEOUT, discover::scheduler_state(&target.client, target.engine)).await {
        Ok(Ok(state)) => Ok(state),
        Ok(Err(e @ (ClientError::Connect { .. } | ClientError::Broken { .. }))) => {
            tracing::debug!("metrics scrape failed: {e}");
            Err(Unreachable)
        }
        Ok(Err(e)) => {
            tracing::debug!("metrics scrape failed: {e}");
            Ok(None)
        }
        Err(_) => Ok(None),
    }
}

struct Unreachable;

/// The window's server series and summary from the sampler's scrapes and our own count over
/// their span (methodology §14.1; without it, no comparison); `None` with the sampler off or fewer
/// than two scrapes.
pub(crate) fn server_metrics(
    gauges: &[(ScrapeTime, ServerScrape)],
    interval: Option<Duration>,
    ours: Option<Ours<'_>>,
) -> Option<ServerMetrics> {
    ServerMetrics::summarize(gauges, interval?.as_secs_f64(), ours)
}

/// One scrape of the server's gauges and counters for the cell's series (methodology §14.1);
/// `None` when it failed or the engine has none.
pub async fn scrape_gauges(target: &Target) -> Option<ServerScrape> {
    match tokio::time::timeout(SCRAPE_TIMEOUT, discover::server_scrape(&target.client, target.engine)).await {
        Ok(Ok(s)) => s,
        Ok(Err(e)) => {
            tracing::debug!("metrics scrape failed: {e}");
            None
        }
        Err(_) => None,
    }
}

#[derive(Debug, thiserror::Error)]
pub enum DrainError {
    #[error(
        "the server did not become idle within {secs:.0} s (running {running}, waiting {waiting}); is another client using it?"
    )]
    Busy { secs: f64, running: f64, waiting: f64 },
    #[error("the server stopped responding")]
    Unreachable,
}

/// Waits until running = 0 and waiting = 0 have held for `hold` (zero: one idle scrape).
pub async fn drain(target: &Target, timeout: Duration, hold: Duration) -> Result<(), DrainError> {
    let start = Instant::now();
    let mut idle_since: Option<Instant> = None;
    let mut unreachable_since: Option<Instant> = None;
    let mut last = (f64::NAN, f64::NAN);
    loop {
        let now = Instant::now();
        let scraped = scrape_checked(target).await;
        if scraped.is_ok() {
            unreachable_since = None;
        }
        match scraped {
            Ok(Some(s)) if s.running == 0.0 && s.waiting == 0.0 => {
                if now - *idle_since.get_or_insert(now) >= hold {
                    return Ok(());
                }
            }
            Ok(Some(s)) => {
                idle_since = None;
                last = (s.running, s.waiting);
            }
            Ok(None) => idle_since = None,
            Err(Unreachable) => {
                idle_since = None;
                if now - *unreachable_since.get_or_insert(now) >= UNREACHABLE_FOR {
                    return Err(DrainError::Unreachable);
                }
            }
        }
        if now - start >= timeout {
            return Err(DrainError::Busy { secs: timeout.as_secs_f64(), running: last.0, waiting: last.1 });
        }
        tokio::time::sleep(DRAIN_POLL).await;
    }
}
