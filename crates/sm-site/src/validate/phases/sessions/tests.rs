use sm_core::phases::sessions::{Session, SessionStatus, SessionTurn, SessionsPhase, SessionsSettings, TurnStatus};

use super::super::super::check;
use super::*;

fn turn(k: u32) -> SessionTurn {
    let at = f64::from(k);
    SessionTurn {
        turn: k,
        request_id: Some(format!("chatcmpl-{k}")),
        scheduled_s: at,
        sent_s: Some(at + 0.001),
        first_token_s: Some(at + 0.05),
        last_token_s: Some(at + 0.5),
        ended_s: Some(at + 0.51),
        prompt_tokens: Some(100 * u64::from(k)),
        cached_tokens: Some(90 * u64::from(k) - 90),
        output_tokens: 16,
        answer: Default::default(),
        status: TurnStatus::Completed,
        reason: None,
    }
}

fn sample(users: u32, turns: u32) -> RunRecord {
    let mut r: RunRecord = serde_json::from_str(include_str!("../../../../../../tests/data/run-sample.json")).unwrap();
    let settings = SessionsSettings {
        users,
        turns,
        think_time_s: 0.5,
        turn_tokens: 64,
        shared_prefix: Some(256),
        max_tokens: 16,
        stagger_s: 0.1,
        prompts_file: false,
    };
    let mut p = SessionsPhase::new(settings);
    p.sessions = (0..users)
        .map(|user| Session { user, status: SessionStatus::Complete, turns: (1..=turns).map(turn).collect() })
        .collect();
    p.refresh();
    r.phases.sessions = Some(p);
    r
}

fn sessions(r: &mut RunRecord) -> &mut SessionsPhase {
    r.phases.sessions.as_mut().unwrap()
}

#[test]
fn a_run_with_sessions_is_accepted() {
    assert_eq!(check(&sample(3, 4)), Ok(()));
}

#[test]
fn a_sessions_section_is_bounded() {
    let big = sample(MAX_SESSION_USERS as u32 + 1, 1);
    assert!(matches!(check(&big), Err(Refusal::TooMany { name: "MAX_SESSION_USERS", .. })));
    let long = sample(1, MAX_SESSION_TURNS as u32 + 1);
    assert!(matches!(check(&long), Err(Refusal::TooMany { name: "MAX_SESSION_TURNS", .. })));
    let many = sample(100, 50);
    assert!(matches!(check(&many), Err(Refusal::TooMany { name: "MAX_SESSION_TURNS_TOTAL", .. })));
}

#[test]
fn bad_session_figures_are_named() {
    let mut r = sample(2, 2);
    sessions(&mut r).by_turn[0].ttft_ms.p50 = Some(f64::NAN);
    let e = check(&r).unwrap_err().to_string();
    assert!(e.contains("by_turn[turn 1]") && e.contains("ttft_ms_p50"), "{e}");
    let mut r = sample(2, 2);
    sessions(&mut r).summary.as_mut().unwrap().cache_hit_pct = Some(120.0);
    assert!(check(&r).unwrap_err().to_string().contains("cache_hit_pct"));
    let mut r = sample(2, 2);
    sessions(&mut r).sessions[1].turns[0].first_token_s = Some(-1.0);
    assert!(check(&r).unwrap_err().to_string().contains("[user 1] turn 1"));
    let mut r = sample(2, 2);
    sessions(&mut r).sessions[0].turns[1].cached_tokens = Some(10_000);
    assert!(matches!(check(&r), Err(Refusal::Incoherent { .. })));
}
