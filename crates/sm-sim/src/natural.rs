//! A profile's optional `[natural_output]` table: the length at which a request that does not set
//! `ignore_eos` stops on its own, drawn per request from a lognormal distribution (mean, coefficient
//! of variation, seed), so that a burst of identical prompts ends at different times as real
//! answers do. The length is a pure function of the seed and the request's id (the engine numbers
//! requests in arrival order): the trace's `completion_tokens` and `finish` carry the truth.

use toml::{Table, Value};

/// Largest accepted `cv`: beyond it the lengths are mostly a few huge outliers.
pub const MAX_CV: f64 = 3.0;
const KEYS: &[&str] = &["mean", "cv", "seed"];

/// The distribution of natural output lengths.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct NaturalOutput {
    /// Mean length in tokens (> 0).
    pub mean: f64,
    /// Coefficient of variation (standard deviation ÷ mean), 0 to [`MAX_CV`]; 0 makes every
    /// request stop at `mean` (rounded).
    pub cv: f64,
    pub seed: u64,
}

impl NaturalOutput {
    /// The natural length of request `id`, at least 1 token: `mean · exp(σZ − σ²/2)` with
    /// σ² = ln(1 + cv²) and Z a standard normal drawn from (seed, id).
    pub fn length(&self, id: u64) -> u64 {
        let sigma = (1.0 + self.cv * self.cv).ln().sqrt();
        let z = normal(self.seed, id);
        let x = self.mean * (sigma * z - sigma * sigma / 2.0).exp();
        (x.round() as u64).max(1)
    }

    /// Reads `[natural_output]`; an unknown key is an error (a misspelt key would silently change
    /// every length).
    pub(crate) fn from_table(t: &Table) -> Result<NaturalOutput, String> {
        if let Some(k) = t.keys().find(|k| !KEYS.contains(&k.as_str())) {
            return Err(format!("natural_output.{k}: unknown key (known: {})", KEYS.join(", ")));
        }
        let number = |key: &str| match t.get(key) {
            Some(Value::Integer(i)) => Ok(Some(*i as f64)),
            Some(Value::Float(f)) => Ok(Some(*f)),
            None => Ok(None),
            Some(v) => Err(format!("natural_output.{key}: expected a number, found {}", v.type_str())),
        };
        let mean = number("mean")?.ok_or("natural_output.mean: missing (the mean length in tokens, > 0)")?;
        if !(mean.is_finite() && mean >= 1.0) {
            return Err(format!("natural_output.mean: must be a number ≥ 1 (tokens), got {mean}"));
        }
        let cv = number("cv")?.unwrap_or(0.0);
        if !(cv.is_finite() && (0.0..=MAX_CV).contains(&cv)) {
            return Err(format!("natural_output.cv: must be a number from 0 to {MAX_CV}, got {cv}"));
        }
        let seed = match t.get("seed") {
            None => 0,
            Some(Value::Integer(i)) if *i >= 0 => *i as u64,
            Some(v) => return Err(format!("natural_output.seed: must be an integer ≥ 0, got {v:?}")),
        };
        Ok(NaturalOutput { mean, cv, seed })
    }
}

/// splitmix64's output function: a good 64-bit mix of one input.
pub(crate) fn mix(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// Uniform in [0, 1) from the top 53 bits.
pub(crate) fn unit(x: u64) -> f64 {
    (x >> 11) as f64 / (1u64 << 53) as f64
}

/// A standard normal for (seed, id), by Box–Muller from two independent uniforms.
fn normal(seed: u64, id: u64) -> f64 {
    let a = mix(seed ^ mix(id));
    let b = mix(a);
    // u1 in (0, 1]: ln(0) would be −∞
    let u1 = 1.0 - unit(a);
    let u2 = unit(b);
    (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn table(text: &str) -> Result<NaturalOutput, String> {
        NaturalOutput::from_table(&toml::from_str(text).unwrap())
    }

    #[test]
    fn lengths_have_the_mean_and_spread_asked_for_and_repeat_per_request() {
        let d = NaturalOutput { mean: 200.0, cv: 0.5, seed: 7 };
        let xs: Vec<f64> = (0..20_000).map(|i| d.length(i) as f64).collect();
        let mean = xs.iter().sum::<f64>() / xs.len() as f64;
        let sd = (xs.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / xs.len() as f64).sqrt();
        assert!((mean - 200.0).abs() < 4.0, "mean {mean}");
        assert!((sd / mean - 0.5).abs() < 0.03, "cv {}", sd / mean);
        assert_eq!(d.length(42), d.length(42), "deterministic per request");
        let other = NaturalOutput { seed: 8, ..d };
        assert!((0..50).any(|i| other.length(i) != d.length(i)), "another seed, other lengths");
        assert!((0..1000).all(|i| NaturalOutput { mean: 1.0, cv: 3.0, seed: 1 }.length(i) >= 1));
        assert!((0..100).all(|i| NaturalOutput { mean: 64.0, cv: 0.0, seed: 1 }.length(i) == 64));
    }

    #[test]
    fn the_table_is_checked() {
        assert_eq!(table("mean = 100\ncv = 0.25\nseed = 3").unwrap(), NaturalOutput { mean: 100.0, cv: 0.25, seed: 3 });
        assert_eq!(table("mean = 100").unwrap(), NaturalOutput { mean: 100.0, cv: 0.0, seed: 0 });
        for (text, says) in [
            ("cv = 0.5", "natural_output.mean: missing"),
            ("mean = 0", "natural_output.mean"),
            ("mean = 10\ncv = 4", "natural_output.cv"),
            ("mean = 10\nseed = -1", "natural_output.seed"),
            ("mean = 10\nstdev = 1", "natural_output.stdev: unknown key"),
            ("mean = \"x\"", "expected a number"),
        ] {
            let e = table(text).unwrap_err();
            assert!(e.contains(says), "{text}: {e}");
        }
    }
}
