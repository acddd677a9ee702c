//! SIGINT, SIGTERM and SIGHUP during `speedmatrix run`. The first one stops the run the way Ctrl-C
//! does: the cell in progress is dropped, finished cells are kept and every file is written. SIGTERM
//! is what `kill`, systemd and container runtimes send, SIGHUP what a dropped SSH session sends; both
//! used to end the process with run.json still saying `running` and no report. A second signal ends
//! the process at once, after giving the terminal back.

use std::io::Write;
use std::sync::{Arc, OnceLock};

use sm_bench::ControlHandle;
use tokio::signal::unix::{SignalKind, signal};
use tokio::task::JoinHandle;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Signal {
    Int,
    Term,
    Hup,
}

impl Signal {
    pub fn name(self) -> &'static str {
        match self {
            Signal::Int => "SIGINT",
            Signal::Term => "SIGTERM",
            Signal::Hup => "SIGHUP",
        }
    }

    /// 128 + the signal number: what a shell reports for a process the signal ended (130, 143, 129).
    pub fn exit_code(self) -> u8 {
        let number = match self {
            Signal::Int => 2,
            Signal::Term => 15,
            Signal::Hup => 1,
        };
        128 + number
    }

    /// What the run says when the first signal arrives.
    pub fn notice(self) -> String {
        let why = match self {
            Signal::Int => "interrupted",
            Signal::Term => "asked to terminate",
            Signal::Hup => "the terminal hung up",
        };
        format!(
            "{} ({why}): stopping the current cell and writing what was measured (a second signal aborts at once)",
            self.name()
        )
    }
}

/// Listens for the signals while it lives. Handlers stay installed after it is dropped (tokio keeps
/// them), so a signal then is ignored rather than killing the process half-way through the files.
pub struct Signals {
    first: Arc<OnceLock<Signal>>,
    task: JoinHandle<()>,
}

impl Signals {
    /// `notify` tells the user about the first signal, wherever the display puts such lines.
    pub fn watch(handle: ControlHandle, notify: impl Fn(&str) + Send + 'static) -> std::io::Result<Signals> {
        let mut int = signal(SignalKind::interrupt())?;
        let mut term = signal(SignalKind::terminate())?;
        let mut hup = signal(SignalKind::hangup())?;
        let first = Arc::new(OnceLock::new());
        let seen = first.clone();
        let task = tokio::spawn(async move {
            loop {
                // biased: two different signals sent back to back are taken in the order sent
                let got = tokio::select! {
                    biased;
                    Some(()) = int.recv() => Signal::Int,
                    Some(()) = term.recv() => Signal::Term,
                    Some(()) = hup.recv() => Signal::Hup,
                    else => return,
                };
                if seen.set(got).is_ok() {
                    notify(&got.notice());
                    handle.stop_now();
                } else {
                    abort(got);
                }
            }
        });
        Ok(Signals { first, task })
    }

    /// The first signal received, if any.
    pub fn first(&self) -> Option<Signal> {
        self.first.get().copied()
    }
}

impl Drop for Signals {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// The second signal: no more waiting for the files. The terminal is given back first, or the shell
/// would be left in raw mode on the dashboard's screen with no cursor.
fn abort(signal: Signal) -> ! {
    sm_tui::restore_terminal();
    // the terminal may be gone (SIGHUP): a failed write must not turn into a panic now
    let _ = writeln!(
        std::io::stderr(),
        "aborted by a second signal ({}): the files hold what was written before the first",
        signal.name()
    );
    std::process::exit(i32::from(signal.exit_code()));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exit_codes_follow_the_shell_convention() {
        assert_eq!([Signal::Int, Signal::Term, Signal::Hup].map(Signal::exit_code), [130, 143, 129]);
    }

    #[test]
    fn the_notice_names_the_signal_and_what_happens_next() {
        let text = Signal::Hup.notice();
        assert!(text.starts_with("SIGHUP (the terminal hung up): stopping"), "{text}");
        assert!(text.contains("second signal aborts"), "{text}");
    }
}
