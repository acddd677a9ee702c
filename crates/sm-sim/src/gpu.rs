//! A profile's optional `[gpu]` table: a simulated GPU whose power is a function of the running
//! batch, `idle_w + per_sequence_w × running`, held at `tdp_w` (the power cap, where the GPU
//! reports power throttling). Its energy counter is that power integrated over the engine's clock
//! each time the batch changes, so a scrape's counter is exact for the batches the engine ran.
//! Served at `/dcgm/metrics` in a DCGM exporter's format (see docs/sim.md).

use toml::{Table, Value};

const KEYS: &[&str] = &["name", "idle_w", "per_sequence_w", "tdp_w"];
/// NVML's `SwPowerCap` clocks-event reason: what a GPU at its power limit reports.
pub const SW_POWER_CAP: u64 = 0x4;

#[derive(Debug, Clone, PartialEq)]
pub struct SimGpu {
    pub name: String,
    pub idle_w: f64,
    pub per_sequence_w: f64,
    pub tdp_w: f64,
}

impl SimGpu {
    pub fn new(name: String, idle_w: f64, per_sequence_w: f64, tdp_w: f64) -> Result<SimGpu, String> {
        for (key, v) in [("idle_w", idle_w), ("per_sequence_w", per_sequence_w), ("tdp_w", tdp_w)] {
            if !(v.is_finite() && (0.0..=10_000.0).contains(&v)) {
                return Err(format!("{key} must be a power from 0 to 10000 W, got {v}"));
            }
        }
        if tdp_w < idle_w {
            return Err(format!("tdp_w {tdp_w} is below idle_w {idle_w}: the cap must allow the idle power"));
        }
        Ok(SimGpu { name, idle_w, per_sequence_w, tdp_w })
    }

    /// Power at a running batch, and whether the cap holds it down.
    pub fn power(&self, running: u64) -> (f64, bool) {
        let want = self.idle_w + self.per_sequence_w * running as f64;
        if want > self.tdp_w { (self.tdp_w, true) } else { (want, false) }
    }

    pub(crate) fn from_table(t: &Table) -> Result<SimGpu, String> {
        if let Some(k) = t.keys().find(|k| !KEYS.contains(&k.as_str())) {
            return Err(format!("gpu.{k}: unknown key (known: {})", KEYS.join(", ")));
        }
        let watts = |key: &str| match t.get(key) {
            Some(Value::Float(f)) => Ok(*f),
            Some(Value::Integer(i)) => Ok(*i as f64),
            None => Err(format!("gpu.{key}: missing (watts)")),
            Some(v) => Err(format!("gpu.{key}: expected a number of watts, got {v:?}")),
        };
        let name = match t.get("name") {
            None => "Simulated GPU".to_string(),
            Some(Value::String(s)) => s.clone(),
            Some(v) => return Err(format!("gpu.name: expected a string, got {v:?}")),
        };
        SimGpu::new(name, watts("idle_w")?, watts("per_sequence_w")?, watts("tdp_w")?).map_err(|e| format!("gpu.{e}"))
    }
}

/// The energy counter: joules integrated up to `at` (engine clock, s) at the batch then running.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub(crate) struct Energy {
    pub joules: f64,
    pub at: f64,
}

impl Energy {
    /// The counter at `now`, the batch `running` having run since `self.at`.
    pub(crate) fn at(self, gpu: &SimGpu, running: u64, now: f64) -> Energy {
        let dt = (now - self.at).max(0.0);
        Energy { joules: self.joules + gpu.power(running).0 * dt, at: self.at.max(now) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn power_grows_with_the_batch_up_to_the_cap() {
        let g = SimGpu::new("G".into(), 100.0, 50.0, 300.0).unwrap();
        assert_eq!(g.power(0), (100.0, false));
        assert_eq!(g.power(4), (300.0, false));
        assert_eq!(g.power(5), (300.0, true));
        let e = Energy::default().at(&g, 2, 1.5).at(&g, 0, 2.5);
        assert_eq!(e, Energy { joules: 200.0 * 1.5 + 100.0, at: 2.5 });
        assert!(SimGpu::new("G".into(), 300.0, 1.0, 200.0).unwrap_err().contains("below idle_w"));
        let t: Table = toml::from_str("idle_w = 1\nper_sequence_w = 2\ntdp_w = 3\nwatts = 4").unwrap();
        assert!(SimGpu::from_table(&t).unwrap_err().contains("gpu.watts: unknown key"));
    }
}
