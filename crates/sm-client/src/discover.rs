//! Engine adapters: what a server is and what it can hold (methodology §1 step 1, §4).
//!
//! `GET /v1/models` must work; everything after it is a probe that may fail
//! without failing discovery, because reverse proxies answer 502 or an HTML page
//! for the engine-specific paths (reference-tool §4.1). The user's overrides win
//! over every discovered value.

mod engines;
mod gauges;
pub mod host;
mod scheduler;
mod tokenize;

use std::time::Duration;

use serde_json::{Map, Value};

use crate::http::{Client, ClientError, excerpt};
use crate::metrics::Metrics;

pub use gauges::{histogram, server_scrape, server_scrape_from};
pub use host::{hardware, launch_command_for_port};
pub use scheduler::{SchedulerState, abort_request, scheduler_state, scheduler_state_from, spec_counters};
pub use tokenize::{count_tokens, token_ids};

/// Discovery probes answer fast on a healthy server; a slow one is not worth waiting for.
const PROBE_TIMEOUT: Duration = Duration::from_secs(10);

pub use sm_core::engine::Engine;

/// How the server counts prompt tokens, if it can.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TokenizeApi {
    None,
    /// `POST /tokenize {"model", "messages" | "prompt"}` → `{"count"}`.
    Vllm,
    /// `POST /tokenize {"content"}` → `{"tokens": [..]}`; plain text only, so it
    /// can count completions prompts but not chat templates.
    Llamacpp,
}

#[derive(Debug, Clone, PartialEq)]
pub struct ServerFacts {
    pub engine: Engine,
    pub engine_version: Option<String>,
    pub model: String,
    pub max_model_len: Option<u64>,
    pub kv_budget: Option<u64>,
    /// Where the budget came from, e.g. `vllm:cache_config_info kv_cache_size_tokens`, `--kv-budget`, `unknown`.
    pub kv_budget_source: String,
    pub block_size: Option<u64>,
    pub max_num_seqs: Option<u32>,
    pub max_num_seqs_source: String,
    /// The engine's scheduler gauges (running, waiting) are in `/metrics`.
    pub metrics_available: bool,
    pub tokenize: TokenizeApi,
    /// SGLang keeps generating after a client disconnect unless told to abort.
    pub abort_request: bool,
    pub warnings: Vec<String>,
    pub extra: Map<String, Value>,
}

impl ServerFacts {
    fn new(engine: Engine, model: String) -> ServerFacts {
        ServerFacts {
            engine,
            engine_version: None,
            model,
            max_model_len: None,
            kv_budget: None,
            kv_budget_source: "unknown".into(),
            block_size: None,
            max_num_seqs: None,
            max_num_seqs_source: "unknown".into(),
            metrics_available: false,
            tokenize: TokenizeApi::None,
            abort_request: false,
            warnings: Vec::new(),
            extra: Map::new(),
        }
    }

    /// The `server` part of the run record.
    pub fn server_info(&self, url: &str) -> sm_core::record::ServerInfo {
        let mut extra = self.extra.clone();
        if let Some(b) = self.block_size {
            extra.insert("block_size".into(), b.into());
        }
        extra.insert("max_num_seqs_source".into(), self.max_num_seqs_source.clone().into());
        sm_core::record::ServerInfo {
            url: url.to_string(),
            engine: self.engine,
            engine_version: self.engine_version.clone(),
            model: self.model.clone(),
            max_model_len: self.max_model_len,
            kv_budget_tokens: self.kv_budget,
            kv_budget_source: self.kv_budget_source.clone(),
            max_num_seqs: self.max_num_seqs,
            metrics_available: self.metrics_available,
            tokenize_available: self.tokenize != TokenizeApi::None,
            extra,
        }
    }
}

/// Limits and facts the user states; each wins over what the server says.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Overrides {
    pub model: Option<String>,
    pub kv_budget: Option<u64>,
    pub max_num_seqs: Option<u32>,
    pub max_model_len: Option<u64>,
    /// The server's launch command, already redacted; read for `--max-num-seqs` and similar.
    pub launch_command: Option<String>,
}

#[derive(Debug, thiserror::Error)]
pub enum DiscoverError {
    #[error("cannot reach {url}: {reason} — is the server running? check --url")]
    Unreachable { url: String, reason: String },
    #[error(
        "the host name '{host}' of {url} does not resolve ({reason}) — check the name in --url and this machine's DNS, or use the server's IP address"
    )]
    Dns { host: String, url: String, reason: String },
    #[error(
        "TLS with {url} failed: {reason} — does the server speak HTTPS (else use http://), and is its certificate valid?"
    )]
    Tls { url: String, reason: String },
    #[error(
        "GET /v1/models did not answer within {secs:.0} s — the server may be starting or overloaded; retry, or check --url"
    )]
    Timeout { secs: f64 },
    #[error("HTTP {status} from /v1/models — {}", crate::error::refusal(*status, *key_sent).unwrap_or("the server refused the request"))]
    Unauthorized { status: u16, key_sent: bool },
    #[error("{url} is not an OpenAI-compatible server (no /v1/models) — check the URL")]
    NotOpenAi { url: String },
    #[error("GET /v1/models answered HTTP {status}: {body} — check --url and the server's log")]
    ModelsFailed { status: u16, body: String },
    #[error(
        "GET /v1/models did not answer an OpenAI model list ({reason}) — check that --url is the server's base URL"
    )]
    ModelsMalformed { reason: String },
    #[error("the server lists no models — pass the model id with --model")]
    NoModels,
    #[error("model '{model}' is not served here (served: {served}) — pass one of these with --model")]
    UnknownModel { model: String, served: String },
}

/// One entry of `/v1/models`.
#[derive(Debug, Clone, PartialEq)]
struct ModelEntry {
    id: String,
    max_model_len: Option<u64>,
    owned_by: Option<String>,
    /// llama.cpp's training context (`meta.n_ctx_train`).
    n_ctx_train: Option<u64>,
}

/// What an optional endpoint answered.
#[derive(Debug, Clone)]
enum Probe {
    Json(Value),
    Text(String),
    /// 404/405/501: the path does not exist here, which is normal.
    Absent,
    /// Something answered, but not the engine: a proxy's 502, an HTML page, a timeout.
    Odd(String),
}

impl Probe {
    fn json(&self) -> Option<&Value> {
        match self {
            Probe::Json(v) => Some(v),
            _ => None,
        }
    }
}

async fn probe(client: &Client, path: &str) -> Probe {
    let resp = match client.get(path, PROBE_TIMEOUT).await {
        Ok(r) => r,
        Err(e) => return Probe::Odd(e.to_string()),
    };
    if matches!(resp.status, 404 | 405 | 501) {
        return Probe::Absent;
    }
    if !resp.is_success() {
        return Probe::Odd(format!("HTTP {} ({})", resp.status, describe_body(&resp.content_type, &resp.body)));
    }
    if resp.content_type.contains("html") || resp.body.trim_start().starts_with('<') {
        return Probe::Odd(format!("an HTML page, not the engine ({})", excerpt_short(&resp.body)));
    }
    match serde_json::from_str(&resp.body) {
        Ok(v) => Probe::Json(v),
        Err(_) => Probe::Text(resp.body),
    }
}

fn describe_body(content_type: &str, body: &str) -> String {
    if content_type.is_empty() { excerpt_short(body) } else { format!("{content_type}: {}", excerpt_short(body)) }
}

fn excerpt_short(body: &str) -> String {
    let e = excerpt(body);
    match e.char_indices().nth(80) {
        Some((i, _)) => format!("{}…", &e[..i]),
        None => e,
    }
}

/// rustls reports a plain-HTTP answer as a corrupt message, and bad certificates by name.
fn looks_like_tls(reason: &str) -> bool {
    let r = reason.to_ascii_lowercase();
    ["corrupt message", "certificate", "tls", "handshake", "invalidcontenttype"].iter().any(|w| r.contains(w))
}

/// The system resolver's words for a name it cannot resolve (glibc, macOS, Windows), and hyper's.
fn looks_like_dns(reason: &str) -> bool {
    let r = reason.to_ascii_lowercase();
    [
        "failed to lookup address",
        "dns error",
        "name or service not known",
        "nodename nor servname",
        "no such host",
        "name resolution",
    ]
    .iter()
    .any(|w| r.contains(w))
}

/// Why `GET /v1/models` got no answer at all, with the fix.
fn unreachable(base: &str, e: ClientError) -> DiscoverError {
    match e {
        ClientError::Timeout { secs, .. } => DiscoverError::Timeout { secs },
        ClientError::Connect { url, reason } if url.starts_with("https://") && looks_like_tls(&reason) => {
            DiscoverError::Tls { url, reason }
        }
        ClientError::Connect { url, reason } if looks_like_dns(&reason) => {
            let host = reqwest::Url::parse(&url).ok().and_then(|u| u.host_str().map(str::to_string));
            DiscoverError::Dns { host: host.unwrap_or_else(|| url.clone()), url, reason }
        }
        ClientError::Connect { url, reason } => DiscoverError::Unreachable { url, reason },
        other => DiscoverError::Unreachable { url: base.to_string(), reason: other.to_string() },
    }
}

/// Discovers the engine, the model and its limits.
pub async fn discover(client: &Client, overrides: &Overrides) -> Result<ServerFacts, DiscoverError> {
    let models = read_models(client).await?;
    let entry = pick_model(&models, overrides.model.as_deref())?;

    let (info, version, props, tgi_info, metrics_probe) = tokio::join!(
        probe(client, "/get_server_info"),
        probe(client, "/version"),
        probe(client, "/props"),
        probe(client, "/info"),
        probe(client, "/metrics"),
    );
    let metrics = match &metrics_probe {
        Probe::Text(t) => Some(Metrics::parse(t)).filter(|m| !m.is_empty()),
        _ => None,
    };
    let engine = engines::detect(info.json(), version.json(), props.json(), tgi_info.json(), metrics.as_ref());
    let mut facts = ServerFacts::new(engine, entry.id.clone());
    facts.max_model_len = entry.max_model_len;
    let launch = overrides.launch_command.as_deref();

    match engine {
        Engine::Vllm => engines::vllm(&mut facts, version.json(), metrics.as_ref(), launch),
        Engine::Sglang => engines::sglang(&mut facts, info.json()),
        Engine::Llamacpp => {
            let slots = probe(client, "/slots").await;
            engines::llamacpp(&mut facts, props.json(), slots.json(), entry.n_ctx_train, launch);
        }
        Engine::Tgi => engines::tgi(&mut facts, tgi_info.json()),
        Engine::Generic => {
            facts
                .warnings
                .push("only /v1 endpoints answer; measuring from the stream alone (no scheduler gauges)".into());
            for (path, p) in [("/version", &version), ("/metrics", &metrics_probe)] {
                if let Probe::Odd(what) = p {
                    facts.warnings.push(format!(
                        "GET {path} answered {what}; a reverse proxy may be in front of the engine — treating the server as generic"
                    ));
                }
            }
        }
    }
    if let Some(owner) = &entry.owned_by {
        facts.extra.insert("owned_by".into(), owner.clone().into());
    }

    facts.metrics_available = metrics.as_ref().is_some_and(|m| scheduler_state_from(m, engine).is_some());
    if !facts.metrics_available && engine != Engine::Generic {
        facts.warnings.push(metrics_hint(engine, &metrics_probe));
    }
    facts.tokenize = tokenize::probe(client, &facts).await;
    facts.abort_request = engine == Engine::Sglang;

    apply_overrides(&mut facts, overrides);
    if facts.max_model_len.is_none() {
        facts
            .warnings
            .push("max_model_len is unknown: contexts are not fitted to the model — pass --max-model-len".into());
    }
    if facts.kv_budget.is_none() {
        facts
            .warnings
            .push("the KV cache budget is unknown: no cell is skipped as over capacity — pass --kv-budget".into());
    }
    Ok(facts)
}

fn metrics_hint(engine: Engine, probe: &Probe) -> String {
    let what = match probe {
        Probe::Absent => "does not exist".to_string(),
        Probe::Odd(w) => format!("answered {w}"),
        Probe::Json(_) | Probe::Text(_) => format!("has no {engine} scheduler gauges"),
    };
    let fix = match engine {
        Engine::Sglang => "restart SGLang with --enable-metrics",
        Engine::Llamacpp => "start llama-server with --metrics",
        _ => "check that /metrics reaches the engine, not a proxy",
    };
    format!("GET /metrics {what}: readiness and drain use the client's own stream counts — {fix}")
}

async fn read_models(client: &Client) -> Result<Vec<ModelEntry>, DiscoverError> {
    let resp = client.get("/v1/models", PROBE_TIMEOUT).await.map_err(|e| unreachable(client.base(), e))?;
    match resp.status {
        401 | 403 => {
            return Err(DiscoverError::Unauthorized { status: resp.status, key_sent: client.has_api_key() });
        }
        404 => {
            return Err(DiscoverError::NotOpenAi { url: client.base().to_string() });
        }
        s if !(200..300).contains(&s) => {
            return Err(DiscoverError::ModelsFailed { status: s, body: excerpt(&resp.body) });
        }
        _ => {}
    }
    parse_models(&resp.body)
}

fn parse_models(body: &str) -> Result<Vec<ModelEntry>, DiscoverError> {
    let malformed = |reason: &str| DiscoverError::ModelsMalformed { reason: reason.to_string() };
    let v: Value = serde_json::from_str(body).map_err(|_| malformed(&format!("not JSON: {}", excerpt_short(body))))?;
    let data = v.get("data").and_then(Value::as_array).ok_or_else(|| malformed("no \"data\" list"))?;
    Ok(data
        .iter()
        .filter_map(|m| {
            Some(ModelEntry {
                id: m.get("id")?.as_str()?.to_string(),
                max_model_len: m.get("max_model_len").and_then(Value::as_u64),
                owned_by: m.get("owned_by").and_then(Value::as_str).map(str::to_string),
                n_ctx_train: m.pointer("/meta/n_ctx_train").and_then(Value::as_u64),
            })
        })
        .collect())
}

fn pick_model<'a>(models: &'a [ModelEntry], wanted: Option<&str>) -> Result<&'a ModelEntry, DiscoverError> {
    match wanted {
        None => models.first().ok_or(DiscoverError::NoModels),
        Some(w) => models.iter().find(|m| m.id == w).ok_or_else(|| DiscoverError::UnknownModel {
            model: w.to_string(),
            served: if models.is_empty() {
                "none".into()
            } else {
                models.iter().map(|m| m.id.as_str()).collect::<Vec<_>>().join(", ")
            },
        }),
    }
}

fn apply_overrides(facts: &mut ServerFacts, o: &Overrides) {
    if let Some(kv) = o.kv_budget {
        facts.kv_budget = Some(kv);
        facts.kv_budget_source = "--kv-budget".into();
    }
    if let Some(n) = o.max_num_seqs {
        facts.max_num_seqs = Some(n);
        facts.max_num_seqs_source = "--max-num-seqs".into();
    }
    if let Some(len) = o.max_model_len {
        facts.max_model_len = Some(len);
        facts.extra.insert("max_model_len_source".into(), "--max-model-len".into());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_name_that_does_not_resolve_is_told_apart_from_a_server_that_is_down() {
        let connect = |url: &str, reason: &str| ClientError::Connect { url: url.into(), reason: reason.into() };
        let gai = "failed to lookup address information: Name or service not known";
        let e = unreachable("http://gpu-box.invalid:8000", connect("http://gpu-box.invalid:8000", gai)).to_string();
        assert!(e.contains("'gpu-box.invalid'") && e.contains("does not resolve") && e.contains("IP address"), "{e}");
        assert!(!e.contains('\n'), "one line: {e}");
        let e = unreachable("http://127.0.0.1:9", connect("http://127.0.0.1:9", "Connection refused (os error 111)"));
        assert!(matches!(e, DiscoverError::Unreachable { .. }), "{e}");
    }

    #[test]
    fn engine_names_round_trip() {
        for e in Engine::ALL {
            assert_eq!(e.to_string().parse::<Engine>().unwrap(), e);
        }
        assert_eq!(Engine::Llamacpp.to_string(), "llamacpp");
        assert!("ollama".parse::<Engine>().unwrap_err().contains("vllm"));
    }

    #[test]
    fn models_list_and_choice() {
        let body = r#"{"object":"list","data":[
            {"id":"ling","object":"model","owned_by":"vllm","max_model_len":262144},
            {"id":"tiny-llama","object":"model","owned_by":"llamacpp","meta":{"n_ctx_train":32768}}]}"#;
        let models = parse_models(body).unwrap();
        assert_eq!(models.len(), 2);
        assert_eq!(pick_model(&models, None).unwrap().max_model_len, Some(262144));
        let second = pick_model(&models, Some("tiny-llama")).unwrap();
        assert_eq!((second.n_ctx_train, second.owned_by.as_deref()), (Some(32768), Some("llamacpp")));
        let err = pick_model(&models, Some("gpt-4")).unwrap_err().to_string();
        assert!(err.contains("'gpt-4'") && err.contains("ling, tiny-llama") && err.contains("--model"), "{err}");
        assert!(matches!(pick_model(&[], None), Err(DiscoverError::NoModels)));
        assert!(matches!(parse_models("<html>"), Err(DiscoverError::ModelsMalformed { .. })));
        assert!(matches!(parse_models("{\"models\":[]}"), Err(DiscoverError::ModelsMalformed { .. })));
    }

    #[test]
    fn every_error_says_what_to_do() {
        let errors = [
            DiscoverError::Unreachable { url: "http://h:1".into(), reason: "refused".into() },
            DiscoverError::Timeout { secs: 10.0 },
            DiscoverError::Unauthorized { status: 401, key_sent: false },
            DiscoverError::NotOpenAi { url: "http://h:1".into() },
            DiscoverError::ModelsFailed { status: 500, body: "boom".into() },
            DiscoverError::ModelsMalformed { reason: "x".into() },
            DiscoverError::NoModels,
            DiscoverError::UnknownModel { model: "a".into(), served: "b".into() },
        ];
        for e in errors {
            let s = e.to_string();
            assert!(s.contains(" — "), "no remedy in: {s}");
        }
        assert!(DiscoverError::Unauthorized { status: 403, key_sent: false }.to_string().contains("OPENAI_API_KEY"));
        let refused = DiscoverError::Unauthorized { status: 401, key_sent: true }.to_string();
        assert!(refused.contains("refused the API key") && refused.contains("--api-key"), "{refused}");
        let forbidden = DiscoverError::Unauthorized { status: 403, key_sent: true }.to_string();
        assert!(forbidden.contains("does not allow this request"), "{forbidden}");
    }

    #[test]
    fn overrides_win() {
        let mut f = ServerFacts::new(Engine::Vllm, "m".into());
        f.kv_budget = Some(10);
        f.kv_budget_source = "vllm:cache_config_info kv_cache_size_tokens".into();
        f.max_num_seqs = Some(256);
        f.max_model_len = Some(4096);
        let o =
            Overrides { kv_budget: Some(99), max_num_seqs: Some(8), max_model_len: Some(2048), ..Overrides::default() };
        apply_overrides(&mut f, &o);
        assert_eq!((f.kv_budget, f.kv_budget_source.as_str()), (Some(99), "--kv-budget"));
        assert_eq!((f.max_num_seqs, f.max_num_seqs_source.as_str()), (Some(8), "--max-num-seqs"));
        assert_eq!(f.max_model_len, Some(2048));
        let info = f.server_info("http://h:1");
        assert_eq!(info.engine, Engine::Vllm);
        assert_eq!(info.kv_budget_tokens, Some(99));
        assert_eq!(info.extra["max_model_len_source"], "--max-model-len");
    }
}
