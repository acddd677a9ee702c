//! What a decode cell's streams share while they run: the live counters the progress view reads,
//! the first failure, and the cancel.
//!
//! Every token of every stream passes through here, on whichever worker thread its task runs, so
//! nothing here may be one memory location written by all streams: with C streams spread over N
//! cores, one lock or counter per token makes every core wait for the same cache line. Each stream
//! therefore writes only its own [`Shard`] (its own cache line, its lock never contended but by
//! the watcher's read every poll), and the watcher merges the shards when it reads them. The
//! cancel is one watch channel per stream for the same reason: a stream polls its cancel after
//! every chunk, and tokio's watch takes its channel's read lock and wait-list lock on each poll.

use std::collections::VecDeque;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use sm_core::record::CellStatus;
use tokio::sync::watch;

use crate::stream::request::Observer;
use crate::stream::request_log::{Point, RequestLog};

/// How many recent token gaps the live TBT median is taken over, in all (split between streams).
const LIVE_TBT_KEEP: usize = 2048;

/// Live state shared with the workers and whoever shows progress.
#[derive(Debug)]
pub(crate) struct Live {
    shards: Vec<Shard>,
    /// Recent gaps each stream keeps for the live TBT: `LIVE_TBT_KEEP` over all streams.
    tbt_keep: usize,
    /// With `--precision`: each stream's requests as they arrive, so the window can end when the
    /// figures settle.
    mirrored: bool,
    /// Workers that have received at least one token (once per stream: not per token).
    pub(crate) streams_with_token: AtomicUsize,
    /// A stream failed at the connection level: the server may be gone.
    pub(crate) connection_lost: AtomicBool,
    failure: Mutex<Option<(CellStatus, String)>>,
    pub(crate) failed: AtomicBool,
}

/// One stream's part of [`Live`], alone on its cache line (128 bytes: adjacent-line prefetch
/// pairs 64-byte lines on x86) so that streams on different cores never write the same line.
#[derive(Debug, Default)]
#[repr(align(128))]
struct Shard {
    tokens: AtomicU64,
    stats: Mutex<LiveStats>,
    mirror: Mutex<Vec<RequestLog>>,
}

/// Recent timings for the live view only; the cell's figures come from the logs.
#[derive(Debug, Default)]
struct LiveStats {
    ttft_ms: Vec<f64>,
    ttfa_ms: Vec<f64>,
    /// A request of this stream answered after thinking: the live view shows TTFA.
    thought: bool,
    /// The waits for the first tool call (a run with tools): shown once one came.
    ttftc_ms: Vec<f64>,
    tbt_ms: VecDeque<f64>,
}

impl Live {
    pub(crate) fn new(streams: u32, mirrored: bool) -> Live {
        let n = (streams as usize).max(1);
        Live {
            shards: (0..n).map(|_| Shard::default()).collect(),
            tbt_keep: (LIVE_TBT_KEEP / n).max(1),
            mirrored,
            streams_with_token: AtomicUsize::new(0),
            connection_lost: AtomicBool::new(false),
            failure: Mutex::new(None),
            failed: AtomicBool::new(false),
        }
    }

    /// The observer of stream `stream` (0-based, below the cell's concurrency).
    pub(crate) fn observer(&self, stream: usize) -> StreamObserver<'_> {
        StreamObserver {
            live: self,
            shard: &self.shards[stream % self.shards.len()],
            has_token: AtomicBool::new(false),
        }
    }

    /// Output tokens received so far, over every stream.
    pub(crate) fn tokens(&self) -> u64 {
        self.shards.iter().map(|s| s.tokens.load(Ordering::Relaxed)).sum()
    }

    /// Every stream's requests so far, as their tokens arrived (usage totals at the end are not
    /// spread back: the precision check needs the figures' noise, not their exact level), for the
    /// adaptive window to read in place (`adaptive::settled`).
    /// Whether each request's tokens are mirrored as they arrive (`--precision`).
    pub(crate) fn mirrored(&self) -> bool {
        self.mirrored
    }

    pub(crate) fn mirrors(&self) -> impl Iterator<Item = &Mutex<Vec<RequestLog>>> {
        self.shards.iter().map(|s| &s.mirror)
    }

    /// The medians of every TTFT so far and of the recent token gaps, over every stream.
    pub(crate) fn medians(&self) -> (Option<f64>, Option<f64>) {
        let (mut ttft, mut tbt) = (Vec::new(), Vec::new());
        for shard in &self.shards {
            let s = lock(&shard.stats);
            ttft.extend_from_slice(&s.ttft_ms);
            tbt.extend(s.tbt_ms.iter().copied());
        }
        (sm_core::stats::median(&ttft), sm_core::stats::median(&tbt))
    }

    /// The median wait for the first answer token so far, once a request answered after
    /// thinking; `None` for a model that does not think (its TTFT is that wait).
    pub(crate) fn ttfa_median(&self) -> Option<f64> {
        let mut ttfa = Vec::new();
        let mut thought = false;
        for shard in &self.shards {
            let s = lock(&shard.stats);
            ttfa.extend_from_slice(&s.ttfa_ms);
            thought |= s.thought;
        }
        thought.then(|| sm_core::stats::median(&ttfa)).flatten()
    }

    /// The median wait for the first tool call so far, once a call came; `None` before then and
    /// for a run without tools.
    pub(crate) fn ttftc_median(&self) -> Option<f64> {
        let mut ttftc = Vec::new();
        for shard in &self.shards {
            ttftc.extend_from_slice(&lock(&shard.stats).ttftc_ms);
        }
        sm_core::stats::median(&ttftc)
    }

    pub(crate) fn fail(&self, status: CellStatus, reason: String) {
        let mut slot = lock(&self.failure);
        if slot.is_none() {
            *slot = Some((status, reason));
        }
        self.failed.store(true, Ordering::Release);
    }

    pub(crate) fn failure(&self) -> Option<(CellStatus, String)> {
        lock(&self.failure).clone()
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// One stream's view of [`Live`]: it writes its own shard only.
pub(crate) struct StreamObserver<'a> {
    live: &'a Live,
    shard: &'a Shard,
    has_token: AtomicBool,
}

impl Observer for StreamObserver<'_> {
    fn first_token(&self, ttft: Duration) {
        if !self.has_token.swap(true, Ordering::AcqRel) {
            self.live.streams_with_token.fetch_add(1, Ordering::AcqRel);
        }
        lock(&self.shard.stats).ttft_ms.push(ttft.as_secs_f64() * 1000.0);
    }
    fn first_answer(&self, ttfa: Duration, after_thinking: bool) {
        let mut s = lock(&self.shard.stats);
        s.ttfa_ms.push(ttfa.as_secs_f64() * 1000.0);
        s.thought |= after_thinking;
    }
    fn first_tool_call(&self, ttftc: Duration) {
        lock(&self.shard.stats).ttftc_ms.push(ttftc.as_secs_f64() * 1000.0);
    }
    fn tokens(&self, tokens: u64, since_last: Option<Duration>) {
        self.shard.tokens.fetch_add(tokens, Ordering::Relaxed);
        if let Some(gap) = since_last {
            let mut s = lock(&self.shard.stats);
            if s.tbt_ms.len() >= self.live.tbt_keep {
                s.tbt_ms.pop_front();
            }
            s.tbt_ms.push_back(gap.as_secs_f64() * 1000.0 / tokens as f64);
        }
    }
    fn point(&self, sent: Instant, point: Point) {
        if !self.live.mirrored {
            return;
        }
        let mut logs = lock(&self.shard.mirror);
        if logs.last().is_none_or(|l| l.sent != sent) {
            logs.push(RequestLog { first_token: Some(point.at), ..RequestLog::new(sent) });
        }
        if let Some(log) = logs.last_mut() {
            log.points.push(point);
        }
    }
}

/// The cell's cancel: one watch channel per stream (see the module's comment).
pub(crate) struct Cancel(Vec<watch::Sender<bool>>);

impl Cancel {
    /// The cancel and each stream's receiver.
    pub(crate) fn new(streams: usize) -> (Cancel, Vec<watch::Receiver<bool>>) {
        let (senders, receivers) = (0..streams).map(|_| watch::channel(false)).unzip();
        (Cancel(senders), receivers)
    }

    /// Cancels every stream (one whose worker already ended has no receiver left: nothing to do).
    pub(crate) fn cancel(&self) {
        for tx in &self.0 {
            tx.send_replace(true);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_stream_counts_apart_and_the_reader_adds_them() {
        let live = Live::new(3, false);
        let (a, b) = (live.observer(0), live.observer(2));
        a.first_token(Duration::from_millis(20));
        b.first_token(Duration::from_millis(40));
        a.first_token(Duration::from_millis(30)); // the stream's next request
        a.tokens(1, None);
        a.tokens(2, Some(Duration::from_millis(20)));
        b.tokens(5, Some(Duration::from_millis(50)));
        assert_eq!(live.tokens(), 8);
        assert_eq!(live.streams_with_token.load(Ordering::Acquire), 2, "once per stream, not per request");
        assert_eq!(live.shards[0].tokens.load(Ordering::Relaxed), 3);
        assert_eq!(live.shards[1].tokens.load(Ordering::Relaxed), 0);
        let (ttft, tbt) = live.medians();
        assert_eq!(ttft, Some(30.0));
        a.first_answer(Duration::from_millis(20), false);
        assert_eq!(live.ttfa_median(), None, "no request thought: its TTFT is the wait");
        b.first_answer(Duration::from_millis(90), true);
        assert_eq!(live.ttfa_median(), Some(55.0));
        assert_eq!(live.ttftc_median(), None, "no tool call came yet");
        a.first_tool_call(Duration::from_millis(40));
        b.first_tool_call(Duration::from_millis(100));
        b.first_tool_call(Duration::from_millis(130));
        assert_eq!(live.ttftc_median(), Some(100.0), "over every stream's calls");
        assert_eq!(tbt, Some(10.0), "gaps per token: 10 and 10 ms");
        assert!(live.mirrors().all(|m| lock(m).is_empty()), "nothing mirrored without --precision");
    }

    #[test]
    fn the_live_tbt_keeps_recent_gaps_split_between_streams() {
        let live = Live::new(1024, false);
        let o = live.observer(7);
        for ms in 1..=10 {
            o.tokens(1, Some(Duration::from_millis(ms)));
        }
        assert_eq!(live.medians().1, Some(9.5), "2 gaps kept per stream at 1,024 streams: the last two");
    }

    #[test]
    fn each_shard_has_its_own_cache_line() {
        assert!(std::mem::align_of::<Shard>() >= 128);
        let live = Live::new(2, false);
        let (a, b) = (&live.shards[0] as *const Shard as usize, &live.shards[1] as *const Shard as usize);
        assert!(b - a >= 128);
    }

    #[test]
    fn precision_mirrors_each_stream_request_by_request() {
        let live = Live::new(2, true);
        let (sent, t) = (Instant::now(), Instant::now() + Duration::from_millis(5));
        let o = live.observer(1);
        o.point(sent, Point { at: t, chunks: 1, usage: Some(1) });
        o.point(sent, Point { at: t, chunks: 2, usage: Some(2) });
        let logs: Vec<RequestLog> = live.mirrors().flat_map(|m| lock(m).clone()).collect();
        assert_eq!(logs.len(), 1);
        assert_eq!(logs[0].points.len(), 2);
    }

    #[tokio::test]
    async fn the_cancel_reaches_every_stream() {
        let (cancel, mut rx) = Cancel::new(3);
        drop(rx.remove(1)); // a worker that already ended
        cancel.cancel();
        for mut r in rx {
            tokio::time::timeout(Duration::from_secs(5), r.wait_for(|v| *v)).await.unwrap().unwrap();
        }
    }
}
