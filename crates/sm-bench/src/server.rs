//! The server's scheduler as the cell driver sees it: one scrape, and the drain
//! barrier that makes sure the next cell starts on an idle server
//! (a closed HTTP stream may keep generating inside the engine).

use std::time::{Duration, Instant};

use sm_client::discover::{self, SchedulerState};

use crate::cell::Target;

const SCRAPE_TIMEOUT: Duration = Duration::from_secs(5);
const DRAIN_POLL: Duration = Duration::from_millis(200);
const IDLE_FOR: Duration = Duration::from_millis(500);

/// One scrape of the scheduler gauges; `None` when it failed or has none.
pub async fn scrape(target: &Target) -> Option<SchedulerState> {
    match tokio::time::timeout(SCRAPE_TIMEOUT, discover::scheduler_state(&target.client, target.engine)).await {
        Ok(Ok(state)) => state,
        Ok(Err(e)) => {
            tracing::debug!("metrics scrape failed: {e}");
            None
        }
        Err(_) => None,
    }
}

#[derive(Debug, thiserror::Error)]
#[error(
    "the server did not become idle within {secs:.0} s (running {running}, waiting {waiting}); is another client using it?"
)]
pub struct DrainError {
    pub secs: f64,
    pub running: f64,
    pub waiting: f64,
}

/// Waits until running = 0 and waiting = 0 have held for half a second.
pub async fn drain(target: &Target, timeout: Duration) -> Result<(), DrainError> {
    let start = Instant::now();
    let mut idle_since: Option<Instant> = None;
    let mut last = (f64::NAN, f64::NAN);
    loop {
        let now = Instant::now();
        match scrape(target).await {
            Some(s) if s.running == 0.0 && s.waiting == 0.0 => {
                if now - *idle_since.get_or_insert(now) >= IDLE_FOR {
                    return Ok(());
                }
            }
            Some(s) => {
                idle_since = None;
                last = (s.running, s.waiting);
            }
            None => idle_since = None,
        }
        if now - start >= timeout {
            return Err(DrainError { secs: timeout.as_secs_f64(), running: last.0, waiting: last.1 });
        }
        tokio::time::sleep(DRAIN_POLL).await;
    }
}
