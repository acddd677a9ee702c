//! The live dashboard of `speedmatrix run`: what is being measured now, the
//! matrix filling in, the server's queue, the event log and how long is left.
//!
//! The runner calls the [`Reporter`] methods from its async tasks, so they only
//! store what they were told; a render thread draws about ten times a second and
//! reads the keys (`q` finish after this cell, `s` skip it, Ctrl-C stop now).
//! Dropping the [`Dashboard`] stops that thread and gives the terminal back; a
//! terminal that goes away ends the thread by itself (see [`Dashboard::start`]).

mod input;
mod matrix;
#[cfg(test)]
mod render_tests;
mod state;
mod term;
#[cfg(test)]
mod testdata;
mod view;

use std::io::{ErrorKind, Write, stdout};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use ratatui::Terminal;
use ratatui::backend::CrosstermBackend;
use sm_core::record::{DecodeCell, PrefillRow, RunRecord};
use sm_progress::{ControlHandle, LiveSample, Reporter, RunEvent, Step};

use input::{Input, Key, Wait};
pub use state::{Notice, State};
/// Gives the terminal back now: raw mode off, cursor shown, alternate screen left. Does nothing when
/// the dashboard does not hold the terminal. For ways out that end the process without dropping the
/// [`Dashboard`] (`std::process::exit` on a second signal).
pub use term::restore as restore_terminal;
pub use view::draw;

/// Time between frames; input is read while waiting for the next one.
const FRAME: Duration = Duration::from_millis(100);
/// The screen is redrawn from scratch this often, erasing anything another
/// part of the program wrote to the terminal (a warning on stderr).
const FULL_REDRAW: Duration = Duration::from_secs(10);

#[derive(Debug, thiserror::Error)]
pub enum TuiError {
    #[error("cannot take over the terminal for the dashboard: {0}")]
    Terminal(#[from] std::io::Error),
}

pub struct Dashboard {
    state: Arc<Mutex<State>>,
    stop: Arc<AtomicBool>,
    thread: Mutex<Option<JoinHandle<()>>>,
}

/// Called once, from the drawing thread, when the terminal is gone, with what went wrong.
type OnLost = Box<dyn Fn(&str) + Send>;

impl Dashboard {
    /// Takes over the terminal and starts drawing. `handle` is how the keys steer the run.
    ///
    /// When the terminal goes away (the pty closed, its input ended, a read or a write failed) the
    /// dashboard stops drawing, gives the terminal back and calls `on_lost` with the reason: nobody
    /// can see the run or steer it any more, so the caller should stop it as for SIGHUP.
    ///
    /// A second Ctrl-C exits the process at once, without destructors: `before_abort` is called
    /// first, to remove what only a destructor would (the run directory's lock file).
    pub fn start(
        handle: ControlHandle,
        on_lost: impl Fn(&str) + Send + 'static,
        before_abort: fn(),
    ) -> Result<Dashboard, TuiError> {
        term::enter()?;
        let terminal = match Terminal::new(CrosstermBackend::new(stdout())) {
            Ok(t) => t,
            Err(e) => {
                term::restore();
                return Err(e.into());
            }
        };
        let state = Arc::new(Mutex::new(State::new(Instant::now())));
        let stop = Arc::new(AtomicBool::new(false));
        let thread = {
            let (state, stop) = (state.clone(), stop.clone());
            let on_lost: OnLost = Box::new(on_lost);
            std::thread::Builder::new()
                .name("sm-dashboard".into())
                .spawn(move || render_loop(terminal, &state, &stop, (&handle, before_abort), &on_lost))
        };
        let thread = match thread {
            Ok(t) => t,
            Err(e) => {
                term::restore();
                return Err(e.into());
            }
        };
        Ok(Dashboard { state, stop, thread: Mutex::new(Some(thread)) })
    }

    fn state(&self) -> MutexGuard<'_, State> {
        lock(&self.state)
    }
}

fn lock(state: &Mutex<State>) -> MutexGuard<'_, State> {
    // a panic elsewhere must not take the display down with it
    state.lock().unwrap_or_else(|p| p.into_inner())
}

impl Drop for Dashboard {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        let thread = self.thread.lock().unwrap_or_else(|p| p.into_inner()).take();
        if let Some(t) = thread {
            let _ = t.join();
        }
        term::restore();
    }
}

impl Reporter for Dashboard {
    fn start(&self, record: &RunRecord) {
        self.state().start(record);
    }
    fn step(&self, step: &Step) {
        self.state().step(step, Instant::now());
    }
    fn live(&self, sample: &LiveSample) {
        self.state().live(sample);
    }
    fn event(&self, event: &RunEvent) {
        self.state().event(event, Instant::now());
    }
    fn prefill_done(&self, row: &PrefillRow) {
        self.state().prefill_done(row, Instant::now());
    }
    fn cell_done(&self, cell: &DecodeCell) {
        self.state().cell_done(cell, Instant::now());
    }
    fn finish(&self, record: &RunRecord) {
        self.state().finish(record);
    }
}

type Term = Terminal<CrosstermBackend<std::io::Stdout>>;

/// The run's steering and what to do before aborting on a second Ctrl-C.
type Steer<'a> = (&'a ControlHandle, fn());

fn render_loop(mut terminal: Term, state: &Mutex<State>, stop: &AtomicBool, steer: Steer<'_>, on_lost: &OnLost) {
    let mut input = Input::open();
    let mut last_full = Instant::now();
    let mut interrupts = 0;
    // a panic anywhere gives the terminal back; drawing on after it would scribble on the shell
    let gone = loop {
        if stop.load(Ordering::SeqCst) || !term::active() {
            break None;
        }
        // draw from a copy, so the runner never waits for the terminal
        let snapshot = lock(state).clone();
        let now = Instant::now();
        let mut drawn = Ok(());
        if now.duration_since(last_full) >= FULL_REDRAW {
            drawn = terminal.clear();
            last_full = now;
        }
        if drawn.is_ok() {
            drawn = terminal.draw(|f| view::draw(f, &snapshot, now)).map(|_| ());
        }
        if let Err(e) = drawn
            && !matches!(e.kind(), ErrorKind::Interrupted | ErrorKind::WouldBlock)
        {
            break Some(format!("cannot draw on the terminal: {e}"));
        }
        let (keys, lost) = match input.wait(now + FRAME) {
            Wait::Keys(keys) => (keys, None),
            Wait::Gone(keys, why) => (keys, Some(why)),
        };
        for key in keys {
            on_key(key, state, steer, &mut interrupts);
        }
        if lost.is_some() {
            break lost;
        }
    };
    match gone {
        // the terminal's own drop shows the cursor; restore() then leaves the screen
        None => drop(terminal),
        Some(why) => {
            // its drop would report the failed write with eprintln!, which panics on a dead terminal
            std::mem::forget(terminal);
            term::restore();
            on_lost(&why);
        }
    }
}

fn on_key(key: Key, state: &Mutex<State>, (handle, before_abort): Steer<'_>, interrupts: &mut u32) {
    let notice = match key {
        Key::Interrupt => {
            *interrupts += 1;
            if *interrupts > 1 {
                term::restore();
                // destructors do not run on this way out: the lock file goes now, while it is still held
                before_abort();
                let _ = writeln!(std::io::stderr(), "aborted: the files hold what was written before the first Ctrl-C");
                std::process::exit(130);
            }
            handle.stop_now();
            Notice::StopNow
        }
        Key::Finish => {
            handle.finish_after_cell();
            Notice::FinishAfterCell
        }
        Key::Skip => {
            handle.skip_cell();
            Notice::SkipCell
        }
    };
    lock(state).notice = Some(notice);
}

/// Columns of the terminal on stdout, when it is one.
pub fn terminal_width() -> Option<usize> {
    use std::io::IsTerminal;
    if !stdout().is_terminal() {
        return None;
    }
    ratatui::crossterm::terminal::size().ok().map(|(w, _)| usize::from(w))
}
