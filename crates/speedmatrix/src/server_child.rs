//! `speedmatrix run --server-cmd CMD`: the server as a child that speedmatrix starts, waits for and
//! stops. The command runs under `sh -c` in a process group of its own (so a terminal's Ctrl-C does
//! not reach it behind speedmatrix's back, and every process it forks is stopped with it), its output
//! goes to a log file, and it is stopped on every way out: [`ServerChild::stop`] on the ordinary paths
//! (SIGTERM to the group, a grace, SIGKILL), the guard's `Drop` on an early return, and
//! [`kill_registered`] when a second signal ends the process without running destructors.

use std::fmt;
use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::net::{Ipv4Addr, SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// What marks the port in a `--server-cmd`.
pub const PORT_PLACEHOLDER: &str = "{port}";
/// How long a stopping server has between SIGTERM and SIGKILL.
const GRACE: Duration = Duration::from_secs(10);
/// How often readiness is polled.
const POLL: Duration = Duration::from_millis(250);
/// How many of the log's last lines an error shows.
const LOG_TAIL_LINES: usize = 20;

/// The process group of the running server child, for [`kill_registered`].
static RUNNING: Mutex<Option<u32>> = Mutex::new(None);

#[derive(Debug)]
pub enum ServerError {
    /// The command has no `{port}` for the port speedmatrix chooses.
    NoPortPlaceholder { cmd: String },
    /// No free loopback port, or the log or the child could not be created.
    Start { what: String, source: std::io::Error },
    /// The server ended before it answered.
    Exited { status: ExitStatus, log: PathBuf, tail: String },
    /// It did not answer within the timeout.
    Timeout { after: Duration, log: PathBuf, tail: String },
    /// A signal arrived while waiting for it.
    Interrupted { signal: &'static str },
}

impl fmt::Display for ServerError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ServerError::NoPortPlaceholder { cmd } => write!(
                f,
                "--server-cmd must contain {PORT_PLACEHOLDER}, where speedmatrix puts the port it chooses \
                 (e.g. 'vllm serve MODEL --port {PORT_PLACEHOLDER}'); add it to: {cmd}"
            ),
            ServerError::Start { what, source } => write!(f, "{what}: {source}"),
            ServerError::Exited { status, log, tail } => write!(
                f,
                "the server command ended before the server answered ({}); the last lines of {}:\n{tail}",
                describe(status),
                log.display()
            ),
            ServerError::Timeout { after, log, tail } => write!(
                f,
                "the server did not answer /health and /v1/models within {}s (--serve-timeout); it was stopped. \
                 The last lines of {}:\n{tail}",
                after.as_secs_f64(),
                log.display()
            ),
            ServerError::Interrupted { signal } => {
                write!(f, "{signal} while waiting for the server to answer; it was stopped")
            }
        }
    }
}

impl std::error::Error for ServerError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            ServerError::Start { source, .. } => Some(source),
            _ => None,
        }
    }
}

fn describe(status: &ExitStatus) -> String {
    use std::os::unix::process::ExitStatusExt;
    match (status.code(), status.signal()) {
        (Some(code), _) => format!("exit status {code}"),
        (None, Some(sig)) => format!("killed by signal {sig}"),
        (None, None) => status.to_string(),
    }
}

/// `cmd` with `{port}` replaced, or the refusal of a command without it.
pub fn substitute(cmd: &str, port: u16) -> Result<String, ServerError> {
    if !cmd.contains(PORT_PLACEHOLDER) {
        return Err(ServerError::NoPortPlaceholder { cmd: cmd.to_string() });
    }
    Ok(cmd.replace(PORT_PLACEHOLDER, &port.to_string()))
}

/// A loopback port that nothing listens on now.
pub fn free_port() -> Result<u16, ServerError> {
    TcpListener::bind((Ipv4Addr::LOCALHOST, 0))
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .map_err(|source| ServerError::Start { what: "cannot find a free loopback port".into(), source })
}

/// The running server; stopped (at once, with SIGKILL) when dropped without [`ServerChild::stop`].
pub struct ServerChild {
    child: Option<Child>,
    pgid: u32,
    port: u16,
    log: PathBuf,
}

impl ServerChild {
    /// Runs `cmd` (the port already substituted) with `sh -c` in a new process group, its output
    /// written to `log` (after what it holds with `append`), its input empty.
    pub fn start(cmd: &str, port: u16, log: &Path, append: bool) -> Result<ServerChild, ServerError> {
        let start_err = |what: String| move |source| ServerError::Start { what, source };
        let out = std::fs::OpenOptions::new()
            .create(true)
            .write(true)
            .append(append)
            .truncate(!append)
            .open(log)
            .map_err(start_err(format!("cannot create the server log {}", log.display())))?;
        // the command's own secrets (`--api-key K`, `HF_TOKEN=…`) join the ones every output is
        // scrubbed of: servers print their arguments (vLLM logs its non-default args, the key too)
        for secret in sm_core::redact::redact_command_found(cmd).secrets {
            sm_core::secrets::register(&secret);
        }
        use std::os::unix::process::CommandExt;
        let mut child = Command::new("sh")
            .arg("-c")
            .arg(cmd)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .process_group(0)
            .spawn()
            .map_err(start_err(format!("cannot run the server command {cmd}")))?;
        let out = std::sync::Arc::new(Mutex::new(out));
        if let Some(stdout) = child.stdout.take() {
            scrub_into(stdout, out.clone());
        }
        if let Some(stderr) = child.stderr.take() {
            scrub_into(stderr, out);
        }
        let pgid = child.id();
        *RUNNING.lock().unwrap_or_else(|e| e.into_inner()) = Some(pgid);
        Ok(ServerChild { child: Some(child), pgid, port, log: log.to_path_buf() })
    }

    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    pub fn log(&self) -> &Path {
        &self.log
    }

    /// The log moved: where it is now (the child keeps writing to the same file).
    pub fn set_log(&mut self, log: PathBuf) {
        self.log = log;
    }

    /// Polls until the server answers GET /health with 200 (or has no /health) and /v1/models lists
    /// a model. The child ending first, the timeout, or SIGINT/SIGTERM/SIGHUP: it is stopped and
    /// the error says why.
    pub async fn wait_ready(&mut self, api_key: Option<&str>, timeout: Duration) -> Result<(), ServerError> {
        use tokio::signal::unix::{SignalKind, signal};
        let watch = |kind| {
            signal(kind).map_err(|source| ServerError::Start { what: "cannot watch for signals".into(), source })
        };
        let (mut int, mut term, mut hup) =
            (watch(SignalKind::interrupt())?, watch(SignalKind::terminate())?, watch(SignalKind::hangup())?);
        let client = reqwest::Client::builder().timeout(Duration::from_secs(5)).build().expect("an HTTP client");
        let deadline = Instant::now() + timeout;
        let url = self.url();
        loop {
            if let Some(status) = self.try_exited() {
                self.stop().await;
                return Err(ServerError::Exited { status, log: self.log.clone(), tail: log_tail(&self.log) });
            }
            if ready(&client, &url, api_key).await {
                return Ok(());
            }
            if Instant::now() >= deadline {
                self.stop().await;
                return Err(ServerError::Timeout { after: timeout, log: self.log.clone(), tail: log_tail(&self.log) });
            }
            let signal = tokio::select! {
                _ = tokio::time::sleep(POLL) => continue,
                _ = int.recv() => "SIGINT",
                _ = term.recv() => "SIGTERM",
                _ = hup.recv() => "SIGHUP",
            };
            self.stop().await;
            return Err(ServerError::Interrupted { signal });
        }
    }

    fn try_exited(&mut self) -> Option<ExitStatus> {
        self.child.as_mut()?.try_wait().ok().flatten()
    }

    /// SIGTERM to the whole group, up to 10 s for it to end, then SIGKILL; then waits until the
    /// port no longer takes connections. Stopping twice does nothing the second time.
    pub async fn stop(&mut self) {
        let Some(mut child) = self.child.take() else { return };
        signal_group(self.pgid, "TERM");
        let deadline = Instant::now() + GRACE;
        let mut killed = false;
        loop {
            let leader_gone = child.try_wait().ok().flatten().is_some();
            if leader_gone && !group_alive(self.pgid) {
                break;
            }
            if !killed && Instant::now() >= deadline {
                eprintln!("warning: the server did not stop within {} s of SIGTERM: sending SIGKILL", GRACE.as_secs());
                signal_group(self.pgid, "KILL");
                killed = true;
            }
            // a process stuck in the kernel outlives even SIGKILL: say so rather than wait forever
            if killed && Instant::now() >= deadline + Duration::from_secs(5) {
                eprintln!("warning: process group {} of the server is still there after SIGKILL", self.pgid);
                break;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        *RUNNING.lock().unwrap_or_else(|e| e.into_inner()) = None;
        let deadline = Instant::now() + Duration::from_secs(5);
        while port_open(self.port) && Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}

/// Copies the server's output into its log line by line, each line scrubbed of every secret
/// speedmatrix knows and of credentials by their shape. A thread per stream: it ends when the
/// server's end of the pipe closes.
fn scrub_into(from: impl Read + Send + 'static, log: std::sync::Arc<Mutex<File>>) {
    use std::io::{BufRead, BufReader, Write};
    std::thread::spawn(move || {
        let mut reader = BufReader::new(from);
        let mut line = Vec::new();
        while reader.read_until(b'\n', &mut line).is_ok_and(|n| n > 0) {
            let text = String::from_utf8_lossy(&line);
            let clean = sm_core::secrets::scrub(&text);
            let mut file = log.lock().unwrap_or_else(|e| e.into_inner());
            let _ = file.write_all(clean.as_bytes()).and_then(|()| file.flush());
            line.clear();
        }
    });
}

impl Drop for ServerChild {
    /// The last resort on a way out that skipped [`ServerChild::stop`]: SIGKILL to the group, and
    /// the leader reaped.
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            signal_group(self.pgid, "KILL");
            let _ = child.wait();
            *RUNNING.lock().unwrap_or_else(|e| e.into_inner()) = None;
        }
    }
}

/// SIGKILL to the running server's group, if any: for a way out of the process that runs no
/// destructors (a second signal).
pub fn kill_registered() {
    if let Some(pgid) = RUNNING.lock().unwrap_or_else(|e| e.into_inner()).take() {
        signal_group(pgid, "KILL");
    }
}

/// `kill -SIG -- -PGID`; libc is not a dependency of this crate, `kill` is on every system.
fn signal_group(pgid: u32, sig: &str) -> bool {
    Command::new("kill")
        .args([format!("-{sig}"), "--".into(), format!("-{pgid}")])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// Whether any process of the group is left (a zombie leader not yet reaped counts).
fn group_alive(pgid: u32) -> bool {
    signal_group(pgid, "0")
}

fn port_open(port: u16) -> bool {
    TcpStream::connect_timeout(&SocketAddr::from((Ipv4Addr::LOCALHOST, port)), Duration::from_millis(200)).is_ok()
}

async fn ready(client: &reqwest::Client, url: &str, api_key: Option<&str>) -> bool {
    let get = |path: &str| {
        let r = client.get(format!("{url}{path}"));
        match api_key {
            Some(k) => r.bearer_auth(k),
            None => r,
        }
    };
    let health = match get("/health").send().await {
        Ok(r) => r.status(),
        Err(_) => return false,
    };
    // 404: a server without /health, which /v1/models alone must answer for
    if !(health.is_success() || health == reqwest::StatusCode::NOT_FOUND) {
        return false;
    }
    let Ok(models) = get("/v1/models").send().await else { return false };
    if !models.status().is_success() {
        return false;
    }
    let Ok(body) = models.json::<serde_json::Value>().await else { return false };
    body["data"].as_array().is_some_and(|d| !d.is_empty())
}

/// The last lines of the log (at most its last 64 KiB are read), indented; or a note that it is empty.
pub fn log_tail(log: &Path) -> String {
    let mut text = String::new();
    if let Ok(mut f) = File::open(log) {
        let len = f.metadata().map(|m| m.len()).unwrap_or(0);
        let _ = f.seek(SeekFrom::Start(len.saturating_sub(64 * 1024)));
        let mut bytes = Vec::new();
        let _ = f.read_to_end(&mut bytes);
        text = String::from_utf8_lossy(&bytes).into_owned();
    }
    let lines: Vec<&str> = text.lines().collect();
    if lines.is_empty() {
        return "  (the log is empty)".into();
    }
    lines[lines.len().saturating_sub(LOG_TAIL_LINES)..].iter().map(|l| format!("  {l}")).collect::<Vec<_>>().join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_command_without_the_port_is_refused_with_what_to_add() {
        let e = substitute("vllm serve m", 8000).unwrap_err().to_string();
        assert!(e.contains("must contain {port}"), "{e}");
        assert_eq!(substitute("x --port {port}", 8123).unwrap(), "x --port 8123");
    }

    #[test]
    fn the_tail_keeps_the_last_twenty_lines() {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("server.log");
        std::fs::write(&log, (1..=30).map(|i| format!("line {i}\n")).collect::<String>()).unwrap();
        let tail = log_tail(&log);
        assert!(tail.starts_with("  line 11\n") && tail.ends_with("line 30"), "{tail}");
        std::fs::write(&log, "").unwrap();
        assert_eq!(log_tail(&log), "  (the log is empty)");
    }
}
