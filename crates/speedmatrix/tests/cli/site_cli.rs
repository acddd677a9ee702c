//! `speedmatrix serve` and `speedmatrix upload`, the real binary: tokens made
//! and revoked on the command line, uploads that retry through a front that
//! answers 503 or hangs up before passing requests to the site, a gzipped
//! file uploaded as it is, and an unreachable database reported with its cause.

use std::path::Path;
use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::{TcpListener, TcpStream};

use crate::site_common::serve;

const BIN: &str = env!("CARGO_BIN_EXE_speedmatrix");

fn sample() -> String {
    format!("{}/../../tests/data/run-sample.json", env!("CARGO_MANIFEST_DIR"))
}

fn cli(args: &[&str], env: &[(&str, &str)]) -> (i32, String, String) {
    let mut cmd = Command::new(BIN);
    cmd.args(args).env_remove("SPEEDMATRIX_TOKEN").env_remove("SPEEDMATRIX_DB");
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = cmd.output().expect("speedmatrix runs");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Reads one whole HTTP request (headers and a Content-Length body).
async fn read_request(stream: &mut TcpStream) -> std::io::Result<()> {
    let mut reader = BufReader::new(stream);
    let mut length = 0usize;
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line).await? == 0 || line == "\r\n" {
            break;
        }
        if let Some((k, v)) = line.split_once(':')
            && k.eq_ignore_ascii_case("content-length")
        {
            length = v.trim().parse().unwrap_or(0);
        }
    }
    let mut body = vec![0u8; length];
    reader.read_exact(&mut body).await?;
    Ok(())
}

/// How the front fails a request.
#[derive(Clone, Copy)]
enum Fault {
    /// answers 503
    Unavailable,
    /// reads the request and closes the connection without an answer
    HangUp,
}

/// A front for `upstream` that fails the first `failures` requests and passes
/// every later connection through; returns its address and a counter of the
/// requests failed.
async fn flaky_front(upstream: String, failures: usize, fault: Fault) -> (String, Arc<AtomicUsize>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    let refused = Arc::new(AtomicUsize::new(0));
    let counter = refused.clone();
    tokio::spawn(async move {
        while let Ok((mut client, _)) = listener.accept().await {
            if counter.load(Ordering::SeqCst) < failures {
                if read_request(&mut client).await.is_ok() {
                    counter.fetch_add(1, Ordering::SeqCst);
                    if matches!(fault, Fault::HangUp) {
                        continue; // dropping the stream closes it
                    }
                    let _ = client
                        .write_all(
                            b"HTTP/1.1 503 Service Unavailable\r\ncontent-length: 0\r\nconnection: close\r\n\r\n",
                        )
                        .await;
                }
                continue;
            }
            let upstream = upstream.clone();
            tokio::spawn(async move {
                if let Ok(mut server) = TcpStream::connect(&upstream).await {
                    let _ = tokio::io::copy_bidirectional(&mut client, &mut server).await;
                }
            });
        }
    });
    (addr, refused)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tokens_and_an_upload_that_retries_on_503() {
    let dir = tempfile::tempdir().unwrap();
    let db = format!("sqlite://{}", dir.path().join("site.db").display());

    let (code, token, err) = cli(&["serve", "token", "create", "--name", "ci-bot", "--db", &db], &[]);
    assert_eq!(code, 0, "{err}");
    let token = token.trim().to_string();
    assert!(token.starts_with("smt_") && token.len() == 68, "{token}");
    let (code, _, err) = cli(&["serve", "token", "create", "--name", "ci-bot", "--db", &db], &[]);
    assert_eq!(code, 1, "a second live token of one name is refused");
    assert!(err.contains("exists"), "{err}");
    let (code, list, _) = cli(&["serve", "token", "list", "--db", &db], &[]);
    assert_eq!(code, 0);
    assert!(list.contains("ci-bot") && !list.contains(&token), "{list}");
    assert!(Path::new(&dir.path().join("site.db")).is_file(), "the SQLite file is created on first use");

    let (_server, addr) = serve(&db).await;
    let (front, refused) = flaky_front(addr.clone(), 2, Fault::Unavailable).await;
    let site = format!("http://{front}");

    // the token from the environment; two 503s, then stored
    let run = sample();
    let upload = tokio::task::spawn_blocking({
        let (site, token) = (site.clone(), token.clone());
        move || cli(&["upload", &run, "--site", &site], &[("SPEEDMATRIX_TOKEN", &token)])
    });
    let (code, out, err) = upload.await.unwrap();
    assert_eq!(code, 0, "{err}");
    assert_eq!(refused.load(Ordering::SeqCst), 2);
    assert_eq!(err.matches("retrying").count(), 2, "{err}");
    let url = out.trim();
    assert!(url.starts_with(&format!("{site}/runs/")), "{out}");
    let page = reqwest::get(url).await.unwrap();
    assert_eq!(page.status(), 200);
    assert!(page.text().await.unwrap().contains("by @ci-bot"));

    // a refusal (4xx) is not retried, and says why
    let (code, _, err) = tokio::task::spawn_blocking({
        let site = site.clone();
        move || cli(&["upload", &sample(), "--site", &site, "--token", "smt_wrong"], &[])
    })
    .await
    .unwrap();
    assert_eq!(code, 1);
    assert!(err.contains("401") && !err.contains("retrying"), "{err}");

    // a revoked token no longer uploads
    let (code, _, err) = cli(&["serve", "token", "revoke", "ci-bot", "--db", &db], &[]);
    assert_eq!(code, 0, "{err}");
    let (code, _, err) = tokio::task::spawn_blocking({
        let (site, token) = (site.clone(), token.clone());
        move || cli(&["upload", &sample(), "--site", &site, "--token", &token], &[])
    })
    .await
    .unwrap();
    assert_eq!(code, 1);
    assert!(err.contains("401"), "{err}");

    // a file that is no run is refused before anything is sent
    let junk = dir.path().join("junk.json");
    std::fs::write(&junk, "{\"not\": \"a run\"}").unwrap();
    let (code, _, err) = cli(&["upload", junk.to_str().unwrap(), "--site", &site, "--token", &token], &[]);
    assert_eq!(code, 2);
    assert!(err.contains("unrecognised"), "{err}");
}

fn upload_blocking(args: Vec<String>) -> tokio::task::JoinHandle<(i32, String, String)> {
    tokio::task::spawn_blocking(move || cli(&args.iter().map(String::as_str).collect::<Vec<_>>(), &[]))
}

/// A port nothing listens on.
fn closed_port() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.local_addr().unwrap().port()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn uploads_retry_on_connection_errors_and_send_gzip_as_it_is() {
    let dir = tempfile::tempdir().unwrap();
    let db = format!("sqlite://{}", dir.path().join("site.db").display());
    let (code, token, err) = cli(&["serve", "token", "create", "--name", "gz-bot", "--db", &db], &[]);
    assert_eq!(code, 0, "{err}");
    let token = token.trim().to_string();
    let (_server, addr) = serve(&db).await;

    // the front hangs up on the first two requests: retried, then stored
    let (front, hung_up) = flaky_front(addr.clone(), 2, Fault::HangUp).await;
    let args = ["upload", &sample(), "--site", &format!("http://{front}"), "--token", &token];
    let (code, out, err) = upload_blocking(args.map(String::from).to_vec()).await.unwrap();
    assert_eq!(code, 0, "{err}");
    assert_eq!(hung_up.load(Ordering::SeqCst), 2);
    assert_eq!(err.matches("retrying").count(), 2, "{err}");
    assert!(out.trim().starts_with(&format!("http://{front}/runs/")), "{out}");
    let first = out.trim().rsplit('/').next().unwrap().to_string();

    // nothing listens: every attempt fails to connect, and the last says so
    let nowhere = format!("http://127.0.0.1:{}", closed_port());
    let args = ["upload", &sample(), "--site", &nowhere, "--token", &token, "--attempts", "2"];
    let (code, _, err) = upload_blocking(args.map(String::from).to_vec()).await.unwrap();
    assert_eq!(code, 1, "{err}");
    assert!(err.contains(&format!("nothing answered at {nowhere} (connection refused)")), "{err}");
    assert!(err.contains("gave up after 2 attempts") && err.contains("`speedmatrix serve` starts one"), "{err}");
    assert!(!err.contains("error sending request"), "{err}");
    assert_eq!(err.matches("retrying").count(), 1, "{err}");
    // a token in the address is never printed
    let secret_site = format!("http://bot:tok-in-url@127.0.0.1:{}/?key=tok-in-query", closed_port());
    let args = ["upload", &sample(), "--site", &secret_site, "--token", &token, "--attempts", "1"];
    let (code, _, err) = upload_blocking(args.map(String::from).to_vec()).await.unwrap();
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("nothing answered at http://127.0.0.1:") && !err.contains("tok-in"), "{err}");

    // a gzipped run: checked locally after gunzipping, stored as the run
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    std::io::Write::write_all(&mut gz, std::fs::read(sample()).unwrap().as_slice()).unwrap();
    let packed = dir.path().join("run.json.gz");
    std::fs::write(&packed, gz.finish().unwrap()).unwrap();
    let site = format!("http://{addr}");
    let args = ["upload", packed.to_str().unwrap(), "--site", &site, "--token", &token];
    let (code, out, err) = upload_blocking(args.map(String::from).to_vec()).await.unwrap();
    assert_eq!(code, 0, "{err}");
    let id = out.trim().rsplit('/').next().unwrap().to_string();
    // the same run as the first upload: stored once, under the same id
    assert_eq!(id, first, "{err}");
    assert!(err.contains("had this run already"), "{err}");
    let record = reqwest::get(format!("{site}/api/runs/{id}")).await.unwrap().text().await.unwrap();
    assert!(record.contains("speedmatrix.run/1") && record.contains("\"uploader\":\"gz-bot\""), "{record}");
    // broken gzip and a gzipped non-run are refused before anything is sent
    let broken = dir.path().join("broken.json.gz");
    std::fs::write(&broken, b"\x1f\x8b\x08garbage").unwrap();
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    std::io::Write::write_all(&mut gz, b"{\"not\": \"a run\"}").unwrap();
    let junk = dir.path().join("junk.json.gz");
    std::fs::write(&junk, gz.finish().unwrap()).unwrap();
    for (file, why) in [(&broken, "gzip"), (&junk, "unrecognised")] {
        let (code, _, err) = cli(&["upload", file.to_str().unwrap(), "--site", &nowhere, "--token", &token], &[]);
        assert_eq!(code, 2, "{err}");
        assert!(err.contains(why) && !err.contains("nothing answered"), "{err}");
    }
}

#[test]
fn token_names_are_explained_and_an_unreachable_database_is_named() {
    let (code, help, _) = cli(&["serve", "token", "create", "--help"], &[]);
    assert_eq!(code, 0);
    assert!(help.contains("by @NAME") && help.contains("letters, digits"), "{help}");
    let db = format!("postgres://nobody@127.0.0.1:{}/none?sslmode=disable", closed_port());
    let (code, _, err) = cli(&["serve", "--db", &db, "--listen", "127.0.0.1:0"], &[]);
    assert_eq!(code, 1, "{err}");
    assert!(err.to_lowercase().contains("connection refused"), "{err}");
}
