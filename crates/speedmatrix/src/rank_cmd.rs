//! `speedmatrix run` as one of several ranks (docs/distributed.md): a worker rank only joins rank
//! 0 and drives what it is told; rank 0 gathers the workers before its ordinary run.

use std::net::SocketAddr;
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::{Context, Result};
use sm_bench::RankGroup;
use sm_client::Client;

use crate::rank_args::Ranks;
use crate::settings::{Engine, Settings};

/// A worker rank: joins rank 0 and holds its share of every decode cell (and sends its part of
/// every rate level) until the run ends.
pub(crate) async fn worker(settings: &Settings, r: &Ranks) -> Result<ExitCode> {
    let Engine::Server { url } = &settings.engine else {
        anyhow::bail!("rank {} needs --url: the server every rank measures", r.rank);
    };
    if let Some(key) = &settings.api_key {
        sm_core::secrets::register(key);
    }
    // a worker holds at most its share of the largest cell
    let most = settings.run.concurrency.iter().copied().max().unwrap_or(1);
    let client = Client::new(url, settings.api_key.clone(), sm_bench::share(most, r.ranks, r.rank).max(1) as usize)?;
    if !settings.quiet() {
        eprintln!("rank {} of {}: joining rank 0 at {}", r.rank, r.ranks, r.coordinator);
    }
    let served = sm_bench::serve_rank(client, r.rank, r.ranks, &r.coordinator, r.wait)
        .await
        .with_context(|| format!("rank {} of {}", r.rank, r.ranks))?;
    println!(
        "rank {}: drove its share of {} cell(s) and {} rate level(s) or burst(s); rank 0 writes the results",
        r.rank, served.cells, served.levels
    );
    Ok(ExitCode::SUCCESS)
}

/// Rank 0: listens on the coordinator's port on every interface and waits for every worker.
pub(crate) async fn gather(r: &Ranks, quiet: bool) -> Result<Arc<RankGroup>> {
    let addr = SocketAddr::from(([0, 0, 0, 0], r.port()));
    if !quiet {
        eprintln!("rank 0 of {}: waiting for {} worker rank(s) on port {}", r.ranks, r.ranks - 1, r.port());
    }
    Ok(Arc::new(RankGroup::gather(addr, r.ranks, r.wait).await?))
}
