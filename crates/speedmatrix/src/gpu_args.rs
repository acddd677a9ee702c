//! `--gpu-metrics URL|nvml|off`: where each decode cell's GPU power and energy come from
//! (methodology §14.3). Without the flag, NVML is used where it loads and the server runs on this
//! machine (a loopback URL); a remote server's GPUs are not this machine's.

use std::sync::Arc;

use sm_bench::{GpuReader, LocalGpus};
use sm_client::dcgm::DcgmClient;

/// What `--gpu-metrics` asked for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GpuMetrics {
    /// No flag: NVML for a server on this machine, silently nothing otherwise.
    Auto,
    Off,
    Nvml,
    Dcgm(String),
}

impl std::str::FromStr for GpuMetrics {
    type Err = String;

    fn from_str(s: &str) -> Result<GpuMetrics, String> {
        match s.trim() {
            "off" => Ok(GpuMetrics::Off),
            "nvml" => Ok(GpuMetrics::Nvml),
            url => {
                // checked here, so that a bad URL exits before anything is measured
                DcgmClient::new(url).map_err(|e| e.to_string())?;
                Ok(GpuMetrics::Dcgm(url.to_string()))
            }
        }
    }
}

/// The reader for the run, and a warning to say once where an asked-for source is missing.
pub fn reader(asked: &GpuMetrics, server_url: &str, demo: bool) -> (Option<Arc<GpuReader>>, Option<String>) {
    match asked {
        GpuMetrics::Off => (None, None),
        GpuMetrics::Dcgm(url) => {
            // a token in the query string is a secret: scrubbed from every output from now on
            for v in query_values(url) {
                sm_core::secrets::register(&v);
            }
            match DcgmClient::new(url) {
                Ok(c) => (Some(Arc::new(GpuReader::Dcgm(c))), None),
                Err(e) => (None, Some(e.to_string())),
            }
        }
        GpuMetrics::Nvml => match LocalGpus::open() {
            Ok(g) => (Some(Arc::new(GpuReader::Nvml(g))), None),
            Err(e) => (None, Some(e)),
        },
        GpuMetrics::Auto if !demo && is_loopback(server_url) => {
            (LocalGpus::open().ok().map(|g| Arc::new(GpuReader::Nvml(g))), None)
        }
        GpuMetrics::Auto => (None, None),
    }
}

/// The values of a URL's query string (`?token=…`).
/// Values shorter than 8 characters (`?format=text`) are not secrets worth the name.
fn query_values(url: &str) -> Vec<String> {
    let query = url.split_once('?').map_or("", |(_, q)| q.split('#').next().unwrap_or(""));
    query.split('&').filter_map(|kv| kv.split_once('=').map(|(_, v)| v.to_string())).filter(|v| v.len() >= 8).collect()
}

fn is_loopback(url: &str) -> bool {
    let host = url.split("://").nth(1).unwrap_or(url).split(['/', '?']).next().unwrap_or("");
    let host = host.rsplit_once('@').map_or(host, |(_, h)| h);
    let host = if host.starts_with('[') {
        host.split(']').next().unwrap_or("").trim_start_matches('[')
    } else {
        host.split(':').next().unwrap_or("")
    };
    host == "localhost" || host.parse::<std::net::IpAddr>().is_ok_and(|ip| ip.is_loopback())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_and_hosts() {
        assert_eq!("off".parse::<GpuMetrics>(), Ok(GpuMetrics::Off));
        assert_eq!("nvml".parse::<GpuMetrics>(), Ok(GpuMetrics::Nvml));
        assert!(matches!("http://h:9400/metrics".parse::<GpuMetrics>(), Ok(GpuMetrics::Dcgm(_))));
        let e = "h:9400".parse::<GpuMetrics>().unwrap_err();
        assert!(e.starts_with("--gpu-metrics:"), "{e}");
        assert!(
            is_loopback("http://127.0.0.1:8000")
                && is_loopback("http://localhost:1/v1")
                && is_loopback("http://[::1]:80")
        );
        assert!(!is_loopback("http://10.0.0.2:8000") && !is_loopback("https://api.example.com"));
        assert_eq!(query_values("http://h/m?token=abcdefgh12&x=1"), ["abcdefgh12"]);
    }
}
