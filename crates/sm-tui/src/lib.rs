//! The live dashboard of `speedmatrix run`: what is being measured now, the
//! matrix filling in, the server's queue, the event log and how long is left.
//!
//! The runner calls the [`Reporter`] methods from its async tasks, so they only
//! store what they were told; a render thread draws about ten times a second and
//! reads the keys (`q` finish after this cell, `s` skip it, Ctrl-C stop now).
//! Dropping the [`Dashboard`] stops that thread and gives the terminal back.

mod matrix;
#[cfg(test)]
mod render_tests;
mod state;
mod term;
#[cfg(test)]
mod testdata;
mod view;

use std::io::stdout;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use ratatui::Terminal;
use ratatui::backend::CrosstermBackend;
use ratatui::crossterm::event::{self, Event, KeyCode, KeyEvent, KeyEventKind, KeyModifiers};
use sm_bench::{ControlHandle, LiveSample, Reporter, Step};
use sm_core::record::{DecodeCell, PrefillRow, RunRecord};

pub use state::State;
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

impl Dashboard {
    /// Takes over the terminal and starts drawing. `handle` is how the keys steer the run.
    pub fn start(handle: ControlHandle) -> Result<Dashboard, TuiError> {
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
            std::thread::Builder::new()
                .name("sm-dashboard".into())
                .spawn(move || render_loop(terminal, &state, &stop, &handle))
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
    fn event(&self, text: &str) {
        self.state().event(text, Instant::now());
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

fn render_loop(mut terminal: Term, state: &Mutex<State>, stop: &AtomicBool, handle: &ControlHandle) {
    let mut last_full = Instant::now();
    let mut interrupts = 0;
    // a panic anywhere gives the terminal back; drawing on after it would scribble on the shell
    while !stop.load(Ordering::SeqCst) && term::active() {
        // draw from a copy, so the runner never waits for the terminal
        let snapshot = lock(state).clone();
        let now = Instant::now();
        if now.duration_since(last_full) >= FULL_REDRAW {
            let _ = terminal.clear();
            last_full = now;
        }
        let _ = terminal.draw(|f| view::draw(f, &snapshot, now));
        let deadline = now + FRAME;
        loop {
            match event::poll(deadline.saturating_duration_since(Instant::now())) {
                Ok(true) => {}
                Ok(false) => break,
                Err(_) => {
                    // the terminal is gone (SIGHUP from a dropped SSH session): keep the frame rate, not a busy loop
                    std::thread::sleep(deadline.saturating_duration_since(Instant::now()));
                    break;
                }
            }
            match event::read() {
                Ok(Event::Key(key)) if key.kind != KeyEventKind::Release => {
                    on_key(key, state, handle, &mut interrupts);
                }
                Ok(Event::Resize(..)) => {
                    let _ = terminal.clear();
                }
                Ok(_) => {}
                Err(_) => {
                    std::thread::sleep(deadline.saturating_duration_since(Instant::now()));
                    break;
                }
            }
            if Instant::now() >= deadline {
                break;
            }
        }
    }
    // the terminal's own drop shows the cursor; restore() then leaves the screen
    drop(terminal);
}

fn on_key(key: KeyEvent, state: &Mutex<State>, handle: &ControlHandle, interrupts: &mut u32) {
    let notice = match key.code {
        // raw mode turns Ctrl-C into a key instead of SIGINT
        KeyCode::Char('c') if key.modifiers.contains(KeyModifiers::CONTROL) => {
            *interrupts += 1;
            if *interrupts > 1 {
                term::restore();
                eprintln!("aborted: the files hold what was written before the first Ctrl-C");
                std::process::exit(130);
            }
            handle.stop_now();
            "Ctrl-C: stopping now and writing what was measured (Ctrl-C again aborts at once)"
        }
        KeyCode::Char('q' | 'Q') => {
            handle.finish_after_cell();
            "q: finishing the current cell, then writing the files and stopping"
        }
        KeyCode::Char('s' | 'S') => {
            handle.skip_cell();
            "s: skipping the current cell"
        }
        _ => return,
    };
    lock(state).notice = Some(notice.to_string());
}

/// Columns of the terminal on stdout, when it is one.
pub fn terminal_width() -> Option<usize> {
    use std::io::IsTerminal;
    if !stdout().is_terminal() {
        return None;
    }
    ratatui::crossterm::terminal::size().ok().map(|(w, _)| usize::from(w))
}
