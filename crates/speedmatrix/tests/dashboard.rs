//! The live dashboard in a real pseudo-terminal: the binary runs a short matrix
//! against the built-in simulated engine, the screen (rebuilt by a terminal
//! emulator from the bytes the program wrote) shows the matrix and the progress,
//! `q` ends the run after the current cell with complete files, and the terminal
//! is handed back as it was.

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

#[test]
fn dashboard_shows_the_run_and_q_ends_it_with_complete_files_and_a_restored_terminal() {
    let dir = tempfile::tempdir().unwrap();
    let out_dir = dir.path().join("run");
    let pty = native_pty_system()
        .openpty(PtySize { rows: ROWS, cols: COLS, pixel_width: 0, pixel_height: 0 })
        .expect("a pseudo-terminal");
    let mut cmd = CommandBuilder::new(env!("CARGO_BIN_EXE_speedmatrix"));
    cmd.args(["run", "--sim-profile", "tiny", "--contexts", "1k,2k", "--concurrency", "1,2"]);
    cmd.args(["--duration", "2s", "--ready-stable", "300ms", "--warmup", "0s", "--progress", "dashboard"]);
    cmd.arg("--out");
    cmd.arg(&out_dir);
    cmd.env("TERM", "xterm-256color");
    cmd.cwd(dir.path());
    let mut child = pty.slave.spawn_command(cmd).expect("speedmatrix starts");
    // only the child holds the terminal side now, so reads end when it exits
    drop(pty.slave);
    let output = Output::default();
    let mut reader = pty.master.try_clone_reader().unwrap();
    let reader_thread = {
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
    let mut keys = pty.master.take_writer().unwrap();

    // a measured cell has landed in the matrix and the footer counts it
    let screen = output.wait_for("finished cell", STARTUP_LIMIT, |s| {
        s.contains("Decode matrix") && s.contains("cells 1/4") && s.contains("ETA")
    });
    assert!(screen.contains("tiny") && screen.contains("4 planned"), "{screen}");
    let row_1k = screen.lines().find(|l| l.contains(" 1K ")).unwrap_or_else(|| panic!("no 1K row:\n{screen}"));
    assert!(row_1k.chars().any(|c| c.is_ascii_digit()), "the 1K row has no figure:\n{screen}");
    assert!(screen.contains("q finish after this cell"), "{screen}");

    keys.write_all(b"q").unwrap();
    keys.flush().unwrap();
    let deadline = Instant::now() + EXIT_LIMIT;
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("the run did not stop within {EXIT_LIMIT:?} of q:\n{}", output.screen());
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    // the terminal settings are kept by the pty while this side is open: raw mode must be off
    let fd = pty.master.as_raw_fd().expect("a unix pty");
    let mut termios = std::mem::MaybeUninit::<libc::termios>::uninit();
    assert_eq!(unsafe { libc::tcgetattr(fd, termios.as_mut_ptr()) }, 0);
    let lflag = unsafe { termios.assume_init() }.c_lflag;
    assert!(lflag & libc::ICANON != 0 && lflag & libc::ECHO != 0, "the terminal was left in raw mode");
    drop(keys);
    drop(pty.master);
    reader_thread.join().unwrap();

    let bytes = output.bytes();
    let text = String::from_utf8_lossy(&bytes);
    assert_eq!(status.exit_code(), 130, "an interrupted run exits 130:\n{text}");
    let entered = find_last(&bytes, b"\x1b[?1049h").expect("the dashboard used the alternate screen");
    let left = find_last(&bytes, b"\x1b[?1049l").expect("the alternate screen was left");
    assert!(left > entered, "the alternate screen was entered again after leaving it");
    let shown = find_last(&bytes, b"\x1b[?25h").expect("the cursor was shown again");
    assert!(find_last(&bytes, b"\x1b[?25l").is_none_or(|hidden| shown > hidden), "the cursor was left hidden");
    // what follows the dashboard is the ordinary summary on the ordinary screen
    let after = String::from_utf8_lossy(&bytes[left..]);
    assert!(after.contains("Sustained decode") && after.contains("results:"), "{after}");

    let record: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out_dir.join("run.json")).unwrap()).unwrap();
    assert_eq!(record["status"], "interrupted");
    assert!(record["finished"].is_string());
    let cells = record["decode"].as_array().unwrap();
    // q lets the cell in progress finish, so every cell written is whole
    assert!((1..4).contains(&cells.len()), "{} cells after q", cells.len());
    for cell in cells {
        assert_eq!(cell["status"], "valid", "{cell}");
        assert!(cell["total_tok_s"].as_f64().unwrap() > 0.0, "{cell}");
    }
}
