//! One HTTP client per run: a connection pool sized for the largest cell,
//! `TCP_NODELAY`, HTTP/1.1 keep-alive, bearer auth. Streaming responses yield
//! SSE events stamped with the instant their bytes arrived; on plain `http://` they are read by
//! the request's own task on a connection it owns ([`crate::wire`]), elsewhere by reqwest.

use std::collections::VecDeque;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::Value;

pub use crate::error::ClientError;
use crate::sse::{SseEvent, SseParser};
use crate::wire;

/// A response read whole.
#[derive(Debug, Clone)]
pub struct TextResponse {
    pub status: u16,
    pub content_type: String,
    pub body: String,
}

impl TextResponse {
    pub fn is_success(&self) -> bool {
        (200..300).contains(&self.status)
    }
}

/// A JSON request body, serialised once. A cell sends the same body on every request of every
/// stream; serialising a long prompt anew for each would put the client's CPU between one
/// request's `sent_at` and its bytes on the wire, and a wave of C requests would wait on each
/// other's serialisation: C × 64K tokens measured +4 % TTFT from that alone. Cloning shares the bytes.
#[derive(Debug, Clone)]
pub struct JsonBody(bytes::Bytes, bool);

impl JsonBody {
    pub fn new(value: &Value) -> JsonBody {
        let tools = value.get("tools").and_then(Value::as_array).is_some_and(|a| !a.is_empty());
        // serialising a `Value` cannot fail: its keys are strings and it holds no non-finite number
        JsonBody(serde_json::to_vec(value).unwrap_or_default().into(), tools)
    }

    /// The body carries a non-empty `tools` array: its request's answer may be a tool call, and
    /// its log says so (the tool-call figures are kept only for such requests).
    pub fn has_tools(&self) -> bool {
        self.1
    }

    pub fn as_bytes(&self) -> &[u8] {
        &self.0
    }
}

#[derive(Debug, Clone)]
pub struct Client {
    http: reqwest::Client,
    /// Keeps no idle connection, so every request opens a new one: for the one resend of a
    /// request whose pooled connection the server had closed (the pool may hold more such).
    fresh: reqwest::Client,
    /// The streams' own connections: `None` on `https://` or behind a proxy (reqwest then).
    wire: Option<Arc<wire::Pool>>,
    base: String,
    api_key: Option<String>,
    /// The server keeps generating for a dropped stream (SGLang): a cancelled stream is aborted
    /// by its request id first (methodology §6.5).
    abort_on_cancel: bool,
}

/// Which reader carries the streamed requests.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StreamReader {
    /// The request's task reads its own connection ([`crate::wire`]); the default on `http://`.
    Owned,
    /// reqwest (hyper's connection task): `https://`, a proxy, or asked for.
    Reqwest,
}

impl Client {
    /// `base_url` like `http://127.0.0.1:8000` (a trailing `/` or `/v1` is dropped).
    /// `pool` is the largest number of simultaneous streams expected.
    pub fn new(base_url: &str, api_key: Option<String>, pool: usize) -> Result<Client, ClientError> {
        let base = normalize_base(base_url)?;
        let build = |idle: usize| {
            reqwest::Client::builder()
                .http1_only()
                .tcp_nodelay(true)
                .pool_max_idle_per_host(idle)
                .connect_timeout(Duration::from_secs(30))
                .build()
                .map_err(|e| ClientError::Build(e.to_string()))
        };
        if api_key.as_deref().is_some_and(|k| k.bytes().any(|b| b.is_ascii_control())) {
            return Err(ClientError::Build(
                "the API key holds a line break or control character: pass the key alone, on one line".into(),
            ));
        }
        let wire = wire::Pool::for_base(&base, pool + 16).map(Arc::new);
        Ok(Client { http: build(pool + 16)?, fresh: build(0)?, wire, base, api_key, abort_on_cancel: false })
    }

    /// Streams read by reqwest even where the owned reader could be used (a reference to compare).
    pub fn with_stream_reader(mut self, reader: StreamReader) -> Client {
        if reader == StreamReader::Reqwest {
            self.wire = None;
        }
        self
    }

    /// Whether every stream this client (and each clone) cancels is aborted by its request id
    /// before it is dropped: for a server that does not stop a request whose stream closed.
    pub fn with_abort_on_cancel(mut self, abort: bool) -> Client {
        self.abort_on_cancel = abort;
        self
    }

    pub fn aborts_on_cancel(&self) -> bool {
        self.abort_on_cancel
    }

    /// The reader that carries this client's streamed requests.
    pub fn stream_reader(&self) -> StreamReader {
        if self.wire.is_some() { StreamReader::Owned } else { StreamReader::Reqwest }
    }

    /// Whether requests carry an API key (a 401 then means the key was refused, not missing).
    pub fn has_api_key(&self) -> bool {
        self.api_key.is_some()
    }

    /// The base URL, without credentials.
    pub fn base(&self) -> &str {
        &self.base
    }

    fn request(&self, method: reqwest::Method, path: &str) -> reqwest::RequestBuilder {
        self.request_on(&self.http, method, path)
    }

    fn request_on(&self, http: &reqwest::Client, method: reqwest::Method, path: &str) -> reqwest::RequestBuilder {
        let mut rb = http.request(method, format!("{}{}", self.base, path));
        if let Some(key) = &self.api_key {
            rb = rb.bearer_auth(key);
        }
        rb
    }

    fn send_error(&self, path: &str, e: reqwest::Error, timeout: Duration) -> ClientError {
        if e.is_timeout() {
            ClientError::Timeout { path: path.to_string(), secs: timeout.as_secs_f64() }
        } else if e.is_connect() {
            ClientError::Connect { url: self.base.clone(), reason: root_cause(&e) }
        } else {
            ClientError::Broken { path: path.to_string(), reason: root_cause(&e), before_response: true }
        }
    }

    /// GET, whatever the status; the body read as text.
    pub async fn get(&self, path: &str, timeout: Duration) -> Result<TextResponse, ClientError> {
        let resp = self
            .request(reqwest::Method::GET, path)
            .timeout(timeout)
            .send()
            .await
            .map_err(|e| self.send_error(path, e, timeout))?;
        read_text(path, resp).await
    }

    /// GET that must succeed with JSON.
    pub async fn get_json(&self, path: &str, timeout: Duration) -> Result<Value, ClientError> {
        json_of(path, self.get(path, timeout).await?, self.api_key.is_some())
    }

    /// POST JSON that must succeed with JSON.
    pub async fn post_json(&self, path: &str, body: &Value, timeout: Duration) -> Result<Value, ClientError> {
        let resp = self
            .request(reqwest::Method::POST, path)
            .json(body)
            .timeout(timeout)
            .send()
            .await
            .map_err(|e| self.send_error(path, e, timeout))?;
        json_of(path, read_text(path, resp).await?, self.api_key.is_some())
    }

    /// Starts a streamed POST of a body serialised beforehand (see [`JsonBody`]). `sent_at` is taken
    /// just before the request's bytes are written to the open connection (owned reader), or just
    /// before reqwest is handed the request (which may open the connection first); the call returns
    /// once the response headers arrived.
    /// A non-2xx answer is an error carrying its body.
    pub async fn stream(
        &self,
        path: &str,
        body: &JsonBody,
        idle_timeout: Duration,
    ) -> Result<EventStream, ClientError> {
        self.stream_on(false, path, body, idle_timeout).await
    }

    /// `stream` on a new connection, never a pooled one.
    pub async fn stream_on_new_connection(
        &self,
        path: &str,
        body: &JsonBody,
        idle_timeout: Duration,
    ) -> Result<EventStream, ClientError> {
        self.stream_on(true, path, body, idle_timeout).await
    }

    async fn stream_on(
        &self,
        fresh: bool,
        path: &str,
        body: &JsonBody,
        idle_timeout: Duration,
    ) -> Result<EventStream, ClientError> {
        match &self.wire {
            Some(pool) => self.stream_owned(pool, fresh, path, body, idle_timeout).await,
            None => self.stream_reqwest(if fresh { &self.fresh } else { &self.http }, path, body, idle_timeout).await,
        }
    }

    async fn stream_owned(
        &self,
        pool: &Arc<wire::Pool>,
        fresh: bool,
        path: &str,
        body: &JsonBody,
        idle_timeout: Duration,
    ) -> Result<EventStream, ClientError> {
        let timeout = || ClientError::Timeout { path: path.to_string(), secs: idle_timeout.as_secs_f64() };
        let post = wire::post(pool, fresh, path, body.as_bytes(), self.api_key.as_deref());
        let mut resp = tokio::time::timeout(idle_timeout, post).await.map_err(|_| timeout())??;
        if !(200..300).contains(&resp.status) {
            let body = resp.conn.error_body(idle_timeout).await.map_err(|reason| ClientError::Broken {
                path: path.to_string(),
                reason,
                before_response: false,
            })?;
            let key_sent = self.api_key.is_some();
            return Err(ClientError::Status {
                path: path.to_string(),
                status: resp.status,
                body: excerpt(&body),
                key_sent,
            });
        }
        let mut stream = EventStream::new(path, resp.sent_at, Body::Owned(resp.conn), idle_timeout);
        // body bytes that came with the head arrived when the head did
        stream.decode_owned(resp.head_at)?;
        Ok(stream)
    }

    async fn stream_reqwest(
        &self,
        http: &reqwest::Client,
        path: &str,
        body: &JsonBody,
        idle_timeout: Duration,
    ) -> Result<EventStream, ClientError> {
        let rb = self
            .request_on(http, reqwest::Method::POST, path)
            .header(reqwest::header::CONTENT_TYPE, "application/json")
            .body(body.0.clone());
        let sent_at = Instant::now();
        let resp = tokio::time::timeout(idle_timeout, rb.send())
            .await
            .map_err(|_| ClientError::Timeout { path: path.to_string(), secs: idle_timeout.as_secs_f64() })?
            .map_err(|e| self.send_error(path, e, idle_timeout))?;
        if !resp.status().is_success() {
            let t = read_text(path, resp).await?;
            let key_sent = self.api_key.is_some();
            return Err(ClientError::Status {
                path: path.to_string(),
                status: t.status,
                body: excerpt(&t.body),
                key_sent,
            });
        }
        Ok(EventStream::new(path, sent_at, Body::Reqwest(resp), idle_timeout))
    }
}

/// An SSE event and the instant the bytes completing it arrived.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TimedEvent {
    pub at: Instant,
    pub event: SseEvent,
}

/// Where a stream's body bytes come from.
enum Body {
    Reqwest(reqwest::Response),
    Owned(wire::Conn),
}

pub struct EventStream {
    path: String,
    pub sent_at: Instant,
    body: Body,
    parser: SseParser,
    ready: VecDeque<SseEvent>,
    scratch: Vec<SseEvent>,
    at: Instant,
    idle_timeout: Duration,
    /// Fires when the stream may have been silent for `idle_timeout`. Moved only when it fires
    /// (or the timeout changes), not at every read: a timer per read costs the timer wheel's
    /// insert and removal for every token.
    stall: Pin<Box<tokio::time::Sleep>>,
    /// When the last read completed (or the headers arrived).
    last_read: Instant,
    ended: bool,
}

impl EventStream {
    fn new(path: &str, sent_at: Instant, body: Body, idle_timeout: Duration) -> EventStream {
        EventStream {
            path: path.to_string(),
            sent_at,
            body,
            parser: SseParser::new(),
            ready: VecDeque::new(),
            scratch: Vec::new(),
            at: sent_at,
            idle_timeout,
            stall: Box::pin(tokio::time::sleep(idle_timeout)),
            last_read: Instant::now(),
            ended: false,
        }
    }

    /// Changes the longest silence allowed from now on (a stream may wait longer for its first
    /// token, through prefill and queueing, than between tokens).
    pub fn set_idle_timeout(&mut self, idle_timeout: Duration) {
        self.idle_timeout = idle_timeout;
        let deadline = self.deadline();
        self.stall.as_mut().reset(deadline.into());
    }

    fn deadline(&self) -> Instant {
        deadline(self.last_read, self.idle_timeout)
    }

    /// The next event, `Ok(None)` at a clean end of the body. A body that ends in
    /// the middle of an event is an error: the server or a proxy cut the stream.
    pub async fn next(&mut self) -> Result<Option<TimedEvent>, ClientError> {
        loop {
            if let Some(event) = self.ready.pop_front() {
                return Ok(Some(TimedEvent { at: self.at, event }));
            }
            if self.ended {
                return Ok(None);
            }
            match &mut self.body {
                Body::Reqwest(_) => self.next_reqwest().await?,
                Body::Owned(_) => self.next_owned().await?,
            }
        }
    }

    /// One read by reqwest, its events queued.
    async fn next_reqwest(&mut self) -> Result<(), ClientError> {
        let Body::Reqwest(resp) = &mut self.body else { return Ok(()) };
        let piece = until_stall(&mut self.stall, self.last_read, self.idle_timeout, resp.chunk()).await?;
        // The arrival instant: taken before any parsing.
        let now = Instant::now();
        self.last_read = now;
        match piece {
            Ok(Some(bytes)) => {
                self.at = now;
                self.parser.push_bytes(&bytes, &mut self.scratch);
                self.ready.extend(self.scratch.drain(..));
                Ok(())
            }
            Ok(None) => self.end(),
            Err(e) => Err(self.broken(root_cause(&e))),
        }
    }

    /// One read of the owned connection, its events queued.
    async fn next_owned(&mut self) -> Result<(), ClientError> {
        let Body::Owned(conn) = &mut self.body else { return Ok(()) };
        let read = until_stall(&mut self.stall, self.last_read, self.idle_timeout, conn.read()).await?;
        // The arrival instant: taken before any parsing.
        let now = Instant::now();
        self.last_read = now;
        match read {
            Ok(0) => {
                let eof = conn.at_eof();
                eof.map_err(|e| self.broken(e.to_string()))?;
                self.end()
            }
            Ok(_) => self.decode_owned(now),
            Err(e) => Err(self.broken(e.to_string())),
        }
    }

    /// Decodes what the owned connection has read (arrived at `at`) into queued events.
    fn decode_owned(&mut self, at: Instant) -> Result<(), ClientError> {
        let Body::Owned(conn) = &mut self.body else { return Ok(()) };
        let (parser, scratch) = (&mut self.parser, &mut self.scratch);
        let decoded = conn.decode(&mut |data| parser.push_bytes(&data, scratch));
        if scratch.contains(&SseEvent::Done) {
            conn.expect_end();
        }
        let done = conn.is_done();
        decoded.map_err(|e| self.broken(e.to_string()))?;
        if !self.scratch.is_empty() {
            self.at = at;
            self.ready.extend(self.scratch.drain(..));
        }
        if done { self.end() } else { Ok(()) }
    }

    /// The body ended cleanly: an error if it cut an event short.
    fn end(&mut self) -> Result<(), ClientError> {
        self.ended = true;
        if self.parser.pending() > 0 {
            return Err(self.broken("the stream ended in the middle of an event".into()));
        }
        Ok(())
    }

    fn broken(&self, reason: String) -> ClientError {
        ClientError::Broken { path: self.path.clone(), reason, before_response: false }
    }
}

fn deadline(last_read: Instant, idle_timeout: Duration) -> Instant {
    // a timeout too long to add is no timeout: about 34 years
    last_read.checked_add(idle_timeout).unwrap_or_else(|| last_read + Duration::from_secs(1 << 30))
}

/// `read`'s result, or `Stalled` once no byte came for `idle_timeout` since `last_read`. The
/// timer is moved only when it fires early (a read came since it was set).
async fn until_stall<T>(
    stall: &mut Pin<Box<tokio::time::Sleep>>,
    last_read: Instant,
    idle_timeout: Duration,
    read: impl Future<Output = T>,
) -> Result<T, ClientError> {
    tokio::pin!(read);
    loop {
        tokio::select! {
            biased;
            piece = &mut read => return Ok(piece),
            () = stall.as_mut() => {
                let deadline = deadline(last_read, idle_timeout);
                if Instant::now() >= deadline {
                    return Err(ClientError::Stalled { secs: idle_timeout.as_secs_f64() });
                }
                stall.as_mut().reset(deadline.into());
            }
        }
    }
}

async fn read_text(path: &str, resp: reqwest::Response) -> Result<TextResponse, ClientError> {
    let status = resp.status().as_u16();
    let content_type =
        resp.headers().get(reqwest::header::CONTENT_TYPE).and_then(|v| v.to_str().ok()).unwrap_or("").to_string();
    let body = resp.text().await.map_err(|e| ClientError::Broken {
        path: path.to_string(),
        reason: root_cause(&e),
        before_response: false,
    })?;
    Ok(TextResponse { status, content_type, body })
}

fn json_of(path: &str, t: TextResponse, key_sent: bool) -> Result<Value, ClientError> {
    if !t.is_success() {
        return Err(ClientError::Status { path: path.to_string(), status: t.status, body: excerpt(&t.body), key_sent });
    }
    serde_json::from_str(&t.body).map_err(|e| ClientError::NotJson { path: path.to_string(), reason: e.to_string() })
}

/// The standard reason phrase of an HTTP status ("Service Unavailable"), if it has one.
pub fn status_phrase(status: u16) -> Option<&'static str> {
    reqwest::StatusCode::from_u16(status).ok()?.canonical_reason()
}

/// The first 300 characters of a body, on one line; secrets scrubbed before it is cut, so a
/// server that echoes the API key cannot leave half of it at the cut ([`sm_core::secrets`]).
pub fn excerpt(body: &str) -> String {
    let body = sm_core::secrets::scrub(body);
    let one_line: String = body.split_whitespace().collect::<Vec<_>>().join(" ");
    match one_line.char_indices().nth(300) {
        Some((i, _)) => format!("{}…", &one_line[..i]),
        None => one_line,
    }
}

fn root_cause(e: &(dyn std::error::Error + 'static)) -> String {
    let mut cur = e;
    while let Some(next) = cur.source() {
        cur = next;
    }
    cur.to_string()
}

/// `url` as an error may quote it: without credentials, query or fragment (they may hold a key).
fn shown_url(url: &str) -> String {
    match reqwest::Url::parse(url) {
        Ok(mut u) => {
            let _ = u.set_username("");
            let _ = u.set_password(None);
            u.set_query(None);
            u.set_fragment(None);
            u.to_string()
        }
        Err(_) => sm_core::redact::redact_text(url).text,
    }
}

/// Drops a trailing `/` or `/v1`, refuses credentials in the URL (they would end
/// up in results), a query or fragment, and anything but http(s).
pub fn normalize_base(url: &str) -> Result<String, ClientError> {
    let bad = |reason: &str| ClientError::BadUrl { url: shown_url(url), reason: reason.to_string() };
    let parsed = reqwest::Url::parse(url).map_err(|e| bad(&format!("{e} (expected e.g. http://127.0.0.1:8000)")))?;
    if !matches!(parsed.scheme(), "http" | "https") {
        return Err(bad("only http:// and https:// are supported"));
    }
    if parsed.host_str().is_none() {
        return Err(bad("it has no host"));
    }
    if !parsed.username().is_empty() || parsed.password().is_some() {
        return Err(bad("credentials in the URL are not allowed; pass --api-key or set OPENAI_API_KEY"));
    }
    // request paths are appended to the base: a query (`?api_key=…`) would end up inside them
    if parsed.query().is_some() || parsed.fragment().is_some() {
        return Err(bad(
            "a query or fragment in the URL is not allowed (give the server's base URL, e.g. http://127.0.0.1:8000); \
             pass a key with --api-key or OPENAI_API_KEY",
        ));
    }
    let mut s = parsed.as_str().trim_end_matches('/').to_string();
    if let Some(stripped) = s.strip_suffix("/v1") {
        s = stripped.to_string();
    }
    Ok(s)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base_urls() {
        assert_eq!(normalize_base("http://127.0.0.1:8000/").unwrap(), "http://127.0.0.1:8000");
        assert_eq!(normalize_base("http://h:1/v1").unwrap(), "http://h:1");
        assert_eq!(normalize_base("https://api.example.com/v1/").unwrap(), "https://api.example.com");
        assert!(normalize_base("ftp://h").is_err());
        assert!(normalize_base("localhost:8000").is_err());
        let e = normalize_base("http://u:secret@h:1").unwrap_err().to_string();
        assert!(e.contains("--api-key"), "{e}");
        assert!(!e.contains("secret") && !e.contains("u:") && e.contains("'http://h:1/'"), "{e}");
        let e = normalize_base("http://h:1/v1?api_key=k-secret").unwrap_err().to_string();
        assert!(e.contains("query") && e.contains("--api-key") && !e.contains("k-secret"), "{e}");
    }

    #[test]
    fn an_api_key_that_would_break_the_request_head_is_refused() {
        let e = Client::new("http://h:1", Some("k-secret\r\nX-Evil: 1".into()), 1).unwrap_err().to_string();
        assert!(e.contains("line break") && !e.contains("k-secret"), "{e}");
        assert!(Client::new("http://h:1", Some("k-secret".into()), 1).is_ok());
    }

    #[test]
    fn plain_http_streams_on_the_owned_reader_https_on_reqwest() {
        assert_eq!(Client::new("http://h:1", None, 1).unwrap().stream_reader(), StreamReader::Owned);
        assert_eq!(Client::new("https://h:1", None, 1).unwrap().stream_reader(), StreamReader::Reqwest);
    }

    #[test]
    fn excerpts_are_short_and_single_line() {
        assert_eq!(excerpt("a\n  b"), "a b");
        assert_eq!(excerpt(&"x".repeat(500)).chars().count(), 301);
    }
}
