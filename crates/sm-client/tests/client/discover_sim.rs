//! Discovery against the simulated engine in each flavor, over loopback.

use std::time::{Duration, Instant};

use serde_json::json;
use sm_client::Client;
use sm_client::discover::{
    self, DiscoverError, Engine, Overrides, ServerFacts, TokenizeApi, count_tokens, scheduler_state,
};
use sm_client::openai::{Prompt, Reasoning, RequestSpec, parse_chunk};
use sm_client::sse::SseEvent;
use sm_core::record::Api;
use sm_sim::{Flavor, Profile, SimHandle, SimOptions};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// The `tiny` profile's limits.
const MAX_MODEL_LEN: u64 = 16384;
const KV_TOKENS: u64 = 131072;
const MAX_NUM_SEQS: u32 = 64;

async fn sim_with(flavor: Flavor, f: impl FnOnce(&mut SimOptions)) -> SimHandle {
    let mut opts = SimOptions { flavor, ..SimOptions::new(Profile::builtin("tiny").expect("tiny profile")) };
    f(&mut opts);
    sm_sim::start(opts).await.expect("sim starts")
}

async fn sim(flavor: Flavor) -> SimHandle {
    sim_with(flavor, |_| {}).await
}

fn client(h: &SimHandle, key: Option<&str>) -> Client {
    Client::new(&h.url(), key.map(str::to_string), 8).unwrap()
}

async fn discover_default(h: &SimHandle) -> ServerFacts {
    discover::discover(&client(h, None), &Overrides::default()).await.expect("discovery works")
}

#[tokio::test]
async fn vllm_flavor() {
    let h = sim(Flavor::Vllm).await;
    let f = discover_default(&h).await;
    assert_eq!(f.engine, Engine::Vllm);
    assert!(f.engine_version.as_deref().is_some_and(|v| v.ends_with("+sim")), "{:?}", f.engine_version);
    assert_eq!(f.model, h.model());
    assert_eq!(f.max_model_len, Some(MAX_MODEL_LEN));
    assert_eq!(f.kv_budget, Some(KV_TOKENS));
    assert_eq!(f.kv_budget_source, "vllm:cache_config_info kv_cache_size_tokens");
    assert_eq!(f.block_size, Some(16));
    assert_eq!((f.max_num_seqs, f.max_num_seqs_source.as_str()), (Some(256), "vLLM default"));
    assert!(f.metrics_available);
    assert_eq!(f.tokenize, TokenizeApi::Vllm);
    assert!(!f.abort_request);

    let launch = Overrides {
        launch_command: Some(format!("vllm serve {} --max-num-seqs {MAX_NUM_SEQS}", h.model())),
        ..Overrides::default()
    };
    let f = discover::discover(&client(&h, None), &launch).await.unwrap();
    assert_eq!(f.max_num_seqs, Some(MAX_NUM_SEQS));
    assert_eq!(f.max_num_seqs_source, "launch command --max-num-seqs");
    h.shutdown().await;
}

#[tokio::test]
async fn sglang_flavor() {
    let h = sim(Flavor::Sglang).await;
    let f = discover_default(&h).await;
    assert_eq!(f.engine, Engine::Sglang);
    assert!(f.engine_version.is_some());
    assert_eq!(
        (f.max_model_len, f.kv_budget, f.max_num_seqs),
        (Some(MAX_MODEL_LEN), Some(KV_TOKENS), Some(MAX_NUM_SEQS))
    );
    assert_eq!(f.kv_budget_source, "sglang:/get_server_info max_total_num_tokens");
    assert!(f.metrics_available);
    assert_eq!(f.tokenize, TokenizeApi::None);
    assert!(f.abort_request);
    h.shutdown().await;
}

#[tokio::test]
async fn llamacpp_flavor() {
    let h = sim(Flavor::Llamacpp).await;
    let f = discover_default(&h).await;
    let slot_ctx = KV_TOKENS / u64::from(MAX_NUM_SEQS);
    assert_eq!(f.engine, Engine::Llamacpp);
    assert_eq!(f.engine_version.as_deref(), Some("b0000-sim"));
    assert_eq!(f.max_num_seqs, Some(MAX_NUM_SEQS));
    assert_eq!(f.max_model_len, Some(slot_ctx));
    assert_eq!(f.kv_budget, Some(slot_ctx * u64::from(MAX_NUM_SEQS)));
    assert_eq!(f.kv_budget_source, "llama.cpp /slots n_ctx × total_slots");
    assert_eq!(f.extra["n_ctx_train"], MAX_MODEL_LEN);
    assert!(f.metrics_available);
    assert_eq!(f.tokenize, TokenizeApi::Llamacpp);
    assert!(!f.abort_request);
    h.shutdown().await;
}

#[tokio::test]
async fn tgi_flavor() {
    let h = sim(Flavor::Tgi).await;
    let f = discover_default(&h).await;
    assert_eq!(f.engine, Engine::Tgi);
    assert_eq!(f.engine_version.as_deref(), Some("3.0.0-sim"));
    assert_eq!(
        (f.max_model_len, f.kv_budget, f.max_num_seqs),
        (Some(MAX_MODEL_LEN), Some(KV_TOKENS), Some(MAX_NUM_SEQS))
    );
    assert!(f.metrics_available);
    assert_eq!(f.tokenize, TokenizeApi::None);
    h.shutdown().await;
}

#[tokio::test]
async fn generic_flavor_behind_a_proxy() {
    let h = sim(Flavor::Generic).await;
    let f = discover_default(&h).await;
    assert_eq!(f.engine, Engine::Generic);
    assert_eq!(f.max_model_len, Some(MAX_MODEL_LEN));
    assert_eq!((f.kv_budget, f.kv_budget_source.as_str()), (None, "unknown"));
    assert!(!f.metrics_available);
    assert_eq!(f.tokenize, TokenizeApi::None);
    assert!(f.warnings.iter().any(|w| w.contains("only /v1 endpoints answer")), "{:?}", f.warnings);
    assert!(f.warnings.iter().any(|w| w.contains("/metrics") && w.contains("502")), "{:?}", f.warnings);
    assert!(f.warnings.iter().any(|w| w.contains("--kv-budget")), "{:?}", f.warnings);

    let o = Overrides { kv_budget: Some(50_000), max_num_seqs: Some(4), ..Overrides::default() };
    let f = discover::discover(&client(&h, None), &o).await.unwrap();
    assert_eq!((f.kv_budget, f.kv_budget_source.as_str()), (Some(50_000), "--kv-budget"));
    assert_eq!((f.max_num_seqs, f.max_num_seqs_source.as_str()), (Some(4), "--max-num-seqs"));
    assert_eq!(scheduler_state(&client(&h, None), f.engine).await.unwrap(), None);
    h.shutdown().await;
}

#[tokio::test]
async fn overrides_win_over_the_server() {
    let h = sim(Flavor::Sglang).await;
    let o =
        Overrides { kv_budget: Some(1000), max_num_seqs: Some(2), max_model_len: Some(4096), ..Overrides::default() };
    let f = discover::discover(&client(&h, None), &o).await.unwrap();
    assert_eq!((f.kv_budget, f.max_num_seqs, f.max_model_len), (Some(1000), Some(2), Some(4096)));
    assert_eq!(f.kv_budget_source, "--kv-budget");
    h.shutdown().await;
}

#[tokio::test]
async fn api_key_errors_say_what_to_do() {
    let h = sim_with(Flavor::Vllm, |o| o.api_key = Some("s3cret-key".into())).await;
    for (key, says) in [(None, "asks for an API key"), (Some("wrong"), "refused the API key")] {
        let err = discover::discover(&client(&h, key), &Overrides::default()).await.unwrap_err();
        assert!(matches!(err, DiscoverError::Unauthorized { status: 401, key_sent } if key_sent == key.is_some()));
        let msg = err.to_string();
        assert!(msg.contains("--api-key") && msg.contains("OPENAI_API_KEY") && msg.contains(says), "{msg}");
        assert!(!msg.contains("wrong"), "{msg}");
    }
    let f = discover::discover(&client(&h, Some("s3cret-key")), &Overrides::default()).await.unwrap();
    assert_eq!(f.engine, Engine::Vllm);
    h.shutdown().await;
}

#[tokio::test]
async fn unknown_model_lists_the_served_ids() {
    let h = sim_with(Flavor::Vllm, |o| o.model = Some("served-model".into())).await;
    let o = Overrides { model: Some("gpt-4".into()), ..Overrides::default() };
    let err = discover::discover(&client(&h, None), &o).await.unwrap_err();
    let msg = err.to_string();
    assert!(matches!(err, DiscoverError::UnknownModel { .. }), "{err:?}");
    assert!(msg.contains("gpt-4") && msg.contains("served-model") && msg.contains("--model"), "{msg}");
    let o = Overrides { model: Some("served-model".into()), ..Overrides::default() };
    assert_eq!(discover::discover(&client(&h, None), &o).await.unwrap().model, "served-model");
    h.shutdown().await;
}

#[tokio::test]
async fn nothing_listening() {
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let c = Client::new(&format!("http://127.0.0.1:{port}"), None, 1).unwrap();
    let err = discover::discover(&c, &Overrides::default()).await.unwrap_err();
    assert!(matches!(err, DiscoverError::Unreachable { .. }), "{err:?}");
    assert!(err.to_string().contains("is the server running? check --url"), "{err}");
}

/// A server that answers every request with one canned response.
async fn canned(status: &'static str, content_type: &'static str, body: &'static str) -> String {
    let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = l.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((mut s, _)) = l.accept().await {
            tokio::spawn(async move {
                let mut buf = Vec::new();
                let mut piece = [0u8; 1024];
                while !buf.windows(4).any(|w| w == b"\r\n\r\n") {
                    match s.read(&mut piece).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => buf.extend_from_slice(&piece[..n]),
                    }
                }
                let resp = format!(
                    "HTTP/1.1 {status}\r\ncontent-type: {content_type}\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                    body.len()
                );
                let _ = s.write_all(resp.as_bytes()).await;
            });
        }
    });
    format!("http://{addr}")
}

#[tokio::test]
async fn not_an_openai_server() {
    let url = canned("404 Not Found", "text/html", "<h1>Not Found</h1>").await;
    let err = discover::discover(&Client::new(&url, None, 1).unwrap(), &Overrides::default()).await.unwrap_err();
    assert!(matches!(err, DiscoverError::NotOpenAi { .. }), "{err:?}");
    assert!(err.to_string().contains("no /v1/models") && err.to_string().contains("check the URL"), "{err}");

    let url = canned("200 OK", "text/html", "<html>welcome</html>").await;
    let err = discover::discover(&Client::new(&url, None, 1).unwrap(), &Overrides::default()).await.unwrap_err();
    assert!(matches!(err, DiscoverError::ModelsMalformed { .. }), "{err:?}");

    let url = canned("200 OK", "application/json", r#"{"object":"list","data":[]}"#).await;
    let err = discover::discover(&Client::new(&url, None, 1).unwrap(), &Overrides::default()).await.unwrap_err();
    assert!(matches!(err, DiscoverError::NoModels), "{err:?}");
}

fn stream_spec(model: &str, max_tokens: u64) -> RequestSpec {
    RequestSpec {
        api: Api::Chat,
        model: model.to_string(),
        max_tokens,
        stream: true,
        ignore_eos: true,
        continuous_usage: false,
        temperature: None,
        reasoning: Reasoning::default(),
        tools: None,
    }
}

/// Polls the scheduler gauges until `want` holds (the engine updates them between steps).
async fn wait_running(c: &Client, engine: Engine, want: impl Fn(f64) -> bool) -> f64 {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let s = scheduler_state(c, engine).await.unwrap().expect("gauges present");
        if want(s.running) || Instant::now() > deadline {
            return s.running;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test]
async fn scheduler_gauges_follow_a_stream() {
    for flavor in [Flavor::Vllm, Flavor::Sglang, Flavor::Llamacpp, Flavor::Tgi] {
        let h = sim(flavor).await;
        let c = client(&h, None);
        let f = discover::discover(&c, &Overrides::default()).await.unwrap();
        let idle = scheduler_state(&c, f.engine).await.unwrap().unwrap();
        assert_eq!((idle.running, idle.waiting), (0.0, 0.0), "{flavor}");

        // Long enough (seconds at the tiny profile's step) to outlast the checks below,
        // short enough for llama.cpp's per-slot context.
        let spec = stream_spec(&f.model, f.max_model_len.unwrap().min(5000) - 64);
        let prompt = Prompt { messages: vec![("user".into(), "Tell me a long story.".into())] };
        let mut stream = c
            .stream(spec.path(), &sm_client::JsonBody::new(&spec.body(&prompt)), Duration::from_secs(10))
            .await
            .unwrap();
        let mut rid = None;
        while rid.is_none() {
            match stream.next().await.unwrap().expect("the stream produces chunks").event {
                SseEvent::Data(d) => rid = parse_chunk(&d).unwrap().id,
                SseEvent::Done => panic!("{flavor}: ended before any chunk"),
            }
        }
        assert_eq!(wait_running(&c, f.engine, |r| r >= 1.0).await, 1.0, "{flavor}");

        if f.abort_request {
            // SGLang: abort while the stream is open; the engine stops although we still hold it.
            discover::abort_request(&c, rid.as_deref().unwrap()).await.unwrap();
            assert_eq!(wait_running(&c, f.engine, |r| r == 0.0).await, 0.0, "{flavor}: abort");
            drop(stream);
        } else {
            drop(stream);
            assert_eq!(wait_running(&c, f.engine, |r| r == 0.0).await, 0.0, "{flavor}: disconnect");
        }
        h.shutdown().await;
    }
}

/// The server's count must equal the prompt tokens it then bills for the same prompt.
async fn billed_prompt_tokens(c: &Client, model: &str, api: Api, prompt: &Prompt) -> u64 {
    let spec = RequestSpec {
        api,
        model: model.to_string(),
        max_tokens: 1,
        stream: false,
        ignore_eos: false,
        continuous_usage: false,
        temperature: None,
        reasoning: Reasoning::default(),
        tools: None,
    };
    let v = c.post_json(spec.path(), &spec.body(prompt), Duration::from_secs(10)).await.unwrap();
    v["usage"]["prompt_tokens"].as_u64().expect("usage.prompt_tokens")
}

#[tokio::test]
async fn token_counts_match_usage() {
    let prompt = Prompt {
        messages: vec![
            ("system".into(), "You are terse.".into()),
            ("user".into(), "Summarise the history of the printing press in three sentences, please.".into()),
        ],
    };
    let h = sim(Flavor::Vllm).await;
    let c = client(&h, None);
    let f = discover::discover(&c, &Overrides::default()).await.unwrap();
    for api in [Api::Chat, Api::Completions] {
        let n =
            count_tokens(&c, &f, (api, &Reasoning::default()), &prompt).await.unwrap().expect("vLLM counts both forms");
        assert_eq!(n, billed_prompt_tokens(&c, &f.model, api, &prompt).await, "{api:?}");
    }
    let chat = count_tokens(&c, &f, (Api::Chat, &Reasoning::default()), &prompt).await.unwrap().unwrap();
    let text = count_tokens(&c, &f, (Api::Completions, &Reasoning::default()), &prompt).await.unwrap().unwrap();
    assert_ne!(chat, text, "the chat template adds tokens");
    h.shutdown().await;

    let h = sim(Flavor::Llamacpp).await;
    let c = client(&h, None);
    let f = discover::discover(&c, &Overrides::default()).await.unwrap();
    let n = count_tokens(&c, &f, (Api::Completions, &Reasoning::default()), &prompt).await.unwrap().unwrap();
    assert_eq!(n, billed_prompt_tokens(&c, &f.model, Api::Completions, &prompt).await);
    assert_eq!(count_tokens(&c, &f, (Api::Chat, &Reasoning::default()), &prompt).await.unwrap(), None);
    h.shutdown().await;

    let h = sim(Flavor::Sglang).await;
    let c = client(&h, None);
    let f = discover::discover(&c, &Overrides::default()).await.unwrap();
    assert_eq!(count_tokens(&c, &f, (Api::Chat, &Reasoning::default()), &prompt).await.unwrap(), None);
    // The probe must not have invented an endpoint: SGLang's sim has no /tokenize.
    assert!(c.post_json("/tokenize", &json!({"prompt": "x"}), Duration::from_secs(5)).await.is_err());
    h.shutdown().await;
}
