//! 95 % confidence intervals (methodology §12): batch means over sub-windows for the figures a
//! window's streams make together, distribution-free order statistics for percentiles of
//! independent samples, and the tests built on them (does a run reach its precision; do two
//! figures differ beyond their noise; do repeats of a cell agree). Pure functions, no clock.

use serde::{Deserialize, Serialize};

/// A 95 % confidence interval `[lo, hi]`.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Interval {
    pub lo: f64,
    pub hi: f64,
}

impl Interval {
    /// The larger distance from `center` to an end, as % of `center`; `None` at a zero center.
    pub fn half_width_pct(&self, center: f64) -> Option<f64> {
        (center != 0.0).then(|| (self.hi - center).max(center - self.lo) / center.abs() * 100.0)
    }

    pub fn contains(&self, v: f64) -> bool {
        v >= self.lo && v <= self.hi
    }

    /// Rounded outward to `decimals`, so that rounding never narrows it.
    pub fn rounded(&self, decimals: i32) -> Interval {
        let f = 10f64.powi(decimals);
        Interval { lo: (self.lo * f).floor() / f, hi: (self.hi * f).ceil() / f }
    }
}

/// Sub-windows a window is cut into for batch means: 10 is the usual lower end (Schmeiser 1982),
/// enough degrees of freedom for a t-interval, few enough that each batch is long.
pub const BATCHES: usize = 10;

/// Fewest batches with a value that still give an interval.
pub const MIN_BATCHES: usize = 5;

/// Two-sided 95 % Student t quantile for `dof` degrees of freedom.
pub fn t95(dof: usize) -> f64 {
    const TABLE: [f64; 30] = [
        12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160, 2.145, 2.131,
        2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042,
    ];
    match dof {
        0 => f64::INFINITY,
        d if d <= 30 => TABLE[d - 1],
        // the Cornish-Fisher expansion's first terms: within 0.001 past 30
        d => {
            let z: f64 = 1.959_964;
            let d = d as f64;
            z + (z.powi(3) + z) / (4.0 * d) + (5.0 * z.powi(5) + 16.0 * z.powi(3) + 3.0 * z) / (96.0 * d * d)
        }
    }
}

fn mean_sd(values: &[f64]) -> (f64, f64) {
    let n = values.len() as f64;
    let mean = values.iter().sum::<f64>() / n;
    let var = values.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / (n - 1.0).max(1.0);
    (mean, var.sqrt())
}

/// The batch-means (sectioning) interval: `center ± t(k−1) · s / √k`, where `s` is the standard
/// deviation of the `k` batch values. `center` is the figure over the whole window, not the mean
/// of the batches: for a percentile the two differ, and the window's figure is the one reported.
/// `None` with fewer than [`MIN_BATCHES`] batches.
pub fn batch_interval(center: f64, batches: &[f64]) -> Option<Interval> {
    let k = batches.len();
    if k < MIN_BATCHES {
        return None;
    }
    let (_, sd) = mean_sd(batches);
    let h = t95(k - 1) * sd / (k as f64).sqrt();
    Some(Interval { lo: center - h, hi: center + h })
}

/// How a figure moved across a window's batches: the least-squares slope per batch and its
/// standard error. The slope is used as measured, noise and all: shrinking it to what stands out
/// of the noise let a 1 s window that could not see a real 0.5 %/s trend stop (methodology §12.3).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Trend {
    pub slope: f64,
    pub se: f64,
    /// Batches with a value.
    pub n: usize,
}

/// The least-squares trend of a window's batch values, per batch. A batch without a value
/// (`None`) keeps its place, so the others keep theirs. `None` with fewer than [`MIN_BATCHES`].
pub fn batch_trend(batches: &[Option<f64>]) -> Option<Trend> {
    let points: Vec<(f64, f64)> = batches.iter().enumerate().filter_map(|(i, v)| v.map(|v| (i as f64, v))).collect();
    if points.len() < MIN_BATCHES {
        return None;
    }
    let n = points.len() as f64;
    let (mx, my) = (points.iter().map(|p| p.0).sum::<f64>() / n, points.iter().map(|p| p.1).sum::<f64>() / n);
    let sxx: f64 = points.iter().map(|p| (p.0 - mx).powi(2)).sum();
    let slope = points.iter().map(|p| (p.0 - mx) * (p.1 - my)).sum::<f64>() / sxx;
    let residuals: f64 = points.iter().map(|p| (p.1 - my - slope * (p.0 - mx)).powi(2)).sum();
    let se = (residuals / (n - 2.0) / sxx).sqrt();
    Some(Trend { slope, se, n: points.len() })
}

/// Where the figure of the longest window would lie relative to this window's, were the trend to
/// go on (methodology §12.3): both windows start at W0, so their centres are `(longest − len) / 2`
/// apart, and a figure moving by `slope_per_batch` every `len / BATCHES` moves that much further.
/// 0 for a window as long as the longest.
pub fn position_shift(slope_per_batch: f64, len_s: f64, longest_s: f64) -> f64 {
    if len_s <= 0.0 || longest_s <= len_s {
        return 0.0;
    }
    slope_per_batch / (len_s / BATCHES as f64) * (longest_s - len_s) / 2.0
}

/// `interval` stretched by `shift` on the side the figure is moving to: an interval for the
/// longest window's figure, honest about where in the requests' life the shorter window lay.
pub fn shifted(interval: Interval, shift: f64) -> Interval {
    if shift >= 0.0 {
        Interval { lo: interval.lo, hi: interval.hi + shift }
    } else {
        Interval { lo: interval.lo + shift, hi: interval.hi }
    }
}

/// The interval for the longest window's figure, from a shorter window's `interval` about
/// `center` and the `trend` of its batches (methodology §12.3). Under a linear drift the longest
/// window's figure is the fitted line at its centre, `center + shift` with `shift` =
/// [`position_shift`] of the slope. Its estimate has two independent errors (a least-squares fit's
/// mean and slope are uncorrelated): the level's, which `interval` already holds, and the slope's,
/// `se` projected as far, whose 95 % half-width is `t(n − 2) · |position_shift(se)|` (a slope from
/// ten sub-windows is noisy, and the projection multiplies its error by the distance). The two are
/// added in quadrature about the projected point, the confidence band of the fitted line at the
/// longest window's centre. The result also holds `interval` itself, so a drift that stops (the
/// line no longer holds) is not claimed away. With `se` 0 it is [`shifted`]'s interval.
pub fn projected(interval: Interval, center: f64, trend: Trend, len_s: f64, longest_s: f64) -> Interval {
    let shift = position_shift(trend.slope, len_s, longest_s);
    let slope_h = t95(trend.n.saturating_sub(2)) * position_shift(trend.se, len_s, longest_s).abs();
    if slope_h == 0.0 || !slope_h.is_finite() {
        return shifted(interval, shift);
    }
    let at = center + shift;
    let (down, up) = ((center - interval.lo).max(0.0), (interval.hi - center).max(0.0));
    Interval { lo: interval.lo.min(at - down.hypot(slope_h)), hi: interval.hi.max(at + up.hypot(slope_h)) }
}

/// The mean of `values` with its t-interval; `None` with fewer than two.
pub fn mean_interval(values: &[f64]) -> Option<(f64, Interval)> {
    if values.len() < 2 {
        return None;
    }
    let (mean, sd) = mean_sd(values);
    let h = t95(values.len() - 1) * sd / (values.len() as f64).sqrt();
    Some((mean, Interval { lo: mean - h, hi: mean + h }))
}

/// The distribution-free interval of the `p`-th percentile (0–100) of independent samples:
/// `[x(l), x(u)]`, the order statistics whose binomial(n, p) probability of straddling the true
/// percentile is at least 95 %. `sorted` ascending. `None` when `n` is too small for such a pair
/// (fewer than 6 samples at p50, fewer than 36 at p90).
pub fn quantile_interval(sorted: &[f64], p: f64) -> Option<Interval> {
    let n = sorted.len();
    let q = (p / 100.0).clamp(0.0, 1.0);
    if n == 0 || q <= 0.0 || q >= 1.0 {
        return None;
    }
    let (l, u) = if n <= 1000 { binomial_ranks(n, q)? } else { normal_ranks(n, q)? };
    Some(Interval { lo: sorted[l], hi: sorted[u] })
}

/// The fewest independent samples whose `p`-th percentile (0–100) has a distribution-free 95 %
/// interval ([`quantile_interval`]): 6 at p50, 36 at p90. `None` for a percentile no count up to
/// 100,000 covers.
pub fn quantile_min_samples(p: f64) -> Option<usize> {
    let q = (p / 100.0).clamp(0.0, 1.0);
    if q <= 0.0 || q >= 1.0 {
        return None;
    }
    (1..=100_000).find(|&n| if n <= 1000 { binomial_ranks(n, q).is_some() } else { normal_ranks(n, q).is_some() })
}

/// 0-based ranks `(l, u)` with `P(l < B ≤ u) ≥ 0.95` for `B ~ binomial(n, q)`, each tail ≤ 2.5 %.
fn binomial_ranks(n: usize, q: f64) -> Option<(usize, usize)> {
    // cdf[k] = P(B ≤ k), by the pmf's recurrence in logs: (1 − q)^n alone underflows at n = 500
    let mut ln_pmf = n as f64 * (1.0 - q).ln();
    let odds = (q / (1.0 - q)).ln();
    let mut cdf = Vec::with_capacity(n + 1);
    let mut acc = 0.0;
    for k in 0..=n {
        acc += ln_pmf.exp();
        cdf.push(acc);
        ln_pmf += ((n - k) as f64 / (k + 1) as f64).ln() + odds;
    }
    // x(l+1) (1-based) is below the percentile unless B ≤ l: want P(B ≤ l) ≤ 2.5 %
    let l = cdf.iter().rposition(|&c| c <= 0.025)?;
    // x(u+1) is above it unless B > u: want P(B ≤ u) ≥ 97.5 %
    let u = cdf.iter().position(|&c| c >= 0.975)?;
    (u < n).then_some((l, u))
}

fn normal_ranks(n: usize, q: f64) -> Option<(usize, usize)> {
    let nf = n as f64;
    let h = 1.959_964 * (nf * q * (1.0 - q)).sqrt();
    let l = (nf * q - h).floor();
    let u = (nf * q + h).ceil();
    (l >= 1.0 && u < nf).then(|| (l as usize - 1, u as usize))
}

/// Whether `a` and `b` differ beyond their noise: the gap between them is larger than the
/// root-sum-square of the half-widths facing each other (`a`'s upper side and `b`'s lower side when
/// `b > a`). Figures without an interval cannot be told apart from noise: `None`.
pub fn differ(a: f64, ia: Option<Interval>, b: f64, ib: Option<Interval>) -> Option<bool> {
    let (ia, ib) = (ia?, ib?);
    let (ha, hb) = if b >= a { (ia.hi - a, b - ib.lo) } else { (a - ia.lo, ib.hi - b) };
    Some((b - a).abs() > (ha.max(0.0).powi(2) + hb.max(0.0).powi(2)).sqrt())
}

/// Whether repeats `(value, interval)` of one figure agree: Cochran's Q, the weighted squared
/// distance of each repeat from their weighted mean (weights 1/se², se = half-width / 1.96),
/// against the 99th percentile of χ² with k−1 degrees of freedom. A 1 % level, so that a run with
/// many cells seldom flags a steady one. `None` with fewer than two repeats with intervals.
pub fn repeats_agree(repeats: &[(f64, Interval)]) -> Option<bool> {
    let weighted: Vec<(f64, f64)> = repeats
        .iter()
        .map(|(v, i)| {
            let se = ((i.hi - i.lo) / 2.0 / 1.959_964).max(v.abs() * 1e-6).max(1e-12);
            (*v, 1.0 / (se * se))
        })
        .collect();
    if weighted.len() < 2 {
        return None;
    }
    let wsum: f64 = weighted.iter().map(|(_, w)| w).sum();
    let mean = weighted.iter().map(|(v, w)| v * w).sum::<f64>() / wsum;
    let q: f64 = weighted.iter().map(|(v, w)| w * (v - mean).powi(2)).sum();
    Some(q <= chi2_99(weighted.len() - 1))
}

/// The 99th percentile of χ² with `k` degrees of freedom (Wilson–Hilferty; exact at k = 1).
fn chi2_99(k: usize) -> f64 {
    if k == 1 {
        return 6.635;
    }
    let k = k as f64;
    let z = 2.326_348;
    k * (1.0 - 2.0 / (9.0 * k) + z * (2.0 / (9.0 * k)).sqrt()).powi(3)
}

#[cfg(test)]
mod tests;
