//! No secret reaches anything speedmatrix writes or shows: a run with an API key, a launch command
//! full of secrets and secrets in the environment, then `speedmatrix serve` and `speedmatrix upload`
//! of its run.json, every page of the site about it, the consoles, and the site's SQLite files.

mod common;

use std::collections::{BTreeSet, VecDeque};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::{SimSpec, sim};

const KEY: &str = "sk-test-SECRET-4242";
const LAUNCH: &str =
    "HF_TOKEN=hf_SECRET_TOKEN vllm serve tiny --api-key sk-launch-SECRET --hf-token hf_SECRET2 --port 8000";
/// In the environment of every speedmatrix command, with the API key as OPENAI_API_KEY.
const ENV: &[(&str, &str)] = &[("HF_TOKEN", "hf_ENV_SECRET_77"), ("MY_PASSWORD", "pw-ENV-SECRET")];

fn secrets(token: &str) -> Vec<String> {
    let mut s: Vec<String> = [KEY, "sk-launch-SECRET", "hf_SECRET_TOKEN", "hf_SECRET2"].map(String::from).to_vec();
    s.extend(ENV.iter().map(|(_, v)| v.to_string()));
    s.push(token.to_string());
    s
}

fn command(args: &[&str]) -> Command {
    let mut cmd = common::bin();
    cmd.args(args).env("OPENAI_API_KEY", KEY).env_remove("SPEEDMATRIX_DB").env_remove("SPEEDMATRIX_TOKEN");
    // everything speedmatrix logs goes to the console too
    cmd.env("SPEEDMATRIX_LOG", "debug");
    for (k, v) in ENV {
        cmd.env(k, v);
    }
    cmd
}

/// Runs a command to its end in a blocking thread; `(exit code, stdout + stderr)`.
async fn output(mut cmd: Command) -> (i32, String) {
    tokio::task::spawn_blocking(move || {
        let out = cmd.output().expect("speedmatrix runs");
        let text = String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
        (out.status.code().unwrap_or(-1), text)
    })
    .await
    .unwrap()
}

/// `speedmatrix serve`, its console going to a file; killed however the test ends.
struct Serve {
    child: std::process::Child,
    console: PathBuf,
}

impl Drop for Serve {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Serve {
    async fn start(db: &str, console: PathBuf) -> (Serve, String) {
        let file = std::fs::File::create(&console).unwrap();
        let child = command(&["serve", "--db", db, "--listen", "127.0.0.1:0"])
            .stdout(Stdio::from(file.try_clone().unwrap()))
            .stderr(Stdio::from(file))
            .spawn()
            .expect("serve starts");
        let serve = Serve { child, console };
        let end = Instant::now() + Duration::from_secs(60);
        loop {
            let text = std::fs::read_to_string(&serve.console).unwrap_or_default();
            if let Some(rest) = text.split("http://").nth(1) {
                let addr = rest.split_whitespace().next().unwrap().trim_end_matches('/').to_string();
                return (serve, format!("http://{addr}"));
            }
            assert!(Instant::now() < end, "serve prints its address:\n{text}");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}

/// Every file under `dir`, recursively, as bytes.
fn files(dir: &Path) -> Vec<(PathBuf, Vec<u8>)> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            out.extend(files(&path));
        } else {
            out.push((path.clone(), std::fs::read(&path).unwrap()));
        }
    }
    out
}

/// Site paths linked from `html` (`href="/…"`), entities decoded.
fn links(html: &str) -> Vec<String> {
    html.split("href=\"")
        .skip(1)
        .filter_map(|rest| rest.split('"').next())
        .filter(|l| l.starts_with('/') && !l.starts_with("//"))
        .map(|l| l.replace("&amp;", "&"))
        .collect()
}

/// Fetches `start` and every site page linked from it, two links deep; `(path, body)` of each.
async fn crawl(site: &str, start: &[String]) -> Vec<(String, String)> {
    let http = reqwest::Client::new();
    let mut seen: BTreeSet<String> = start.iter().cloned().collect();
    let mut queue: VecDeque<(String, usize)> = start.iter().map(|p| (p.clone(), 0)).collect();
    let mut pages = Vec::new();
    while let Some((path, depth)) = queue.pop_front() {
        let resp = http.get(format!("{site}{path}")).send().await.unwrap();
        assert!(resp.status().is_success(), "GET {path}: {}", resp.status());
        let body = resp.text().await.unwrap();
        if depth < 2 {
            for link in links(&body) {
                // one page of each list view is enough; sorting and paging show the same rows
                if seen.len() < 60 && seen.insert(link.clone()) {
                    queue.push_back((link, depth + 1));
                }
            }
        }
        pages.push((path, body));
    }
    pages
}

fn assert_clean(what: &str, bytes: &[u8], secrets: &[String]) {
    for s in secrets {
        let found = bytes.windows(s.len()).any(|w| w == s.as_bytes());
        assert!(!found, "the secret {s:?} leaked into {what}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn secrets_never_reach_files_pages_databases_or_consoles() {
    let sim = sim(SimSpec { api_key: Some(KEY), ..SimSpec::default() }).await;
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    let url = sim.handle.url();
    let mut args = vec!["run", "--url", &url, "--contexts", "1k", "--concurrency", "1", "--duration", "1s"];
    args.extend_from_slice(common::QUICK);
    args.extend_from_slice(&["--max-tokens", "256", "--launch-command", LAUNCH, "--out", out.to_str().unwrap()]);
    let (code, run_console) = output(command(&args)).await;
    sim.handle.shutdown().await;
    assert_eq!(code, 0, "{run_console}");
    let run_json = std::fs::read_to_string(out.join("run.json")).unwrap();
    assert!(run_json.contains("--api-key <redacted>"), "the launch command is kept, redacted");
    assert!(run_json.contains("\"valid\""), "the run measured something");

    let db_file = dir.path().join("site.db");
    let db = format!("sqlite://{}", db_file.display());
    let (code, token) = output(command(&["serve", "token", "create", "--name", "ci", "--db", &db])).await;
    assert_eq!(code, 0, "{token}");
    let token = token.lines().next().unwrap().trim().to_string();
    assert!(token.starts_with("smt_"), "{token}");
    let secrets = secrets(&token);

    let (serve, site) = Serve::start(&db, dir.path().join("serve-console.txt")).await;
    let mut consoles = vec![("the run's console".to_string(), run_console)];
    let mut ids = Vec::new();
    for _ in 0..2 {
        let mut upload = command(&["upload", out.join("run.json").to_str().unwrap(), "--site", &site]);
        upload.env("SPEEDMATRIX_TOKEN", &token);
        let (code, console) = output(upload).await;
        assert_eq!(code, 0, "{console}");
        let run_url = console.lines().find(|l| l.starts_with(&format!("{site}/runs/"))).expect("the run's URL");
        ids.push(run_url.rsplit('/').next().unwrap().to_string());
        consoles.push(("the upload's console".to_string(), console));
    }
    let (a, b) = (&ids[0], &ids[1]);
    let start: Vec<String> = ["/".to_string(), format!("/runs/{a}"), format!("/compare?ids={a},{b}")]
        .into_iter()
        .chain(["/api/runs".to_string(), format!("/api/runs/{a}"), "/upload".to_string()])
        .collect();
    let pages = crawl(&site, &start).await;
    for want in ["/run.json", "/measurements.csv", "/report.md"] {
        assert!(pages.iter().any(|(p, _)| p == &format!("/runs/{a}{want}")), "the run page links {want}");
    }
    let record = &pages.iter().find(|(p, _)| p == &format!("/api/runs/{a}")).unwrap().1;
    assert!(record.contains("\"valid\"") && record.contains("<redacted>"), "the stored record: {record}");
    drop(serve);

    for (path, body) in &pages {
        assert_clean(&format!("the page {path}"), body.as_bytes(), &secrets);
    }
    for (what, text) in &consoles {
        assert_clean(what, text.as_bytes(), &secrets);
    }
    // every file written: the run's directory, the site's SQLite files (records are stored as
    // plain JSON text, so the raw bytes are the rows) and the serve console
    let written = files(dir.path());
    assert!(written.iter().any(|(p, _)| p == &db_file), "the database is a file");
    for (path, bytes) in &written {
        assert_clean(&path.display().to_string(), bytes, &secrets);
    }
}
