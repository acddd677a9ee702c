//! The telemetry of the measured spans that are not decode cells (methodology §14): the prefill
//! rows, the rate phase's levels, the bursts, the mixed-prefill levels and the sessions phase, each with the server's gauges and the GPU figures where it
//! has them — a line per span in the Markdown, the same lines and the series on demand on the page.

use std::fmt::Write;

use maud::{Markup, html};
use serde::Serialize;
use sm_core::context::shown;
use sm_core::phases::rate::LevelStatus;
use sm_core::record::{CellStatus, PlanKind, RunRecord};
use sm_core::telemetry::Telemetry;

use crate::csv::table::{Num, finite};
use crate::escape::{Text, markdown_cell};

const TITLE: &str = "Telemetry of the prefill rows and the load phases";

/// Each measured span with telemetry, labelled as the report names it, in the record's order.
fn spans(record: &RunRecord) -> Vec<(String, &Telemetry)> {
    let mut prefill: Vec<_> = record.prefill.iter().filter(|p| p.status == CellStatus::Valid).collect();
    prefill.sort_by_key(|p| p.context);
    let rows = prefill.into_iter().map(|p| (format!("prefill {}", shown(&p.label, p.context)), &p.telemetry));
    let levels = record.phases.rate.iter().flat_map(|r| &r.levels).filter(|l| l.status == LevelStatus::Measured);
    let levels = levels.map(|l| (format!("{} req/s at {}", l.rate, l.label), &l.telemetry));
    let bursts = record.phases.burst.iter().flat_map(|p| &p.bursts).filter(|b| b.status == CellStatus::Valid);
    let bursts = bursts.map(|b| {
        let at = shown(&b.label, b.context.unwrap_or_default());
        (format!("burst {at} × {} round {}", b.concurrency, b.round), &b.telemetry)
    });
    let mixed = record.phases.mixed_prefill.iter().flat_map(|p| &p.levels).filter(|l| l.error.is_none());
    let mixed = mixed.map(|l| {
        (
            format!(
                "mixed prefill {}@{}",
                sm_core::plan::shown_context(&record.plan, PlanKind::Decode, l.prompt_context),
                l.background
            ),
            &l.telemetry,
        )
    });
    let sessions = record.phases.sessions.iter().map(|p| ("sessions".to_string(), &p.telemetry));
    rows.chain(levels).chain(bursts).chain(mixed).chain(sessions).filter(|(_, t)| !t.is_empty()).collect()
}

/// "GPU: 160 W · 12.4 J (dcgm, …); server 291.1 tok/s, 1.0 running, …": what a span's sources said.
fn line(t: &Telemetry) -> String {
    let mut parts = Vec::new();
    if let Some(g) = &t.gpu {
        let mut gpu = g.to_string();
        if let Some(e) = g.energy_j {
            // a prefill row has no J/token: its energy itself is the figure
            gpu = if gpu.is_empty() { format!("{e:.1} J") } else { format!("{gpu} · {e:.1} J") };
        }
        parts.push(format!("GPU: {gpu}{}", crate::gpu::details(g)));
    }
    if let Some(m) = &t.server_metrics {
        parts.push(crate::server_metrics::labelled(m));
    }
    parts.join("; ")
}

/// The telemetry columns of each load phase's CSV (rate.csv, burst.csv, mixed_prefill.csv), after
/// its own: a span's sources (methodology §14), empty where it has no such source.
#[derive(Serialize, Default)]
pub(crate) struct CsvColumns {
    gpu_source: Option<&'static str>,
    gpu_power_w: Option<Num>,
    gpu_energy_j: Option<Num>,
    gpu_joules_per_token: Option<Num>,
    server_tok_s: Option<Num>,
    server_running_mean: Option<Num>,
    server_waiting_max: Option<Num>,
    server_kv_usage_max: Option<Num>,
    server_preemptions: Option<u64>,
}

impl CsvColumns {
    pub(crate) fn of(t: &Telemetry) -> CsvColumns {
        let (g, m) = (t.gpu.as_ref(), t.server_metrics.as_ref());
        CsvColumns {
            gpu_source: g.map(|g| g.source.name()),
            gpu_power_w: finite(g.and_then(|g| g.power_w)),
            gpu_energy_j: finite(g.and_then(|g| g.energy_j)),
            gpu_joules_per_token: finite(g.and_then(|g| g.joules_per_token)),
            server_tok_s: finite(m.and_then(|m| m.server_tok_s)),
            server_running_mean: finite(m.map(|m| m.running_mean)),
            server_waiting_max: finite(m.map(|m| m.waiting_max)),
            server_kv_usage_max: finite(m.and_then(|m| m.kv_usage_max)),
            server_preemptions: m.and_then(|m| m.preemptions),
        }
    }
}

/// Markdown: a line per span with telemetry, nothing without any.
pub(crate) fn markdown(s: &mut String, record: &RunRecord) {
    let spans = spans(record);
    if spans.is_empty() {
        return;
    }
    let _ = writeln!(
        s,
        "## {TITLE}\n\nFrom the server's /metrics and the GPU source, as for the decode cells (methodology §14):\n"
    );
    for (label, t) in spans {
        let _ = writeln!(s, "- {}: {}", markdown_cell(&label), markdown_cell(&line(t)));
    }
    s.push('\n');
}

/// HTML: the same lines, and each span's series of the server's gauges on demand.
pub(crate) fn html_section(record: &RunRecord) -> Markup {
    let spans = spans(record);
    if spans.is_empty() {
        return html! {};
    }
    let series: Vec<_> =
        spans.iter().filter_map(|(label, t)| t.server_metrics.as_ref().map(|m| (label.clone(), m))).collect();
    html! {
        section id="span-telemetry" {
            h2 { (TITLE) }
            ul class="span-telemetry" {
                @for (label, t) in &spans { li { (Text(label)) ": " (Text(&line(t))) } }
            }
            (crate::server_metrics::html_details("The server's gauges per span", &series))
        }
    }
}
