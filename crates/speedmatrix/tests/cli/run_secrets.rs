//! No secret reaches anything speedmatrix writes or shows: a run with an API key, against a server
//! (a proxy in front of the simulated engine) that echoes the `Authorization` header in its error
//! bodies, a launch command and a label full of secrets and secrets in the environment; then
//! `speedmatrix serve` and `speedmatrix upload` of its run.json, every page of the site about it,
//! the consoles, and the site's SQLite files.

use std::collections::{BTreeSet, VecDeque};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::common::{SimSpec, sim};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};

const KEY: &str = "sk-test-SECRET-4242";
/// The key the run passes with `--api-key` (over `OPENAI_API_KEY`, which stays a secret too): a
/// plain lower-case word, which only its value can tell from prose.
const WORD_KEY: &str = "mysecretkey";
/// Real flags that only mention tokens, next to real secrets: only the secrets may go.
const LAUNCH: &str = "HF_TOKEN=hf_SECRET_TOKEN DATABASE_URL=postgres://bench:db-SECRET-55@db/runs vllm serve tiny \
     --api-key sk-launch-SECRET --hf-token hf_SECRET2 --max-num-batched-tokens 2048 --tokenizer-mode mistral \
     --hf-overrides '{\"token\": \"hf_JSON_SECRET_3\"}' --port 8000";
const LAUNCH_REDACTED: &str = "HF_TOKEN=<redacted> DATABASE_URL=postgres://bench:<redacted>@db/runs vllm serve tiny \
     --api-key <redacted> --hf-token <redacted> --max-num-batched-tokens 2048 --tokenizer-mode mistral \
     --hf-overrides '{\"token\": \"<redacted>\"}' --port 8000";
/// The label holds the API key itself.
const LABEL: &str = "tiny with sk-test-SECRET-4242 behind an echoing proxy";
/// In the environment of every speedmatrix command, with the API key as OPENAI_API_KEY.
const ENV: &[(&str, &str)] = &[("HF_TOKEN", "hf_ENV_SECRET_77"), ("MY_PASSWORD", "pw-ENV-SECRET")];

fn secrets(token: &str) -> Vec<String> {
    let mut s: Vec<String> =
        [KEY, "sk-launch-SECRET", "hf_SECRET_TOKEN", "hf_SECRET2", "db-SECRET-55", "hf_JSON_SECRET_3"]
            .map(String::from)
            .to_vec();
    s.extend(ENV.iter().map(|(_, v)| v.to_string()));
    s.push(token.to_string());
    s.push(WORD_KEY.to_string());
    s
}

/// Every piece of the API keys of ten characters: a key cut short by an excerpt leaks too.
fn key_pieces() -> Vec<String> {
    [KEY, WORD_KEY].iter().flat_map(|k| (0..=k.len() - 10).map(|i| k[i..i + 10].to_string())).collect()
}

/// A proxy in front of `upstream` that answers as a careless one would: requests `echo` picks
/// get an error whose body echoes the request's `Authorization` header and the bare key — as
/// JSON, or as text so long that an excerpt of 300 characters cuts the key in two. Everything else
/// is passed on.
async fn echo_proxy(upstream: String, echo: fn(&str, &[u8]) -> bool) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let http = reqwest::Client::new();
    let echoed = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    tokio::spawn(async move {
        while let Ok((socket, _)) = listener.accept().await {
            let (http, upstream, echoed) = (http.clone(), upstream.clone(), echoed.clone());
            tokio::spawn(async move {
                let _ = serve_one(socket, &http, &upstream, echo, &echoed).await;
            });
        }
    });
    url
}

async fn serve_one(
    socket: tokio::net::TcpStream,
    http: &reqwest::Client,
    upstream: &str,
    echo: fn(&str, &[u8]) -> bool,
    echoed: &std::sync::atomic::AtomicUsize,
) -> std::io::Result<()> {
    let mut reader = BufReader::new(socket);
    let mut line = String::new();
    reader.read_line(&mut line).await?;
    let mut parts = line.split_whitespace();
    let (method, path) = (parts.next().unwrap_or("GET").to_string(), parts.next().unwrap_or("/").to_string());
    let (mut auth, mut length, mut content_type) = (String::new(), 0usize, None);
    loop {
        let mut header = String::new();
        reader.read_line(&mut header).await?;
        let Some((name, value)) = header.trim_end().split_once(':') else { break };
        match name.to_ascii_lowercase().as_str() {
            "authorization" => auth = value.trim().to_string(),
            "content-length" => length = value.trim().parse().unwrap_or(0),
            "content-type" => content_type = Some(value.trim().to_string()),
            _ => {}
        }
    }
    let mut body = vec![0; length];
    reader.read_exact(&mut body).await?;
    let mut socket = reader.into_inner();
    if echo(&path, &body) {
        let n = echoed.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        // the key alone, in no shape a redaction by shape knows: only its value tells
        let bare = auth.strip_prefix("Bearer ").unwrap_or(&auth);
        let text = if n.is_multiple_of(2) {
            let message = format!("invalid request; you sent authorization: {auth}; no user holds {bare}");
            serde_json::json!({"error": {"message": message, "headers": {"authorization": auth}}}).to_string()
        } else {
            // 290 characters before the key: a 300-character excerpt ends inside it
            let lead = " no user holds ";
            format!("{}{lead}{bare} and more", "x".repeat(290 - lead.len()))
        };
        let head = format!(
            "HTTP/1.1 400 Bad Request\r\ncontent-type: text/plain\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
            text.len()
        );
        socket.write_all(head.as_bytes()).await?;
        socket.write_all(text.as_bytes()).await?;
        return socket.shutdown().await;
    }
    let method = reqwest::Method::from_bytes(method.as_bytes()).unwrap_or(reqwest::Method::GET);
    let mut req = http.request(method, format!("{upstream}{path}")).body(body);
    if !auth.is_empty() {
        req = req.header("authorization", auth);
    }
    if let Some(ct) = content_type {
        req = req.header("content-type", ct);
    }
    let Ok(mut resp) = req.send().await else { return socket.shutdown().await };
    let ct = resp.headers().get("content-type").and_then(|v| v.to_str().ok()).unwrap_or("text/plain").to_string();
    let head = format!("HTTP/1.1 {}\r\ncontent-type: {ct}\r\nconnection: close\r\n\r\n", resp.status());
    socket.write_all(head.as_bytes()).await?;
    while let Ok(Some(chunk)) = resp.chunk().await {
        socket.write_all(&chunk).await?;
        socket.flush().await?;
    }
    socket.shutdown().await
}

fn command(args: &[&str]) -> Command {
    let mut cmd = crate::common::bin();
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
    for s in secrets.iter().chain(&key_pieces()) {
        let found = bytes.windows(s.len()).any(|w| w == s.as_bytes());
        assert!(!found, "the secret {s:?} leaked into {what}");
    }
}

/// A prefill request for the 8K row: its prompt is several times longer than any other's.
fn long_completion(path: &str, body: &[u8]) -> bool {
    path.ends_with("/chat/completions") && body.len() > 16_000
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn secrets_never_reach_files_pages_databases_or_consoles() {
    let sim = sim(SimSpec { api_key: Some(WORD_KEY), ..SimSpec::default() }).await;
    let url = echo_proxy(sim.handle.url(), long_completion).await;
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    let mut args = vec!["run", "--url", &url, "--api-key", WORD_KEY, "--contexts", "1k", "--concurrency", "1"];
    args.extend_from_slice(&["--duration", "1s"]);
    args.extend_from_slice(crate::common::QUICK);
    args.extend_from_slice(&["--prefill-contexts", "8k", "--max-tokens", "256", "--progress", "plain"]);
    args.extend_from_slice(&["--launch-command", LAUNCH, "--label", LABEL, "--out", out.to_str().unwrap()]);
    let (code, run_console) = output(command(&args)).await;
    sim.handle.shutdown().await;
    // the 8K prefill row met the echoing proxy: an error, the rest measured
    assert_eq!(code, 2, "{run_console}");
    let run_json = std::fs::read_to_string(out.join("run.json")).unwrap();
    let record: serde_json::Value = serde_json::from_str(&run_json).unwrap();
    assert_eq!(record["launch_command"], LAUNCH_REDACTED, "only the secrets are redacted, where they stand");
    assert_eq!(record["label"], "tiny with <redacted> behind an echoing proxy");
    assert!(record["decode"].as_array().unwrap().iter().any(|c| c["status"] == "valid"), "{run_json}");
    let failed = record["prefill"].as_array().unwrap().iter().find(|r| r["status"] == "error").expect("an 8K error");
    let reason = failed["reason"].as_str().unwrap();
    assert!(reason.contains("authorization: Bearer <redacted>"), "the echo is kept, the key is not: {reason}");
    assert!(reason.contains("no user holds <redacted>"), "the bare key is scrubbed by its value: {reason}");

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
    let stored = &pages.iter().find(|(p, _)| p == &format!("/api/runs/{a}")).unwrap().1;
    let stored: serde_json::Value = serde_json::from_str(stored).unwrap();
    assert_eq!(stored["launch_command"], LAUNCH_REDACTED, "the site rewrites nothing else");
    assert_eq!(stored["server"]["model"], record["server"]["model"]);
    drop(serve);

    for (path, body) in &pages {
        assert_clean(&format!("the page {path}"), body.as_bytes(), &secrets);
    }
    for (what, text) in &consoles {
        assert_clean(what, text.as_bytes(), &secrets);
    }
    // every file written: the run's directory (run.json, report.html, report.md,
    // measurements.csv), the site's SQLite files (records are stored as plain JSON text, so the raw
    // bytes are the rows) and the serve console
    let written = files(dir.path());
    assert!(written.iter().any(|(p, _)| p == &db_file), "the database is a file");
    for name in ["run.json", "report.html", "report.md", "measurements.csv"] {
        assert!(written.iter().any(|(p, _)| p == &out.join(name)), "{name} is written");
    }
    for (path, bytes) in &written {
        assert_clean(&path.display().to_string(), bytes, &secrets);
    }
}

/// The model list answered with the echo: the run cannot start, and its error, printed on the
/// console, quotes the server without the key — also where the quote is cut short.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_echoed_key_in_a_startup_error_is_not_printed() {
    let sim = sim(SimSpec { api_key: Some(KEY), ..SimSpec::default() }).await;
    let url = echo_proxy(sim.handle.url(), |path, _| path.ends_with("/v1/models")).await;
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    let mut consoles = Vec::new();
    // the first echo is JSON, the second a long text cut inside the key
    for _ in 0..2 {
        let args = ["run", "--url", &url, "--contexts", "1k", "--concurrency", "1", "--out", out.to_str().unwrap()];
        let (code, console) = output(command(&args)).await;
        assert_eq!(code, 1, "{console}");
        assert!(console.contains("<redacted>"), "the error quotes the server: {console}");
        consoles.push(console);
    }
    sim.handle.shutdown().await;
    for console in &consoles {
        assert_clean("the console", console.as_bytes(), &secrets("no-token-here"));
    }
}

/// Credentials or a key in `--url` (`user:password@`, `?api_key=`): the run is refused before
/// anything is sent or written, and the error names the URL without them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn credentials_in_the_url_are_refused_and_never_shown() {
    let sim = sim(SimSpec { api_key: Some(KEY), ..SimSpec::default() }).await;
    let addr = sim.handle.url().trim_start_matches("http://").trim_end_matches('/').to_string();
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    let urls = [
        (format!("http://benchuser:urlpassword@{addr}/v1"), "credentials in the URL"),
        (format!("http://{addr}/v1?api_key=querysecretkey"), "a query or fragment in the URL"),
    ];
    for (url, why) in &urls {
        let args = ["run", "--url", url, "--contexts", "1k", "--concurrency", "1", "--out", out.to_str().unwrap()];
        let (code, console) = output(command(&args)).await;
        assert_eq!(code, 1, "{console}");
        assert!(console.contains(why) && console.contains(&format!("'http://{addr}/v1'")), "{console}");
        for secret in ["benchuser", "urlpassword", "querysecretkey"] {
            assert!(!console.contains(secret), "{secret} leaked into the console: {console}");
        }
    }
    sim.handle.shutdown().await;
    assert!(!out.exists(), "nothing is written for a refused run");
}

/// A key that is also a word of the record's structure (a field name) cannot be scrubbed out of
/// `run.json`: the run stops before it measures and writes nothing, and says to use a real key.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_key_that_is_a_field_name_fails_closed() {
    let sim = sim(SimSpec { api_key: Some("concurrency"), ..SimSpec::default() }).await;
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    let url = sim.handle.url();
    let mut args = vec!["run", "--url", &url, "--api-key", "concurrency", "--contexts", "1k", "--concurrency", "1"];
    args.extend_from_slice(crate::common::QUICK);
    args.extend_from_slice(&["--duration", "1s", "--out", out.to_str().unwrap()]);
    let (code, console) = output(command(&args)).await;
    sim.handle.shutdown().await;
    assert_eq!(code, 1, "{console}");
    assert!(console.contains("is also part of the structure") && console.contains("Use a real key"), "{console}");
    assert!(!out.join("run.json").exists(), "no run.json holds the key");
}
