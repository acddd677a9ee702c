//! The read loop's stall timer against the simulated engine, over loopback: it is moved only when
//! it fires, so it must measure silence since the last read, never the stream's whole length.

use std::time::Duration;

use sm_client::openai::{Prompt, Reasoning, RequestSpec};
use sm_client::sse::SseEvent;
use sm_client::{Client, ClientError, JsonBody, StreamReader};
use sm_core::record::Api;
use sm_sim::{Profile, SimHandle, SimOptions};

async fn tiny(faults: &[&str]) -> SimHandle {
    let mut opts = SimOptions::new(Profile::builtin("tiny").unwrap());
    opts.faults = faults.iter().map(|f| f.parse().unwrap()).collect();
    sm_sim::start(opts).await.unwrap()
}

fn body(h: &SimHandle, max_tokens: u64) -> (&'static str, JsonBody) {
    let spec = RequestSpec {
        api: Api::Completions,
        model: h.model().to_string(),
        max_tokens,
        stream: true,
        ignore_eos: true,
        continuous_usage: false,
        temperature: None,
        reasoning: Reasoning::default(),
        tools: None,
    };
    let prompt = Prompt { messages: vec![("user".into(), "Tell me a story.".into())] };
    (spec.path(), JsonBody::new(&spec.body(&prompt)))
}

/// Events until the end or an error; `Ok(events)` at a clean end.
async fn drain(stream: &mut sm_client::http::EventStream) -> Result<usize, ClientError> {
    let mut n = 0;
    while let Some(ev) = stream.next().await? {
        n += 1;
        if ev.event == SseEvent::Done {
            break;
        }
    }
    Ok(n)
}

#[tokio::test]
async fn a_stream_longer_than_the_idle_timeout_is_not_stalled() {
    let h = tiny(&[]).await;
    let c = Client::new(&h.url(), None, 4).unwrap();
    let (path, body) = body(&h, 400);
    // 400 tokens at the tiny profile's ~2 ms step: about 0.8 s, four times the idle timeout
    let idle = Duration::from_millis(200);
    let mut stream = c.stream(path, &body, idle).await.unwrap();
    let events = drain(&mut stream).await.expect("a steady stream never stalls");
    assert!(events > 400, "{events} events");
    h.shutdown().await;
}

#[tokio::test]
async fn a_silent_stream_stalls_after_the_idle_timeout_it_has_now() {
    let h = tiny(&["stall-after=2"]).await;
    for reader in [StreamReader::Owned, StreamReader::Reqwest] {
        let c = Client::new(&h.url(), None, 4).unwrap().with_stream_reader(reader);
        let (path, body) = body(&h, 40);
        // a long wait for the first token, then a short one between tokens (as the runner sets it)
        let mut stream = c.stream(path, &body, Duration::from_secs(3600)).await.unwrap();
        stream.next().await.unwrap().expect("the first chunk");
        stream.set_idle_timeout(Duration::from_millis(200));
        let end = tokio::time::timeout(Duration::from_secs(20), drain(&mut stream)).await;
        match end.expect("the shortened timeout applies to the silence already under way") {
            Err(ClientError::Stalled { secs }) => assert_eq!(secs, 0.2, "{reader:?}"),
            other => panic!("{reader:?}: expected a stall, got {other:?}"),
        }
    }
    h.shutdown().await;
}
