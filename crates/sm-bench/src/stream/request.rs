//! One streamed generation request, read to its end (or until cancelled), and
//! logged for the window accounting.

use std::time::{Duration, Instant};

use serde_json::Value;
use sm_client::http::{Client, ClientError, EventStream, JsonBody};
use sm_client::scan::read_chunk;
use sm_client::sse::SseEvent;
use tokio::sync::watch;

use crate::stream::cancel::Cancelled;
use crate::stream::loopguard::{LoopFinding, LoopGuard};
use crate::stream::request_log::{Point, RequestLog};

/// How a request ended.
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    /// `[DONE]` or the body ended after a finish_reason.
    Completed,
    /// We dropped the stream (window closed, cell stopped).
    Cancelled,
    Failed(String),
    /// The connection itself failed (refused, reset, cut): the server may be gone.
    Lost(String),
    Loop(LoopFinding),
}

/// What the caller wants to know while a request runs.
pub trait Observer: Sync {
    /// The first token of this request arrived, `ttft` after the request was sent.
    fn first_token(&self, _ttft: Duration) {}
    /// `tokens` more output tokens arrived, `since_last` after the previous ones of this request.
    fn tokens(&self, _tokens: u64, _since_last: Option<Duration>) {}
    /// The server's request id (SGLang aborts need it).
    fn request_id(&self, _id: &str) {}
    /// A point was added to the log of the request sent at `sent` (for `--precision`'s running check).
    fn point(&self, _sent: Instant, _point: Point) {}
    /// The first answer chunk arrived, `ttfa` after the request was sent; `after_thinking` when
    /// token-bearing chunks (its thinking) came before it.
    fn first_answer(&self, _ttfa: Duration, _after_thinking: bool) {}
    /// The first tool-call delta arrived, `ttftc` after the request was sent (a run with tools).
    fn first_tool_call(&self, _ttftc: Duration) {}
    /// Answer text arrived (content only, no reasoning): a session keeps it for its next turn.
    fn content(&self, _text: &str) {}
}

impl Observer for () {}

pub struct RequestRun {
    pub log: RequestLog,
    pub outcome: Outcome,
    pub id: Option<String>,
}

/// How long a stream may stay silent: before its first token (prefill, queueing) and after it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct StreamTimeouts {
    pub first_token: Duration,
    pub stall: Duration,
}

/// Streams one request. `cancel` flipping to true drops the stream at once, after the targeted
/// abort where the client asks for it (`Client::with_abort_on_cancel`, SGLang): every caller,
/// cell or load phase, cancels the same way.
pub async fn stream_request(
    client: &Client,
    path: &str,
    body: &JsonBody,
    timeouts: StreamTimeouts,
    cancel: &mut watch::Receiver<bool>,
    observer: &dyn Observer,
) -> RequestRun {
    let sent = Instant::now();
    let mut run = RequestRun { log: RequestLog::new(sent), outcome: Outcome::Cancelled, id: None };
    if *cancel.borrow() {
        return run;
    }
    let (started, retried) = start(client, path, body, timeouts.first_token, cancel).await;
    run.log.retried = retried;
    let mut stream = match started {
        Some(Ok(s)) => s,
        Some(Err(e)) => {
            run.outcome = failed(&e);
            return run;
        }
        None => return run,
    };
    run.log.sent = stream.sent_at;
    run.log.tools = body.has_tools();
    let mut state = ReadState::default();
    // One cancel future for the whole stream, polled after every event at the cost of an atomic
    // load (made anew per event, it would register and drop a waiter under a lock every token).
    let mut cancelled = Cancelled::new(cancel);
    loop {
        let next = tokio::select! {
            biased;
            _ = &mut cancelled => {
                abort(client, run.id.as_deref()).await;
                run.outcome = Outcome::Cancelled;
                return run;
            }
            n = stream.next() => n,
        };
        match next {
            Ok(Some(ev)) => {
                let had_token = run.log.first_token.is_some();
                if let Some(outcome) = state.handle(ev.at, ev.event, &mut run, observer) {
                    run.outcome = outcome;
                    return run;
                }
                if !had_token && run.log.first_token.is_some() {
                    stream.set_idle_timeout(timeouts.stall);
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
                run.outcome = failed(&e);
                return run;
            }
        }
    }
}

/// The targeted abort of a stream being cancelled, while it is still open, where the server
/// needs one; its failure changes nothing (the stream is dropped next either way).
async fn abort(client: &Client, id: Option<&str>) {
    if let (true, Some(rid)) = (client.aborts_on_cancel(), id) {
        let _ = sm_client::discover::abort_request(client, rid).await;
    }
}

/// Sends the request; `None` when cancelled first; `true` when it was sent twice.
async fn start(
    client: &Client,
    path: &str,
    body: &JsonBody,
    idle_timeout: Duration,
    cancel: &mut watch::Receiver<bool>,
) -> (Option<Result<EventStream, ClientError>>, bool) {
    tokio::select! {
        biased;
        _ = Cancelled::new(cancel) => (None, false),
        (s, retried) = stream_retrying(client, path, body, idle_timeout) => (Some(s), retried),
    }
}

/// `client.stream`, sent once more, on a new connection, when the first send broke before any
/// byte of the answer; `true` when it was sent twice.
///
/// That failure is what a pooled keep-alive connection that the server closed in the meantime
/// looks like (llama.cpp closes them). Only such a request is sent again, once, and it is
/// logged (methodology §6.7). A new connection, because the pool may hold more connections the
/// server closed. A stream that broke after its answer began is never sent again.
pub(crate) async fn stream_retrying(
    client: &Client,
    path: &str,
    body: &JsonBody,
    idle_timeout: Duration,
) -> (Result<EventStream, ClientError>, bool) {
    match client.stream(path, body, idle_timeout).await {
        Err(e @ ClientError::Broken { before_response: true, .. }) => {
            tracing::warn!("retrying a request once: {e}");
            (client.stream_on_new_connection(path, body, idle_timeout).await, true)
        }
        other => (other, false),
    }
}

#[derive(Default)]
struct ReadState {
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
        // the fast path; it falls back to the full parser for anything it is unsure of
        let chunk = match read_chunk(&data) {
            Ok(c) => c,
            Err(e) => return Some(Outcome::Failed(e.to_string())),
        };
        if let Some(err) = chunk.error {
            return Some(Outcome::Failed(format!("the server reported an error mid-stream: {err}")));
        }
        if run.id.is_none()
            && let Some(id) = &chunk.id
        {
            observer.request_id(id);
            run.id = Some(id.to_string());
        }
        let log = &mut run.log;
        if chunk.prompt_tokens.is_some() {
            log.prompt_tokens = chunk.prompt_tokens;
        }
        if chunk.cached_tokens.is_some() {
            log.cached_tokens = chunk.cached_tokens;
        }
        if chunk.reasoning_tokens.is_some() {
            log.reasoning_tokens = chunk.reasoning_tokens;
        }
        if chunk.has_text && log.first_token.is_none() {
            log.first_token = Some(at);
            observer.first_token(at - log.sent);
        }
        if !chunk.content.is_empty() {
            if log.first_answer.is_none() {
                (log.first_answer, log.answer_point) = (Some(at), Some(log.points.len()));
                observer.first_answer(at - log.sent, !log.points.is_empty());
            }
            observer.content(&chunk.content);
        }
        if chunk.tool_call {
            log.tool_args.push_str(&chunk.tool_args);
            if chunk.has_text && log.first_tool_call.is_none() {
                (log.first_tool_call, log.tool_point) = (Some(at), Some(log.points.len()));
                observer.first_tool_call(at - log.sent);
                // a call is the answer (methodology §7.3.1): the thinking ends where it begins
                if log.first_answer.is_none() {
                    (log.first_answer, log.answer_point) = (Some(at), Some(log.points.len()));
                    observer.first_answer(at - log.sent, !log.points.is_empty());
                }
            }
        }
        record_tokens(log, at, chunk.has_text, chunk.completion_tokens, observer);
        if chunk.finish_reason.is_some() {
            self.finished = true;
            log.ended.get_or_insert(at);
        }
        if chunk.has_text
            && let Some(f) = self.guard.push(&chunk.text)
        {
            return Some(Outcome::Loop(f));
        }
        None
    }
}

/// Logs what one chunk says about tokens (methodology §7.1). A chunk with text is a token-bearing
/// chunk; its usage, when it has one, is the request's count after it. A chunk without text that
/// raises the usage count is one too when the request's chunks carry usage (a token that decoded
/// to no text). Otherwise that usage is a total that arrived after chunks without usage (usage at
/// the end, llama.cpp): it is the count as of the last chunk, whose tokens arrived with the chunks,
/// not now (`crate::stream::tokens` spreads it over them).
fn record_tokens(log: &mut RequestLog, at: Instant, has_text: bool, usage: Option<u64>, observer: &dyn Observer) {
    if log.first_token.is_none() {
        return;
    }
    let last = log.points.last().copied();
    let (chunks, known) = last.map_or((0, Some(0)), |p| (p.chunks, p.usage));
    if has_text {
        if let (Some(u), Some(k)) = (usage, known)
            && u <= k
        {
            return; // text, but no new token by the server's count (e.g. a role or finish chunk)
        }
        log.usage &= usage.is_some();
        // a total on a text chunk after chunks without usage covers them too
        log.usage_at_end |= usage.is_some() && known.is_none();
        let since_last = last.map(|p| at - p.at);
        log.points.push(Point { at, chunks: chunks + 1, usage });
        observer.point(log.sent, Point { at, chunks: chunks + 1, usage });
        // live view only: the usage increase where known, else one token per chunk
        observer.tokens(usage.zip(known).map_or(1, |(u, k)| u.saturating_sub(k).max(1)), since_last);
        return;
    }
    let Some(n) = usage else { return };
    match (last, known) {
        (Some(p), None) => {
            // a total for the chunks so far: at the last chunk, not at this instant
            if let Some(point) = log.points.last_mut() {
                point.usage = Some(n);
            }
            log.usage_at_end = true;
            observer.tokens(n.saturating_sub(p.chunks), None);
        }
        (_, Some(k)) if n > k => {
            log.points.push(Point { at, chunks, usage: Some(n) });
            observer.point(log.sent, Point { at, chunks, usage: Some(n) });
            observer.tokens(n - k, last.map(|p| at - p.at));
        }
        _ => {}
    }
}

fn failed(e: &ClientError) -> Outcome {
    match e {
        ClientError::Connect { .. } | ClientError::Broken { .. } => Outcome::Lost(describe(e)),
        _ => Outcome::Failed(describe(e)),
    }
}

/// Why a request did not complete, for a person; `None` when it completed or was cancelled.
pub fn describe_outcome(outcome: &Outcome) -> Option<String> {
    match outcome {
        Outcome::Completed | Outcome::Cancelled => None,
        Outcome::Failed(why) | Outcome::Lost(why) => Some(why.clone()),
        Outcome::Loop(f) => Some(format!(
            "the answer repeated the same {} characters {} times",
            f.period_chars,
            f.repeated_chars / f.period_chars.max(1)
        )),
    }
}

/// A failed request described for a person.
pub fn describe(e: &ClientError) -> String {
    match e {
        ClientError::Status { status, body, key_sent, .. } => {
            let said = match sm_client::http::status_phrase(*status) {
                Some(phrase) => format!("HTTP {status} {phrase}: {}", error_message(body)),
                None => format!("HTTP {status}: {}", error_message(body)),
            };
            match sm_client::error::refusal(*status, *key_sent) {
                Some(what) => format!("{said} — {what}"),
                None => said,
            }
        }
        ClientError::Stalled { secs } => format!("the stream stalled: no data for {secs:.0} s"),
        ClientError::Connect { reason, .. } => format!("cannot connect: {reason}"),
        ClientError::Broken { reason, .. } => format!("the connection broke: {reason}"),
        other => other.to_string(),
    }
}

/// The message of an error body (OpenAI's `{"error": {"message"}}`, or a top-level `message`,
/// `detail` or `error` text), else the body itself: the JSON around it only hides what went wrong.
fn error_message(body: &str) -> String {
    let Ok(v) = serde_json::from_str::<Value>(body) else {
        return body.to_string();
    };
    ["/error/message", "/message", "/detail", "/error"]
        .iter()
        .find_map(|p| v.pointer(p).and_then(Value::as_str))
        .filter(|m| !m.trim().is_empty())
        .map_or_else(|| body.to_string(), str::to_string)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn http_errors_say_the_status_and_the_servers_message() {
        let status = |status, body: &str| ClientError::Status {
            path: "/v1/x".into(),
            status,
            body: body.into(),
            key_sent: true,
        };
        let openai = r#"{"error":{"code":503,"message":"Simulated failure","type":"server_error"}}"#;
        assert_eq!(describe(&status(503, openai)), "HTTP 503 Service Unavailable: Simulated failure");
        assert_eq!(describe(&status(429, r#"{"detail":"slow down"}"#)), "HTTP 429 Too Many Requests: slow down");
        assert_eq!(describe(&status(599, "<html>busy</html>")), "HTTP 599: <html>busy</html>");
        let refused = describe(&status(401, r#"{"error":{"message":"Incorrect API key"}}"#));
        assert!(
            refused.starts_with("HTTP 401 Unauthorized: Incorrect API key — the server refused the API key"),
            "{refused}"
        );
        assert_eq!(
            describe(&status(500, r#"{"error":{"code":500}}"#)),
            r#"HTTP 500 Internal Server Error: {"error":{"code":500}}"#
        );
    }

    fn feed(events: &[&str]) -> (RequestRun, Option<Outcome>) {
        feed_to(events, &())
    }

    /// As [`feed`], telling `observer` what the live view would see; the events come 10 ms apart.
    fn feed_to(events: &[&str], observer: &dyn Observer) -> (RequestRun, Option<Outcome>) {
        let t0 = Instant::now();
        let mut run = RequestRun { log: RequestLog::new(t0), outcome: Outcome::Cancelled, id: None };
        let mut state = ReadState::default();
        let mut end = None;
        for (i, e) in events.iter().enumerate() {
            let at = t0 + Duration::from_millis(10 * (i as u64 + 1));
            let ev = if *e == "[DONE]" { SseEvent::Done } else { SseEvent::Data(e.as_bytes().to_vec().into()) };
            if let Some(o) = state.handle(at, ev, &mut run, observer) {
                end = Some(o);
                break;
            }
        }
        (run, end)
    }

    #[test]
    fn continuous_usage_counts_tokens_and_skips_the_role_chunk() {
        let (run, end) = feed(&[
            r#"{"id":"r1","choices":[{"delta":{"role":"assistant","content":""}}],"usage":{"completion_tokens":0,"prompt_tokens":9}}"#,
            r#"{"id":"r1","choices":[{"delta":{"content":" a b"}}],"usage":{"completion_tokens":2}}"#,
            r#"{"id":"r1","choices":[{"delta":{"content":" c"},"finish_reason":"length"}],"usage":{"completion_tokens":3}}"#,
            r#"{"id":"r1","choices":[],"usage":{"completion_tokens":3}}"#,
            "[DONE]",
        ]);
        assert_eq!(end, Some(Outcome::Completed));
        let usage: Vec<_> = run.log.points.iter().map(|p| p.usage).collect();
        assert_eq!(usage, [Some(2), Some(3)]);
        assert!(run.log.usage);
        assert_eq!(run.log.prompt_tokens, Some(9));
        assert_eq!(run.id.as_deref(), Some("r1"));
        assert_eq!(run.log.first_token, Some(run.log.points[0].at), "the role chunk is not the first token");
        assert!(run.log.ended.is_some());
    }

    #[test]
    fn a_reasoning_models_first_answer_comes_after_its_thinking() {
        use crate::stream::tokens::split;
        // vLLM's shape (content null beside the reasoning), then OpenRouter's spelling, then the answer
        let (run, end) = feed(&[
            r#"{"id":"r","choices":[{"delta":{"role":"assistant","content":""}}],"usage":{"completion_tokens":0}}"#,
            r#"{"id":"r","choices":[{"delta":{"reasoning_content":" hm","content":null}}],"usage":{"completion_tokens":1}}"#,
            r#"{"id":"r","choices":[{"delta":{"reasoning":" so so"}}],"usage":{"completion_tokens":3}}"#,
            r#"{"id":"r","choices":[{"delta":{"content":" yes"}}],"usage":{"completion_tokens":4}}"#,
            r#"{"id":"r","choices":[{"delta":{"content":" no"},"finish_reason":"stop"}],"usage":{"completion_tokens":5,"completion_tokens_details":{"reasoning_tokens":3}}}"#,
            "[DONE]",
        ]);
        assert_eq!(end, Some(Outcome::Completed));
        let points: Vec<Instant> = run.log.points.iter().map(|p| p.at).collect();
        assert_eq!(run.log.first_token, Some(points[0]), "the first thinking token is the first token");
        assert_eq!(run.log.first_answer, Some(points[2]), "the first content is the first answer token");
        assert_eq!(run.log.reasoning_tokens, Some(3));
        assert_eq!(split(&run.log, None), crate::stream::tokens::TokenSplit { reasoning: 3.0, answer: 2.0 });
        // thinking that used up max_tokens: no answer at all
        let (run, _) = feed(&[
            r#"{"choices":[{"delta":{"reasoning_content":" a"}}],"usage":{"completion_tokens":1}}"#,
            r#"{"choices":[{"delta":{"reasoning_content":" b"},"finish_reason":"length"}],"usage":{"completion_tokens":2}}"#,
        ]);
        assert_eq!((run.log.first_answer, run.log.first_token.is_some()), (None, true));
        assert_eq!(split(&run.log, None), crate::stream::tokens::TokenSplit { reasoning: 2.0, answer: 0.0 });
        // a model without thinking: the first answer token is the first token, nothing thought
        let (run, _) = feed(&[r#"{"choices":[{"delta":{"content":" a"},"finish_reason":"stop"}]}"#]);
        assert_eq!(run.log.first_answer, run.log.first_token);
        assert_eq!(split(&run.log, None).reasoning, 0.0);
    }

    #[test]
    fn a_tool_call_is_timed_counted_and_its_arguments_kept() {
        use crate::stream::tokens::{answer_fields, args_valid, call_tokens};
        /// What the live view is told of the calls.
        #[derive(Default)]
        struct Calls(std::sync::Mutex<Vec<Duration>>);
        impl Observer for Calls {
            fn first_tool_call(&self, ttftc: Duration) {
                self.0.lock().unwrap().push(ttftc);
            }
        }
        let calls = Calls::default();
        // the sim's shape: thinking, then the call's name (one token), then argument fragments
        let (mut run, end) = feed_to(
            &[
                r#"{"choices":[{"delta":{"role":"assistant","content":""}}],"usage":{"completion_tokens":0}}"#,
                r#"{"choices":[{"delta":{"reasoning":" hm"}}],"usage":{"completion_tokens":1}}"#,
                r#"{"choices":[{"delta":{"tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":"f","arguments":""}}]}}],"usage":{"completion_tokens":2}}"#,
                r#"{"choices":[{"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{\"q\":\""}}]}}],"usage":{"completion_tokens":3}}"#,
                r#"{"choices":[{"delta":{"tool_calls":[{"index":0,"function":{"arguments":"\"}"}}]},"finish_reason":"tool_calls"}],"usage":{"completion_tokens":4}}"#,
                "[DONE]",
            ],
            &calls,
        );
        assert_eq!(end, Some(Outcome::Completed));
        let at: Vec<Instant> = run.log.points.iter().map(|p| p.at).collect();
        assert_eq!((run.log.first_tool_call, run.log.tool_point), (Some(at[1]), Some(1)));
        // the live view hears of the call once, at its first delta (the third event, 30 ms in)
        assert_eq!(*calls.0.lock().unwrap(), [at[1] - run.log.sent]);
        assert_eq!(at[1] - run.log.sent, Duration::from_millis(30));
        assert_eq!(run.log.first_answer, Some(at[1]), "the call is the answer");
        assert_eq!((call_tokens(&run.log, None), args_valid(&run.log)), (3.0, Some(true)));
        // sent without tools, its lines carry no tool-call fields; with them, they do
        assert_eq!(answer_fields(&run.log, None, |_| 0.0).tool_call, None);
        run.log.tools = true;
        let f = answer_fields(&run.log, None, |_| 1.0).tool_call.unwrap();
        assert_eq!((f.first_tool_call_s, f.tool_call_tokens, f.tool_args_valid), (Some(1.0), 3.0, Some(true)));
        // a call cut short: its arguments do not parse
        run.log.tool_args.pop();
        assert_eq!(args_valid(&run.log), Some(false));
    }

    #[test]
    fn usage_only_at_the_end_covers_the_chunks_before_it() {
        let shape = |run: &RequestRun| -> Vec<(u64, Option<u64>)> {
            run.log.points.iter().map(|p| (p.chunks, p.usage)).collect()
        };
        // text chunks without usage, coalesced, then the total on the last text chunk
        let (run, _) = feed(&[
            r#"{"choices":[{"delta":{"content":"a"}}]}"#,
            r#"{"choices":[{"delta":{"content":"bc"}}]}"#,
            r#"{"choices":[{"delta":{"content":"d"},"finish_reason":"length"}],"usage":{"completion_tokens":5}}"#,
            "[DONE]",
        ]);
        assert_eq!(shape(&run), [(1, None), (2, None), (3, Some(5))]);
        assert!(!run.log.usage, "the count came partly from chunks");
        assert!(run.log.usage_at_end, "the total covers the chunks without usage");
        // llama.cpp's shape: a usage-only chunk after the last text chunk belongs to that chunk,
        // not to its own arrival: no point is added at the instant the total arrives
        let (run, _) = feed(&[
            r#"{"choices":[{"delta":{"content":"a"}}]}"#,
            r#"{"choices":[{"delta":{"content":"bc"},"finish_reason":"length"}]}"#,
            r#"{"choices":[],"usage":{"completion_tokens":4}}"#,
            "[DONE]",
        ]);
        assert_eq!(shape(&run), [(1, None), (2, Some(4))]);
        assert!(run.log.usage_at_end);
    }

    #[test]
    fn errors_inside_the_stream() {
        let (_, end) = feed(&[r#"{"error":{"message":"out of memory"}}"#]);
        assert!(matches!(end, Some(Outcome::Failed(m)) if m.contains("out of memory")));
        let (_, end) = feed(&[r#"{"choices":[{"delta":{"content":"#]);
        assert!(matches!(end, Some(Outcome::Failed(m)) if m.contains("malformed")));
    }
}
