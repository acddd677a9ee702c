use super::*;

fn turn(turn: u32, scheduled: f64, first: f64, last: f64, out: u64, prompt: u64, cached: u64) -> SessionTurn {
    SessionTurn {
        turn,
        request_id: None,
        scheduled_s: scheduled,
        sent_s: Some(scheduled + 0.001),
        first_token_s: Some(first),
        last_token_s: Some(last),
        ended_s: Some(last + 0.01),
        prompt_tokens: Some(prompt),
        cached_tokens: Some(cached),
        output_tokens: out,
        answer: Default::default(),
        status: TurnStatus::Completed,
        reason: None,
    }
}

fn failed(turn: u32, scheduled: f64) -> SessionTurn {
    SessionTurn {
        turn,
        request_id: None,
        scheduled_s: scheduled,
        sent_s: Some(scheduled + 0.004),
        first_token_s: None,
        last_token_s: None,
        ended_s: None,
        prompt_tokens: None,
        cached_tokens: None,
        output_tokens: 0,
        answer: Default::default(),
        status: TurnStatus::Failed,
        reason: Some("HTTP 503".into()),
    }
}

fn sessions() -> Vec<Session> {
    vec![
        Session {
            user: 0,
            status: SessionStatus::Complete,
            turns: vec![turn(1, 1.0, 1.1, 2.1, 11, 100, 0), turn(2, 3.0, 3.05, 4.05, 11, 300, 96)],
        },
        Session {
            user: 1,
            status: SessionStatus::Failed,
            turns: vec![turn(1, 1.5, 1.8, 2.8, 21, 100, 64), failed(2, 4.0)],
        },
    ]
}

#[test]
fn per_turn_figures_follow_the_definitions() {
    let by = turn_figures(&sessions(), 3);
    assert_eq!(by.len(), 2, "turn 3 measured nothing");
    let t1 = &by[0];
    assert_eq!((t1.turn, t1.completed, t1.failed), (1, 2, 0));
    // TTFTs 100 ms and 300 ms from the scheduled starts: p50 200, p90 280 (linear interpolation)
    assert_eq!((t1.ttft_ms.p50, t1.ttft_ms.p90), (Some(200.0), Some(280.0)));
    assert_eq!((t1.prompt_tokens_mean, t1.cached_tokens_mean), (Some(100.0), Some(32.0)));
    assert_eq!(t1.cache_hit_pct, Some(32.0), "64 of 200 prompt tokens");
    // 10 tokens after the first in 1 s, and 20 in 1 s
    assert_eq!(t1.output_tok_s, Some(15.0));
    let t2 = &by[1];
    assert_eq!((t2.completed, t2.failed), (1, 1));
    assert_eq!((t2.ttft_ms.p50, t2.prompt_tokens_mean, t2.cache_hit_pct), (Some(50.0), Some(300.0), Some(32.0)));
}

#[test]
fn the_summary_spans_the_phase_from_its_first_scheduled_turn() {
    let s = summary(&sessions()).unwrap();
    assert_eq!((s.completed, s.failed, s.output_tokens), (3, 1, 43));
    // from 1.0 (first scheduled) to 4.06 (last answer's end)
    assert_eq!(s.span_s, 3.06);
    assert_eq!(s.output_tok_s, Some(round2(43.0 / 3.06)));
    assert_eq!((s.ttft_ms.p50, s.ttft_ms.p99), (Some(100.0), Some(296.0)), "TTFTs 50, 100, 300 ms");
    assert_eq!(s.latency_ms.p50, Some(1110.0));
    assert_eq!(s.cache_hit_pct, Some(32.0), "160 of 500");
    assert_eq!(s.send_lag_ms_max, Some(4.0), "the failed turn was sent 4 ms late");
    assert_eq!(summary(&[]), None);
}

#[test]
fn a_rate_needs_two_tokens_and_time_between_them() {
    let one = turn(1, 0.0, 0.1, 0.1, 1, 10, 0);
    assert_eq!(request_tok_s(&one), None);
    assert_eq!(request_tok_s(&failed(1, 0.0)), None);
    assert_eq!(ttft_s(&failed(1, 0.0)), None);
    let no_usage = SessionTurn { cached_tokens: None, ..turn(1, 0.0, 0.1, 0.2, 3, 10, 0) };
    assert_eq!(cache_hit_pct([&no_usage]), None, "no cached count: no hit rate, not 0 %");
}

#[test]
fn the_section_round_trips_and_refreshes() {
    let settings = SessionsSettings {
        users: 2,
        turns: 2,
        think_time_s: 1.0,
        turn_tokens: 64,
        shared_prefix: Some(256),
        max_tokens: 16,
        stagger_s: 0.5,
        prompts_file: false,
    };
    let mut phase = SessionsPhase::new(settings);
    phase.sessions = sessions();
    phase.refresh();
    assert_eq!(phase.by_turn.len(), 2);
    let text = serde_json::to_string(&phase).unwrap();
    assert!(!text.contains("prompts_file"), "false is left out");
    let back: SessionsPhase = serde_json::from_str(&text).unwrap();
    assert_eq!(back, phase);
}

/// A reasoning model's turns, one sent with tools: TTFA and TTFTC from each turn's due time.
#[test]
fn thinking_and_tool_calls_count_from_each_turns_due_time() {
    let thought = |scheduled: f64, answer: Option<f64>| SessionTurn {
        answer: TurnAnswer { first_answer_s: Some(answer), reasoning_tokens: Some(8.0), tool_call: None },
        ..turn(1, scheduled, scheduled + 0.1, scheduled + 0.5, 12, 10, 0)
    };
    let sessions = vec![Session {
        user: 0,
        status: SessionStatus::Complete,
        turns: vec![thought(1.0, Some(1.3)), thought(2.0, Some(2.5)), thought(3.0, None), failed(4, 4.0)],
    }];
    let s = summary(&sessions).unwrap();
    let ttfa = s.thinking.ttfa_ms.unwrap();
    assert_eq!((ttfa.p50, ttfa.p90), (Some(400.0), Some(480.0)), "300 and 500 ms after the due times");
    assert_eq!((s.thinking.reasoning_tokens_mean, s.thinking.no_answer), (Some(8.0), Some(1)));
    assert!(s.tool_calls.is_empty(), "no tools sent");
    // a plain turn: its first token was its answer, no key written and no figure
    let plain =
        summary(&[Session { user: 0, status: SessionStatus::Complete, turns: vec![turn(1, 0.0, 0.1, 0.2, 3, 10, 0)] }])
            .unwrap();
    assert!(plain.thinking.is_empty() && plain.tool_calls.is_empty());
    let v = serde_json::to_value(&plain).unwrap();
    assert!(v.get("ttfa_ms").is_none() && v.get("no_answer").is_none(), "{v}");
    // a turn sent with tools that called at 0.2 s after its due time, its arguments valid
    let called = SessionTurn {
        answer: TurnAnswer {
            first_answer_s: Some(None),
            reasoning_tokens: None,
            tool_call: Some(crate::requests::ToolCallFields {
                first_tool_call_s: Some(1.2),
                tool_call_tokens: 9.0,
                tool_args_valid: Some(true),
            }),
        },
        ..turn(1, 1.0, 1.1, 1.3, 10, 10, 0)
    };
    let text = serde_json::to_string(&called).unwrap();
    assert_eq!(serde_json::from_str::<SessionTurn>(&text).unwrap(), called, "{text}");
    let s = summary(&[Session { user: 0, status: SessionStatus::Complete, turns: vec![called] }]).unwrap();
    assert_eq!(s.tool_calls.ttftc_ms.and_then(|q| q.p50), Some(200.0));
    assert_eq!((s.tool_calls.tool_args_valid, s.tool_calls.no_tool_call), (Some(1.0), Some(0)));
    assert!(s.thinking.is_empty(), "a call is not thinking");
}
