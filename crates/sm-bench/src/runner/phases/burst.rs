//! Issue 17 §2 bursts (methodology §13.2): for each context × concurrency of the plan, C requests
//! due at the same instant, each read to its end, then a drain before the next burst. Every burst
//! is written as it finishes; one the user stopped is not, and a resume sends it again.

pub(crate) mod figures;

use std::sync::Arc;
use std::time::Instant;

use serde_json::Value;
use sm_client::JsonBody;
use sm_client::openai::RequestSpec;
use sm_core::phases::PhaseKind;
use sm_core::phases::answers::{ThinkingFigures, ToolCallFigures};
use sm_core::phases::burst::{Burst, BurstPhase};
use sm_core::plan::Plan;
use sm_core::record::{CellStatus, Percentiles, RunStatus};
use sm_core::requests::{RequestLine, RequestPhase, RequestStatus, round_s};

use super::super::prompts::Prompts;
use super::super::server_lost::{Seen, lost_reason};
use super::super::{RunError, Runner, round1, round3};
use super::send::{Schedule, SentSchedule};
use crate::cell::lost_before;
use crate::cell::server::{DrainError, IDLE_FOR, drain};
use crate::runner::phases::answers;
use crate::runner::phases::burst::figures::{BurstRequest, figures};
use crate::runner::phases::open_loop::End;
use crate::runner::progress::{RunEvent, Step};
use crate::stream::request::{Outcome, RequestRun};
use crate::stream::request_log::RequestLog;
use crate::stream::tokens::answer_fields;
use crate::telemetry::{Reads, Received};

/// The burst phase's settings; contexts, concurrencies, `max_tokens` and `ignore_eos` are the run's.
#[derive(Debug, Clone, PartialEq)]
pub struct BurstConfig {
    /// How many times each burst is sent (`--burst-rounds`, at least 1).
    pub rounds: u32,
    /// Whether the requests ask the server to ignore end-of-sequence (`--no-ignore-eos` clears it,
    /// for this phase only: the decode matrix always ignores it).
    pub ignore_eos: bool,
}

/// A burst as sent: its record, its `requests.jsonl` lines and what it saw of the server.
type Sent = (Burst, Vec<RequestLine>, Seen);

/// One burst to send: where its prompts come from, and which round of its cell it is.
struct Planned {
    context: Option<u64>,
    label: String,
    concurrency: u32,
    round: u32,
    over_capacity: Option<String>,
    /// With `--prompts`: the file's line the first request takes (the others take the next ones).
    file_offset: usize,
}

/// The bursts in the order sent: the plan's cells (each round after the other), or one cell per
/// concurrency when the prompts come from a file (its prompts have their own lengths).
fn planned(plan: &Plan, concurrency: &[u32], from_file: bool, rounds: u32) -> Vec<Planned> {
    let cells: Vec<(Option<u64>, String, u32, Option<String>)> = if from_file {
        concurrency.iter().map(|&c| (None, "file".to_string(), c, None)).collect()
    } else {
        plan.cells
            .iter()
            .map(|c| (Some(c.context.0), c.label.clone(), c.concurrency, c.over_capacity.clone()))
            .collect()
    };
    let mut out = Vec::new();
    let mut offset = 0;
    for (context, label, concurrency, over_capacity) in cells {
        // an over-capacity cell is written once, not once per round
        let rounds = if over_capacity.is_some() { 1 } else { rounds.max(1) };
        for round in 1..=rounds {
            out.push(Planned {
                context,
                label: label.clone(),
                concurrency,
                round,
                over_capacity: over_capacity.clone(),
                file_offset: offset,
            });
            offset += concurrency as usize;
        }
    }
    out
}

impl Runner<'_> {
    /// The phase's section with this run's settings (a resumed run's bursts kept).
    pub(in crate::runner) fn declare_burst(&mut self, config: &BurstConfig) -> &mut BurstPhase {
        let max_tokens = self.settings.max_tokens.0;
        self.record.phases.burst.get_or_insert_with(|| BurstPhase {
            max_tokens,
            ignore_eos: config.ignore_eos,
            rounds: config.rounds,
            imported_from: None,
            bursts: Vec::new(),
        })
    }

    pub(in crate::runner) async fn burst_phase(
        &mut self,
        plan: &Plan,
        prompts: &Prompts,
    ) -> Result<Option<RunStatus>, RunError> {
        let Some(config) = self.settings.phases.burst.clone() else { return Ok(None) };
        let from_file = self.settings.phases.prompts_file.is_some();
        let retry_failed = self.start.retry_failed;
        let phase = self.declare_burst(&config);
        // `--resume --retry-failed`: a burst that failed is sent again, as a failed cell is measured again
        if retry_failed {
            phase.bursts.retain(|b| b.status != CellStatus::Error);
        }
        for step in planned(plan, &self.settings.concurrency, from_file, config.rounds) {
            if self.recorded(&step) {
                continue;
            }
            if self.halted() {
                return Ok(Some(RunStatus::Interrupted));
            }
            let (burst, lines, seen) = match &step.over_capacity {
                Some(reason) => (over_capacity(&step, reason), Vec::new(), Seen::Fine),
                None => match self.burst_bodies(&step, prompts) {
                    Ok(bodies) => match self.send_burst(&step, bodies).await {
                        Some(sent) => sent,
                        None => return Ok(Some(RunStatus::Interrupted)),
                    },
                    Err(reason) => (failed(&step, reason), Vec::new(), Seen::Fine),
                },
            };
            let write = |r: &mut Self, lost: bool| {
                let mut burst = burst;
                // a burst that found the server gone before it began says so already
                if lost && seen != Seen::Gone {
                    burst.reason = burst.reason.as_deref().map(lost_reason);
                }
                r.finish_burst(burst)?;
                // after run.json: a crash between the two loses the burst's lines, never repeats them
                Ok(r.save_requests(&lines)?)
            };
            if let Some(status) = self.unit_done(seen, write).await? {
                return Ok(Some(status));
            }
        }
        Ok(None)
    }

    fn recorded(&self, step: &Planned) -> bool {
        self.record.phases.burst.as_ref().is_some_and(|p| {
            p.bursts
                .iter()
                .any(|b| b.context == step.context && b.concurrency == step.concurrency && b.round == step.round)
        })
    }

    /// The bodies of the burst's requests, sent in turn: the context's prompt once (every request
    /// sends it), or C lines of the file in order, each with its own `max_tokens` where it has one.
    /// One body, not C copies: over ranks every worker is sent them.
    fn burst_bodies(&self, step: &Planned, prompts: &Prompts) -> Result<Vec<JsonBody>, String> {
        let max_tokens = self.settings.max_tokens.0;
        let ignore_eos = self.settings.phases.burst.as_ref().is_none_or(|c| c.ignore_eos);
        let spec = |max_tokens| RequestSpec { ignore_eos, ..self.spec(max_tokens, true) };
        if let Some(file) = &self.settings.phases.prompts_file {
            return Ok((0..step.concurrency as usize)
                .map(|i| {
                    let line = file.get(step.file_offset + i);
                    JsonBody::new(&spec(line.max_tokens.unwrap_or(max_tokens)).body(&line.prompt))
                })
                .collect());
        }
        let ctx = sm_core::Tokens(step.context.unwrap_or(0));
        let prompt = prompts.get(ctx)?;
        let body: Value = spec(max_tokens).body(&prompt);
        Ok(vec![JsonBody::new(&body)])
    }

    /// Sends one burst after the server is idle and reads every request to its end: the burst, its
    /// `requests.jsonl` lines and what it saw of the server. `None` when the user stopped the run
    /// meanwhile: the burst is dropped, and a resume sends it again.
    async fn send_burst(&mut self, step: &Planned, bodies: Vec<JsonBody>) -> Option<Sent> {
        let target = self.target();
        if target.metrics {
            match drain(&target, self.settings.timing.drain_timeout, IDLE_FOR).await {
                Ok(()) => {}
                Err(DrainError::Unreachable) => {
                    return Some((failed(step, lost_before("burst")), Vec::new(), Seen::Gone));
                }
                Err(e) => return Some((failed(step, format!("before the burst: {e}")), Vec::new(), Seen::Failures)),
            }
        } else {
            tokio::time::sleep(self.settings.idle_gap).await;
        }
        if self.stopped() {
            return None;
        }
        let what = what(step, self.settings.phases.burst.as_ref().map_or(1, |c| c.rounds));
        self.reporter.step(&Step::Phase { kind: PhaseKind::Burst, what, started: Instant::now(), length: None });
        // every request is due at the start: the figures count from that instant, so the time the
        // client takes to send all C (every rank's part, over ranks) is part of each latency
        let due = vec![0.0; step.concurrency as usize];
        let bodies: Arc<[JsonBody]> = bodies.into();
        let sent =
            match self.send_schedule(Schedule { bodies: bodies.into(), due: &due, cap: None, drain_max: None }).await {
                Ok(Some(sent)) => sent,
                Ok(None) => return None,
                Err(why) => return Some((failed(step, why), Vec::new(), Seen::Fine)),
            };
        if self.stopped() {
            return None;
        }
        let SentSchedule { start: scheduled, requests, ranks, reads, .. } = sent;
        let runs: Vec<RequestRun> = requests.into_iter().map(request_run).collect();
        // a lost connection: the server may have gone away (asked before the burst is written)
        let seen = Seen::failures_if(runs.iter().any(|r| matches!(r.outcome, Outcome::Lost(_))));
        let lines = burst_lines(step, scheduled, &runs, self.t0);
        let mut burst = self.burst_record(step, scheduled, &runs);
        burst_telemetry(&mut burst, &reads);
        burst.ranks = ranks;
        Some((burst, lines, seen))
    }

    fn burst_record(&self, step: &Planned, scheduled: Instant, runs: &[RequestRun]) -> Burst {
        let requests: Vec<BurstRequest> = runs.iter().map(burst_request).collect();
        let f = figures(scheduled, &requests);
        // as its e2e figures: the completed requests, from the burst's scheduled instant
        let completed = runs.iter().filter(|r| r.outcome == Outcome::Completed).map(|r| (scheduled, &r.log));
        let (thinking, tool_calls) = answers::figures(completed);
        let first_failure = runs.iter().find_map(|r| failure(&r.outcome));
        let reason =
            first_failure.map(|why| format!("{} of {} requests failed; the first: {why}", f.failed, runs.len()));
        Burst {
            status: if reason.is_some() { CellStatus::Error } else { CellStatus::Valid },
            reason,
            requests: runs.len() as u64,
            completed: f.completed,
            failed: f.failed,
            scheduled_s: Some(round3(scheduled.saturating_duration_since(self.t0).as_secs_f64())),
            e2e_ms: f.e2e_ms.map(|s| Percentiles::from(s).map(round3)).unwrap_or_default(),
            last_completion_ms: f.last_completion_ms.map(round3),
            ttft_ms: f.ttft_ms.map(|s| Percentiles::from(s).map(round3)).unwrap_or_default(),
            output_tokens: f.output_tokens,
            total_tok_s: f.total_tok_s.map(round1),
            send_spread_ms: f.send_spread_ms.map(round3),
            thinking: ThinkingFigures { ttfa_ms: thinking.ttfa_ms.map(|p| p.map(round3)), ..thinking },
            tool_calls: ToolCallFigures { ttftc_ms: tool_calls.ttftc_ms.map(|p| p.map(round3)), ..tool_calls },
            ..base(step)
        }
    }

    /// Writes the burst into the record and run.json, and tells the listener.
    fn finish_burst(&mut self, burst: Burst) -> std::io::Result<()> {
        let what = format!("{} × {}", burst.label, burst.concurrency);
        self.event(match (burst.status, burst.e2e_ms.p50, burst.last_completion_ms) {
            (CellStatus::Valid, Some(e2e_p50_ms), Some(last_ms)) => {
                RunEvent::BurstDone { what, e2e_p50_ms, last_ms, tok_s: burst.total_tok_s.unwrap_or(0.0) }
            }
            (status, ..) => RunEvent::BurstEnded { what, status, reason: burst.reason.clone().unwrap_or_default() },
        });
        if let Some(phase) = self.record.phases.burst.as_mut() {
            phase.bursts.push(burst);
        }
        self.journal.write(&self.record)
    }
}

/// A valid burst's telemetry over its span (scheduled time to last completion): the server's tok/s
/// set against the burst's total tok/s, J/token over its output tokens.
fn burst_telemetry(burst: &mut Burst, reads: &Reads) {
    let Some(span_ms) = burst.last_completion_ms.filter(|_| burst.status == CellStatus::Valid) else { return };
    let span = std::time::Duration::from_secs_f64(span_ms / 1000.0);
    let (mut telemetry, warnings) =
        reads.figures(span, burst.output_tokens.map(Received::All), burst.output_tokens.unwrap_or(0));
    // to the decimals a decode cell's are kept to
    telemetry.gpu = telemetry.gpu.map(crate::runner::cell_record::rounded_gpu);
    burst.telemetry = telemetry;
    for warning in warnings {
        tracing::warn!("burst {} × {}: {warning}", burst.label, burst.concurrency);
    }
}

fn what(step: &Planned, rounds: u32) -> String {
    let cell = format!("{} × {}", step.label, step.concurrency);
    if rounds > 1 { format!("{cell}, round {} of {rounds}", step.round) } else { cell }
}

fn base(step: &Planned) -> Burst {
    Burst {
        context: step.context,
        label: step.label.clone(),
        concurrency: step.concurrency,
        round: step.round,
        status: CellStatus::Error,
        ..Burst::default()
    }
}

fn over_capacity(step: &Planned, reason: &str) -> Burst {
    Burst { status: CellStatus::OverCapacity, reason: Some(reason.to_string()), ..base(step) }
}

fn failed(step: &Planned, reason: String) -> Burst {
    Burst {
        requests: u64::from(step.concurrency),
        failed: u64::from(step.concurrency),
        reason: Some(reason),
        ..base(step)
    }
}

/// A request of the schedule as the burst's figures read it (a burst has no grace: every request
/// was read to its end, so none is left unsent).
fn request_run(s: crate::runner::phases::open_loop::Sent) -> RequestRun {
    let log = s.log.unwrap_or_else(|| RequestLog::new(s.due));
    let outcome = match s.end {
        End::Completed => Outcome::Completed,
        End::Failed(why) => Outcome::Failed(why),
        End::Lost(why) => Outcome::Lost(why),
        End::Cancelled | End::Unsent => Outcome::Cancelled,
    };
    RequestRun { id: log.id.clone(), log, outcome }
}

/// Why a request did not complete, or `None` when it did.
fn failure(outcome: &Outcome) -> Option<String> {
    match outcome {
        Outcome::Completed => None,
        Outcome::Cancelled => Some("cancelled".into()),
        Outcome::Failed(why) | Outcome::Lost(why) => Some(why.clone()),
        Outcome::Loop(found) => Some(format!("loop: the text repeated every {} characters", found.period_chars)),
    }
}

fn burst_request(run: &RequestRun) -> BurstRequest {
    let log = &run.log;
    BurstRequest {
        sent: log.sent,
        first_token: log.first_token,
        ended: log.ended.filter(|_| run.outcome == Outcome::Completed),
        output_tokens: output_tokens(log),
    }
}

/// The server's last usage count, else the token-bearing chunks received.
fn output_tokens(log: &RequestLog) -> u64 {
    log.points.last().map_or(0, |p| p.usage.unwrap_or(p.chunks))
}

/// `--save-requests`: one line per request of the burst, due at `scheduled`.
fn burst_lines(step: &Planned, scheduled: Instant, runs: &[RequestRun], t0: Instant) -> Vec<RequestLine> {
    let secs = |t: Instant| round_s(t.saturating_duration_since(t0).as_secs_f64());
    runs.iter()
        .map(|run| {
            let log = &run.log;
            let reason = failure(&run.outcome).map(|r| sm_core::secrets::scrub(&r).into_owned());
            let completed = run.outcome == Outcome::Completed;
            let answer = answer_fields(log, None, secs);
            RequestLine {
                phase: RequestPhase::Burst,
                context: step.context.unwrap_or(0),
                concurrency: step.concurrency,
                repeat: Some(step.round),
                searched: false,
                request_id: run.id.as_deref().map(|r| sm_core::secrets::scrub(r).into_owned()),
                scheduled_s: secs(scheduled),
                sent_s: secs(log.sent),
                first_token_s: log.first_token.map(secs),
                last_token_s: log.points.last().map(|p| secs(p.at)),
                ended_s: log.ended.filter(|_| completed).map(secs),
                output_tokens: output_tokens(log) as f64,
                window_output_tokens: None,
                in_window: None,
                prompt_tokens: log.prompt_tokens,
                cached_tokens: log.cached_tokens,
                first_answer_s: answer.first_answer_s,
                reasoning_tokens: answer.reasoning_tokens,
                usage_reasoning_tokens: answer.usage_reasoning_tokens,
                tool_call: answer.tool_call,
                status: if completed { RequestStatus::Completed } else { RequestStatus::Failed },
                reason,
                retried: log.retried,
            }
        })
        .collect()
}
