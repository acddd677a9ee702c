//! Runs one level open-loop (methodology §13.1): every request is sent at its due time (or as soon
//! as a slot under the cap frees), whatever the server is doing; the level ends when every request
//! has ended, or when its own wait after the last due time ([`crate::runner::phases::drain`]) runs out and the client
//! cuts the rest. A burst (§13.2) is a level whose requests are all due at its start, read to
//! their ends.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use sm_client::http::{Client, JsonBody};
use tokio::sync::{Notify, OwnedSemaphorePermit, Semaphore, watch};
use tokio::task::JoinSet;
use tokio::time::sleep_until;

use crate::runner::phases::bodies::Bodies;
use crate::runner::phases::drain::{self, MIN_DRAIN, Progress, Stamp};
use crate::stream::live::Cancel;
use crate::stream::request::{Outcome, StreamTimeouts, stream_request};
use crate::stream::request_log::RequestLog;

/// How often a level waiting for its last requests looks at them again.
const DRAIN_TICK: Duration = Duration::from_millis(100);

/// How a request of a level ended (tagged as it travels between ranks).
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(tag = "end", content = "reason", rename_all = "snake_case")]
pub enum End {
    Completed,
    Failed(String),
    /// Failed at the connection (refused, reset): the server may be gone.
    Lost(String),
    /// Sent, then cut by the client: the level's wait after its last due time ran out.
    Cancelled,
    /// Never sent: the level's wait ran out while it waited for a slot under the cap.
    Unsent,
}

/// One request of a level.
#[derive(Debug, Clone)]
pub struct Sent {
    /// When the schedule made it due.
    pub due: Instant,
    /// What it saw; `None` when it was never sent.
    pub log: Option<RequestLog>,
    pub end: End,
    /// When the client stopped waiting on it (its end, failure or cancel); `None` if never sent.
    pub over: Option<Instant>,
}

impl Sent {
    pub(crate) fn completed(&self) -> Option<&RequestLog> {
        self.log.as_ref().filter(|_| self.end == End::Completed)
    }
}

/// What a level sends, and when.
pub struct LevelRun<'a> {
    pub client: &'a Client,
    pub path: &'static str,
    /// The bodies: sent in turn (one for a synthetic prompt; the file's lines with `--prompts`),
    /// or one per request (a replayed trace).
    pub bodies: Bodies,
    /// The level's due times, seconds after its start, ascending: the whole schedule, of which
    /// this process sends its `part`.
    pub due: &'a [f64],
    pub part: Part,
    /// The most in flight in this process (over ranks: its share of `--max-concurrency`).
    pub max_concurrency: Option<u32>,
    /// `--drain-max`: the longest the level waits after its last due time (its own bound ends the
    /// wait sooner); `None` waits for every request to end (a burst).
    pub drain_max: Option<Duration>,
    pub timeouts: StreamTimeouts,
}

/// The requests of a level's schedule one process sends: every `ranks`-th from `rank`, so that
/// the ranks' sends together are the schedule (docs/distributed.md). Request `i` of the schedule
/// sends body `i` (in turn), on whichever rank.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Part {
    pub rank: usize,
    pub ranks: usize,
}

impl Part {
    /// The whole schedule, in one process.
    pub const ALL: Part = Part { rank: 0, ranks: 1 };

    /// The indices of `due` that are this part's.
    pub fn of(self, due: &[f64]) -> impl Iterator<Item = usize> + '_ {
        (self.rank..due.len()).step_by(self.ranks.max(1))
    }
}

/// How a level ended.
pub enum Ran {
    /// Every request, in due order, with the level's start; `cut_after` is the wait after the last
    /// due time at which the client cut the requests still running (`None`: none was cut).
    Done { start: Instant, requests: Vec<Sent>, cut_after: Option<Duration> },
    /// Stopped (Ctrl-C): the level is dropped.
    Stopped,
}

impl LevelRun<'_> {
    pub async fn run(&self, mut stop: watch::Receiver<bool>) -> Ran {
        let start = Instant::now();
        let mine: Vec<usize> = self.part.of(self.due).collect();
        // one cancel channel per request, not one for all: each polls its own after every chunk
        let (cancel, receivers) = Cancel::new(mine.len());
        let mut receivers = receivers.into_iter();
        let progress: Arc<[Progress]> = (0..mine.len()).map(|_| Progress::default()).collect();
        // the drain flips `over` when the level's wait runs out (never for a burst) or on a stop
        let (over_tx, mut over) = watch::channel(false);
        let watcher = tokio::spawn(self.watch(start, &mine, progress.clone(), stop.clone(), over_tx));
        let slots = self.max_concurrency.map(|c| Arc::new(Semaphore::new(c as usize)));
        // a session's turn waits for its previous turn's end (only in one process: the ranks
        // refuse bodies with turns)
        let ends: Option<Arc<[Notify]>> =
            self.bodies.has_turns().then(|| (0..self.due.len()).map(|_| Notify::new()).collect());
        let mut tasks = Running::new(start, mine.len());
        let mut unsent = Vec::new();
        for (k, &i) in mine.iter().enumerate() {
            let due = start + Duration::from_secs_f64(self.due[i]);
            // made before its due time, not after: a trace's prompt takes a moment to write
            let body = self.bodies.body(i);
            let slot = tokio::select! {
                biased;
                _ = stop.wait_for(|v| *v) => {
                    cancel.cancel();
                    watcher.abort();
                    // each request ends on its cancel, as it would on its own
                    tasks.set.detach_all();
                    return Ran::Stopped;
                }
                _ = over.wait_for(|v| *v) => {
                    unsent.extend(mine[k..].iter().map(|&j| start + Duration::from_secs_f64(self.due[j])));
                    break;
                }
                slot = take_slot(due, slots.clone()) => slot,
            };
            let client = self.client.clone();
            let (path, timeouts) = (self.path, self.timeouts);
            let Some(cancel_rx) = receivers.next() else { break };
            let turns = ends.clone().map(|ends| Turns { ends, own: i, after: self.bodies.after(i) });
            let request = One { client, path, body, due, timeouts, origin: start, turns };
            tasks.spawn(request.run(cancel_rx, slot, progress.clone(), k));
        }
        // the drain's end, or a stop, cuts whatever is still running
        let mut over_copy = over.clone();
        let canceller = tokio::spawn(async move {
            let _ = over_copy.wait_for(|v| *v).await;
            cancel.cancel();
        });
        let mut requests = tasks.all().await;
        canceller.abort();
        watcher.abort();
        let cut_after = watcher.await.ok().flatten();
        if *stop.borrow_and_update() {
            return Ran::Stopped;
        }
        requests.extend(unsent.into_iter().map(|due| Sent { due, log: None, end: End::Unsent, over: None }));
        let cut = requests.iter().any(|r| matches!(r.end, End::Cancelled | End::Unsent));
        Ran::Done { start, requests, cut_after: cut_after.filter(|_| cut) }
    }

    /// The level's watcher: after the last due time it keeps the level's own bound up to date
    /// from what the requests show, and when the bound runs out (or on a stop) flips `over`,
    /// returning the wait after the last due time at which it did. Without a drain it only
    /// passes a stop on.
    fn watch(
        &self,
        start: Instant,
        mine: &[usize],
        progress: Arc<[Progress]>,
        mut stop: watch::Receiver<bool>,
        over: watch::Sender<bool>,
    ) -> impl std::future::Future<Output = Option<Duration>> + Send + 'static {
        // the whole schedule's last due time: every rank waits from the same instant
        let last = Duration::from_secs_f64(self.due.last().copied().unwrap_or(0.0));
        let due: Vec<f64> = mine.iter().map(|&i| self.due[i]).collect();
        let (max, most) = (self.drain_max, self.bodies.most_tokens().unwrap_or(1));
        async move {
            let wait = async {
                // without a drain (a burst) every request is read to its end: only a stop cuts
                let Some(max) = max else { return std::future::pending().await };
                // the bound is never shorter than its floor: nothing to look at before it
                sleep_until(tokio::time::Instant::from_std(start + last + MIN_DRAIN.min(max))).await;
                loop {
                    let shown: Vec<drain::Shown> = progress.iter().zip(&due).map(|(p, &d)| p.shown(d)).collect();
                    let bound = drain::bound(&shown, most, max);
                    let ends = start + last + bound;
                    let now = Instant::now();
                    if now >= ends {
                        return Some(bound);
                    }
                    sleep_until(tokio::time::Instant::from_std(now + DRAIN_TICK.min(ends - now))).await;
                }
            };
            let cut = tokio::select! {
                cut = wait => cut,
                _ = stop.wait_for(|v| *v) => None,
            };
            let _ = over.send(true);
            cut
        }
    }
}

/// The requests of a level in flight, each taken back as soon as it has ended: a task that ended
/// holds its memory (its request, its stream's state) until taken, and a level of a long trace
/// sends hundreds of thousands.
struct Running {
    set: JoinSet<Sent>,
    /// Each task's place in the level's requests.
    place: HashMap<tokio::task::Id, usize>,
    ended: Vec<Option<Sent>>,
    start: Instant,
}

impl Running {
    fn new(start: Instant, requests: usize) -> Running {
        Running {
            set: JoinSet::new(),
            place: HashMap::with_capacity(requests),
            ended: Vec::with_capacity(requests),
            start,
        }
    }

    fn spawn(&mut self, request: impl std::future::Future<Output = Sent> + Send + 'static) {
        let id = self.set.spawn(request).id();
        self.place.insert(id, self.ended.len());
        self.ended.push(None);
        while let Some(ended) = self.set.try_join_next_with_id() {
            self.keep(ended);
        }
    }

    fn keep(&mut self, ended: Result<(tokio::task::Id, Sent), tokio::task::JoinError>) {
        let (id, sent) = match ended {
            Ok(done) => done,
            Err(e) => (e.id(), Sent { due: self.start, log: None, end: End::Failed(e.to_string()), over: None }),
        };
        if let Some(k) = self.place.remove(&id) {
            self.ended[k] = Some(sent);
        }
    }

    /// Every request, in the order sent, once all have ended.
    async fn all(mut self) -> Vec<Sent> {
        while let Some(ended) = self.set.join_next_with_id().await {
            self.keep(ended);
        }
        let start = self.start;
        let lost =
            || Sent { due: start, log: None, end: End::Failed("the request's task was lost".into()), over: None };
        self.ended.into_iter().map(|s| s.unwrap_or_else(lost)).collect()
    }
}

/// Waits for the due time, then for a slot under the cap (FIFO: the dispatcher asks in due order).
async fn take_slot(due: Instant, slots: Option<Arc<Semaphore>>) -> Option<OwnedSemaphorePermit> {
    // a due time already passed (a burst's, or a dispatcher behind) is not waited for: the timer
    // would hold it to the driver's next millisecond tick
    if due > Instant::now() {
        sleep_until(tokio::time::Instant::from_std(due)).await;
    }
    match slots {
        // the semaphore is never closed
        Some(s) => s.acquire_owned().await.ok(),
        None => None,
    }
}

/// One request of a level, ready to stream.
struct One {
    client: Client,
    path: &'static str,
    body: JsonBody,
    due: Instant,
    timeouts: StreamTimeouts,
    /// The level's start, which its progress is stamped from.
    origin: Instant,
    /// With a session's turns: whose end it waits for, and its own end to signal.
    turns: Option<Turns>,
}

/// Each request's end, signalled to the turn after it (one waiter each: a stored permit covers a
/// turn that begins to wait after its previous turn ended).
struct Turns {
    ends: Arc<[Notify]>,
    own: usize,
    after: Option<usize>,
}

impl Drop for Turns {
    fn drop(&mut self) {
        // on every way out of the request, its end included
        self.ends[self.own].notify_one();
    }
}

impl One {
    /// Streams the request, stamping `progress[k]`; the slot is held until it ends.
    async fn run(
        self,
        mut cancel: watch::Receiver<bool>,
        slot: Option<OwnedSemaphorePermit>,
        progress: Arc<[Progress]>,
        k: usize,
    ) -> Sent {
        let mut due = self.due;
        if let Some(t) = &self.turns
            && let Some(before) = t.after
        {
            tokio::select! {
                _ = t.ends[before].notified() => {}
                // the level's wait ran out (or a stop) before the previous turn ended
                _ = cancel.wait_for(|v| *v) => return Sent { due, log: None, end: End::Unsent, over: None },
            }
            // its user sends it when the trace says, or when the answer it follows came
            due = due.max(Instant::now());
        }
        let stamp = Stamp { progress: &progress[k], origin: self.origin };
        let run = stream_request(&self.client, self.path, &self.body, self.timeouts, &mut cancel, &stamp).await;
        let over = Instant::now();
        drop(slot);
        let end = match run.outcome {
            Outcome::Completed => End::Completed,
            Outcome::Cancelled => End::Cancelled,
            Outcome::Failed(why) => End::Failed(why),
            Outcome::Lost(why) => End::Lost(why),
            Outcome::Loop(f) => End::Failed(format!(
                "the output repeated itself ({} characters in a period of {}): the stream was stopped",
                f.repeated_chars, f.period_chars
            )),
        };
        let mut log = run.log;
        log.id = run.id;
        if let End::Failed(why) | End::Lost(why) = &end {
            log.failure = Some(why.clone());
        }
        let over = match end {
            End::Completed => log.ended.unwrap_or(over),
            _ => over,
        };
        Sent { due, log: Some(log), end, over: Some(over) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_parts_of_a_schedule_are_all_of_it_once() {
        let due: Vec<f64> = (0..10).map(f64::from).collect();
        assert_eq!(Part::ALL.of(&due).collect::<Vec<_>>(), (0..10).collect::<Vec<_>>());
        for ranks in 1..5 {
            let mut all: Vec<usize> = (0..ranks).flat_map(|rank| Part { rank, ranks }.of(&due)).collect();
            all.sort();
            assert_eq!(all, (0..10).collect::<Vec<_>>(), "{ranks} ranks");
        }
        assert_eq!(Part { rank: 1, ranks: 3 }.of(&due).collect::<Vec<_>>(), [1, 4, 7]);
        // more ranks than requests: the last ones send nothing
        assert_eq!(Part { rank: 4, ranks: 5 }.of(&due[..3]).count(), 0);
    }
}
