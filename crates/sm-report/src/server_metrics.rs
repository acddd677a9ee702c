//! The server's gauges per cell on the page (methodology §14.1): a summary line per cell under the
//! Markdown matrix, and on the HTML page a chart of the window's series per cell, shown on demand.

use maud::{Markup, html};
use sm_core::record::{CellStatus, DecodeCell};
use sm_core::server_metrics::ServerMetrics;

use crate::escape::Text;
use crate::svg::{self, Chart, Series};

/// The valid cells with gauges, in the matrix's reading order (by context, then concurrency), not
/// the order they were measured in (each context at the first concurrency first).
fn valid(cells: &[DecodeCell]) -> impl Iterator<Item = (&DecodeCell, &ServerMetrics)> {
    let mut valid: Vec<_> = cells
        .iter()
        .filter(|c| c.status() == CellStatus::Valid)
        .filter_map(|c| c.server_metrics.as_ref().map(|m| (c, m)))
        .collect();
    valid.sort_by_key(|(c, _)| (c.context, c.concurrency));
    valid.into_iter()
}

/// "server 412.3 tok/s (+0.4 % vs measured), 4.0 running, 0 waiting at most, KV cache up to 35 %,
/// 0 preemptions, prefix cache 98 %, queue p50 1.2 ms (mean 1.5 ms)": what the server exported.
pub fn summary(m: &ServerMetrics) -> String {
    let mut parts = Vec::new();
    if let Some(t) = m.server_tok_s {
        let vs =
            m.tok_s_diff_pct.map(|d| format!(" ({} % vs measured)", crate::format::signed1(d))).unwrap_or_default();
        parts.push(format!("server {t:.1} tok/s{vs}"));
    }
    parts.push(format!("{:.1} running, {} waiting at most", m.running_mean, m.waiting_max));
    if let Some(kv) = m.kv_usage_max {
        parts.push(format!("KV cache up to {:.0} %", kv * 100.0));
    }
    if let Some(p) = m.preemptions {
        parts.push(format!("{p} preemptions"));
    }
    if let Some(h) = m.prefix_hit_pct {
        parts.push(format!("prefix cache {h:.0} %"));
    }
    if let Some(q) = m.queue_time_ms_p50 {
        let mean = m.queue_time_ms_mean.map(|v| format!(" (mean {v:.1} ms)")).unwrap_or_default();
        parts.push(format!("queue p50 {q:.1} ms{mean}"));
    }
    parts.join(", ")
}

/// Markdown: one line per valid cell with the server's figures, under the decode matrix.
pub fn markdown_lines(decode: &[DecodeCell]) -> Vec<String> {
    valid(decode).map(|(c, m)| format!("{} × {}: {}", c.label, c.concurrency, summary(m))).collect()
}

/// HTML: per valid cell, a `<details>` with its summary and the window's series as two charts
/// (requests running and waiting; KV-cache usage where exported). Nothing without series.
pub fn html_section(decode: &[DecodeCell]) -> Markup {
    let cells: Vec<_> = valid(decode).map(|(c, m)| (format!("{} × {}", c.label, c.concurrency), m)).collect();
    html_details("The server's gauges per cell", &cells)
}

/// The summary as a line among other sources' (the GPU's): it starts with the word "server"
/// whether or not the server counted its tokens, and says it once.
pub fn labelled(m: &ServerMetrics) -> String {
    let text = summary(m);
    if m.server_tok_s.is_some() { text } else { format!("server: {text}") }
}

/// HTML: a titled block with a `<details>` per labelled span that has a series (nothing when
/// none has): its summary, and its charts on demand.
pub fn html_details(title: &str, spans: &[(String, &ServerMetrics)]) -> Markup {
    let spans: Vec<_> = spans.iter().filter(|(_, m)| !m.series.is_empty()).collect();
    if spans.is_empty() {
        return html! {};
    }
    html! {
        div class="server-gauges" {
            h3 { (Text(title)) }
            @for (label, m) in spans {
                details {
                    summary { (Text(label)) ": " (Text(&summary(m))) }
                    (charts(m))
                }
            }
        }
    }
}

fn charts(m: &ServerMetrics) -> Markup {
    let ts: Vec<f64> = m.series.iter().map(|p| p.t_s).collect();
    let labels: Vec<String> = ts.iter().map(|t| format!("{t:.1}")).collect();
    let line = |name: &str, values: Vec<Option<f64>>, color| Series { name: name.into(), values, color: Some(color) };
    let requests = Chart {
        title: "Requests at the server",
        x_title: "seconds into the span",
        y_title: "requests",
        x_labels: labels.clone(),
        series: vec![
            line("running", m.series.iter().map(|p| Some(p.running)).collect(), 0),
            line("waiting", m.series.iter().map(|p| Some(p.waiting)).collect(), 1),
        ],
        value_fmt: crate::format::fixed1,
    };
    let kv = m.series.iter().any(|p| p.kv_usage.is_some()).then(|| Chart {
        title: "KV-cache usage",
        x_title: "seconds into the span",
        y_title: "% of the KV cache",
        x_labels: labels,
        series: vec![line("KV usage", m.series.iter().map(|p| p.kv_usage.map(|v| v * 100.0)).collect(), 2)],
        value_fmt: crate::format::fixed1,
    });
    html! {
        (svg::line_chart_time(&requests, &ts))
        @if let Some(kv) = &kv { (svg::line_chart_time(kv, &ts)) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use sm_core::server_metrics::ServerPoint;

    fn metrics() -> ServerMetrics {
        let p = |t_s, running| ServerPoint { t_s, running, waiting: 0.0, kv_usage: Some(0.25) };
        ServerMetrics {
            interval_s: 1.0,
            scrapes: 3,
            span_s: 2.0,
            series: vec![p(0.0, 4.0), p(1.0, 4.0), p(2.0, 3.0)],
            running_mean: 3.667,
            kv_usage_max: Some(0.35),
            preemptions: Some(0),
            server_tok_s: Some(412.34),
            tok_s_diff_pct: Some(0.4),
            queue_time_ms_p50: Some(1.2),
            queue_time_ms_mean: Some(1.5),
            ..ServerMetrics::default()
        }
    }

    #[test]
    fn a_line_per_valid_cell_and_a_chart_on_demand() {
        let mut cell =
            DecodeCell { label: "1K".into(), concurrency: 4, status: Some(CellStatus::Valid), ..Default::default() };
        cell.server_metrics = Some(metrics());
        let lines = markdown_lines(std::slice::from_ref(&cell));
        assert_eq!(
            lines,
            [
                "1K × 4: server 412.3 tok/s (+0.4 % vs measured), 3.7 running, 0 waiting at most, KV cache up to 35 %, 0 preemptions, queue p50 1.2 ms (mean 1.5 ms)"
            ]
        );
        let s = html_section(std::slice::from_ref(&cell)).into_string();
        assert!(s.contains("<details><summary>1K × 4: server 412.3 tok/s"), "{s}");
        assert_eq!(s.matches("<svg").count(), 2, "requests and KV usage");
        cell.status = Some(CellStatus::Error);
        assert!(html_section(&[cell]).into_string().is_empty());
    }
}
