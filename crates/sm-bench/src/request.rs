//! One streamed generation request, read to its end (or until cancelled), and
//! logged for the window accounting.

use std::time::{Duration, Instant};

use serde_json::Value;
use sm_client::http::{Client, ClientError};
use sm_client::openai::parse_chunk;
use sm_client::sse::SseEvent;
use tokio::sync::watch;

use crate::loopguard::{LoopFinding, LoopGuard};
use crate::window::{Point, RequestLog};

/// How a request ended.
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    /// `[DONE]` or the body ended after a finish_reason.
    Completed,
    /// We dropped the stream (window closed, cell stopped).
    Cancelled,
    Failed(String),
    Loop(LoopFinding),
}

/// What the caller wants to know while a request runs.
pub trait Observer: Sync {
    /// The first token of this request arrived.
    fn first_token(&self) {}
    /// `tokens` more output tokens arrived.
    fn tokens(&self, _tokens: u64) {}
    /// The server's request id (SGLang aborts need it).
    fn request_id(&self, _id: &str) {}
}

impl Observer for () {}

pub struct RequestRun {
    pub log: RequestLog,
    pub outcome: Outcome,
    pub id: Option<String>,
}

/// Streams one request. `cancel` flipping to true drops the stream at once
/// (before that, `on_cancel` is awaited with the request id — the SGLang abort).
pub async fn stream_request<F, Fut>(
    client: &Client,
    path: &str,
    body: &Value,
    idle_timeout: Duration,
    cancel: &mut watch::Receiver<bool>,
    observer: &dyn Observer,
    on_cancel: F,
) -> RequestRun
where
    F: FnOnce(Option<String>) -> Fut,
    Fut: std::future::Future<Output = ()>,
{
    let sent = Instant::now();
    let mut run = RequestRun { log: RequestLog::new(sent), outcome: Outcome::Cancelled, id: None };
    if *cancel.borrow() {
        return run;
    }
    let started = tokio::select! {
        biased;
        _ = wait_true(cancel) => return run,
        s = client.stream(path, body, idle_timeout) => s,
    };
    let mut stream = match started {
        Ok(s) => s,
        Err(e) => {
            run.outcome = Outcome::Failed(describe(&e));
            return run;
        }
    };
    run.log.sent = stream.sent_at;
    let mut state = ReadState::default();
    loop {
        let next = tokio::select! {
            biased;
            _ = wait_true(cancel) => {
                on_cancel(run.id.clone()).await;
                run.outcome = Outcome::Cancelled;
                return run;
            }
            n = stream.next() => n,
        };
        match next {
            Ok(Some(ev)) => {
                if let Some(outcome) = state.handle(ev.at, ev.event, &mut run, observer) {
                    run.outcome = outcome;
                    return run;
                }
            }
            Ok(None) => {
                run.outcome = if state.finished {
                    run.log.ended.get_or_insert(Instant::now());
                    Outcome::Completed
                } else {
                    Outcome::Failed("the server closed the stream before the request finished".into())
                };
                return run;
            }
            Err(e) => {
                run.outcome = Outcome::Failed(describe(&e));
                return run;
            }
        }
    }
}

#[derive(Default)]
struct ReadState {
    chunks_with_text: u64,
    finished: bool,
    guard: LoopGuard,
}

impl ReadState {
    /// Applies one event; `Some` ends the request.
    fn handle(
        &mut self,
        at: Instant,
        event: SseEvent,
        run: &mut RequestRun,
        observer: &dyn Observer,
    ) -> Option<Outcome> {
        let data = match event {
            SseEvent::Done => {
                run.log.ended.get_or_insert(at);
                return Some(Outcome::Completed);
            }
            SseEvent::Data(d) => d,
        };
        let chunk = match parse_chunk(&data) {
            Ok(c) => c,
            Err(e) => return Some(Outcome::Failed(e.to_string())),
        };
        if let Some(err) = chunk.error {
            return Some(Outcome::Failed(format!("the server reported an error mid-stream: {err}")));
        }
        if run.id.is_none()
            && let Some(id) = &chunk.id {
                observer.request_id(id);
                run.id = Some(id.clone());
            }
        let log = &mut run.log;
        if chunk.prompt_tokens.is_some() {
            log.prompt_tokens = chunk.prompt_tokens;
        }
        if chunk.cached_tokens.is_some() {
            log.cached_tokens = chunk.cached_tokens;
        }
        if chunk.has_text {
            self.chunks_with_text += 1;
            if chunk.completion_tokens.is_none() {
                log.usage = false;
            }
            if log.first_token.is_none() {
                log.first_token = Some(at);
                observer.first_token();
            }
        }
        let prev = log.points.last().map_or(0, |p| p.tokens);
        let now_tokens =
            if log.usage { chunk.completion_tokens.unwrap_or(prev).max(prev) } else { self.chunks_with_text };
        if now_tokens > prev && (chunk.has_text || log.first_token.is_some()) {
            log.points.push(Point { at, tokens: now_tokens });
            observer.tokens(now_tokens - prev);
        }
        if chunk.finish_reason.is_some() {
            self.finished = true;
            log.ended.get_or_insert(at);
        }
        if chunk.has_text
            && let Some(f) = self.guard.push(&chunk.text) {
                return Some(Outcome::Loop(f));
            }
        None
    }
}

async fn wait_true(rx: &mut watch::Receiver<bool>) {
    // An error means the sender is gone: treat it as cancelled.
    let _ = rx.wait_for(|v| *v).await;
}

/// A failed request described for a person.
pub fn describe(e: &ClientError) -> String {
    match e {
        ClientError::Status { status, body, .. } => format!("HTTP {status}: {body}"),
        ClientError::Stalled { secs } => format!("the stream stalled: no data for {secs:.0} s"),
        ClientError::Connect { reason, .. } => format!("server stopped responding: {reason}"),
        ClientError::Broken { reason, .. } => format!("the connection broke: {reason}"),
        other => other.to_string(),
    }
}
