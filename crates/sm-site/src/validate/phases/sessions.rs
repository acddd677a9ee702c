//! What the site accepts in a run's sessions phase (methodology §13.4): users, turns and turns in
//! all bounded by what `--sessions` and `--turns` accept, every figure finite and in range.

use sm_core::phases::sessions::{self as sess, SessionTurn, SessionsPhase};
use sm_core::record::{CellStatus, RunRecord};

use super::super::{MAX_CONTEXT_TOKENS, MAX_S, Refusal, at_most, figure, sections};

pub(super) fn limits(record: &RunRecord) -> Result<(), Refusal> {
    record.phases.sessions.as_ref().map_or(Ok(()), sessions_limits)
}

pub(super) fn figures(record: &RunRecord) -> Result<(), Refusal> {
    record.phases.sessions.as_ref().map_or(Ok(()), sessions_figures)
}

/// The most users, turns and turns in all of a sessions section: what `--sessions` and `--turns`
/// accept (sm-core's bounds).
pub(super) const MAX_SESSION_USERS: usize = sess::MAX_USERS as usize;
pub(super) const MAX_SESSION_TURNS: usize = sess::MAX_TURNS as usize;
pub(super) const MAX_SESSION_TURNS_TOTAL: usize = sess::MAX_TURNS_TOTAL as usize;

fn sessions_limits(p: &SessionsPhase) -> Result<(), Refusal> {
    let s = &p.settings;
    at_most("session users", "MAX_SESSION_USERS", s.users as usize, MAX_SESSION_USERS)?;
    at_most("sessions", "MAX_SESSION_USERS", p.sessions.len(), MAX_SESSION_USERS)?;
    at_most("turns per session", "MAX_SESSION_TURNS", s.turns as usize, MAX_SESSION_TURNS)?;
    at_most("per-turn figures", "MAX_SESSION_TURNS", p.by_turn.len(), MAX_SESSION_TURNS)?;
    let most = p.sessions.iter().map(|x| x.turns.len()).max().unwrap_or(0);
    at_most("turns in one session", "MAX_SESSION_TURNS", most, MAX_SESSION_TURNS)?;
    let total = p.sessions.iter().map(|x| x.turns.len()).sum();
    at_most("session turns", "MAX_SESSION_TURNS_TOTAL", total, MAX_SESSION_TURNS_TOTAL)
}

fn tokens(n: Option<u64>) -> Option<f64> {
    n.map(|n| n as f64)
}

fn sessions_figures(p: &SessionsPhase) -> Result<(), Refusal> {
    let s = &p.settings;
    let at = "phases.sessions.settings";
    figure(at, "think_time_s", Some(s.think_time_s), MAX_S)?;
    figure(at, "stagger_s", Some(s.stagger_s), MAX_S)?;
    for (field, v) in
        [("turn_tokens", Some(s.turn_tokens)), ("shared_prefix", s.shared_prefix), ("max_tokens", Some(s.max_tokens))]
    {
        figure(at, field, tokens(v), MAX_CONTEXT_TOKENS)?;
    }
    for session in &p.sessions {
        for t in &session.turns {
            turn(&format!("phases.sessions.sessions[user {}] turn {}", session.user, t.turn), t)?;
        }
    }
    for t in &p.by_turn {
        sections::check(&format!("phases.sessions.by_turn[turn {}]", t.turn), t)?;
    }
    // telemetry as a decode cell's (methodology §14): only a phase with a summary carries it
    let status = if p.summary.is_some() { CellStatus::Valid } else { CellStatus::Error };
    let tokens = p.summary.as_ref().map(|s| s.output_tokens);
    super::super::gpu::check("phases.sessions", status, p.telemetry.gpu.as_ref(), tokens)?;
    super::super::server_metrics::check("phases.sessions", status, p.telemetry.server_metrics.as_ref())?;
    let Some(m) = &p.summary else { return Ok(()) };
    sections::check("phases.sessions.summary", m)
}

/// A turn's times are seconds on the run's clock and its tokens counts; the server's cached
/// count cannot pass its prompt count.
fn turn(at: &str, t: &SessionTurn) -> Result<(), Refusal> {
    sections::check(at, t)?;
    if let (Some(c), Some(p)) = (t.cached_tokens, t.prompt_tokens)
        && c > p
    {
        return Err(Refusal::Incoherent {
            at: at.to_string(),
            why: format!("{c} cached tokens of a {p}-token prompt"),
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests;
