//! SIGINT, SIGTERM and SIGHUP during `speedmatrix run`. The first one stops the run the way Ctrl-C
//! does: the cell in progress is dropped, finished cells are kept and every file is written. SIGTERM
//! is what `kill`, systemd and container runtimes send, SIGHUP what a dropped SSH session sends; both
//! used to end the process with run.json still saying `running` and no report. A second signal ends
//! the process at once, after giving the terminal back; a repeated SIGHUP does not (see
//! [`Signal::insists`]). A dashboard whose terminal goes away stops the run as SIGHUP does.

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

    /// Whether this signal, coming after the run was already stopping, aborts it. SIGINT and SIGTERM
    /// are a person or a supervisor insisting. SIGHUP is not: a hang-up often arrives twice (from
    /// the kernel and from the shell that forwards it), or after the dashboard saw its terminal
    /// go, and nobody is waiting at a terminal that is gone, so the files are still written.
    fn insists(self) -> bool {
        self != Signal::Hup
    }

    /// What the run says when the first signal arrives.
    pub fn notice(self) -> String {
        let why = match self {
            Signal::Int => "interrupted",
            Signal::Term => "asked to terminate",
            Signal::Hup => "the terminal hung up",
        };
        format!(
            "{} ({why}): stopping the current cell and writing what was measured (a second Ctrl-C or SIGTERM aborts at once)",
            self.name()
        )
    }
}

/// Why the run was asked to stop, shared by the signal listener and the dashboard: the first
/// signal, or the terminal gone (which counts as SIGHUP, since that is what it is).
#[derive(Clone)]
pub struct Stop {
    first: Arc<OnceLock<Signal>>,
    handle: ControlHandle,
}

impl Stop {
    pub fn new(handle: ControlHandle) -> Stop {
        Stop { first: Arc::new(OnceLock::new()), handle }
    }

    /// Stops the run for `signal`; false when it was already stopping (then `signal` is a second one).
    fn request(&self, signal: Signal) -> bool {
        let first = self.first.set(signal).is_ok();
        self.handle.stop_now();
        first
    }

    /// The dashboard lost its terminal (pty closed, input ended, a write failed): stop as for
    /// SIGHUP, which may follow or may have come already. There is no one to tell.
    pub fn terminal_lost(&self, why: &str) {
        if self.request(Signal::Hup) {
            tracing::warn!("{why}: stopping the current cell and writing what was measured");
        }
    }

    /// What stopped the run, if anything did.
    pub fn first(&self) -> Option<Signal> {
        self.first.get().copied()
    }
}

/// Listens for the signals while it lives. Handlers stay installed after it is dropped (tokio keeps
/// them), so a signal then is ignored rather than killing the process half-way through the files.
pub struct Signals {
    task: JoinHandle<()>,
}

impl Signals {
    /// `notify` tells the user about the first signal, wherever the display puts such lines.
    pub fn watch(stop: Stop, notify: impl Fn(&str) + Send + 'static) -> std::io::Result<Signals> {
        let mut int = signal(SignalKind::interrupt())?;
        let mut term = signal(SignalKind::terminate())?;
        let mut hup = signal(SignalKind::hangup())?;
        let task = tokio::spawn(async move {
            loop {
                // biased: a fixed order when several are pending; signals sent back to back may still be
                // seen in either order, since each can land on a different thread
                let got = tokio::select! {
                    biased;
                    Some(()) = int.recv() => Signal::Int,
                    Some(()) = term.recv() => Signal::Term,
                    Some(()) = hup.recv() => Signal::Hup,
                    else => return,
                };
                if stop.request(got) {
                    notify(&got.notice());
                } else if got.insists() {
                    abort(got);
                }
            }
        });
        Ok(Signals { task })
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
    // destructors do not run on this way out: the lock file goes now, while it is still held
    sm_bench::remove_held_locks();
    // nor does the server child's guard run: its group is killed here
    crate::server_child::kill_registered();
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
        assert!(text.contains("second Ctrl-C or SIGTERM aborts"), "{text}");
    }
}
