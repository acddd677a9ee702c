//! The HTTP front end: routes per flavor, authentication, shared state.

mod chunks;
mod completions;
mod dcgm;
mod discovery;
mod error;
mod metrics;
mod request;

use std::collections::HashMap;
use std::sync::atomic::AtomicU64;
use std::sync::mpsc::Sender;
use std::sync::{Arc, Mutex};

use axum::Router;
use axum::extract::{Request, State};
use axum::http::{StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::{Html, IntoResponse, Response};
use axum::routing::{get, post};

use crate::engine::{Clock, Command, EmissionStats, EngineStats};
use crate::fault::ServerFaults;
use crate::flavor::Flavor;
use crate::profile::Profile;
use error::ApiError;

pub(crate) struct AppState {
    pub profile: Profile,
    pub model: String,
    pub flavor: Flavor,
    pub api_key: Option<String>,
    pub faults: ServerFaults,
    pub engine_tx: Sender<Command>,
    pub stats: Arc<Mutex<EngineStats>>,
    pub emission: Arc<EmissionStats>,
    pub clock: Clock,
    pub next_id: AtomicU64,
    /// SGLang flavor: request ids of streams still open, for `/abort_request`.
    pub sglang_open: Mutex<HashMap<String, u64>>,
    pub shutdown: tokio::sync::watch::Receiver<bool>,
}

impl AppState {
    pub(crate) fn stats(&self) -> EngineStats {
        self.stats.lock().map(|s| *s).unwrap_or_default()
    }
}

pub(crate) fn router(state: Arc<AppState>) -> Router {
    let v1 = Router::new()
        .route("/v1/models", get(discovery::models))
        .route("/v1/chat/completions", post(completions::chat))
        .route("/v1/completions", post(completions::completion))
        .route_layer(middleware::from_fn_with_state(state.clone(), auth))
        // outermost: the stamp is taken before authentication and before the body is read
        .route_layer(middleware::from_fn_with_state(state.clone(), stamp_arrival));
    let mut r = v1.route("/health", get(|| async { StatusCode::OK }));
    r = match state.flavor {
        Flavor::Vllm => r
            .route("/tokenize", post(discovery::tokenize))
            .route("/detokenize", post(discovery::detokenize))
            .route("/version", get(discovery::version))
            .route("/metrics", get(metrics::metrics)),
        Flavor::Sglang => r
            .route("/get_server_info", get(discovery::sglang_server_info))
            .route("/abort_request", post(discovery::sglang_abort))
            .route("/metrics", get(metrics::metrics)),
        Flavor::Llamacpp => r
            .route("/props", get(discovery::llamacpp_props))
            .route("/slots", get(discovery::llamacpp_slots))
            .route("/tokenize", post(discovery::tokenize))
            .route("/detokenize", post(discovery::detokenize))
            .route("/metrics", get(metrics::metrics)),
        Flavor::Tgi => r.route("/info", get(discovery::tgi_info)).route("/metrics", get(metrics::metrics)),
        Flavor::Generic => r,
    };
    // a DCGM exporter is its own process beside any engine: served for every flavor
    if state.profile.gpu.is_some() {
        r = r.route("/dcgm/metrics", get(dcgm::dcgm));
    }
    let r = if state.flavor == Flavor::Generic { r.fallback(bad_gateway) } else { r.fallback(not_found) };
    r.with_state(state)
}

/// When a request's head arrived, on the engine's clock.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Arrival(pub f64);

/// A server's TTFT counts from when the request reached it, not from when its handler got round to
/// it: a burst of long prompts spends time in the body's transfer and in tokenization, and on a real
/// engine that time is part of the TTFT the page measured. So the arrival is stamped as soon as the
/// request's head is parsed, before its body is read.
async fn stamp_arrival(State(st): State<Arc<AppState>>, mut req: Request, next: Next) -> Response {
    req.extensions_mut().insert(Arrival(st.clock.now()));
    next.run(req).await
}

/// Only `/v1/*` needs the key, as with vLLM's `--api-key`.
async fn auth(State(st): State<Arc<AppState>>, req: Request, next: Next) -> Response {
    if let Some(key) = &st.api_key {
        let given = req
            .headers()
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.strip_prefix("Bearer "));
        match given {
            Some(g) if g.trim() == key => {}
            Some(_) => return ApiError::new(StatusCode::UNAUTHORIZED, "Incorrect API key").into_response(),
            None => {
                return ApiError::new(StatusCode::UNAUTHORIZED, "Missing API key: send `Authorization: Bearer KEY`")
                    .into_response();
            }
        }
    }
    next.run(req).await
}

async fn not_found() -> Response {
    ApiError::new(StatusCode::NOT_FOUND, "Not found").into_response()
}

/// A reverse proxy in front of an engine that only forwards `/v1/*`.
async fn bad_gateway() -> Response {
    (
        StatusCode::BAD_GATEWAY,
        Html("<html><head><title>502 Bad Gateway</title></head><body><center><h1>502 Bad Gateway</h1></center><hr><center>nginx</center></body></html>\n"),
    )
        .into_response()
}
