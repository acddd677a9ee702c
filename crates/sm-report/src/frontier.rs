//! The frontier section (methodology §11.7): per context, tok/s per GPU against tok/s per user,
//! one point per concurrency level — a chart on the page, a table in Markdown.

use std::fmt::Write;

use maud::{Markup, html};
use sm_core::context::shown;
use sm_core::frontier::{Frontier, FrontierPoint, PerUser, frontier};
use sm_core::record::RunRecord;
use sm_core::server_gpus::GpusFrom;

use crate::capacity::usd;
use crate::escape::{Text, markdown_cell as md};
use crate::format::{self, opt};
use crate::svg::{self, Limit, XyChart, XyPoint, XySeries};

/// "tok/s per user (p10)": the x axis, as the SLO judges users.
fn per_user_title(f: &Frontier) -> String {
    match f.per_user {
        PerUser::Percentile(p) => format!("tok/s per user (p{p})"),
        PerUser::Median => "tok/s per user (median)".into(),
    }
}

fn per_gpu_title(f: &Frontier) -> &'static str {
    if f.gpus.is_some() { "tok/s per GPU" } else { "tok/s per server" }
}

/// What the figures divide by, in a sentence.
fn gpus_note(f: &Frontier) -> String {
    match f.gpus {
        Some(g) => {
            let from = match g.from {
                GpusFrom::GpuCountFlag => "--gpu-count",
                GpusFrom::LaunchCommand => "the launch command's tensor × pipeline × data parallel sizes",
                GpusFrom::Imported => "the imported file's tensor_parallel_size",
            };
            let gpus = if g.count == 1 { "1 GPU".to_string() } else { format!("{} GPUs", g.count) };
            format!("Per GPU: the server's {gpus}, from {from}.")
        }
        None => "Per server: its GPU count is unknown (pass --gpu-count N, or --launch-command with its \
                 parallel sizes)."
            .into(),
    }
}

const CAPTION: &str = "Each point is one concurrency level of a context: to the right each user is served \
faster, upward the server makes more tokens per GPU (and a GPU-hour costs less per token).";

/// The caption, with what the dashed line is where there is one, and what the figures divide by.
fn caption(f: &Frontier) -> String {
    let floor = if f.slo_tok_s.is_some() { " The dashed line is the SLO's floor on per-user speed." } else { "" };
    format!("{CAPTION}{floor} {}", gpus_note(f))
}

/// The section, or nothing for a run without a valid decode cell.
pub fn html(record: &RunRecord) -> Markup {
    let f = frontier(record);
    if f.is_empty() {
        return html! {};
    }
    let x_title = per_user_title(&f);
    let y_title = per_gpu_title(&f);
    let series = f
        .lines
        .iter()
        .enumerate()
        .map(|(i, line)| XySeries {
            name: shown(&line.label, line.context),
            points: line
                .points
                .iter()
                .map(|p| XyPoint { x: p.per_user_tok_s, y: p.tok_s_per_gpu, label: tooltip(p, y_title) })
                .collect(),
            color: Some(i),
        })
        .collect();
    let chart = XyChart { title: "Throughput against interactivity", x_title: &x_title, y_title, series };
    let limit = f.slo_tok_s.map(|v| {
        let v_text = if v.fract() == 0.0 { format!("{v:.0}") } else { format::fixed1(v) };
        Limit { value: v, label: format!("SLO ≥ {v_text} tok/s") }
    });
    html! {
        h2 id="frontier" { "Throughput per GPU against speed per user" }
        p class="caption" { (Text(&caption(&f))) }
        div class="charts" { figure { (svg::xy_chart(&chart, limit.as_ref())) } }
    }
}

fn tooltip(p: &FrontierPoint, per_gpu: &str) -> String {
    let users = if p.concurrency == 1 { "1 user".to_string() } else { format!("{} users", p.concurrency) };
    format!(
        "{users}: {} tok/s per user, {} {per_gpu}",
        format::fixed1(p.per_user_tok_s),
        format::fixed1(p.tok_s_per_gpu)
    )
}

/// The section as a table, one row per point; cost and energy columns where a point has them.
pub fn markdown(s: &mut String, record: &RunRecord) {
    let f = frontier(record);
    if f.is_empty() {
        return;
    }
    let points = || f.lines.iter().flat_map(|l| l.points.iter().map(move |p| (l, p)));
    let cost = points().any(|(_, p)| p.usd_per_million_tokens.is_some());
    let energy = points().any(|(_, p)| p.joules_per_token.is_some());
    let _ = writeln!(s, "## Throughput per GPU against speed per user\n\n{}\n", md(&caption(&f)));
    let mut head = vec!["Context".to_string(), "Users".into(), per_user_title(&f), per_gpu_title(&f).into()];
    head.extend(cost.then(|| "$ per M tokens".to_string()));
    head.extend(energy.then(|| "J per token".to_string()));
    head.push("SLO".into());
    let _ = writeln!(s, "| {} |", head.iter().map(|h| md(h)).collect::<Vec<_>>().join(" | "));
    let _ = writeln!(s, "|{}", "---|".repeat(head.len()));
    for (line, p) in points() {
        let mut row = vec![
            shown(&line.label, line.context),
            format::count(u64::from(p.concurrency)),
            format::fixed1(p.per_user_tok_s),
            format::fixed1(p.tok_s_per_gpu),
        ];
        if cost {
            row.push(opt(p.usd_per_million_tokens, usd));
        }
        if energy {
            row.push(opt(p.joules_per_token, |j| format!("{j:.2}")));
        }
        row.push(match p.meets_slo {
            Some(true) => "✓".into(),
            Some(false) => "✗".into(),
            None => format::NONE.into(),
        });
        let _ = writeln!(s, "| {} |", row.iter().map(|c| md(c)).collect::<Vec<_>>().join(" | "));
    }
    s.push('\n');
}

#[cfg(test)]
mod tests {
    use super::*;

    const SAMPLE: &str = include_str!("../../../tests/data/run-sample.json");

    #[test]
    fn the_page_draws_one_line_per_context_per_gpu_from_the_launch_command() {
        let r: RunRecord = serde_json::from_str(SAMPLE).unwrap();
        let html = html(&r).into_string();
        assert!(html.contains("id=\"frontier\"") && html.contains("tok/s per GPU"), "{html}");
        assert!(html.contains("the server&#39;s 2 GPUs") || html.contains("the server's 2 GPUs"), "{html}");
        assert_eq!(html.matches("<circle").count(), 4, "three 8K points and one 128K: {html}");
        assert!(html.contains("64 users: 66.6 tok/s per user, 2,114.7 tok/s per GPU"), "{html}");
        assert!(!html.contains("class=\"limit\""), "no SLO, no floor");
    }

    #[test]
    fn markdown_rows_name_context_users_and_per_gpu_speed() {
        let mut r: RunRecord = serde_json::from_str(SAMPLE).unwrap();
        r.launch_command = None;
        let mut s = String::new();
        markdown(&mut s, &r);
        assert!(s.contains("| Context | Users | tok/s per user (median) | tok/s per server | SLO |"), "{s}");
        assert!(s.contains("| 8K | 128 | 49.5 | 6,336.2 | — |"), "{s}");
        assert!(s.contains("pass --gpu-count N"), "{s}");
        r.decode.clear();
        let mut empty = String::new();
        markdown(&mut empty, &r);
        assert!(empty.is_empty() && html(&r).into_string().is_empty());
    }
}
