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
            "auto" => Ok(GpuMetrics::Auto),
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

/// What stands in run.json for a URL's credentials, which are never written.
const HIDDEN: &str = "?…";

impl GpuMetrics {
    /// What run.json records (`settings.gpu_metrics`), so that `--resume` reads the same source:
    /// `auto`, `off`, `nvml` or the URL — without its user info or query string, which may hold a
    /// token, marked [`HIDDEN`] where one was dropped.
    pub fn recorded(&self) -> String {
        match self {
            GpuMetrics::Auto => "auto".into(),
            GpuMetrics::Off => "off".into(),
            GpuMetrics::Nvml => "nvml".into(),
            GpuMetrics::Dcgm(url) => {
                let (scheme, rest) = url.split_once("://").unwrap_or(("", url));
                let (path, query) = rest.split_once('?').map_or((rest, false), |(p, _)| (p, true));
                let (host, tail) = path.split_once('/').map_or((path, ""), |(h, t)| (h, t));
                let (host, user) = host.rsplit_once('@').map_or((host, false), |(_, h)| (h, true));
                let slash = if path.contains('/') { "/" } else { "" };
                let hidden = if query || user { HIDDEN } else { "" };
                format!("{scheme}://{host}{slash}{tail}{hidden}")
            }
        }
    }

    /// The source a resumed run recorded; an error says to pass the flag where its URL's
    /// credentials were not recorded.
    pub fn from_recorded(text: &str) -> Result<GpuMetrics, String> {
        if let Some(url) = text.strip_suffix(HIDDEN) {
            return Err(format!(
                "cannot resume: the run read its GPU metrics from {url} with credentials that run.json does not keep; pass --gpu-metrics URL again (or --gpu-metrics off)"
            ));
        }
        text.parse()
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

    #[test]
    fn the_recorded_source_keeps_no_credentials_and_reads_back() {
        for text in ["auto", "off", "nvml", "http://h:9400/metrics"] {
            let g: GpuMetrics = text.parse().unwrap();
            assert_eq!(g.recorded(), text);
            assert_eq!(GpuMetrics::from_recorded(&g.recorded()), Ok(g));
        }
        for url in ["http://h:9400/metrics?token=abcdefgh12", "https://user:pw@h/metrics"] {
            let recorded = GpuMetrics::Dcgm(url.into()).recorded();
            assert!(!recorded.contains("abcdefgh12") && !recorded.contains("pw"), "{recorded}");
            assert!(recorded.ends_with("/metrics?…"), "{recorded}");
            let e = GpuMetrics::from_recorded(&recorded).unwrap_err();
            assert!(e.contains("pass --gpu-metrics URL again"), "{e}");
        }
    }
}
