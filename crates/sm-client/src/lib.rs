//! The client side of a measurement: everything that talks to the server.
//!
//! * [`http`] — one connection pool, bearer auth, JSON GET/POST, and streaming
//!   requests whose events carry the instant their bytes arrived.
//! * [`sse`] — the incremental Server-Sent Events parser (the hot path).
//! * [`wire`] — the streams' own HTTP/1.1 connections on plain `http://` (one task per stream).
//! * [`openai`] — request bodies and what one streamed chunk says (tokens, text, usage).
//! * [`metrics`] — the Prometheus text format.
//! * [`discover`] — engine adapters that turn a server into [`discover::ServerFacts`].

pub mod amd_gpu;
pub mod dcgm;
pub mod discover;
pub mod error;
pub mod http;
pub mod metrics;
pub mod openai;
pub mod scan;
pub mod sse;
pub mod wire;

pub use http::{Client, ClientError, JsonBody, StreamReader};
