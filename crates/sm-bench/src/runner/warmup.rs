//! The warm-up before the measurements (methodology §1 steps 4 and 6). It measures nothing, so its
//! failure fails nothing: the run goes on, an event says why, and the first decode cell carries a
//! warning, because it may then include the server's one-time start-up costs.

use std::time::Duration;

use sm_client::openai::RequestSpec;
use sm_core::plan::Plan;
use sm_core::record::CellStatus;
use sm_core::requests::RequestPhase;

use super::Runner;
use crate::cell::CellTiming;
use crate::prompts::prompt::{self, WARMUP};
use crate::prompts::sizing::Sizer;
use crate::runner::progress::{RunEvent, WarmupFailure, WarmupStage};
use crate::runner::requests::{self, LineCell};
use crate::stream::scout::scout;

impl Runner<'_> {
    /// One short request so that JIT compilation or graph capture is not measured.
    pub(super) async fn warm_up(&mut self) {
        let spec = RequestSpec { continuous_usage: false, ..self.spec(16, false) };
        let body = spec.body(&prompt::warmup_prompt(&prompt::tag(&self.run_id, WARMUP, 0)));
        match scout(&self.client, spec.path(), &body, self.settings.timing.stream_timeouts().first_token).await {
            Ok(_) => self.event(RunEvent::WarmupRequestDone),
            Err(e) => self.warmup_failed(WarmupFailure { stage: WarmupStage::Request, reason: e.to_string() }),
        }
    }

    /// A C=1 cell at the largest runnable context, with a prompt that shares no
    /// prefix with the measured ones; its figures are discarded.
    pub(super) async fn hidden_warmup(&mut self, plan: &Plan, sizer: &Sizer, window: Duration) -> std::io::Result<()> {
        let Some(cell) = plan.runnable().filter(|c| c.concurrency == 1).max_by_key(|c| c.context) else {
            return Ok(());
        };
        let prompt = match sizer.size(&prompt::tag(&self.run_id, WARMUP, cell.context.0), cell.context.0).await {
            Ok(s) => s.prompt,
            Err(e) => {
                self.event(RunEvent::DecodeWarmupSkipped { reason: e });
                return Ok(());
            }
        };
        let at = sm_core::context::shown(&cell.label, cell.context.0);
        self.event(RunEvent::DecodeWarmupStarted { at, window });
        // a fixed window: the warm-up is not measured, so there is nothing for --precision to settle
        let timing = CellTiming {
            duration: window,
            ready_stable: Duration::ZERO,
            precision: None,
            metrics_interval: None,
            ..self.settings.timing
        };
        // rank 0 alone: the hidden warm-up is not measured
        let outcome = self.decode_cell(cell, &prompt, timing, false).await;
        if let Some(r) = &outcome.requests {
            let at = LineCell {
                phase: RequestPhase::Warmup,
                context: cell.context.0,
                concurrency: cell.concurrency,
                repeat: None,
                searched: false,
            };
            self.save_requests(&requests::cell_lines(at, r, self.t0))?;
        }
        // every outcome ends with one event (done, skipped or stopped, failed): a display that waited
        // for "done" only would show the warm-up for the rest of the run
        let reason = outcome.reason.unwrap_or_default();
        match outcome.status {
            CellStatus::Valid => {
                // the decode path is warm now, whatever the warm-up request did
                self.warmup_warning = None;
                self.event(RunEvent::DecodeWarmupDone);
            }
            CellStatus::Skipped => self.event(RunEvent::DecodeWarmupSkipped { reason }),
            s => self.warmup_failed(WarmupFailure { stage: WarmupStage::DecodeCell(s), reason }),
        }
        Ok(())
    }

    fn warmup_failed(&mut self, failure: WarmupFailure) {
        self.warmup_warning = Some(failure.to_string());
        self.event(RunEvent::WarmupFailed(failure));
    }

    /// The warning the first measured cell carries when the warm-up before it failed.
    pub(super) fn take_warmup_warning(&mut self) -> Option<String> {
        let what = self.warmup_warning.take()?;
        Some(format!("{what}, so this first cell may include the server's one-time start-up costs"))
    }
}
