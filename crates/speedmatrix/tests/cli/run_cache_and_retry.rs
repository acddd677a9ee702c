//! Two things a decode cell records about how its requests were served: the share of their
//! prompts the server answered from its prefix cache, and the requests sent a second time
//! because a pooled keep-alive connection had been closed under them (llama.cpp does that).

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use crate::common::{QUICK, SimSpec, run, sim};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// The sim reports `cached_tokens`; the scout warms the cache, so decode requests hit it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn decode_cells_record_the_prompt_cache_hit_share() {
    let sim = sim(SimSpec::default()).await;
    let dir = tempfile::tempdir().unwrap();
    let url = sim.handle.url();
    let mut args = vec!["--url", url.as_str(), "--contexts", "1k", "--concurrency", "1,2", "--duration", "1s"];
    args.extend_from_slice(QUICK);
    let r = run(dir.path(), &args).await;
    sim.handle.shutdown().await;
    assert_eq!(r.code, 0, "{}", r.stderr);
    for cell in r.cells() {
        assert_eq!(cell["status"], "valid", "{cell}");
        let pct = cell["prompt_cache_hit_pct"].as_f64().unwrap_or_else(|| panic!("no hit share: {cell}"));
        assert!((90.0..=100.0).contains(&pct), "the scout warmed the cache: {cell}");
        assert!(!cell["warnings"].to_string().contains("prefix cache"), "{cell}");
        assert!(cell.get("client_retries").is_none(), "nothing was retried: {cell}");
    }
}

/// A prefill row measured again (`--resume --retry-failed`) after its context's decode cells had
/// filled the prefix cache with the measured prompt: the row is cold all the same, and proven
/// cold by the server's `cached_tokens`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_prefill_row_measured_again_is_cold() {
    // the 1K prefill row (the first max_tokens-1 request of the 1K prompt) fails; the cell's scout
    // and streams then put that prompt in the cache
    let sim =
        sim(SimSpec { faults: &["status=503@prompt= m0000001024],max-tokens=1,to=1"], ..SimSpec::default() }).await;
    let url = sim.handle.url();
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run");
    let mut args = vec!["--url", url.as_str(), "--contexts", "1k", "--concurrency", "1", "--duration", "1s"];
    args.extend_from_slice(QUICK);
    let first = run(&out, &args).await;
    let row = |r: &crate::common::RunResult| r.record()["prefill"][0].clone();
    assert_eq!(row(&first)["status"], "error", "{}", first.stderr);
    assert_eq!(first.cell(1024, 1)["status"], "valid");
    let again = run(&out, &["--resume", out.to_str().unwrap(), "--retry-failed"]).await;
    sim.handle.shutdown().await;
    assert_eq!(again.code, 0, "{}", again.stderr);
    let row = row(&again);
    assert_eq!(row["status"], "valid", "{row}");
    assert_eq!(row["prompt_tokens"], 1024, "the new prompt is exact too: {row}");
    let block = sm_sim::Profile::builtin("tiny").unwrap().block_size;
    let cached = row["cached_tokens"].as_u64().unwrap();
    assert!(cached < block, "{cached} prompt tokens came from the cache: the row was warm: {row}");
}

/// What the proxy does to `POST /v1/…` requests after the first `skip` of them.
#[derive(Clone, Copy)]
enum Cut {
    /// Close the connection of the next `n` such requests that arrive on a reused connection,
    /// before any byte of the answer: a keep-alive connection the server closed.
    Reused(u64),
    /// Close the connection of every such request, new connection or not.
    All,
}

/// A TCP proxy in front of the sim that cuts connections as `cut` says.
async fn proxy(upstream: String, skip: u64, cut: Cut) -> (String, Arc<AtomicU64>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let posts = Arc::new(AtomicU64::new(0));
    let cuts = Arc::new(AtomicU64::new(0));
    let cuts_out = cuts.clone();
    tokio::spawn(async move {
        while let Ok((client, _)) = listener.accept().await {
            let (upstream, posts, cuts) = (upstream.clone(), posts.clone(), cuts.clone());
            tokio::spawn(async move {
                let _ = relay(client, &upstream, skip, cut, &posts, &cuts).await;
            });
        }
    });
    (format!("http://{addr}"), cuts_out)
}

/// One client connection. A request arriving after the server has answered on this connection
/// is a request on a reused keep-alive connection (HTTP/1.1, no pipelining).
async fn relay(
    client: TcpStream,
    upstream: &str,
    skip: u64,
    cut: Cut,
    posts: &AtomicU64,
    cuts: &AtomicU64,
) -> std::io::Result<()> {
    let server = TcpStream::connect(upstream.trim_start_matches("http://")).await?;
    let (mut cr, mut cw) = client.into_split();
    let (mut sr, mut sw) = server.into_split();
    let answered = Arc::new(AtomicU64::new(0));
    let answered_w = answered.clone();
    let back = tokio::spawn(async move {
        let mut buf = vec![0u8; 16 * 1024];
        loop {
            let n = sr.read(&mut buf).await?;
            if n == 0 {
                return cw.shutdown().await;
            }
            answered_w.fetch_add(1, Ordering::AcqRel);
            cw.write_all(&buf[..n]).await?;
        }
    });
    let mut buf = vec![0u8; 16 * 1024];
    let mut requests = 0u64;
    loop {
        let n = cr.read(&mut buf).await?;
        if n == 0 {
            break;
        }
        // a new request starts when the previous one was answered (or on a fresh connection)
        let starts = requests == 0 || answered.swap(0, Ordering::AcqRel) > 0;
        if starts {
            requests += 1;
            if buf[..n].starts_with(b"POST /v1/") && posts.fetch_add(1, Ordering::AcqRel) >= skip {
                let reused = requests > 1;
                let drop_it = match cut {
                    Cut::All => true,
                    Cut::Reused(max) => reused && cuts.load(Ordering::Acquire) < max,
                };
                if drop_it {
                    cuts.fetch_add(1, Ordering::AcqRel);
                    back.abort();
                    return Ok(()); // both halves drop: the client sees the connection close
                }
            }
        }
        sw.write_all(&buf[..n]).await?;
    }
    let _ = sw.shutdown().await;
    let _ = back.await;
    Ok(())
}

async fn run_through(skip: u64, cut: Cut) -> (crate::common::RunResult, u64) {
    let sim = sim(SimSpec::default()).await;
    let (url, cuts) = proxy(sim.handle.url().trim_end_matches('/').to_string(), skip, cut).await;
    let dir = tempfile::tempdir().unwrap();
    // short requests, so that one worker sends many in turn over its pooled connection
    let mut args = vec!["--url", url.as_str(), "--contexts", "1k", "--concurrency", "1", "--duration", "2s"];
    args.extend_from_slice(&["--max-tokens", "16"]);
    args.extend_from_slice(QUICK);
    let r = run(dir.path(), &args).await;
    sim.handle.shutdown().await;
    (r, cuts.load(Ordering::Acquire))
}

/// The server closed a pooled connection: the request is sent again, the cell stays valid, and
/// the retry is recorded in the cell and logged.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_closed_keep_alive_connection_is_retried_once_and_recorded() {
    // past the prefill scout and the cell's scout: a worker's request is cut
    let (r, cuts) = run_through(3, Cut::Reused(1)).await;
    assert_eq!(cuts, 1, "the proxy cut one reused connection\n{}", r.stderr);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let cell = r.cell(1024, 1);
    assert_eq!(cell["status"], "valid", "{cell}\n{}", r.stderr);
    assert_eq!(cell["client_retries"], 1, "{cell}");
    assert!(cell["warnings"].to_string().contains("1 request(s) were sent a second time"), "{cell}");
    assert!(r.stderr.contains("retrying a request once"), "the retry is logged:\n{}", r.stderr);
}

/// A server that closes every pooled connection: each resend goes on a new connection (never on
/// another pooled one, which may be closed too), so the cell stays valid however often it happens.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_resend_goes_on_a_new_connection() {
    let (r, cuts) = run_through(3, Cut::Reused(u64::MAX)).await;
    assert_eq!(r.code, 0, "{}", r.stderr);
    let cell = r.cell(1024, 1);
    assert_eq!(cell["status"], "valid", "{cell}\n{}", r.stderr);
    let retries = cell["client_retries"].as_u64().unwrap_or(0);
    assert!(retries >= 2 && retries <= cuts, "{retries} retries recorded, {cuts} cuts: {cell}");
}

/// A request whose connection breaks on both sends is a failure: one retry, not more.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_that_breaks_twice_fails_the_cell() {
    let (r, cuts) = run_through(3, Cut::All).await;
    let cell = r.cell(1024, 1);
    assert_eq!(cell["status"], "error", "{cell}\n{}", r.stderr);
    assert!(cell["reason"].as_str().unwrap_or("").contains("broke"), "{cell}");
    assert!(cell["warnings"].to_string().contains("1 request(s) were sent a second time"), "{cell}");
    assert_eq!(cuts, 2, "the first send and its one retry, nothing more\n{}", r.stderr);
}
