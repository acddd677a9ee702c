//! The replay phase's section of each view (methodology §13.5): the trace, then one row per time
//! scale — offered → achieved rate and the rate table's figures (a replay level is a rate level
//! of the trace's own arrivals), the prefix cache against the trace's ideal, the SLO verdict —
//! and `replay.csv`; with `--find-capacity`, the largest scale that meets the SLO heads the page
//! ([`answer`]).

use std::fmt::Write as _;

use maud::{Markup, html};
use sm_core::figures::{Figure, Unit};
use sm_core::phases::PhaseKind;
use sm_core::phases::rate::{LevelStatus, RateLevel, Saturation};
use sm_core::phases::replay::{PrefixReuse, ReplayLevel, ReplaySettings, ScaleVerdict};
use sm_core::record::RunRecord;

use super::rate::{goodput, latency_charts, noted, saturation_mark, table_html, table_markdown};
use crate::escape::{Text, markdown_cell};
use crate::format::{self, figure_named as shown, opt};

pub mod answer;
mod csv;

pub(super) use csv::csv;

/// The columns before the level's figures: which scale, its rate, how many requests completed.
const KEYS: [&str; 3] = ["Scale", "Offered req/s", "Completed"];
/// The columns after them; the verdict last, whose note (failures, cut requests, a level's
/// error) may be long and wraps.
const AFTER: [&str; 7] =
    ["Send lag p99", "In flight mean", "Goodput", "Cached of prompt", "Ideal reached", "SLO met", "Verdict"];

/// What the "searched" mark of a scale means, under the table where a level carries it.
pub const SEARCHED_NOTE: &str = "A scale marked \"searched\" was chosen by the capacity search (--find-capacity), \
not asked for with --time-scale.";

/// The keys, the figures the rate level's table heads ([`sm_core::figures`]), the columns after.
fn header(shown: &[&Figure<RateLevel>]) -> Vec<&'static str> {
    KEYS.into_iter().chain(shown.iter().filter_map(|f| f.label)).chain(AFTER).collect()
}

/// The rate level's headed figures this table of `levels` shows ([`super::rate::columns`]).
fn columns(levels: &[&ReplayLevel]) -> Vec<&'static Figure<RateLevel>> {
    super::rate::columns(levels.iter().map(|r| &r.level))
}

/// A time scale as people read it: `2×`, `3.08×`, `0.016×`.
pub fn scale(s: f64) -> String {
    let decimals = if s >= 10.0 {
        1
    } else if s >= 1.0 {
        2
    } else {
        3
    };
    let t = format!("{s:.decimals$}");
    let t = if t.contains('.') { t.trim_end_matches('0').trim_end_matches('.') } else { &t };
    format!("{t}×")
}

/// A level's cells, in [`header`] order; the verdict is the last.
fn cells(r: &ReplayLevel, columns: &[&Figure<RateLevel>]) -> Vec<String> {
    let l = &r.level;
    let key = if r.searched { format!("{} (searched)", scale(r.time_scale)) } else { scale(r.time_scale) };
    let offered = format::figure(Unit::ReqPerS, l.rate.per_second());
    if l.status != LevelStatus::Measured {
        let mut row = vec![format::NONE.to_string(); header(columns).len()];
        (row[0], row[1]) = (key, offered);
        *row.last_mut().expect("a verdict column") = l.reason.clone().unwrap_or_default();
        return row;
    }
    let completed = format!("{} of {}", l.counts.completed, l.counts.scheduled);
    let figures = columns.iter().map(|f| format::figure(f.unit, f.of(l)));
    let after = [
        shown(l, "send_lag_ms_p99"),
        opt(l.in_flight_mean, format::fixed1),
        goodput(l),
        opt(r.prefix.as_ref(), cached),
        format::figure(Unit::Percent, r.prefix.and_then(|p| p.reached_pct)),
        opt(r.verdict.as_ref(), slo_met),
        noted(l.verdict().map_or(format::NONE, Saturation::as_str), l),
    ];
    [key, offered, completed].into_iter().chain(figures).chain(after).collect()
}

/// The share of the prompt tokens the server served from its cache, over the requests that
/// reported it; how many did where not all.
fn cached(p: &PrefixReuse) -> String {
    if p.reported == 0 || p.prompt_tokens == 0 {
        return "not reported".into();
    }
    let pct = format::figure(Unit::Percent, Some(p.cached_tokens as f64 * 100.0 / p.prompt_tokens as f64));
    if p.reported < p.requests { format!("{pct} ({} of {} reported)", p.reported, p.requests) } else { pct }
}

fn slo_met(v: &ScaleVerdict) -> String {
    match (v.met, &v.limited_by) {
        (true, _) => "yes".into(),
        (false, Some(why)) => format!("no: {why}"),
        (false, None) => "no".into(),
    }
}

/// The trace and how it was sent, in a sentence.
fn caption(s: &ReplaySettings) -> String {
    let block = s.block_tokens.map(|b| format!(", {b} tokens a block")).unwrap_or_default();
    let slice = match (s.start_s, s.duration_s) {
        (None, None) => String::new(),
        (Some(a), None) => format!(" from {} on", format::secs_setting(a)),
        (None, Some(d)) => format!(" in its first {}", format::secs_setting(d)),
        (Some(a), Some(d)) => format!(" from {} for {}", format::secs_setting(a), format::secs_setting(d)),
    };
    let rate = opt(s.recorded_rps, |r| format!("{} req/s", format::figure(Unit::ReqPerS, Some(r))));
    let cap = s.max_concurrency.map_or_else(|| "no cap".into(), |c| format!("at most {c} in flight"));
    format!(
        "Trace {} ({}{block}): {} requests{slice}, recorded at {rate} over {}; {cap}. A scale of 2 sends it twice as \
         fast; latency is counted from each request's due time, so a late send is part of it (methodology §13.5).",
        s.file.name,
        s.format.name(),
        format::count(s.requests),
        format::secs1(s.recorded_span_s),
    )
}

fn row(r: &ReplayLevel, shown: &[&Figure<RateLevel>]) -> (bool, Vec<String>) {
    (r.level.verdict() == Some(Saturation::Saturated), cells(r, shown))
}

pub(super) fn html(record: &RunRecord) -> Markup {
    let Some(phase) = &record.phases.replay else { return html! {} };
    let levels = phase.by_scale();
    html! {
        section id="replay" {
            h2 { (PhaseKind::Replay.title()) }
            p class="caption" { (Text(&caption(&phase.settings))) }
            (charts(&levels))
            @let shown = columns(&levels);
            (table_html("rate replay", &header(&shown), levels.iter().map(|r| row(r, &shown))))
            @if levels.iter().any(|r| r.searched) { p class="caption" { (SEARCHED_NOTE) } }
        }
    }
}

/// Latency against the time scale: where the server stops keeping up with the trace sped up,
/// the line turns up. A scale measured twice (a resumed search) shows its last measurement.
fn charts(levels: &[&ReplayLevel]) -> Markup {
    let mut scales: Vec<f64> = levels.iter().map(|r| r.time_scale).collect();
    scales.dedup();
    let at = |s: f64| levels.iter().rev().find(|r| r.time_scale == s).map(|r| &r.level);
    let row = ("trace".to_string(), scales.iter().map(|&s| at(s)).collect());
    latency_charts("time scale", scales.iter().map(|&s| scale(s)).collect(), &[row])
}

pub(super) fn markdown(s: &mut String, record: &RunRecord) {
    let Some(phase) = &record.phases.replay else { return };
    let _ = writeln!(s, "## {}\n\n{}\n", PhaseKind::Replay.title(), markdown_cell(&caption(&phase.settings)));
    let levels = phase.by_scale();
    let shown = columns(&levels);
    table_markdown(s, &header(&shown), levels.iter().map(|r| cells(r, &shown)));
    if levels.iter().any(|r| r.searched) {
        let _ = writeln!(s, "{}\n", markdown_cell(SEARCHED_NOTE));
    }
}

pub(super) fn terminal(s: &mut String, record: &RunRecord, width: usize) {
    let Some(phase) = &record.phases.replay else { return };
    let _ = writeln!(s, "\n{} (latency from the due time)", PhaseKind::Replay.title());
    for r in phase.by_scale() {
        let _ = writeln!(s, "{}", crate::wrap::hanging(&line(r), width.max(40), 9));
    }
}

/// A level's console line: its scale, what it achieved, and its verdicts.
fn line(r: &ReplayLevel) -> String {
    let (l, c) = (&r.level, &r.level.counts);
    let key = format!("{:>7}{}", scale(r.time_scale), if r.searched { " (searched)" } else { "" });
    if l.status != LevelStatus::Measured {
        return format!("{key} {}", l.reason.as_deref().unwrap_or_default());
    }
    let saturation = saturation_mark(l);
    format!(
        "{key} {} req/s{saturation}: achieved {} req/s ({} of {} completed), TTFT p50/p99 {}/{}, {} tok/s, goodput {}, \
         cached {}, SLO met {}",
        format::figure(Unit::ReqPerS, l.rate.per_second()),
        shown(l, "achieved_rps"),
        c.completed,
        c.scheduled,
        shown(l, "ttft_ms_p50"),
        shown(l, "ttft_ms_p99"),
        shown(l, "output_tok_s"),
        goodput(l),
        opt(r.prefix.as_ref(), cached),
        opt(r.verdict.as_ref(), slo_met),
    )
}

#[cfg(test)]
mod tests;
