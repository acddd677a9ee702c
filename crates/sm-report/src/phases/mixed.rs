//! The mixed-prefill phase's section of each view (methodology §13.3): per level the idle and
//! loaded TTFT of the fresh prompt and the slowdown, one row per probe with the background's
//! tok/s before / during / after and its longest stall, and the timeline of the median probe.

use std::fmt::Write;

use maud::{Markup, html};
use serde::Serialize;
use sm_core::figures::Figures;
use sm_core::phases::mixed::{IdleSource, MixedLevel, MixedProbe, Timeline};
use sm_core::plan::shown_context;
use sm_core::record::{PlanKind, RunRecord};

use crate::csv::table::{self, Ending, Guarded, Num, Table, guarded, num};
use crate::escape::{Text, markdown_cell};
use crate::format::{self, opt};
use crate::telemetry::CsvColumns;

fn levels(record: &RunRecord) -> &[MixedLevel] {
    record.phases.mixed_prefill.as_ref().map_or(&[], |m| m.levels.as_slice())
}

/// "8K fresh prompt · 4 streams at 1K", each context named as every view names it.
fn title(record: &RunRecord, l: &MixedLevel) -> String {
    let named = |ctx| shown_context(&record.plan, PlanKind::Decode, ctx);
    format!(
        "{} fresh prompt · {} background streams at {}",
        named(l.prompt_context),
        l.background,
        named(l.background_context)
    )
}

fn idle_text(l: &MixedLevel) -> String {
    match &l.idle {
        Some(i) => {
            let from = match i.source {
                IdleSource::Measured => "",
                IdleSource::PrefillRow => " (the prefill row)",
            };
            format!("{}{from}", format::ms(i.ttft_ms))
        }
        None => format::NONE.into(),
    }
}

fn slowdown(x: f64) -> String {
    format!("{x:.2}×")
}

/// The probe's number, the figures its figure table heads ([`sm_core::figures`]: a probe figure
/// given a heading there is a column here), and whether decode was steady.
fn header() -> Vec<&'static str> {
    std::iter::once("Probe").chain(MixedProbe::headed().filter_map(|f| f.label)).chain(["Steady"]).collect()
}

/// A probe's cells as the page and Markdown print them, in [`header`] order; a failed probe says
/// why after its number.
fn probe_cells(n: usize, p: &MixedProbe) -> Vec<String> {
    if let Some(e) = &p.error {
        let mut cells = vec![format::NONE.to_string(); header().len()];
        cells[0] = n.to_string();
        cells[1] = format!("failed: {e}");
        return cells;
    }
    let steady = if p.steady { "yes" } else { "no (sent after the wait)" };
    let figures = MixedProbe::headed().map(|f| format::figure(f.unit, f.of(p)));
    std::iter::once(n.to_string()).chain(figures).chain([steady.to_string()]).collect()
}

fn summary(l: &MixedLevel) -> String {
    let mut s = format!(
        "idle TTFT {} · loaded TTFT median {} · slowdown {} · {} of {} probes",
        idle_text(l),
        opt(l.ttft_ms_median, format::ms),
        opt(l.slowdown, slowdown),
        l.probes.len(),
        l.probes_planned
    );
    if let Some(e) = &l.error {
        let _ = write!(s, " · {e}");
    }
    s
}

pub(super) fn html(record: &RunRecord) -> Markup {
    let levels = levels(record);
    if levels.is_empty() {
        return html! {};
    }
    html! {
        h2 id="mixed-prefill" { "A new user under load" }
        p class="caption" {
            "a fresh prompt's TTFT while background streams decode, against the same prompt on the idle server; the \
             background's tok/s before (the window before the send), during (send → first token) and after (the \
             window after the first token)"
        }
        @for l in levels { (level_html(record, l)) }
    }
}

/// A level's heading and summary, its table of probes and the timeline of its median probe.
fn level_html(record: &RunRecord, l: &MixedLevel) -> Markup {
    html! {
        h3 { (Text(&title(record, l))) }
        p class="caption" { (Text(&summary(l))) }
        div class="scroll" {
            table class="mixed" {
                thead { tr { @for h in header() { th { (h) } } } }
                tbody {
                    @for (i, p) in l.probes.iter().enumerate() {
                        tr { @for c in probe_cells(i + 1, p) { td class="num" { (Text(&c)) } } }
                    }
                }
            }
        }
        @if let Some((n, p, tl)) = median_probe(l) {
            @let what = format!(
                "Background tokens per {} ms around probe {n} (TTFT {})",
                tl.bin_ms,
                opt(p.ttft_ms, format::ms)
            );
            div class="charts one" { figure { (timeline_svg(&what, tl)) } }
        }
    }
}

/// The valid probe whose TTFT is nearest the level's median, with its number and timeline.
fn median_probe(l: &MixedLevel) -> Option<(usize, &MixedProbe, &Timeline)> {
    let median = l.ttft_ms_median?;
    l.probes
        .iter()
        .enumerate()
        .filter(|(_, p)| p.is_valid())
        .filter_map(|(i, p)| Some((i + 1, p, p.timeline.as_ref()?)))
        .min_by(|a, b| {
            let d = |p: &MixedProbe| (p.ttft_ms.unwrap_or(f64::INFINITY) - median).abs();
            d(a.1).total_cmp(&d(b.1))
        })
}

const W: f64 = 560.0;
const H: f64 = 200.0;
const LEFT: f64 = 56.0;
const RIGHT: f64 = 12.0;
const TOP: f64 = 28.0;
const BOTTOM: f64 = 36.0;

/// A coordinate as the charts write it.
fn d(v: f64, digits: usize) -> String {
    format!("{v:.digits$}")
}

/// The timeline as an inline SVG: one bar per bin, dashed lines at the probe's send and first token.
pub(crate) fn timeline_svg(what: &str, tl: &Timeline) -> Markup {
    let n = tl.tokens.len().max(1) as f64;
    let max = tl.tokens.iter().copied().max().unwrap_or(0).max(1) as f64;
    let (pw, ph) = (W - LEFT - RIGHT, H - TOP - BOTTOM);
    let bin_s = tl.bin_ms / 1000.0;
    let x_at = |t: f64| LEFT + ((t - tl.start_s) / (bin_s * n)).clamp(0.0, 1.0) * pw;
    let bw = pw / n;
    let base = TOP + ph;
    // the send's label ends at its line, the first token's starts at its own: close lines stay legible
    let marks = [(0.0, "sent", "end", -3.0), (tl.first_token_s, "first token", "start", 3.0)];
    let ends = [(tl.start_s, "start"), (tl.start_s + bin_s * n, "end")];
    html! {
        svg class="chart" viewBox={ "0 0 " (W) " " (H) } role="img" xmlns="http://www.w3.org/2000/svg" {
            title { (Text(what)) }
            text class="ct" x=(LEFT) y="16" { (Text(what)) }
            @for (i, &v) in tl.tokens.iter().enumerate() {
                @let h = v as f64 / max * ph;
                rect class="s0" x=(d(LEFT + i as f64 * bw, 1)) y=(d(TOP + ph - h, 1)) width=(d((bw - 0.5).max(0.3), 2))
                    height=(d(h, 1)) { title { (v) } }
            }
            line class="grid" x1=(LEFT) x2=(d(W - RIGHT, 1)) y1=(d(base, 1)) y2=(d(base, 1)) {}
            text class="tick" x=(d(LEFT - 4.0, 1)) y=(d(TOP + 4.0, 1)) text-anchor="end" { (max as u64) }
            @for (t, name, anchor, dx) in marks {
                @let x = x_at(t);
                line class="limit" x1=(d(x, 1)) x2=(d(x, 1)) y1=(TOP) y2=(d(base, 1)) {}
                text class="limit" x=(d(x + dx, 1)) y=(d(base + 12.0, 1)) text-anchor=(anchor) { (name) }
            }
            @for (t, anchor) in ends {
                text class="axis" x=(d(x_at(t), 1)) y=(d(H - 6.0, 1)) text-anchor=(anchor) {
                    (crate::format::signed1(t)) " s"
                }
            }
        }
    }
}

pub(super) fn markdown(s: &mut String, record: &RunRecord) {
    let levels = levels(record);
    if levels.is_empty() {
        return;
    }
    s.push_str("## A new user under load\n\n");
    for l in levels {
        let _ = writeln!(s, "### {}\n\n{}\n", markdown_cell(&title(record, l)), markdown_cell(&summary(l)));
        let header = header();
        let _ = writeln!(s, "| {} |", header.join(" | "));
        let _ = writeln!(s, "|{}", "---:|".repeat(header.len()));
        for (i, p) in l.probes.iter().enumerate() {
            let cells: Vec<String> = probe_cells(i + 1, p).iter().map(|c| markdown_cell(c)).collect();
            let _ = writeln!(s, "| {} |", cells.join(" | "));
        }
        s.push('\n');
    }
}

pub(super) fn terminal(s: &mut String, record: &RunRecord, width: usize) {
    let levels = levels(record);
    if levels.is_empty() {
        return;
    }
    let _ = writeln!(s, "\nA new user under load");
    for l in levels {
        let _ = writeln!(s, "{}", clip(&title(record, l), width));
        let _ = writeln!(s, "  {}", clip(&summary(l), width.saturating_sub(2)));
        for (i, p) in l.probes.iter().enumerate() {
            let n = i + 1;
            let f = |name| format::figure_named(p, name);
            let line = match &p.error {
                Some(e) => format!("  probe {n}: failed: {e}"),
                None => format!(
                    "  probe {n}: TTFT {} ({}), background {} → {} → {} tok/s, stall {}",
                    f("ttft_ms"),
                    f("slowdown"),
                    f("before_tok_s"),
                    f("during_tok_s"),
                    f("after_tok_s"),
                    f("longest_stall_ms")
                ),
            };
            let _ = writeln!(s, "{}", clip(&line, width));
        }
    }
}

fn clip(line: &str, width: usize) -> String {
    if line.chars().count() <= width {
        line.to_string()
    } else {
        line.chars().take(width.saturating_sub(1)).chain(['…']).collect()
    }
}

/// Which probe a row of mixed_prefill.csv is.
#[derive(Serialize, Default)]
struct CsvKeys {
    prompt_context: u64,
    background: u32,
    background_context: u64,
    probe: usize,
}

/// The columns after a probe's figures: whether its level was steady, the level's window, the
/// probe's error.
#[derive(Serialize, Default)]
struct CsvTail<'a> {
    steady: bool,
    window_s: Num,
    error: Guarded<&'a str>,
}

/// The level's idle TTFT, in the column after the probe's TTFT it divides (where the file has
/// always had it).
const IDLE: (&str, &str) = ("ttft_ms", "idle_ttft_ms");

/// A probe's figure table in order, its level's idle TTFT after its own: `(name, value)`, the
/// values of `row`'s level and probe (none for the header).
fn csv_figures(row: Option<(&MixedLevel, &MixedProbe)>) -> Vec<(&'static str, Option<Num>)> {
    let idle = MixedLevel::figure(IDLE.1).expect("the mixed level's table has the idle TTFT");
    let mut columns = Vec::new();
    for f in MixedProbe::FIGURES {
        columns.push((f.name, num(row.and_then(|(_, p)| f.of(p)))));
        if f.name == IDLE.0 {
            columns.push((idle.name, num(row.and_then(|(l, _)| idle.of(l)))));
        }
    }
    columns
}

type CsvRow<'a> = (CsvKeys, Vec<Option<Num>>, CsvTail<'a>, CsvColumns);

/// The row of `l`'s `i`-th probe `p`, with its level's columns (the idle TTFT, the window, the
/// level's telemetry as rate.csv's, [`CsvColumns`]).
fn csv_row<'a>(l: &MixedLevel, i: usize, p: &'a MixedProbe) -> CsvRow<'a> {
    let keys = CsvKeys {
        prompt_context: l.prompt_context,
        background: l.background,
        background_context: l.background_context,
        probe: i + 1,
    };
    let figures = csv_figures(Some((l, p))).into_iter().map(|(_, v)| v).collect();
    let tail = CsvTail { steady: p.steady, window_s: Num(l.window_s), error: guarded(&p.error) };
    (keys, figures, tail, CsvColumns::of(&l.telemetry))
}

/// mixed_prefill.csv's header: the keys, the figures, the tail, the telemetry's columns.
fn csv_header() -> Vec<String> {
    let figures = csv_figures(None).into_iter().map(|(name, _)| name.to_string());
    let header = table::header::<CsvKeys>().into_iter().chain(figures).chain(table::header::<CsvTail>());
    header.chain(table::header::<CsvColumns>()).collect()
}

/// The phase's CSV file, one row per probe; `None` when the phase did not run.
pub(super) fn csv(record: &RunRecord) -> Option<String> {
    let section = record.phases.mixed_prefill.as_ref()?;
    let probes = section.levels.iter().flat_map(|l| l.probes.iter().enumerate().map(move |(i, p)| (l, i, p)));
    let mut file = Table::new(csv_header(), Ending::Lf);
    probes.for_each(|(l, i, p)| file.row(csv_row(l, i, p)));
    Some(file.finish())
}
