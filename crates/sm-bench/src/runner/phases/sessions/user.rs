//! One simulated user: its turns in order, each sent when due (its start, else the previous
//! answer's end plus the think time), each answer kept, as received, for the turns after it.

use std::sync::Mutex;
use std::time::{Duration, Instant};

use sm_client::openai::RequestSpec;
use sm_client::{Client, JsonBody};
use sm_core::phases::sessions::{SessionStatus, SessionTurn, TurnAnswer, TurnStatus};
use sm_core::requests::round_s;
use tokio::sync::{mpsc, watch};

use super::conversation::{History, Script};
use crate::stream::request::{Observer, Outcome, RequestRun, StreamTimeouts, describe_outcome, stream_request};
use crate::stream::request_log::RequestLog;
use crate::stream::tokens::answer_fields;

/// What a user tells the phase as it goes.
#[derive(Debug)]
pub(super) enum Report {
    /// A turn ended (answered or failed).
    Turn { user: u32, turn: Box<SessionTurn> },
    /// The conversation ended.
    Ended { user: u32, status: SessionStatus },
}

/// Everything a user's task owns.
pub(super) struct UserSpec {
    pub user: u32,
    pub script: Script,
    /// When its first turn is due.
    pub start: Instant,
    pub think: Duration,
    pub client: Client,
    pub spec: RequestSpec,
    pub timeouts: StreamTimeouts,
    /// The run's clock.
    pub t0: Instant,
    /// Ctrl-C: the turn in flight is dropped.
    pub stop: watch::Receiver<bool>,
    /// `q`: the turn in flight finishes, no other starts.
    pub finish: watch::Receiver<bool>,
    /// The server went away: no other turn starts (it would only fail), the turn in flight ends
    /// as it does.
    pub cut: watch::Receiver<bool>,
    pub reports: mpsc::UnboundedSender<Report>,
}

/// The answer's text as it streams in.
#[derive(Default)]
struct Answer(Mutex<String>);

impl Observer for Answer {
    fn content(&self, text: &str) {
        if let Ok(mut a) = self.0.lock() {
            a.push_str(text);
        }
    }
}

/// Holds the conversation to its end, or until stopped or a turn fails.
pub(super) async fn hold(mut u: UserSpec) {
    let status = turns(&mut u).await;
    let _ = u.reports.send(Report::Ended { user: u.user, status });
}

async fn turns(u: &mut UserSpec) -> SessionStatus {
    let mut history = History::new(&u.script.system);
    let mut due = u.start;
    for (i, (message, max_tokens)) in u.script.turns.iter().enumerate() {
        if *u.stop.borrow() || *u.finish.borrow() {
            return SessionStatus::Interrupted;
        }
        if *u.cut.borrow() {
            return SessionStatus::ServerLost;
        }
        tokio::select! {
            biased;
            _ = u.stop.wait_for(|v| *v) => return SessionStatus::Interrupted,
            _ = raised(&mut u.finish) => return SessionStatus::Interrupted,
            _ = raised(&mut u.cut) => return SessionStatus::ServerLost,
            _ = tokio::time::sleep_until(due.into()) => {}
        }
        let spec = RequestSpec { max_tokens: max_tokens.unwrap_or(u.spec.max_tokens), ..u.spec.clone() };
        let body = JsonBody::new(&spec.body(&history.prompt(message)));
        let answer = Answer::default();
        let mut stop = u.stop.clone();
        let run = stream_request(&u.client, spec.path(), &body, u.timeouts, &mut stop, &answer).await;
        if run.outcome == Outcome::Cancelled {
            return SessionStatus::Interrupted;
        }
        let turn = turn_of(i as u32 + 1, due, &run, u.t0);
        let ended = run.log.ended.filter(|_| turn.status == TurnStatus::Completed);
        let _ = u.reports.send(Report::Turn { user: u.user, turn: Box::new(turn) });
        let Some(ended) = ended else { return SessionStatus::Failed };
        history.answered(message, answer.0.into_inner().unwrap_or_default());
        due = ended + u.think;
    }
    SessionStatus::Complete
}

/// Resolves once the flag (`q`, the server's loss) is raised; never when nobody can raise it (the
/// sender is gone).
async fn raised(rx: &mut watch::Receiver<bool>) {
    if rx.wait_for(|v| *v).await.is_err() {
        std::future::pending::<()>().await;
    }
}

fn secs(t0: Instant, at: Instant) -> f64 {
    round_s(at.saturating_duration_since(t0).as_secs_f64())
}

/// What the turn's stream showed of its thinking and its tool call, as requests.jsonl has it; its
/// first answer chunk only where it was not its first token.
fn turn_answer(log: &RequestLog, t0: Instant) -> TurnAnswer {
    let fields = answer_fields(log, None, |t| secs(t0, t));
    TurnAnswer {
        first_answer_s: fields.first_answer_s.filter(|_| log.first_answer != log.first_token),
        reasoning_tokens: fields.reasoning_tokens,
        tool_call: fields.tool_call,
    }
}

/// The record of a turn that was due at `due` and ran as `run` says.
pub(super) fn turn_of(turn: u32, due: Instant, run: &RequestRun, t0: Instant) -> SessionTurn {
    let log = &run.log;
    let completed = run.outcome == Outcome::Completed;
    let last = log.points.last();
    SessionTurn {
        turn,
        request_id: run.id.as_deref().map(|r| sm_core::secrets::scrub(r).into_owned()),
        scheduled_s: secs(t0, due),
        sent_s: Some(secs(t0, log.sent)),
        first_token_s: log.first_token.map(|t| secs(t0, t)),
        last_token_s: last.map(|p| secs(t0, p.at)),
        ended_s: log.ended.filter(|_| completed).map(|t| secs(t0, t)),
        prompt_tokens: log.prompt_tokens,
        cached_tokens: log.cached_tokens,
        // the server's count where it gave one, else one token per token-bearing chunk
        output_tokens: last.map_or(0, |p| p.usage.unwrap_or(p.chunks)),
        answer: turn_answer(log, t0),
        status: if completed { TurnStatus::Completed } else { TurnStatus::Failed },
        reason: describe_outcome(&run.outcome).map(|r| sm_core::secrets::scrub(&r).into_owned()),
    }
}
