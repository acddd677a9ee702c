//! The screen drawn into a buffer: what a person at an 80×24 terminal would see.

use std::time::{Duration, Instant};

use ratatui::Terminal;
use ratatui::backend::TestBackend;
use sm_core::record::{CellStatus, DecodeCell, PlanKind};
use sm_progress::SchedulerState;
use sm_progress::{LiveSample, RunEvent, Step};

use crate::state::State;
use crate::testdata::record;

fn render(s: &State, now: Instant, w: u16, h: u16) -> String {
    let mut terminal = Terminal::new(TestBackend::new(w, h)).unwrap();
    terminal.draw(|f| crate::view::draw(f, s, now)).unwrap();
    let buf = terminal.backend().buffer().clone();
    (0..h)
        .map(|y| (0..w).map(|x| buf[(x, y)].symbol().to_string()).collect::<String>().trim_end().to_string())
        .collect::<Vec<_>>()
        .join("\n")
}

fn valid(ctx: u64, label: &str, c: u32, tok_s: f64) -> DecodeCell {
    DecodeCell {
        context: ctx,
        label: label.into(),
        concurrency: c,
        status: Some(CellStatus::Valid),
        total_tok_s: Some(tok_s),
        ..Default::default()
    }
}

/// Mid-run: two cells done, 8K × 16 being measured 4 s into its 10 s window.
fn mid_run(t0: Instant) -> (State, Instant) {
    let mut s = State::new(t0);
    s.start(&record());
    s.event(&RunEvent::RunStarted, t0);
    s.cell_done(&valid(8192, "8K", 1, 61.2), t0 + Duration::from_secs(12));
    s.cell_done(&valid(8192, "8K", 4, 231.9), t0 + Duration::from_secs(24));
    s.step(&Step::Scout { context: 8192, label: "8K".into(), concurrency: 16 }, t0 + Duration::from_secs(25));
    let started = t0 + Duration::from_secs(27);
    s.step(
        &Step::Measuring {
            context: 8192,
            label: "8K".into(),
            concurrency: 16,
            started,
            window: Duration::from_secs(10),
        },
        started,
    );
    for i in 0..16u64 {
        s.live(&LiveSample {
            at: started + Duration::from_millis(250 * i),
            tokens: 200 * i,
            streams_with_token: 16,
            concurrency: 16,
            ttft_ms_p50: Some(123.4),
            ttfa_ms_p50: None,
            ttftc_ms_p50: None,
            tbt_ms_p50: Some(19.9),
            server: Some(SchedulerState { running: 16.0, waiting: 0.0, kv_usage: Some(0.42), spec: None }),
        });
    }
    (s, started + Duration::from_secs(4))
}

#[test]
fn an_80x24_screen_shows_the_matrix_the_step_and_the_progress() {
    let t0 = Instant::now();
    let (s, now) = mid_run(t0);
    let screen = render(&s, now, 80, 24);
    assert!(screen.contains("vllm 0.8.5 · tiny-model"), "{screen}");
    assert!(screen.contains("5 planned, 1 over cap., 2 done"), "{screen}");
    assert!(screen.contains("Measuring 8K × 16"), "{screen}");
    assert!(screen.contains("4.0 s of 10 s"), "{screen}");
    assert!(screen.contains("800.0 tok/s total"), "{screen}");
    assert!(screen.contains("TTFT p50 123.4 ms"), "{screen}");
    assert!(screen.contains("running 16"), "{screen}");
    assert!(screen.contains("KV usage 42%"), "{screen}");
    // the matrix: finished figures, the live cell, the over-capacity cell, cells still to come
    let row_8k = screen.lines().find(|l| l.contains("8K ") && l.contains("61.2")).expect(&screen);
    assert!(row_8k.contains("231.9") && row_8k.contains("▸800"), "{row_8k}");
    let row_64k = screen.lines().find(|l| l.trim_start().starts_with("│  64K")).expect(&screen);
    assert!(row_64k.contains("over cap.") && row_64k.contains('·'), "{row_64k}");
    assert!(screen.contains("cells 2/5 · prefill 0/2"), "{screen}");
    assert!(screen.contains("ETA "), "{screen}");
    assert!(screen.contains("q finish after this cell"), "{screen}");
    assert!(screen.contains("run started"), "{screen}");
    // nothing runs off the edge at 80 columns: the KV budget's source and the stream count are whole
    assert!(screen.contains("KV 500,000 tok (vllm:cache_config_info)"), "{screen}");
    assert!(screen.contains("streams 16/16"), "{screen}");
    assert!(screen.contains("TBT p50 19.9 ms"), "{screen}");
}

#[test]
fn a_wide_screen_keeps_the_header_and_the_figures_on_one_line_each() {
    let t0 = Instant::now();
    let (s, now) = mid_run(t0);
    let screen = render(&s, now, 140, 30);
    assert!(screen.contains("2 done · max seqs 64 · KV 500,000 tok (vllm:cache_config_info)"), "{screen}");
    assert!(screen.contains("800.0 tok/s total · TTFT p50 123.4 ms · TBT p50 19.9 ms · streams 16/16"), "{screen}");
}

#[test]
fn ramp_up_waiting_for_streams_names_the_wait_once() {
    let t0 = Instant::now();
    let mut s = State::new(t0);
    s.start(&record());
    s.step(
        &Step::Ramp {
            context: 8192,
            label: "8K".into(),
            concurrency: 16,
            waiting_for: "waiting for streams 7/16".into(),
        },
        t0,
    );
    let screen = render(&s, t0 + Duration::from_secs(3), 80, 24);
    assert!(screen.contains("Ramp-up 8K × 16 · waiting for streams 7/16 · 3s"), "{screen}");
    assert!(!screen.contains("waiting for waiting"), "{screen}");
}

/// The test run with six contexts, 4K…128K, the cell in progress at 64K × 4.
fn six_contexts(t0: Instant) -> State {
    let mut rec = record();
    let contexts = [(4096, "4K"), (8192, "8K"), (16384, "16K"), (32768, "32K"), (65536, "64K"), (131072, "128K")];
    rec.plan.retain(|p| p.kind == PlanKind::Prefill);
    for (ctx, label) in contexts {
        for c in [1, 4, 16] {
            let mut p = rec.plan[0].clone();
            (p.kind, p.context, p.requested_context, p.label, p.concurrency) =
                (PlanKind::Decode, ctx, ctx, label.into(), c);
            rec.plan.push(p);
        }
    }
    rec.decode.clear();
    let mut s = State::new(t0);
    s.start(&rec);
    for (ctx, label) in &contexts[..4] {
        for c in [1, 4, 16] {
            s.cell_done(&valid(*ctx, label, c, 100.0 * f64::from(c)), t0);
        }
    }
    s.cell_done(&valid(65536, "64K", 1, 50.0), t0);
    s.step(&Step::Scout { context: 65536, label: "64K".into(), concurrency: 4 }, t0);
    s
}

#[test]
fn six_contexts_fit_80x24() {
    let t0 = Instant::now();
    let s = six_contexts(t0);
    let screen = render(&s, t0 + Duration::from_secs(1), 80, 24);
    for label in ["  4K ", " 16K ", " 64K ", "128K "] {
        assert!(screen.lines().any(|l| l.starts_with(&format!("│ {label}"))), "no {label} row:\n{screen}");
    }
    assert!(!screen.contains("more context"), "{screen}");
}

#[test]
fn rows_cut_at_80x16_are_announced_and_the_cell_in_progress_stays_visible() {
    let t0 = Instant::now();
    let s = six_contexts(t0);
    let screen = render(&s, t0 + Duration::from_secs(1), 80, 16);
    assert!(screen.contains("more contexts"), "the cut rows are not announced:\n{screen}");
    let row_64k = screen.lines().find(|l| l.starts_with("│  64K")).unwrap_or_else(|| panic!("no 64K row:\n{screen}"));
    assert!(row_64k.contains('▸'), "{row_64k}");
    assert!(screen.contains("cells 13/18"), "{screen}");
}

#[test]
fn a_narrow_terminal_keeps_the_essentials() {
    let t0 = Instant::now();
    let (s, now) = mid_run(t0);
    let screen = render(&s, now, 50, 16);
    assert!(screen.contains("Measuring 8K × 16"), "{screen}");
    assert!(screen.contains("running 16 · waiting 0"), "{screen}");
    assert!(screen.contains("over"), "{screen}");
    assert!(screen.contains("cells 2/5"), "{screen}");
}

#[test]
fn ramp_up_says_what_it_waits_for_and_errors_give_their_reason() {
    let t0 = Instant::now();
    let mut s = State::new(t0);
    s.start(&record());
    s.cell_done(
        &DecodeCell {
            context: 8192,
            label: "8K".into(),
            concurrency: 1,
            status: Some(CellStatus::Error),
            reason: Some("stream stalled for 60 s".into()),
            ..Default::default()
        },
        t0,
    );
    s.step(&Step::Ramp { context: 8192, label: "8K".into(), concurrency: 4, waiting_for: "running 3/4".into() }, t0);
    let screen = render(&s, t0 + Duration::from_secs(2), 80, 24);
    assert!(screen.contains("Ramp-up 8K × 4 · running 3/4 · 2s"), "{screen}");
    assert!(screen.contains("ERROR"), "{screen}");
    assert!(screen.contains("8K × 1 ERROR: stream stalled for 60 s"), "{screen}");
}

#[test]
fn prefill_shows_elapsed_and_an_eta_from_the_rate_so_far() {
    let t0 = Instant::now();
    let mut s = State::new(t0);
    s.start(&record());
    s.step(&Step::Prefill { context: 8192, label: "8K".into(), index: 1, total: 2, started: t0 }, t0);
    s.prefill_done(
        &sm_core::record::PrefillRow {
            context: 8192,
            label: "8K".into(),
            prompt_tokens: Some(8192),
            ttft_ms: Some(1000.0),
            prompt_tok_s: Some(8192.0),
            cached_tokens: Some(0),
            status: CellStatus::Valid,
            reason: None,
            telemetry: Default::default(),
        },
        t0 + Duration::from_secs(1),
    );
    let started = t0 + Duration::from_secs(1);
    s.step(&Step::Prefill { context: 65536, label: "64K".into(), index: 2, total: 2, started }, started);
    // 64K at 8,192 tok/s takes 8 s; 3 s have passed
    let screen = render(&s, started + Duration::from_secs(3), 80, 24);
    assert!(screen.contains("Prefill of context 64K (2/2) · 3s · ETA 5s"), "{screen}");
}

#[test]
fn a_run_of_load_phases_only_shows_the_phase_step_and_no_empty_matrix() {
    let t0 = Instant::now();
    let mut r = record();
    r.settings.matrix = false;
    r.decode.clear();
    r.phases.mixed_prefill = Some(Default::default());
    r.phases.burst = Some(Default::default());
    let mut s = State::new(t0);
    s.start(&r);
    s.event(&RunEvent::RunStarted, t0);
    let started = t0 + Duration::from_secs(2);
    let kind = sm_core::phases::PhaseKind::Rate;
    let what = "4 req/s at 8K".to_string();
    s.step(&Step::Phase { kind, what, started, length: Some(Duration::from_secs(30)) }, started);
    let screen = render(&s, started + Duration::from_secs(12), 80, 24);
    assert!(screen.contains("Arrivals at a rate: 4 req/s at 8K"), "{screen}");
    assert!(screen.contains("12.0 s of 30 s"), "{screen}");
    assert!(!screen.contains("Decode matrix"), "{screen}");
    assert!(!screen.contains("over cap."), "{screen}");
    assert!(screen.contains("load phases burst, mixed_prefill"), "{screen}");
    assert!(screen.contains("load phases · elapsed 14s") && !screen.contains("ETA"), "{screen}");
    assert!(screen.contains("run started"), "{screen}");
    // without a length the step says how long it has run
    let what = "8K × 16".to_string();
    s.step(&Step::Phase { kind: sm_core::phases::PhaseKind::Burst, what, started, length: None }, started);
    let screen = render(&s, started + Duration::from_secs(3), 80, 24);
    assert!(screen.contains("Bursts: 8K × 16 · 3"), "{screen}");
    // a replayed trace: its step with the trace's length at the scale, and each scale's event
    let what = "chat.jsonl at 2×".to_string();
    let kind = sm_core::phases::PhaseKind::Replay;
    s.step(&Step::Phase { kind, what, started, length: Some(Duration::from_secs(20)) }, started);
    let mut level = sm_core::phases::rate::RateLevel::unmeasured(
        0,
        "chat.jsonl".into(),
        sm_core::phases::rate::RequestRate::PerSecond(8.0),
        sm_core::phases::rate::LevelStatus::Error,
        "no request completed".into(),
    );
    level.counts.scheduled = 10;
    s.event(&RunEvent::ReplayLevelDone { time_scale: 2.0, level: Box::new(level) }, started);
    let screen = render(&s, started + Duration::from_secs(5), 80, 24);
    assert!(screen.contains("Your traffic (replay): chat.jsonl at 2×"), "{screen}");
    assert!(screen.contains("5.0 s of 20 s"), "{screen}");
    assert!(screen.contains("replay at 2× its recorded speed"), "{screen}");
}

/// The Events pane colours each line by the event's severity, not by words in its text.
#[test]
fn the_events_pane_colours_by_severity() {
    use ratatui::style::Color;
    let t0 = Instant::now();
    let mut s = State::new(t0);
    s.start(&record());
    let failed = RunEvent::PrefillFailed { row: "8K".into(), reason: "HTTP 500".into() };
    let fine = RunEvent::SessionsDone { completed: 12, failed: 0, cache_hit_pct: None };
    let lost = RunEvent::ServerLost { wait: Duration::from_secs(60) };
    for e in [&failed, &fine, &lost] {
        s.event(e, t0);
    }
    let mut terminal = Terminal::new(TestBackend::new(100, 30)).unwrap();
    terminal.draw(|f| crate::view::draw(f, &s, t0)).unwrap();
    let buf = terminal.backend().buffer().clone();
    let colour_of = |text: &str| {
        let (x, y) = (0..30u16)
            .find_map(|y| {
                let row: String = (0..100u16).map(|x| buf[(x, y)].symbol().to_string()).collect();
                row.find(text).map(|i| (row[..i].chars().count() as u16, y))
            })
            .unwrap_or_else(|| panic!("{text} is not on the screen"));
        buf[(x, y)].fg
    };
    assert_eq!(colour_of(&failed.to_string()), Color::Red);
    assert_eq!(colour_of(&fine.to_string()), Color::Reset, "'0 failed' is not a failure");
    assert_eq!(colour_of(&lost.to_string()), Color::Yellow);
}

#[test]
fn a_reasoning_models_cell_shows_the_wait_for_the_answer_beside_the_first_token() {
    let t0 = Instant::now();
    let (mut s, now) = mid_run(t0);
    s.live(&LiveSample {
        at: now,
        tokens: 3400,
        streams_with_token: 16,
        concurrency: 16,
        ttft_ms_p50: Some(123.4),
        ttfa_ms_p50: Some(4567.8),
        ttftc_ms_p50: None,
        tbt_ms_p50: Some(19.9),
        server: None,
    });
    let wide = render(&s, now, 160, 30);
    assert!(wide.contains("TTFT p50 123.4 ms · TTFA p50 4567.8 ms · TBT p50 19.9 ms"), "{wide}");
    // on 80 columns the latencies take a line of their own, the answer's wait still on it
    let narrow = render(&s, now, 80, 24);
    assert!(narrow.contains("TTFA p50 4567.8 ms"), "{narrow}");
}

#[test]
fn a_cell_with_tools_shows_the_wait_for_the_tool_call_once_one_came() {
    let t0 = Instant::now();
    let (mut s, now) = mid_run(t0);
    let sample = |ttftc_ms_p50| LiveSample {
        at: now,
        tokens: 3400,
        streams_with_token: 16,
        concurrency: 16,
        ttft_ms_p50: Some(123.4),
        ttfa_ms_p50: Some(456.7),
        ttftc_ms_p50,
        tbt_ms_p50: Some(19.9),
        server: None,
    };
    s.live(&sample(None));
    assert!(!render(&s, now, 160, 30).contains("TTFTC"), "no call came yet");
    s.live(&sample(Some(456.7)));
    let wide = render(&s, now, 160, 30);
    assert!(wide.contains("TTFT p50 123.4 ms · TTFA p50 456.7 ms · TTFTC p50 456.7 ms · TBT p50 19.9 ms"), "{wide}");
    let narrow = render(&s, now, 80, 24);
    assert!(narrow.contains("TTFTC p50 456.7 ms"), "{narrow}");
}
