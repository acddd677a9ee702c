//! The run protocol lives in `sm-progress` (so a display needs no benchmark); this is the runner's
//! side of it: the one door through which progress leaves, with secrets scrubbed.

use sm_core::record::{DecodeCell, PrefillRow, RunRecord};
pub use sm_progress::{
    ControlHandle, Controls, IDLE_GAP, LiveSample, NoReport, Reporter, RunEvent, Step, WarmupFailure, WarmupStage,
    controls,
};

/// A reporter seen through the secrets scrubber ([`sm_core::secrets`]): the runner talks to its
/// listener only through this, so no event, cell reason or record a server filled reaches the
/// console or the dashboard with a secret in it. A value that cannot be scrubbed is not shown.
pub(crate) struct Scrubbed<'a>(pub &'a dyn Reporter);

impl Reporter for Scrubbed<'_> {
    fn start(&self, record: &RunRecord) {
        if let Ok(r) = sm_core::secrets::scrubbed(record) {
            self.0.start(&r);
        }
    }
    fn step(&self, step: &Step) {
        self.0.step(step);
    }
    fn live(&self, sample: &LiveSample) {
        self.0.live(sample);
    }
    fn event(&self, event: &RunEvent) {
        self.0.event(&event.scrubbed());
    }
    fn prefill_done(&self, row: &PrefillRow) {
        if let Ok(r) = sm_core::secrets::scrubbed(row) {
            self.0.prefill_done(&r);
        }
    }
    fn cell_done(&self, cell: &DecodeCell) {
        if let Ok(c) = sm_core::secrets::scrubbed(cell) {
            self.0.cell_done(&c);
        }
    }
    fn finish(&self, record: &RunRecord) {
        if let Ok(r) = sm_core::secrets::scrubbed(record) {
            self.0.finish(&r);
        }
    }
}
