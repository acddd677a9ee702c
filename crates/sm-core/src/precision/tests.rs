use super::*;

/// splitmix64: a seeded source of uniform samples, so that coverage is tested, not assumed.
struct Rng(u64);

impl Rng {
    fn uniform(&mut self) -> f64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        ((z ^ (z >> 31)) >> 11) as f64 / (1u64 << 53) as f64
    }
    /// Box–Muller.
    fn normal(&mut self) -> f64 {
        let (u, v) = (self.uniform().max(1e-300), self.uniform());
        (-2.0 * u.ln()).sqrt() * (2.0 * std::f64::consts::PI * v).cos()
    }
}

#[test]
fn t_quantiles_fall_towards_the_normal_one() {
    assert_eq!(t95(9), 2.262);
    assert!(t95(0).is_infinite());
    let mut last = f64::INFINITY;
    for d in 1..200 {
        assert!(t95(d) < last && t95(d) > 1.96, "dof {d}");
        last = t95(d);
    }
    assert!((t95(31) - 2.040).abs() < 0.002 && (t95(120) - 1.980).abs() < 0.002);
}

#[test]
fn order_statistic_intervals_need_enough_samples() {
    let v: Vec<f64> = (1..=5).map(f64::from).collect();
    assert_eq!(quantile_interval(&v, 50.0), None, "5 samples cannot give a 95 % interval of the median");
    let v: Vec<f64> = (1..=6).map(f64::from).collect();
    assert_eq!(quantile_interval(&v, 50.0), Some(Interval { lo: 1.0, hi: 6.0 }));
    let v: Vec<f64> = (1..=35).map(f64::from).collect();
    assert_eq!(quantile_interval(&v, 90.0), None);
    let v: Vec<f64> = (1..=36).map(f64::from).collect();
    assert!(quantile_interval(&v, 90.0).is_some());
    assert_eq!(quantile_interval(&[], 50.0), None);
}

/// Over 2,000 seeded samples of each size, the interval holds the true percentile of the
/// distribution at least 95 % of the time (it is conservative), and not much more (it is tight).
#[test]
fn order_statistic_intervals_cover_the_true_percentile() {
    let mut rng = Rng(7);
    for (n, p) in [(20, 50.0), (200, 50.0), (60, 90.0), (500, 90.0), (1500, 50.0), (2000, 99.0)] {
        let truth = p / 100.0; // uniform on [0, 1)
        let trials = 2000;
        let mut covered = 0;
        for _ in 0..trials {
            let mut v: Vec<f64> = (0..n).map(|_| rng.uniform()).collect();
            v.sort_by(f64::total_cmp);
            covered += usize::from(quantile_interval(&v, p).unwrap_or_else(|| panic!("n {n} p{p}")).contains(truth));
        }
        let rate = covered as f64 / trials as f64;
        assert!((0.94..=0.99).contains(&rate), "n {n} p{p}: {rate}");
    }
}

/// Ten batch means of noisy data: the interval around the overall mean covers the true mean at
/// about its nominal rate.
#[test]
fn batch_means_cover_the_true_mean() {
    let mut rng = Rng(11);
    let trials = 2000;
    let mut covered = 0;
    for _ in 0..trials {
        let batches: Vec<f64> = (0..BATCHES).map(|_| 100.0 + 5.0 * rng.normal()).collect();
        let center = batches.iter().sum::<f64>() / batches.len() as f64;
        covered += usize::from(batch_interval(center, &batches).unwrap().contains(100.0));
    }
    let rate = covered as f64 / trials as f64;
    assert!((0.93..=0.97).contains(&rate), "{rate}");
    assert_eq!(batch_interval(1.0, &[1.0; MIN_BATCHES - 1]), None);
    let quiet = batch_interval(50.0, &[50.0; BATCHES]).unwrap();
    assert_eq!((quiet.lo, quiet.hi), (50.0, 50.0), "identical batches: no width");
}

#[test]
fn half_widths_and_outward_rounding() {
    let i = Interval { lo: 95.0, hi: 103.0 };
    assert_eq!(i.half_width_pct(100.0), Some(5.0), "the wider side");
    assert_eq!(i.half_width_pct(0.0), None);
    let r = Interval { lo: 1.23456, hi: 1.23444 + 0.001 }.rounded(3);
    assert_eq!((r.lo, r.hi), (1.234, 1.236));
}

#[test]
fn a_difference_counts_only_beyond_both_intervals() {
    let i = |c: f64, h: f64| Some(Interval { lo: c - h, hi: c + h });
    // 3 apart with ±2 each: √8 ≈ 2.83 < 3
    assert_eq!(differ(100.0, i(100.0, 2.0), 103.0, i(103.0, 2.0)), Some(true));
    assert_eq!(differ(100.0, i(100.0, 2.5), 103.0, i(103.0, 2.5)), Some(false));
    assert_eq!(differ(100.0, i(100.0, 2.0), 100.0, i(100.0, 0.0)), Some(false));
    assert_eq!(differ(100.0, None, 150.0, i(150.0, 1.0)), None);
    // asymmetric: only the sides that face each other count
    let a = Some(Interval { lo: 50.0, hi: 101.0 });
    assert_eq!(differ(100.0, a, 103.0, i(103.0, 1.0)), Some(true));
    assert_eq!(differ(103.0, i(103.0, 1.0), 100.0, a), Some(true), "symmetric in its arguments");
}

#[test]
fn repeats_that_drift_disagree_and_steady_ones_agree() {
    let i = |c: f64, h: f64| (c, Interval { lo: c - h, hi: c + h });
    assert_eq!(repeats_agree(&[i(100.0, 1.0)]), None);
    assert_eq!(repeats_agree(&[i(100.0, 1.0), i(100.5, 1.0), i(99.6, 1.0)]), Some(true));
    assert_eq!(repeats_agree(&[i(100.0, 1.0), i(97.0, 1.0), i(94.0, 1.0)]), Some(false), "a 3 % per repeat drift");
    // seeded steady repeats with honest intervals: flagged about 1 % of the time
    let mut rng = Rng(3);
    let flagged = (0..1000)
        .filter(|_| {
            let r: Vec<_> = (0..4).map(|_| i(100.0 + rng.normal(), 1.959_964)).collect();
            repeats_agree(&r) == Some(false)
        })
        .count();
    assert!(flagged <= 25, "{flagged} of 1000 steady cells flagged");
}

#[test]
fn mean_of_repeats() {
    assert_eq!(mean_interval(&[1.0]), None);
    let (m, i) = mean_interval(&[9.0, 11.0]).unwrap();
    assert_eq!(m, 10.0);
    assert!((i.hi - 10.0 - 12.706 * 2f64.sqrt() / 2f64.sqrt()).abs() < 1e-9);
}

#[test]
fn a_batch_trend_is_the_least_squares_one_and_keeps_missing_batches_in_place() {
    let line: Vec<Option<f64>> = (0..10).map(|i| Some(5.0 + 0.5 * i as f64)).collect();
    let t = batch_trend(&line).unwrap();
    assert!((t.slope - 0.5).abs() < 1e-12 && t.se < 1e-9 && t.n == 10);
    let mut gappy = line.clone();
    gappy[3] = None;
    gappy[7] = None;
    assert!((batch_trend(&gappy).unwrap().slope - 0.5).abs() < 1e-12, "a missing batch does not move the others");
    assert_eq!(batch_trend(&[Some(1.0), Some(2.0), None, None, Some(3.0), Some(4.0)]), None);
}

/// Noise around a trend: the standard error is that of the least-squares slope, σ / √Sxx.
#[test]
fn a_trends_standard_error_is_the_slopes() {
    let mut rng = Rng(7);
    let slopes: Vec<f64> = (0..400)
        .map(|_| {
            let b: Vec<Option<f64>> = (0..BATCHES).map(|i| Some(100.0 + i as f64 + rng.normal())).collect();
            batch_trend(&b).unwrap().slope
        })
        .collect();
    let (mean, sd) = mean_sd(&slopes);
    // Sxx of 0..9 is 82.5
    assert!((mean - 1.0).abs() < 0.03 && (sd - 1.0 / 82.5f64.sqrt()).abs() < 0.02, "{mean} {sd}");
    let b: Vec<Option<f64>> = (0..BATCHES).map(|i| Some(100.0 + i as f64 + rng.normal())).collect();
    assert!((batch_trend(&b).unwrap().se - 1.0 / 82.5f64.sqrt()).abs() < 0.06);
}

#[test]
fn the_position_shift_projects_the_trend_to_the_longest_windows_centre() {
    // 5 s window: batches of 0.5 s, +1 per batch = +2 per s; the 30 s window's centre is 12.5 s later
    assert!((position_shift(1.0, 5.0, 30.0) - 25.0).abs() < 1e-9);
    assert_eq!(position_shift(1.0, 30.0, 30.0), 0.0, "the longest window is its own figure");
    assert_eq!(position_shift(1.0, 31.0, 30.0), 0.0);
    assert_eq!(position_shift(1.0, 0.0, 30.0), 0.0);
    let i = Interval { lo: 9.0, hi: 11.0 };
    assert_eq!(shifted(i, 2.0), Interval { lo: 9.0, hi: 13.0 });
    assert_eq!(shifted(i, -2.0), Interval { lo: 7.0, hi: 11.0 });
    assert_eq!(shifted(i, -2.0).half_width_pct(10.0), Some(30.0), "the shift counts against the precision");
}

/// A figure drifting linearly, measured over the first `len` of a `longest` window: its interval
/// shifted by the projected trend holds the longest window's mean; the plain one does not.
#[test]
fn a_shifted_interval_holds_the_longest_windows_figure_under_a_trend() {
    let (len, longest, rate) = (5.0, 30.0, 0.01); // the figure grows 1 % of its start per second
    let at = |t: f64| 100.0 * (1.0 + rate * t);
    let batches: Vec<Option<f64>> = (0..BATCHES).map(|i| Some(at((i as f64 + 0.5) * len / BATCHES as f64))).collect();
    let center = at(len / 2.0);
    let plain = batch_interval(center, &batches.iter().flatten().copied().collect::<Vec<_>>()).unwrap();
    let truth = at(longest / 2.0);
    assert!(!plain.contains(truth), "{plain:?} vs {truth}");
    let shift = position_shift(batch_trend(&batches).unwrap().slope, len, longest);
    assert!(shifted(plain, shift).contains(truth), "{:?} vs {truth}", shifted(plain, shift));
}

/// Noise around a drift, a 5 s window of a 30 s longest: the slope from ten sub-windows is noisy,
/// and projected 25 sub-windows on, its error is 2.75 σ against the level's 0.32 σ. Moving the
/// interval by the slope alone covers the longest window's figure far less often than 95 %; with
/// the slope's error projected as well, at about the nominal rate.
#[test]
fn a_projected_interval_covers_the_longest_windows_figure_when_the_slope_is_noisy() {
    let (len, longest, sigma, slope) = (5.0, 30.0, 1.0, 0.2); // per sub-window of 0.5 s
    let truth = 100.0 + slope * (longest / 2.0 / (len / BATCHES as f64) - 0.5);
    let mut rng = Rng(16);
    let (mut by_slope, mut by_projection) = (0, 0);
    for _ in 0..1000 {
        let b: Vec<f64> = (0..BATCHES).map(|i| 100.0 + slope * i as f64 + sigma * rng.normal()).collect();
        let center = b.iter().sum::<f64>() / BATCHES as f64;
        let plain = batch_interval(center, &b).unwrap();
        let trend = batch_trend(&b.iter().map(|&v| Some(v)).collect::<Vec<_>>()).unwrap();
        by_slope += shifted(plain, position_shift(trend.slope, len, longest)).contains(truth) as u32;
        let p = projected(plain, center, trend, len, longest);
        assert!(p.lo <= plain.lo && p.hi >= plain.hi, "it holds the window's own interval");
        by_projection += p.contains(truth) as u32;
    }
    assert!(by_slope < 700, "the slope alone covers {by_slope} of 1000");
    assert!((930..=990).contains(&by_projection), "the projection covers {by_projection} of 1000");
}

#[test]
fn a_projected_interval_without_slope_error_is_the_shifted_one() {
    let i = Interval { lo: 9.0, hi: 11.0 };
    let exact = Trend { slope: 0.1, se: 0.0, n: BATCHES };
    assert_eq!(projected(i, 10.0, exact, 5.0, 30.0), shifted(i, position_shift(0.1, 5.0, 30.0)));
    let noisy = Trend { se: 0.04, ..exact };
    // shift +2.5 to 12.5; slope half-width t(8) · 1.0 = 2.306; up √(1 + 2.306²) = 2.513
    let p = projected(i, 10.0, noisy, 5.0, 30.0);
    assert_eq!(p.lo, 9.0, "the projection's lower end (12.5 − 2.513) lies above the window's");
    assert!((p.hi - (12.5 + 1f64.hypot(2.306))).abs() < 1e-9, "{p:?}");
    assert_eq!(projected(i, 10.0, noisy, 30.0, 30.0), i, "the longest window is its own figure");
}

#[test]
fn the_fewest_samples_a_percentile_interval_needs() {
    assert_eq!(quantile_min_samples(50.0), Some(6));
    assert_eq!(quantile_min_samples(90.0), Some(36));
    assert_eq!(quantile_min_samples(0.0), None);
    for p in [50.0, 90.0] {
        let n = quantile_min_samples(p).unwrap();
        let sorted = |n: usize| (0..n).map(|i| i as f64).collect::<Vec<_>>();
        assert!(quantile_interval(&sorted(n), p).is_some() && quantile_interval(&sorted(n - 1), p).is_none());
    }
}
