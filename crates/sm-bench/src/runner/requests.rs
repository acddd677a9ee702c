//! `--save-requests`: one line per measured request in `requests.jsonl` beside `run.json`
//! (methodology §7.5, docs/requests.md). Lines are built from what the cell already logged, after
//! the cell, so the per-token path does not change; they are appended after every cell or row,
//! so a crash or Ctrl-C keeps every line of what was finished.

use std::fs::{File, OpenOptions};
use std::io::{self, Read, Seek, SeekFrom, Write};
use std::path::Path;
use std::time::Instant;

use sm_core::requests::{REQUESTS_FILE, RequestLine, RequestPhase, RequestStatus, round_s, round_tokens};

use crate::cell::window::{Window, in_window};
use crate::stream::request_log::RequestLog;
use crate::stream::scout::ScoutTimes;
use crate::stream::tokens::{answer_fields, attribute};

/// A cell's requests as its figures counted them, for `--save-requests`: the window (none when
/// the cell ended before its window did) and the tokens per chunk the attribution used.
#[derive(Debug, Clone, PartialEq)]
pub struct CellRequests {
    pub logs: Vec<RequestLog>,
    pub window: Option<Window>,
    pub per_chunk: Option<f64>,
}

/// Which cell (or row) a batch of lines belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct LineCell {
    pub phase: RequestPhase,
    pub context: u64,
    pub concurrency: u32,
    pub repeat: Option<u32>,
    pub searched: bool,
}

/// Seconds since `t0` on the monotonic clock (0 for an instant before it).
fn secs(t0: Instant, at: Instant) -> f64 {
    round_s(at.saturating_duration_since(t0).as_secs_f64())
}

/// The lines of a decode or warm-up cell's requests: tokens attributed as the cell's figures
/// attributed them (the same tokens per chunk, the same window), so that the lines' in-window
/// tokens add up to the cell's `output_tokens`.
pub(crate) fn cell_lines(cell: LineCell, requests: &CellRequests, t0: Instant) -> Vec<RequestLine> {
    requests.logs.iter().map(|log| line(cell, log, requests, t0)).collect()
}

fn line(cell: LineCell, log: &RequestLog, requests: &CellRequests, t0: Instant) -> RequestLine {
    let total = attribute(&log.points, requests.per_chunk).last().map_or(0.0, |&(t, _)| t);
    let seen = requests.window.map(|w| in_window(log, requests.per_chunk, w, &mut Vec::new()));
    let status = match (&log.failure, log.ended) {
        (Some(_), _) => RequestStatus::Failed,
        (None, Some(_)) => RequestStatus::Completed,
        (None, None) => RequestStatus::Cancelled,
    };
    let sent = secs(t0, log.sent);
    let answer = answer_fields(log, requests.per_chunk, |t| secs(t0, t));
    RequestLine {
        phase: cell.phase,
        context: cell.context,
        concurrency: cell.concurrency,
        repeat: cell.repeat,
        searched: cell.searched,
        request_id: log.id.as_deref().map(|r| sm_core::secrets::scrub(r).into_owned()),
        // closed loop: a stream sends its next request as soon as the previous one ends
        scheduled_s: sent,
        sent_s: sent,
        first_token_s: log.first_token.map(|t| secs(t0, t)),
        last_token_s: log.points.last().map(|p| secs(t0, p.at)),
        ended_s: log.ended.filter(|_| status == RequestStatus::Completed).map(|t| secs(t0, t)),
        output_tokens: round_tokens(total),
        window_output_tokens: seen.as_ref().map(|s| round_tokens(s.tokens)),
        in_window: seen.as_ref().map(|s| s.any),
        prompt_tokens: log.prompt_tokens,
        cached_tokens: log.cached_tokens,
        first_answer_s: answer.first_answer_s,
        reasoning_tokens: answer.reasoning_tokens,
        usage_reasoning_tokens: answer.usage_reasoning_tokens,
        tool_call: answer.tool_call,
        status,
        reason: log.failure.as_deref().map(|r| sm_core::secrets::scrub(r).into_owned()),
        retried: log.retried,
    }
}

/// What a prefill row's request gave: its times and usage, or why it failed (`asked` is when it
/// was handed to the HTTP client, the only time known of a request that failed before answering).
pub(crate) enum PrefillRequest<'a> {
    Answered {
        times: ScoutTimes,
        id: Option<&'a str>,
        output_tokens: u64,
        prompt_tokens: Option<u64>,
        cached_tokens: Option<u64>,
    },
    Failed {
        asked: Instant,
        reason: &'a str,
    },
}

/// The line of a prefill row's one request.
pub(crate) fn prefill_line(context: u64, request: PrefillRequest<'_>, t0: Instant) -> RequestLine {
    let base = RequestLine {
        phase: RequestPhase::Prefill,
        context,
        concurrency: 1,
        repeat: None,
        searched: false,
        request_id: None,
        scheduled_s: 0.0,
        sent_s: 0.0,
        first_token_s: None,
        last_token_s: None,
        ended_s: None,
        output_tokens: 0.0,
        window_output_tokens: None,
        in_window: None,
        prompt_tokens: None,
        cached_tokens: None,
        // a prefill row's one token is timed by its scout, which keeps no stream log
        first_answer_s: None,
        reasoning_tokens: None,
        usage_reasoning_tokens: None,
        tool_call: None,
        status: RequestStatus::Failed,
        reason: None,
        retried: false,
    };
    match request {
        PrefillRequest::Answered { times, id, output_tokens, prompt_tokens, cached_tokens } => RequestLine {
            request_id: id.map(|r| sm_core::secrets::scrub(r).into_owned()),
            scheduled_s: secs(t0, times.sent),
            sent_s: secs(t0, times.sent),
            first_token_s: Some(secs(t0, times.first_token)),
            last_token_s: Some(secs(t0, times.last_token)),
            ended_s: times.ended.map(|t| secs(t0, t)),
            output_tokens: output_tokens as f64,
            prompt_tokens,
            cached_tokens,
            status: if times.ended.is_some() { RequestStatus::Completed } else { RequestStatus::Cancelled },
            ..base
        },
        PrefillRequest::Failed { asked, reason } => RequestLine {
            scheduled_s: secs(t0, asked),
            sent_s: secs(t0, asked),
            reason: Some(sm_core::secrets::scrub(reason).into_owned()),
            ..base
        },
    }
}

/// `requests.jsonl`, open for appending.
#[derive(Debug)]
pub(crate) struct RequestsFile {
    file: File,
}

impl RequestsFile {
    /// Opens the file in `dir`: emptied for a new run (`fresh`), else appended to. A last line
    /// that a crash cut short is dropped, so the file stays one JSON object per line.
    pub(crate) fn open(dir: &Path, fresh: bool) -> io::Result<RequestsFile> {
        let path = dir.join(REQUESTS_FILE);
        let mut file = OpenOptions::new().read(true).write(true).create(true).truncate(fresh).open(path)?;
        let len = file.metadata()?.len();
        let mut last = [b'\n'];
        if len > 0 {
            file.seek(SeekFrom::Start(len - 1))?;
            file.read_exact(&mut last)?;
        }
        if last[0] != b'\n' {
            // rare (a crash mid-write): the whole file is read once to find its last whole line
            let mut text = Vec::new();
            file.seek(SeekFrom::Start(0))?;
            file.read_to_end(&mut text)?;
            let whole = text.iter().rposition(|&b| b == b'\n').map_or(0, |i| i + 1);
            file.set_len(whole as u64)?;
        }
        file.seek(SeekFrom::End(0))?;
        Ok(RequestsFile { file })
    }

    /// Appends the lines, secrets scrubbed, in one write; the file is unbuffered, so they are
    /// with the kernel when this returns.
    pub(crate) fn append(&mut self, lines: &[RequestLine]) -> io::Result<()> {
        let mut out = Vec::new();
        for line in lines {
            let mut value = serde_json::to_value(line).map_err(io::Error::other)?;
            sm_core::secrets::scrub_json(&mut value);
            serde_json::to_writer(&mut out, &value).map_err(io::Error::other)?;
            out.push(b'\n');
        }
        self.file.write_all(&out)
    }
}

#[cfg(test)]
mod tests;
