//! `speedmatrix compare A B [C…]`: each run after the first compared with the first, cell by cell,
//! with the significance of every difference (methodology §12), and `--fail-on` for CI. A run is a
//! run directory, a run.json, a reference-tool file, a results site's run address, or a run id on
//! `--site`. Exit status: 0 when no cell fails the gate, 1 when one does, 2 when an input cannot be
//! read (docs/compare.md).

use std::path::Path;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{Context, anyhow, bail};
use sm_core::record::RunRecord;
use sm_report::compare::gate::Gate;
use sm_report::compare::render::{self, LETTERS, Report, Run};

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    Text,
    Markdown,
    Json,
}

#[derive(Debug, clap::Args)]
pub struct CompareArgs {
    /// The runs, the baseline first: run directories, run.json files, reference-tool results,
    /// results-site addresses (http://HOST/runs/ID) or, with --site, site run ids.
    #[arg(required = true, num_args = 2.., value_name = "RUN")]
    pub runs: Vec<String>,
    /// The results site that bare run ids are fetched from, e.g. http://127.0.0.1:8080.
    #[arg(long, value_name = "URL")]
    pub site: Option<String>,
    /// Exit 1 when a cell's difference is past a bound and beyond the noise of both runs, e.g.
    /// 'total_tok_s<-3%,ttft_p90>+10%'. Figures: total_tok_s, per_request_tok_s, ttft_p50,
    /// ttft_p90, tbt_p50, tbt_p99; the sign says which way is worse.
    #[arg(long, value_name = "BOUNDS", value_parser = parse_gate)]
    pub fail_on: Option<Gate>,
    /// text for a terminal, markdown for a CI comment, json for programs (speedmatrix.compare/1).
    #[arg(long, value_enum, default_value_t = Format::Text)]
    pub format: Format,
}

fn parse_gate(s: &str) -> Result<Gate, String> {
    s.parse::<Gate>().map_err(|e| e.to_string())
}

/// Bounds the wait for a site, so a CI job never hangs on one.
const FETCH_TIMEOUT: Duration = Duration::from_secs(60);

pub async fn main(args: CompareArgs) -> ExitCode {
    if args.runs.len() > LETTERS.len() {
        eprintln!("error: compare takes at most {} runs ({} given)", LETTERS.len(), args.runs.len());
        return ExitCode::from(2);
    }
    let mut runs = Vec::with_capacity(args.runs.len());
    for (i, source) in args.runs.iter().enumerate() {
        match load(source, args.site.as_deref()).await {
            Ok(record) => runs.push(Run { source: source.clone(), record }),
            Err(e) => {
                eprintln!("error: run {} ({source}): {e:#}", LETTERS[i]);
                return ExitCode::from(2);
            }
        }
    }
    let report = Report::new(&runs, args.fail_on.as_ref());
    let out = match args.format {
        Format::Text => render::text(&report),
        Format::Markdown => render::markdown(&report),
        Format::Json => render::json(&report),
    };
    println!("{}", out.trim_end_matches('\n'));
    if report.passed() { ExitCode::SUCCESS } else { ExitCode::from(1) }
}

/// Where a run is to be read from.
#[derive(Debug, PartialEq, Eq)]
enum Input {
    File(std::path::PathBuf),
    Url(String),
}

fn is_url(s: &str) -> bool {
    s.starts_with("http://") || s.starts_with("https://")
}

/// A site run's run.json address from its page's address (or the run.json's own).
fn run_json_url(url: &str) -> anyhow::Result<String> {
    let base = url.split(['?', '#']).next().unwrap_or(url).trim_end_matches('/');
    if base.ends_with("/run.json") {
        return Ok(base.to_string());
    }
    let (_, id) = base.rsplit_once("/runs/").ok_or_else(|| {
        anyhow!(
            "{url} is not a run's address on a results site: give http://HOST/runs/ID (the run's page) or its /run.json"
        )
    })?;
    check_id(id)?;
    Ok(format!("{base}/run.json"))
}

/// A site's run ids are letters, digits, `-` and `_`: anything else is not one (and must not
/// reach the URL's path).
fn check_id(id: &str) -> anyhow::Result<()> {
    if id.is_empty() || id.len() > 128 || !id.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_') {
        bail!("'{id}' is not a site run id (letters, digits, - and _); give the run's address, http://HOST/runs/ID");
    }
    Ok(())
}

fn resolve(arg: &str, site: Option<&str>) -> anyhow::Result<Input> {
    if is_url(arg) {
        return Ok(Input::Url(run_json_url(arg)?));
    }
    if Path::new(arg).exists() {
        return Ok(Input::File(arg.into()));
    }
    match site {
        Some(site) if is_url(site) => {
            check_id(arg).context("no such file or directory, and not a site run id either")?;
            Ok(Input::Url(format!("{}/runs/{arg}/run.json", site.trim_end_matches('/'))))
        }
        Some(site) => bail!("--site {site}: give the site's address, e.g. http://127.0.0.1:8080"),
        None => bail!(
            "no such file or directory; for a run on a results site give its address (http://HOST/runs/ID), \
             or its id with --site http://HOST"
        ),
    }
}

async fn load(arg: &str, site: Option<&str>) -> anyhow::Result<RunRecord> {
    match resolve(arg, site)? {
        Input::File(path) => Ok(sm_report::load(&path, &sm_report::Judging::default())?),
        Input::Url(url) => {
            let text = fetch(&url).await?;
            sm_report::import_str(&text).with_context(|| format!("{url} is not a run this version reads"))
        }
    }
}

/// The body of `url`, at most what a site stores.
async fn fetch(url: &str) -> anyhow::Result<String> {
    let client = reqwest::Client::builder().timeout(FETCH_TIMEOUT).build().context("cannot make an HTTP client")?;
    let mut resp = client.get(url).send().await.with_context(|| format!("cannot reach {url}"))?;
    let status = resp.status();
    if status == reqwest::StatusCode::NOT_FOUND {
        bail!("the site has no run at {url} (404): check the id, or open the site's run list");
    }
    if !status.is_success() {
        bail!("{url} answered {status}");
    }
    let html = resp
        .headers()
        .get(reqwest::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|t| t.starts_with("text/html"));
    if html {
        bail!(
            "{url} answered a web page, not a run's JSON: is it a speedmatrix results site? A run's JSON is at /runs/ID/run.json"
        );
    }
    let mut body = Vec::new();
    while let Some(chunk) = resp.chunk().await.with_context(|| format!("reading {url}"))? {
        body.extend_from_slice(&chunk);
        if body.len() > sm_site::MAX_BODY {
            bail!("{url} is larger than {} MiB, more than any run a site stores", sm_site::MAX_BODY / (1024 * 1024));
        }
    }
    String::from_utf8(body).map_err(|_| anyhow!("{url} is not UTF-8 text, so not a run's JSON"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn site_addresses() {
        let u = |s: &str| run_json_url(s).map_err(|e| e.to_string());
        assert_eq!(u("http://h:8080/runs/abc").unwrap(), "http://h:8080/runs/abc/run.json");
        assert_eq!(u("http://h:8080/runs/abc/").unwrap(), "http://h:8080/runs/abc/run.json");
        assert_eq!(u("https://h/x/runs/a-b_1?x=1#top").unwrap(), "https://h/x/runs/a-b_1/run.json");
        assert_eq!(u("http://h/runs/abc/run.json").unwrap(), "http://h/runs/abc/run.json");
        assert!(u("http://h/compare?ids=a,b").unwrap_err().contains("http://HOST/runs/ID"));
        assert!(u("http://h/runs/a/report.md").unwrap_err().contains("not a site run id"));
        assert!(u("http://h/runs/..%2f").unwrap_err().contains("not a site run id"));
    }

    #[test]
    fn inputs() {
        let dir = std::env::temp_dir();
        let here = dir.to_str().unwrap();
        assert_eq!(resolve(here, None).unwrap(), Input::File(dir.clone()));
        assert_eq!(resolve("r1", Some("http://s:1/")).unwrap(), Input::Url("http://s:1/runs/r1/run.json".into()));
        let e = resolve("no-such-run-xyz", None).unwrap_err().to_string();
        assert!(e.contains("--site"), "{e}");
        let e = format!("{:#}", resolve("../etc", Some("http://s")).unwrap_err());
        assert!(e.contains("not a site run id"), "{e}");
        assert!(resolve("r1", Some("s:1")).unwrap_err().to_string().contains("http://"));
    }
}
