//! Which of the two trace formats a file is: given (`--replay-format`), or told from its first line.

use std::fmt;
use std::str::FromStr;

use serde_json::{Map, Value};

/// The trace's format.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ReplayFormat {
    /// Mooncake's JSONL: `timestamp` (ms), `input_length`, `output_length`, `hash_ids`.
    Mooncake,
    /// Timestamped messages: `timestamp` (s), `messages` or `prompt`, `max_tokens`, `session_id`.
    Messages,
}

/// The keys that name each format; a line with keys of both, or of neither, is not guessed at.
const MOONCAKE_KEYS: [&str; 2] = ["hash_ids", "input_length"];
const MESSAGES_KEYS: [&str; 2] = ["messages", "prompt"];

/// Why the format could not be told, or was not one of the two names.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FormatError {
    #[error(
        "cannot tell the trace's format: the line has both Mooncake keys (\"hash_ids\", \"input_length\") and \
         messages keys (\"messages\", \"prompt\"); say which with --replay-format mooncake|messages"
    )]
    Ambiguous,
    #[error(
        "cannot tell the trace's format: the line has none of \"hash_ids\", \"input_length\" (Mooncake) or \
         \"messages\", \"prompt\" (timestamped messages); say which with --replay-format mooncake|messages"
    )]
    Unknown,
    #[error("'{0}' is not a trace format: use --replay-format mooncake|messages")]
    Name(String),
}

impl ReplayFormat {
    /// The format of a trace whose first non-empty line, parsed, is `line`: by the keys it has.
    pub fn detect(line: &Map<String, Value>) -> Result<ReplayFormat, FormatError> {
        let has = |keys: [&str; 2]| keys.iter().any(|k| line.contains_key(*k));
        match (has(MOONCAKE_KEYS), has(MESSAGES_KEYS)) {
            (true, false) => Ok(ReplayFormat::Mooncake),
            (false, true) => Ok(ReplayFormat::Messages),
            (true, true) => Err(FormatError::Ambiguous),
            (false, false) => Err(FormatError::Unknown),
        }
    }

    /// The name `--replay-format` takes.
    pub fn name(self) -> &'static str {
        match self {
            ReplayFormat::Mooncake => "mooncake",
            ReplayFormat::Messages => "messages",
        }
    }
}

impl FromStr for ReplayFormat {
    type Err = FormatError;
    fn from_str(s: &str) -> Result<ReplayFormat, FormatError> {
        match s.trim().to_ascii_lowercase().as_str() {
            "mooncake" => Ok(ReplayFormat::Mooncake),
            "messages" => Ok(ReplayFormat::Messages),
            _ => Err(FormatError::Name(s.trim().to_string())),
        }
    }
}

impl fmt::Display for ReplayFormat {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}
