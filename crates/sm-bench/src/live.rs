//! A cell's live state, shared by its streams (`streams`), its driver (`cell`), the worker ranks'
//! links (`ranks`) and whoever shows progress.

use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};

use sm_core::record::CellStatus;

use crate::request_log::RequestLog;

/// Live state shared with the workers and whoever shows progress.
#[derive(Debug, Default)]
pub struct Live {
    /// Workers that have received at least one token.
    pub streams_with_token: AtomicUsize,
    pub tokens: AtomicU64,
    pub(crate) stats: Mutex<LiveStats>,
    /// A stream failed at the connection level: the server may be gone.
    pub(crate) connection_lost: AtomicBool,
    failure: Mutex<Option<(CellStatus, String)>>,
    pub(crate) failed: AtomicBool,
    /// With `--precision`: each stream's requests as they arrive, one lock per stream (never
    /// contended but by the watcher's snapshot), so the window can end when the figures settle.
    pub(crate) mirrors: Vec<Mutex<Vec<RequestLog>>>,
}

/// Recent timings for the live view only; the cell's figures come from the logs.
#[derive(Debug, Default)]
pub(crate) struct LiveStats {
    pub(crate) ttft_ms: Vec<f64>,
    pub(crate) tbt_ms: std::collections::VecDeque<f64>,
}

pub(crate) const LIVE_TBT_KEEP: usize = 2048;

impl Live {
    pub(crate) fn new(streams: u32, mirrored: bool) -> Live {
        let n = if mirrored { streams as usize } else { 0 };
        Live { mirrors: (0..n).map(|_| Mutex::default()).collect(), ..Live::default() }
    }

    /// Every stream's requests so far, as their tokens arrived (usage totals at the end are not
    /// spread back: the precision check needs the figures' noise, not their exact level).
    pub(crate) fn snapshot(&self) -> Vec<RequestLog> {
        self.mirrors.iter().flat_map(|m| m.lock().unwrap_or_else(|p| p.into_inner()).clone()).collect()
    }

    pub(crate) fn medians(&self) -> (Option<f64>, Option<f64>) {
        let s = self.stats.lock().unwrap_or_else(|p| p.into_inner());
        let tbt: Vec<f64> = s.tbt_ms.iter().copied().collect();
        (sm_core::stats::median(&s.ttft_ms), sm_core::stats::median(&tbt))
    }

    pub(crate) fn fail(&self, status: CellStatus, reason: String) {
        let mut slot = self.failure.lock().unwrap_or_else(|p| p.into_inner());
        if slot.is_none() {
            *slot = Some((status, reason));
        }
        self.failed.store(true, Ordering::Release);
    }
    pub(crate) fn failure(&self) -> Option<(CellStatus, String)> {
        self.failure.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }
}
