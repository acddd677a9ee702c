//! The streams' own HTTP/1.1 reader (`sm_client::wire`) against the simulated engine over
//! loopback, with reqwest's reader as the reference; and against tiny hand-written servers
//! for what the sim never does (canned bytes cut anywhere, answers cut short, malformed heads).

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use serde_json::Value;
use sm_client::openai::{Prompt, Reasoning, RequestSpec};
use sm_client::sse::SseEvent;
use sm_client::{Client, ClientError, JsonBody, StreamReader};
use sm_core::record::Api;
use sm_sim::{Profile, SimHandle, SimOptions};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

const IDLE: Duration = Duration::from_secs(10);

async fn tiny(faults: &[&str]) -> SimHandle {
    let mut opts = SimOptions::new(Profile::builtin("tiny").unwrap());
    opts.faults = faults.iter().map(|f| f.parse().unwrap()).collect();
    sm_sim::start(opts).await.unwrap()
}

fn body(model: &str, api: Api, max_tokens: u64) -> (&'static str, JsonBody) {
    let spec = RequestSpec {
        api,
        model: model.to_string(),
        max_tokens,
        stream: true,
        ignore_eos: true,
        continuous_usage: true,
        temperature: None,
        reasoning: Reasoning::default(),
        tools: None,
    };
    let prompt = Prompt { messages: vec![("user".into(), "Tell me a story.".into())] };
    (spec.path(), JsonBody::new(&spec.body(&prompt)))
}

fn clients(url: &str) -> [(StreamReader, Client); 2] {
    let owned = Client::new(url, None, 4).unwrap();
    assert_eq!(owned.stream_reader(), StreamReader::Owned, "plain http:// with no proxy");
    let reqwest = Client::new(url, None, 4).unwrap().with_stream_reader(StreamReader::Reqwest);
    [(StreamReader::Owned, owned), (StreamReader::Reqwest, reqwest)]
}

/// A chunk without what differs between two requests (its id and creation time).
fn stable(event: &SseEvent) -> Value {
    match event {
        SseEvent::Done => Value::String("[DONE]".into()),
        SseEvent::Data(d) => {
            let mut v: Value = serde_json::from_slice(d).unwrap();
            if let Some(o) = v.as_object_mut() {
                o.remove("id");
                o.remove("created");
            }
            v
        }
    }
}

/// Every event to `[DONE]`, checking the arrival instants never go back; then the stream is
/// dropped, as the runner drops it.
async fn events(c: &Client, path: &str, body: &JsonBody) -> Vec<Value> {
    let mut stream = c.stream(path, body, IDLE).await.unwrap();
    let mut last = stream.sent_at;
    let mut out = Vec::new();
    while let Some(ev) = stream.next().await.unwrap() {
        assert!(ev.at >= last, "arrival instants in order");
        last = ev.at;
        out.push(stable(&ev.event));
        if ev.event == SseEvent::Done {
            break;
        }
    }
    out
}

#[tokio::test]
async fn the_owned_reader_yields_what_reqwest_does() {
    let h = tiny(&[]).await;
    for api in [Api::Completions, Api::Chat] {
        let (path, body) = body(h.model(), api, 50);
        let [(_, owned), (_, reqwest)] = clients(&h.url());
        let got = events(&owned, path, &body).await;
        let want = events(&reqwest, path, &body).await;
        assert!(got.len() > 50, "{api:?}: {} events", got.len());
        assert_eq!(got, want, "{api:?}");
    }
    h.shutdown().await;
}

/// A TCP forwarder in front of `to` that counts the connections it accepts.
async fn counting_proxy(to: std::net::SocketAddr) -> (String, Arc<AtomicUsize>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let count = Arc::new(AtomicUsize::new(0));
    let seen = Arc::clone(&count);
    tokio::spawn(async move {
        while let Ok((mut inbound, _)) = listener.accept().await {
            seen.fetch_add(1, Ordering::SeqCst);
            tokio::spawn(async move {
                let mut outbound = TcpStream::connect(to).await.unwrap();
                let _ = tokio::io::copy_bidirectional(&mut inbound, &mut outbound).await;
            });
        }
    });
    (url, count)
}

#[tokio::test]
async fn connections_are_kept_alive_between_requests() {
    let h = tiny(&[]).await;
    let (url, connections) = counting_proxy(h.addr()).await;
    let c = Client::new(&url, None, 4).unwrap();
    let (path, body) = body(h.model(), Api::Completions, 5);
    for _ in 0..6 {
        events(&c, path, &body).await;
        // the body's last chunk may come just after [DONE]: a dropped stream waits for it
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let n = connections.load(Ordering::SeqCst);
    assert!(n < 6, "6 requests took {n} connections");
    // a new connection when asked for one
    let mut fresh = c.stream_on_new_connection(path, &body, IDLE).await.unwrap();
    while fresh.next().await.unwrap().is_some_and(|e| e.event != SseEvent::Done) {}
    assert_eq!(connections.load(Ordering::SeqCst), n + 1);
    h.shutdown().await;
}

#[tokio::test]
async fn an_error_status_carries_its_body_on_both_readers() {
    let h = tiny(&["status=503"]).await;
    let (path, body) = body(h.model(), Api::Chat, 5);
    let mut seen = Vec::new();
    for (reader, c) in clients(&h.url()) {
        match c.stream(path, &body, IDLE).await {
            Err(ClientError::Status { status, body, .. }) => seen.push((status, body)),
            Err(e) => panic!("{reader:?}: {e}"),
            Ok(_) => panic!("{reader:?}: a stream from a 503"),
        }
    }
    assert_eq!(seen[0].0, 503);
    assert!(!seen[0].1.is_empty());
    assert_eq!(seen[0], seen[1], "the same status and excerpt on both readers");
    h.shutdown().await;
}

#[tokio::test]
async fn a_disconnect_mid_stream_is_a_broken_stream_after_the_response() {
    let h = tiny(&["disconnect-after=3"]).await;
    let (path, body) = body(h.model(), Api::Completions, 40);
    for (reader, c) in clients(&h.url()) {
        let mut stream = c.stream(path, &body, IDLE).await.unwrap();
        let end = loop {
            match stream.next().await {
                Ok(Some(_)) => {}
                other => break other,
            }
        };
        assert!(matches!(end, Err(ClientError::Broken { before_response: false, .. })), "{reader:?}: {end:?}");
    }
    h.shutdown().await;
}

/// A server that answers every connection with `answer` cut at `cut` (two writes, apart), or
/// closes at once when `answer` is empty. Reads the request head first.
async fn canned(answer: &'static [u8], cut: usize) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move {
        while let Ok((mut tcp, _)) = listener.accept().await {
            tcp.set_nodelay(true).unwrap();
            tokio::spawn(async move {
                let mut req = Vec::new();
                let mut buf = [0u8; 4096];
                while !req.windows(4).any(|w| w == b"\r\n\r\n") {
                    match tcp.read(&mut buf).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => req.extend_from_slice(&buf[..n]),
                    }
                }
                let _ = tcp.write_all(&answer[..cut]).await;
                tokio::time::sleep(Duration::from_millis(2)).await;
                let _ = tcp.write_all(&answer[cut..]).await;
            });
        }
    });
    url
}

const CANNED: &[u8] = b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n\
    1c\r\ndata: {\"a\":1}\n\ndata: {\"b\":2}\r\n\
    11;ext=x\r\n\n\ndata: {\"c\":3}\n\n\r\n\
    e\r\ndata: [DONE]\n\n\r\n0\r\n\r\n";

/// All events of one stream, or the error that ended it.
async fn all(c: &Client) -> Result<Vec<SseEvent>, ClientError> {
    let body = JsonBody::new(&serde_json::json!({}));
    let mut stream = c.stream("/v1/completions", &body, IDLE).await?;
    let mut out = Vec::new();
    while let Some(ev) = stream.next().await? {
        out.push(ev.event);
    }
    Ok(out)
}

#[tokio::test]
async fn chunked_framing_cut_at_every_byte() {
    let data = |s: &str| SseEvent::Data(bytes::Bytes::copy_from_slice(s.as_bytes()));
    let want = vec![data("{\"a\":1}"), data("{\"b\":2}"), data("{\"c\":3}"), SseEvent::Done];
    for cut in 0..=CANNED.len() {
        let c = Client::new(&canned(CANNED, cut).await, None, 1).unwrap();
        assert_eq!(all(&c).await.unwrap(), want, "cut at byte {cut}");
    }
}

#[tokio::test]
async fn answers_cut_short_or_malformed_are_clear_errors() {
    let start = Instant::now();
    let cases: [(&'static [u8], bool, &str); 6] = [
        (b"", true, "without answering"),
        (b"HTTP/1.1 200 OK\r\ntransfer-en", false, "middle of the response head"),
        (b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n1c\r\ndata: {", false, "middle of a chunked body"),
        (b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\nzz\r\n", false, "not a hexadecimal size"),
        (b"HTTP/1.1 200 OK\r\ncontent-length: 20\r\n\r\ndata: {}\n\n", false, "before the end of the body"),
        (b"HTTP/1.1 2x0 OK\r\n\r\n", false, "malformed HTTP response head"),
    ];
    for (answer, before, says) in cases {
        let c = Client::new(&canned(answer, answer.len()).await, None, 1).unwrap();
        match all(&c).await {
            Err(ClientError::Broken { before_response, reason, .. }) => {
                assert_eq!(before_response, before, "{reason}");
                assert!(reason.contains(says), "{reason}");
            }
            other => panic!("{}: {other:?}", String::from_utf8_lossy(answer)),
        }
    }
    // an SSE event cut short by a clean end of the body
    let cut = b"HTTP/1.1 200 OK\r\ncontent-length: 9\r\n\r\ndata: {}\n";
    let c = Client::new(&canned(cut, cut.len()).await, None, 1).unwrap();
    let e = all(&c).await.unwrap_err().to_string();
    assert!(e.contains("middle of an event"), "{e}");
    // an error answer read to the close
    let err = b"HTTP/1.1 429 Too Many Requests\r\nconnection: close\r\n\r\nslow down\nplease";
    let c = Client::new(&canned(err, err.len()).await, None, 1).unwrap();
    match all(&c).await {
        Err(ClientError::Status { status: 429, body, .. }) => assert_eq!(body, "slow down please"),
        other => panic!("{other:?}"),
    }
    assert!(start.elapsed() < IDLE, "no case waited for a timeout");
}

#[tokio::test]
async fn a_pooled_connection_the_server_closed_is_not_used_again() {
    // a complete keep-alive answer, then the server closes the connection (llama.cpp does)
    let answer = b"HTTP/1.1 200 OK\r\ncontent-length: 14\r\n\r\ndata: [DONE]\n\n";
    let c = Client::new(&canned(answer, answer.len()).await, None, 1).unwrap();
    for _ in 0..3 {
        assert_eq!(all(&c).await.unwrap(), vec![SseEvent::Done]);
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test]
async fn a_server_that_never_answers_times_out_on_the_head() {
    // accepts, reads the request, then holds the connection without a byte of answer
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((tcp, _)) = listener.accept().await {
            held.push(tcp);
        }
    });
    let c = Client::new(&url, None, 1).unwrap();
    let body = JsonBody::new(&serde_json::json!({}));
    match c.stream("/v1/completions", &body, Duration::from_millis(300)).await {
        Err(ClientError::Timeout { secs, .. }) => assert_eq!(secs, 0.3),
        Err(e) => panic!("{e}"),
        Ok(_) => panic!("a stream from a server that never answered"),
    }
}

#[tokio::test]
async fn a_response_head_longer_than_64_kib_is_refused() {
    let mut head = b"HTTP/1.1 200 OK\r\nx-padding: ".to_vec();
    head.extend(std::iter::repeat_n(b'a', 70 * 1024));
    head.extend_from_slice(b"\r\ntransfer-encoding: chunked\r\n\r\n0\r\n\r\n");
    let answer: &'static [u8] = Box::leak(head.into_boxed_slice());
    let c = Client::new(&canned(answer, answer.len()).await, None, 1).unwrap();
    match all(&c).await {
        Err(ClientError::Broken { reason, before_response: false, .. }) => {
            assert!(reason.contains("64 KiB"), "{reason}")
        }
        other => panic!("{other:?}"),
    }
}

/// Whole answers recorded from the real engines the suite runs (a raw socket that sent `Connection: close`, 2026-12-05):
/// vLLM 0.32 CPU behind uvicorn and llama.cpp's llama-server, each a streamed chat answer and an
/// error. Their heads and chunk sizes are the engines' own, not what a test would write.
const RECORDED_STREAMS: [(&str, &[u8]); 2] = [
    ("vllm", include_bytes!("../data/http/vllm-chat.http")),
    ("llamacpp", include_bytes!("../data/http/llamacpp-chat.http")),
];
const RECORDED_ERRORS: [(&str, &[u8], u16); 2] = [
    ("vllm", include_bytes!("../data/http/vllm-404.http"), 404),
    ("llamacpp", include_bytes!("../data/http/llamacpp-400.http"), 400),
];

/// The recorded answers give the owned reader exactly the events reqwest's reader gives, wherever
/// the bytes are cut: every byte through the head and the first chunks, then every seventh.
#[tokio::test]
async fn recorded_engine_answers_read_as_reqwest_reads_them() {
    for (engine, answer) in RECORDED_STREAMS {
        let reference = Client::new(&canned(answer, answer.len()).await, None, 1)
            .unwrap()
            .with_stream_reader(StreamReader::Reqwest);
        let want = all(&reference).await.unwrap();
        assert!(want.len() > 4 && want.last() == Some(&SseEvent::Done), "{engine}: {want:?}");
        let cuts = (0..answer.len().min(700)).chain((700..=answer.len()).step_by(7));
        for cut in cuts {
            let c = Client::new(&canned(answer, cut).await, None, 1).unwrap();
            assert_eq!(c.stream_reader(), StreamReader::Owned);
            assert_eq!(all(&c).await.unwrap(), want, "{engine}: cut at byte {cut}");
        }
    }
    for (engine, answer, status) in RECORDED_ERRORS {
        let mut seen = Vec::new();
        for (reader, c) in clients(&canned(answer, answer.len()).await) {
            match all(&c).await {
                Err(ClientError::Status { status: s, body, .. }) if s == status => seen.push(body),
                other => panic!("{engine} on {reader:?}: {other:?}"),
            }
        }
        assert!(seen[0].contains("error"), "{engine}: {}", seen[0]);
        assert_eq!(seen[0], seen[1], "{engine}: the same excerpt on both readers");
    }
}
