//! GPU telemetry from a DCGM exporter (`--gpu-metrics URL`): its Prometheus text, one series per
//! GPU by the `gpu` label (else `UUID`), names as in NVIDIA's dcgm-exporter `default-counters.csv`.
//! The same URL may be AMD's Device Metrics Exporter ([`crate::amd_gpu`]): the text says which.

use std::time::Duration;

use std::sync::OnceLock;

use sm_core::gpu_telemetry::{GpuSample, GpuSource};

use crate::metrics::{Labels, Metrics};

pub const POWER: &str = "DCGM_FI_DEV_POWER_USAGE";
/// Millijoules since the driver loaded.
pub const ENERGY_MJ: &str = "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION";
pub const SM_CLOCK: &str = "DCGM_FI_DEV_SM_CLOCK";
pub const MEM_CLOCK: &str = "DCGM_FI_DEV_MEM_CLOCK";
pub const GPU_TEMP: &str = "DCGM_FI_DEV_GPU_TEMP";
pub const GPU_UTIL: &str = "DCGM_FI_DEV_GPU_UTIL";
/// MiB.
pub const FB_USED: &str = "DCGM_FI_DEV_FB_USED";
/// The throttle reasons bitmask, by its newer name and its older one.
pub const THROTTLE: [&str; 2] = ["DCGM_FI_DEV_CLOCKS_EVENT_REASONS", "DCGM_FI_DEV_CLOCK_THROTTLE_REASONS"];
pub const XID: &str = "DCGM_FI_DEV_XID_ERRORS";
pub const ECC: [&str; 2] = ["DCGM_FI_DEV_ECC_SBE_VOL_TOTAL", "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL"];

/// Every GPU of one scrape, in the order the exporter first names them.
pub fn samples(m: &Metrics) -> Vec<GpuSample> {
    let mut names = vec![POWER, ENERGY_MJ, SM_CLOCK, MEM_CLOCK, GPU_TEMP, GPU_UTIL, FB_USED, XID];
    names.extend(THROTTLE);
    names.extend(ECC);
    let add = |g: &mut GpuSample, name: &str, labels: &Labels, value: f64| {
        if g.name.is_none() {
            g.name = labels.get("modelName").map(str::to_string);
        }
        set(g, name, value);
    };
    m.grouped(&names, gpu_id, add).into_iter().map(|(gpu, g)| GpuSample { gpu, ..g }).collect()
}

/// The GPUs of a DCGM exporter's text, else of an AMD exporter's, and which it was.
pub fn any_samples(m: &Metrics) -> (GpuSource, Vec<GpuSample>) {
    let dcgm = samples(m);
    if !dcgm.is_empty() {
        return (GpuSource::Dcgm, dcgm);
    }
    (GpuSource::Amd, crate::amd_gpu::samples(m))
}

fn gpu_id(labels: &Labels) -> Option<&str> {
    labels.get("gpu").or_else(|| labels.get("UUID")).filter(|s| !s.is_empty())
}

fn set(g: &mut GpuSample, name: &str, v: f64) {
    match name {
        POWER => g.power_w = Some(v),
        ENERGY_MJ => g.energy_j = Some(v / 1000.0),
        SM_CLOCK => g.sm_clock_mhz = Some(v),
        MEM_CLOCK => g.mem_clock_mhz = Some(v),
        GPU_TEMP => g.temp_c = Some(v),
        GPU_UTIL => g.util_pct = Some(v),
        FB_USED => g.mem_used_mib = Some(v),
        XID => g.xid = Some(v.max(0.0) as u64),
        n if THROTTLE.contains(&n) => g.throttle_reasons = Some(g.throttle_reasons.unwrap_or(0) | v.max(0.0) as u64),
        n if ECC.contains(&n) => g.ecc_errors = Some(g.ecc_errors.unwrap_or(0.0) + v.max(0.0)),
        _ => {}
    }
}

#[derive(Debug, thiserror::Error)]
pub enum DcgmError {
    #[error("--gpu-metrics: `{url}` is not a usable URL: {reason}")]
    BadUrl { url: String, reason: String },
    #[error("GPU metrics: {0}")]
    Read(String),
    #[error("GPU metrics: HTTP {0}")]
    Status(u16),
    #[error(
        "GPU metrics: the answer has no DCGM_FI_DEV_* or AMD gpu_* series of any GPU (is this a DCGM or AMD Device Metrics exporter's /metrics?)"
    )]
    NoGpu,
}

/// Reads one DCGM exporter.
#[derive(Debug, Clone)]
pub struct DcgmClient {
    http: reqwest::Client,
    url: reqwest::Url,
    /// The exporter's kind, as its first answer with GPUs showed.
    format: OnceLock<GpuSource>,
}

impl DcgmClient {
    /// Checks the URL: http(s), a host, and no credentials in it (they would end up in results).
    pub fn new(url: &str) -> Result<DcgmClient, DcgmError> {
        let bad = |reason: &str| DcgmError::BadUrl { url: url.to_string(), reason: reason.to_string() };
        let parsed =
            reqwest::Url::parse(url).map_err(|e| bad(&format!("{e} (expected e.g. http://gpu-host:9400/metrics)")))?;
        if !matches!(parsed.scheme(), "http" | "https") {
            return Err(bad("only http:// and https:// are supported"));
        }
        if parsed.host_str().is_none() {
            return Err(bad("it has no host"));
        }
        if !parsed.username().is_empty() || parsed.password().is_some() {
            return Err(bad("credentials in the URL are not allowed: they would be written to the results"));
        }
        let http = reqwest::Client::builder()
            .timeout(Duration::from_secs(5))
            .build()
            .map_err(|e| DcgmError::Read(e.to_string()))?;
        Ok(DcgmClient { http, url: parsed, format: OnceLock::new() })
    }

    /// Which exporter answered: DCGM until an answer said otherwise.
    pub fn source(&self) -> GpuSource {
        self.format.get().copied().unwrap_or(GpuSource::Dcgm)
    }

    /// One scrape, every GPU in it.
    pub async fn read(&self) -> Result<Vec<GpuSample>, DcgmError> {
        let resp =
            self.http.get(self.url.clone()).send().await.map_err(|e| DcgmError::Read(e.without_url().to_string()))?;
        let status = resp.status().as_u16();
        if !(200..300).contains(&status) {
            return Err(DcgmError::Status(status));
        }
        let text = resp.text().await.map_err(|e| DcgmError::Read(e.without_url().to_string()))?;
        let (source, gpus) = any_samples(&Metrics::parse(&text));
        if gpus.is_empty() {
            return Err(DcgmError::NoGpu);
        }
        let _ = self.format.set(source);
        Ok(gpus)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Shaped like dcgm-exporter 3.x with its default counters, two GPUs.
    const DCGM: &str = r#"# HELP DCGM_FI_DEV_SM_CLOCK SM clock frequency (in MHz).
# TYPE DCGM_FI_DEV_SM_CLOCK gauge
DCGM_FI_DEV_SM_CLOCK{gpu="0",UUID="GPU-aaaa",device="nvidia0",modelName="NVIDIA H200",Hostname="h1"} 1980
DCGM_FI_DEV_SM_CLOCK{gpu="1",UUID="GPU-bbbb",device="nvidia1",modelName="NVIDIA H200",Hostname="h1"} 1755
# TYPE DCGM_FI_DEV_MEM_CLOCK gauge
DCGM_FI_DEV_MEM_CLOCK{gpu="0",UUID="GPU-aaaa",modelName="NVIDIA H200"} 3201
# TYPE DCGM_FI_DEV_GPU_TEMP gauge
DCGM_FI_DEV_GPU_TEMP{gpu="0",UUID="GPU-aaaa",modelName="NVIDIA H200"} 64
DCGM_FI_DEV_GPU_TEMP{gpu="1",UUID="GPU-bbbb",modelName="NVIDIA H200"} 81
# TYPE DCGM_FI_DEV_POWER_USAGE gauge
DCGM_FI_DEV_POWER_USAGE{gpu="0",UUID="GPU-aaaa",modelName="NVIDIA H200"} 412.25
DCGM_FI_DEV_POWER_USAGE{gpu="1",UUID="GPU-bbbb",modelName="NVIDIA H200"} 699.9
# TYPE DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION counter
DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION{gpu="0",UUID="GPU-aaaa",modelName="NVIDIA H200"} 123456789
# TYPE DCGM_FI_DEV_GPU_UTIL gauge
DCGM_FI_DEV_GPU_UTIL{gpu="0",UUID="GPU-aaaa",modelName="NVIDIA H200"} 97
# TYPE DCGM_FI_DEV_FB_USED gauge
DCGM_FI_DEV_FB_USED{gpu="0",UUID="GPU-aaaa",modelName="NVIDIA H200"} 130000
# TYPE DCGM_FI_DEV_XID_ERRORS gauge
DCGM_FI_DEV_XID_ERRORS{gpu="1",UUID="GPU-bbbb",modelName="NVIDIA H200",err_code="0",err_msg="No Error"} 0
# TYPE DCGM_FI_DEV_CLOCK_THROTTLE_REASONS gauge
DCGM_FI_DEV_CLOCK_THROTTLE_REASONS{gpu="1",UUID="GPU-bbbb",modelName="NVIDIA H200"} 68
DCGM_FI_DEV_ECC_DBE_VOL_TOTAL{gpu="0",UUID="GPU-aaaa"} 1
DCGM_FI_DEV_ECC_SBE_VOL_TOTAL{gpu="0",UUID="GPU-aaaa"} 2
DCGM_FI_DEV_POWER_USAGE{UUID="GPU-cccc"} 90
DCGM_FI_DEV_POWER_USAGE 5
"#;

    #[test]
    fn one_sample_per_gpu_in_record_units() {
        let g = samples(&Metrics::parse(DCGM));
        assert_eq!(
            g.iter().map(|g| g.gpu.as_str()).collect::<Vec<_>>(),
            ["0", "1", "GPU-cccc"],
            "unlabelled series skipped"
        );
        assert_eq!(g[0].name.as_deref(), Some("NVIDIA H200"));
        assert_eq!((g[0].power_w, g[0].energy_j), (Some(412.25), Some(123456.789)));
        assert_eq!((g[0].sm_clock_mhz, g[0].mem_clock_mhz, g[0].temp_c), (Some(1980.0), Some(3201.0), Some(64.0)));
        assert_eq!((g[0].util_pct, g[0].mem_used_mib, g[0].ecc_errors), (Some(97.0), Some(130000.0), Some(3.0)));
        assert_eq!((g[0].throttle_reasons, g[0].xid), (None, None), "absent, not zero");
        assert_eq!((g[1].power_w, g[1].energy_j, g[1].temp_c), (Some(699.9), None, Some(81.0)));
        assert_eq!((g[1].throttle_reasons, g[1].xid), (Some(68), Some(0)));
        assert_eq!(g[2].power_w, Some(90.0));
    }

    #[test]
    fn urls_are_checked() {
        assert!(DcgmClient::new("http://gpu-host:9400/metrics").is_ok());
        for bad in ["gpu-host:9400", "ftp://h/metrics", "http://u:pw@h:9400/metrics"] {
            let e = DcgmClient::new(bad).unwrap_err().to_string();
            assert!(e.starts_with("--gpu-metrics:") && e.contains("is not a usable URL"), "{e}");
        }
        let e = DcgmClient::new("http://u:pw@h:9400/metrics").unwrap_err().to_string();
        assert!(e.contains("credentials"), "{e}");
    }
}
