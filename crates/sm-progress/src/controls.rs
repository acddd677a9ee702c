//! How the outside steers a run: Ctrl-C, and the dashboard's `q` and `s`.

use tokio::sync::watch;

/// The receiving side, held by the runner.
#[derive(Debug, Clone)]
pub struct Controls {
    /// Stop at once: the cell in progress is dropped (Ctrl-C).
    pub stop_now: watch::Receiver<bool>,
    /// Finish the cell in progress, then stop (key `q`).
    pub finish_after_cell: watch::Receiver<bool>,
    /// Each increment skips the cell in progress (key `s`).
    pub skip_cell: watch::Receiver<u64>,
}

/// The sending side, held by whoever steers.
#[derive(Debug, Clone)]
pub struct ControlHandle {
    stop_now: watch::Sender<bool>,
    finish_after_cell: watch::Sender<bool>,
    skip_cell: watch::Sender<u64>,
}

impl ControlHandle {
    pub fn stop_now(&self) {
        let _ = self.stop_now.send(true);
    }
    pub fn finish_after_cell(&self) {
        let _ = self.finish_after_cell.send(true);
    }
    pub fn skip_cell(&self) {
        self.skip_cell.send_modify(|n| *n += 1);
    }
}

pub fn controls() -> (ControlHandle, Controls) {
    let (stop_tx, stop_rx) = watch::channel(false);
    let (finish_tx, finish_rx) = watch::channel(false);
    let (skip_tx, skip_rx) = watch::channel(0);
    (
        ControlHandle { stop_now: stop_tx, finish_after_cell: finish_tx, skip_cell: skip_tx },
        Controls { stop_now: stop_rx, finish_after_cell: finish_rx, skip_cell: skip_rx },
    )
}

impl Controls {
    pub fn stopped(&self) -> bool {
        *self.stop_now.borrow()
    }
    pub fn finishing(&self) -> bool {
        *self.finish_after_cell.borrow()
    }
}
