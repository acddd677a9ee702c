//! Interpolation over the profile's tables: linear in context, log-linear in batch size, clamped at the
//! edges (a what-if outside the measured grid must not invent a trend the data does not show).

/// Linear interpolation of `ys` over the increasing axis `xs`, clamped outside it.
pub(crate) fn linear(xs: &[f64], ys: &[f64], x: f64) -> f64 {
    debug_assert_eq!(xs.len(), ys.len());
    let n = xs.len();
    if x <= xs[0] {
        return ys[0];
    }
    if x >= xs[n - 1] {
        return ys[n - 1];
    }
    let hi = xs.partition_point(|&v| v <= x).min(n - 1);
    let lo = hi - 1;
    let f = (x - xs[lo]) / (xs[hi] - xs[lo]);
    ys[lo] + f * (ys[hi] - ys[lo])
}

/// A `rows[batch][context]` table: linear along context inside each row, then log-linear across batch.
pub(crate) fn batch_context(batch: &[f64], contexts: &[f64], rows: &[Vec<f64>], b: f64, c: f64) -> f64 {
    let n = batch.len();
    let b = b.max(1.0);
    if b <= batch[0] {
        return linear(contexts, &rows[0], c);
    }
    if b >= batch[n - 1] {
        return linear(contexts, &rows[n - 1], c);
    }
    let hi = batch.partition_point(|&v| v <= b).min(n - 1);
    let lo = hi - 1;
    let f = (b.ln() - batch[lo].ln()) / (batch[hi].ln() - batch[lo].ln());
    let y_lo = linear(contexts, &rows[lo], c);
    let y_hi = linear(contexts, &rows[hi], c);
    y_lo + f * (y_hi - y_lo)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn linear_interpolates_and_clamps() {
        let xs = [10.0, 20.0, 40.0];
        let ys = [1.0, 2.0, 4.0];
        assert_eq!(linear(&xs, &ys, 5.0), 1.0);
        assert_eq!(linear(&xs, &ys, 15.0), 1.5);
        assert_eq!(linear(&xs, &ys, 30.0), 3.0);
        assert_eq!(linear(&xs, &ys, 99.0), 4.0);
        assert_eq!(linear(&xs, &ys, 20.0), 2.0);
    }

    #[test]
    fn batch_axis_is_log_linear() {
        let batch = [1.0, 4.0];
        let ctx = [100.0, 200.0];
        let rows = vec![vec![2.0, 4.0], vec![6.0, 8.0]];
        // batch 2 is halfway between 1 and 4 in log space
        assert!((batch_context(&batch, &ctx, &rows, 2.0, 100.0) - 4.0).abs() < 1e-9);
        assert!((batch_context(&batch, &ctx, &rows, 2.0, 150.0) - 5.0).abs() < 1e-9);
        assert_eq!(batch_context(&batch, &ctx, &rows, 64.0, 1e9), 8.0);
        assert_eq!(batch_context(&batch, &ctx, &rows, 0.0, 0.0), 2.0);
    }
}
