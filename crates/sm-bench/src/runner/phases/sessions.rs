//! Issue 17 §4 multi-turn sessions (methodology §13.4): `users` simulated users each hold a
//! conversation of `turns` turns. Turn k sends the whole history (system prompt, earlier
//! messages and the answers as received) and a new user message, waits for the answer, and the
//! user thinks before the next turn. Users start `think / users` apart. Every turn is written to
//! the record as it ends; a conversation is the unit a resume keeps or holds again.

use std::time::{Duration, Instant};

use sm_core::phases::PhaseKind;
use sm_core::phases::sessions::{Session, SessionStatus, SessionTurn, SessionsPhase, SessionsSettings, TurnStatus};
use sm_core::plan::Plan;
use sm_core::record::{Api, RunStatus};
use sm_core::requests::{RequestLine, RequestPhase, RequestStatus};
use tokio::sync::{mpsc, watch};

use super::super::prompts::Prompts;
use super::super::server_lost::{Seen, lost_reason};
use super::super::{RunError, Runner};
use crate::runner::progress::{RunEvent, Step};
use crate::telemetry::{Reads, Received};

mod conversation;
mod user;

use user::{Report, UserSpec};

/// The resolved `--sessions` settings.
#[derive(Debug, Clone, PartialEq)]
pub struct SessionsConfig {
    pub users: u32,
    pub turns: u32,
    pub think_time: Duration,
    /// Tokens of each new user message.
    pub turn_tokens: u64,
    /// Tokens of a system prompt common to every user.
    pub shared_prefix: Option<u64>,
}

impl SessionsConfig {
    /// How far apart users start: spread over one think time.
    pub fn stagger(&self) -> Duration {
        self.think_time / self.users.max(1)
    }

    /// The settings the record keeps.
    pub fn settings(&self, max_tokens: u64, prompts_file: bool) -> SessionsSettings {
        SessionsSettings {
            users: self.users,
            turns: self.turns,
            think_time_s: self.think_time.as_secs_f64(),
            turn_tokens: self.turn_tokens,
            shared_prefix: self.shared_prefix,
            max_tokens,
            stagger_s: self.stagger().as_secs_f64(),
            prompts_file,
        }
    }

    /// The settings a resumed run recorded.
    pub fn from_settings(s: &SessionsSettings) -> SessionsConfig {
        SessionsConfig {
            users: s.users,
            turns: s.turns,
            think_time: Duration::from_secs_f64(s.think_time_s.max(0.0)),
            turn_tokens: s.turn_tokens,
            shared_prefix: s.shared_prefix,
        }
    }
}

impl Runner<'_> {
    /// The phase's section with this run's settings (a resumed run's conversations kept).
    pub(in crate::runner) fn declare_sessions(&mut self, config: &SessionsConfig) {
        // the phase is skipped with the completions API (it says why when its turn comes)
        if self.settings.api != Api::Chat {
            return;
        }
        let settings = config.settings(self.settings.max_tokens.0, self.settings.phases.prompts_file.is_some());
        self.record.phases.sessions.get_or_insert_with(|| SessionsPhase::new(settings));
    }

    pub(in crate::runner) async fn sessions_phase(
        &mut self,
        _plan: &Plan,
        prompts: &Prompts,
    ) -> Result<Option<RunStatus>, RunError> {
        let Some(config) = self.settings.phases.sessions.clone() else { return Ok(None) };
        let file = self.settings.phases.prompts_file.clone();
        if self.settings.api != Api::Chat {
            let reason = "a conversation needs the chat API: run the sessions phase with --api chat".to_string();
            self.event(RunEvent::SessionsSkipped { reason });
            return Ok(None);
        }
        let settings = config.settings(self.settings.max_tokens.0, file.is_some());
        let users = self.sessions_to_hold(settings)?;
        if users.is_empty() {
            return Ok(None);
        }
        let ids = (self.run_id.clone(), super::super::run_id());
        let scripts = conversation::scripts(&config, &users, &prompts.sizer, file.as_ref(), (&ids.0, &ids.1)).await;
        let scripts = match scripts {
            Ok(s) => s,
            Err(reason) => {
                // sizing may ask the server: one that went away is waited for, as after a turn;
                // no conversation was recorded, so a resume holds every one
                let lost = self.server_gone(Seen::Failures).await;
                let reason = format!("cannot size the messages: {reason}");
                let reason = if lost { lost_reason(&reason) } else { reason };
                self.event(RunEvent::SessionsSkipped { reason });
                return Ok(self.outlast(lost).await);
            }
        };
        self.event(RunEvent::SessionsStarted { users: config.users, turns: config.turns, to_run: users.len() as u32 });
        let (tx, rx) = mpsc::unbounded_channel();
        // raised once the server is found gone: the users still holding a conversation stop
        let (cut, cut_rx) = watch::channel(false);
        // the phase's span: from before its first turn to its last user's end (methodology §14)
        let target = self.target();
        let mut sampling = self.sources(&target).start(Instant::now());
        sampling.first_taken().await;
        let whole = users.len() as u32 == config.users;
        let start = Instant::now();
        // dropped with this function, so no user goes on sending if the phase ends early (an error)
        let mut held = tokio::task::JoinSet::new();
        for (i, (user, script)) in users.iter().zip(scripts).enumerate() {
            held.spawn(user::hold(UserSpec {
                user: *user,
                script,
                start: start + config.stagger() * i as u32,
                think: config.think_time,
                client: self.client.clone(),
                spec: self.spec(self.settings.max_tokens.0, true),
                timeouts: self.settings.timing.stream_timeouts(),
                t0: self.t0,
                stop: self.controls.stop_now.clone(),
                finish: self.controls.finish_after_cell.clone(),
                cut: cut_rx.clone(),
                reports: tx.clone(),
            }));
        }
        drop(tx);
        let lost = self.collect(rx, &config, start, &cut).await?;
        held.join_all().await;
        let reads = sampling.stop().await;
        // a resumed phase's span would miss the conversations kept from before, and one through
        // the server's loss says nothing of the phase: none then
        if whole && !lost && !self.halted() {
            self.sessions_telemetry(&reads);
        }
        let phase = self.record.phases.sessions.as_ref();
        let summary = phase.and_then(|p| p.summary.as_ref());
        self.event(RunEvent::SessionsDone {
            completed: summary.map_or(0, |s| s.completed),
            failed: summary.map_or(0, |s| s.failed),
            cache_hit_pct: summary.and_then(|s| s.cache_hit_pct),
        });
        self.journal.write(&self.record)?;
        // as after a decode cell: a server that went away is waited for (bounded), else the run fails
        if let Some(status) = self.outlast(lost).await {
            return Ok(Some(status));
        }
        Ok(self.halted().then_some(RunStatus::Interrupted))
    }

    /// The phase's telemetry over its summary's span: the server's tok/s set against its output
    /// tok/s, J/token over its completed turns' output tokens — neither where a turn failed: the
    /// server counts a failed turn's tokens (an engine may go on generating one the client gave
    /// up on) and spends energy on them, so the comparison would call a fault "another client"
    /// and J/token would charge it to the completed turns (methodology §13.4).
    fn sessions_telemetry(&mut self, reads: &Reads) {
        let Some(phase) = self.record.phases.sessions.as_mut() else { return };
        let Some(s) = &phase.summary else { return };
        let span = Duration::from_secs_f64(s.span_s);
        let clean = s.failed == 0;
        let ours = s.output_tok_s.filter(|_| clean).map(|_| Received::All(s.output_tokens));
        let (mut telemetry, warnings) = reads.figures(span, ours, if clean { s.output_tokens } else { 0 });
        // to the decimals a decode cell's are kept to
        telemetry.gpu = telemetry.gpu.map(crate::runner::cell_record::rounded_gpu);
        phase.telemetry = telemetry;
        for warning in warnings {
            tracing::warn!("sessions: {warning}");
        }
    }

    /// Prepares the phase's section and returns the users whose conversation is still to hold:
    /// on resume, conversations that ended (complete or failed) are kept and interrupted ones are
    /// held again from turn 1 — the answers they would resend were never written down. With
    /// `--retry-failed`, so are those that failed or were cut by the server's loss.
    /// A resume whose settings differ from the recorded ones (another `--max-tokens`, a prompts
    /// file added or dropped) is refused: its turns would not compare with the recorded ones.
    fn sessions_to_hold(&mut self, settings: SessionsSettings) -> Result<Vec<u32>, RunError> {
        let users = settings.users;
        let phase = self.record.phases.sessions.get_or_insert_with(|| SessionsPhase::new(settings.clone()));
        if phase.settings != settings {
            if !phase.sessions.is_empty() {
                let (old, file) = (&phase.settings, phase.settings.prompts_file);
                let file = if file { "with a prompts file" } else { "without --prompts" };
                return Err(RunError::Mismatch(vec![format!(
                    "the sessions phase was recorded with --max-tokens {} {file}; resume with the same",
                    old.max_tokens
                )]));
            }
            *phase = SessionsPhase::new(settings);
        }
        let retry = self.start.retry_failed;
        let held_again = |s: SessionStatus| match s {
            SessionStatus::Interrupted => true,
            SessionStatus::Failed | SessionStatus::ServerLost => retry,
            SessionStatus::Complete => false,
        };
        phase.sessions.retain(|s| !held_again(s.status));
        phase.refresh();
        let kept: Vec<u32> = phase.sessions.iter().map(|s| s.user).collect();
        Ok((0..users).filter(|u| !kept.contains(u)).collect())
    }

    /// Writes each turn as it ends, until every user is done. A failed turn asks whether the server
    /// went away; once it has, `cut` stops the users, each failure after says so and every
    /// conversation it ended is `server_lost`. Returns whether the server was lost.
    async fn collect(
        &mut self,
        mut rx: mpsc::UnboundedReceiver<Report>,
        config: &SessionsConfig,
        started: Instant,
        cut: &watch::Sender<bool>,
    ) -> std::io::Result<bool> {
        let total = u64::from(config.users) * u64::from(config.turns);
        let what = format!("{} users × {} turns", config.users, config.turns);
        self.reporter.step(&Step::Phase { kind: PhaseKind::Sessions, what, started, length: None });
        let mut lines = Vec::new();
        let mut lost = false;
        while let Some(mut report) = rx.recv().await {
            if let Report::Turn { turn, .. } = &mut report
                && turn.status == TurnStatus::Failed
            {
                if !lost && self.server_gone(Seen::Failures).await {
                    lost = true;
                    let _ = cut.send(true);
                }
                if lost {
                    turn.reason = Some(lost_reason(turn.reason.as_deref().unwrap_or_default()));
                }
            }
            let Some(phase) = self.record.phases.sessions.as_mut() else { break };
            match report {
                Report::Turn { user, turn } => {
                    lines.push(line(&turn, config));
                    session_of(phase, user).turns.push(*turn);
                }
                // a conversation that a failed turn ended once the server was gone was cut by it
                Report::Ended { user, status: SessionStatus::Failed } if lost => {
                    session_of(phase, user).status = SessionStatus::ServerLost;
                }
                Report::Ended { user, status } => session_of(phase, user).status = status,
            }
            phase.refresh();
            let done = phase.sessions.iter().map(|s| s.turns.len() as u64).sum::<u64>();
            let what = format!("{done} of {total} turns answered or failed");
            self.reporter.step(&Step::Phase { kind: PhaseKind::Sessions, what, started, length: None });
            self.journal.write(&self.record)?;
            self.save_requests(&std::mem::take(&mut lines))?;
        }
        Ok(lost)
    }
}

/// A user's session in the section, added (as interrupted until it ends) when first seen.
fn session_of(phase: &mut SessionsPhase, user: u32) -> &mut Session {
    let i = match phase.sessions.iter().position(|s| s.user == user) {
        Some(i) => i,
        None => {
            phase.sessions.push(Session { user, status: SessionStatus::Interrupted, turns: Vec::new() });
            phase.sessions.sort_by_key(|s| s.user);
            phase.sessions.iter().position(|s| s.user == user).unwrap_or_default()
        }
    };
    &mut phase.sessions[i]
}

/// The `--save-requests` line of a turn: `context` is the turn's prompt as the server counted it
/// (else the message's sized length), `concurrency` the number of users.
fn line(t: &SessionTurn, config: &SessionsConfig) -> RequestLine {
    let status = match t.status {
        TurnStatus::Completed => RequestStatus::Completed,
        TurnStatus::Failed => RequestStatus::Failed,
    };
    RequestLine {
        phase: RequestPhase::Sessions,
        context: t.prompt_tokens.unwrap_or(config.turn_tokens).max(1),
        concurrency: config.users,
        repeat: None,
        searched: false,
        request_id: t.request_id.clone(),
        scheduled_s: t.scheduled_s,
        sent_s: t.sent_s.unwrap_or(t.scheduled_s),
        first_token_s: t.first_token_s,
        last_token_s: t.last_token_s,
        ended_s: t.ended_s,
        output_tokens: t.output_tokens as f64,
        window_output_tokens: None,
        in_window: None,
        prompt_tokens: t.prompt_tokens,
        cached_tokens: t.cached_tokens,
        // a turn keeps its answer's figures: its first answer chunk where that was not its first token
        first_answer_s: Some(t.answer.first_answer_s.unwrap_or(t.first_token_s)),
        reasoning_tokens: t.answer.reasoning_tokens,
        usage_reasoning_tokens: None,
        tool_call: t.answer.tool_call,
        status,
        reason: t.reason.clone(),
        retried: false,
    }
}
