//! The server's own gauges and counters over a cell's window (methodology §14.1): what each scrape
//! of `/metrics` said, and the per-cell series and summary the record keeps.

use serde::{Deserialize, Serialize};

/// A Prometheus histogram at one scrape: cumulative counts per upper bound, sum and count.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Histogram {
    /// `(le, cumulative count)`, ascending by `le`; the last bound is `+Inf`.
    pub buckets: Vec<(f64, f64)>,
    pub sum: f64,
    pub count: f64,
}

impl Histogram {
    /// The observations made between `earlier` and `self`; `None` when the bounds differ or a
    /// count went backwards (the server restarted).
    pub fn since(&self, earlier: &Histogram) -> Option<Histogram> {
        if self.buckets.len() != earlier.buckets.len() || self.count < earlier.count {
            return None;
        }
        let mut buckets = Vec::with_capacity(self.buckets.len());
        for (&(le, n), &(le0, n0)) in self.buckets.iter().zip(&earlier.buckets) {
            if le != le0 || n < n0 {
                return None;
            }
            buckets.push((le, n - n0));
        }
        Some(Histogram { buckets, sum: self.sum - earlier.sum, count: self.count - earlier.count })
    }

    pub fn mean(&self) -> Option<f64> {
        (self.count > 0.0).then(|| self.sum / self.count)
    }

    /// The `q` quantile as Prometheus' `histogram_quantile` estimates it: linear inside the bucket
    /// that holds it; the highest finite bound when it falls in the `+Inf` bucket.
    pub fn quantile(&self, q: f64) -> Option<f64> {
        let total = self.buckets.last()?.1;
        if total <= 0.0 {
            return None;
        }
        let rank = q * total;
        let (mut lower, mut below) = (0.0, 0.0);
        for &(le, n) in &self.buckets {
            if n >= rank {
                if le.is_infinite() {
                    return Some(lower);
                }
                let inside = n - below;
                let share = if inside > 0.0 { (rank - below) / inside } else { 0.0 };
                return Some(lower + (le - lower) * share);
            }
            (lower, below) = (le, n);
        }
        None
    }
}

/// One scrape of `/metrics`, in the engine-neutral terms of §14.1; a figure the engine does not
/// export is `None`.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ServerScrape {
    pub running: f64,
    pub waiting: f64,
    /// KV-cache usage, 0..1.
    pub kv_usage: Option<f64>,
    /// Cumulative counters.
    pub prompt_tokens: Option<f64>,
    pub generation_tokens: Option<f64>,
    pub preemptions: Option<f64>,
    /// Prefix-cache lookups and hits, in tokens.
    pub prefix_queries: Option<f64>,
    pub prefix_hits: Option<f64>,
    /// Time requests spent queued, seconds.
    pub queue_time: Option<Histogram>,
}

/// When a scrape was taken, seconds from the span's start: the server read its counters at some
/// instant between the scrape's request being sent and its answer arriving.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct ScrapeTime {
    pub sent: f64,
    pub answered: f64,
}

impl ScrapeTime {
    /// Where the scrape is placed on the span: the middle of its request.
    pub fn mid(&self) -> f64 {
        (self.sent + self.answered) / 2.0
    }
}

/// Our streams' tokens over an interval: those that arrived inside it, and bounds on those the
/// server generated inside it (a chunk's tokens were generated after its stream's previous chunk
/// arrived, or its request was sent, and before it arrived: methodology §14.1).
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Arrived {
    /// Tokens of the chunks whose whole interval lies inside.
    pub surely: f64,
    /// Tokens of the chunks that arrived inside.
    pub arrived: f64,
    /// Tokens of the chunks whose interval reaches inside.
    pub possibly: f64,
}

/// Our own count of the tokens the server generated over the scrapes' span, to set the server's
/// counter against (methodology §14.1).
#[derive(Clone, Copy)]
pub enum Ours<'a> {
    /// Every token our requests received came after the first scrape's answer and before the last
    /// scrape's request (a load phase's span): the count is exact whenever the counters were read.
    All(u64),
    /// Streams ran through the first and last scrapes (a decode cell's window): their tokens
    /// between two instants, seconds from the span's start.
    Arriving(&'a dyn Fn(f64, f64) -> Arrived),
}

/// Our count over the span and how far timing lets it move.
struct Counted {
    tokens: f64,
    /// The larger of the two moves (%): the counters read at an edge of their scrapes rather than
    /// in the middle, the tokens of a chunk that spans an edge generated on the other side.
    timing_pct: f64,
}

impl Ours<'_> {
    fn count(&self, first: ScrapeTime, last: ScrapeTime) -> Option<Counted> {
        let (tokens, low, high) = match *self {
            Ours::All(n) => (n as f64, n as f64, n as f64),
            Ours::Arriving(between) => (
                between(first.mid(), last.mid()).arrived,
                between(first.answered, last.sent).surely,
                between(first.sent, last.answered).possibly,
            ),
        };
        (tokens > 0.0).then(|| Counted { tokens, timing_pct: 100.0 * (tokens - low).max(high - tokens) / tokens })
    }
}

/// One point of the series: seconds since the window opened and the gauges then.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ServerPoint {
    #[schemars(range(min = 0))]
    pub t_s: f64,
    #[schemars(range(min = 0))]
    pub running: f64,
    #[schemars(range(min = 0))]
    pub waiting: f64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0))]
    pub kv_usage: Option<f64>,
}

/// The server's view of one cell's window: a compact series and its summary (methodology §14.1).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ServerMetrics {
    /// `--metrics-interval`, seconds.
    #[schemars(range(min = 0))]
    pub interval_s: f64,
    /// Scrapes that answered in the window (the series may keep fewer, see [`MAX_POINTS`]).
    #[schemars(range(min = 2))]
    pub scrapes: u64,
    /// From the first scrape to the last: the span the counters' differences cover.
    #[schemars(range(min = 0))]
    pub span_s: f64,
    /// One point per scrape, thinned to at most 600.
    #[schemars(length(max = 600))]
    pub series: Vec<ServerPoint>,
    /// Mean of the running-requests gauge over the scrapes.
    #[schemars(range(min = 0))]
    pub running_mean: f64,
    /// Largest waiting-requests gauge.
    #[schemars(range(min = 0))]
    pub waiting_max: f64,
    /// Mean KV-cache usage, 0 to 1.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0))]
    pub kv_usage_mean: Option<f64>,
    /// Largest KV-cache usage, 0 to 1.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0))]
    pub kv_usage_max: Option<f64>,
    /// Preemptions in the span.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub preemptions: Option<u64>,
    /// `100 × hits ÷ queries` of the prefix cache in the span.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0, max = 100))]
    pub prefix_hit_pct: Option<f64>,
    /// Prompt and generation tokens the server counted in the span.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prompt_tokens: Option<u64>,
    /// Generation tokens the server counted in the span.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub generation_tokens: Option<u64>,
    /// The server's output tok/s: generation tokens ÷ span.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0))]
    pub server_tok_s: Option<f64>,
    /// The tokens our streams received over the same span (arrival times from the first scrape
    /// to the last).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub measured_tokens: Option<u64>,
    /// `100 × (generation_tokens − measured_tokens) ÷ measured_tokens`: the server's tok/s against
    /// ours over the one span.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tok_s_diff_pct: Option<f64>,
    /// How far `tok_s_diff_pct` can stray from 0 from the scrapes' timing alone: a counter was read
    /// somewhere inside its scrape's request, not at its middle (%).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0))]
    pub tok_s_timing_pct: Option<f64>,
    /// Queue time of the requests queued in the span, from the engine's histogram (ms).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0))]
    pub queue_time_ms_p50: Option<f64>,
    /// Mean queue time of the requests queued in the span.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0))]
    pub queue_time_ms_mean: Option<f64>,
}

/// The most points a cell's series keeps: a longer window keeps every k-th scrape (and the last).
pub const MAX_POINTS: usize = 600;

/// A disagreement between the server's tok/s and ours beyond this, past what the scrapes' own
/// timing explains, is a warning (%).
pub const DISAGREE_PCT: f64 = 2.0;

/// The difference of a counter over the span; `None` when either end lacks it or it went back.
fn delta(first: Option<f64>, last: Option<f64>) -> Option<f64> {
    let d = last? - first?;
    (d >= 0.0 && d.is_finite()).then_some(d)
}

fn round(v: f64, places: i32) -> f64 {
    let k = 10f64.powi(places);
    (v * k).round() / k
}

impl ServerMetrics {
    /// The window's figures from its scrapes (when each was taken, seconds since the window
    /// opened, in order) and our own count over their span (`None`: no comparison); `None` with
    /// fewer than two scrapes.
    pub fn summarize(
        scrapes: &[(ScrapeTime, ServerScrape)],
        interval_s: f64,
        ours: Option<Ours<'_>>,
    ) -> Option<ServerMetrics> {
        let ((at0, first), (at1, last)) = (scrapes.first()?, scrapes.last()?);
        let span = at1.mid() - at0.mid();
        if scrapes.len() < 2 || span <= 0.0 {
            return None;
        }
        let n = scrapes.len() as f64;
        let kv: Vec<f64> = scrapes.iter().filter_map(|(_, s)| s.kv_usage).collect();
        let generation = delta(first.generation_tokens, last.generation_tokens);
        let server_tok_s = generation.map(|g| g / span);
        let counted = generation.zip(ours.and_then(|o| o.count(*at0, *at1)));
        let queued = last.queue_time.as_ref().zip(first.queue_time.as_ref()).and_then(|(b, a)| b.since(a));
        let prefix = delta(first.prefix_hits, last.prefix_hits).zip(delta(first.prefix_queries, last.prefix_queries));
        Some(ServerMetrics {
            interval_s,
            scrapes: scrapes.len() as u64,
            span_s: round(span, 3),
            series: series(scrapes),
            running_mean: round(scrapes.iter().map(|(_, s)| s.running).sum::<f64>() / n, 3),
            waiting_max: scrapes.iter().map(|(_, s)| s.waiting).fold(0.0, f64::max),
            kv_usage_mean: (!kv.is_empty()).then(|| round(kv.iter().sum::<f64>() / kv.len() as f64, 4)),
            kv_usage_max: kv.iter().copied().reduce(f64::max).map(|v| round(v, 4)),
            preemptions: delta(first.preemptions, last.preemptions).map(|d| d.round() as u64),
            prefix_hit_pct: prefix.filter(|(_, q)| *q > 0.0).map(|(h, q)| round(100.0 * h / q, 1)),
            prompt_tokens: delta(first.prompt_tokens, last.prompt_tokens).map(|d| d.round() as u64),
            generation_tokens: generation.map(|d| d.round() as u64),
            server_tok_s: server_tok_s.map(|v| round(v, 3)),
            measured_tokens: counted.as_ref().map(|(_, c)| c.tokens.round() as u64),
            tok_s_diff_pct: counted.as_ref().map(|(g, c)| round(100.0 * (g - c.tokens) / c.tokens, 2)),
            tok_s_timing_pct: counted.as_ref().map(|(_, c)| round(c.timing_pct, 2)),
            queue_time_ms_p50: queued.as_ref().and_then(|h| h.quantile(0.5)).map(|s| round(s * 1000.0, 3)),
            queue_time_ms_mean: queued.as_ref().and_then(Histogram::mean).map(|s| round(s * 1000.0, 3)),
        })
    }

    /// The cell's warning when the server's tok/s and ours disagree by more than [`DISAGREE_PCT`]
    /// beyond what the scrapes' timing explains.
    pub fn warning(&self) -> Option<String> {
        let (diff, server) = (self.tok_s_diff_pct?, self.server_tok_s?);
        let bound = DISAGREE_PCT + self.tok_s_timing_pct.unwrap_or(0.0);
        (diff.abs() > bound).then(|| {
            format!(
                "the server counted {server:.1} output tok/s, {diff:+.1} % from what the streams received over the same span (over ±{bound:.1} %: {DISAGREE_PCT} % and the scrapes' own timing): another client may be using it, or tokens are counted differently"
            )
        })
    }
}

/// The scrapes as points, thinned to at most [`MAX_POINTS`] with the last one kept.
fn series(scrapes: &[(ScrapeTime, ServerScrape)]) -> Vec<ServerPoint> {
    let stride = scrapes.len().div_ceil(MAX_POINTS).max(1);
    let point = |(t, s): &(ScrapeTime, ServerScrape)| ServerPoint {
        t_s: round(t.mid(), 3),
        running: s.running,
        waiting: s.waiting,
        kv_usage: s.kv_usage.map(|v| round(v, 4)),
    };
    let mut out: Vec<ServerPoint> = scrapes.iter().step_by(stride).map(point).collect();
    if !(scrapes.len() - 1).is_multiple_of(stride) {
        if out.len() == MAX_POINTS {
            out.pop();
        }
        out.extend(scrapes.last().map(point));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scrape(running: f64, generated: f64, preemptions: f64) -> ServerScrape {
        ServerScrape {
            running,
            kv_usage: Some(running / 10.0),
            generation_tokens: Some(generated),
            preemptions: Some(preemptions),
            prefix_queries: Some(generated * 2.0),
            prefix_hits: Some(generated),
            ..ServerScrape::default()
        }
    }

    /// A scrape answered at once at `t`.
    fn at(t: f64) -> ScrapeTime {
        ScrapeTime { sent: t, answered: t }
    }

    /// Our streams received `rate` tokens a second, steadily, in chunks of one token.
    fn steady(rate: f64) -> impl Fn(f64, f64) -> Arrived {
        move |from, to| {
            let n = (to - from).max(0.0) * rate;
            Arrived { surely: n, arrived: n, possibly: n }
        }
    }

    #[test]
    fn counters_are_differenced_over_the_span_and_compared() {
        let s = [
            (at(0.01), scrape(4.0, 1000.0, 2.0)),
            (at(1.0), scrape(4.0, 1400.0, 2.0)),
            (at(2.01), scrape(3.0, 1800.0, 5.0)),
        ];
        let m = ServerMetrics::summarize(&s, 1.0, Some(Ours::All(800))).unwrap();
        assert_eq!((m.scrapes, m.span_s, m.generation_tokens, m.preemptions), (3, 2.0, Some(800), Some(3)));
        assert_eq!((m.server_tok_s, m.measured_tokens, m.tok_s_diff_pct), (Some(400.0), Some(800), Some(0.0)));
        assert_eq!((m.running_mean, m.kv_usage_max, m.prefix_hit_pct), (3.667, Some(0.4), Some(50.0)));
        assert_eq!((m.tok_s_timing_pct, m.warning()), (Some(0.0), None));
        let off = ServerMetrics::summarize(&s, 1.0, Some(Ours::All(880))).unwrap();
        assert!(off.tok_s_diff_pct.unwrap() < -9.0);
        assert!(off.warning().unwrap().contains("-9.1 %"), "{:?}", off.warning());
        // without our count, no comparison
        let none = ServerMetrics::summarize(&s, 1.0, None).unwrap();
        assert_eq!((none.server_tok_s, none.tok_s_diff_pct, none.warning()), (Some(400.0), None, None));
        // one scrape, or a counter that went back (a restart), gives nothing for it
        assert_eq!(ServerMetrics::summarize(&s[..1], 1.0, None), None);
        let reset = [s[2].clone(), (at(3.0), scrape(1.0, 10.0, 0.0))];
        let m = ServerMetrics::summarize(&reset, 1.0, Some(Ours::All(800))).unwrap();
        assert_eq!((m.server_tok_s, m.preemptions, m.tok_s_diff_pct), (None, None, None));
    }

    #[test]
    fn streams_are_counted_over_the_scrapes_span_not_the_window() {
        // 400 tok/s, counters read 0.3 s late at the first scrape and 0.8 s after the window's
        // end at the last: over a 5 s window the streams' own figure would be set against 5.5 s
        let s = [(at(0.3), scrape(2.0, 120.0, 0.0)), (at(5.8), scrape(2.0, 2320.0, 0.0))];
        let m = ServerMetrics::summarize(&s, 0.5, Some(Ours::Arriving(&steady(400.0)))).unwrap();
        assert_eq!((m.span_s, m.measured_tokens, m.tok_s_diff_pct), (5.5, Some(2200), Some(0.0)));
        assert_eq!((m.tok_s_timing_pct, m.warning()), (Some(0.0), None));
    }

    #[test]
    fn the_warning_allows_for_when_inside_each_scrape_the_counters_were_read() {
        // each scrape took 0.4 s to answer (a loaded machine); the server read its counters early
        // in the first and late in the last: 2,240 tokens where the midpoints' span holds 2,000
        let slow = |t: f64| ScrapeTime { sent: t - 0.2, answered: t + 0.2 };
        let s = [(slow(0.5), scrape(2.0, 0.0, 0.0)), (slow(5.5), scrape(2.0, 2240.0, 0.0))];
        let m = ServerMetrics::summarize(&s, 0.5, Some(Ours::Arriving(&steady(400.0)))).unwrap();
        assert_eq!((m.measured_tokens, m.tok_s_diff_pct, m.tok_s_timing_pct), (Some(2000), Some(12.0), Some(8.0)));
        assert!(m.warning().unwrap().contains("+12.0 %"), "12 % > 2 % + 8 %: {:?}", m.warning());
        // within the timing's 8 % and the 2 %: no warning
        let s = [(slow(0.5), scrape(2.0, 0.0, 0.0)), (slow(5.5), scrape(2.0, 2190.0, 0.0))];
        let m = ServerMetrics::summarize(&s, 0.5, Some(Ours::Arriving(&steady(400.0)))).unwrap();
        assert_eq!((m.tok_s_diff_pct, m.warning()), (Some(9.5), None));
        // answered at once: the same +9.5 % is a warning
        let s = [(at(0.5), scrape(2.0, 0.0, 0.0)), (at(5.5), scrape(2.0, 2190.0, 0.0))];
        let m = ServerMetrics::summarize(&s, 0.5, Some(Ours::Arriving(&steady(400.0)))).unwrap();
        assert!(m.warning().unwrap().contains("over ±2.0 %"), "{:?}", m.warning());
    }

    #[test]
    fn queue_time_comes_from_the_histogram_difference() {
        let h = |counts: [f64; 3], sum: f64| Histogram {
            buckets: vec![(0.1, counts[0]), (1.0, counts[1]), (f64::INFINITY, counts[2])],
            sum,
            count: counts[2],
        };
        let a = ServerScrape { queue_time: Some(h([5.0, 5.0, 5.0], 0.2)), ..scrape(1.0, 0.0, 0.0) };
        let b = ServerScrape { queue_time: Some(h([7.0, 9.0, 9.0], 1.8)), ..scrape(1.0, 10.0, 0.0) };
        let m = ServerMetrics::summarize(&[(at(0.0), a), (at(1.0), b)], 1.0, None).unwrap();
        // 4 new: 2 under 0.1 s, 2 in (0.1, 1]; the median is the bucket edge 0.1 s
        assert_eq!((m.queue_time_ms_p50, m.queue_time_ms_mean), (Some(100.0), Some(400.0)));
        assert_eq!(h([0.0, 0.0, 4.0], 9.0).quantile(0.5), Some(1.0), "in +Inf: the highest finite bound");
    }

    #[test]
    fn a_long_series_is_thinned_to_the_cap_keeping_the_last_point() {
        let s: Vec<_> = (0..1500).map(|i| (at(i as f64), scrape(1.0, i as f64, 0.0))).collect();
        let m = ServerMetrics::summarize(&s, 1.0, None).unwrap();
        assert!(m.series.len() <= MAX_POINTS, "{}", m.series.len());
        assert_eq!(m.series.last().unwrap().t_s, 1499.0);
        assert_eq!((m.scrapes, m.series[1].t_s), (1500, 3.0));
    }
}
