//! [`ReplayReader`]: the trace as an iterator of requests, read one line at a time so that a
//! trace of hours (hundreds of thousands of lines) never sits in memory as text.

use std::io::{BufRead, Read};
use std::time::Duration;

use super::error::{LineError, ReplayError};
use super::fields;
use super::format::ReplayFormat;
use super::options::ReplayOptions;
use super::slice::{Clock, Place};
use super::{ReplayInput, ReplayRequest, messages, mooncake};

/// The longest line read, its newline included: a file with no newline (not JSON Lines) would
/// otherwise be read whole. A Mooncake line is under a kilobyte; a long chat, a few megabytes.
pub const MAX_LINE_BYTES: usize = 64 << 20;

/// The requests of a trace, in the file's order, each checked and placed on the replay's clock.
///
/// Blank lines are skipped (and counted, so a line number is the editor's). Iteration stops at the
/// first error, which names its line, and at the slice's end: the trace being sorted, no later line
/// can be kept, so the rest of the file is not read. A trace, or a slice, with no request ends
/// with an error rather than quietly replaying nothing.
#[derive(Debug)]
pub struct ReplayReader<R> {
    input: R,
    options: ReplayOptions,
    /// Given, or told from the first line.
    format: Option<ReplayFormat>,
    clock: Clock,
    /// The current line's bytes, reused from line to line.
    buf: Vec<u8>,
    /// The current line's number (1-based).
    line: usize,
    max_line: usize,
    done: bool,
}

impl<R: BufRead> ReplayReader<R> {
    pub fn new(input: R, options: ReplayOptions) -> ReplayReader<R> {
        ReplayReader {
            input,
            options,
            format: options.format(),
            clock: Clock::new(options),
            buf: Vec::new(),
            line: 0,
            max_line: MAX_LINE_BYTES,
            done: false,
        }
    }

    /// The trace's format: as given, or once told from the first line.
    pub fn format(&self) -> Option<ReplayFormat> {
        self.format
    }

    pub fn options(&self) -> &ReplayOptions {
        &self.options
    }

    /// The next kept request; `None` at the end of the file or of the slice.
    fn next_request(&mut self) -> Result<Option<ReplayRequest>, ReplayError> {
        while self.next_line()? {
            let line = self.line;
            let at_line = |why| ReplayError::Line { line, why };
            let (at, input) = self.parse().map_err(at_line)?;
            match self.clock.place(line, at).map_err(at_line)? {
                Place::Before => continue,
                Place::After => break,
                Place::Kept { trace_at, due } => return Ok(Some(ReplayRequest { line, due, trace_at, input })),
            }
        }
        self.finish()
    }

    /// Reads the next line that is not blank into `buf`; `false` at the end of the file.
    fn next_line(&mut self) -> Result<bool, ReplayError> {
        loop {
            self.buf.clear();
            self.line += 1;
            let limit = self.max_line as u64 + 1;
            let read = (&mut self.input).take(limit).read_until(b'\n', &mut self.buf);
            match read {
                Ok(0) => return Ok(false),
                Ok(_) if self.buf.len() > self.max_line => {
                    return Err(ReplayError::Line { line: self.line, why: LineError::TooLong(self.max_line) });
                }
                Ok(_) if self.buf.iter().all(u8::is_ascii_whitespace) => continue,
                Ok(_) => return Ok(true),
                Err(source) => return Err(ReplayError::Read { line: self.line, source }),
            }
        }
    }

    /// The current line's timestamp (as written) and input, the format told from it if not known.
    fn parse(&mut self) -> Result<(Duration, ReplayInput), LineError> {
        let object = fields::object(&self.buf)?;
        let format = match self.format {
            Some(format) => format,
            None => *self.format.insert(ReplayFormat::detect(&object)?),
        };
        Ok(match format {
            ReplayFormat::Mooncake => {
                let (at, input) = mooncake::parse(object, self.options.block_tokens())?;
                (at, ReplayInput::Mooncake(input))
            }
            ReplayFormat::Messages => {
                let (at, input) = messages::parse(object)?;
                (at, ReplayInput::Messages(input))
            }
        })
    }

    /// The end: quiet when a request was kept, else why none was.
    fn finish(&self) -> Result<Option<ReplayRequest>, ReplayError> {
        if self.clock.kept_any() {
            return Ok(None);
        }
        if !self.clock.started() {
            return Err(ReplayError::NoRequest);
        }
        Err(ReplayError::SliceEmpty { start: self.options.start(), end: self.options.end(), last: self.clock.last() })
    }

    /// A shorter line limit, so the tests need not write 64 MiB.
    #[cfg(test)]
    pub(super) fn with_max_line(mut self, max_line: usize) -> Self {
        self.max_line = max_line;
        self
    }
}

impl<R: BufRead> Iterator for ReplayReader<R> {
    type Item = Result<ReplayRequest, ReplayError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.done {
            return None;
        }
        let next = self.next_request();
        // after the last request or the first error, nothing more: the trace is not read past it
        self.done = !matches!(next, Ok(Some(_)));
        next.transpose()
    }
}

impl<R: BufRead> std::iter::FusedIterator for ReplayReader<R> {}
