//! Sending a schedule of requests, in one process or shared out over the ranks (docs/distributed.md):
//! a rate level (methodology §13.1) and a burst (§13.2, every request due at once) both go through
//! [`Runner::send_schedule`], with the server's gauges and the GPUs read through it.

use std::time::{Duration, Instant};

use sm_core::ranks::RankLevel;

use super::super::Runner;
use crate::ranks::{LevelOrder, RemoteLevel, merge_level, share};
use crate::runner::phases::bodies::Bodies;
use crate::runner::phases::open_loop::{LevelRun, Part, Ran, Sent};
use crate::telemetry::Reads;

/// What to send: request `i` is due `due[i]` seconds after the start, with body `i` (in turn).
pub(super) struct Schedule<'a> {
    pub bodies: Bodies,
    pub due: &'a [f64],
    /// `--max-concurrency`, over all ranks.
    pub cap: Option<u32>,
    /// `--drain-max`: the longest wait after the last due time; `None` reads every request to its end.
    pub drain_max: Option<Duration>,
}

/// A schedule sent: every request (every rank's, in due order) with the start they count from.
pub(super) struct SentSchedule {
    pub start: Instant,
    pub requests: Vec<Sent>,
    /// Each rank's part; empty in one process.
    pub ranks: Vec<RankLevel>,
    /// The wait after the last due time at which this process cut requests still running.
    pub cut_after: Option<Duration>,
    /// The server's gauges and the GPUs through it.
    pub reads: Reads,
}

impl Runner<'_> {
    /// Sends `s`: this process's part and, with ranks, every worker's from the same instant (after
    /// each is ready). `Ok(None)` when the user stopped it; `Err` when the ranks could not take it
    /// or a worker was lost (a schedule is never sent at less than its rate).
    pub(super) async fn send_schedule(&self, s: Schedule<'_>) -> Result<Option<SentSchedule>, String> {
        let path = self.spec(1, true).path();
        let remote = self.remote_part(&s, path).await?;
        let group = self.start.ranks.as_deref();
        let part = group.map_or(Part::ALL, |g| Part { rank: 0, ranks: g.ranks() as usize });
        let run = LevelRun {
            client: &self.client,
            path,
            bodies: s.bodies,
            due: s.due,
            part,
            max_concurrency: s.cap.map(|c| share(c, part.ranks as u32, 0)),
            drain_max: s.drain_max,
            timeouts: self.settings.timing.stream_timeouts(),
        };
        let target = self.target();
        // the samplers' first reads before the first request: the server's counters over the
        // schedule then hold all of its tokens (methodology §14)
        let mut sampling = self.sources(&target).start(Instant::now());
        sampling.first_taken().await;
        if let Some(r) = &remote {
            r.open();
        }
        let ran = run.run(self.controls.stop_now.clone()).await;
        let reads = sampling.stop().await;
        match (ran, remote.zip(group)) {
            (Ran::Done { start, requests, cut_after }, None) => {
                Ok(Some(SentSchedule { start, requests, ranks: Vec::new(), reads, cut_after }))
            }
            (Ran::Done { start, requests, cut_after }, Some((r, group))) => {
                let (requests, ranks) = merge_level(requests, r.finish(group).await?, start);
                Ok(Some(SentSchedule { start, requests, ranks, reads, cut_after }))
            }
            (Ran::Stopped, remote) => {
                if let Some((r, group)) = remote {
                    r.close();
                    let _ = r.finish(group).await;
                }
                Ok(None)
            }
        }
    }

    /// With ranks, every worker's part of `s`, ready to open; `None` without. Each worker is sent
    /// the whole schedule and takes every N-th request; the cap is shared out as a cell's streams.
    async fn remote_part(&self, s: &Schedule<'_>, path: &str) -> Result<Option<RemoteLevel>, String> {
        let Some(group) = &self.start.ranks else { return Ok(None) };
        let timeouts = self.settings.timing.stream_timeouts();
        let Some(listed) = s.bodies.listed() else {
            return Err("a replayed trace is sent from one process: run it without --ranks".to_string());
        };
        let bodies = listed.iter().map(|b| serde_json::from_slice(b.as_bytes()).map_err(|e| e.to_string()));
        let order = LevelOrder {
            path: path.to_string(),
            bodies: bodies.collect::<Result<_, _>>()?,
            due: s.due.to_vec(),
            max_concurrency: None,
            drain_max_ms: s.drain_max.map(|g| g.as_millis() as u64),
            first_token_timeout_ms: timeouts.first_token.as_millis() as u64,
            stall_timeout_ms: timeouts.stall.as_millis() as u64,
            abort_request: self.client.aborts_on_cancel(),
        };
        RemoteLevel::start(group, order, s.cap).await.map(Some)
    }
}
