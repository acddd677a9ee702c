//! Shared helpers: a simulated engine in the test process, the real binary as a
//! child process, and readers for what it wrote.

#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::Value;
use sm_sim::{Flavor, Profile, ServerFault, SimHandle, SimOptions};

pub struct Sim {
    pub handle: SimHandle,
    pub trace: Option<PathBuf>,
}

pub struct SimSpec<'a> {
    pub profile: &'a str,
    pub flavor: Flavor,
    pub faults: &'a [&'a str],
    pub api_key: Option<&'a str>,
    pub trace_dir: Option<&'a Path>,
}

impl Default for SimSpec<'_> {
    fn default() -> Self {
        SimSpec { profile: "tiny", flavor: Flavor::Vllm, faults: &[], api_key: None, trace_dir: None }
    }
}

pub async fn sim(spec: SimSpec<'_>) -> Sim {
    let mut opts = SimOptions::new(Profile::resolve(spec.profile).expect("a built-in profile or a profile file"));
    opts.flavor = spec.flavor;
    opts.faults = spec.faults.iter().map(|f| f.parse::<ServerFault>().expect("fault spec")).collect();
    opts.api_key = spec.api_key.map(str::to_string);
    let trace = spec.trace_dir.map(|d| d.join("trace.jsonl"));
    opts.trace = trace.clone();
    Sim { handle: sm_sim::start(opts).await.expect("sim starts"), trace }
}

pub struct RunResult {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
    pub record: Option<Value>,
}

impl RunResult {
    pub fn record(&self) -> &Value {
        self.record.as_ref().unwrap_or_else(|| panic!("no run.json; stderr:\n{}", self.stderr))
    }
    pub fn cells(&self) -> Vec<&Value> {
        self.record()["decode"].as_array().expect("decode[]").iter().collect()
    }
    pub fn cell(&self, ctx: u64, c: u64) -> &Value {
        self.record()["decode"]
            .as_array()
            .unwrap()
            .iter()
            .find(|x| x["context"] == ctx && x["concurrency"] == c)
            .unwrap_or_else(|| panic!("no cell {ctx}×{c}; stdout:\n{}\nstderr:\n{}", self.stdout, self.stderr))
    }
}

pub fn bin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_speedmatrix"))
}

/// Runs `speedmatrix run` with `args` plus `--out out`, in a blocking thread.
pub async fn run(out: &Path, args: &[&str]) -> RunResult {
    let out = out.to_path_buf();
    let mut args: Vec<String> = args.iter().map(|s| s.to_string()).collect();
    // QUICK runs default to short requests
    if args.iter().any(|a| a == "--no-prefill-at-max") && !args.iter().any(|a| a == "--max-tokens") {
        args.extend(["--max-tokens".to_string(), "512".to_string()]);
    }
    tokio::task::spawn_blocking(move || {
        let mut cmd = bin();
        cmd.arg("run").args(&args).env_remove("OPENAI_API_KEY");
        // --resume names the directory itself
        if !args.iter().any(|a| a == "--resume") {
            cmd.arg("--out").arg(&out);
        }
        let output = cmd.output().unwrap();
        result(&out, output)
    })
    .await
    .unwrap()
}

pub fn result(out: &Path, output: Output) -> RunResult {
    let record =
        std::fs::read_to_string(out.join("run.json")).ok().map(|s| serde_json::from_str(&s).expect("run.json is JSON"));
    RunResult {
        code: output.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
        record,
    }
}

/// Settings for a short matrix on the tiny profile.
/// With QUICK, [`run`] adds `--max-tokens 512` unless the test sets its own.
pub const QUICK: &[&str] = &["--ready-stable", "300ms", "--warmup", "0s", "--no-prefill-at-max"];

pub fn trace_lines(path: &Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str(l).expect("trace line is JSON"))
        .collect()
}

/// The engine's trace in `dir` (trace.jsonl), each line by the request id the server gave it.
pub fn trace_by_id(dir: &Path) -> std::collections::HashMap<String, Value> {
    trace_lines(&dir.join("trace.jsonl")).into_iter().map(|t| (format!("chatcmpl-{}", t["id"]), t)).collect()
}

/// Each named metric of the server's `/metrics`, summed over its series (0 where it has none).
pub async fn metric_sums<const N: usize>(url: &str, names: [&str; N]) -> [f64; N] {
    let text = reqwest::get(format!("{url}/metrics")).await.unwrap().text().await.unwrap();
    names.map(|name| {
        text.lines()
            .filter(|l| l.starts_with(name) && l[name.len()..].starts_with(['{', ' ']))
            .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
            .sum()
    })
}

pub async fn scheduler(url: &str) -> (f64, f64) {
    let [running, waiting] = metric_sums(url, ["vllm:num_requests_running", "vllm:num_requests_waiting"]).await;
    (running, waiting)
}

/// A JSON number of a record or a line, or a panic that shows what was there instead.
pub fn num(v: &Value) -> f64 {
    v.as_f64().unwrap_or_else(|| panic!("not a number: {v}"))
}

/// The lines of `requests.jsonl` in `out` (`--save-requests`).
pub fn request_lines(out: &Path) -> Vec<Value> {
    std::fs::read_to_string(out.join("requests.jsonl"))
        .expect("requests.jsonl")
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect()
}

/// `speedmatrix run ARGS --out OUT` as a child whose output is captured, for tests that signal it.
pub fn spawn_run(out: &Path, args: &[&str]) -> std::process::Child {
    bin()
        .arg("run")
        .args(args)
        .args(["--progress", "plain", "--out"])
        .arg(out)
        .env_remove("OPENAI_API_KEY")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap()
}

/// Polls `out/run.json` until `ready` holds for it (90 s at most), and returns that record.
pub async fn wait_for_record(out: &Path, what: &str, ready: impl Fn(&Value) -> bool) -> Value {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(90);
    loop {
        let rec = std::fs::read_to_string(out.join("run.json")).ok().and_then(|s| serde_json::from_str(&s).ok());
        if let Some(rec) = rec.filter(|r| ready(r)) {
            return rec;
        }
        assert!(std::time::Instant::now() < deadline, "not within 90 s: {what}");
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
}

/// Sends SIGINT (Ctrl-C) to the child after `after`, and returns what it wrote once it ended.
pub async fn interrupt(child: std::process::Child, out: &Path, after: std::time::Duration) -> RunResult {
    tokio::time::sleep(after).await;
    let pid = child.id().to_string();
    assert!(Command::new("kill").args(["-INT", &pid]).status().unwrap().success());
    let output = tokio::task::spawn_blocking(move || child.wait_with_output().unwrap()).await.unwrap();
    result(out, output)
}
