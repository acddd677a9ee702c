//! A scatter of (x, y) points joined in order, both axes linear from 0: the frontier, where each
//! series (a context) has its own x values and a vertical line marks the SLO's per-user floor.

use std::fmt::Write;

use maud::{Markup, html};

use super::{LEFT, Limit, PLOT_H, RIGHT, SERIES_CLASSES, TOP, W, d1, legend_swatch, nice_step, tick_label, y_grid};
use crate::escape::Text;

pub struct XyPoint {
    pub x: f64,
    pub y: f64,
    /// The point's tooltip.
    pub label: String,
}

pub struct XySeries {
    pub name: String,
    /// Joined in this order.
    pub points: Vec<XyPoint>,
    pub color: Option<usize>,
}

pub struct XyChart<'a> {
    pub title: &'a str,
    pub x_title: &'a str,
    pub y_title: &'a str,
    pub series: Vec<XySeries>,
}

/// The top of an axis from 0 that holds `max`, and its step: about five round ticks.
fn axis(max: f64) -> (f64, f64) {
    // a file can hold any number: past 1e15 the axis is clamped so it stays finite
    let max = max.min(1e15);
    let step = if max > 0.0 { nice_step(max) } else { 1.0 };
    ((max / step).ceil().max(1.0) * step, step)
}

/// The chart, with a dashed vertical line at `x_limit` where it is a positive finite value.
pub fn xy_chart(chart: &XyChart, x_limit: Option<&Limit>) -> Markup {
    let x_limit = x_limit.filter(|l| l.value.is_finite() && l.value > 0.0);
    let finite = |v: &f64| v.is_finite() && *v >= 0.0;
    let all = || chart.series.iter().flat_map(|s| &s.points).filter(|p| finite(&p.x) && finite(&p.y));
    let (x_top, x_step) = axis(all().map(|p| p.x).fold(x_limit.map_or(0.0, |l| l.value * 1.1), f64::max));
    let (y_top, y_step) = axis(all().map(|p| p.y).fold(0.0, f64::max));
    let plot_w = W - LEFT - RIGHT;
    let per_row = ((W - LEFT) / super::LEGEND_ITEM).floor().max(1.0) as usize;
    let axis_bottom = TOP + PLOT_H;
    let height = axis_bottom + 44.0 + chart.series.len().div_ceil(per_row) as f64 * 18.0;
    let x_at = |v: f64| LEFT + plot_w * (v.min(x_top) / x_top);
    let y_at = |v: f64| axis_bottom - PLOT_H * (v.min(y_top) / y_top);
    let x_ticks: Vec<f64> = (0..=((x_top / x_step).round() as usize).min(20)).map(|i| i as f64 * x_step).collect();
    let title = Text(chart.title);
    html! {
        svg class="chart" viewBox={ "0 0 " (W) " " (height) } role="img" aria-label=(title)
            xmlns="http://www.w3.org/2000/svg" {
            title { (title) }
            text class="ct" x=(LEFT) y="16" { (title) }
            (y_grid(y_top, y_step, &y_at))
            text class="axis" transform={ "translate(14 " (d1(TOP + PLOT_H / 2.0)) ") rotate(-90)" }
                text-anchor="middle" { (Text(chart.y_title)) }
            @for t in &x_ticks {
                text class="tick" x=(d1(x_at(*t))) y=(d1(axis_bottom + 16.0)) text-anchor="middle" {
                    (Text(&tick_label(*t)))
                }
            }
            text class="axis" x=(d1(LEFT + plot_w / 2.0)) y=(d1(axis_bottom + 34.0)) text-anchor="middle" {
                (Text(chart.x_title))
            }
            @if let Some(l) = x_limit {
                @let x = x_at(l.value);
                line class="limit" x1=(d1(x)) x2=(d1(x)) y1=(TOP) y2=(d1(axis_bottom)) {}
                text class="limit" x=(d1(x + 4.0)) y=(d1(TOP + 10.0)) { (Text(&l.label)) }
            }
            @for (si, series) in chart.series.iter().enumerate() {
                @let class = format!("s{}", series.color.unwrap_or(si) % SERIES_CLASSES);
                (marks(series, &class, &x_at, &y_at, &finite))
                (legend_swatch(&series.name, &class, si / per_row, si % per_row, axis_bottom))
            }
        }
    }
}

fn marks(
    series: &XySeries,
    class: &str,
    x_at: &dyn Fn(f64) -> f64,
    y_at: &dyn Fn(f64) -> f64,
    finite: &dyn Fn(&f64) -> bool,
) -> Markup {
    let points: Vec<&XyPoint> = series.points.iter().filter(|p| finite(&p.x) && finite(&p.y)).collect();
    let mut d = String::new();
    for (i, p) in points.iter().enumerate() {
        let _ = write!(d, "{}{:.1} {:.1} ", if i == 0 { "M" } else { "L" }, x_at(p.x), y_at(p.y));
    }
    html! {
        @if points.len() > 1 {
            path class={ "line " (class) } d=(d.trim_end()) {}
        }
        @for p in &points {
            circle class={ "pt " (class) } cx=(d1(x_at(p.x))) cy=(d1(y_at(p.y))) r="3" {
                title { (Text(&series.name)) " · " (Text(&p.label)) }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn series(name: &str, points: &[(f64, f64)]) -> XySeries {
        XySeries {
            name: name.into(),
            points: points.iter().map(|&(x, y)| XyPoint { x, y, label: format!("{x}/{y}") }).collect(),
            color: None,
        }
    }

    #[test]
    fn points_sit_at_their_values_and_the_limit_is_vertical() {
        let chart = XyChart {
            title: "F <&>",
            x_title: "tok/s per user",
            y_title: "tok/s per GPU",
            series: vec![series("8K", &[(100.0, 50.0), (50.0, 100.0)]), series("<b>", &[(25.0, f64::NAN)])],
        };
        let svg = xy_chart(&chart, Some(&Limit { value: 20.0, label: "SLO".into() })).into_string();
        assert!(svg.contains("F &lt;&amp;&gt;") && svg.contains("&lt;b&gt;") && !svg.contains("<b>"), "{svg}");
        // x axis 0…100 over the plot's width, y 0…100 over its height
        let plot_w = W - LEFT - RIGHT;
        let cx = |x: f64| d1(LEFT + plot_w * x / 100.0);
        assert!(svg.contains(&format!("cx=\"{}\" cy=\"{}\"", cx(100.0), d1(TOP + PLOT_H / 2.0))), "{svg}");
        assert!(svg.contains(&format!("cx=\"{}\" cy=\"{}\"", cx(50.0), d1(TOP))), "{svg}");
        assert_eq!(svg.matches("<circle").count(), 2, "a point that is not a number is not drawn");
        assert!(svg.contains(&format!("x1=\"{0}\" x2=\"{0}\"", cx(20.0))), "the limit at x = 20: {svg}");
        assert_eq!(svg.matches("<path").count(), 1, "one line: the other series has no point");
    }

    #[test]
    fn huge_and_empty_values_keep_the_axes_finite() {
        let chart = XyChart { title: "t", x_title: "x", y_title: "y", series: vec![series("a", &[(1.7e308, 1e300)])] };
        let svg = xy_chart(&chart, None).into_string();
        assert!(!svg.contains("NaN") && !svg.contains("inf"), "{svg}");
        let empty = XyChart { title: "t", x_title: "x", y_title: "y", series: vec![] };
        assert!(xy_chart(&empty, None).into_string().contains("<svg"));
    }
}
