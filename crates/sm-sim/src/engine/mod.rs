//! The simulated engine: a vLLM-style continuous-batching scheduler on its own OS thread.

mod kv;
mod scheduler;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc as std_mpsc;
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Instant;

use tokio::sync::mpsc::UnboundedSender;

use crate::profile::Profile;
use crate::trace::TraceRecord;

/// One monotonic clock for the whole sim: seconds since it started.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Clock {
    start: Instant,
}

impl Clock {
    pub(crate) fn new() -> Self {
        Self { start: Instant::now() }
    }

    pub(crate) fn now(&self) -> f64 {
        self.start.elapsed().as_secs_f64()
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum FinishReason {
    Length,
    Stop,
    Abort,
    Disconnect,
}

impl FinishReason {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            FinishReason::Length => "length",
            FinishReason::Stop => "stop",
            FinishReason::Abort => "abort",
            FinishReason::Disconnect => "disconnect",
        }
    }
}

pub(crate) enum Event {
    Admitted {
        cached_tokens: u32,
    },
    /// `n` new tokens released at schedule time `at`; `finish` set on the request's last emission.
    Tokens {
        n: u32,
        at: f64,
        finish: Option<FinishReason>,
    },
    /// Ended without a final emission (aborted).
    Finished {
        reason: FinishReason,
    },
}

/// Events bound for streams, in the order the scheduler produced them.
pub(crate) type Batch = Vec<(UnboundedSender<Event>, Event)>;

pub(crate) struct NewRequest {
    pub id: u64,
    pub arrival: f64,
    pub prompt_tokens: u32,
    /// Chained hashes of the prompt's full blocks.
    pub block_hashes: Vec<u64>,
    /// Chained hashes of the blocks after those, as decoding fills them: the prompt's tail,
    /// `answer_offset` template tokens and the answer (`request::decode_hashes`).
    pub decode_hashes: Vec<u64>,
    /// Tokens between the prompt and the answer in the history a later turn sends.
    pub answer_offset: u32,
    pub max_tokens: u32,
    /// Reported when `max_tokens` is reached: `Length`, or `Stop` for a natural end.
    pub end_reason: FinishReason,
    pub tokens_per_step: u32,
    pub first_token_delay_s: f64,
    /// With a `[reasoning]` profile: the thinking tokens that come first (0 for a completion or
    /// with thinking off). `None` without one, so the trace keeps its old keys.
    pub reasoning_tokens: Option<u32>,
    /// A chat request with `tools`: its answer tokens are one tool call, planned so. `None`
    /// without tools, so the trace keeps its old keys.
    pub tool_call: Option<crate::tools::CallPlan>,
    pub events: UnboundedSender<Event>,
}

pub(crate) enum Command {
    Submit(Box<NewRequest>),
    Abort { id: u64, reason: FinishReason },
    Shutdown,
}

/// Live gauges and counters, refreshed by the scheduler after every step.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct EngineStats {
    pub running: u64,
    pub waiting: u64,
    pub kv_used_blocks: u64,
    pub kv_total_blocks: u64,
    pub prompt_tokens_total: u64,
    pub generation_tokens_total: u64,
    pub prefix_queries_total: u64,
    pub prefix_hits_total: u64,
    pub preemptions_total: u64,
    pub finished_length: u64,
    pub finished_stop: u64,
    pub finished_abort: u64,
    pub gen_throughput: f64,
    /// Speculative decoding: verification steps, draft tokens proposed, draft tokens accepted.
    pub spec_drafts_total: u64,
    pub spec_draft_tokens_total: u64,
    pub spec_accepted_total: u64,
    /// With a `[gpu]`: its energy counter as of the last change of the running batch.
    pub energy: crate::gpu::Energy,
    /// Queue time (arrival to first admission) of admitted requests, as vLLM's
    /// `vllm:request_queue_time_seconds` histogram: counts per bound of [`QUEUE_BOUNDS_S`] (not
    /// cumulative; the last is past every bound), their sum in seconds.
    pub queue_time_buckets: [u64; QUEUE_BOUNDS_S.len() + 1],
    pub queue_time_sum_s: f64,
}

/// Upper bounds of the queue-time histogram's buckets, seconds.
pub(crate) const QUEUE_BOUNDS_S: [f64; 6] = [0.001, 0.005, 0.01, 0.1, 1.0, 10.0];

impl EngineStats {
    pub(crate) fn observe_queue_time(&mut self, seconds: f64) {
        let i = QUEUE_BOUNDS_S.iter().position(|b| seconds <= *b).unwrap_or(QUEUE_BOUNDS_S.len());
        self.queue_time_buckets[i] += 1;
        self.queue_time_sum_s += seconds;
    }
}

/// A lateness histogram (5 µs buckets up to 100 ms) filled without locks or allocation.
pub struct LatenessHist {
    buckets: Vec<AtomicU64>,
    max_ns: AtomicU64,
}

const BUCKET_NS: u64 = 5_000;
const BUCKETS: usize = 20_001;

impl LatenessHist {
    pub(crate) fn new() -> Self {
        Self { buckets: (0..BUCKETS).map(|_| AtomicU64::new(0)).collect(), max_ns: AtomicU64::new(0) }
    }

    pub(crate) fn record(&self, late_s: f64, count: u64) {
        let ns = (late_s.max(0.0) * 1e9) as u64;
        let i = ((ns / BUCKET_NS) as usize).min(BUCKETS - 1);
        self.buckets[i].fetch_add(count, Ordering::Relaxed);
        self.max_ns.fetch_max(ns, Ordering::Relaxed);
    }

    /// Number of recorded emissions.
    pub fn count(&self) -> u64 {
        self.buckets.iter().map(|b| b.load(Ordering::Relaxed)).sum()
    }

    /// The q-quantile (0..=1) in ms, as the upper edge of its bucket (the maximum past 100 ms).
    pub fn quantile_ms(&self, q: f64) -> f64 {
        let total = self.count();
        if total == 0 {
            return 0.0;
        }
        let rank = ((q * total as f64).ceil() as u64).clamp(1, total);
        let mut seen = 0;
        for (i, b) in self.buckets.iter().enumerate() {
            seen += b.load(Ordering::Relaxed);
            if seen >= rank {
                if i == BUCKETS - 1 {
                    return self.max_ms();
                }
                return ((i as u64 + 1) * BUCKET_NS) as f64 / 1e6;
            }
        }
        self.max_ms()
    }

    pub fn max_ms(&self) -> f64 {
        self.max_ns.load(Ordering::Relaxed) as f64 / 1e6
    }

    pub fn reset(&self) {
        for b in &self.buckets {
            b.store(0, Ordering::Relaxed);
        }
        self.max_ns.store(0, Ordering::Relaxed);
    }
}

/// Emission timing against the schedule, for benchmarks.
pub struct EmissionStats {
    /// When the scheduler handed the step's emissions over (one batch per step), minus the step's scheduled end.
    pub scheduler: LatenessHist,
    /// When the scheduler thread woke for the step's end (before handing tokens over).
    pub wake: LatenessHist,
    /// When the HTTP handler wrote the chunk into the response body, minus the step's scheduled end.
    pub handler: LatenessHist,
}

impl EmissionStats {
    fn new() -> Self {
        Self { scheduler: LatenessHist::new(), wake: LatenessHist::new(), handler: LatenessHist::new() }
    }
}

pub(crate) struct Engine {
    pub tx: std_mpsc::Sender<Command>,
    pub stats: Arc<Mutex<EngineStats>>,
    pub emission: Arc<EmissionStats>,
    thread: Option<JoinHandle<()>>,
}

impl Engine {
    pub(crate) fn spawn(
        profile: Profile,
        clock: Clock,
        trace: Option<std_mpsc::Sender<TraceRecord>>,
    ) -> std::io::Result<Self> {
        let (tx, rx) = std_mpsc::channel();
        let stats =
            Arc::new(Mutex::new(EngineStats { kv_total_blocks: profile.num_gpu_blocks(), ..Default::default() }));
        let emission = Arc::new(EmissionStats::new());
        let (dispatch, mut batches) = tokio::sync::mpsc::unbounded_channel::<Batch>();
        let (spare_tx, spare) = std_mpsc::channel();
        // fans each step's events out to the streams from inside the runtime, where waking a task is
        // a push onto the worker's own queue
        tokio::spawn(async move {
            while let Some(mut batch) = batches.recv().await {
                for (tx, ev) in batch.drain(..) {
                    let _ = tx.send(ev);
                }
                let _ = spare_tx.send(batch);
            }
        });
        let sched =
            scheduler::Scheduler::new(profile, clock, rx, stats.clone(), emission.clone(), trace, (dispatch, spare));
        let thread = std::thread::Builder::new().name("sm-sim-sched".into()).spawn(move || sched.run())?;
        Ok(Self { tx, stats, emission, thread: Some(thread) })
    }

    /// A stand-in with no thread, left behind when `stop` runs elsewhere.
    pub(crate) fn detached() -> Self {
        let (tx, _) = std_mpsc::channel();
        Self { tx, stats: Arc::default(), emission: Arc::new(EmissionStats::new()), thread: None }
    }

    /// Stops the scheduler thread and waits for it (it drops the trace sender on exit).
    pub(crate) fn stop(&mut self) {
        let _ = self.tx.send(Command::Shutdown);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Drop for Engine {
    fn drop(&mut self) {
        let _ = self.tx.send(Command::Shutdown);
    }
}
