//! Taking over the terminal and giving it back. Giving it back must happen on
//! every way out, panics included, or the user's shell is left in raw mode on
//! the alternate screen.

use std::io::{Write, stdout};
use std::sync::Once;
use std::sync::atomic::{AtomicBool, Ordering};

use ratatui::crossterm::cursor::{Hide, Show};
use ratatui::crossterm::execute;
use ratatui::crossterm::terminal::{EnterAlternateScreen, LeaveAlternateScreen, disable_raw_mode, enable_raw_mode};

/// Whether this process holds the terminal now; makes `restore` idempotent.
static ACTIVE: AtomicBool = AtomicBool::new(false);
static HOOK: Once = Once::new();

/// Raw mode, the alternate screen, no cursor.
pub fn enter() -> std::io::Result<()> {
    install_panic_hook();
    enable_raw_mode()?;
    ACTIVE.store(true, Ordering::SeqCst);
    if let Err(e) = execute!(stdout(), EnterAlternateScreen, Hide) {
        restore();
        return Err(e);
    }
    Ok(())
}

/// Whether the terminal is still held: false once a panic gave it back.
pub fn active() -> bool {
    ACTIVE.load(Ordering::SeqCst)
}

/// Gives the terminal back; does nothing when it is not held.
pub fn restore() {
    if ACTIVE.swap(false, Ordering::SeqCst) {
        let _ = disable_raw_mode();
        // leaving the alternate screen last, so it is the final thing the terminal sees
        let mut out = stdout();
        let _ = execute!(out, Show, LeaveAlternateScreen);
        let _ = out.flush();
    }
}

/// A panic while the terminal is held would print its message into the
/// alternate screen (lost when it closes) and leave raw mode on.
fn install_panic_hook() {
    HOOK.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            restore();
            previous(info);
        }));
    });
}
