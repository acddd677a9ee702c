//! The warm-up before the measurements (methodology §1 steps 4 and 6). It measures nothing, so its
//! failure fails nothing: the run goes on, an event says why, and the first decode cell carries a
//! warning, because it may then include the server's one-time start-up costs.

use std::time::Duration;

use sm_client::openai::RequestSpec;
use sm_core::plan::Plan;
use sm_core::record::CellStatus;

use super::{Runner, status_word};
use crate::cell::CellTiming;
use crate::progress::WarmupCell;
use crate::prompt::{self, WARMUP};
use crate::scout::scout;
use crate::sizing::Sizer;

impl Runner<'_> {
    /// One short request so that JIT compilation or graph capture is not measured.
    pub(super) async fn warm_up(&mut self) {
        let spec = RequestSpec { continuous_usage: false, ..self.spec(16, false) };
        let body = spec.body(&prompt::warmup_prompt(&prompt::tag(&self.run_id, WARMUP, 0)));
        match scout(&self.client, spec.path(), &body, self.config.timing.stream_timeouts().first_token).await {
            Ok(_) => self.event("warm-up request done".into()),
            Err(e) => self.warmup_failed(format!("the warm-up request failed: {e}")),
        }
    }

    /// A C=1 cell at the largest runnable context, with a prompt that shares no
    /// prefix with the measured ones; its figures are discarded.
    pub(super) async fn hidden_warmup(&mut self, plan: &Plan, sizer: &Sizer) {
        let Some(cell) = plan.runnable().filter(|c| c.concurrency == 1).max_by_key(|c| c.context) else {
            return;
        };
        let prompt = match sizer.size(&prompt::tag(&self.run_id, WARMUP, cell.context.0), cell.context.0).await {
            Ok(s) => s.prompt,
            Err(e) => {
                self.event(format!("decode warm-up skipped: {e}"));
                return;
            }
        };
        self.reporter.warmup_cell(WarmupCell::Started);
        let at = sm_core::context::shown(&cell.label, cell.context.0);
        self.event(format!("decode warm-up at {at} for {:.0} s", self.config.warmup.as_secs_f64()));
        let timing = CellTiming { duration: self.config.warmup, ready_stable: Duration::ZERO, ..self.config.timing };
        let outcome = self.decode_cell(cell, &prompt, timing).await;
        // on every outcome: a display that waits for "done" would show the warm-up for the rest of the run
        self.reporter.warmup_cell(WarmupCell::Ended);
        let reason = outcome.reason.unwrap_or_default();
        match outcome.status {
            CellStatus::Valid => {
                // the decode path is warm now, whatever the warm-up request did
                self.warmup_warning = None;
                self.event("decode warm-up done".into());
            }
            CellStatus::Skipped => self.event(format!("decode warm-up skipped: {reason}")),
            s => self.warmup_failed(format!("the decode warm-up failed ({}): {reason}", status_word(s))),
        }
    }

    fn warmup_failed(&mut self, what: String) {
        self.event(format!("{what}; the run goes on"));
        self.warmup_warning = Some(what);
    }

    /// The warning the first measured cell carries when the warm-up before it failed.
    pub(super) fn take_warmup_warning(&mut self) -> Option<String> {
        let what = self.warmup_warning.take()?;
        Some(format!("{what}, so this first cell may include the server's one-time start-up costs"))
    }
}
