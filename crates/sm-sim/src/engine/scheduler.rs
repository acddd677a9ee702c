//! The step loop. Each step's duration comes from the profile; steps end on absolute deadlines
//! (sleep to just before, then spin) so emission follows the schedule far more closely than tokio's
//! 1 ms timer wheel would allow, and lateness never accumulates from step to step.

use std::collections::VecDeque;
use std::sync::mpsc::{Receiver, RecvTimeoutError, Sender};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use super::kv::KvCache;
use super::{Batch, Clock, Command, EmissionStats, EngineStats, Event, FinishReason, NewRequest};
use crate::noise::StepNoise;
use crate::profile::Profile;
use crate::trace::TraceRecord;

/// Wake this long before a deadline and spin the rest: OS sleeps overshoot by tens of µs or more.
const SPIN_S: f64 = 0.0005;
/// The same with real-time scheduling, whose wake-ups are punctual.
const SPIN_RT_S: f64 = 0.0001;
/// If the thread falls this far behind (suspend, debugger), restart the schedule from now.
const RESYNC_S: f64 = 0.25;

enum Phase {
    Waiting,
    Prefill {
        remaining: u32,
        planned: u32,
    },
    /// A fully cached prompt: no prefill work. Its first token is due at `due`, that is
    /// `cached_ttft_ms(batch, prompt)` after `since`, where `batch` is the largest running batch seen
    /// since admission: a burst admitted together, or a restart into a full batch, all see the batch
    /// they run in, not their place in the admission order.
    Cached {
        since: f64,
        batch: u64,
        due: f64,
    },
    /// The first token is held until `until` (the slow-first-token fault).
    Timer {
        until: f64,
    },
    Decode,
}

struct Seq {
    req: Box<NewRequest>,
    phase: Phase,
    generated: u32,
    /// Prefix-cache blocks this request holds a reference on.
    held: Vec<u64>,
    private_blocks: u64,
    admitted: Option<f64>,
    /// The first step start at which this request waited but could not be admitted.
    held_since: Option<f64>,
    first_token: Option<f64>,
    /// With reasoning: when the first token past the thinking was released.
    first_answer: Option<f64>,
    /// With a tool call: when its first token (the name's delta) was released.
    first_tool_call: Option<f64>,
    cached_tokens: u32,
    emissions: Vec<(f64, u32)>,
    finished: Option<FinishReason>,
    /// Speculative decoding: steps that verified drafts, and draft tokens accepted (the truth).
    drafts: u32,
    accepted: u32,
}

impl Seq {
    fn len(&self) -> u64 {
        u64::from(self.req.prompt_tokens) + u64::from(self.generated)
    }

    fn blocks(&self) -> u64 {
        self.held.len() as u64 + self.private_blocks
    }
}

pub(super) struct Scheduler {
    p: Profile,
    clock: Clock,
    rx: Receiver<Command>,
    stats_out: Arc<Mutex<EngineStats>>,
    emission: Arc<EmissionStats>,
    books: Books,
    waiting: VecDeque<Seq>,
    running: Vec<Seq>,
    throughput_mark: (f64, u64),
    shutdown: bool,
    spin_s: f64,
    /// Decode and prefill time of the step in flight; 0 when it only waits for first-token timers.
    work_s: f64,
    /// The profile's `[noise]`: one factor per decode step.
    noise: StepNoise,
}

impl Scheduler {
    pub(super) fn new(
        p: Profile,
        clock: Clock,
        rx: Receiver<Command>,
        stats_out: Arc<Mutex<EngineStats>>,
        emission: Arc<EmissionStats>,
        trace: Option<Sender<TraceRecord>>,
        (dispatch, spare): (tokio::sync::mpsc::UnboundedSender<Batch>, Receiver<Batch>),
    ) -> Self {
        let kv = KvCache::new(p.num_gpu_blocks());
        let stats = EngineStats { kv_total_blocks: kv.total(), ..Default::default() };
        let noise = StepNoise::new(p.noise);
        let trace_noise = (!p.noise.is_off()).then_some(p.noise);
        let trace_spec = p.speculative.is_some();
        Self {
            p,
            clock,
            rx,
            stats_out,
            emission,
            books: Books { kv, stats, trace, trace_noise, trace_spec, outbox: Vec::new(), dispatch, spare },
            waiting: VecDeque::new(),
            running: Vec::new(),
            throughput_mark: (0.0, 0),
            shutdown: false,
            spin_s: SPIN_S,
            work_s: 0.0,
            noise,
        }
    }

    pub(super) fn run(mut self) {
        if raise_priority() {
            self.spin_s = SPIN_RT_S;
        }
        let mut t = self.clock.now();
        while !self.shutdown {
            while let Ok(cmd) = self.rx.try_recv() {
                self.command(cmd);
            }
            if self.running.is_empty() && self.waiting.is_empty() {
                self.publish_stats(self.clock.now());
                match self.rx.recv_timeout(Duration::from_millis(200)) {
                    Ok(cmd) => self.command(cmd),
                    Err(RecvTimeoutError::Timeout) => {}
                    Err(RecvTimeoutError::Disconnected) => self.shutdown = true,
                }
                t = self.clock.now();
                continue;
            }
            if self.running.is_empty() {
                // nothing was in flight: the next step starts now, not at the last step's end
                t = t.max(self.clock.now());
            }
            self.admit(t);
            self.books.flush();
            let deadline = t + self.plan(t);
            self.publish_stats(t);
            // a step that only waits for first tokens computes nothing: an arrival joins it at once,
            // as it would join an idle engine, and so counts in the batch of those already waiting
            let end = self.wait_until(deadline, self.work_s == 0.0);
            if self.shutdown {
                break;
            }
            let now = self.clock.now();
            let emitted = self.apply(end, now);
            self.books.flush();
            if emitted > 0 {
                self.emission.wake.record(now - end, emitted);
                self.emission.scheduler.record(self.clock.now() - end, emitted);
            }
            self.running.retain(|s| s.finished.is_none());
            self.publish_stats(now);
            t = if now - end > RESYNC_S { now } else { end };
        }
        let now = self.clock.now();
        for mut s in std::mem::take(&mut self.running) {
            self.books.finish(&mut s, FinishReason::Abort, now);
        }
        for mut s in std::mem::take(&mut self.waiting) {
            self.books.finish(&mut s, FinishReason::Abort, now);
        }
        self.books.flush();
    }

    fn command(&mut self, cmd: Command) {
        match cmd {
            Command::Submit(req) => self.waiting.push_back(Seq {
                req,
                phase: Phase::Waiting,
                generated: 0,
                held: Vec::new(),
                private_blocks: 0,
                admitted: None,
                held_since: None,
                first_token: None,
                first_answer: None,
                first_tool_call: None,
                cached_tokens: 0,
                emissions: Vec::new(),
                drafts: 0,
                accepted: 0,
                finished: None,
            }),
            Command::Abort { id, reason } => {
                let now = self.clock.now();
                if let Some(i) = self.running.iter().position(|s| s.req.id == id) {
                    let mut s = self.running.remove(i);
                    self.books.finish(&mut s, reason, now);
                } else if let Some(i) = self.waiting.iter().position(|s| s.req.id == id) {
                    let mut s = self.waiting.remove(i).expect("index from position");
                    self.books.finish(&mut s, reason, now);
                }
                self.publish_stats(now);
            }
            Command::Shutdown => self.shutdown = true,
        }
        self.books.flush();
    }

    /// Admits waiting requests in arrival order while sequences and KV blocks allow (head-of-line
    /// blocking like vLLM: a request that does not fit holds back the ones behind it).
    fn admit(&mut self, t: f64) {
        let bs = self.p.block_size;
        while let Some(s) = self.waiting.front() {
            if self.running.len() as u64 >= self.p.max_num_seqs {
                break;
            }
            let prompt = u64::from(s.req.prompt_tokens);
            // at least one prompt token is always recomputed, as in vLLM
            let max_hits = ((prompt - 1) / bs) as usize;
            let (hits, unheld) = self.books.kv.lookup(&s.req.block_hashes, max_hits);
            let need = s.len().div_ceil(bs).max(1) - hits as u64;
            if self.books.kv.available() < need + unheld {
                break;
            }
            let mut s = self.waiting.pop_front().expect("front exists");
            self.books.kv.acquire(&s.req.block_hashes[..hits]);
            s.held.extend_from_slice(&s.req.block_hashes[..hits]);
            assert!(self.books.kv.alloc(need), "checked above");
            s.private_blocks = need;
            let hit_tokens = hits as u64 * bs;
            let first_admission = s.admitted.is_none();
            if first_admission {
                s.admitted = Some(t.max(s.req.arrival));
                self.books.stats.observe_queue_time(t.max(s.req.arrival) - s.req.arrival);
                s.cached_tokens = hit_tokens as u32;
                self.books.stats.prompt_tokens_total += prompt;
                self.books.stats.prefix_queries_total += prompt;
                self.books.stats.prefix_hits_total += hit_tokens;
                self.books.outbox.push((s.req.events.clone(), Event::Admitted { cached_tokens: s.cached_tokens }));
            }
            let uncached = (s.len() - hit_tokens) as u32;
            s.phase = if first_admission && hits > 0 && u64::from(uncached) <= bs {
                // The profile's cached TTFT is the whole time to first token, the wait for this step
                // boundary included, so it counts from arrival; time held back (KV, max_num_seqs)
                // comes on top. `plan` sets the batch and the due time.
                let held = s.held_since.map_or(0.0, |h| t - h);
                Phase::Cached { since: s.req.arrival + held, batch: 0, due: f64::INFINITY }
            } else {
                Phase::Prefill { remaining: uncached, planned: 0 }
            };
            self.running.push(s);
        }
        // whoever is still waiting was held back from now on; arrivals are at the back, so the ones
        // not yet marked are a suffix of the queue
        for s in self.waiting.iter_mut().rev() {
            if s.held_since.is_some() {
                break;
            }
            s.held_since = Some(t);
        }
    }

    /// Plans the step starting at `t` and returns its duration in seconds.
    fn plan(&mut self, t: f64) -> f64 {
        let (mut decode_n, mut ctx_sum) = (0u64, 0u64);
        for s in &self.running {
            if matches!(s.phase, Phase::Decode) {
                decode_n += 1;
                ctx_sum += s.len();
            }
        }
        let mut budget = self.p.max_num_batched_tokens.saturating_sub(decode_n);
        let mut prefill_s = 0.0;
        let mut next_timer = f64::INFINITY;
        let running = self.running.len() as u64;
        // (prompt length, cached TTFT at `running`): a burst's requests share both
        let mut memo = (f64::NAN, 0.0);
        for s in &mut self.running {
            let len = s.len() as f64;
            match &mut s.phase {
                Phase::Cached { since, batch, due } => {
                    if running > *batch {
                        *batch = running;
                        if memo.0 != len {
                            memo = (len, self.p.cached_ttft_ms(running as f64, len));
                        }
                        *due = *since + memo.1 / 1000.0;
                    }
                    next_timer = next_timer.min(*due);
                }
                Phase::Prefill { remaining, planned } => {
                    let chunk = u64::from(*remaining).min(budget);
                    budget -= chunk;
                    *planned = chunk as u32;
                    if chunk > 0 {
                        prefill_s += chunk as f64 / self.p.prefill_tokens_per_s(len);
                    }
                }
                Phase::Timer { until } => next_timer = next_timer.min(*until),
                _ => {}
            }
        }
        let mut dur = prefill_s;
        if decode_n > 0 {
            let step_ms = self.p.step_ms(decode_n as f64, (ctx_sum / decode_n) as f64);
            dur += step_ms * self.noise.step_factor(t) / 1000.0;
        }
        self.work_s = dur;
        if dur == 0.0 {
            // only first-token timers are pending: sleep exactly until the earliest one
            dur = if next_timer.is_finite() { (next_timer - t).max(0.0) } else { 0.001 };
        }
        dur
    }

    /// Sleeps until `deadline`, handling commands meanwhile so that aborts free KV at once. With
    /// `interruptible`, a new request ends the wait early. Returns when the step ended: `deadline`, or
    /// the moment it was interrupted.
    fn wait_until(&mut self, deadline: f64, interruptible: bool) -> f64 {
        loop {
            let now = self.clock.now();
            let left = deadline - now;
            if left <= 0.0 || self.shutdown {
                return deadline;
            }
            if left > self.spin_s {
                match self.rx.recv_timeout(Duration::from_secs_f64(left - self.spin_s)) {
                    Ok(cmd) => {
                        let submit = matches!(cmd, Command::Submit(_));
                        self.command(cmd);
                        if submit && interruptible {
                            return self.clock.now().min(deadline);
                        }
                    }
                    Err(RecvTimeoutError::Timeout) => {}
                    Err(RecvTimeoutError::Disconnected) => self.shutdown = true,
                }
            } else {
                // a pure spin: yielding on a saturated machine can cost a whole timeslice
                std::hint::spin_loop();
            }
        }
    }

    /// Ends the step scheduled for `deadline`: advances prefill, releases tokens. Returns the number of
    /// tokens emitted.
    fn apply(&mut self, deadline: f64, now: f64) -> u64 {
        // a cached prompt's first token leaves at the step end nearest its due time, so that it is
        // within half a step of the profile's TTFT and not late by up to a whole step
        let round = self.work_s / 2.0;
        let mut emitted = 0u64;
        let mut i = 0;
        while i < self.running.len() {
            let due = match &mut self.running[i].phase {
                Phase::Prefill { remaining, planned } => {
                    *remaining -= *planned;
                    *planned = 0;
                    *remaining == 0
                }
                Phase::Cached { due, .. } => *due <= deadline + round + 1e-9,
                Phase::Timer { until } => *until <= deadline + 1e-9,
                Phase::Decode => true,
                Phase::Waiting => false,
            };
            if !due {
                i += 1;
                continue;
            }
            if matches!(self.running[i].phase, Phase::Prefill { .. }) {
                self.publish_prompt_blocks(i);
            }
            let s = &mut self.running[i];
            // the slow-first-token fault holds the first token back once it is ready
            if matches!(s.phase, Phase::Prefill { .. } | Phase::Cached { .. })
                && s.first_token.is_none()
                && s.req.first_token_delay_s > 0.0
            {
                s.phase = Phase::Timer { until: deadline + s.req.first_token_delay_s };
                i += 1;
                continue;
            }
            let (k, drafted) = self.step_tokens(&self.running[i]);
            let s = &self.running[i];
            let grow = (s.len() + u64::from(k)).div_ceil(self.p.block_size).saturating_sub(s.blocks());
            if grow > 0 && !self.make_room(i, grow) {
                // the sequence preempted itself: it was the most recently admitted
                continue;
            }
            let s = &mut self.running[i];
            s.private_blocks += grow;
            s.phase = Phase::Decode;
            s.generated += k;
            emitted += u64::from(k);
            if let Some(draft_tokens) = drafted {
                s.drafts += 1;
                s.accepted += k - 1;
                self.books.stats.spec_drafts_total += 1;
                self.books.stats.spec_draft_tokens_total += u64::from(draft_tokens);
                self.books.stats.spec_accepted_total += u64::from(k - 1);
            }
            if s.first_token.is_none() {
                s.first_token = Some(now);
            }
            // an emission that crosses the end of the thinking carries the first answer token
            if s.first_answer.is_none() && s.req.reasoning_tokens.is_some_and(|r| s.generated > r) {
                s.first_answer = Some(now);
            }
            // the call is the answer: its name comes with the first token past any thinking
            if s.first_tool_call.is_none()
                && s.req.tool_call.is_some()
                && s.generated > s.req.reasoning_tokens.unwrap_or(0)
            {
                s.first_tool_call = Some(now);
            }
            if self.books.trace.is_some() {
                s.emissions.push((now, k));
            }
            self.publish_decode_blocks(i);
            let s = &mut self.running[i];
            let finish = (s.generated >= s.req.max_tokens).then_some(s.req.end_reason);
            self.books.outbox.push((s.req.events.clone(), Event::Tokens { n: k, at: deadline, finish }));
            if let Some(reason) = finish {
                self.books.finish(&mut self.running[i], reason, now);
            }
            i += 1;
        }
        self.books.stats.generation_tokens_total += emitted;
        emitted
    }

    /// Tokens a sequence's step emits, and the draft tokens it verified with speculative decoding on:
    /// a decode step (not the first token, which the prefill makes) emits 1 + the accepted drafts.
    fn step_tokens(&self, s: &Seq) -> (u32, Option<u32>) {
        let left = s.req.max_tokens - s.generated;
        match self.p.speculative {
            // accepted beyond max_tokens would never be streamed: counted as not drafted
            Some(spec) if matches!(s.phase, Phase::Decode) => {
                (1 + spec.accepted(s.req.id, u64::from(s.drafts)).min(left - 1), Some(spec.draft_tokens))
            }
            _ => (s.req.tokens_per_step.min(left), None),
        }
    }

    /// Frees `grow` blocks for running[i] by preempting the most recently admitted sequences.
    /// False when running[i] itself had to be preempted.
    fn make_room(&mut self, i: usize, grow: u64) -> bool {
        while !self.books.kv.alloc(grow) {
            let victim_is_self = self.running.len() - 1 == i;
            let mut v = self.running.pop().expect("running is not empty");
            self.books.release_kv(&mut v);
            v.phase = Phase::Waiting;
            self.books.stats.preemptions_total += 1;
            self.waiting.push_front(v);
            if victim_is_self {
                return false;
            }
        }
        true
    }

    fn publish_prompt_blocks(&mut self, i: usize) {
        let s = &mut self.running[i];
        for &h in &s.req.block_hashes[s.held.len()..] {
            if s.private_blocks == 0 || !self.books.kv.publish(h) {
                break;
            }
            s.private_blocks -= 1;
            s.held.push(h);
        }
    }

    /// Publishes the blocks decoding has filled, as vLLM caches every full block and not only the
    /// prompt's: a later turn that sends this answer back finds them. Only after every prompt block
    /// is in the cache (the chain must be whole), and only blocks the sequence has filled: prompt,
    /// the template's separator and the tokens generated so far.
    fn publish_decode_blocks(&mut self, i: usize) {
        let bs = self.p.block_size;
        let s = &mut self.running[i];
        let prompt_blocks = s.req.block_hashes.len();
        if s.held.len() < prompt_blocks {
            return;
        }
        let filled = s.len() + u64::from(s.req.answer_offset);
        while let Some(&h) = s.req.decode_hashes.get(s.held.len() - prompt_blocks) {
            if (s.held.len() as u64 + 1) * bs > filled || s.private_blocks == 0 || !self.books.kv.publish(h) {
                break;
            }
            s.private_blocks -= 1;
            s.held.push(h);
        }
    }

    fn publish_stats(&mut self, now: f64) {
        let (t0, n0) = self.throughput_mark;
        if now - t0 >= 1.0 {
            self.books.stats.gen_throughput = (self.books.stats.generation_tokens_total - n0) as f64 / (now - t0);
            self.throughput_mark = (now, self.books.stats.generation_tokens_total);
        }
        if let Some(gpu) = &self.p.gpu {
            // the batch that ran until now is the one published last; the counter must not run
            // backwards on the scheduled (not wall) times some callers pass
            let s = &mut self.books.stats;
            s.energy = s.energy.at(gpu, s.running, self.clock.now());
        }
        self.books.stats.running = self.running.len() as u64;
        self.books.stats.waiting = self.waiting.len() as u64;
        self.books.stats.kv_used_blocks = self.books.kv.in_use();
        if let Ok(mut out) = self.stats_out.lock() {
            *out = self.books.stats;
        }
    }
}

/// KV, counters and the trace: what finishing a request touches, apart from the run queues.
struct Books {
    kv: KvCache,
    stats: EngineStats,
    trace: Option<Sender<TraceRecord>>,
    /// The profile's noise settings, recorded with every request when noise or drift is on.
    trace_noise: Option<crate::noise::Noise>,
    /// Whether speculative decoding is on: each request's record then carries its drafts and accepted.
    trace_spec: bool,
    /// Events of the current step, handed to the dispatcher task in one batch: waking a thousand
    /// tokio tasks from this thread would contend on the runtime's injection queue every step.
    outbox: Batch,
    dispatch: tokio::sync::mpsc::UnboundedSender<Batch>,
    /// Emptied batches coming back from the dispatcher, reused to keep the step loop allocation-free.
    spare: Receiver<Batch>,
}

impl Books {
    fn flush(&mut self) {
        if self.outbox.is_empty() {
            return;
        }
        let next = self.spare.try_recv().unwrap_or_default();
        let batch = std::mem::replace(&mut self.outbox, next);
        let _ = self.dispatch.send(batch);
    }

    fn release_kv(&mut self, s: &mut Seq) {
        self.kv.release(&s.held);
        s.held.clear();
        self.kv.free(s.private_blocks);
        s.private_blocks = 0;
    }

    /// Frees the request's KV, tells its stream (aborts only; a normal end rode on the last
    /// emission), counts it and hands its record to the trace writer.
    fn finish(&mut self, s: &mut Seq, reason: FinishReason, now: f64) {
        self.release_kv(s);
        s.finished = Some(reason);
        match reason {
            FinishReason::Length => self.stats.finished_length += 1,
            FinishReason::Stop => self.stats.finished_stop += 1,
            FinishReason::Abort | FinishReason::Disconnect => {
                self.stats.finished_abort += 1;
                self.outbox.push((s.req.events.clone(), Event::Finished { reason }));
            }
        }
        if let Some(trace) = &self.trace {
            let _ = trace.send(TraceRecord {
                id: s.req.id,
                arrival: s.req.arrival,
                admitted: s.admitted,
                first_token: s.first_token,
                end: now,
                prompt_tokens: s.req.prompt_tokens,
                cached_tokens: s.cached_tokens,
                completion_tokens: s.generated,
                finish: reason.as_str(),
                emissions: std::mem::take(&mut s.emissions),
                noise: self.trace_noise,
                spec: self.trace_spec.then_some(crate::trace::SpecTruth { drafts: s.drafts, accepted: s.accepted }),
                reasoning: s.req.reasoning_tokens.map(|r| crate::trace::ReasoningTruth {
                    reasoning_tokens: r.min(s.generated),
                    first_answer: s.first_answer,
                }),
                tools: s.req.tool_call.map(|plan| {
                    let tokens = s.generated.saturating_sub(s.req.reasoning_tokens.unwrap_or(0));
                    crate::trace::ToolTruth {
                        first_tool_call: s.first_tool_call,
                        tool_call_tokens: tokens,
                        tool_args_valid: (tokens > 0).then(|| plan.valid_after(tokens)),
                    }
                }),
            });
        }
    }
}

/// Best effort: real-time scheduling (SCHED_FIFO, lowest priority) for the step thread, else nice −10,
/// so that a busy machine does not delay its wake-ups. Both need CAP_SYS_NICE; without it the thread
/// keeps the default priority. The thread sleeps most of each step and spins only briefly, and the
/// kernel's RT throttling bounds it anyway, so it cannot starve the rest. Returns whether it got RT.
fn raise_priority() -> bool {
    #[cfg(target_os = "linux")]
    {
        if std::env::var_os("SPEEDMATRIX_SIM_NO_RT").is_none() {
            let param = libc::sched_param { sched_priority: 1 };
            // SAFETY: `param` outlives the call; pid 0 means the calling thread.
            if unsafe { libc::sched_setscheduler(0, libc::SCHED_FIFO, &param) } == 0 {
                return true;
            }
        }
        // SAFETY: plain syscalls about the calling thread, no pointers involved.
        unsafe {
            let tid = libc::syscall(libc::SYS_gettid) as libc::id_t;
            libc::setpriority(libc::PRIO_PROCESS, tid, -10);
        }
    }
    false
}
