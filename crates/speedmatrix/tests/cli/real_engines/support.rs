//! What the real-engine tests share: the servers' URLs from the environment, a
//! plain HTTP/1.0 client for their endpoints, a Prometheus reader, and the real
//! binary run with its stdout timed line by line while /metrics is polled.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::Value;

/// The URL in `var`, or `None` (the test is skipped) when it is unset outside CI.
/// In CI an unset variable means the engines were not started: that is a failure.
pub fn server(var: &str) -> Option<String> {
    match std::env::var(var) {
        Ok(v) if !v.trim().is_empty() => Some(v.trim().trim_end_matches('/').to_string()),
        _ if std::env::var("CI").as_deref() == Ok("true") => {
            panic!(
                "{var} is not set but CI=true: run the real-engine tests through scripts/engines/real-engine-tests.sh"
            )
        }
        _ => {
            eprintln!("skipped: set {var} (run scripts/engines/real-engine-tests.sh)");
            None
        }
    }
}

pub fn key(var: &str) -> Option<String> {
    std::env::var(var).ok().filter(|k| !k.is_empty())
}

/// The vLLM of the suite: its URL (`SPEEDMATRIX_VLLM_URL`) and key (`SPEEDMATRIX_VLLM_KEY`).
pub struct Vllm {
    pub url: String,
    pub key: Option<String>,
}

impl Vllm {
    /// `None` (the test is skipped) without a server, as [`server`] says.
    pub fn from_env() -> Option<Vllm> {
        Some(Vllm { url: server("SPEEDMATRIX_VLLM_URL")?, key: key("SPEEDMATRIX_VLLM_KEY") })
    }

    /// `args` with `--api-key` added when the server has a key.
    pub fn with_key<'a>(&'a self, args: &[&'a str]) -> Vec<&'a str> {
        let mut v = args.to_vec();
        if let Some(k) = &self.key {
            v.extend(["--api-key", k.as_str()]);
        }
        v
    }

    /// Runs `speedmatrix run ARGS` against it, with its key, into a fresh directory returned with
    /// the result (the directory goes when it is dropped).
    pub fn run(&self, args: &[&str]) -> (Run, tempfile::TempDir) {
        let dir = tempfile::tempdir().unwrap();
        let r = run(&self.url, dir.path(), &self.with_key(args), None);
        (r, dir)
    }
}

/// One request over a fresh connection; returns the status and the body.
pub fn http(base: &str, method: &str, path: &str, key: Option<&str>, body: Option<&Value>) -> (u16, String) {
    let authority = base.strip_prefix("http://").expect("http:// URL").trim_end_matches('/');
    let mut stream = TcpStream::connect(authority).unwrap_or_else(|e| panic!("connect {authority}: {e}"));
    stream.set_read_timeout(Some(Duration::from_secs(120))).unwrap();
    let body = body.map(Value::to_string).unwrap_or_default();
    let auth = key.map(|k| format!("Authorization: Bearer {k}\r\n")).unwrap_or_default();
    // HTTP/1.0 with Connection: close: the answer is never chunked and ends at EOF.
    let request = format!(
        "{method} {path} HTTP/1.0\r\nHost: {authority}\r\n{auth}Content-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    stream.write_all(request.as_bytes()).unwrap();
    let mut raw = Vec::new();
    stream.read_to_end(&mut raw).unwrap();
    let text = String::from_utf8_lossy(&raw).into_owned();
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let status = head.split_whitespace().nth(1).and_then(|s| s.parse().ok()).unwrap_or(0);
    (status, body.to_string())
}

pub fn get_json(base: &str, path: &str, key: Option<&str>) -> Value {
    let (status, body) = http(base, "GET", path, key, None);
    assert_eq!(status, 200, "GET {path}: {body}");
    serde_json::from_str(&body).unwrap_or_else(|e| panic!("GET {path} is not JSON ({e}): {body}"))
}

/// A /metrics scrape.
pub struct Metrics(pub String);

impl Metrics {
    pub fn scrape(base: &str) -> Metrics {
        let (status, body) = http(base, "GET", "/metrics", None, None);
        assert_eq!(status, 200, "GET /metrics: {body}");
        Metrics(body)
    }

    /// The sum of every series of `name` (all label sets).
    pub fn sum(&self, name: &str) -> f64 {
        self.0
            .lines()
            .filter(|l| l.starts_with(name) && l[name.len()..].starts_with(['{', ' ']))
            .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
            .sum()
    }

    /// The value of `label` on the first series of `name`.
    pub fn label(&self, name: &str, label: &str) -> Option<String> {
        let line = self.0.lines().find(|l| l.starts_with(name) && l[name.len()..].starts_with('{'))?;
        let at = line.find(&format!("{label}=\""))? + label.len() + 2;
        Some(line[at..].split('"').next()?.to_string())
    }
}

/// A scrape taken while the binary ran: when it was asked for, when it came back, what it said.
pub struct Sample {
    pub asked: Instant,
    pub answered: Instant,
    pub running: f64,
    pub waiting: f64,
    /// The sums of `Poll::counters`, in that order.
    pub counters: Vec<f64>,
}

pub struct Run {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
    /// Each stdout line with the moment it was read.
    pub lines: Vec<(Instant, String)>,
    pub samples: Vec<Sample>,
    pub record: Option<Value>,
}

impl Run {
    pub fn record(&self) -> &Value {
        self.record
            .as_ref()
            .unwrap_or_else(|| panic!("no run.json\nstdout:\n{}\nstderr:\n{}", self.stdout, self.stderr))
    }

    pub fn decode(&self) -> Vec<&Value> {
        self.record()["decode"].as_array().expect("decode[]").iter().collect()
    }

    pub fn context(&self) -> String {
        format!("exit {}\nstdout:\n{}\nstderr:\n{}", self.code, self.stdout, self.stderr)
    }
}

/// Metric names of the scheduler gauges to poll while the run goes on.
pub struct Poll<'a> {
    pub running: &'a str,
    pub waiting: &'a str,
    /// More series to record in each sample (counters to difference over a cell).
    pub counters: &'a [&'a str],
}

/// Runs `speedmatrix run ARGS --out OUT`; with `poll`, scrapes the server every 50 ms meanwhile.
pub fn run(base: &str, out: &Path, args: &[&str], poll: Option<Poll<'_>>) -> Run {
    let mut child = Command::new(env!("CARGO_BIN_EXE_speedmatrix"))
        .arg("run")
        .args(["--url", base])
        .args(args)
        .arg("--out")
        .arg(out)
        .env_remove("OPENAI_API_KEY")
        .env("RUST_LOG", "warn")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("speedmatrix starts");
    let stdout = child.stdout.take().unwrap();
    let mut stderr = child.stderr.take().unwrap();
    let lines = Arc::new(Mutex::new(Vec::new()));
    let reader = {
        let lines = lines.clone();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                lines.lock().unwrap().push((Instant::now(), line));
            }
        })
    };
    let err_reader = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = stderr.read_to_string(&mut s);
        s
    });
    let done = Arc::new(AtomicBool::new(false));
    let poller = poll.map(|p| {
        let (base, running, waiting, done) =
            (base.to_string(), p.running.to_string(), p.waiting.to_string(), done.clone());
        let counters: Vec<String> = p.counters.iter().map(|c| c.to_string()).collect();
        std::thread::spawn(move || {
            let mut samples = Vec::new();
            while !done.load(Ordering::Relaxed) {
                let asked = Instant::now();
                let m = Metrics::scrape(&base);
                samples.push(Sample {
                    asked,
                    answered: Instant::now(),
                    running: m.sum(&running),
                    waiting: m.sum(&waiting),
                    counters: counters.iter().map(|c| m.sum(c)).collect(),
                });
                std::thread::sleep(Duration::from_millis(50));
            }
            samples
        })
    });
    let status = child.wait().unwrap();
    done.store(true, Ordering::Relaxed);
    reader.join().unwrap();
    let stderr = err_reader.join().unwrap();
    let samples = poller.map(|p| p.join().unwrap()).unwrap_or_default();
    let lines = std::mem::take(&mut *lines.lock().unwrap());
    let record =
        std::fs::read_to_string(out.join("run.json")).ok().map(|s| serde_json::from_str(&s).expect("run.json is JSON"));
    let stdout = lines.iter().map(|(_, l)| l.as_str()).collect::<Vec<_>>().join("\n");
    Run { code: status.code().unwrap_or(-1), stdout, stderr, lines, samples, record }
}

/// The drain barrier, seen from outside: from the barrier's hold before a cell's "done" line to
/// the next cell's "started" line the server runs nothing left over from that cell (at most one
/// request: the next context's scout, or the probe of tokens per chunk). Returns how many scrapes
/// were checked.
pub fn check_drained_between_cells(r: &Run) -> usize {
    let mut checked = 0;
    for (i, (done_at, line)) in r.lines.iter().enumerate() {
        // a cell's result line, not the warm-up's announcements
        if !line.contains("] decode ") || line.contains("warm-up") {
            continue;
        }
        let next_start =
            r.lines[i + 1..].iter().find(|(_, l)| l.contains("] cell ") && l.ends_with("started")).map(|(t, _)| *t);
        let Some(next_start) = next_start else { continue };
        // the barrier after the cell held the server idle for IDLE_FOR before the result line, and
        // nothing but the next cell's one-token scout runs before its start (methodology §6.6)
        let idle_from = done_at.checked_sub(DRAIN_HELD).unwrap_or(*done_at);
        for s in r.samples.iter().filter(|s| s.asked > idle_from && s.answered < next_start) {
            checked += 1;
            assert!(
                s.running <= 1.0 && s.waiting == 0.0,
                "after `{line}` the server still ran {} and queued {} requests\n{}",
                s.running,
                s.waiting,
                r.context()
            );
        }
    }
    checked
}

/// How long before a cell's result line the drain barrier has certainly held the server idle: its
/// hold (0.5 s) less a margin for the line's way to the test.
const DRAIN_HELD: Duration = Duration::from_millis(400);

/// About when the window of cell `label × concurrency` opened (its stdout line) and closed
/// (`measured_s` later).
pub fn window_span(r: &Run, label: &str, concurrency: u64, measured_s: f64) -> Option<(Instant, Instant)> {
    let open_text = format!("cell {label} × {concurrency} window open");
    let (open, _) = r.lines.iter().find(|(_, l)| l.contains(&open_text))?;
    Some((*open, *open + Duration::from_secs_f64(measured_s)))
}

/// How much counter `k` of the poll grew between the last scrapes answered before `from` and
/// before `to`.
pub fn counter_delta(r: &Run, k: usize, from: Instant, to: Instant) -> Option<f64> {
    let before = r.samples.iter().rev().find(|s| s.answered <= from)?;
    let after = r.samples.iter().rev().find(|s| s.answered <= to)?;
    Some(after.counters[k] - before.counters[k])
}

/// Every file under `dir`, as text (lossy).
pub fn all_text_under(dir: &Path) -> String {
    let mut out = String::new();
    for entry in std::fs::read_dir(dir).unwrap().flatten() {
        let p = entry.path();
        if p.is_dir() {
            out.push_str(&all_text_under(&p));
        } else {
            out.push_str(&String::from_utf8_lossy(&std::fs::read(&p).unwrap()));
        }
    }
    out
}
