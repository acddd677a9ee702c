//! Inline SVG line charts, drawn here so the page needs no script and no
//! network: categorical x (concurrency levels, evenly spaced, as the matrix
//! is) or a log x axis (contexts in tokens, [`line_chart_log_x`]), linear y
//! from 0. Colours come from the page's stylesheet (classes `s0`…`s7`), so the
//! charts follow the light and dark schemes.

use std::fmt::Write;

use maud::{Markup, html};

use crate::escape::Text;

mod xy;
pub use xy::{XyChart, XyPoint, XySeries, xy_chart};

pub struct Series {
    pub name: String,
    pub values: Vec<Option<f64>>,
    /// Palette index; the series' position when unset.
    pub color: Option<usize>,
}

pub struct Chart<'a> {
    pub title: &'a str,
    pub x_title: &'a str,
    pub y_title: &'a str,
    pub x_labels: Vec<String>,
    pub series: Vec<Series>,
    /// Formats a value for the point's tooltip.
    pub value_fmt: fn(f64) -> String,
}

/// A horizontal reference line across the plot, e.g. the SLO's floor on per-user tok/s.
pub struct Limit {
    pub value: f64,
    /// Written at the line's right end.
    pub label: String,
}

const W: f64 = 560.0;
const PLOT_H: f64 = 220.0;
const LEFT: f64 = 64.0;
const RIGHT: f64 = 16.0;
const TOP: f64 = 28.0;
const LEGEND_ITEM: f64 = 88.0;
const SERIES_CLASSES: usize = 8;

/// A round step so that about five gridlines cover `max`.
fn nice_step(max: f64) -> f64 {
    let raw = (max / 5.0).max(f64::MIN_POSITIVE);
    let mag = 10f64.powf(raw.log10().floor());
    let norm = raw / mag;
    let nice = if norm <= 1.0 {
        1.0
    } else if norm <= 2.0 {
        2.0
    } else if norm <= 2.5 {
        2.5
    } else if norm <= 5.0 {
        5.0
    } else {
        10.0
    };
    nice * mag
}

fn tick_label(v: f64) -> String {
    if v >= 10_000.0 {
        let k = v / 1000.0;
        if k.fract() == 0.0 { format!("{k:.0}K") } else { format!("{k:.1}K") }
    } else if v.fract() == 0.0 {
        crate::format::count(v as u64)
    } else {
        format!("{v}")
    }
}

/// Charts side by side, as the page and the site lay them out.
pub fn charts_row(charts: &[Chart]) -> Markup {
    html! {
        div class="charts" {
            @for c in charts { figure { (line_chart(c)) } }
        }
    }
}

/// Where the points and the x ticks of a chart go.
enum XAxis<'a> {
    /// One evenly spaced slot per label.
    Categories,
    /// The points at these x values (tokens) on a log scale, ticks at powers of two.
    Log(&'a [f64]),
    /// The points at these x values (seconds) on a linear scale from 0, round ticks.
    Linear(&'a [f64]),
}

/// A chart with evenly spaced x categories (concurrency levels).
pub fn line_chart(chart: &Chart) -> Markup {
    draw(chart, &XAxis::Categories, None)
}

/// [`line_chart`] with a horizontal line at `limit` (dashed, labelled); the y axis reaches it
/// even when every point lies below.
pub fn line_chart_with_limit(chart: &Chart, limit: Option<&Limit>) -> Markup {
    draw(chart, &XAxis::Categories, limit.filter(|l| l.value.is_finite() && l.value > 0.0))
}

/// A chart whose points sit at `xs` (one per label, e.g. contexts in tokens) on a log axis, so
/// 64K→128K is as wide as 128K→256K and 251K→256K is the short step it is. The axis is labelled
/// at powers of two; each point's label is in its tooltip. Falls back to even spacing when an x
/// is missing, not positive or not finite.
pub fn line_chart_log_x(chart: &Chart, xs: &[f64]) -> Markup {
    let usable = xs.len() == chart.x_labels.len() && xs.iter().all(|x| x.is_finite() && *x > 0.0);
    let axis = if usable { XAxis::Log(xs) } else { XAxis::Categories };
    draw(chart, &axis, None)
}

/// A chart whose points sit at `xs` (seconds into a window) on a linear axis from 0: scrapes that
/// came late sit where they were taken. Even spacing when an x is missing or not finite.
pub fn line_chart_time(chart: &Chart, xs: &[f64]) -> Markup {
    let usable = xs.len() == chart.x_labels.len() && xs.iter().all(|x| x.is_finite() && *x >= 0.0);
    let axis = if usable { XAxis::Linear(xs) } else { XAxis::Categories };
    draw(chart, &axis, None)
}

/// Positions and ticks of a linear axis from 0 to the largest of `xs`, about five ticks.
fn linear_positions(xs: &[f64]) -> (Vec<f64>, Vec<(f64, String)>) {
    const MARGIN: f64 = 0.03;
    let hi = xs.iter().copied().fold(0.0, f64::max);
    let at = |x: f64| if hi > 0.0 { MARGIN + (1.0 - 2.0 * MARGIN) * x / hi } else { 0.5 };
    let step = nice_step(hi.max(f64::MIN_POSITIVE));
    let ticks = (0..=((hi / step).floor() as usize).min(20)).map(|i| i as f64 * step);
    (xs.iter().map(|&x| at(x)).collect(), ticks.map(|t| (at(t), tick_label(t))).collect())
}

/// `(position 0…1 of each point, ticks as (position, label))` on a log axis over `xs`, with a
/// margin so the end points do not sit on the frame.
fn log_positions(xs: &[f64]) -> (Vec<f64>, Vec<(f64, String)>) {
    const MARGIN: f64 = 0.06;
    let lo = xs.iter().copied().fold(f64::INFINITY, f64::min);
    let hi = xs.iter().copied().fold(0.0, f64::max);
    let span = (hi / lo).ln();
    let at = |x: f64| if span > 0.0 { MARGIN + (1.0 - 2.0 * MARGIN) * (x / lo).ln() / span } else { 0.5 };
    let mut ticks: Vec<f64> = Vec::new();
    let mut t = 2f64.powf(lo.log2().ceil());
    while t <= hi * (1.0 + 1e-9) && ticks.len() < 64 {
        ticks.push(t);
        t *= 2.0;
    }
    // at most about eight labels: every second (fourth, …) power of two on a wide range
    let stride = ticks.len().div_ceil(8).max(1);
    let ticks: Vec<(f64, String)> = if ticks.is_empty() {
        // no power of two inside the range (e.g. 257,984…262,079): label its ends exactly
        let ends = if span > 0.0 { vec![lo, hi] } else { vec![lo] };
        ends.into_iter().map(|t| (at(t), sm_core::Tokens(t.round() as u64).to_string())).collect()
    } else {
        let label = |t: f64| sm_core::context::label(sm_core::Tokens(t.round() as u64));
        ticks.into_iter().step_by(stride).map(|t| (at(t), label(t))).collect()
    };
    (xs.iter().map(|&x| at(x)).collect(), ticks)
}

/// A coordinate as the charts write it, to a tenth of a unit.
fn d1(v: f64) -> String {
    format!("{v:.1}")
}

fn draw(chart: &Chart, axis: &XAxis, limit: Option<&Limit>) -> Markup {
    let n = chart.x_labels.len().max(1);
    // A file can hold any number: values past 1e15 are clamped so the axis stays finite
    // (1.7e308 once made the tick loop below endless).
    let max = chart
        .series
        .iter()
        .flat_map(|s| s.values.iter().flatten())
        .copied()
        .filter(|v| v.is_finite())
        .fold(limit.map_or(0.0, |l| l.value * 1.1), f64::max)
        .min(1e15);
    let step = if max > 0.0 { nice_step(max) } else { 1.0 };
    let top_value = (max / step).ceil().max(1.0) * step;
    let plot_w = W - LEFT - RIGHT;
    let per_row = ((W - LEFT) / LEGEND_ITEM).floor().max(1.0) as usize;
    let legend_rows = chart.series.len().div_ceil(per_row);
    let axis_bottom = TOP + PLOT_H;
    let height = axis_bottom + 44.0 + legend_rows as f64 * 18.0;
    let (positions, x_ticks): (Vec<f64>, Vec<(f64, String)>) = match axis {
        XAxis::Categories => {
            let at = |i: usize| (i as f64 + 0.5) / n as f64;
            ((0..n).map(at).collect(), chart.x_labels.iter().enumerate().map(|(i, l)| (at(i), l.clone())).collect())
        }
        XAxis::Log(xs) => log_positions(xs),
        XAxis::Linear(xs) => linear_positions(xs),
    };
    let x_at = |i: usize| LEFT + plot_w * positions.get(i).copied().unwrap_or(0.5);
    let y_at = |v: f64| axis_bottom - PLOT_H * (v / top_value);
    let title = Text(chart.title);
    html! {
        // named by aria-label, not by an id: the same chart (the server's gauges) appears once per
        // span, and an id made from its title would be on the page as many times
        svg class="chart" viewBox={ "0 0 " (W) " " (height) } role="img" aria-label=(title)
            xmlns="http://www.w3.org/2000/svg" {
            title { (title) }
            text class="ct" x=(LEFT) y="16" { (title) }
            (y_grid(top_value, step, &y_at))
            text class="axis" transform={ "translate(14 " (d1(TOP + PLOT_H / 2.0)) ") rotate(-90)" }
                text-anchor="middle" { (Text(chart.y_title)) }
            @for (pos, l) in &x_ticks {
                text class="tick" x=(d1(LEFT + plot_w * pos)) y=(d1(axis_bottom + 16.0)) text-anchor="middle" {
                    (Text(l))
                }
            }
            text class="axis" x=(d1(LEFT + plot_w / 2.0)) y=(d1(axis_bottom + 34.0)) text-anchor="middle" {
                (Text(chart.x_title))
            }
            @if let Some(l) = limit {
                (limit_line(l, y_at(l.value.min(top_value))))
            }
            @for (si, series) in chart.series.iter().enumerate() {
                @let class = format!("s{}", series.color.unwrap_or(si) % SERIES_CLASSES);
                (series_marks(chart, series, &class, &x_at, &y_at))
                (legend_item(series, &class, si / per_row, si % per_row, axis_bottom))
            }
        }
    }
}

/// A series' swatch and name under the plot, in row `row` and column `col` of the legend.
fn legend_item(series: &Series, class: &str, row: usize, col: usize, axis_bottom: f64) -> Markup {
    legend_swatch(&series.name, class, row, col, axis_bottom)
}

/// A swatch and a name under the plot, in row `row` and column `col` of the legend.
fn legend_swatch(name: &str, class: &str, row: usize, col: usize, axis_bottom: f64) -> Markup {
    let lx = LEFT + col as f64 * LEGEND_ITEM;
    let ly = axis_bottom + 54.0 + row as f64 * 18.0;
    html! {
        line class={ "line " (class) } x1=(lx) x2=(lx + 16.0) y1=(d1(ly)) y2=(d1(ly)) {}
        text class="legend" x=(lx + 22.0) y=(d1(ly + 4.0)) { (Text(name)) }
    }
}

/// A horizontal line across the plot at `y` (an SLO's limit), labelled at its right end.
fn limit_line(l: &Limit, y: f64) -> Markup {
    html! {
        line class="limit" x1=(LEFT) x2=(W - RIGHT) y1=(d1(y)) y2=(d1(y)) {}
        text class="limit" x=(W - RIGHT) y=(d1(y - 5.0)) text-anchor="end" { (Text(&l.label)) }
    }
}

/// Gridlines and y ticks from 0 to `top_value`.
fn y_grid(top_value: f64, step: f64, y_at: &dyn Fn(f64) -> f64) -> Markup {
    let mut ticks = Vec::new();
    let mut v = 0.0;
    while v <= top_value + step / 2.0 && ticks.len() < 64 {
        ticks.push(v);
        v += step;
    }
    html! {
        @for v in ticks {
            @let y = y_at(v);
            line class="grid" x1=(LEFT) x2=(W - RIGHT) y1=(d1(y)) y2=(d1(y)) {}
            text class="tick" x=(LEFT - 6.0) y=(d1(y + 4.0)) text-anchor="end" { (Text(&tick_label(v))) }
        }
    }
}

/// One series' line and points; a point's tooltip names its x label.
fn series_marks(
    chart: &Chart,
    series: &Series,
    class: &str,
    x_at: &dyn Fn(usize) -> f64,
    y_at: &dyn Fn(f64) -> f64,
) -> Markup {
    // a gap (no figure) breaks the line rather than dropping to zero
    let mut d = String::new();
    let mut pen_down = false;
    for (i, v) in series.values.iter().enumerate() {
        match v {
            Some(v) => {
                let _ = write!(d, "{}{:.1} {:.1} ", if pen_down { "L" } else { "M" }, x_at(i), y_at(*v));
                pen_down = true;
            }
            None => pen_down = false,
        }
    }
    let points = series.values.iter().enumerate().filter_map(|(i, v)| v.map(|v| (i, v)));
    html! {
        @if !d.is_empty() {
            path class={ "line " (class) } d=(d.trim_end()) {}
        }
        @for (i, v) in points {
            @let label = chart.x_labels.get(i).map_or("", String::as_str);
            circle class={ "pt " (class) } cx=(d1(x_at(i))) cy=(d1(y_at(v))) r="3" {
                title { (Text(&series.name)) " · " (Text(label)) ": " (Text(&(chart.value_fmt)(v))) }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn steps_are_round() {
        assert_eq!(nice_step(6337.6), 2000.0);
        assert_eq!(nice_step(100.0), 20.0);
        assert_eq!(nice_step(12.0), 2.5);
    }

    #[test]
    fn gaps_break_lines_and_text_is_escaped() {
        let svg = line_chart(&Chart {
            title: "t",
            x_title: "x",
            y_title: "y",
            x_labels: vec!["1".into(), "2".into(), "4".into()],
            series: vec![Series { name: "<b>".into(), values: vec![Some(1.0), None, Some(3.0)], color: None }],
            value_fmt: crate::format::fixed1,
        })
        .into_string();
        assert_eq!(svg.matches('M').count(), 2, "{svg}");
        assert!(!svg.contains("<b>") && svg.contains("&lt;b&gt;"));
    }

    /// The x of every point (`<circle cx=…>`) in the order drawn.
    fn point_xs(svg: &str) -> Vec<f64> {
        svg.split("cx=\"").skip(1).map(|r| r[..r.find('"').unwrap()].parse().unwrap()).collect()
    }

    #[test]
    fn contexts_sit_on_a_log_axis() {
        let xs = [65_536.0, 131_072.0, 257_984.0, 262_079.0];
        let svg = line_chart_log_x(
            &Chart {
                title: "t",
                x_title: "context",
                y_title: "y",
                x_labels: vec!["64K".into(), "128K".into(), "256K (257,984)".into(), "256K (262,079)".into()],
                series: vec![Series { name: "a".into(), values: vec![Some(1.0); 4], color: None }],
                value_fmt: crate::format::fixed1,
            },
            &xs,
        )
        .into_string();
        let px = point_xs(&svg);
        let (doubling, last_step) = (px[1] - px[0], px[3] - px[2]);
        // evenly spaced, every step would be the same; on a log axis 64K→128K is a doubling
        // and 257,984→262,079 a 1.6 % step
        assert!(last_step < doubling / 10.0, "{px:?}");
        assert!(((px[2] - px[1]) / doubling - (257_984f64 / 131_072.0).log2()).abs() < 0.01, "{px:?}");
        // the axis is labelled at powers of two, the point labels are in the tooltips
        assert!(svg.contains(">64K</text>") && svg.contains(">128K</text>"), "{svg}");
        assert!(svg.contains("a · 256K (262,079): 1.0"), "{svg}");
    }

    #[test]
    fn a_log_axis_without_a_power_of_two_labels_its_ends() {
        let (pos, ticks) = log_positions(&[257_984.0, 262_079.0]);
        assert!(pos[0] < pos[1]);
        assert_eq!(ticks.iter().map(|t| t.1.as_str()).collect::<Vec<_>>(), ["257,984", "262,079"]);
        let (pos, ticks) = log_positions(&[8192.0]);
        assert_eq!((pos, ticks.len()), (vec![0.5], 1));
    }

    #[test]
    fn a_limit_is_a_labelled_line_the_axis_reaches() {
        let chart = Chart {
            title: "t",
            x_title: "x",
            y_title: "y",
            x_labels: vec!["1".into(), "2".into()],
            series: vec![Series { name: "a".into(), values: vec![Some(5.0), Some(4.0)], color: None }],
            value_fmt: crate::format::fixed1,
        };
        let limit = Limit { value: 30.0, label: "SLO <30>".into() };
        let svg = line_chart_with_limit(&chart, Some(&limit)).into_string();
        assert_eq!(svg.matches("<line class=\"limit\"").count(), 1, "{svg}");
        assert!(svg.contains(">SLO &lt;30&gt;</text>"), "the label is escaped: {svg}");
        // the axis goes past the limit although every point is below it
        assert!(svg.contains(">30</text>") || svg.contains(">35</text>"), "{svg}");
        let ys: Vec<f64> = svg
            .split("class=\"limit\" x1=")
            .nth(1)
            .map(|r| r.split("y1=\"").nth(1).unwrap().split('"').next().unwrap().parse().unwrap())
            .into_iter()
            .collect();
        assert!(ys[0] > TOP && ys[0] < TOP + PLOT_H, "{ys:?}");
        assert!(!line_chart_with_limit(&chart, None).into_string().contains("class=\"limit\""));
        let bad = Limit { value: f64::NAN, label: "x".into() };
        assert!(!line_chart_with_limit(&chart, Some(&bad)).into_string().contains("class=\"limit\""));
    }

    #[test]
    fn huge_values_end() {
        // 1.7e308 once made the tick loop endless
        let svg = line_chart(&Chart {
            title: "t",
            x_title: "x",
            y_title: "y",
            x_labels: vec!["1".into(), "2".into()],
            series: vec![Series { name: "a".into(), values: vec![Some(1.7e308), Some(f64::INFINITY)], color: None }],
            value_fmt: crate::format::fixed1,
        })
        .into_string();
        assert!(svg.matches("class=\"grid\"").count() <= 64);
    }
}
