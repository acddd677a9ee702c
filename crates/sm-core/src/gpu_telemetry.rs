//! GPU telemetry over a cell's window (methodology §14.3): typed per-GPU samples from NVML or a
//! DCGM exporter, and the cell's figures they give — mean power, energy and joules per output
//! token, clocks, temperature and a throttle verdict. A figure whose source is missing is absent,
//! never zero.

use serde::{Deserialize, Serialize};

/// Where the samples came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum GpuSource {
    /// The local driver's NVML (`libnvidia-ml`), read by this process.
    Nvml,
    /// A DCGM exporter's Prometheus text (`--gpu-metrics URL`).
    Dcgm,
    /// AMD's Device Metrics Exporter's Prometheus text (`--gpu-metrics URL`).
    Amd,
}

impl GpuSource {
    pub fn name(self) -> &'static str {
        match self {
            GpuSource::Nvml => "nvml",
            GpuSource::Dcgm => "dcgm",
            GpuSource::Amd => "amd",
        }
    }
}

/// How the cell's energy was found.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum EnergyFrom {
    /// The GPUs' cumulative energy counters, their difference over the sampled span.
    Counter,
    /// Power samples integrated over time (trapezoids), where a GPU has no energy counter.
    PowerIntegral,
}

/// One GPU at one read. Units are the record's: W, J, MHz, °C, %, MiB.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct GpuSample {
    /// The GPU's index as its source names it (`gpu` label, NVML index), else its UUID.
    pub gpu: String,
    pub name: Option<String>,
    pub power_w: Option<f64>,
    /// The cumulative energy counter, joules (DCGM exports mJ, NVML reports mJ).
    pub energy_j: Option<f64>,
    pub sm_clock_mhz: Option<f64>,
    pub mem_clock_mhz: Option<f64>,
    pub temp_c: Option<f64>,
    pub util_pct: Option<f64>,
    pub mem_used_mib: Option<f64>,
    /// NVML's clocks-event (throttle) reasons bitmask.
    pub throttle_reasons: Option<u64>,
    /// The last XID error the driver saw (0: none); DCGM exports it as a gauge.
    pub xid: Option<u64>,
    /// Cumulative volatile ECC errors, single plus double bit.
    pub ecc_errors: Option<f64>,
}

/// Every GPU at one read, `t` seconds after the window's start.
#[derive(Debug, Clone, PartialEq)]
pub struct GpuRead {
    pub t: f64,
    pub gpus: Vec<GpuSample>,
}

/// NVML's clocks-event reason bits (`nvmlClocksEventReason*`, formerly `ClocksThrottleReason*`).
pub mod reasons {
    /// The software power-capping algorithm holds clocks down.
    pub const SW_POWER_CAP: u64 = 0x4;
    /// Hardware slowdown: NVML names power draw, the power brake and temperature as its causes.
    pub const HW_SLOWDOWN: u64 = 0x8;
    pub const SW_THERMAL_SLOWDOWN: u64 = 0x20;
    pub const HW_THERMAL_SLOWDOWN: u64 = 0x40;
    pub const HW_POWER_BRAKE_SLOWDOWN: u64 = 0x80;
    /// Counted as power: software cap, hardware slowdown and power brake.
    pub const POWER: u64 = SW_POWER_CAP | HW_SLOWDOWN | HW_POWER_BRAKE_SLOWDOWN;
    pub const THERMAL: u64 = SW_THERMAL_SLOWDOWN | HW_THERMAL_SLOWDOWN;
}

/// Whether clocks were held down in the window, and by what.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Throttle {
    None,
    Power,
    Thermal,
    PowerAndThermal,
}

impl Throttle {
    /// The verdict of the bits seen in any sample of the window.
    pub fn of_bits(bits: u64) -> Throttle {
        match (bits & reasons::POWER != 0, bits & reasons::THERMAL != 0) {
            (false, false) => Throttle::None,
            (true, false) => Throttle::Power,
            (false, true) => Throttle::Thermal,
            (true, true) => Throttle::PowerAndThermal,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Throttle::None => "none",
            Throttle::Power => "power",
            Throttle::Thermal => "thermal",
            Throttle::PowerAndThermal => "power and thermal",
        }
    }
}

/// One GPU's figures over the window.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, schemars::JsonSchema)]
pub struct GpuFigures {
    /// The GPU's index as its source names it, else its UUID.
    pub gpu: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Time-weighted mean power (W).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0))]
    pub power_w: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0))]
    pub sm_clock_mhz: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0))]
    pub mem_clock_mhz: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub temp_c_max: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0, max = 100))]
    pub util_pct: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0))]
    pub mem_used_mib_max: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub throttle: Option<Throttle>,
    /// An XID error that appeared during the window (the last one).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub xid: Option<u64>,
    /// Volatile ECC errors counted during the window.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ecc_errors: Option<u64>,
}

/// A cell's GPU telemetry (`decode[].gpu` in run.json).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct GpuCell {
    pub source: GpuSource,
    /// Reads inside the window.
    #[schemars(range(min = 1))]
    pub samples: u32,
    /// Mean power of all GPUs together (W).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0))]
    pub power_w: Option<f64>,
    /// Energy of all GPUs over the window (J).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0))]
    pub energy_j: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub energy_from: Option<EnergyFrom>,
    /// `energy_j ÷ output_tokens`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0))]
    pub joules_per_token: Option<f64>,
    /// `joules_per_token × 10⁶ ÷ 3600`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0))]
    pub wh_per_million_tokens: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub throttle: Option<Throttle>,
    #[schemars(length(min = 1))]
    pub gpus: Vec<GpuFigures>,
}

impl GpuCell {
    /// The window's figures from its reads; `None` without any GPU in them. `window_s` is the
    /// window's length and `output_tokens` the tokens counted in it.
    pub fn summarize(source: GpuSource, reads: &[GpuRead], window_s: f64, output_tokens: u64) -> Option<GpuCell> {
        let ids = gpu_ids(reads);
        if ids.is_empty() || !window_s.is_finite() || window_s <= 0.0 {
            return None;
        }
        let series: Vec<Series> = ids.iter().map(|id| Series::of(reads, id)).collect();
        let gpus: Vec<GpuFigures> = series.iter().map(Series::figures).collect();
        let power_w = sum_all(gpus.iter().map(|g| g.power_w));
        let (energy_j, energy_from) = energy(&series, window_s);
        let joules_per_token = energy_j.filter(|_| output_tokens > 0).map(|e| e / output_tokens as f64);
        let bits =
            series.iter().flat_map(|s| s.samples.iter().filter_map(|(_, g)| g.throttle_reasons)).reduce(|a, b| a | b);
        Some(GpuCell {
            source,
            samples: reads.len() as u32,
            power_w,
            energy_j,
            energy_from,
            joules_per_token,
            wh_per_million_tokens: joules_per_token.map(|j| j * 1e6 / 3600.0),
            throttle: bits.map(Throttle::of_bits),
            gpus,
        })
    }
}

impl std::fmt::Display for GpuCell {
    /// "312 W · 1.9 J/token", or what of it is known.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut parts = Vec::new();
        parts.extend(self.power_w.map(|w| format!("{w:.0} W")));
        parts.extend(self.joules_per_token.map(|j| format!("{} J/token", sig2(j))));
        if let Some(t) = self.throttle.filter(|t| *t != Throttle::None) {
            parts.push(format!("{} throttled", t.name()));
        }
        f.write_str(&parts.join(" · "))
    }
}

/// Two significant digits at least, one decimal at most above 10: 1.9, 0.042, 12.
fn sig2(x: f64) -> String {
    if x >= 10.0 {
        format!("{x:.0}")
    } else if x >= 1.0 {
        format!("{x:.1}")
    } else if x > 0.0 {
        let digits = (1 - x.log10().floor() as i32).max(1) as usize;
        format!("{x:.digits$}")
    } else {
        "0".into()
    }
}

fn gpu_ids(reads: &[GpuRead]) -> Vec<String> {
    let mut ids: Vec<String> = Vec::new();
    for g in reads.iter().flat_map(|r| &r.gpus) {
        if !ids.contains(&g.gpu) {
            ids.push(g.gpu.clone());
        }
    }
    ids
}

fn sum_all(values: impl Iterator<Item = Option<f64>>) -> Option<f64> {
    values.flatten().fold(None, |acc, v| Some(acc.unwrap_or(0.0) + v))
}

/// One GPU's samples in time order.
struct Series<'a> {
    samples: Vec<(f64, &'a GpuSample)>,
}

impl<'a> Series<'a> {
    fn of(reads: &'a [GpuRead], id: &str) -> Series<'a> {
        let samples = reads.iter().filter_map(|r| r.gpus.iter().find(|g| g.gpu == id).map(|g| (r.t, g))).collect();
        Series { samples }
    }

    fn values(&self, pick: impl Fn(&GpuSample) -> Option<f64>) -> Vec<(f64, f64)> {
        self.samples.iter().filter_map(|(t, g)| pick(g).filter(|v| v.is_finite()).map(|v| (*t, v))).collect()
    }

    fn figures(&self) -> GpuFigures {
        let first = self.samples.first().map(|(_, g)| *g);
        let last = self.samples.last().map(|(_, g)| *g);
        let bits = self.samples.iter().filter_map(|(_, g)| g.throttle_reasons).reduce(|a, b| a | b);
        let xid = first.zip(last).and_then(|(a, b)| b.xid.filter(|x| *x != 0 && b.xid != a.xid));
        let ecc = first.and_then(|a| a.ecc_errors).zip(last.and_then(|b| b.ecc_errors));
        GpuFigures {
            gpu: first.map(|g| g.gpu.clone()).unwrap_or_default(),
            name: self.samples.iter().find_map(|(_, g)| g.name.clone()),
            power_w: time_mean(&self.values(|g| g.power_w)),
            sm_clock_mhz: time_mean(&self.values(|g| g.sm_clock_mhz)),
            mem_clock_mhz: time_mean(&self.values(|g| g.mem_clock_mhz)),
            temp_c_max: self.values(|g| g.temp_c).into_iter().map(|(_, v)| v).reduce(f64::max),
            util_pct: time_mean(&self.values(|g| g.util_pct)),
            mem_used_mib_max: self.values(|g| g.mem_used_mib).into_iter().map(|(_, v)| v).reduce(f64::max),
            throttle: bits.map(Throttle::of_bits),
            xid,
            ecc_errors: ecc.map(|(a, b)| (b - a).max(0.0).round() as u64),
        }
    }

    /// Mean power over the sampled span from the energy counter: `None` without a counter at both
    /// ends, over no time, when it went backwards (a driver reload) or did not move (an exporter
    /// that collects less often than the window: no GPU draws 0 W).
    fn counter_power(&self) -> Option<f64> {
        let e = self.values(|g| g.energy_j);
        let ((t0, e0), (t1, e1)) = (*e.first()?, *e.last()?);
        (t1 > t0 && e1 > e0).then(|| (e1 - e0) / (t1 - t0))
    }

    /// Mean power over the sampled span, integrated from the power samples (two at least).
    fn integral_power(&self) -> Option<f64> {
        let p = self.values(|g| g.power_w);
        (p.len() >= 2).then(|| time_mean(&p)).flatten()
    }
}

/// The trapezoid mean of `(t, v)` points over their span; the single value for one point.
fn time_mean(points: &[(f64, f64)]) -> Option<f64> {
    match points {
        [] => None,
        [(_, v)] => Some(*v),
        _ => {
            let span = points[points.len() - 1].0 - points[0].0;
            if span <= 0.0 {
                return Some(points.iter().map(|(_, v)| v).sum::<f64>() / points.len() as f64);
            }
            let area: f64 = points.windows(2).map(|w| (w[1].0 - w[0].0) * (w[0].1 + w[1].1) / 2.0).sum();
            Some(area / span)
        }
    }
}

/// The window's energy: each GPU's mean power over the sampled span times the window's length,
/// from the counters where every GPU has one, else from every GPU's power samples.
fn energy(series: &[Series], window_s: f64) -> (Option<f64>, Option<EnergyFrom>) {
    let counters: Option<Vec<f64>> = series.iter().map(Series::counter_power).collect();
    if let Some(p) = counters {
        return (Some(p.iter().sum::<f64>() * window_s), Some(EnergyFrom::Counter));
    }
    let integrals: Option<Vec<f64>> = series.iter().map(Series::integral_power).collect();
    match integrals {
        Some(p) => (Some(p.iter().sum::<f64>() * window_s), Some(EnergyFrom::PowerIntegral)),
        None => (None, None),
    }
}

/// NVML's readings of one GPU, in NVML's own units, before they become a [`GpuSample`].
#[derive(Debug, Clone, PartialEq, Default)]
pub struct NvmlValues {
    pub index: u32,
    pub name: Option<String>,
    /// `nvmlDeviceGetPowerUsage`: milliwatts.
    pub power_mw: Option<u32>,
    /// `nvmlDeviceGetTotalEnergyConsumption`: millijoules since the driver loaded.
    pub energy_mj: Option<u64>,
    pub sm_clock_mhz: Option<u32>,
    pub mem_clock_mhz: Option<u32>,
    pub temp_c: Option<u32>,
    /// `nvmlDeviceGetUtilizationRates().gpu`: %.
    pub util_pct: Option<u32>,
    /// `nvmlDeviceGetMemoryInfo().used`: bytes.
    pub mem_used_bytes: Option<u64>,
    /// `nvmlDeviceGetCurrentClocksEventReasons`.
    pub throttle_reasons: Option<u64>,
    /// Volatile ECC errors, corrected plus uncorrected.
    pub ecc_errors: Option<u64>,
}

impl From<NvmlValues> for GpuSample {
    fn from(v: NvmlValues) -> GpuSample {
        GpuSample {
            gpu: v.index.to_string(),
            name: v.name,
            power_w: v.power_mw.map(|mw| f64::from(mw) / 1000.0),
            energy_j: v.energy_mj.map(|mj| mj as f64 / 1000.0),
            sm_clock_mhz: v.sm_clock_mhz.map(f64::from),
            mem_clock_mhz: v.mem_clock_mhz.map(f64::from),
            temp_c: v.temp_c.map(f64::from),
            util_pct: v.util_pct.map(f64::from),
            mem_used_mib: v.mem_used_bytes.map(|b| b as f64 / (1024.0 * 1024.0)),
            throttle_reasons: v.throttle_reasons,
            // NVML reports XIDs as events, not as a value to read: none here
            xid: None,
            ecc_errors: v.ecc_errors.map(|n| n as f64),
        }
    }
}

#[cfg(test)]
mod tests;
