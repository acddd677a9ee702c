//! `speedmatrix serve`: the results site. People upload runs (with a token
//! that names them), browse them, open each as the same speed test matrix page
//! `speedmatrix report` writes, and compare 2–4 runs.
//!
//! Storage is SQLite (a file, created on first start) or PostgreSQL, through
//! one set of migrations ([`db`]); uploads go through [`ingest`] (limits,
//! formats) and [`scrub`] (secrets redacted, or the upload refused), are checked
//! by [`validate`] (size limits, figures) and stored once per run ([`identity`]);
//! tokens are stored as hashes only ([`tokens`]); [`server`] bounds what slow and
//! idle clients can hold.

pub mod answer;
pub mod db;
pub mod identity;
pub mod ingest;
pub mod pages;
pub mod rejudge;
mod routes;
pub mod scrub;
pub mod server;
pub mod tokens;
pub mod validate;

#[cfg(test)]
mod page_cost_tests;

use std::future::Future;

pub use db::Db;
pub use ingest::MAX_BODY;
pub use routes::router;
pub use server::Limits;

/// The default database: an SQLite file in the working directory.
pub const DEFAULT_DB: &str = "sqlite://speedmatrix-site.db";

#[derive(Debug, thiserror::Error)]
pub enum SiteError {
    #[error("cannot open the database: {0}")]
    Connect(#[source] sqlx::Error),
    #[error("cannot open the database: no answer within {0} s")]
    ConnectTimeout(u64),
    #[error("database error: {0}")]
    Db(#[from] sqlx::Error),
    #[error("a live token named \"{0}\" exists; revoke it first or choose another name")]
    TokenExists(String),
    #[error("\"{0}\" is not a token name: use 1–64 letters, digits, '.', '_' or '-'")]
    BadTokenName(String),
    #[error("the system's random generator failed: {0}")]
    Random(String),
}

/// Serves the site on `listener` within `limits` until `shutdown` completes. Runs stored before
/// the site kept capacity answers get theirs first (connections wait in the backlog meanwhile).
pub async fn serve(
    db: Db,
    listener: tokio::net::TcpListener,
    limits: Limits,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    match answer::backfill(&db).await {
        Ok(0) => {}
        Ok(n) => tracing::info!("worked out the capacity answer of {n} runs stored before answers were kept"),
        Err(e) => return Err(std::io::Error::other(e.to_string())),
    }
    server::run(router(db, limits.request_timeout), listener, limits, shutdown).await
}
