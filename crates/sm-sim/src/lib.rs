//! speedmatrix's simulated inference engine: vLLM's HTTP API (or another engine's flavor) in front of
//! a continuous-batching scheduler with a KV cache and a prefix cache, driven by a performance profile.
//!
//! ```no_run
//! # async fn demo() -> Result<(), sm_sim::SimError> {
//! let sim = sm_sim::start(sm_sim::SimOptions::new(sm_sim::Profile::builtin("tiny").unwrap())).await?;
//! println!("{}", sim.url());
//! sim.shutdown().await;
//! # Ok(()) }
//! ```

mod engine;
pub mod fault;
pub mod flavor;
pub mod gpu;
mod grid;
pub mod hf_tokenizer;
pub mod natural;
pub mod noise;
pub mod profile;
pub mod reasoning;
mod server;
pub mod speculative;
mod text;
pub mod tokenizer;
pub mod tools;
mod trace;

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::AtomicU64;
use std::time::Duration;

pub use engine::{EmissionStats, LatenessHist};
pub use fault::{Fault, Scope, ServerFault};
pub use flavor::Flavor;
pub use noise::Noise;
pub use profile::{OverrideError, Profile, ProfileError};
pub use reasoning::{Reasoning, ReasoningField};
pub use tools::Tools;

#[derive(Debug, Clone)]
pub struct SimOptions {
    pub profile: Profile,
    pub host: IpAddr,
    /// 0 picks any free port.
    pub port: u16,
    pub api_key: Option<String>,
    /// Served model id; the profile's `model` when `None`.
    pub model: Option<String>,
    pub flavor: Flavor,
    /// Faults for every request, or (scoped) for some.
    pub faults: Vec<ServerFault>,
    pub trace: Option<PathBuf>,
}

impl SimOptions {
    /// Loopback, any free port, vLLM flavor, no key, no faults, no trace.
    pub fn new(profile: Profile) -> Self {
        Self {
            profile,
            host: IpAddr::V4(Ipv4Addr::LOCALHOST),
            port: 0,
            api_key: None,
            model: None,
            flavor: Flavor::Vllm,
            faults: Vec::new(),
            trace: None,
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum SimError {
    #[error("cannot listen on {addr}: {source}")]
    Bind {
        addr: SocketAddr,
        #[source]
        source: std::io::Error,
    },
    #[error("cannot create trace file {path}: {source}")]
    Trace {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("cannot start the scheduler thread: {0}")]
    Thread(#[source] std::io::Error),
}

/// A running sim. Dropping it stops the engine; `shutdown` also waits for the server and the trace.
pub struct SimHandle {
    addr: SocketAddr,
    model: String,
    engine: engine::Engine,
    trace: Option<trace::TraceWriter>,
    shutdown_tx: tokio::sync::watch::Sender<bool>,
    server: Option<tokio::task::JoinHandle<()>>,
}

/// Binds, starts the scheduler thread and the HTTP server, and returns at once.
pub async fn start(opts: SimOptions) -> Result<SimHandle, SimError> {
    let want = SocketAddr::new(opts.host, opts.port);
    let listener = tokio::net::TcpListener::bind(want).await.map_err(|source| SimError::Bind { addr: want, source })?;
    let addr = listener.local_addr().map_err(|source| SimError::Bind { addr: want, source })?;
    let (trace, trace_tx) = match &opts.trace {
        Some(path) => {
            let (w, tx) =
                trace::TraceWriter::create(path).map_err(|source| SimError::Trace { path: path.clone(), source })?;
            (Some(w), Some(tx))
        }
        None => (None, None),
    };
    let clock = engine::Clock::new();
    let engine = engine::Engine::spawn(opts.profile.clone(), clock, trace_tx).map_err(SimError::Thread)?;
    let model = opts.model.clone().unwrap_or_else(|| opts.profile.model.clone());
    let (shutdown_tx, shutdown_rx) = tokio::sync::watch::channel(false);
    let state = Arc::new(server::AppState {
        profile: opts.profile,
        model: model.clone(),
        flavor: opts.flavor,
        api_key: opts.api_key,
        faults: fault::ServerFaults::new(opts.faults),
        engine_tx: engine.tx.clone(),
        stats: engine.stats.clone(),
        emission: engine.emission.clone(),
        clock,
        next_id: AtomicU64::new(1),
        sglang_open: Default::default(),
        shutdown: shutdown_rx.clone(),
    });
    let app = server::router(state);
    let mut stop = shutdown_rx;
    let server = tokio::spawn(async move {
        let graceful = async move {
            let _ = stop.wait_for(|s| *s).await;
        };
        // Without TCP_NODELAY every small SSE write after the first waits for the
        // client's delayed ACK (40 ms on Linux): time to first token would be a lie.
        let listener = axum::serve::ListenerExt::tap_io(listener, |tcp| {
            if let Err(e) = tcp.set_nodelay(true) {
                tracing::warn!("cannot set TCP_NODELAY: {e}");
            }
        });
        if let Err(e) = axum::serve(listener, app).with_graceful_shutdown(graceful).await {
            tracing::error!("sim server: {e}");
        }
    });
    Ok(SimHandle { addr, model, engine, trace, shutdown_tx, server: Some(server) })
}

impl SimHandle {
    /// `http://HOST:PORT`, no trailing slash.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The served model id.
    pub fn model(&self) -> &str {
        &self.model
    }

    /// Emission timing against the schedule (for benchmarks).
    pub fn emission_stats(&self) -> &EmissionStats {
        &self.engine.emission
    }

    /// Stops serving (open streams end abruptly), stops the engine and flushes the trace.
    pub async fn shutdown(mut self) {
        let _ = self.shutdown_tx.send(true);
        if let Some(server) = self.server.take() {
            let abort = server.abort_handle();
            if tokio::time::timeout(Duration::from_secs(3), server).await.is_err() {
                abort.abort();
            }
        }
        let mut engine = std::mem::replace(&mut self.engine, engine::Engine::detached());
        let mut trace = self.trace.take();
        let _ = tokio::task::spawn_blocking(move || {
            engine.stop();
            if let Some(t) = trace.as_mut() {
                t.finish();
            }
        })
        .await;
    }
}

impl Drop for SimHandle {
    fn drop(&mut self) {
        let _ = self.shutdown_tx.send(true);
    }
}
