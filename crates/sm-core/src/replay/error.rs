//! Why a trace was refused. Every error about a line names it (1-based, blank lines counted, as an
//! editor shows it) and the field, and says what to do, so a 100,000-line trace is fixed at once.

use std::time::Duration;

use super::format::FormatError;

/// Why reading the trace stopped.
#[derive(Debug, thiserror::Error)]
pub enum ReplayError {
    #[error("line {line}: {why}")]
    Line { line: usize, why: LineError },
    #[error("cannot read line {line} of the trace: {source}")]
    Read { line: usize, source: std::io::Error },
    #[error("the trace holds no request: give a file with one JSON object a line")]
    NoRequest,
    #[error("{}", slice_empty(*start, *end, *last))]
    SliceEmpty { start: Duration, end: Option<Duration>, last: Duration },
}

impl ReplayError {
    /// The line it names, where it names one.
    pub fn line(&self) -> Option<usize> {
        match self {
            ReplayError::Line { line, .. } | ReplayError::Read { line, .. } => Some(*line),
            ReplayError::NoRequest | ReplayError::SliceEmpty { .. } => None,
        }
    }
}

/// What is wrong with one line.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum LineError {
    #[error("not JSON: {0}")]
    NotJson(String),
    #[error("not a JSON object: each line must be one object like {{\"timestamp\": …, …}}")]
    NotObject,
    #[error("longer than {0} bytes: is this a JSON Lines file, one request a line?")]
    TooLong(usize),
    #[error(transparent)]
    Format(#[from] FormatError),
    #[error("\"{0}\" is missing")]
    Missing(&'static str),
    /// `field` may name an element: `hash_ids[3]`, `messages[0].content`.
    #[error("\"{field}\" {why}")]
    Field { field: String, why: String },
    #[error(
        "\"hash_ids\" holds {ids} block ids but \"input_length\" {input} needs {needed} at {block_tokens} tokens a \
         block{}: if the trace was recorded with another block size, give it with --replay-block-tokens",
        fits(*input, *ids)
    )]
    Blocks { ids: usize, input: u64, needed: u64, block_tokens: u32 },
    #[error(
        "\"timestamp\" goes back in time: {} s, before line {previous_line}'s {} s; sort the file by timestamp",
        secs(*at), secs(*previous)
    )]
    Unsorted { at: Duration, previous: Duration, previous_line: usize },
}

impl LineError {
    pub(super) fn field(field: impl Into<String>, why: impl Into<String>) -> LineError {
        LineError::Field { field: field.into(), why: why.into() }
    }
}

/// The block sizes under which `ids` blocks hold `input` tokens, in words: a hint, since a trace
/// recorded with another size is the usual cause.
fn fits(input: u64, ids: usize) -> String {
    let ids = ids as u64;
    if ids == 0 || input == 0 {
        return String::new();
    }
    // ceil(input / b) == ids  ⇔  input / ids ≤ b < input / (ids − 1)
    let low = input.div_ceil(ids);
    let high = if ids == 1 { None } else { Some(input.div_ceil(ids - 1) - 1) };
    match high {
        None => format!(" (blocks of {low} tokens or more fit this line)"),
        Some(h) if h < low => " (no block size fits this line)".to_string(),
        Some(h) if h == low => format!(" (only blocks of {low} tokens fit this line)"),
        Some(h) => format!(" (blocks of {low} to {h} tokens fit this line)"),
    }
}

/// Why a slice kept nothing, and which flag to change.
fn slice_empty(start: Duration, end: Option<Duration>, last: Duration) -> String {
    let (start, last) = (secs(start), secs(last));
    match end {
        None => format!(
            "no request of the trace comes {start} s or more after its first (the last one is at {last} s): \
             give a smaller --replay-start"
        ),
        Some(end) => format!(
            "no request of the trace comes from {start} s to {} s after its first (the last one read is at \
             {last} s): give another --replay-start or a longer --replay-duration",
            secs(end)
        ),
    }
}

/// Seconds as a person reads them: up to millisecond precision, no trailing zeros.
fn secs(d: Duration) -> String {
    let s = format!("{:.3}", d.as_secs_f64());
    s.trim_end_matches('0').trim_end_matches('.').to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_block_hint_names_the_sizes_that_fit() {
        assert_eq!(fits(2000, 4), " (blocks of 500 to 666 tokens fit this line)");
        assert_eq!(fits(1024, 2), " (blocks of 512 to 1023 tokens fit this line)");
        assert_eq!(fits(100, 1), " (blocks of 100 tokens or more fit this line)");
        assert_eq!(fits(3, 3), " (only blocks of 1 tokens fit this line)");
        assert_eq!(fits(2, 3), " (no block size fits this line)");
        assert_eq!(fits(5, 0), "");
    }

    #[test]
    fn seconds_read_as_written() {
        assert_eq!(secs(Duration::from_millis(1500)), "1.5");
        assert_eq!(secs(Duration::from_secs(3)), "3");
        assert_eq!(secs(Duration::ZERO), "0");
    }
}
