//! The due times of a level's requests (methodology §13.1): drawn up front from a seeded
//! generator, so that they depend only on the settings, never on how fast the server answers.

use sm_core::phases::rate::{Arrival, RequestRate};

/// The most requests one level may schedule: the schedule and every request's log are held in memory.
pub const MAX_LEVEL_REQUESTS: u64 = 100_000;

/// How many requests a level sends.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum LevelSize {
    /// `--requests N`.
    Requests(u64),
    /// Every due time inside `[0, window)`, seconds.
    Window(f64),
}

/// SplitMix64 (Steele, Lea, Flood 2014): tiny, fast and good enough to draw gaps; written here so
/// the schedule is the same on every platform and version, whatever a crate's RNG does.
#[derive(Debug, Clone)]
pub struct SplitMix64(u64);

impl SplitMix64 {
    pub fn new(seed: u64) -> Self {
        SplitMix64(seed)
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in (0, 1]: never 0, so `ln` is finite.
    pub fn unit(&mut self) -> f64 {
        ((self.next_u64() >> 11) + 1) as f64 / (1u64 << 53) as f64
    }

    /// Standard normal (Box–Muller; one of the pair is dropped for simplicity).
    fn normal(&mut self) -> f64 {
        let (u, v) = (self.unit(), self.unit());
        (-2.0 * u.ln()).sqrt() * (std::f64::consts::TAU * v).cos()
    }

    /// Gamma(shape, 1) by Marsaglia–Tsang; shape < 1 through Gamma(shape + 1) · U^(1/shape).
    fn gamma(&mut self, shape: f64) -> f64 {
        if shape < 1.0 {
            return self.gamma(shape + 1.0) * self.unit().powf(1.0 / shape);
        }
        let d = shape - 1.0 / 3.0;
        let c = 1.0 / (9.0 * d).sqrt();
        loop {
            let x = self.normal();
            let v = (1.0 + c * x).powi(3);
            if v <= 0.0 {
                continue;
            }
            let u = self.unit();
            if u.ln() < 0.5 * x * x + d - d * v + d * v.ln() {
                return d * v;
            }
        }
    }

    /// One gap of mean `1/rate` seconds.
    fn gap(&mut self, rate: f64, arrival: Arrival) -> f64 {
        match arrival {
            Arrival::Constant => 1.0 / rate,
            Arrival::Poisson => -self.unit().ln() / rate,
            Arrival::Gamma { cv } => {
                let shape = 1.0 / (cv * cv);
                self.gamma(shape) / (shape * rate)
            }
        }
    }
}

/// The seed of one level's generator: the run's seed mixed with the level's context and rate, so
/// that levels differ from each other and a resumed run draws the same schedule again.
pub fn level_seed(seed: u64, context: u64, rate: RequestRate) -> u64 {
    let rate_bits = rate.per_second().map_or(u64::MAX, f64::to_bits);
    let mut g = SplitMix64::new(seed ^ context.rotate_left(32) ^ rate_bits.rotate_left(17));
    g.next_u64()
}

/// The due times, seconds after the level's start, ascending. The first request is due at 0; each
/// next one a drawn gap later. `inf` makes every request due at 0 (it needs a count: a window of
/// `inf` is refused by the flags).
pub fn schedule(rate: RequestRate, arrival: Arrival, seed: u64, size: LevelSize) -> Vec<f64> {
    let mut g = SplitMix64::new(seed);
    let Some(per_s) = rate.per_second() else {
        let n = match size {
            LevelSize::Requests(n) => n,
            LevelSize::Window(_) => 0,
        };
        return vec![0.0; n.min(MAX_LEVEL_REQUESTS) as usize];
    };
    let mut due = Vec::new();
    let mut t = 0.0;
    loop {
        let more = match size {
            LevelSize::Requests(n) => (due.len() as u64) < n,
            LevelSize::Window(w) => t < w,
        };
        if !more || due.len() as u64 >= MAX_LEVEL_REQUESTS {
            return due;
        }
        due.push(t);
        t = match arrival {
            // i/rate, not a running sum: 10 gaps of 0.1 s must not end before 1 s
            Arrival::Constant => due.len() as f64 / per_s,
            _ => t + g.gap(per_s, arrival),
        };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mean_cv(gaps: &[f64]) -> (f64, f64) {
        let n = gaps.len() as f64;
        let mean = gaps.iter().sum::<f64>() / n;
        let var = gaps.iter().map(|g| (g - mean).powi(2)).sum::<f64>() / (n - 1.0);
        (mean, var.sqrt() / mean)
    }

    fn gaps(due: &[f64]) -> Vec<f64> {
        due.windows(2).map(|w| w[1] - w[0]).collect()
    }

    #[test]
    fn splitmix_matches_the_reference_sequence() {
        // the first outputs of SplitMix64 seeded with 1234567 (the published reference values)
        let mut g = SplitMix64::new(1_234_567);
        assert_eq!(g.next_u64(), 6_457_827_717_110_365_317);
        assert_eq!(g.next_u64(), 3_203_168_211_198_807_973);
    }

    #[test]
    fn the_same_seed_gives_the_same_schedule_and_another_seed_another() {
        let a = schedule(RequestRate::PerSecond(8.0), Arrival::Poisson, 7, LevelSize::Requests(50));
        assert_eq!(a, schedule(RequestRate::PerSecond(8.0), Arrival::Poisson, 7, LevelSize::Requests(50)));
        assert_ne!(a, schedule(RequestRate::PerSecond(8.0), Arrival::Poisson, 8, LevelSize::Requests(50)));
        assert_ne!(level_seed(1, 1024, RequestRate::PerSecond(2.0)), level_seed(1, 1024, RequestRate::PerSecond(4.0)));
        assert_ne!(level_seed(1, 1024, RequestRate::Inf), level_seed(1, 2048, RequestRate::Inf));
    }

    #[test]
    fn gaps_have_the_mean_and_spread_of_their_process() {
        let n = LevelSize::Requests(20_001);
        let rate = RequestRate::PerSecond(4.0);
        let (mean, cv) = mean_cv(&gaps(&schedule(rate, Arrival::Poisson, 1, n)));
        assert!((mean - 0.25).abs() < 0.01 && (cv - 1.0).abs() < 0.03, "poisson: mean {mean}, cv {cv}");
        let (mean, cv) = mean_cv(&gaps(&schedule(rate, Arrival::Constant, 1, n)));
        assert!((mean - 0.25).abs() < 1e-9 && cv < 1e-9, "constant: mean {mean}, cv {cv}");
        for want in [0.5, 2.0] {
            let (mean, cv) = mean_cv(&gaps(&schedule(rate, Arrival::Gamma { cv: want }, 3, n)));
            assert!((mean - 0.25).abs() < 0.015 && (cv - want).abs() < want * 0.06, "gamma:{want}: {mean} {cv}");
        }
    }

    #[test]
    fn a_window_holds_the_due_times_before_its_end_and_inf_is_all_at_once() {
        let due = schedule(RequestRate::PerSecond(10.0), Arrival::Constant, 0, LevelSize::Window(1.0));
        assert_eq!(due.len(), 10);
        assert_eq!(due[0], 0.0);
        assert!(due.iter().all(|&t| t < 1.0));
        assert_eq!(schedule(RequestRate::Inf, Arrival::Poisson, 0, LevelSize::Requests(5)), vec![0.0; 5]);
        assert!(schedule(RequestRate::Inf, Arrival::Poisson, 0, LevelSize::Window(5.0)).is_empty());
        let huge = schedule(RequestRate::PerSecond(1e5), Arrival::Constant, 0, LevelSize::Window(10.0));
        assert_eq!(huge.len() as u64, MAX_LEVEL_REQUESTS);
    }
}
