//! What the page, the Markdown, the console and `sessions.csv` show of a sessions phase
//! (methodology §13.4): the per-turn table with prompt tokens, cached %, TTFT p50/p90 and tok/s,
//! the totals, one CSV row per turn of each user; nothing of it for a run without the phase.

use serde_json::{Value, json};
use sm_core::record::RunRecord;

use crate::common::*;

fn turn(k: u64, at: f64, prompt: u64, cached: u64) -> Value {
    json!({"turn": k, "request_id": format!("chatcmpl-{k}"), "scheduled_s": at, "sent_s": at + 0.001,
           "first_token_s": at + 0.1, "last_token_s": at + 1.1, "ended_s": at + 1.2,
           "prompt_tokens": prompt, "cached_tokens": cached, "output_tokens": 11, "status": "completed"})
}

/// The sample run with a sessions phase of two users × two turns, user 1's second turn failed.
fn with_sessions() -> RunRecord {
    let mut v: Value = serde_json::from_str(&std::fs::read_to_string(data("run-sample.json")).unwrap()).unwrap();
    let failed = json!({"turn": 2, "scheduled_s": 5.0, "sent_s": 5.0, "first_token_s": null, "last_token_s": null,
        "ended_s": null, "prompt_tokens": null, "cached_tokens": null, "output_tokens": 0, "status": "failed",
        "reason": "=HTTP 503, \"busy\""});
    let mut phase = json!({
        "settings": {"users": 2, "turns": 2, "think_time_s": 1.0, "turn_tokens": 64, "shared_prefix": 2048,
                     "max_tokens": 11, "stagger_s": 0.5},
        "sessions": [
            {"user": 0, "status": "complete", "turns": [turn(1, 1.0, 2112, 0), turn(2, 3.3, 2200, 2176)]},
            {"user": 1, "status": "failed", "turns": [turn(1, 1.5, 2112, 2048), failed]}
        ],
        "by_turn": []
    });
    // the figures as the runner computes them
    let mut p: sm_core::phases::sessions::SessionsPhase = serde_json::from_value(phase.clone()).unwrap();
    p.refresh();
    phase = serde_json::to_value(&p).unwrap();
    v["phases"] = json!({"sessions": phase});
    sm_report::import_str(&v.to_string()).expect("a valid record")
}

#[test]
fn the_page_has_a_row_per_turn_with_cached_share_and_ttft() {
    let r = with_sessions();
    let html = sm_report::html_page(&r, &[]);
    assert!(html.contains("<h2 id=\"sessions\">Multi-turn sessions</h2>"));
    let rows = body_rows(table(&html, "sessions"));
    let text: Vec<Vec<String>> = rows.iter().map(|r| r.iter().map(|c| strip_tags(c)).collect()).collect();
    // turn 1: 2 answered, 2,112 tokens, 2,048 of 4,224 cached (48.5 %), TTFT 100 ms both, 10 tok/s
    assert_eq!(text[0], ["1", "2", "2,112", "48.5 %", "100 ms", "100 ms", "10.0"]);
    assert_eq!(text[1], ["2", "1 (1 failed)", "2,200", "98.9 %", "100 ms", "100 ms", "10.0"]);
    assert_eq!(rows.len(), 2);
    assert!(html.contains("TTFT by turn"), "a chart of TTFT by turn");
    let plain = strip_tags(&html);
    assert!(plain.contains("3 turns answered, 1 failed"), "the totals");
    assert!(plain.contains("shared system prompt of 2,048 tokens"), "what was sent");
}

#[test]
fn markdown_and_console_show_the_same_rows() {
    let r = with_sessions();
    let md = md_text(&sm_report::markdown(&r));
    assert!(md.contains("## Multi-turn sessions"));
    assert!(md.contains("| 2 | 1 (1 failed) | 2,200 | 98.9 % | 100 ms | 100 ms | 10.0 |"), "{md}");
    let console = sm_report::terminal(&r, 100);
    assert!(console.contains("Multi-turn sessions: per turn, across 2 users"), "{console}");
    assert!(console.lines().any(|l| l.contains("98.9 %") && l.contains("1 (1 failed)")), "{console}");
    assert!(console.lines().all(|l| l.chars().count() <= 100), "{console}");
}

#[test]
fn the_csv_has_a_row_per_turn_of_each_user() {
    let r = with_sessions();
    let files = sm_report::phases::csv_files(&r);
    let (name, text) = files.iter().find(|(n, _)| n == "sessions.csv").expect("sessions.csv");
    assert_eq!(name, "sessions.csv");
    let rows = csv_records(text);
    assert_eq!(rows.len(), 4);
    let first = &rows[0];
    assert_eq!((first["user"].as_str(), first["turn"].as_str(), first["status"].as_str()), ("0", "1", "completed"));
    assert_eq!((first["ttft_ms"].as_str(), first["latency_ms"].as_str()), ("100", "1200"));
    assert_eq!((first["prompt_tokens"].as_str(), first["cached_tokens"].as_str()), ("2112", "0"));
    assert_eq!((first["cache_hit_pct"].as_str(), first["tok_s"].as_str()), ("0", "10"));
    let failed = &rows[3];
    assert_eq!((failed["user"].as_str(), failed["status"].as_str()), ("1", "failed"));
    assert_eq!(failed["ttft_ms"], "", "no figure for a failed turn");
    assert_eq!(failed["reason"], "'=HTTP 503, \"busy\"", "quoted, and never a formula");
}

#[test]
fn a_run_without_the_phase_shows_nothing_of_it() {
    let r: RunRecord = sm_report::import_str(&std::fs::read_to_string(data("run-sample.json")).unwrap()).unwrap();
    assert!(!sm_report::html_page(&r, &[]).contains("Multi-turn sessions"));
    assert!(!sm_report::markdown(&r).contains("Multi-turn sessions"));
    assert!(sm_report::phases::csv_files(&r).iter().all(|(n, _)| n != "sessions.csv"));
}

/// The table says its prompt tokens are a mean per user; a run of the phases alone does not claim
/// in its subtitle the matrix's contexts and concurrency levels, which it did not measure.
#[test]
fn prompt_tokens_say_they_are_a_mean_and_a_phases_only_subtitle_names_the_phases() {
    let mut r = with_sessions();
    let html = sm_report::html_page(&r, &[]);
    assert!(html.contains("<th>Prompt tokens (mean)</th>"), "{}", table(&html, "sessions"));
    assert!(sm_report::view::build(&r).subtitle.iter().any(|s| s.contains("concurrency level")));
    r.settings.matrix = false;
    let subtitle = sm_report::view::build(&r).subtitle;
    assert!(!subtitle.iter().any(|s| s.contains("concurrency")), "{subtitle:?}");
    assert!(subtitle.iter().any(|s| s == "load phases only: multi-turn sessions"), "{subtitle:?}");
    let md = md_text(&sm_report::markdown(&r));
    assert!(md.contains("load phases only: multi-turn sessions") && !md.contains("concurrency levels"), "{md}");
}
