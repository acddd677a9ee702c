//! The live dashboard in a real pseudo-terminal: the binary runs a short matrix
//! against the built-in simulated engine, the screen (rebuilt by a terminal
//! emulator from the bytes the program wrote) shows the matrix and the progress,
//! `q` ends the run after the current cell with complete files, and the terminal
//! is handed back as it was, also when a second signal aborts the run; `s` skips a cell.

use std::io::{Read, Write};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use portable_pty::{CommandBuilder, PtySize, native_pty_system};

const ROWS: u16 = 24;
const COLS: u16 = 80;
/// Generous: the machine running the tests may be busy building other crates.
const STARTUP_LIMIT: Duration = Duration::from_secs(180);
const EXIT_LIMIT: Duration = Duration::from_secs(90);

/// Everything the program wrote, appended by a reader thread.
#[derive(Clone, Default)]
struct Output(Arc<Mutex<Vec<u8>>>);

impl Output {
    fn bytes(&self) -> Vec<u8> {
        self.0.lock().unwrap().clone()
    }

    /// The alternate (dashboard) screen as a person would see it now.
    fn screen(&self) -> String {
        let mut parser = vt100::Parser::new(ROWS, COLS, 0);
        parser.process(&self.bytes());
        parser.screen().contents()
    }

    fn wait_for(&self, what: &str, limit: Duration, ok: impl Fn(&str) -> bool) -> String {
        let deadline = Instant::now() + limit;
        loop {
            let screen = self.screen();
            if ok(&screen) {
                return screen;
            }
            assert!(Instant::now() < deadline, "no {what} on the screen after {limit:?}:\n{screen}");
            std::thread::sleep(Duration::from_millis(200));
        }
    }
}

fn find_last(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).rposition(|w| w == needle)
}

/// `speedmatrix run` with the dashboard in a pseudo-terminal, on the built-in simulated engine.
struct Session {
    child: Box<dyn portable_pty::Child + Send + Sync>,
    master: Box<dyn portable_pty::MasterPty + Send>,
    keys: Box<dyn Write + Send>,
    output: Output,
    reader: std::thread::JoinHandle<()>,
    out_dir: std::path::PathBuf,
    _dir: tempfile::TempDir,
}

impl Session {
    /// `matrix`: the flags that choose the cells and their windows.
    fn start(matrix: &[&str]) -> Session {
        let dir = tempfile::tempdir().unwrap();
        let out_dir = dir.path().join("run");
        let pty = native_pty_system()
            .openpty(PtySize { rows: ROWS, cols: COLS, pixel_width: 0, pixel_height: 0 })
            .expect("a pseudo-terminal");
        let mut cmd = CommandBuilder::new(env!("CARGO_BIN_EXE_speedmatrix"));
        cmd.args(["run", "--sim-profile", "tiny"]);
        cmd.args(matrix);
        cmd.args(["--ready-stable", "300ms", "--warmup", "0s", "--progress", "dashboard"]);
        cmd.arg("--out");
        cmd.arg(&out_dir);
        cmd.env("TERM", "xterm-256color");
        cmd.cwd(dir.path());
        let child = pty.slave.spawn_command(cmd).expect("speedmatrix starts");
        // only the child holds the terminal side now, so reads end when it exits
        drop(pty.slave);
        let output = Output::default();
        let mut reader = pty.master.try_clone_reader().unwrap();
        let reader = {
            let output = output.clone();
            std::thread::spawn(move || {
                let mut buf = [0u8; 8192];
                while let Ok(n) = reader.read(&mut buf) {
                    if n == 0 {
                        break;
                    }
                    output.0.lock().unwrap().extend_from_slice(&buf[..n]);
                }
            })
        };
        let keys = pty.master.take_writer().unwrap();
        Session { child, master: pty.master, keys, output, reader, out_dir, _dir: dir }
    }

    fn press(&mut self, key: &[u8]) {
        self.keys.write_all(key).unwrap();
        self.keys.flush().unwrap();
    }

    fn signal(&self, signal: libc::c_int) {
        let pid = self.child.process_id().expect("a running child") as libc::pid_t;
        assert_eq!(unsafe { libc::kill(pid, signal) }, 0, "kill({pid}, {signal})");
    }

    /// Waits for the program to end, checks that the terminal is no longer in raw mode, and returns
    /// the exit code and every byte it wrote.
    fn wait_exit(mut self, after: &str) -> (u32, Vec<u8>, std::path::PathBuf, tempfile::TempDir) {
        let deadline = Instant::now() + EXIT_LIMIT;
        let status = loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                break status;
            }
            if Instant::now() > deadline {
                let _ = self.child.kill();
                panic!("the run did not stop within {EXIT_LIMIT:?} of {after}:\n{}", self.output.screen());
            }
            std::thread::sleep(Duration::from_millis(100));
        };
        // the terminal settings are kept by the pty while this side is open: raw mode must be off
        let fd = self.master.as_raw_fd().expect("a unix pty");
        let mut termios = std::mem::MaybeUninit::<libc::termios>::uninit();
        assert_eq!(unsafe { libc::tcgetattr(fd, termios.as_mut_ptr()) }, 0);
        let lflag = unsafe { termios.assume_init() }.c_lflag;
        assert!(
            lflag & libc::ICANON != 0 && lflag & libc::ECHO != 0,
            "the terminal was left in raw mode after {after}"
        );
        drop(self.keys);
        drop(self.master);
        self.reader.join().unwrap();
        (status.exit_code(), self.output.bytes(), self.out_dir, self._dir)
    }
}

/// The alternate screen was left for good and the cursor shown; returns what came after the dashboard.
fn assert_screen_given_back(bytes: &[u8]) -> String {
    let entered = find_last(bytes, b"\x1b[?1049h").expect("the dashboard used the alternate screen");
    let left = find_last(bytes, b"\x1b[?1049l").expect("the alternate screen was left");
    assert!(left > entered, "the alternate screen was entered again after leaving it");
    let shown = find_last(bytes, b"\x1b[?25h").expect("the cursor was shown again");
    assert!(find_last(bytes, b"\x1b[?25l").is_none_or(|hidden| shown > hidden), "the cursor was left hidden");
    String::from_utf8_lossy(&bytes[left..]).into_owned()
}

/// Seconds into the window, from the gauge's "1.2 s of 4 s".
fn window_elapsed(screen: &str) -> Option<f64> {
    let head = &screen[..screen.find(" s of ")?];
    let start = head
        .rfind(|c: char| !(c.is_ascii_digit() || c == '.'))
        .map_or(0, |i| i + head[i..].chars().next().unwrap().len_utf8());
    head[start..].parse().ok()
}

fn record(out_dir: &std::path::Path) -> serde_json::Value {
    serde_json::from_str(&std::fs::read_to_string(out_dir.join("run.json")).unwrap()).unwrap()
}

#[test]
fn dashboard_shows_the_run_and_q_ends_it_with_complete_files_and_a_restored_terminal() {
    let mut session = Session::start(&["--contexts", "1k,2k", "--concurrency", "1,2", "--duration", "2s"]);

    // a measured cell has landed in the matrix and the footer counts it
    let screen = session.output.wait_for("finished cell", STARTUP_LIMIT, |s| {
        s.contains("Decode matrix") && s.contains("cells 1/4") && s.contains("ETA")
    });
    assert!(screen.contains("tiny") && screen.contains("4 planned"), "{screen}");
    let row_1k = screen.lines().find(|l| l.contains(" 1K ")).unwrap_or_else(|| panic!("no 1K row:\n{screen}"));
    assert!(row_1k.chars().any(|c| c.is_ascii_digit()), "the 1K row has no figure:\n{screen}");
    assert!(screen.contains("q finish after this cell"), "{screen}");

    session.press(b"q");
    let (code, bytes, out_dir, _dir) = session.wait_exit("q");
    let text = String::from_utf8_lossy(&bytes);
    assert_eq!(code, 130, "an interrupted run exits 130:\n{text}");
    // what follows the dashboard is the ordinary summary on the ordinary screen
    let after = assert_screen_given_back(&bytes);
    assert!(after.contains("Sustained decode") && after.contains("results:"), "{after}");

    let record = record(&out_dir);
    assert_eq!(record["status"], "interrupted");
    assert!(record["finished"].is_string());
    let cells = record["decode"].as_array().unwrap();
    // q lets the cell in progress finish, so every cell written is whole
    assert!((1..4).contains(&cells.len()), "{} cells after q", cells.len());
    for cell in cells {
        assert_eq!(cell["status"], "valid", "{cell}");
        assert!(cell["total_tok_s"].as_f64().unwrap() > 0.0, "{cell}");
    }
    for file in ["report.html", "report.md", "measurements.csv"] {
        let text = std::fs::read_to_string(out_dir.join(file)).unwrap_or_else(|e| panic!("{file} after q: {e}"));
        assert!(text.contains("1K"), "{file} has no finished cell:\n{text}");
    }
}

#[test]
fn s_skips_the_cell_being_measured_and_the_run_goes_on() {
    let mut session = Session::start(&["--contexts", "1k", "--concurrency", "1,2,4", "--duration", "4s"]);
    // early in the window of the second cell, so that the key cannot land after it
    session.output.wait_for("the second cell measuring", STARTUP_LIMIT, |s| {
        s.contains("Measuring 1K × 2") && window_elapsed(s).is_some_and(|t| t < 2.0)
    });
    session.press(b"s");
    let (code, bytes, out_dir, _dir) = session.wait_exit("s");
    assert_eq!(code, 0, "a run with a skipped cell is complete:\n{}", String::from_utf8_lossy(&bytes));
    assert_screen_given_back(&bytes);
    let record = record(&out_dir);
    assert_eq!(record["status"], "complete");
    let status = |c: u64| {
        let cells = record["decode"].as_array().unwrap();
        let cell = cells.iter().find(|x| x["concurrency"] == c).unwrap_or_else(|| panic!("no 1K × {c}: {record}"));
        cell["status"].as_str().unwrap().to_string()
    };
    assert_eq!(status(2), "skipped", "{record}");
    assert_eq!((status(1).as_str(), status(4).as_str()), ("valid", "valid"), "{record}");
}

#[test]
fn a_second_signal_aborts_at_once_and_still_gives_the_terminal_back() {
    let session = Session::start(&["--contexts", "1k", "--concurrency", "1,2,4,8", "--duration", "3s"]);
    session.output.wait_for("a finished cell", STARTUP_LIMIT, |s| s.contains("cells 1/4"));
    // two different signals, because two of the same sent together may arrive as one; the first
    // stops the run, the second must abort it before the files are written. Sent one after the
    // other, a busy machine could let the run write its files and end between the two kills, so
    // both are queued while the process is stopped and arrive together when it continues. Which of
    // the two the process takes first is not fixed (each may land on a different thread), so the
    // test holds the exit code to the signal the abort names.
    session.signal(libc::SIGSTOP);
    session.signal(libc::SIGINT);
    session.signal(libc::SIGTERM);
    session.signal(libc::SIGCONT);
    let (code, bytes, _, _dir) = session.wait_exit("two signals");
    let after = assert_screen_given_back(&bytes);
    let second = [("SIGINT", 130), ("SIGTERM", 143)]
        .into_iter()
        .find(|(name, _)| after.contains(&format!("aborted by a second signal ({name})")));
    let Some((name, expected)) = second else { panic!("no abort by a second signal:\n{after}") };
    assert_eq!(code, expected, "the second signal ({name}) ends the process:\n{after}");
    assert!(!after.contains("results:"), "the run was not aborted, it ended normally:\n{after}");
}
