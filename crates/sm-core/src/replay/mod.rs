//! `--replay FILE`: reading a recorded trace into typed requests, one line at a time.
//!
//! This is the pure first layer of the replay phase: a trace file (JSON Lines) becomes a stream of
//! [`ReplayRequest`]s, each with the time it is due (after the slice and the time scale) and what
//! to send. Two formats are read ([`ReplayFormat`]):
//!
//! * **Mooncake** — `{"timestamp": ms, "input_length": n, "output_length": m, "hash_ids": […]}`:
//!   token counts and the ids of the prompt's blocks of `block_tokens` tokens; requests that share
//!   an id share that block's text. [`prefix`] counts what an ideal prefix cache would reuse.
//! * **Timestamped messages** — `{"timestamp": s, "messages": […] | "prompt": "…", "max_tokens": n,
//!   "session_id": "…"}`: the text itself; the turns of a session keep their order.
//!
//! [`ReplayReader`] never holds the file: it reads a line, checks it (every error names the line
//! and the field), places it on the trace's clock ([`ReplayOptions`]: the slice, the scale) and
//! hands it on. What comes later is not here: the prompt builder (text from the hash ids), the
//! sender (open-loop at the due times, a session's turns after the previous answer), the record's
//! section and the report.

use std::time::Duration;

mod error;
mod fields;
mod format;
mod messages;
mod mooncake;
mod options;
pub mod prefix;
mod reader;
mod slice;

pub use error::{LineError, ReplayError};
pub use format::{FormatError, ReplayFormat};
pub use options::{DEFAULT_BLOCK_TOKENS, OptionsError, ReplayOptions, ReplaySpec};
pub use reader::{MAX_LINE_BYTES, ReplayReader};

/// One request of the trace, placed on the replay's clock.
#[derive(Debug, Clone, PartialEq)]
pub struct ReplayRequest {
    /// The trace file's line (1-based), to name it in later messages.
    pub line: usize,
    /// When it is due: from the first kept request, after the time scale.
    pub due: Duration,
    /// When it came in the recorded trace: from the trace's first request, before the scale.
    pub trace_at: Duration,
    pub input: ReplayInput,
}

/// What to send, in the trace's own terms.
#[derive(Debug, Clone, PartialEq)]
pub enum ReplayInput {
    Mooncake(MooncakeInput),
    Messages(MessagesInput),
}

/// A Mooncake line: sizes and block ids, no text (the prompt builder makes it from the ids).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MooncakeInput {
    /// `input_length`: the prompt's tokens; the last block may be partial.
    pub input_tokens: u64,
    /// `hash_ids`: one id per block of `block_tokens` tokens, in the prompt's order.
    pub hash_ids: Vec<u64>,
    /// `output_length`: the tokens to ask for.
    pub output_tokens: u64,
}

/// A timestamped-messages line: the text itself.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MessagesInput {
    pub prompt: ReplayPrompt,
    /// The line's `max_tokens`, where it has one (else the run's own).
    pub max_tokens: Option<u64>,
    /// `session_id`: the turns of one session are sent in their order, each after the previous
    /// answer. A numeric id is kept as its decimal text.
    pub session_id: Option<String>,
}

/// `messages` (a chat) or `prompt` (a completion's text); a line has exactly one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ReplayPrompt {
    Messages(Vec<Message>),
    Text(String),
}

/// One message of a chat.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Message {
    pub role: String,
    pub content: String,
}

#[cfg(test)]
mod tests;
