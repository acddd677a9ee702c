//! `--trace FILE`: ground truth as JSON lines, one per finished request, written by a background
//! thread so that serialization and disk writes never delay the scheduler.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::Path;
use std::sync::mpsc::{self, Receiver, Sender};
use std::thread::JoinHandle;

use serde::Serialize;

#[derive(Debug, Serialize)]
pub(crate) struct TraceRecord {
    pub id: u64,
    pub arrival: f64,
    pub admitted: Option<f64>,
    pub first_token: Option<f64>,
    pub end: f64,
    pub prompt_tokens: u32,
    pub cached_tokens: u32,
    pub completion_tokens: u32,
    pub finish: &'static str,
    /// `[time, tokens]` per emission.
    pub emissions: Vec<(f64, u32)>,
    /// The profile's `[noise]` (with any `--step-noise`/`--drift` override), only when it is on: the
    /// truth a test needs to know what the step times were drawn from.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub noise: Option<crate::noise::Noise>,
    /// With speculative decoding on: this request's verification steps and accepted draft tokens.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub spec: Option<SpecTruth>,
    /// With a `[reasoning]` profile: `reasoning_tokens` and `first_answer` (flattened, so a profile
    /// without one writes the same lines as before).
    #[serde(flatten, skip_serializing_if = "Option::is_none")]
    pub reasoning: Option<ReasoningTruth>,
    /// With `tools` in the request: `first_tool_call`, `tool_call_tokens` and `tool_args_valid`
    /// (flattened, and absent for a request without tools).
    #[serde(flatten, skip_serializing_if = "Option::is_none")]
    pub tools: Option<ToolTruth>,
}

#[derive(Debug, Clone, Copy, Serialize)]
pub(crate) struct ToolTruth {
    /// Release time of the call's first token (the delta with its name); `null` when none was
    /// released (thinking used up `max_tokens`).
    pub first_tool_call: Option<f64>,
    /// The call's tokens released: the name's one and its argument fragments.
    pub tool_call_tokens: u32,
    /// Whether the arguments released are a JSON object; `null` without a call.
    pub tool_args_valid: Option<bool>,
}

#[derive(Debug, Clone, Copy, Serialize)]
pub(crate) struct ReasoningTruth {
    /// Thinking tokens released: the planned count, or fewer if the request ended first.
    pub reasoning_tokens: u32,
    /// Release time of the first answer (content) token; `null` when none was released.
    pub first_answer: Option<f64>,
}

#[derive(Debug, Clone, Copy, Serialize)]
pub(crate) struct SpecTruth {
    pub drafts: u32,
    pub accepted: u32,
}

pub(crate) struct TraceWriter {
    thread: Option<JoinHandle<std::io::Result<()>>>,
}

impl TraceWriter {
    pub(crate) fn create(path: &Path) -> std::io::Result<(Self, Sender<TraceRecord>)> {
        let file = File::create(path)?;
        let (tx, rx) = mpsc::channel();
        let thread = std::thread::Builder::new()
            .name("sm-sim-trace".into())
            .spawn(move || write_all(rx, BufWriter::new(file)))?;
        Ok((Self { thread: Some(thread) }, tx))
    }

    /// Waits until every sender is gone and the file is flushed.
    pub(crate) fn finish(&mut self) {
        if let Some(t) = self.thread.take() {
            match t.join() {
                Ok(Err(e)) => tracing::error!("sim trace: write failed: {e}"),
                Err(_) => tracing::error!("sim trace: writer panicked"),
                Ok(Ok(())) => {}
            }
        }
    }
}

fn write_all(rx: Receiver<TraceRecord>, mut out: BufWriter<File>) -> std::io::Result<()> {
    while let Ok(first) = rx.recv() {
        // drain what is queued, then flush, so that a reader sees every finished request soon
        for rec in std::iter::once(first).chain(rx.try_iter()) {
            serde_json::to_writer(&mut out, &rec)?;
            out.write_all(b"\n")?;
        }
        out.flush()?;
    }
    out.flush()
}
