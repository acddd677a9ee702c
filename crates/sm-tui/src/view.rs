//! The screen: header, current step (with the server panel beside it when there
//! is room), the decode matrix, the event log and the footer. Panels that do not
//! fit are dropped, the log first, so 80×24 and smaller still show the essentials.

use std::time::{Duration, Instant};

use ratatui::Frame;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Gauge, Paragraph, Sparkline};

use sm_core::Tokens;
use sm_core::record::RunStatus;
use sm_progress::{LiveSample, Severity, Step};

use crate::matrix;
use crate::state::State;

/// Below this width the server panel joins the step panel as one line.
const SERVER_PANEL_MIN_WIDTH: u16 = 72;
const SERVER_PANEL_W: u16 = 24;
/// The live figures need about this many columns on one line; a narrower step panel splits them over two.
const FIGURES_ONE_LINE: u16 = 80;
/// The step panel never gives up its headline and gauge (plus borders) to the matrix.
const MIN_STEP_H: u16 = 4;
/// Header lines kept when its facts wrap on a narrow terminal.
const MAX_HEADER_LINES: usize = 4;
const FOOTER_H: u16 = 2;

pub fn draw(frame: &mut Frame, s: &State, now: Instant) {
    let area = frame.area();
    let side = area.width >= SERVER_PANEL_MIN_WIDTH;
    let mut header_lines = header_lines(s, area.width);
    // a short terminal keeps its rows for the step and the matrix; the KV budget line goes first
    let max_header = if area.height >= 20 { MAX_HEADER_LINES } else { MAX_HEADER_LINES - 1 };
    header_lines.truncate(max_header.min(usize::from(area.height.saturating_sub(FOOTER_H))));
    let header_h = header_lines.len() as u16;
    let rest = area.height.saturating_sub(header_h + FOOTER_H);
    // the matrix is worth more than the sparkline and the second figures row, the log is worth least
    let step_inner_w = if side { area.width.saturating_sub(SERVER_PANEL_W) } else { area.width }.saturating_sub(2);
    let step_h =
        step_height(area.height, step_inner_w, side).min(rest.saturating_sub(matrix::height(s))).max(MIN_STEP_H);
    let step_h = step_h.min(rest);
    let grid_h = matrix::height(s).min(rest - step_h);
    let [header, mid, grid, log, footer] = Layout::vertical([
        Constraint::Length(header_h),
        Constraint::Length(step_h),
        Constraint::Length(grid_h),
        Constraint::Length(rest - step_h - grid_h),
        Constraint::Length(FOOTER_H),
    ])
    .areas(area);
    frame.render_widget(Paragraph::new(header_lines), header);
    if side {
        let [step, server] = Layout::horizontal([Constraint::Min(0), Constraint::Length(SERVER_PANEL_W)]).areas(mid);
        draw_step(frame, step, s, now, false);
        draw_server(frame, server, s);
    } else {
        draw_step(frame, mid, s, now, true);
    }
    matrix::draw(frame, grid, s);
    if log.height >= 3 {
        draw_events(frame, log, s);
    }
    draw_footer(frame, footer, s, now);
}

/// Rows the step panel would like: borders, headline, gauge, the live figures (one or two rows), the
/// server line when there is no server panel, and the sparkline when the terminal is tall enough.
fn step_height(height: u16, inner_width: u16, side: bool) -> u16 {
    let figures = if inner_width < FIGURES_ONE_LINE { 2 } else { 1 };
    2 + 1 + 1 + figures + u16::from(!side) + u16::from(height >= 20)
}

/// The header's facts, wrapped at their ` · ` separators so that a narrow terminal loses none of them
/// (the KV budget's source used to run off the edge at 80 columns).
fn header_lines(s: &State, width: u16) -> Vec<Line<'static>> {
    let Some(server) = &s.server else {
        return vec![Line::from("speedmatrix · discovering the server…")];
    };
    let first = vec![
        vec![Span::styled("speedmatrix", Style::new().add_modifier(Modifier::BOLD).fg(Color::Cyan))],
        vec![Span::raw(format!(
            "{} {}",
            server.engine,
            server.engine_version.as_deref().unwrap_or("(version unknown)")
        ))],
        vec![Span::raw(server.model.clone())],
        vec![Span::raw(server.url.clone())],
    ];
    let kv = server.kv_budget_tokens.map_or("unknown".to_string(), |k| Tokens(k).to_string());
    let seqs = server.max_num_seqs.map_or("unknown".to_string(), |n| n.to_string());
    let plan = if s.phases_only() {
        let names: Vec<&str> = s.phases.iter().map(|k| k.name()).collect();
        vec![Span::raw("load phases "), Span::styled(names.join(", "), Style::new().add_modifier(Modifier::BOLD))]
    } else {
        vec![
            Span::raw("cells "),
            Span::styled(format!("{} planned", s.planned_cells), Style::new().add_modifier(Modifier::BOLD)),
            Span::raw(format!(", {} over cap., ", s.over_capacity)),
            Span::styled(format!("{} done", s.cells_done()), Style::new().fg(Color::Green)),
        ]
    };
    let second = vec![
        plan,
        vec![Span::raw(format!("max seqs {seqs}"))],
        vec![Span::raw(format!("KV {kv} tok ({})", server.kv_budget_source))],
    ];
    let mut lines = wrap_segments(first, width);
    lines.extend(wrap_segments(second, width));
    lines
}

/// Joins segments with ` · `, starting a new line where the next one would not fit in `width`.
fn wrap_segments(segments: Vec<Vec<Span<'static>>>, width: u16) -> Vec<Line<'static>> {
    let width = usize::from(width);
    let mut lines = Vec::new();
    let mut line: Vec<Span<'static>> = Vec::new();
    let mut used = 0;
    for seg in segments {
        let w: usize = seg.iter().map(Span::width).sum();
        if !line.is_empty() && used + 3 + w > width {
            lines.push(Line::from(std::mem::take(&mut line)));
            used = 0;
        }
        if !line.is_empty() {
            line.push(Span::raw(" · "));
            used += 3;
        }
        line.extend(seg);
        used += w;
    }
    if !line.is_empty() {
        lines.push(Line::from(line));
    }
    lines
}

/// The step's headline and, where it has one, the gauge ratio and its label.
fn step_text(s: &State, now: Instant) -> (String, Option<(f64, String)>) {
    let since = now.saturating_duration_since(s.step_since);
    if let Some(status) = s.finished {
        let word = match status {
            RunStatus::Complete => "Run complete",
            RunStatus::Interrupted => "Run interrupted: finished cells are kept",
            RunStatus::Failed => "Run failed",
            RunStatus::Planned => "Planned (dry run)",
            RunStatus::Running => "Running",
        };
        return (format!("{word} · writing the files"), None);
    }
    let warm = if s.warmup_cell { "Decode warm-up (not measured) " } else { "" };
    match &s.step {
        None => ("Starting".into(), None),
        Some(Step::Sizing) => (format!("Sizing prompts to exact lengths · {}", dur(since)), None),
        Some(Step::Warmup) => (format!("Warm-up · {}", dur(since)), None),
        Some(Step::Prefill { context, label, index, total, started }) => {
            let elapsed = now.saturating_duration_since(*started);
            let eta =
                s.prefill_eta(*context, *started, now).map_or("ETA unknown".into(), |d| format!("ETA {}", dur(d)));
            (format!("Prefill of context {label} ({index}/{total}) · {} · {eta}", dur(elapsed)), None)
        }
        Some(Step::Scout { label, concurrency, .. }) => {
            (format!("{warm}Scout {label} × {concurrency}: warming the prefix cache · {}", dur(since)), None)
        }
        Some(Step::Ramp { label, concurrency, waiting_for, .. }) => {
            let gauge = s.live.as_ref().map(|l| {
                let ratio = l.streams_with_token as f64 / f64::from((*concurrency).max(1));
                (ratio, format!("streams {}/{}", l.streams_with_token, concurrency))
            });
            // the reason says what is awaited in its own words ("running 6/8", "waiting for streams 7/8")
            (format!("{warm}Ramp-up {label} × {concurrency} · {waiting_for} · {}", dur(since)), gauge)
        }
        Some(Step::Measuring { label, concurrency, started, window, .. }) => {
            let elapsed = now.saturating_duration_since(*started).min(*window);
            let ratio = elapsed.as_secs_f64() / window.as_secs_f64().max(1e-9);
            let gauge = (ratio, format!("{:.1} s of {:.0} s", elapsed.as_secs_f64(), window.as_secs_f64()));
            (format!("{warm}Measuring {label} × {concurrency}"), Some(gauge))
        }
        Some(Step::Drain { label, concurrency, .. }) => {
            (format!("{warm}Draining {label} × {concurrency}: waiting for the server to idle · {}", dur(since)), None)
        }
        Some(Step::Phase { kind, what, started, length }) => {
            let elapsed = now.saturating_duration_since(*started);
            let gauge = length.filter(|l| !l.is_zero()).map(|l| {
                let shown = elapsed.min(l);
                (
                    shown.as_secs_f64() / l.as_secs_f64(),
                    format!("{:.1} s of {:.0} s", shown.as_secs_f64(), l.as_secs_f64()),
                )
            });
            let tail = if gauge.is_some() { String::new() } else { format!(" · {}", dur(elapsed)) };
            (format!("{kind}: {what}{tail}"), gauge)
        }
    }
}

fn draw_step(frame: &mut Frame, area: Rect, s: &State, now: Instant, server_line: bool) {
    let block = Block::bordered().title(" Now ");
    let inner = block.inner(area);
    frame.render_widget(block, area);
    let (text, gauge) = step_text(s, now);
    let rows: Vec<Rect> = (0..inner.height).map(|i| Rect { y: inner.y + i, height: 1, ..inner }).collect();
    if rows.is_empty() {
        return;
    }
    frame.render_widget(Paragraph::new(Line::styled(text, Style::new().add_modifier(Modifier::BOLD))), rows[0]);
    if let Some((ratio, label)) = gauge
        && rows.len() > 1
    {
        let g = Gauge::default()
            .gauge_style(Style::new().fg(Color::Cyan).bg(Color::Black))
            .ratio(ratio.clamp(0.0, 1.0))
            .label(label);
        frame.render_widget(g, rows[1]);
    }
    // below the gauge, most important first: the figures, the server line, the latencies when they
    // needed a line of their own
    let mut texts = s.live.as_ref().map_or_else(|| vec![String::new()], |live| figure_lines(s, live, inner.width));
    if server_line {
        texts.insert(1, server_text(s).join(" · "));
    }
    let mut next = 2;
    for text in texts {
        if next < rows.len() {
            frame.render_widget(Paragraph::new(text), rows[next]);
        }
        next += 1;
    }
    if next < rows.len() && !s.rates.is_empty() {
        let width = rows[next].width as usize;
        let data: Vec<u64> = s.rates.iter().rev().take(width).rev().map(|r| r.round() as u64).collect();
        frame.render_widget(Sparkline::default().data(&data).style(Style::new().fg(Color::Green)), rows[next]);
    }
}

/// The live figures: one line when it fits, else rate and streams, then the latencies, and the
/// waits for the answer and the tool call on a line of their own where the latencies still do not
/// fit, so that nothing is cut off at the panel's edge.
fn figure_lines(s: &State, live: &LiveSample, width: u16) -> Vec<String> {
    let rate = s.live_rate().map_or("–".into(), |r| format!("{r:.1}"));
    let ms = |v: Option<f64>| v.map_or("–".to_string(), |v| format!("{v:.1} ms"));
    let rate = format!("{rate} tok/s total");
    // a reasoning model's users wait past the thinking: the answer's wait beside the first token's;
    // a run with tools: the wait for the first tool call, once one came
    let waits: Vec<String> = [("TTFA", live.ttfa_ms_p50), ("TTFTC", live.ttftc_ms_p50)]
        .into_iter()
        .filter_map(|(name, v)| v.map(|v| format!("{name} p50 {}", ms(Some(v)))))
        .collect();
    let (ttft, tbt) = (format!("TTFT p50 {}", ms(live.ttft_ms_p50)), format!("TBT p50 {}", ms(live.tbt_ms_p50)));
    let mut parts = vec![ttft.clone()];
    parts.extend(waits.iter().cloned());
    parts.push(tbt.clone());
    let latency = parts.join(" · ");
    let streams = format!("streams {}/{}", live.streams_with_token, live.concurrency);
    let one = format!("{rate} · {latency} · {streams}");
    let fits = |line: &str| line.chars().count() <= usize::from(width);
    if fits(&one) {
        return vec![one];
    }
    if fits(&latency) || waits.is_empty() {
        return vec![format!("{rate} · {streams}"), latency];
    }
    vec![format!("{rate} · {streams}"), format!("{ttft} · {tbt}"), waits.join(" · ")]
}

/// Running, waiting and KV usage from the server's /metrics, as the last sample saw them.
fn server_text(s: &State) -> Vec<String> {
    let metrics = s.server.as_ref().is_some_and(|i| i.metrics_available);
    match s.live.as_ref().and_then(|l| l.server.as_ref()) {
        Some(st) => vec![
            format!("running {:.0}", st.running),
            format!("waiting {:.0}", st.waiting),
            st.kv_usage.map_or("KV usage –".into(), |k| format!("KV usage {:.0}%", k * 100.0)),
        ],
        None if !metrics => vec!["no /metrics".into()],
        // sampled only while a decode cell runs
        None => vec!["running –".into(), "waiting –".into(), "KV usage –".into()],
    }
}

fn draw_server(frame: &mut Frame, area: Rect, s: &State) {
    let block = Block::bordered().title(" Server ");
    let inner = block.inner(area);
    frame.render_widget(block, area);
    let lines: Vec<Line> = server_text(s).into_iter().map(Line::from).collect();
    let n = lines.len() as u16;
    frame.render_widget(Paragraph::new(lines), inner);
    let kv = s.live.as_ref().and_then(|l| l.server.as_ref()).and_then(|st| st.kv_usage);
    if let Some(kv) = kv
        && inner.height > n
    {
        let row = Rect { y: inner.y + n, height: 1, ..inner };
        let g = Gauge::default().gauge_style(Style::new().fg(Color::Magenta)).ratio(kv.clamp(0.0, 1.0)).label("KV");
        frame.render_widget(g, row);
    }
}

fn draw_events(frame: &mut Frame, area: Rect, s: &State) {
    let block = Block::bordered().title(" Events ");
    let inner = block.inner(area);
    frame.render_widget(block, area);
    let n = inner.height as usize;
    let lines: Vec<Line> = s
        .events
        .iter()
        .rev()
        .take(n)
        .rev()
        .map(|e| {
            let style = match e.severity {
                Severity::Error => Style::new().fg(Color::Red),
                Severity::Warning => Style::new().fg(Color::Yellow),
                Severity::Info => Style::new(),
            };
            Line::from(vec![
                Span::styled(format!("{:7.1}s ", e.at_s), Style::new().fg(Color::DarkGray)),
                Span::styled(e.text.clone(), style),
            ])
        })
        .collect();
    frame.render_widget(Paragraph::new(lines), inner);
}

fn draw_footer(frame: &mut Frame, area: Rect, s: &State, now: Instant) {
    let [bar, help] = Layout::vertical([Constraint::Length(1), Constraint::Length(1)]).areas(area);
    let elapsed = now.saturating_duration_since(s.started);
    let eta = s.eta(now).map_or("done".to_string(), |d| format!("ETA {}", dur(d)));
    let label = if s.phases_only() {
        // a phase's length depends on the server (a saturated sweep stops early): no ETA
        format!("load phases · elapsed {}", dur(elapsed))
    } else {
        format!(
            "cells {}/{} · prefill {}/{} · elapsed {} · {eta}",
            s.cells_done().min(s.planned_cells),
            s.planned_cells,
            s.prefill_done_count(),
            s.planned_prefill,
            dur(elapsed)
        )
    };
    let g =
        Gauge::default().gauge_style(Style::new().fg(Color::Green).bg(Color::Black)).ratio(s.progress()).label(label);
    frame.render_widget(g, bar);
    let line = match &s.notice {
        Some(n) => Line::styled(n.text(), Style::new().fg(Color::Yellow).add_modifier(Modifier::BOLD)),
        None => Line::from(vec![
            key("q"),
            Span::raw(" finish after this cell  "),
            key("s"),
            Span::raw(" skip this cell  "),
            key("Ctrl-C"),
            Span::raw(" stop now"),
        ]),
    };
    frame.render_widget(Paragraph::new(line), help);
}

fn key(k: &str) -> Span<'static> {
    Span::styled(k.to_string(), Style::new().add_modifier(Modifier::BOLD | Modifier::REVERSED))
}

/// 42s, 3m 05s, 1h 02m.
pub fn dur(d: Duration) -> String {
    let s = d.as_secs();
    match s {
        0..60 => format!("{s}s"),
        60..3600 => format!("{}m {:02}s", s / 60, s % 60),
        _ => format!("{}h {:02}m", s / 3600, (s % 3600) / 60),
    }
}
