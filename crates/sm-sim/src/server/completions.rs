//! `POST /v1/chat/completions` and `POST /v1/completions`: submit to the engine, then stream (or
//! collect) its emissions as text.

use std::collections::VecDeque;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use axum::body::{Body, Bytes};
use axum::extract::{Extension, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use tokio::sync::mpsc::UnboundedReceiver;

use super::chunks::{ChunkWriter, DONE, Usage};
use super::error::ApiError;
use super::request::{self, Kind, Parsed};
use super::{AppState, Arrival};
use crate::engine::{Command, Event, FinishReason, NewRequest};
use crate::fault::{self, FaultSet, RequestView};
use crate::flavor::Flavor;
use crate::reasoning::ReasoningField;
use crate::text::TextGen;
use crate::tools::{CallPlan, Fragment};

pub(crate) async fn chat(
    State(st): State<Arc<AppState>>,
    Extension(arrival): Extension<Arrival>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    handle(st, Kind::Chat, arrival, headers, body).await
}

pub(crate) async fn completion(
    State(st): State<Arc<AppState>>,
    Extension(arrival): Extension<Arrival>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    handle(st, Kind::Completion, arrival, headers, body).await
}

/// Bodies above this are parsed and tokenized on the blocking pool: a 64K-token prompt takes
/// milliseconds to tokenize, and a burst of them on the runtime's threads would hold back the
/// other requests' intake and every open stream's tokens. Smaller ones are cheaper in place than
/// the hand-over.
const PARSE_INLINE_MAX: usize = 4 * 1024;

async fn handle(st: Arc<AppState>, kind: Kind, arrival: Arrival, headers: HeaderMap, body: Bytes) -> Response {
    let started = if body.len() <= PARSE_INLINE_MAX {
        start(&st, kind, arrival, &headers, &body)
    } else {
        let st = st.clone();
        match tokio::task::spawn_blocking(move || start(&st, kind, arrival, &headers, &body)).await {
            Ok(started) => started,
            Err(_) => Err(ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, "The request's intake failed")),
        }
    };
    match started {
        Ok((run, parsed)) if parsed.stream => stream_response(run, parsed),
        Ok((run, parsed)) => collect_response(run, parsed).await,
        Err(e) => e.into_response(),
    }
}

/// Ends the engine's request when the client goes away, unless it already finished. SGLang does not
/// notice closed streams: there the request runs on, and only `/abort_request` (while the stream is
/// still open) stops it.
struct AbortGuard {
    st: Arc<AppState>,
    id: u64,
    rid: String,
    done: bool,
}

impl AbortGuard {
    /// Aborts the request in the engine now rather than when the response is dropped; SGLang does
    /// not abort on a disconnect, so neither does its flavor.
    fn abort_now(&mut self) {
        if self.st.flavor != Flavor::Sglang && !self.done {
            self.done = true;
            let _ = self.st.engine_tx.send(Command::Abort { id: self.id, reason: FinishReason::Disconnect });
        }
    }
}

impl Drop for AbortGuard {
    fn drop(&mut self) {
        if self.st.flavor == Flavor::Sglang {
            if let Ok(mut open) = self.st.sglang_open.lock() {
                open.remove(&self.rid);
            }
        } else if !self.done {
            let _ = self.st.engine_tx.send(Command::Abort { id: self.id, reason: FinishReason::Disconnect });
        }
    }
}

struct Run {
    st: Arc<AppState>,
    guard: AbortGuard,
    events: UnboundedReceiver<Event>,
    writer: ChunkWriter,
    faults: FaultSet,
    text: TextGen,
    prompt_tokens: u32,
    /// A chat request to a `[reasoning]` profile: the field its thinking goes in, and how many
    /// tokens the thinking is (0 with thinking off). `None` for completions and other profiles.
    reasoning: Option<(ReasoningField, u32)>,
    /// A chat request with `tools`: the call its answer is.
    call: Option<Call>,
}

/// The tool call a request's answer tokens make.
struct Call {
    id: String,
    name: String,
    plan: CallPlan,
}

impl Run {
    fn thinking(&self) -> u32 {
        self.reasoning.map_or(0, |(_, r)| r)
    }

    /// Appends the arguments text of the call's token `k` (0 is the name's, which has none).
    fn push_call_token(&mut self, k: u32, out: &mut String) {
        let Some(call) = &self.call else { return };
        if k == 0 {
            return;
        }
        match call.plan.fragment(k - 1) {
            Fragment::Fixed(f) => out.push_str(f),
            Fragment::Word => self.text.push_token(out),
        }
    }
}

/// The faults this request meets: the server's (those whose scope matches it) under the header's.
fn faults_for(
    st: &AppState,
    kind: Kind,
    headers: &HeaderMap,
    body: &Result<serde_json::Value, ApiError>,
) -> Result<FaultSet, ApiError> {
    let request_faults = match headers.get("x-sim-fault") {
        None => Vec::new(),
        Some(v) => {
            let s = v.to_str().map_err(|_| ApiError::bad_request("x-sim-fault: not valid text"))?;
            fault::parse_list(s).map_err(|e| ApiError::bad_request(format!("x-sim-fault: {e}")))?
        }
    };
    // a body that is not JSON still meets the faults for every request, as before scopes existed;
    // the prompt's text is copied only when a scope may look at it
    let text = match body {
        Ok(b) if st.faults.scoped() => request::fault_text(kind, b),
        _ => String::new(),
    };
    let view = RequestView { text: &text, max_tokens: body.as_ref().ok().and_then(request::asked_max_tokens) };
    Ok(FaultSet::new(&st.faults.select(&view), &request_faults))
}

fn start(
    st: &Arc<AppState>,
    kind: Kind,
    Arrival(arrival): Arrival,
    headers: &HeaderMap,
    body: &[u8],
) -> Result<(Run, Parsed), ApiError> {
    let body = request::parse_json(body);
    let faults = faults_for(st, kind, headers, &body)?;
    if let Some(code) = faults.status {
        let status = StatusCode::from_u16(code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        return Err(ApiError::new(status, format!("Simulated failure (fault status={code})")));
    }
    let body = body?;
    let parsed = request::parse(st, kind, &body)?;
    let p = &st.profile;
    let seed = request::prompt_seed(&parsed.prompt_ids);
    let id = st.next_id.fetch_add(1, Ordering::Relaxed);
    let reasoning = match (kind, p.reasoning) {
        (Kind::Chat, Some(r)) => Some((r.field, if parsed.thinking { r.tokens(id) } else { 0 })),
        _ => None,
    };
    let thinking = reasoning.map_or(0, |(_, r)| r);
    let mut max_tokens = parsed.max_tokens;
    let mut end_reason = FinishReason::Length;
    if !parsed.ignore_eos {
        // a model does not stop in the middle of its thinking: the natural length is the answer's
        let natural = u64::from(thinking) + p.natural_length(id, seed);
        if natural < u64::from(max_tokens) {
            max_tokens = natural as u32;
            end_reason = FinishReason::Stop;
        }
    }
    // the answer after the thinking is the call: as many tokens as the answer would have had
    let call = parsed.tool.clone().map(|name| Call {
        id: format!("call_{id}"),
        name,
        plan: CallPlan { tokens: max_tokens.saturating_sub(thinking), valid: p.tools.plans_valid(id) },
    });
    let rid = match kind {
        Kind::Chat => format!("chatcmpl-{id}"),
        Kind::Completion => format!("cmpl-{id}"),
    };
    let (tx, events) = tokio::sync::mpsc::unbounded_channel();
    let prompt_tokens = parsed.prompt_ids.len() as u32;
    // a chat answer sent back comes after the template's separator; a completion's right after
    let between = if kind == Kind::Chat { crate::tokenizer::ANSWER_PREFIX } else { &[] };
    let room = p.max_model_len.saturating_sub(u64::from(prompt_tokens)).min(u64::from(max_tokens));
    let answer = crate::text::answer_ids(seed, faults.looping, room as usize);
    let bs = p.block_size as usize;
    let block_hashes = request::block_hashes(&parsed.prompt_ids, bs);
    let req = NewRequest {
        id,
        arrival,
        prompt_tokens,
        decode_hashes: request::decode_hashes(&parsed.prompt_ids, &block_hashes, between, &answer, bs),
        block_hashes,
        answer_offset: between.len() as u32,
        max_tokens,
        end_reason,
        tokens_per_step: faults.multi_token.max(1),
        first_token_delay_s: f64::from(faults.slow_first_token_ms) / 1000.0,
        reasoning_tokens: p.reasoning.map(|_| thinking),
        tool_call: call.as_ref().map(|c| c.plan),
        events: tx,
    };
    if st.flavor == Flavor::Sglang
        && let Ok(mut open) = st.sglang_open.lock()
    {
        open.insert(rid.clone(), id);
    }
    let guard = AbortGuard { st: st.clone(), id, rid: rid.clone(), done: false };
    st.engine_tx
        .send(Command::Submit(Box::new(req)))
        .map_err(|_| ApiError::new(StatusCode::SERVICE_UNAVAILABLE, "The engine is shutting down"))?;
    let created = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs());
    Ok((
        Run {
            st: st.clone(),
            guard,
            events,
            writer: ChunkWriter::new(kind, &rid, created, &st.model),
            faults,
            text: TextGen::new(seed, faults.looping),
            prompt_tokens,
            reasoning,
            call,
        },
        parsed,
    ))
}

enum Phase {
    Start,
    Running,
    Done,
}

struct SseState {
    run: Run,
    include_usage: bool,
    continuous: bool,
    generated: u32,
    cached: u32,
    phase: Phase,
    pending: VecDeque<String>,
    malformed_sent: bool,
    /// Registered once per stream: re-arming a watch receiver on every chunk would take the watch's
    /// lock, shared by all streams, twice per token.
    shutdown: Pin<Box<dyn Future<Output = ()> + Send>>,
}

type Item = Result<Bytes, std::io::Error>;

fn abrupt(why: &str) -> Option<Item> {
    Some(Err(std::io::Error::new(std::io::ErrorKind::ConnectionAborted, why.to_string())))
}

impl SseState {
    fn usage(&self, final_usage: bool) -> Usage {
        Usage {
            prompt: self.run.prompt_tokens,
            completion: self.generated,
            cached: final_usage.then_some(self.cached),
            reasoning: self.run.reasoning.map(|(_, r)| r.min(self.generated)),
        }
    }

    fn take_text(&mut self, n: u32) -> String {
        let mut text = String::with_capacity(8 * n as usize);
        for _ in 0..n {
            self.run.text.push_token(&mut text);
        }
        text
    }

    /// Queues an emission of `n` tokens: the part still within the thinking as a reasoning delta,
    /// the rest as a content delta after it (both at the same release, as one step made them).
    /// `finish` rides on the last of the two.
    fn emit(&mut self, n: u32, finish: Option<&'static str>) {
        let think = self.run.reasoning.map_or(0, |(_, r)| n.min(r.saturating_sub(self.generated)));
        if think > 0 {
            let field = self.run.reasoning.map_or("", |(f, _)| f.as_str());
            let text = self.take_text(think);
            self.generated += think;
            let u = self.chunk_usage();
            let fin = if think == n { finish } else { None };
            let c = self.run.writer.reasoning(field, &text, fin, u.as_ref());
            self.pending.push_back(c);
        }
        if think < n && self.run.call.is_some() {
            self.emit_call(n - think, finish);
            return;
        }
        // an empty emission (none today) keeps its content chunk, as before reasoning existed
        if think < n || think == 0 {
            let text = self.take_text(n - think);
            self.generated += n - think;
            let u = self.chunk_usage();
            let c = self.run.writer.choice(&text, false, finish, u.as_ref());
            self.pending.push_back(c);
        }
    }

    /// Queues `n` tokens of the tool call: the delta with its name first (one token), then one
    /// delta with the argument fragments of the rest. A streamed call ends with `tool_calls`, as
    /// vLLM's does whatever stopped the model.
    fn emit_call(&mut self, n: u32, finish: Option<&'static str>) {
        let finish = finish.map(|_| "tool_calls");
        let thinking = self.run.thinking();
        let mut left = n;
        if self.generated == thinking {
            self.generated += 1;
            left -= 1;
            let u = self.chunk_usage();
            let fin = if left == 0 { finish } else { None };
            let call = self.run.call.as_ref().expect("a call");
            let c = self.run.writer.tool_call_head(&call.id, &call.name, fin, u.as_ref());
            self.pending.push_back(c);
        }
        if left > 0 {
            let mut args = String::with_capacity(8 * left as usize);
            for _ in 0..left {
                self.run.push_call_token(self.generated - thinking, &mut args);
                self.generated += 1;
            }
            let u = self.chunk_usage();
            let c = self.run.writer.tool_args(&args, finish, u.as_ref());
            self.pending.push_back(c);
        }
    }

    fn chunk_usage(&self) -> Option<Usage> {
        let f = self.run.faults;
        (self.continuous && !f.no_usage && !f.usage_at_end).then(|| self.usage(false))
    }

    fn finish(&mut self) {
        if self.include_usage && !self.run.faults.no_usage {
            let u = self.usage(true);
            self.pending.push_back(self.run.writer.usage(&u));
        }
        self.pending.push_back(DONE.to_string());
        self.phase = Phase::Done;
        self.run.guard.done = true;
    }

    async fn next(&mut self) -> Option<Item> {
        loop {
            if let Some(s) = self.pending.pop_front() {
                return Some(Ok(Bytes::from(s)));
            }
            match self.phase {
                Phase::Done => return None,
                Phase::Start => {
                    self.phase = Phase::Running;
                    if self.run.writer.kind == Kind::Chat {
                        let u = self.chunk_usage();
                        let c = self.run.writer.choice("", true, None, u.as_ref());
                        self.pending.push_back(c);
                    }
                    continue;
                }
                Phase::Running => {}
            }
            let f = self.run.faults;
            if f.disconnect_after.is_some_and(|n| self.generated >= n) {
                // the engine stops here, as it would on a real disconnect; then, because hyper drops
                // unflushed chunks when a body fails and flushes only while the body is pending, go
                // idle (a queued engine event would answer at once and skip the flush) so that the
                // tokens already sent reach the client before the connection breaks
                self.run.guard.abort_now();
                tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                return abrupt("fault disconnect-after");
            }
            if f.stall_after.is_some_and(|n| self.generated >= n) {
                // keep the connection open and silent; the engine finishes the request on its own
                (&mut self.shutdown).await;
                self.phase = Phase::Done;
                return abrupt("sim shutting down");
            }
            let ev = tokio::select! {
                ev = self.run.events.recv() => ev,
                _ = &mut self.shutdown => {
                    self.phase = Phase::Done;
                    return abrupt("sim shutting down");
                }
            };
            match ev {
                None => return abrupt("engine stopped"),
                Some(Event::Admitted { cached_tokens }) => self.cached = cached_tokens,
                Some(Event::Tokens { n, at, finish }) => {
                    let n = match f.disconnect_after {
                        Some(limit) => n.min(limit - self.generated),
                        None => n,
                    };
                    self.emit(n, finish.map(FinishReason::as_str));
                    if f.malformed_sse && !self.malformed_sent {
                        self.malformed_sent = true;
                        self.pending.push_back(self.run.writer.malformed());
                    }
                    if finish.is_some() {
                        self.finish();
                    }
                    let st = &self.run.st;
                    st.emission.handler.record(st.clock.now() - at, u64::from(n));
                }
                Some(Event::Finished { reason }) => {
                    let u = self.chunk_usage();
                    let c = self.run.writer.choice("", false, Some(reason.as_str()), u.as_ref());
                    self.pending.push_back(c);
                    self.finish();
                }
            }
        }
    }
}

fn stream_response(run: Run, parsed: Parsed) -> Response {
    let mut rx = run.st.shutdown.clone();
    let shutdown = Box::pin(async move {
        let _ = rx.wait_for(|s| *s).await;
    });
    let state = SseState {
        run,
        include_usage: parsed.include_usage,
        continuous: parsed.continuous_usage,
        generated: 0,
        cached: 0,
        phase: Phase::Start,
        pending: VecDeque::new(),
        malformed_sent: false,
        shutdown,
    };
    let stream = futures_util::stream::unfold(state, |mut s| async move {
        let item = s.next().await?;
        Some((item, s))
    });
    Response::builder()
        .header(header::CONTENT_TYPE, "text/event-stream; charset=utf-8")
        .header(header::CACHE_CONTROL, "no-cache")
        .body(Body::from_stream(stream))
        .expect("static headers are valid")
}

async fn collect_response(mut run: Run, _parsed: Parsed) -> Response {
    let mut shutdown = run.st.shutdown.clone();
    let (mut generated, mut cached) = (0u32, 0u32);
    let (mut text, mut thinking) = (String::new(), String::new());
    let think_tokens = run.thinking();
    let reason = loop {
        if run.faults.stall_after.is_some_and(|n| generated >= n) {
            // nothing of a non-streaming answer is on the wire until the end, so a stall answers
            // nothing at all: hold the request (the engine runs it to its end) until the client
            // gives up, which drops this future, or the sim shuts down
            let _ = shutdown.wait_for(|s| *s).await;
            return abrupt_response("sim shutting down");
        }
        let ev = tokio::select! {
            ev = run.events.recv() => ev,
            _ = shutdown.wait_for(|s| *s) => None,
        };
        match ev {
            None => {
                return ApiError::new(StatusCode::SERVICE_UNAVAILABLE, "The engine stopped").into_response();
            }
            Some(Event::Admitted { cached_tokens }) => cached = cached_tokens,
            Some(Event::Tokens { n, finish, .. }) => {
                for _ in 0..n {
                    if generated < think_tokens {
                        run.text.push_token(&mut thinking);
                    } else if run.call.is_some() {
                        run.push_call_token(generated - think_tokens, &mut text);
                    } else {
                        run.text.push_token(&mut text);
                    }
                    generated += 1;
                }
                if let Some(r) = finish {
                    break r;
                }
            }
            Some(Event::Finished { reason }) => break reason,
        }
    };
    run.guard.done = true;
    if let Some(n) = run.faults.disconnect_after
        && generated >= n
    {
        // a non-streaming response has no tokens on the wire until the end: drop the connection
        return abrupt_response("fault disconnect-after");
    }
    let usage = Usage {
        prompt: run.prompt_tokens,
        completion: generated,
        cached: Some(cached),
        reasoning: run.reasoning.map(|(_, r)| r.min(generated)),
    };
    // as vLLM with a reasoning parser: each part is null when the answer has none of it
    let or_null = |s: String| if s.is_empty() { serde_json::Value::Null } else { s.into() };
    let call = run.call.as_ref().filter(|_| generated > think_tokens);
    let mut message = match (call, run.reasoning) {
        (Some(c), _) => serde_json::json!({"role": "assistant", "content": null, "tool_calls": [{
            "id": c.id, "type": "function", "function": {"name": c.name, "arguments": text},
        }]}),
        (None, None) => serde_json::json!({"role": "assistant", "content": text}),
        (None, Some(_)) => serde_json::json!({"role": "assistant", "content": or_null(text)}),
    };
    if let Some((field, _)) = run.reasoning {
        message[field.as_str()] = or_null(thinking);
    }
    let finish = if call.is_some() { "tool_calls" } else { reason.as_str() };
    answer_body(&run, message, finish, (!run.faults.no_usage).then_some(usage))
}

/// A non-streaming answer; `message` is the chat choice's (a completion's text is its `content`).
fn answer_body(run: &Run, message: serde_json::Value, finish: &str, usage: Option<Usage>) -> Response {
    let w = &run.writer;
    let head: serde_json::Value =
        serde_json::from_str(&format!("{}\"choices\":[]}}", w.head_json())).expect("valid head");
    let mut body = head;
    let choice = match w.kind {
        Kind::Chat => serde_json::json!({
            "index": 0,
            "message": message,
            "logprobs": null,
            "finish_reason": finish,
        }),
        Kind::Completion => serde_json::json!({
            "index": 0, "text": message["content"], "logprobs": null, "finish_reason": finish, "stop_reason": null,
        }),
    };
    body["object"] = match w.kind {
        Kind::Chat => "chat.completion".into(),
        Kind::Completion => "text_completion".into(),
    };
    body["choices"] = serde_json::Value::Array(vec![choice]);
    if let Some(u) = usage {
        body["usage"] = u.json();
    }
    axum::Json(body).into_response()
}

/// A response whose body fails at once, so that the server drops the connection.
fn abrupt_response(why: &'static str) -> Response {
    let stream = futures_util::stream::once(async move { abrupt(why).expect("some") });
    Response::builder()
        .header(header::CONTENT_TYPE, "application/json")
        .body(Body::from_stream(stream))
        .expect("static headers are valid")
}
