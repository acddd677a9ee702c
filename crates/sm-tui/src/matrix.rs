//! The decode-matrix panel: contexts down, concurrency across, each finished
//! cell its total tok/s on a heat-map colour, the cell in progress marked with
//! its live rate.

use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Paragraph};

use sm_core::record::{CellStatus, DecodeCell};

use crate::state::State;

/// Width of the context label column.
const LABEL_W: u16 = 6;
/// Narrowest column that still holds "ERROR" or "12.3k" with a gap.
const MIN_COL: u16 = 6;
const MAX_COL: u16 = 11;

/// Dark to bright: slow cells cool, fast cells hot.
const HEAT: [(u8, Color); 7] = [
    (24, Color::White),
    (30, Color::White),
    (36, Color::Black),
    (71, Color::Black),
    (142, Color::Black),
    (178, Color::Black),
    (208, Color::Black),
];

/// Rows the panel needs: the header, one per context, an error line when a cell failed, the borders.
pub fn height(s: &State) -> u16 {
    if s.contexts.is_empty() {
        return 0;
    }
    let errors = u16::from(s.cells.values().any(is_error));
    s.contexts.len() as u16 + 3 + errors
}

pub fn draw(frame: &mut Frame, area: Rect, s: &State) {
    if area.height == 0 {
        return;
    }
    let block = Block::bordered().title(" Decode matrix · total tok/s ");
    let inner = block.inner(area);
    frame.render_widget(block, area);
    if inner.width <= LABEL_W || s.concurrency.is_empty() {
        return;
    }
    let avail = inner.width - LABEL_W;
    let n = s.concurrency.len() as u16;
    let col = (avail / n).clamp(MIN_COL, MAX_COL);
    let shown = ((avail / col) as usize).min(s.concurrency.len());
    let conc = &s.concurrency[..shown];
    let (lo, hi) = range(s);
    let mut lines = Vec::with_capacity(s.contexts.len() + 2);
    let mut head = vec![Span::styled(format!("{:>w$}", "ctx", w = LABEL_W as usize - 1), dim()), Span::raw(" ")];
    head.extend(conc.iter().map(|c| Span::styled(format!("{:>w$}", format!("×{c}"), w = col as usize), dim())));
    if shown < s.concurrency.len() {
        head.push(Span::styled("…", dim()));
    }
    lines.push(Line::from(head));
    let (shown_rows, cut) = visible_rows(s, inner.height.saturating_sub(1) as usize);
    for (ctx, label) in &s.contexts[shown_rows.clone()] {
        let mut spans = vec![Span::styled(format!("{label:>w$} ", w = LABEL_W as usize - 1), bold())];
        for &c in conc {
            let current = s.current.is_some_and(|(cc, cn, _)| cc == *ctx && cn == c);
            let (text, style) = if current {
                current_cell(s, col)
            } else {
                match s.cells.get(&(*ctx, c)) {
                    Some(cell) => done_cell(cell, col, lo, hi),
                    None => ("·".to_string(), dim()),
                }
            };
            spans.push(Span::raw(" "));
            spans.push(Span::styled(format!("{text:>w$}", w = col as usize - 1), style));
        }
        lines.push(Line::from(spans));
    }
    if let Some(cut) = cut {
        lines.push(Line::styled(cut, Style::new().fg(Color::Yellow)));
    } else if let Some(cell) = s.cells.values().rfind(|c| is_error(c)) {
        let reason = cell.reason.as_deref().unwrap_or("no reason given");
        lines.push(Line::from(vec![
            Span::styled(format!("{} × {} ERROR: ", cell.label, cell.concurrency), Style::new().fg(Color::Red)),
            Span::raw(reason.to_string()),
        ]));
    }
    frame.render_widget(Paragraph::new(lines), inner);
}

/// The context rows that fit in `room` lines, and what to say about the others. When some must go,
/// the last line tells how many and where, and the rows kept are those around the cell in progress.
fn visible_rows(s: &State, room: usize) -> (std::ops::Range<usize>, Option<String>) {
    let n = s.contexts.len();
    if n <= room {
        return (0..n, None);
    }
    // one line goes to saying that rows are missing
    let fit = room.saturating_sub(1);
    let current = s.current.and_then(|(ctx, _, _)| s.contexts.iter().position(|(c, _)| *c == ctx)).unwrap_or(0);
    let start = (current + 1).saturating_sub(fit).min(n - fit);
    let (above, below) = (start, n - start - fit);
    let word = |k: usize| if k == 1 { "context" } else { "contexts" };
    let text = match (above, below) {
        (0, b) => format!("… +{b} more {} below", word(b)),
        (a, 0) => format!("… +{a} more {} above", word(a)),
        (a, b) => format!("… +{} more {} ({a} above, {b} below)", a + b, word(a + b)),
    };
    (start..start + fit, (room > 0).then_some(text))
}

fn is_error(cell: &DecodeCell) -> bool {
    matches!(cell.status(), CellStatus::Error | CellStatus::Loop)
}

/// The slowest and fastest valid cells: the ends of the colour scale.
fn range(s: &State) -> (f64, f64) {
    s.cells
        .values()
        .filter(|c| c.status() == CellStatus::Valid)
        .filter_map(|c| c.total_tok_s)
        .filter(|v| *v > 0.0)
        .fold((f64::INFINITY, 0.0), |(lo, hi), v| (lo.min(v), hi.max(v)))
}

/// The colour of a figure: log scale, because a matrix spans 1 to 100 streams.
pub fn heat(value: f64, lo: f64, hi: f64) -> (Color, Color) {
    let t = if hi > lo && value > 0.0 { ((value.ln() - lo.ln()) / (hi.ln() - lo.ln())).clamp(0.0, 1.0) } else { 1.0 };
    let (bg, fg) = HEAT[(t * (HEAT.len() - 1) as f64).round() as usize];
    (Color::Indexed(bg), fg)
}

fn done_cell(cell: &DecodeCell, col: u16, lo: f64, hi: f64) -> (String, Style) {
    let w = col as usize - 1;
    match cell.status() {
        CellStatus::Valid => {
            let v = cell.total_tok_s.unwrap_or(0.0);
            let (bg, fg) = heat(v, lo, hi);
            (figure(v, w), Style::new().bg(bg).fg(fg))
        }
        CellStatus::OverCapacity => (if w >= 9 { "over cap." } else { "over" }.to_string(), dim()),
        CellStatus::Error => ("ERROR".to_string(), Style::new().fg(Color::White).bg(Color::Red)),
        CellStatus::Loop => ("LOOP".to_string(), Style::new().fg(Color::White).bg(Color::Red)),
        CellStatus::Skipped => ("skipped".chars().take(w).collect(), dim()),
    }
}

fn current_cell(s: &State, col: u16) -> (String, Style) {
    let w = col as usize - 1;
    let style = Style::new().fg(Color::Yellow).add_modifier(Modifier::BOLD);
    match s.live_rate() {
        Some(v) => (format!("▸{}", figure(v, w.saturating_sub(1))), style),
        None => ("▸ …".to_string(), style),
    }
}

/// A tok/s figure in at most `w` characters.
pub fn figure(v: f64, w: usize) -> String {
    let one = format!("{v:.1}");
    if one.len() <= w {
        return one;
    }
    let whole = format!("{v:.0}");
    if whole.len() <= w {
        return whole;
    }
    format!("{:.0}k", v / 1000.0)
}

fn dim() -> Style {
    Style::new().fg(Color::DarkGray)
}

fn bold() -> Style {
    Style::new().add_modifier(Modifier::BOLD)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn figures_fit_their_column() {
        assert_eq!(figure(123.45, 8), "123.5");
        assert_eq!(figure(12345.6, 5), "12346");
        assert_eq!(figure(123456.0, 5), "123k");
    }

    #[test]
    fn heat_runs_from_cool_to_hot() {
        assert_eq!(heat(10.0, 10.0, 1000.0).0, Color::Indexed(24));
        assert_eq!(heat(1000.0, 10.0, 1000.0).0, Color::Indexed(208));
        assert_eq!(heat(100.0, 10.0, 1000.0).0, Color::Indexed(71));
    }
}
