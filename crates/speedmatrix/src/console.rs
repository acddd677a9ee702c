//! Progress for logs and pipes: `--progress plain` prints one line per event,
//! prefixed with the seconds since the run started, so CI logs and `nohup` files
//! can be read and grepped; `--progress quiet` prints nothing until the summary.

use std::io::Write;
use std::sync::Mutex;
use std::time::Instant;

use sm_bench::Reporter;
use sm_core::record::{DecodeCell, PrefillRow};

use crate::table;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    Plain,
    Quiet,
}

pub struct Console {
    mode: Mode,
    start: Instant,
    out: Mutex<std::io::Stdout>,
}

impl Console {
    pub fn new(mode: Mode) -> Console {
        Console { mode, start: Instant::now(), out: Mutex::new(std::io::stdout()) }
    }

    fn line(&self, text: &str) {
        if self.mode == Mode::Quiet {
            return;
        }
        let t = self.start.elapsed().as_secs_f64();
        let mut out = self.out.lock().unwrap_or_else(|p| p.into_inner());
        for (i, l) in text.lines().enumerate() {
            let _ = if i == 0 { writeln!(out, "[{t:8.1}s] {l}") } else { writeln!(out, "           {l}") };
        }
        let _ = out.flush();
    }
}

impl Reporter for Console {
    fn event(&self, text: &str) {
        // finished cells and rows get their own, fuller line below
        let finished = (text.starts_with("cell ") && !text.ends_with("started")) || text.starts_with("prefill ");
        if !finished {
            self.line(text);
        }
    }
    fn prefill_done(&self, row: &PrefillRow) {
        self.line(&table::prefill_line(row));
    }
    fn cell_done(&self, cell: &DecodeCell) {
        self.line(&table::cell_line(cell));
    }
}
