//! The prefill charts, specified once for the page (one run) and the site's compare page (runs
//! overlaid): prompt tok/s and the cold prompt's TTFT by context, contexts on a log axis so that
//! 64K→128K is as wide as 128K→256K. Only valid rows have points.

use std::collections::BTreeMap;

use maud::Markup;
use sm_core::context::shown;
use sm_core::record::{CellStatus, PrefillRow};

use crate::format;
use crate::svg::{self, Chart, Series};

/// One run's prefill rows, and how its line is named and coloured.
pub struct PrefillRun<'a> {
    pub rows: &'a [PrefillRow],
    /// The line's name in both charts; `None` for a page's single run, whose lines are named after
    /// the figure.
    pub name: Option<String>,
    pub color: usize,
}

/// The two prefill charts over the contexts of every run.
pub struct PrefillCharts {
    /// Context in tokens → its label (as the first run that has it shows it).
    contexts: BTreeMap<u64, String>,
    tok_s: Vec<Series>,
    ttft: Vec<Series>,
}

impl PrefillCharts {
    pub fn new(runs: &[PrefillRun]) -> PrefillCharts {
        let mut contexts = BTreeMap::new();
        for p in runs.iter().flat_map(|r| r.rows) {
            contexts.entry(p.context).or_insert_with(|| shown(&p.label, p.context));
        }
        let series = |r: &PrefillRun, name: &str, color: usize, f: fn(&PrefillRow) -> Option<f64>| Series {
            name: r.name.clone().unwrap_or_else(|| name.to_string()),
            values: contexts
                .keys()
                .map(|&ctx| r.rows.iter().find(|p| p.context == ctx && p.status == CellStatus::Valid).and_then(f))
                .collect(),
            color: Some(color),
        };
        // a single unnamed run: one colour per figure, as the page always drew them
        let second = |r: &PrefillRun| if r.name.is_none() { r.color + 1 } else { r.color };
        let tok_s = runs.iter().map(|r| series(r, "prompt tok/s", r.color, |p| p.prompt_tok_s)).collect();
        let ttft = runs.iter().map(|r| series(r, "TTFT", second(r), |p| p.ttft_ms)).collect();
        PrefillCharts { contexts, tok_s, ttft }
    }

    pub fn is_empty(&self) -> bool {
        self.contexts.is_empty()
    }

    /// Both charts side by side, as `<div class="charts">` of two figures.
    pub fn html(self) -> Markup {
        let labels: Vec<String> = self.contexts.values().cloned().collect();
        let xs: Vec<f64> = self.contexts.keys().map(|&c| c as f64).collect();
        let charts = [
            Chart {
                title: "Prompt tok/s by context",
                x_title: "context",
                y_title: "prompt tok/s",
                x_labels: labels.clone(),
                series: self.tok_s,
                value_fmt: format::kilo,
            },
            Chart {
                title: "TTFT by context (cold prompt)",
                x_title: "context",
                y_title: "TTFT, ms",
                x_labels: labels,
                series: self.ttft,
                value_fmt: format::ms,
            },
        ];
        maud::html! {
            div class="charts" {
                @for c in &charts { figure { (svg::line_chart_log_x(c, &xs)) } }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(context: u64, label: &str, tok_s: f64, status: CellStatus) -> PrefillRow {
        PrefillRow {
            context,
            label: label.into(),
            prompt_tokens: Some(context),
            ttft_ms: Some(context as f64 / tok_s * 1000.0),
            prompt_tok_s: Some(tok_s),
            cached_tokens: Some(0),
            status,
            reason: None,
            telemetry: Default::default(),
        }
    }

    #[test]
    fn overlaid_runs_share_one_context_axis_with_points_only_where_a_row_is_valid() {
        let a = [row(8192, "8K", 9000.0, CellStatus::Valid), row(65536, "64K", 7000.0, CellStatus::Error)];
        let b = [row(65536, "64K", 6000.0, CellStatus::Valid), row(257_984, "256K", 5000.0, CellStatus::Valid)];
        let runs = [
            PrefillRun { rows: &a, name: Some("A".into()), color: 0 },
            PrefillRun { rows: &b, name: Some("B".into()), color: 1 },
        ];
        let c = PrefillCharts::new(&runs);
        assert_eq!(c.contexts.values().collect::<Vec<_>>(), ["8K", "64K", "256K (257,984)"]);
        assert_eq!(c.tok_s[0].values, [Some(9000.0), None, None], "A's 64K row failed: no point");
        assert_eq!(c.tok_s[1].values, [None, Some(6000.0), Some(5000.0)]);
        let names: Vec<(&str, Option<usize>)> = c.ttft.iter().map(|s| (s.name.as_str(), s.color)).collect();
        assert_eq!(names, [("A", Some(0)), ("B", Some(1))], "a run keeps its name and colour in both charts");
        let html = c.html().into_string();
        assert_eq!(html.matches("<figure>").count(), 2);
    }

    #[test]
    fn a_single_run_names_its_lines_after_the_figure() {
        let a = [row(8192, "8K", 9000.0, CellStatus::Valid)];
        let c = PrefillCharts::new(&[PrefillRun { rows: &a, name: None, color: 0 }]);
        assert_eq!((c.tok_s[0].name.as_str(), c.tok_s[0].color), ("prompt tok/s", Some(0)));
        assert_eq!((c.ttft[0].name.as_str(), c.ttft[0].color), ("TTFT", Some(1)));
        assert!(PrefillCharts::new(&[]).is_empty());
    }
}
