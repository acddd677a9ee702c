//! The sessions phase's section of each view (methodology §13.4): a table per turn index (prompt
//! tokens, prefix-cache hit %, TTFT p50/p90, tok/s per request), a chart of TTFT and cached
//! share by turn, the phase's totals, and `sessions.csv` with one row per turn of each user.

use std::fmt::Write;

use maud::{Markup, html};
use serde::Serialize;
use sm_core::figures::Figures;
use sm_core::phases::sessions::{SessionTurn, SessionsPhase, SessionsSettings, TurnFigures, TurnStatus, request_tok_s};
use sm_core::record::RunRecord;
use sm_core::units::plural;

use crate::csv::table::{self, Ending, Guarded, Num, guarded, num};
use crate::escape::{Text, markdown_cell as md};
use crate::format::{self, opt};
use crate::svg::{Chart, Series, charts_row};

/// The turn, how many users it answered, and the figures the turn figures' table heads
/// ([`sm_core::figures`]: a turn figure given a heading there is a column here). "Prompt tokens"
/// is each turn's mean over the users who sent it (the sum would grow with the users, not with the
/// history).
fn header() -> Vec<&'static str> {
    ["Turn", "Users answered"].into_iter().chain(TurnFigures::headed().filter_map(|f| f.label)).collect()
}

fn pct(x: f64) -> String {
    format!("{} %", format::fixed1(x))
}

/// One line of text saying what the phase did.
fn caption(s: &SessionsSettings) -> String {
    let shared = match s.shared_prefix {
        Some(t) => format!("a shared system prompt of {} tokens", format::count(t)),
        None => "a system prompt of each user's own".to_string(),
    };
    let messages = if s.prompts_file {
        "user messages from the prompts file".to_string()
    } else {
        format!("{}-token user messages", format::count(s.turn_tokens))
    };
    format!(
        "{} × {}, {shared}, {messages}, answers of up to {} tokens, {} s think time; users started {} s apart. TTFT from each turn's scheduled start.",
        plural(u64::from(s.users), "user"),
        plural(u64::from(s.turns), "turn"),
        format::count(s.max_tokens),
        s.think_time_s,
        (s.stagger_s * 1000.0).round() / 1000.0
    )
}

/// The per-turn table's cells.
fn rows(p: &SessionsPhase) -> Vec<Vec<String>> {
    p.by_turn
        .iter()
        .map(|t| {
            let answered =
                if t.failed > 0 { format!("{} ({} failed)", t.completed, t.failed) } else { t.completed.to_string() };
            let figures = TurnFigures::headed().map(|f| format::figure(f.unit, f.of(t)));
            [t.turn.to_string(), answered].into_iter().chain(figures).collect()
        })
        .collect()
}

/// The phase's totals, one sentence.
fn totals(p: &SessionsPhase) -> Option<String> {
    let s = p.summary.as_ref()?;
    Some(
        format!(
            "{} answered, {} failed; {} output tok/s over {} s; TTFT p50 / p90 / p99 {} / {} / {}; end-to-end p50 / p90 / p99 {} / {} / {}; {} of prompt tokens from the prefix cache.",
            plural(s.completed, "turn"),
            s.failed,
            opt(s.output_tok_s, format::fixed1),
            format::fixed1(s.span_s),
            opt(s.ttft_ms.p50, format::ms),
            opt(s.ttft_ms.p90, format::ms),
            opt(s.ttft_ms.p99, format::ms),
            opt(s.latency_ms.p50, format::ms),
            opt(s.latency_ms.p90, format::ms),
            opt(s.latency_ms.p99, format::ms),
            opt(s.cache_hit_pct, pct),
        ) + &answers(s),
    )
}

/// A reasoning model's turns and a run's tool calls, a sentence each where the phase carries them.
fn answers(s: &sm_core::phases::sessions::SessionsSummary) -> String {
    let mut text = String::new();
    let (t, c) = (&s.thinking, &s.tool_calls);
    if !t.is_empty() {
        let q = t.ttfa_ms.unwrap_or_default();
        text += &format!(
            " Time to the first answer token p50 / p90 / p99 {} / {} / {}; {} thinking tokens per turn (mean); {} without an answer.",
            opt(q.p50, format::ms),
            opt(q.p90, format::ms),
            opt(q.p99, format::ms),
            opt(t.reasoning_tokens_mean, format::fixed1),
            plural(t.no_answer.unwrap_or(0), "turn"),
        );
    }
    if !c.is_empty() {
        let q = c.ttftc_ms.unwrap_or_default();
        text += &format!(
            " Time to the first tool call p50 / p90 / p99 {} / {} / {}; {} tokens per call (mean); arguments valid in {}; {} without a call.",
            opt(q.p50, format::ms),
            opt(q.p90, format::ms),
            opt(q.p99, format::ms),
            opt(c.tool_call_tokens_mean, format::fixed1),
            opt(c.tool_args_valid.map(|v| v * 100.0), pct),
            plural(c.no_tool_call.unwrap_or(0), "turn"),
        );
    }
    text
}

fn charts(p: &SessionsPhase) -> Markup {
    let x_labels: Vec<String> = p.by_turn.iter().map(|t| t.turn.to_string()).collect();
    let series = |name: &str, f: fn(&sm_core::phases::sessions::TurnFigures) -> Option<f64>| Series {
        name: name.into(),
        values: p.by_turn.iter().map(f).collect(),
        color: None,
    };
    let ttft = Chart {
        title: "TTFT by turn",
        x_title: "turn",
        y_title: "ms",
        x_labels: x_labels.clone(),
        series: vec![series("p50", |t| t.ttft_ms.p50), series("p90", |t| t.ttft_ms.p90)],
        value_fmt: format::ms,
    };
    let cached = Chart {
        title: "Prompt tokens from the prefix cache",
        x_title: "turn",
        y_title: "%",
        x_labels,
        series: vec![series("cached", |t| t.cache_hit_pct)],
        value_fmt: pct,
    };
    charts_row(&[ttft, cached])
}

pub(super) fn html(record: &RunRecord) -> Markup {
    let Some(p) = &record.phases.sessions else { return html! {} };
    html! {
        h2 id="sessions" { "Multi-turn sessions" }
        p class="caption" { (Text(&caption(&p.settings))) }
        @if p.by_turn.is_empty() {
            p class="caption" { "No turn was measured." }
        } @else {
            div class="scroll" {
                table class="sessions" {
                    thead { tr { @for h in header() { th { (h) } } } }
                    tbody {
                        @for row in rows(p) {
                            tr {
                                @for (i, cell) in row.iter().enumerate() {
                                    td class=(if i == 0 { "ctx" } else { "num" }) { (Text(cell)) }
                                }
                            }
                        }
                    }
                }
            }
            @if let Some(t) = totals(p) { p { (Text(&t)) } }
            // a single turn draws no line; its figures are in the table
            @if p.by_turn.len() > 1 { (charts(p)) }
        }
    }
}

pub(super) fn markdown(s: &mut String, record: &RunRecord) {
    let Some(p) = &record.phases.sessions else { return };
    let _ = writeln!(s, "## Multi-turn sessions\n\n{}\n", md(&caption(&p.settings)));
    if p.by_turn.is_empty() {
        let _ = writeln!(s, "No turn was measured.\n");
        return;
    }
    let header = header();
    let _ = writeln!(s, "| {} |", header.iter().map(|h| md(h)).collect::<Vec<_>>().join(" | "));
    let _ = writeln!(s, "|---|{}", "---:|".repeat(header.len() - 1));
    for row in rows(p) {
        let _ = writeln!(s, "| {} |", row.iter().map(|c| md(c)).collect::<Vec<_>>().join(" | "));
    }
    s.push('\n');
    if let Some(t) = totals(p) {
        let _ = writeln!(s, "{}\n", md(&t));
    }
}

pub(super) fn terminal(s: &mut String, record: &RunRecord, width: usize) {
    let Some(p) = &record.phases.sessions else { return };
    let _ = writeln!(s, "\nMulti-turn sessions: per turn, across {}", plural(u64::from(p.settings.users), "user"));
    let (header, rows) = (header(), rows(p));
    let widths: Vec<usize> = (0..header.len())
        .map(|i| rows.iter().map(|r| r[i].chars().count()).chain([header[i].chars().count()]).max().unwrap_or(1))
        .collect();
    let line = |cells: Vec<&str>| -> String {
        let text: Vec<String> = cells.iter().zip(&widths).map(|(c, w)| format!("{c:>w$}")).collect();
        text.join("  ").chars().take(width.max(20)).collect()
    };
    let _ = writeln!(s, "{}", line(header));
    for r in &rows {
        let _ = writeln!(s, "{}", line(r.iter().map(String::as_str).collect()));
    }
    if let Some(t) = totals(p) {
        let _ = writeln!(s, "{}", wrap(&t, width.max(20)));
    }
}

/// Words wrapped to `width` columns.
fn wrap(text: &str, width: usize) -> String {
    let mut out = String::new();
    let mut col = 0;
    for word in text.split_whitespace() {
        let n = word.chars().count();
        if col > 0 && col + 1 + n > width {
            out.push('\n');
            col = 0;
        } else if col > 0 {
            out.push(' ');
            col += 1;
        }
        out.push_str(word);
        col += n;
    }
    out
}

/// A turn's row of sessions.csv.
#[derive(Serialize, Default)]
struct CsvRow<'a> {
    user: u32,
    turn: u32,
    status: &'static str,
    request_id: Guarded<&'a str>,
    scheduled_s: Num,
    sent_s: Option<Num>,
    first_token_s: Option<Num>,
    last_token_s: Option<Num>,
    ended_s: Option<Num>,
    ttft_ms: Option<Num>,
    latency_ms: Option<Num>,
    prompt_tokens: Option<u64>,
    cached_tokens: Option<u64>,
    cache_hit_pct: Option<Num>,
    output_tokens: u64,
    tok_s: Option<Num>,
    // a reasoning model's turn and a turn sent with tools: empty otherwise
    first_answer_s: Option<Num>,
    reasoning_tokens: Option<Num>,
    first_tool_call_s: Option<Num>,
    tool_call_tokens: Option<Num>,
    tool_args_valid: Option<bool>,
    reason: Guarded<&'a str>,
}

/// The phase's CSV file, `None` when the phase did not run: one row per turn of each user, each
/// ending in CRLF as measurements.csv's (RFC 4180).
pub(super) fn csv(record: &RunRecord) -> Option<String> {
    let p = record.phases.sessions.as_ref()?;
    let rows = p.sessions.iter().flat_map(|s| s.turns.iter().map(|t| csv_row(s.user, t)));
    Some(table::file(rows, Ending::Crlf))
}

fn csv_row(user: u32, t: &SessionTurn) -> CsvRow<'_> {
    let hit = t.cached_tokens.zip(t.prompt_tokens).filter(|(_, p)| *p > 0).map(|(c, p)| {
        let v = 100.0 * c as f64 / p as f64;
        (v * 100.0).round() / 100.0
    });
    let ms = |v: Option<f64>| v.map(|s| (s * 1e6).round() / 1e3);
    CsvRow {
        user,
        turn: t.turn,
        status: match t.status {
            TurnStatus::Completed => "completed",
            TurnStatus::Failed => "failed",
        },
        request_id: guarded(&t.request_id),
        scheduled_s: Num(t.scheduled_s),
        sent_s: num(t.sent_s),
        first_token_s: num(t.first_token_s),
        last_token_s: num(t.last_token_s),
        ended_s: num(t.ended_s),
        ttft_ms: num(ms(sm_core::phases::sessions::ttft_s(t))),
        latency_ms: num(ms(sm_core::phases::sessions::latency_s(t))),
        prompt_tokens: t.prompt_tokens,
        cached_tokens: t.cached_tokens,
        cache_hit_pct: num(hit),
        output_tokens: t.output_tokens,
        tok_s: num(request_tok_s(t).map(|v| (v * 100.0).round() / 100.0)),
        first_answer_s: num(t.answer.first_answer_s.flatten()),
        reasoning_tokens: num(t.answer.reasoning_tokens),
        first_tool_call_s: num(t.answer.tool_call.as_ref().and_then(|c| c.first_tool_call_s)),
        tool_call_tokens: num(t.answer.tool_call.as_ref().map(|c| c.tool_call_tokens)),
        tool_args_valid: t.answer.tool_call.as_ref().and_then(|c| c.tool_args_valid),
        reason: guarded(&t.reason),
    }
}
