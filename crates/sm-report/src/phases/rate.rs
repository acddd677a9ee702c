//! The rate phase's section of each view (methodology §13.1): per row (context or prompts file) a
//! table of its levels — offered → achieved rate, latency from the due time, throughput,
//! concurrency, goodput and whether the server kept up — and `rate.csv`, one line per level.

use std::fmt::Write as _;

use maud::{Markup, html};
use serde::Serialize;
use sm_core::figures::{Figure, Figures};

use crate::format::figure_named as shown;
use sm_core::phases::rate::{LevelStatus, RateLevel, RatePhase, RequestRate, Saturation};
use sm_core::record::RunRecord;

use crate::csv::table::{self, Ending, Guarded, Num, Table, finite, guarded};
use crate::escape::{Text, markdown_cell};
use crate::svg::{Chart, Series};
use crate::telemetry::CsvColumns;

/// The rows of the phase, in order: `(label, levels)`.
fn rows(phase: &RatePhase) -> Vec<(&str, Vec<&RateLevel>)> {
    let mut rows: Vec<(&str, Vec<&RateLevel>)> = Vec::new();
    for l in &phase.levels {
        match rows.iter_mut().find(|(label, _)| *label == l.label) {
            Some((_, levels)) => levels.push(l),
            None => rows.push((&l.label, vec![l])),
        }
    }
    for (_, levels) in &mut rows {
        levels.sort_by(|a, b| a.rate.order().total_cmp(&b.rate.order()));
    }
    rows
}

/// The columns before the level's figures: which level, and how many of its requests completed.
const KEYS: [&str; 2] = ["Offered req/s", "Completed"];
/// The columns after them: concurrency, late sends, goodput, and the verdict (last, whose text, a
/// level's error, may be long and wraps).
const AFTER: [&str; 4] = ["In flight mean / max", "Late sends", "Goodput", "Kept up"];

/// The figures the level's figure table heads ([`sm_core::figures`]: a figure given a heading there
/// is a column here) that the table of `levels` shows.
pub(super) fn columns<'a>(levels: impl Iterator<Item = &'a RateLevel> + Clone) -> Vec<&'static Figure<RateLevel>> {
    super::shown(levels)
}

/// The keys, the figures [`columns`] chose, then the columns after them.
fn header(shown: &[&Figure<RateLevel>]) -> Vec<&'static str> {
    KEYS.into_iter().chain(shown.iter().filter_map(|f| f.label)).chain(AFTER).collect()
}

/// A level's cells, in [`header`] order, as text; the verdict is the last. The figures rest on the
/// completed requests, so their count is shown beside them; goodput is a share of the requests
/// the server answered or failed.
fn cells(l: &RateLevel, shown: &[&Figure<RateLevel>]) -> Vec<String> {
    let offered = l.rate.to_string();
    if l.status != LevelStatus::Measured {
        let mut row = vec!["—".to_string(); header(shown).len()];
        row[0] = offered;
        *row.last_mut().expect("a verdict column") = l.reason.clone().unwrap_or_default();
        return row;
    }
    let flight = match (l.in_flight_mean, l.in_flight_max) {
        (Some(m), Some(x)) => format!("{m:.1} / {x}"),
        _ => "—".into(),
    };
    let late = format!("{} of {}", l.counts.late, l.counts.scheduled);
    let completed = format!("{} of {}", l.counts.completed, l.counts.scheduled);
    let figures = shown.iter().map(|f| crate::format::figure(f.unit, f.of(l)));
    [offered, completed].into_iter().chain(figures).chain([flight, late, goodput(l), kept_up(l)]).collect()
}

/// Goodput with the count it is a share of: the requests the server answered or failed
/// (methodology §13.1).
pub(super) fn goodput(l: &RateLevel) -> String {
    let judged = l.counts.completed + l.counts.failed;
    match l.goodput_pct.filter(|_| judged > 0) {
        Some(g) => format!("{} % of {judged}", crate::format::whole(g)),
        None => "—".into(),
    }
}

/// The verdict cell: "yes", "saturated" or "unknown", and what a reader must know beside it.
fn kept_up(l: &RateLevel) -> String {
    let verdict = match l.verdict() {
        Some(Saturation::KeptUp) | None => "yes",
        Some(Saturation::Saturated) => "saturated",
        Some(Saturation::Unknown) => "unknown",
    };
    noted(verdict, l)
}

/// `text`, then the level's note ([`RateLevel::note`]) where it has one: every table of levels
/// shows a level's failures and cut requests beside its verdict.
pub(super) fn noted(text: &str, l: &RateLevel) -> String {
    let note = l.note().to_string();
    if note.is_empty() { text.to_string() } else { format!("{text}: {note}") }
}

fn caption(phase: &RatePhase) -> String {
    let s = &phase.settings;
    let size = match (s.requests, s.window_s) {
        (Some(n), _) => format!("{n} requests per level"),
        (None, Some(w)) => format!("a {w:.0} s window per level"),
        (None, None) => String::new(),
    };
    let cap = s.max_concurrency.map_or_else(|| "no cap".into(), |c| format!("at most {c} in flight"));
    format!(
        "{} arrivals, seed {}, {size}, {cap}; latency is counted from each request's due time, so a late send is part of it (methodology §13.1)",
        s.arrival, s.seed
    )
}

pub(super) fn html(record: &RunRecord) -> Markup {
    let Some(phase) = &record.phases.rate else { return html! {} };
    html! {
        section id="rate" {
            h2 { "Arrivals at a rate" }
            p class="caption" { (Text(&caption(phase))) }
            (charts(phase))
            @for (label, levels) in rows(phase) {
                h3 { (Text(label)) }
                @let shown = columns(levels.iter().copied());
                (table_html("rate", &header(&shown), levels.iter().map(|l| (l.saturated, cells(l, &shown)))))
            }
        }
    }
}

/// A table of levels, one row per level (`saturated`, its cells); the last cell is the verdict.
pub(super) fn table_html(class: &str, header: &[&str], rows: impl IntoIterator<Item = (bool, Vec<String>)>) -> Markup {
    html! {
        div class="scroll" {
            table class=(class) {
                thead { tr { @for h in header { th { (h) } } } }
                tbody {
                    @for (saturated, cells) in rows {
                        tr class=[saturated.then_some("saturated")] {
                            @for (i, c) in cells.iter().enumerate() {
                                // a long error wraps in its own column instead of widening the
                                // table past the screen
                                td class=[(i + 1 == cells.len()).then_some("verdict")] { (Text(c)) }
                            }
                        }
                    }
                }
            }
        }
    }
}

/// The same table in Markdown.
pub(super) fn table_markdown(s: &mut String, header: &[&str], rows: impl IntoIterator<Item = Vec<String>>) {
    let _ = writeln!(s, "| {} |", header.join(" | "));
    let _ = writeln!(s, "|{}", "---|".repeat(header.len()));
    for cells in rows {
        let row: Vec<String> = cells.iter().map(|c| markdown_cell(c)).collect();
        let _ = writeln!(s, "| {} |", row.join(" | "));
    }
    s.push('\n');
}

/// Latency against the offered rate, one line per row: where the server stops keeping up, the
/// line turns up (the due-time latency holds the queue).
fn charts(phase: &RatePhase) -> Markup {
    let mut rates: Vec<RequestRate> = phase.levels.iter().map(|l| l.rate).collect();
    rates.sort_by(|a, b| a.order().total_cmp(&b.order()));
    rates.dedup();
    let rows: Vec<(String, Vec<Option<&RateLevel>>)> = rows(phase)
        .into_iter()
        .map(|(label, levels)| {
            (label.to_string(), rates.iter().map(|r| levels.iter().find(|l| l.rate == *r).copied()).collect())
        })
        .collect();
    latency_charts("offered req/s", rates.iter().map(ToString::to_string).collect(), &rows)
}

/// TTFT and end-to-end p50 from the due time against the load, a line per row of levels (each
/// row's level at each x, `None` where it has none); nothing for fewer than two loads.
pub(super) fn latency_charts(
    x_title: &'static str,
    x_labels: Vec<String>,
    rows: &[(String, Vec<Option<&RateLevel>>)],
) -> Markup {
    if x_labels.len() < 2 || rows.is_empty() {
        return html! {};
    }
    let series = |pick: fn(&RateLevel) -> Option<f64>| -> Vec<Series> {
        rows.iter()
            .map(|(name, levels)| Series {
                name: name.clone(),
                values: levels.iter().map(|l| l.and_then(pick)).collect(),
                color: None,
            })
            .collect()
    };
    let ms = |v: f64| format!("{v:.0} ms");
    crate::svg::charts_row(&[
        Chart {
            title: "TTFT p50 from the due time",
            x_title,
            y_title: "ms",
            x_labels: x_labels.clone(),
            series: series(|l| l.ttft_ms.and_then(|q| q.p50)),
            value_fmt: ms,
        },
        Chart {
            title: "End-to-end p50 from the due time",
            x_title,
            y_title: "ms",
            x_labels,
            series: series(|l| l.e2e_ms.and_then(|q| q.p50)),
            value_fmt: ms,
        },
    ])
}

pub(super) fn markdown(s: &mut String, record: &RunRecord) {
    let Some(phase) = &record.phases.rate else { return };
    let _ = writeln!(s, "## Arrivals at a rate\n\n{}\n", markdown_cell(&caption(phase)));
    for (label, levels) in rows(phase) {
        let _ = writeln!(s, "### {}\n", markdown_cell(label));
        let shown = columns(levels.iter().copied());
        table_markdown(s, &header(&shown), levels.into_iter().map(|l| cells(l, &shown)));
    }
}

pub(super) fn terminal(s: &mut String, record: &RunRecord, width: usize) {
    let Some(phase) = &record.phases.rate else { return };
    let _ = writeln!(s, "\nArrivals at a rate (latency from the due time)");
    for (label, levels) in rows(phase) {
        for l in levels {
            let (rate, c) = (l.rate.to_string(), &l.counts);
            let line = match l.status {
                LevelStatus::Measured => format!(
                    "{label:>8} {rate:>6} req/s{}: achieved {} req/s ({} of {} completed), TTFT p50/p99 {}/{}, {} tok/s, goodput {}",
                    saturation_mark(l),
                    shown(l, "achieved_rps"),
                    c.completed,
                    c.scheduled,
                    shown(l, "ttft_ms_p50"),
                    shown(l, "ttft_ms_p99"),
                    shown(l, "output_tok_s"),
                    goodput(l),
                ),
                _ => format!("{label:>8} {rate:>6} req/s: {}", l.reason.as_deref().unwrap_or_default()),
            };
            // wrapped, each next line under the first's text, so that a long error is read whole
            let _ = writeln!(s, "{}", crate::wrap::hanging(&line, width.max(40), 17));
        }
    }
}

/// The columns of a level's row of rate.csv before its figures: which level, what became of it,
/// what became of its requests.
#[derive(Serialize, Default)]
pub(super) struct CsvKeys<'a> {
    context: u64,
    label: Guarded<&'a str>,
    rate_rps: String,
    status: &'static str,
    reason: Guarded<&'a str>,
    scheduled: u64,
    sent: u64,
    completed: u64,
    failed: u64,
    cancelled: u64,
    unsent: u64,
    late: u64,
}

/// A column among a level's figures: a figure of its table, or a verdict.
#[derive(Serialize)]
#[serde(untagged)]
pub(super) enum Column {
    Figure(Option<Num>),
    Saturated(bool),
    Saturation(&'static str),
}

/// The verdicts, each in the column after the figure it rests on, where rate.csv has always had
/// them: `saturated` after the goodput, `saturation` after the backlog.
const VERDICTS: [(&str, &str); 2] = [("goodput_rps", "saturated"), ("backlog_pct", "saturation")];

fn verdict(l: &RateLevel, name: &str) -> Column {
    match name {
        "saturated" => Column::Saturated(l.saturated),
        _ => Column::Saturation(l.verdict().map_or("", |v| match v {
            Saturation::KeptUp => "kept_up",
            Saturation::Saturated => "saturated",
            Saturation::Unknown => "unknown",
        })),
    }
}

/// The level's figure table in order, a verdict after the figure it rests on: `(name, column)`.
fn csv_columns(l: &RateLevel) -> Vec<(&'static str, Column)> {
    let mut columns = Vec::new();
    for f in RateLevel::FIGURES {
        columns.push((f.name, Column::Figure(finite(f.of(l)))));
        if let Some((_, v)) = VERDICTS.iter().find(|(after, _)| *after == f.name) {
            columns.push((v, verdict(l, v)));
        }
    }
    columns
}

type CsvRow<'a> = (CsvKeys<'a>, Vec<Column>, Guarded<String>, CsvColumns);

/// A level's row of rate.csv: its keys, its figures and verdicts, its note, then the span's
/// telemetry ([`CsvColumns`]).
fn csv_row(l: &RateLevel) -> CsvRow<'_> {
    let (keys, columns) = csv_level(l);
    (keys, columns, Guarded(l.note().to_string()), CsvColumns::of(&l.telemetry))
}

/// A level's keys and its figures with their verdicts: the part of a row that every CSV of rate
/// levels (rate.csv, replay.csv) shares, in [`csv_level_header`] order.
pub(super) fn csv_level(l: &RateLevel) -> (CsvKeys<'_>, Vec<Column>) {
    let c = &l.counts;
    let keys = CsvKeys {
        context: l.context,
        label: Guarded(&l.label),
        rate_rps: l.rate.to_string(),
        status: match l.status {
            LevelStatus::Measured => "measured",
            LevelStatus::Skipped => "skipped",
            LevelStatus::Error => "error",
        },
        reason: guarded(&l.reason),
        scheduled: c.scheduled,
        sent: c.sent,
        completed: c.completed,
        failed: c.failed,
        cancelled: c.cancelled,
        unsent: c.unsent,
        late: c.late,
    };
    (keys, csv_columns(l).into_iter().map(|(_, c)| c).collect())
}

/// The names of [`csv_level`]'s columns: the keys, the figures and verdicts.
pub(super) fn csv_level_header() -> Vec<String> {
    let level =
        RateLevel::unmeasured(0, String::new(), RequestRate::PerSecond(1.0), LevelStatus::Skipped, String::new());
    let columns = csv_columns(&level).into_iter().map(|(name, _)| name.to_string());
    table::header::<CsvKeys>().into_iter().chain(columns).collect()
}

/// rate.csv's header: the keys, the figures and verdicts, the note, the telemetry's columns.
fn csv_header() -> Vec<String> {
    let mut header = csv_level_header();
    header.push("note".into());
    header.extend(table::header::<CsvColumns>());
    header
}

/// The phase's CSV file, `None` when the phase did not run.
pub(super) fn csv(record: &RunRecord) -> Option<String> {
    let phase = record.phases.rate.as_ref()?;
    let mut file = Table::new(csv_header(), Ending::Lf);
    phase.levels.iter().for_each(|l| file.row(csv_row(l)));
    Some(file.finish())
}

/// What a console line adds after a level's rate about its verdict: nothing when it kept up.
pub(super) fn saturation_mark(l: &RateLevel) -> &'static str {
    match l.verdict() {
        Some(Saturation::Saturated) => " SATURATED",
        Some(Saturation::Unknown) => " (saturation unknown)",
        _ => "",
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use sm_core::phases::rate::{Arrival, LevelCounts, RateSettings, RequestRate};
    use sm_core::record::Percentiles;

    use super::*;

    fn phase() -> RatePhase {
        let mut fast =
            RateLevel::unmeasured(1024, "1K".into(), RequestRate::PerSecond(2.0), LevelStatus::Measured, String::new());
        fast.reason = None;
        fast.counts = LevelCounts { scheduled: 10, sent: 10, completed: 10, late: 1, ..LevelCounts::default() };
        fast.achieved_rps = Some(1.95);
        fast.ttft_ms = Some(Percentiles::p50_p90_p99(40.0, 50.0, 61.0));
        fast.e2e_ms = Some(Percentiles::p50_p90_p99(300.0, 320.0, 330.0));
        fast.output_tok_s = Some(62.4);
        fast.in_flight_mean = Some(0.6);
        fast.in_flight_max = Some(2);
        fast.goodput_pct = Some(90.0);
        let mut hot = fast.clone();
        hot.rate = RequestRate::PerSecond(16.0);
        hot.saturated = true;
        let skipped = RateLevel::unmeasured(
            1024,
            "1K".into(),
            RequestRate::Inf,
            LevelStatus::Skipped,
            "not run: the server was already saturated, a <b>".into(),
        );
        RatePhase {
            settings: RateSettings {
                rates: vec![RequestRate::PerSecond(2.0), RequestRate::PerSecond(16.0), RequestRate::Inf],
                arrival: Arrival::Poisson,
                max_concurrency: Some(4),
                requests: Some(10),
                window_s: None,
                seed: 17,
                drain_max_s: 600.0,
                grace_s: None,
                max_tokens: 32,
            },
            levels: vec![hot, fast, skipped],
        }
    }

    pub(crate) fn record() -> RunRecord {
        let mut r = crate::import_str(include_str!("../../../../tests/data/run-sample.json")).unwrap();
        r.phases.rate = Some(phase());
        r
    }

    #[test]
    fn the_page_markdown_console_and_csv_show_each_level() {
        let r = record();
        let h = html(&r).into_string();
        assert!(h.contains("<h3>1K</h3>") && h.contains("<td>1.95</td>") && h.contains("<td>0.6 / 2</td>"), "{h}");
        assert!(h.contains("class=\"saturated\"") && h.contains("&lt;b&gt;") && !h.contains("<b>"), "{h}");
        assert!(h.find("<td>2</td>").unwrap() < h.find("<td>16</td>").unwrap(), "levels ascend");
        assert!(h.contains("<svg") && h.contains("TTFT p50 from the due time"), "a chart of latency by rate");
        let mut m = String::new();
        markdown(&mut m, &r);
        assert!(
            m.contains(
                "| 2 | 10 of 10 | 1.95 | 62.4 | 40.0 ms | 61.0 ms | 300 ms | 0.6 / 2 | 1 of 10 | 90 % of 10 | yes |"
            ),
            "{m}"
        );
        let mut t = String::new();
        terminal(&mut t, &r, 200);
        assert!(
            t.contains("16 req/s SATURATED: achieved 1.95 req/s (10 of 10 completed), TTFT p50/p99 40.0 ms/61.0 ms"),
            "{t}"
        );
        assert!(t.contains("inf req/s: not run"), "{t}");
        let c = csv(&r).unwrap();
        let lines: Vec<&str> = c.lines().collect();
        assert_eq!(lines.len(), 4);
        let cols = lines[0].split(',').count();
        assert!(lines.iter().all(|l| l.split(',').count() == cols || l.contains('"')), "{c}");
        assert!(lines[1].starts_with("1024,1K,16,measured,,10,10,10,0,0,0,1,"), "{}", lines[1]);
        assert!(lines[3].contains(",inf,skipped,"), "{}", lines[3]);
        // the files written carry the section (the page and the Markdown report: html.rs's tests)
        assert!(crate::phases::csv_files(&r).iter().any(|(name, _)| name == "rate.csv"));
        let mut none = r.clone();
        none.phases.rate.as_mut().unwrap().levels[2].reason = Some(format!("error: {}", "a long reason ".repeat(20)));
        // a long error wraps in its column on the page, and on the terminal under its level
        let h = html(&none).into_string();
        assert!(h.contains("<td class=\"verdict\">error: a long reason"), "{h}");
        let mut t = String::new();
        terminal(&mut t, &none, 80);
        assert!(t.lines().all(|l| l.chars().count() <= 80), "{t}");
        assert_eq!(t.split_whitespace().filter(|w| *w == "reason").count(), 20, "nothing cut: {t}");
        none.phases.rate = None;
        assert!(csv(&none).is_none());
    }
}
