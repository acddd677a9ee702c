//! A decode cell's live state: what its workers share with the watcher that ends the window and
//! with whoever shows progress.

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use sm_core::record::CellStatus;

use crate::request::Observer;
use crate::request_log::{Point, RequestLog};

/// Live state shared with the workers and whoever shows progress.
#[derive(Debug, Default)]
pub struct Live {
    /// Workers that have received at least one token.
    pub streams_with_token: AtomicUsize,
    pub tokens: AtomicU64,
    stats: Mutex<LiveStats>,
    /// A stream failed at the connection level: the server may be gone.
    pub(crate) connection_lost: AtomicBool,
    pub(crate) failure: Mutex<Option<(CellStatus, String)>>,
    pub(crate) failed: AtomicBool,
    /// With `--precision`: each stream's requests as they arrive, one lock per stream (never
    /// contended but by the watcher's snapshot), so the window can end when the figures settle.
    pub(crate) mirrors: Vec<Mutex<Vec<RequestLog>>>,
}

/// Recent timings for the live view only; the cell's figures come from the logs.
#[derive(Debug, Default)]
struct LiveStats {
    ttft_ms: Vec<f64>,
    tbt_ms: std::collections::VecDeque<f64>,
}

const LIVE_TBT_KEEP: usize = 2048;

impl Live {
    pub(crate) fn new(streams: u32, mirrored: bool) -> Live {
        let n = if mirrored { streams as usize } else { 0 };
        Live { mirrors: (0..n).map(|_| Mutex::default()).collect(), ..Live::default() }
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

pub(crate) struct WorkerObserver {
    pub(crate) live: Arc<Live>,
    pub(crate) has_token: AtomicBool,
    /// This stream's index into `live.mirrors`.
    pub(crate) stream: usize,
}

impl Observer for WorkerObserver {
    fn first_token(&self, ttft: Duration) {
        if !self.has_token.swap(true, Ordering::AcqRel) {
            self.live.streams_with_token.fetch_add(1, Ordering::AcqRel);
        }
        let mut s = self.live.stats.lock().unwrap_or_else(|p| p.into_inner());
        s.ttft_ms.push(ttft.as_secs_f64() * 1000.0);
    }
    fn tokens(&self, tokens: u64, since_last: Option<Duration>) {
        self.live.tokens.fetch_add(tokens, Ordering::Relaxed);
        if let Some(gap) = since_last {
            let mut s = self.live.stats.lock().unwrap_or_else(|p| p.into_inner());
            if s.tbt_ms.len() == LIVE_TBT_KEEP {
                s.tbt_ms.pop_front();
            }
            s.tbt_ms.push_back(gap.as_secs_f64() * 1000.0 / tokens as f64);
        }
    }
    fn point(&self, sent: Instant, point: Point) {
        let Some(mirror) = self.live.mirrors.get(self.stream) else { return };
        let mut logs = mirror.lock().unwrap_or_else(|p| p.into_inner());
        if logs.last().is_none_or(|l| l.sent != sent) {
            logs.push(RequestLog { first_token: Some(point.at), ..RequestLog::new(sent) });
        }
        if let Some(log) = logs.last_mut() {
            log.points.push(point);
        }
    }
}
