//! A server that goes away mid-run (methodology §6.8), handled the same way for every unit of the
//! run: a decode cell, a rate level, a burst, a mixed-prefill level and the sessions phase. A unit
//! whose requests failed asks the server whether it still answers; one that lost it is written with
//! a reason marked by [`lost_reason`], and only then does the run wait (bounded by
//! `--server-wait`) for the server: it goes on when the server is back, and ends `failed`, keeping
//! everything written, when it is not.

use std::time::{Duration, Instant};

use sm_core::record::RunStatus;

use super::{RunError, Runner};
pub(crate) use crate::cell::lost_reason;
use crate::cell::server::answers;
use crate::runner::progress::RunEvent;

/// How long a server the runner waits for gets to answer each time it is asked.
const SERVER_ANSWER_TIMEOUT: Duration = Duration::from_secs(10);
/// How often a lost server is asked again.
const SERVER_POLL: Duration = Duration::from_secs(2);

/// What a unit saw of the server while it ran.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Seen {
    /// Nothing failed: no reason to ask.
    Fine,
    /// Requests failed: the server may have gone away, so it is asked.
    Failures,
    /// The unit already found it gone (it refused connections before the unit, or the cell's own
    /// check after a broken stream found no answer): asking again would only wait.
    Gone,
}

impl Seen {
    /// `Failures` when `failed`, else `Fine`.
    pub(crate) fn failures_if(failed: bool) -> Seen {
        if failed { Seen::Failures } else { Seen::Fine }
    }
}

impl Runner<'_> {
    /// Ends a unit of the run: finds out whether the server went away (asked only after
    /// failures), writes the unit with `write` (told so, to mark its reason with [`lost_reason`]:
    /// run.json first, then its `requests.jsonl` lines), then waits for a lost server.
    /// `Some(status)` when the run cannot go on.
    pub(super) async fn unit_done(
        &mut self,
        seen: Seen,
        write: impl FnOnce(&mut Self, bool) -> Result<(), RunError>,
    ) -> Result<Option<RunStatus>, RunError> {
        let lost = self.server_gone(seen).await;
        write(self, lost)?;
        Ok(self.outlast(lost).await)
    }

    /// Whether the server is gone, after a unit saw `seen`.
    pub(super) async fn server_gone(&self, seen: Seen) -> bool {
        match seen {
            Seen::Fine => false,
            Seen::Failures => !self.server_answers().await,
            Seen::Gone => true,
        }
    }

    /// After a unit that `lost` the server was written: waits (bounded) for it to come back.
    /// `Some(Failed)` when it did not, `Some(Interrupted)` when the user stopped the run meanwhile.
    pub(super) async fn outlast(&mut self, lost: bool) -> Option<RunStatus> {
        if !lost || self.wait_for_server().await {
            return None;
        }
        Some(if self.stopped() { RunStatus::Interrupted } else { RunStatus::Failed })
    }

    pub(super) async fn server_answers(&self) -> bool {
        answers(&self.client, SERVER_ANSWER_TIMEOUT).await
    }

    /// Waits up to `--server-wait` for the server to answer. `false` when it did not, or the user
    /// stopped the run.
    async fn wait_for_server(&mut self) -> bool {
        let limit = self.settings.server_wait;
        self.event(RunEvent::ServerLost { wait: limit });
        let start = Instant::now();
        while start.elapsed() < limit {
            if self.stopped() {
                return false;
            }
            if self.server_answers().await {
                self.event(RunEvent::ServerBack { after: start.elapsed() });
                return true;
            }
            tokio::time::sleep(SERVER_POLL.min(limit)).await;
        }
        self.event(RunEvent::ServerGone { wait: limit });
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_loss_is_said_with_what_the_unit_saw() {
        assert_eq!(lost_reason("connection refused"), "server stopped responding (connection refused)");
        assert_eq!(lost_reason(""), "server stopped responding");
        assert_eq!(crate::cell::lost_before("burst"), "server stopped responding before the burst");
    }
}
