//! The background streams of a mixed-prefill level: BG closed-loop streams of the decode prompt,
//! each sending its next request as soon as one ends, every token-bearing chunk recorded as it
//! arrives so that a probe's figures can be taken while the streams go on.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use sm_client::JsonBody;
use tokio::sync::watch;
use tokio::task::JoinHandle;

use super::figures::Emission;
use crate::cell::server::Target;
use crate::stream::live::Cancel;
use crate::stream::request::{Observer, Outcome, StreamTimeouts, stream_request};
use crate::stream::request_log::{Point, RequestLog};

/// Every background request's chunks so far, one list per request, shared with the workers and
/// kept per stream: a stream writes only its own lists (its own cache line, its lock contended
/// only by a snapshot), not one list that all streams lock for every chunk (docs/scaling.md).
#[derive(Debug, Default)]
pub(super) struct Recorder {
    streams: Vec<StreamRequests>,
    /// Streams that have had a first token.
    streaming: AtomicUsize,
    /// The first stream failure: why, and when its stream last gave a token (else its request's
    /// send): from there on the background was not the BG streams the level names.
    failure: Mutex<Option<(String, Instant)>>,
}

/// One stream's requests, each its chunks.
#[derive(Debug, Default)]
#[repr(align(128))]
struct StreamRequests(Mutex<Vec<Vec<Emission>>>);

impl StreamRequests {
    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<Vec<Emission>>> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }
}

impl Recorder {
    fn new(streams: u32) -> Recorder {
        Recorder { streams: (0..streams).map(|_| StreamRequests::default()).collect(), ..Recorder::default() }
    }

    /// A new request of `stream`: its index among that stream's requests.
    fn open(&self, stream: usize) -> usize {
        let mut r = self.streams[stream].lock();
        r.push(Vec::new());
        r.len() - 1
    }

    fn push(&self, stream: usize, slot: usize, e: Emission) {
        self.streams[stream].lock()[slot].push(e);
    }

    /// A copy of every request's chunks as of now (grouped by stream; the figures need no order).
    pub(super) fn snapshot(&self) -> Vec<Vec<Emission>> {
        self.streams.iter().flat_map(|s| s.lock().clone()).collect()
    }

    pub(super) fn streaming(&self) -> usize {
        self.streaming.load(Ordering::Acquire)
    }

    /// Why a background stream failed, once one did.
    pub(super) fn failure(&self) -> Option<String> {
        self.failure.lock().unwrap_or_else(|p| p.into_inner()).as_ref().map(|(why, _)| why.clone())
    }

    /// Since when the failed stream was silent: its last token, else its request's send.
    pub(super) fn fault_since(&self) -> Option<Instant> {
        self.failure.lock().unwrap_or_else(|p| p.into_inner()).as_ref().map(|&(_, since)| since)
    }

    fn fail(&self, reason: String, since: Instant) {
        self.failure.lock().unwrap_or_else(|p| p.into_inner()).get_or_insert((reason, since));
    }

    /// When a request of `stream` last gave a token.
    fn last_token(&self, stream: usize, slot: usize) -> Option<Instant> {
        self.streams[stream].lock()[slot].last().map(|e| e.at)
    }
}

/// One request's observer: turns the request log's points into emissions.
struct RequestObserver<'a> {
    recorder: &'a Recorder,
    stream: usize,
    slot: usize,
    last: Mutex<Option<Point>>,
    counted: &'a AtomicBool,
}

impl Observer for RequestObserver<'_> {
    fn first_token(&self, _ttft: std::time::Duration) {
        if !self.counted.swap(true, Ordering::AcqRel) {
            self.recorder.streaming.fetch_add(1, Ordering::AcqRel);
        }
    }

    fn point(&self, _sent: Instant, point: Point) {
        let mut last = self.last.lock().unwrap_or_else(|p| p.into_inner());
        let tokens = chunk_tokens(*last, point);
        *last = Some(point);
        if tokens > 0 {
            self.recorder.push(self.stream, self.slot, Emission { at: point.at, tokens });
        }
    }
}

/// The tokens a point added (methodology §13.3): the increase of the server's usage count where
/// it reports one on every chunk, else one per token-bearing chunk.
pub(super) fn chunk_tokens(last: Option<Point>, point: Point) -> u64 {
    let (chunks, usage) = last.map_or((0, Some(0)), |p| (p.chunks, p.usage));
    match (point.usage, usage) {
        (Some(now), Some(before)) => now.saturating_sub(before),
        _ => point.chunks.saturating_sub(chunks),
    }
}

/// The running streams: cancel them with [`Background::stop`].
pub(super) struct Background {
    pub recorder: Arc<Recorder>,
    cancel: Cancel,
    workers: Vec<JoinHandle<Vec<RequestLog>>>,
}

impl Background {
    pub(super) fn start(
        target: &Target,
        path: &'static str,
        body: &JsonBody,
        streams: u32,
        timeouts: StreamTimeouts,
    ) -> Background {
        let recorder = Arc::new(Recorder::new(streams));
        // one cancel channel per stream: each polls its own after every chunk
        let (cancel, receivers) = Cancel::new(streams as usize);
        let workers = receivers
            .into_iter()
            .enumerate()
            .map(|(stream, rx)| {
                tokio::spawn(worker(stream, target.clone(), path, body.clone(), timeouts, rx, recorder.clone()))
            })
            .collect();
        Background { recorder, cancel, workers }
    }

    /// Cancels every stream and returns every request's log.
    pub(super) async fn stop(self) -> Vec<RequestLog> {
        self.cancel.cancel();
        let mut logs = Vec::new();
        for w in self.workers {
            logs.extend(w.await.unwrap_or_default());
        }
        logs
    }
}

async fn worker(
    stream: usize,
    target: Target,
    path: &'static str,
    body: JsonBody,
    timeouts: StreamTimeouts,
    mut cancel: watch::Receiver<bool>,
    recorder: Arc<Recorder>,
) -> Vec<RequestLog> {
    let counted = AtomicBool::new(false);
    let mut logs = Vec::new();
    while !*cancel.borrow() {
        let slot = recorder.open(stream);
        let observer = RequestObserver { recorder: &recorder, stream, slot, last: Mutex::new(None), counted: &counted };
        let mut run = stream_request(&target.client, path, &body, timeouts, &mut cancel, &observer).await;
        run.log.id = run.id.take();
        let reason = match run.outcome {
            Outcome::Completed => {
                logs.push(run.log);
                continue;
            }
            Outcome::Cancelled => None,
            // a failure after the cancel is the cancel's doing, not the server's
            Outcome::Failed(r) | Outcome::Lost(r) => (!*cancel.borrow()).then_some(r),
            Outcome::Loop(f) => Some(format!("a background stream repeated the same {} characters", f.period_chars)),
        };
        if let Some(r) = reason {
            run.log.failure = Some(r.clone());
            let since = recorder.last_token(stream, slot).unwrap_or(run.log.sent);
            recorder.fail(format!("a background stream failed: {r}"), since);
        }
        logs.push(run.log);
        break;
    }
    logs
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_chunk_counts_its_usage_increase_or_one_token() {
        let at = Instant::now();
        let p = |chunks, usage| Point { at, chunks, usage };
        assert_eq!(chunk_tokens(None, p(1, Some(3))), 3);
        assert_eq!(chunk_tokens(Some(p(1, Some(3))), p(2, Some(5))), 2);
        assert_eq!(chunk_tokens(Some(p(2, Some(5))), p(2, Some(6))), 1, "a usage-only increase");
        assert_eq!(chunk_tokens(None, p(1, None)), 1);
        assert_eq!(chunk_tokens(Some(p(1, None)), p(2, None)), 1);
    }
}
