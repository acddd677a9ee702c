//! The dashboard when its terminal goes away for real: the pseudo-terminal is closed (what killing
//! a tmux session or dropping an SSH connection does), with the kernel's SIGHUP, after a SIGHUP, or
//! with no SIGHUP at all (a process outside the terminal's session). Each time the run must stop
//! by itself, mark run.json `interrupted`, write the reports, remove run.lock and exit 129: it used
//! to spin on the closed terminal for ever, keeping the lock. Also: a failed hidden warm-up must
//! not leave the dashboard in its warm-up state.

use std::fs::File;
use std::io::Read;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::common::{SimSpec, sim};

const ROWS: u16 = 24;
const COLS: u16 = 80;
/// Generous: the machine running the tests may be busy building other crates.
const STARTUP_LIMIT: Duration = Duration::from_secs(180);
/// Not a speed check (the stop path takes a second or two): a hung run never ends at all.
const EXIT_LIMIT: Duration = Duration::from_secs(60);

/// How the process meets its terminal.
#[derive(Clone, Copy, PartialEq)]
enum Session {
    /// The terminal is its controlling terminal: closing it sends SIGHUP, as in tmux or SSH.
    Controlling,
    /// Its own session, the terminal only on stdin/stdout/stderr: closing it sends no signal.
    Detached,
}

/// `speedmatrix run` on a pseudo-terminal this test opened, so that the test can close it.
struct Pty {
    master: Option<OwnedFd>,
    child: Child,
    output: Arc<Mutex<Vec<u8>>>,
    stop_reading: Arc<AtomicBool>,
    reader: Option<std::thread::JoinHandle<()>>,
}

impl Pty {
    fn spawn(args: &[String], cwd: &Path, session: Session) -> Pty {
        let (master, slave) = openpty();
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_speedmatrix"));
        cmd.arg("run").args(args).current_dir(cwd).env("TERM", "xterm-256color").env_remove("OPENAI_API_KEY");
        let slave = File::from(slave);
        cmd.stdin(Stdio::from(slave.try_clone().unwrap()));
        cmd.stdout(Stdio::from(slave.try_clone().unwrap()));
        cmd.stderr(Stdio::from(slave));
        let controlling = session == Session::Controlling;
        // SAFETY: only async-signal-safe calls between fork and exec.
        unsafe {
            cmd.pre_exec(move || {
                if libc::setsid() < 0 {
                    return Err(std::io::Error::last_os_error());
                }
                if controlling && libc::ioctl(0, libc::TIOCSCTTY, 0) < 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
        let child = cmd.spawn().expect("speedmatrix starts");
        // the child holds the terminal side alone now
        drop(cmd);
        let output = Arc::new(Mutex::new(Vec::new()));
        let stop_reading = Arc::new(AtomicBool::new(false));
        let reader = {
            let (fd, output, stop) = (master.try_clone().unwrap(), output.clone(), stop_reading.clone());
            std::thread::spawn(move || read_until_stopped(fd, &output, &stop))
        };
        Pty { master: Some(master), child, output, stop_reading, reader: Some(reader) }
    }

    /// The screen as a person would see it now.
    fn screen(&self) -> String {
        let mut parser = vt100::Parser::new(ROWS, COLS, 0);
        parser.process(&self.output.lock().unwrap());
        parser.screen().contents()
    }

    fn wait_for(&self, what: &str, ok: impl Fn(&str) -> bool) -> String {
        let deadline = Instant::now() + STARTUP_LIMIT;
        loop {
            let screen = self.screen();
            if ok(&screen) {
                return screen;
            }
            assert!(Instant::now() < deadline, "no {what} on the screen after {STARTUP_LIMIT:?}:\n{screen}");
            std::thread::sleep(Duration::from_millis(200));
        }
    }

    fn signal(&self, signal: libc::c_int) {
        let pid = self.child.id() as libc::pid_t;
        assert_eq!(unsafe { libc::kill(pid, signal) }, 0, "kill({pid}, {signal})");
    }

    /// Closes every descriptor of the terminal's master side: the terminal is gone.
    fn close(&mut self) {
        self.stop_reading.store(true, Ordering::SeqCst);
        self.reader.take().unwrap().join().unwrap();
        self.master.take();
    }

    /// The exit code, once the process ended by itself.
    fn wait_exit(&mut self, after: &str) -> i32 {
        let deadline = Instant::now() + EXIT_LIMIT;
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                return status.code().unwrap_or_else(|| panic!("ended by a signal after {after}: {status}"));
            }
            if Instant::now() > deadline {
                let _ = self.child.kill();
                panic!("the run was still going {EXIT_LIMIT:?} after {after} (the terminal is gone)");
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

impl Drop for Pty {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        self.stop_reading.store(true, Ordering::SeqCst);
    }
}

fn openpty() -> (OwnedFd, OwnedFd) {
    let (mut master, mut slave) = (0, 0);
    let size = libc::winsize { ws_row: ROWS, ws_col: COLS, ws_xpixel: 0, ws_ypixel: 0 };
    // SAFETY: openpty writes two new descriptors, which are owned from here on.
    let rc = unsafe { libc::openpty(&mut master, &mut slave, std::ptr::null_mut(), std::ptr::null(), &size) };
    assert_eq!(rc, 0, "openpty: {}", std::io::Error::last_os_error());
    for fd in [master, slave] {
        // a child spawned meanwhile by another test must not keep this terminal open
        assert_eq!(unsafe { libc::fcntl(fd, libc::F_SETFD, libc::FD_CLOEXEC) }, 0);
    }
    unsafe { (OwnedFd::from_raw_fd(master), OwnedFd::from_raw_fd(slave)) }
}

/// Appends what the program writes, until told to stop (a blocking read would hold the terminal
/// open) or the terminal side is closed.
fn read_until_stopped(fd: OwnedFd, output: &Mutex<Vec<u8>>, stop: &AtomicBool) {
    let mut file = File::from(fd);
    let mut buf = [0u8; 8192];
    while !stop.load(Ordering::SeqCst) {
        let mut pfd = libc::pollfd { fd: file.as_raw_fd(), events: libc::POLLIN, revents: 0 };
        if unsafe { libc::poll(&mut pfd, 1, 100) } <= 0 {
            continue;
        }
        match file.read(&mut buf) {
            Ok(n) if n > 0 => output.lock().unwrap().extend_from_slice(&buf[..n]),
            _ => return,
        }
    }
}

fn args(out: &Path, url: Option<&str>, matrix: &[&str]) -> Vec<String> {
    let mut all: Vec<String> = match url {
        Some(url) => vec!["--url".into(), url.into()],
        None => vec!["--sim-profile".into(), "tiny".into()],
    };
    all.extend(matrix.iter().map(|s| s.to_string()));
    all.extend(
        ["--ready-stable", "300ms", "--no-prefill-at-max", "--max-tokens", "512", "--progress", "dashboard"]
            .map(String::from),
    );
    all.extend(["--out".to_string(), out.display().to_string()]);
    all
}

/// What the run left: interrupted with its finished cells, the reports, and no lock file.
fn assert_stopped_with_complete_files(out: &Path, code: i32, after: &str) {
    assert_eq!(code, 129, "a run whose terminal went away exits as for SIGHUP ({after})");
    let record: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("run.json")).unwrap()).unwrap();
    assert_eq!(record["status"], "interrupted", "{after}: {record}");
    let cells = record["decode"].as_array().unwrap();
    assert!(!cells.is_empty() && cells.iter().all(|c| c["status"] == "valid"), "{after}: {record}");
    for file in ["report.html", "report.md", "measurements.csv"] {
        let text = std::fs::read_to_string(out.join(file)).unwrap_or_else(|e| panic!("{file} after {after}: {e}"));
        assert!(text.contains("1K"), "{file} has no finished cell after {after}");
    }
    assert!(!out.join("run.lock").exists(), "run.lock left behind after {after}");
}

/// Starts a four-cell run, waits for its first finished cell, then takes the terminal away.
fn hang_up(session: Session, sighup_first: bool) {
    let dir = tempfile::tempdir().unwrap();
    let out: PathBuf = dir.path().join("run");
    let matrix = ["--contexts", "1k", "--concurrency", "1,2,4,8", "--duration", "2s", "--warmup", "0s"];
    let mut pty = Pty::spawn(&args(&out, None, &matrix), dir.path(), session);
    pty.wait_for("finished cell", |s| s.contains("cells 1/4"));
    if sighup_first {
        pty.signal(libc::SIGHUP);
    }
    pty.close();
    let after = format!("closing the terminal ({})", if sighup_first { "after a SIGHUP" } else { "alone" });
    let code = pty.wait_exit(&after);
    assert_stopped_with_complete_files(&out, code, &after);
}

#[test]
fn closing_the_terminal_stops_the_run_and_writes_every_file() {
    hang_up(Session::Controlling, false);
}

#[test]
fn closing_the_terminal_after_sighup_still_lets_the_run_finish() {
    hang_up(Session::Controlling, true);
}

#[test]
fn a_terminal_gone_without_any_signal_stops_the_run_too() {
    hang_up(Session::Detached, false);
}

/// The hidden warm-up cell (1K × 1) fails on every request; the dashboard must then show the
/// measured cells as measured ones, not as "Decode warm-up (not measured)".
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_warm_up_does_not_leave_the_dashboard_in_the_warm_up() {
    let sim = sim(SimSpec { faults: &["status=500@prompt= w0000001024]"], ..SimSpec::default() }).await;
    let url = sim.handle.url();
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run");
    let matrix = ["--contexts", "1k", "--concurrency", "1,2", "--duration", "3s", "--warmup", "1s"];
    let all = args(&out, Some(url.as_str()), &matrix);
    let cwd = dir.path().to_path_buf();
    let (screen, code, record) = tokio::task::spawn_blocking(move || {
        let mut pty = Pty::spawn(&all, &cwd, Session::Controlling);
        // the second measured cell: the warm-up has ended long before
        let screen = pty.wait_for("the second cell", |s| s.contains("Measuring 1K × 2"));
        let code = pty.wait_exit("the run");
        let record = std::fs::read_to_string(out.join("run.json")).unwrap();
        (screen, code, record)
    })
    .await
    .unwrap();
    sim.handle.shutdown().await;
    let step = screen.lines().find(|l| l.contains("Measuring 1K × 2")).unwrap();
    assert!(!step.contains("warm-up"), "a measured cell is shown as the warm-up:\n{screen}");
    assert!(record.contains("the decode warm-up failed"), "the warm-up did not fail: {record}");
    assert_eq!(code, 0, "{record}");
}
