//! The keys, read from the terminal without crossterm's event reader. That reader never returns
//! once its terminal is gone: a hung-up tty is always readable and every read answers 0 (end of
//! file) or EIO, and it loops on those reads for ever, at 100 % CPU, so the dashboard could not
//! stop and the run could not finish. Here a hang-up, end of file or a read error is an answer:
//! [`Wait::Gone`].

use std::fs::File;
use std::io;
use std::os::fd::{AsRawFd, RawFd};
use std::time::{Duration, Instant};

/// What the dashboard acts on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Key {
    /// `q`: finish the cell in progress, then stop.
    Finish,
    /// `s`: skip the cell in progress.
    Skip,
    /// Ctrl-C (raw mode turns it into a byte instead of SIGINT).
    Interrupt,
}

/// How waiting for keys ended.
#[derive(Debug, PartialEq, Eq)]
pub enum Wait {
    /// The deadline passed; these keys came meanwhile.
    Keys(Vec<Key>),
    /// The terminal is gone (hung up, end of file, or it cannot be read); the keys before that.
    Gone(Vec<Key>, String),
}

/// The terminal the keys come from: stdin when it is one, else the process's controlling terminal
/// (what crossterm put in raw mode), else none (the dashboard then has no keys).
pub struct Input {
    source: Option<Source>,
    parser: Parser,
}

enum Source {
    Stdin,
    Tty(File),
}

impl Source {
    fn fd(&self) -> RawFd {
        match self {
            Source::Stdin => 0,
            Source::Tty(f) => f.as_raw_fd(),
        }
    }
}

impl Input {
    pub fn open() -> Input {
        use std::io::IsTerminal;
        let source =
            if io::stdin().is_terminal() { Some(Source::Stdin) } else { File::open("/dev/tty").ok().map(Source::Tty) };
        Input { source, parser: Parser::default() }
    }

    /// Reads keys until `deadline`, or until the terminal is gone.
    pub fn wait(&mut self, deadline: Instant) -> Wait {
        let mut keys = Vec::new();
        let Some(source) = &self.source else {
            std::thread::sleep(deadline.saturating_duration_since(Instant::now()));
            return Wait::Keys(keys);
        };
        let fd = source.fd();
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match poll_readable(fd, left) {
                Ok(Ready::Timeout) => return Wait::Keys(keys),
                Ok(Ready::Readable) => {}
                Ok(Ready::HungUp) => return Wait::Gone(keys, "the terminal hung up".into()),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Wait::Gone(keys, format!("cannot wait for the terminal: {e}")),
            }
            let mut buf = [0u8; 256];
            match read(fd, &mut buf) {
                Ok(0) => return Wait::Gone(keys, "the terminal's input ended".into()),
                Ok(n) => keys.extend(self.parser.feed(&buf[..n])),
                Err(e) if matches!(e.kind(), io::ErrorKind::Interrupted | io::ErrorKind::WouldBlock) => {}
                Err(e) => return Wait::Gone(keys, format!("cannot read the terminal: {e}")),
            }
            if Instant::now() >= deadline {
                return Wait::Keys(keys);
            }
        }
    }
}

enum Ready {
    Timeout,
    Readable,
    HungUp,
}

fn poll_readable(fd: RawFd, timeout: Duration) -> io::Result<Ready> {
    let mut pfd = libc::pollfd { fd, events: libc::POLLIN, revents: 0 };
    // rounded up, so that a deadline 0.4 ms away does not turn into a busy loop of zero-wait polls
    let ms = timeout.as_micros().div_ceil(1000).min(i32::MAX as u128) as libc::c_int;
    // SAFETY: one pollfd that lives for the call.
    let n = unsafe { libc::poll(&mut pfd, 1, ms) };
    if n < 0 {
        return Err(io::Error::last_os_error());
    }
    if n == 0 {
        return Ok(Ready::Timeout);
    }
    // a hung-up tty also says POLLIN (its reads answer 0 at once): the hang-up decides
    if pfd.revents & (libc::POLLHUP | libc::POLLERR | libc::POLLNVAL) != 0 {
        return Ok(Ready::HungUp);
    }
    Ok(Ready::Readable)
}

fn read(fd: RawFd, buf: &mut [u8]) -> io::Result<usize> {
    // SAFETY: the buffer is valid for its length; the descriptor is open while `Input` lives.
    let n = unsafe { libc::read(fd, buf.as_mut_ptr().cast(), buf.len()) };
    if n < 0 { Err(io::Error::last_os_error()) } else { Ok(n as usize) }
}

/// Turns the bytes a terminal sends in raw mode into keys. Escape sequences (arrows, function keys)
/// are skipped whole, so that the final `s` or `q` of one is not taken for a key.
#[derive(Debug, Default)]
pub struct Parser {
    escape: Escape,
}

#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
enum Escape {
    #[default]
    None,
    /// After ESC.
    Start,
    /// Inside `ESC [ …` or `ESC ] …`: until the final byte.
    Sequence,
    /// After `ESC O` (SS3): one more byte.
    Single,
}

impl Parser {
    pub fn feed(&mut self, bytes: &[u8]) -> Vec<Key> {
        let mut keys = Vec::new();
        for &b in bytes {
            self.escape = match (self.escape, b) {
                (_, 0x1b) => Escape::Start,
                (Escape::Start, b'[' | b']') => Escape::Sequence,
                (Escape::Start, b'O') => Escape::Single,
                // ESC and one character: Alt plus a key, not a key of ours
                (Escape::Start | Escape::Single, _) => Escape::None,
                // CSI parameters and intermediates run up to a final byte in @..~; OSC ends with BEL
                (Escape::Sequence, 0x40..=0x7e | 0x07) => Escape::None,
                (Escape::Sequence, _) => Escape::Sequence,
                (Escape::None, _) => {
                    keys.extend(key(b));
                    Escape::None
                }
            };
        }
        keys
    }
}

fn key(b: u8) -> Option<Key> {
    match b {
        b'q' | b'Q' => Some(Key::Finish),
        b's' | b'S' => Some(Key::Skip),
        0x03 => Some(Key::Interrupt),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_and_ctrl_c_are_read_and_escape_sequences_are_skipped() {
        let mut p = Parser::default();
        assert_eq!(p.feed(b"xqS\x03"), [Key::Finish, Key::Skip, Key::Interrupt]);
        // arrow up, F4 (SS3 S), a CSI with parameters ending in `q`, Alt-s, then a real `s`
        assert_eq!(p.feed(b"\x1b[A\x1bOS\x1b[1 q\x1bss"), [Key::Skip]);
        // a sequence split across two reads is still skipped whole
        assert_eq!(p.feed(b"\x1b[1;5"), Vec::<Key>::new());
        assert_eq!(p.feed(b"Sq"), [Key::Finish]);
    }

    /// A pseudo-terminal whose other side closes: the wait must end with `Gone`, not spin.
    #[test]
    fn a_closed_terminal_ends_the_wait() {
        let (master, slave) = openpty();
        raw(&slave);
        let mut input = Input { source: Some(Source::Tty(slave)), parser: Parser::default() };
        // keys typed before the terminal went away are kept
        write(&master, b"s");
        let far = Instant::now() + Duration::from_secs(60);
        assert_eq!(input.wait(Instant::now() + Duration::from_millis(200)), Wait::Keys(vec![Key::Skip]));
        drop(master);
        assert!(matches!(input.wait(far), Wait::Gone(..)), "the wait did not notice the closed terminal");
        // and it stays gone: every later wait answers at once
        assert!(matches!(input.wait(far), Wait::Gone(..)));
    }

    #[test]
    fn without_a_terminal_the_wait_sleeps_until_the_deadline() {
        let mut input = Input { source: None, parser: Parser::default() };
        let start = Instant::now();
        assert_eq!(input.wait(start + Duration::from_millis(50)), Wait::Keys(vec![]));
        assert!(start.elapsed() >= Duration::from_millis(50));
    }

    fn openpty() -> (File, File) {
        use std::os::fd::FromRawFd;
        let (mut master, mut slave) = (0, 0);
        // SAFETY: openpty writes two descriptors that this test then owns.
        let rc =
            unsafe { libc::openpty(&mut master, &mut slave, std::ptr::null_mut(), std::ptr::null(), std::ptr::null()) };
        assert_eq!(rc, 0, "openpty: {}", io::Error::last_os_error());
        unsafe { (File::from_raw_fd(master), File::from_raw_fd(slave)) }
    }

    /// Bytes are readable as they come, not a line at a time, as in the dashboard's raw mode.
    fn raw(f: &File) {
        let mut t = std::mem::MaybeUninit::<libc::termios>::uninit();
        // SAFETY: tcgetattr fills the termios that cfmakeraw and tcsetattr then read.
        unsafe {
            assert_eq!(libc::tcgetattr(f.as_raw_fd(), t.as_mut_ptr()), 0);
            let mut t = t.assume_init();
            libc::cfmakeraw(&mut t);
            assert_eq!(libc::tcsetattr(f.as_raw_fd(), libc::TCSANOW, &t), 0);
        }
    }

    fn write(f: &File, bytes: &[u8]) {
        use std::io::Write;
        (&*f).write_all(bytes).unwrap();
    }
}
