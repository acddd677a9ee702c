//! The measuring streams' own HTTP/1.1 client: a connection read in the request's own task.
//!
//! hyper's client runs a connection task that decodes the body and hands every frame to the
//! request's task through a channel: two task wake-ups per token. Here the request's task owns
//! its `TcpStream`, reads as much as the kernel has in one `read` into one reused buffer, and
//! decodes the framing in place: one wake-up per read (docs/performance.md, issue 19 §1).
//!
//! Used only where it is safe: plain `http://` with no proxy in the environment
//! ([`Pool::for_base`]); everything else, and every non-streaming call, stays on reqwest.

pub mod framing;

use std::io;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::error::ClientError;
use framing::{Decoder, Framing, FramingError};

/// The largest response head accepted (status line and headers).
const MAX_HEAD: usize = 64 * 1024;
/// The most of an error body kept for its excerpt.
const MAX_ERROR_BODY: usize = 64 * 1024;
const CONNECT_TIMEOUT: Duration = Duration::from_secs(30);
/// The read buffer's size; a read leaves at least a quarter of it free, so one `read` takes
/// what the kernel has.
const READ_ROOM: usize = 16 * 1024;
/// How long a dropped stream whose `[DONE]` arrived may wait for the body's last chunk before
/// its connection goes back to the pool (else it is closed).
const LINGER: Duration = Duration::from_secs(1);

/// The proxy variables reqwest reads for an `http://` URL: with any of them set, the owned
/// connection (which would go around the proxy) is not used.
const PROXY_VARS: [&str; 4] = ["HTTP_PROXY", "http_proxy", "ALL_PROXY", "all_proxy"];

/// Idle keep-alive connections to one server, touched once per request, never per token.
pub struct Pool {
    host: String,
    port: u16,
    /// `Host: …` and `Content-Type` lines, shared by every request.
    fixed_headers: String,
    /// The base URL's path (`/prefix`), put before every request path.
    prefix: String,
    idle: Mutex<Vec<TcpStream>>,
    max_idle: usize,
}

impl std::fmt::Debug for Pool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pool").field("host", &self.host).field("port", &self.port).finish_non_exhaustive()
    }
}

impl Pool {
    /// A pool for `base` (already normalised), or `None` where reqwest must be used:
    /// `https://`, or a proxy set in the environment.
    pub fn for_base(base: &str, max_idle: usize) -> Option<Pool> {
        if PROXY_VARS.iter().any(|v| std::env::var_os(v).is_some_and(|s| !s.is_empty())) {
            return None;
        }
        let url = reqwest::Url::parse(base).ok()?;
        if url.scheme() != "http" {
            return None;
        }
        // an IPv6 literal is `[::1]` in the URL and the Host header, `::1` to connect to
        let host = url.host_str()?.trim_start_matches('[').trim_end_matches(']').to_string();
        let port = url.port_or_known_default()?;
        let authority = match url.port() {
            Some(p) => format!("{}:{p}", url.host_str()?),
            None => url.host_str()?.to_string(),
        };
        Some(Pool {
            host,
            port,
            fixed_headers: format!("Host: {authority}\r\nContent-Type: application/json\r\n"),
            prefix: url.path().trim_end_matches('/').to_string(),
            idle: Mutex::new(Vec::new()),
            max_idle,
        })
    }

    /// An idle connection the server has not closed, if any.
    fn take(&self) -> Option<TcpStream> {
        loop {
            let tcp = self.idle.lock().ok()?.pop()?;
            // a closed connection is readable (EOF); a live idle one has nothing to read
            match tcp.try_read(&mut [0u8; 1]) {
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Some(tcp),
                _ => continue,
            }
        }
    }

    fn put(&self, tcp: TcpStream) {
        if let Ok(mut idle) = self.idle.lock()
            && idle.len() < self.max_idle
        {
            idle.push(tcp);
        }
    }

    async fn connect(&self) -> Result<TcpStream, String> {
        let tcp = tokio::time::timeout(CONNECT_TIMEOUT, TcpStream::connect((self.host.as_str(), self.port)))
            .await
            .map_err(|_| format!("no connection within {} s", CONNECT_TIMEOUT.as_secs()))?
            .map_err(|e| e.to_string())?;
        tcp.set_nodelay(true).map_err(|e| e.to_string())?;
        Ok(tcp)
    }

    /// The request, head and body, as one buffer (one write).
    fn request(&self, path: &str, body: &[u8], api_key: Option<&str>) -> Vec<u8> {
        let mut head =
            format!("POST {}{path} HTTP/1.1\r\n{}Content-Length: {}\r\n", self.prefix, self.fixed_headers, body.len());
        if let Some(key) = api_key {
            head.push_str("Authorization: Bearer ");
            head.push_str(key);
            head.push_str("\r\n");
        }
        head.push_str("\r\n");
        let mut out = head.into_bytes();
        out.extend_from_slice(body);
        out
    }
}

/// The response's status and the connection, its body not read yet.
pub struct Response {
    pub status: u16,
    /// Just before the request's bytes were written, the connection open (methodology §9).
    pub sent_at: Instant,
    /// When the read that completed the head returned.
    pub head_at: Instant,
    pub conn: Conn,
}

/// Sends a POST and reads the response head. `fresh`: on a new connection, never a pooled one.
/// Errors before any byte of the answer are `Broken { before_response: true }`.
pub async fn post(
    pool: &Arc<Pool>,
    fresh: bool,
    path: &str,
    body: &[u8],
    api_key: Option<&str>,
) -> Result<Response, ClientError> {
    let pooled = if fresh { None } else { pool.take() };
    let mut tcp = match pooled {
        Some(tcp) => tcp,
        None => pool
            .connect()
            .await
            .map_err(|reason| ClientError::Connect { url: format!("http://{}:{}", pool.host, pool.port), reason })?,
    };
    let broken =
        |reason: String, before_response: bool| ClientError::Broken { path: path.to_string(), reason, before_response };
    let request = pool.request(path, body, api_key);
    // After the connection is open: a connect the server's full accept queue dropped waits for
    // the SYN's retransmission (1 s), which is no part of the server's time to first token.
    let sent_at = Instant::now();
    tcp.write_all(&request).await.map_err(|e| broken(e.to_string(), true))?;
    let mut buf = BytesMut::with_capacity(READ_ROOM);
    let (head, head_at) = read_head(&mut tcp, &mut buf).await.map_err(|(reason, any)| broken(reason, !any))?;
    let conn = Conn {
        tcp: Some(tcp),
        buf,
        decoder: Decoder::new(head.framing),
        reusable: head.keep_alive,
        end_expected: false,
        pool: Arc::clone(pool),
    };
    Ok(Response { status: head.status, sent_at, head_at, conn })
}

struct Head {
    status: u16,
    framing: Framing,
    keep_alive: bool,
}

/// Reads until a final (non-1xx) response head is parsed; its bytes leave `buf`, the body's
/// first bytes stay. The error says whether any byte of the answer had arrived.
async fn read_head(tcp: &mut TcpStream, buf: &mut BytesMut) -> Result<(Head, Instant), (String, bool)> {
    let mut any = false;
    let mut at = Instant::now();
    loop {
        if !buf.is_empty() {
            match parse_head(buf) {
                Ok(Some(head)) if (100..200).contains(&head.status) => continue,
                Ok(Some(head)) => return Ok((head, at)),
                Ok(None) if buf.len() >= MAX_HEAD => {
                    return Err((format!("the response head is longer than {} KiB", MAX_HEAD / 1024), true));
                }
                Ok(None) => {}
                Err(reason) => return Err((reason, true)),
            }
        }
        buf.reserve(READ_ROOM);
        let read = tcp.read_buf(buf).await;
        // the arrival instant of the body bytes that came with the head: taken before any parsing
        at = Instant::now();
        match read {
            Ok(0) if any => return Err(("the connection closed in the middle of the response head".into(), true)),
            Ok(0) => return Err(("the server closed the connection without answering".into(), false)),
            Ok(_) => any = true,
            Err(e) => return Err((e.to_string(), any)),
        }
    }
}

/// A complete head at the start of `buf`, removed from it; `None` when more bytes are needed.
fn parse_head(buf: &mut BytesMut) -> Result<Option<Head>, String> {
    let mut headers = [httparse::EMPTY_HEADER; 64];
    let mut resp = httparse::Response::new(&mut headers);
    let len = match resp.parse(buf) {
        Ok(httparse::Status::Complete(len)) => len,
        Ok(httparse::Status::Partial) => return Ok(None),
        Err(e) => return Err(format!("a malformed HTTP response head: {e}")),
    };
    let status = resp.code.unwrap_or_default();
    let mut framing = Framing::Close;
    let mut chunked = false;
    let mut keep_alive = resp.version == Some(1);
    for h in resp.headers.iter() {
        let value = String::from_utf8_lossy(h.value);
        let value = value.trim();
        if h.name.eq_ignore_ascii_case("transfer-encoding") {
            // chunked only when it is the last coding; anything else is read to the close
            chunked = value.rsplit(',').next().is_some_and(|c| c.trim().eq_ignore_ascii_case("chunked"));
            keep_alive &= chunked;
        } else if h.name.eq_ignore_ascii_case("content-length") {
            let n: u64 = value.parse().map_err(|_| format!("a malformed Content-Length: '{value}'"))?;
            if matches!(framing, Framing::Length(m) if m != n) {
                return Err("two different Content-Length headers".into());
            }
            framing = Framing::Length(n);
        } else if h.name.eq_ignore_ascii_case("connection") {
            keep_alive &= !value.split(',').any(|t| t.trim().eq_ignore_ascii_case("close"));
        }
    }
    if chunked {
        framing = Framing::Chunked;
    } else if matches!(status, 204 | 304) {
        framing = Framing::Length(0);
    }
    keep_alive &= framing != Framing::Close;
    let _ = buf.split_to(len);
    Ok(Some(Head { status, framing, keep_alive }))
}

/// An answer's body being read on the connection that carries it. Dropped before the body's
/// end, it closes the connection (that is how the server learns to abort the request); read to
/// a clean end, the connection goes back to the pool.
pub struct Conn {
    /// `None` only once handed back or closed, in `drop`.
    tcp: Option<TcpStream>,
    buf: BytesMut,
    decoder: Decoder,
    /// HTTP/1.1, no `Connection: close`, and a body with a known end.
    reusable: bool,
    /// The stream's `[DONE]` came: the body's last chunk is due at once.
    end_expected: bool,
    pool: Arc<Pool>,
}

impl Conn {
    /// One read: as much as the kernel has. `Ok(0)` at the connection's end.
    pub async fn read(&mut self) -> io::Result<usize> {
        let tcp = self.tcp.as_mut().ok_or(io::ErrorKind::NotConnected)?;
        if self.buf.capacity() - self.buf.len() < READ_ROOM / 4 {
            // Half the buffer: once the last read's events are dropped this reclaims the same
            // allocation in place (asking for all of it would grow it, the bytes held included).
            self.buf.reserve(READ_ROOM / 2);
        }
        tcp.read_buf(&mut self.buf).await
    }

    /// Decodes what has been read; each piece of body data goes to `out`.
    pub fn decode(&mut self, out: &mut impl FnMut(Bytes)) -> Result<(), FramingError> {
        self.decoder.decode(&mut self.buf, out)
    }

    /// The connection closed: the end of a read-to-close body, an error for the others.
    pub fn at_eof(&mut self) -> Result<(), FramingError> {
        self.reusable = false;
        self.decoder.at_eof()
    }

    pub fn is_done(&self) -> bool {
        self.decoder.is_done()
    }

    /// Says that the body's end is due (the stream's `[DONE]` arrived): dropped before it is
    /// read, the connection waits a moment for it rather than being closed.
    pub fn expect_end(&mut self) {
        self.end_expected = true;
    }

    /// The whole body, at most `limit` bytes of it kept, within `timeout` (an error answer's).
    pub async fn read_to_end(&mut self, limit: usize, timeout: Duration) -> Result<Vec<u8>, String> {
        let mut body = Vec::new();
        let read_all = async {
            loop {
                self.decode(&mut |b| keep_upto(&mut body, &b, limit)).map_err(|e| e.to_string())?;
                if self.is_done() {
                    return Ok(());
                }
                match self.read().await {
                    Ok(0) => return self.at_eof().map_err(|e| e.to_string()),
                    Ok(_) => {}
                    Err(e) => return Err(e.to_string()),
                }
            }
        };
        match tokio::time::timeout(timeout, read_all).await {
            Ok(r) => r.map(|()| body),
            Err(_) => Err(format!("the body did not end within {:.0} s", timeout.as_secs_f64())),
        }
    }

    /// The error answer's body, for its excerpt.
    pub async fn error_body(&mut self, timeout: Duration) -> Result<String, String> {
        let body = self.read_to_end(MAX_ERROR_BODY, timeout).await?;
        Ok(String::from_utf8_lossy(&body).into_owned())
    }

    /// Reads what already arrived without waiting, discarding body data: the body's last chunk
    /// may be there already when a stream is dropped after its `[DONE]`.
    fn finish_now(&mut self) -> bool {
        while !self.is_done() {
            if self.decode(&mut |_| {}).is_err() {
                return false;
            }
            if self.is_done() {
                break;
            }
            let Some(tcp) = self.tcp.as_ref() else { return false };
            self.buf.reserve(READ_ROOM);
            match tcp.try_read_buf(&mut self.buf) {
                Ok(n) if n > 0 => {}
                _ => return false,
            }
        }
        true
    }

    fn back_to_pool(&mut self) -> bool {
        if self.reusable
            && self.is_done()
            && self.buf.is_empty()
            && let Some(tcp) = self.tcp.take()
        {
            self.pool.put(tcp);
            return true;
        }
        false
    }
}

fn keep_upto(body: &mut Vec<u8>, piece: &[u8], limit: usize) {
    let room = limit.saturating_sub(body.len());
    body.extend_from_slice(&piece[..piece.len().min(room)]);
}

impl Drop for Conn {
    fn drop(&mut self) {
        if !self.reusable || self.tcp.is_none() {
            return;
        }
        if !self.end_expected && !self.is_done() {
            return; // dropped mid-stream: closing the connection aborts the request
        }
        if self.finish_now() {
            self.back_to_pool();
            return;
        }
        // the last chunk is on its way: wait a moment for it off the request's path
        if let Ok(rt) = tokio::runtime::Handle::try_current() {
            let mut rest = Conn {
                tcp: self.tcp.take(),
                buf: std::mem::take(&mut self.buf),
                decoder: self.decoder.clone(),
                reusable: true,
                end_expected: false,
                pool: Arc::clone(&self.pool),
            };
            rt.spawn(async move {
                let _ = rest.read_to_end(0, LINGER).await;
            });
        }
    }
}
