//! Noise and drift on decode step times (a profile's optional `[noise]` table): a real server's steps
//! vary from one to the next and can slow down as it heats up; tests of precision need both, with a
//! known truth.

use serde::Serialize;

/// Seed used when a profile's `[noise]` table does not set one, so runs are reproducible by default.
pub const DEFAULT_SEED: u64 = 0x5EED_5EED;
/// Largest accepted `step_cv`: beyond it a lognormal step time is mostly a few huge outliers.
pub const MAX_STEP_CV: f64 = 2.0;
/// Largest accepted `drift_pct_per_min` (the step time doubles in 10 s at this rate).
pub const MAX_DRIFT_PCT_PER_MIN: f64 = 600.0;

/// The settings; the default is no noise and no drift.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Noise {
    /// Coefficient of variation of each decode step's duration (standard deviation / mean).
    pub step_cv: f64,
    /// Linear growth of the step time, in % of the profile's value per minute since the sim started.
    pub drift_pct_per_min: f64,
    pub seed: u64,
}

impl Default for Noise {
    fn default() -> Self {
        Self { step_cv: 0.0, drift_pct_per_min: 0.0, seed: DEFAULT_SEED }
    }
}

/// A value out of range; the caller names the key or flag it came from.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("must be a number from 0 to {max}, got {got}")]
pub struct OutOfRange {
    pub max: f64,
    pub got: f64,
}

fn in_range(x: f64, max: f64) -> Result<f64, OutOfRange> {
    if x.is_finite() && (0.0..=max).contains(&x) { Ok(x) } else { Err(OutOfRange { max, got: x }) }
}

impl Noise {
    pub fn is_off(&self) -> bool {
        self.step_cv == 0.0 && self.drift_pct_per_min == 0.0
    }

    pub fn with_step_cv(self, cv: f64) -> Result<Self, OutOfRange> {
        Ok(Self { step_cv: in_range(cv, MAX_STEP_CV)?, ..self })
    }

    pub fn with_drift(self, pct_per_min: f64) -> Result<Self, OutOfRange> {
        Ok(Self { drift_pct_per_min: in_range(pct_per_min, MAX_DRIFT_PCT_PER_MIN)?, ..self })
    }

    /// The drift's factor on the step time at `t` seconds since the sim started.
    pub fn drift_factor(&self, t: f64) -> f64 {
        1.0 + self.drift_pct_per_min / 100.0 * t.max(0.0) / 60.0
    }
}

/// The generator of step-time factors: one per decode step, in step order, the same sequence for the
/// same seed.
#[derive(Debug, Clone)]
pub struct StepNoise {
    noise: Noise,
    /// σ of ln(factor): a lognormal with coefficient of variation `cv` has σ² = ln(1 + cv²).
    sigma: f64,
    rng: SplitMix64,
    /// Box–Muller makes normals in pairs; the second waits here.
    spare: Option<f64>,
}

impl StepNoise {
    pub fn new(noise: Noise) -> Self {
        let sigma = (1.0 + noise.step_cv * noise.step_cv).ln().sqrt();
        Self { noise, sigma, rng: SplitMix64(noise.seed), spare: None }
    }

    /// The next step's random factor, exp(σZ − σ²/2): lognormal with mean exactly 1, so the profile's
    /// step time stays the long-run mean, and coefficient of variation `step_cv`. 1 without noise.
    pub fn next_factor(&mut self) -> f64 {
        if self.sigma == 0.0 {
            return 1.0;
        }
        let z = self.normal();
        (self.sigma * z - self.sigma * self.sigma / 2.0).exp()
    }

    /// The factor on a decode step that starts at `t` seconds since the sim started: noise × drift.
    pub fn step_factor(&mut self, t: f64) -> f64 {
        self.next_factor() * self.noise.drift_factor(t)
    }

    fn normal(&mut self) -> f64 {
        if let Some(z) = self.spare.take() {
            return z;
        }
        // u1 in (0, 1]: ln(0) would be −∞
        let u1 = 1.0 - self.rng.unit();
        let u2 = self.rng.unit();
        let r = (-2.0 * u1.ln()).sqrt();
        let a = std::f64::consts::TAU * u2;
        self.spare = Some(r * a.sin());
        r * a.cos()
    }
}

/// splitmix64 (Steele, Lea, Flood 2014): tiny, fast and good enough for simulated jitter.
#[derive(Debug, Clone)]
struct SplitMix64(u64);

impl SplitMix64 {
    fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in [0, 1) from the top 53 bits.
    fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn factors(noise: Noise, n: usize) -> Vec<f64> {
        let mut g = StepNoise::new(noise);
        (0..n).map(|_| g.next_factor()).collect()
    }

    fn mean_sd(xs: &[f64]) -> (f64, f64) {
        let n = xs.len() as f64;
        let m = xs.iter().sum::<f64>() / n;
        (m, (xs.iter().map(|x| (x - m).powi(2)).sum::<f64>() / (n - 1.0)).sqrt())
    }

    #[test]
    fn splitmix64_matches_the_reference_sequence() {
        // the first outputs for seed 0 of the reference C implementation (Vigna, splitmix64.c)
        let mut r = SplitMix64(0);
        assert_eq!(r.next_u64(), 0xE220_A839_7B1D_CDAF);
        assert_eq!(r.next_u64(), 0x6E78_9E6A_A1B9_65F4);
        assert_eq!(r.next_u64(), 0x06C4_5D18_8009_454F);
    }

    #[test]
    fn factors_have_mean_one_and_the_cv_asked_for() {
        const N: usize = 200_000;
        for cv in [0.05, 0.2, 0.5, 1.0] {
            let xs = factors(Noise { step_cv: cv, ..Noise::default() }, N);
            let (m, sd) = mean_sd(&xs);
            // the sample mean's standard error is cv/√N; 5 of them is a bound a correct generator
            // breaks once in ~3.5 million seeds
            let se = cv / (N as f64).sqrt();
            assert!((m - 1.0).abs() < 5.0 * se, "cv {cv}: mean {m}, se {se}");
            assert!(xs.iter().all(|x| *x > 0.0));
            // the sd's own relative error grows with the lognormal's tails: a loose bound
            assert!((sd / m - cv).abs() < 0.05 * cv, "cv {cv}: realised {}", sd / m);
            // ln(factor) is normal with σ² = ln(1 + cv²): its median is −σ²/2
            let s2 = (1.0 + cv * cv).ln();
            let mut logs: Vec<f64> = xs.iter().map(|x| x.ln()).collect();
            logs.sort_by(f64::total_cmp);
            assert!((logs[N / 2] + s2 / 2.0).abs() < 0.01 * s2.sqrt() + 1e-3, "cv {cv}");
        }
    }

    #[test]
    fn same_seed_same_sequence_other_seed_another() {
        let a = Noise { step_cv: 0.3, ..Noise::default() };
        assert_eq!(factors(a, 1000), factors(a, 1000));
        assert_ne!(factors(a, 1000), factors(Noise { seed: 7, ..a }, 1000));
        assert!(factors(Noise::default(), 100).iter().all(|x| *x == 1.0));
    }

    #[test]
    fn drift_grows_linearly_from_the_start() {
        let d = Noise::default().with_drift(6.0).unwrap();
        assert_eq!(d.drift_factor(0.0), 1.0);
        assert!((d.drift_factor(60.0) - 1.06).abs() < 1e-12);
        assert!((d.drift_factor(150.0) - 1.15).abs() < 1e-12);
        let mut g = StepNoise::new(d);
        assert!((g.step_factor(30.0) - 1.03).abs() < 1e-12, "no cv: drift only");
    }

    #[test]
    fn out_of_range_values_are_rejected() {
        let n = Noise::default();
        assert!(n.with_step_cv(-0.1).is_err());
        assert!(n.with_step_cv(f64::NAN).is_err());
        assert_eq!(n.with_step_cv(3.0).unwrap_err().to_string(), "must be a number from 0 to 2, got 3");
        assert!(n.with_drift(-1.0).is_err());
        assert!(n.with_drift(601.0).is_err());
        assert_eq!(n.with_step_cv(0.25).unwrap().step_cv, 0.25);
    }
}
