//! `speedmatrix upload`: sends a run (or a reference-tool file) to a results
//! site, gzipped, retrying when the site answers 5xx or cannot be reached.

use std::io::{Read, Write};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::Args;

#[derive(Debug, Args)]
pub struct UploadArgs {
    /// A run directory, its run.json, or a reference-tool result file.
    run: PathBuf,
    /// The results site, e.g. http://127.0.0.1:8080.
    #[arg(long)]
    site: String,
    /// Upload token (from `speedmatrix serve token create`).
    #[arg(long, env = "SPEEDMATRIX_TOKEN", hide_env_values = true)]
    token: String,
    /// Attempts in all before giving up on 5xx answers or connection errors.
    #[arg(long, default_value_t = 5)]
    attempts: u32,
}

/// The file to send: the run directory's run.json, else the path itself.
fn file_of(path: &std::path::Path) -> PathBuf {
    if path.is_dir() { path.join("run.json") } else { path.to_path_buf() }
}

fn gzip(bytes: &[u8]) -> std::io::Result<Vec<u8>> {
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    gz.write_all(bytes)?;
    gz.finish()
}

/// The file's text, gunzipped first when it is gzip (`run.json.gz`); at most
/// the site's limit, so a gzip bomb is refused here as the site would refuse it.
fn text_of(bytes: &[u8]) -> Result<String, String> {
    let plain = if bytes.starts_with(&[0x1f, 0x8b]) {
        let mut out = Vec::new();
        flate2::read::GzDecoder::new(bytes)
            .take(sm_site::MAX_BODY as u64 + 1)
            .read_to_end(&mut out)
            .map_err(|e| format!("not valid gzip: {e}"))?;
        if out.len() > sm_site::MAX_BODY {
            return Err(format!("larger than {} MiB once decompressed", sm_site::MAX_BODY / (1024 * 1024)));
        }
        out
    } else {
        bytes.to_vec()
    };
    String::from_utf8(plain).map_err(|e| e.to_string())
}

/// `--site` as a message may show it: scheme, host and port only. A token may sit in the user
/// part, the path or the query of what the user typed, and is never printed.
fn shown_site(site: &str) -> String {
    match reqwest::Url::parse(site) {
        Ok(u) => match (u.host_str(), u.port_or_known_default()) {
            (Some(host), Some(port)) => format!("{}://{host}:{port}", u.scheme()),
            (Some(host), None) => format!("{}://{host}", u.scheme()),
            _ => "the --site address".to_string(),
        },
        Err(_) => "the --site address".to_string(),
    }
}

/// Why the upload reached no site, in words: which address did not answer and how. reqwest's own
/// text ("error sending request for url (…)") names neither the cause nor the fix, and quotes the
/// whole URL.
fn unreachable(site: &str, e: &reqwest::Error) -> String {
    let at = shown_site(site);
    let mut cause: &dyn std::error::Error = e;
    while let Some(next) = cause.source() {
        cause = next;
    }
    let cause = sm_core::secrets::scrub(&cause.to_string()).into_owned();
    let lower = cause.to_lowercase();
    if e.is_timeout() {
        format!("{at} did not answer within 120 s")
    } else if lower.contains("refused") {
        format!("nothing answered at {at} (connection refused)")
    } else if lower.contains("dns") || lower.contains("resolve") || lower.contains("name or service") {
        format!("cannot find the host of {at} ({cause})")
    } else if e.is_connect() {
        format!("cannot connect to {at} ({cause})")
    } else {
        format!("{at} broke off the upload ({cause})")
    }
}

/// What to do when the site cannot be reached.
fn what_to_do(site: &str) -> String {
    format!(
        "Check that the results site is running at {} (`speedmatrix serve` starts one) and that --site is its address, e.g. http://127.0.0.1:8080",
        shown_site(site)
    )
}

pub async fn main(args: UploadArgs) -> ExitCode {
    let path = file_of(&args.run);
    let bytes = match std::fs::read(&path) {
        Ok(b) => b,
        Err(e) => {
            eprintln!("error: cannot read {}: {e}", path.display());
            return ExitCode::from(2);
        }
    };
    // refuse locally what the site would refuse, with the same message
    let checked = text_of(&bytes).and_then(|t| {
        let record = sm_report::import_str(&t).map_err(|e| e.to_string())?;
        sm_site::validate::check(&record).map_err(|e| format!("the site would refuse it: {e}"))?;
        Ok(t)
    });
    let text = match checked {
        Ok(t) => t,
        Err(e) => {
            eprintln!("error: {}: {e}", path.display());
            return ExitCode::from(2);
        }
    };
    // the secrets this process was given (the token, OPENAI_API_KEY, …) never leave the machine,
    // whatever tool wrote the file
    let body = match gzip(sm_core::secrets::scrub(&text).as_bytes()) {
        Ok(b) => b,
        Err(e) => {
            eprintln!("error: cannot compress {}: {e}", path.display());
            return ExitCode::from(1);
        }
    };
    let endpoint = format!("{}/api/runs", args.site.trim_end_matches('/'));
    let client = match reqwest::Client::builder().timeout(Duration::from_secs(120)).build() {
        Ok(c) => c,
        Err(e) => {
            eprintln!("error: cannot make an HTTP client: {e}");
            return ExitCode::from(1);
        }
    };
    let attempts = args.attempts.max(1);
    let mut delay = Duration::from_millis(500);
    for attempt in 1..=attempts {
        let sent = client
            .post(&endpoint)
            .bearer_auth(args.token.trim())
            .header("content-type", "application/json")
            .header("content-encoding", "gzip")
            .body(body.clone())
            .send()
            .await;
        let why = match sent {
            Ok(resp) if resp.status().is_success() => {
                let value: serde_json::Value = resp.json().await.unwrap_or_default();
                let url = value.get("url").and_then(|u| u.as_str()).unwrap_or_default();
                if value.get("existing").and_then(serde_json::Value::as_bool) == Some(true) {
                    eprintln!("upload: the site had this run already; it is stored once, at the same address");
                }
                println!("{url}");
                return ExitCode::SUCCESS;
            }
            Ok(resp) if resp.status().is_server_error() => format!("the site answered {}", resp.status()),
            Ok(resp) => {
                let status = resp.status();
                let text = resp.text().await.unwrap_or_default();
                let message = serde_json::from_str::<serde_json::Value>(&text)
                    .ok()
                    .and_then(|v| v.get("error").and_then(|e| e.as_str()).map(str::to_string))
                    .unwrap_or(text);
                eprintln!("error: the site refused the upload ({status}): {message}");
                return ExitCode::from(1);
            }
            Err(e) => unreachable(&args.site, &e),
        };
        if attempt == attempts {
            eprintln!("error: {why}; gave up after {attempts} attempts. {}", what_to_do(&args.site));
            return ExitCode::from(1);
        }
        eprintln!("upload: {why}; retrying in {:.1} s (attempt {attempt} of {attempts})", delay.as_secs_f64());
        tokio::time::sleep(delay).await;
        delay = (delay * 2).min(Duration::from_secs(8));
    }
    ExitCode::from(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_site_is_shown_without_anything_that_may_hold_a_token() {
        assert_eq!(shown_site("http://127.0.0.1:8080"), "http://127.0.0.1:8080");
        assert_eq!(shown_site("https://bot:tok-123@results.example/base?token=tok-456"), "https://results.example:443");
        assert_eq!(shown_site("not a url"), "the --site address");
    }
}
