//! Percentiles as `docs/methodology.md` defines them: linear interpolation between
//! the closest ranks (`k = (n − 1) · p / 100`). Zeros are kept — dropping them, as
//! the reference tool does, biases every percentile upwards.

/// The `p`-th percentile (0–100) of `values`, or `None` when there are none.
/// NaNs are ignored.
pub fn percentile(values: &[f64], p: f64) -> Option<f64> {
    let mut sorted: Vec<f64> = values.iter().copied().filter(|v| !v.is_nan()).collect();
    sorted.sort_by(f64::total_cmp);
    percentile_sorted(&sorted, p)
}

/// Like [`percentile`] for a slice that is already sorted ascending.
pub fn percentile_sorted(sorted: &[f64], p: f64) -> Option<f64> {
    let n = sorted.len();
    if n == 0 {
        return None;
    }
    let k = (n - 1) as f64 * p.clamp(0.0, 100.0) / 100.0;
    let lo = k.floor() as usize;
    let hi = k.ceil() as usize;
    let frac = k - lo as f64;
    let (a, b) = (sorted[lo], sorted[hi]);
    // written so that an infinite value (a request that never answered) gives infinity, not NaN
    Some(if frac == 0.0 || a == b { a } else { a + (b - a) * frac })
}

pub fn median(values: &[f64]) -> Option<f64> {
    percentile(values, 50.0)
}

/// p50, p90 and p99 of one distribution.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Quantiles {
    pub p50: f64,
    pub p90: f64,
    pub p99: f64,
}

impl Quantiles {
    pub fn of(values: &[f64]) -> Option<Quantiles> {
        let mut sorted: Vec<f64> = values.iter().copied().filter(|v| !v.is_nan()).collect();
        sorted.sort_by(f64::total_cmp);
        Some(Quantiles {
            p50: percentile_sorted(&sorted, 50.0)?,
            p90: percentile_sorted(&sorted, 90.0)?,
            p99: percentile_sorted(&sorted, 99.0)?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn linear_interpolation() {
        let v = [1.0, 2.0, 3.0, 4.0];
        assert_eq!(percentile(&v, 50.0), Some(2.5));
        assert_eq!(percentile(&v, 0.0), Some(1.0));
        assert_eq!(percentile(&v, 100.0), Some(4.0));
        assert!((percentile(&v, 90.0).unwrap() - 3.7).abs() < 1e-12);
    }

    #[test]
    fn zeros_are_kept_and_order_does_not_matter() {
        assert_eq!(median(&[0.0, 0.0, 5.0]), Some(0.0));
        assert_eq!(median(&[5.0, 0.0, 0.0]), Some(0.0));
    }

    #[test]
    fn empty_and_single() {
        assert_eq!(median(&[]), None);
        assert_eq!(median(&[7.0]), Some(7.0));
        assert_eq!(Quantiles::of(&[]), None);
    }
}
