//! `speedmatrix run`: the plan, start-up errors and exit codes (secrets: `run_secrets.rs`).

mod common;

use common::{SimSpec, run, sim};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn seed_profile_plan_equals_the_published_page() {
    let sim = sim(SimSpec { profile: "seed-ling-3.0-flash-h200nvl-x2", ..SimSpec::default() }).await;
    let dir = tempfile::tempdir().unwrap();
    let r = run(dir.path(), &["--url", &sim.handle.url(), "--dry-run"]).await;
    assert_eq!(r.code, 0, "{}", r.stderr);
    let rec = r.record();
    assert_eq!(rec["schema"], "speedmatrix.run/1");
    assert_eq!(rec["status"], "planned");
    assert_eq!(rec["settings"]["contexts"], serde_json::json!([8192, 16384, 32768, 65536, 131072, 257984]));
    let over: Vec<(String, u64, String)> = r
        .cells()
        .iter()
        .filter(|c| c["status"] == "over_capacity")
        .map(|c| {
            (
                c["label"].as_str().unwrap().to_string(),
                c["concurrency"].as_u64().unwrap(),
                c["reason"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    assert_eq!(
        over,
        vec![
            ("128K".into(), 128, "needs 17,301,504 KV tokens, the server has 12,582,912".into()),
            // the row asked for as 256K, measured at 257,984 tokens
            ("256K".into(), 64, "needs 16,773,120 KV tokens, the server has 12,582,912".into()),
            ("256K".into(), 128, "needs 33,546,240 KV tokens, the server has 12,582,912".into()),
        ]
    );
    assert_eq!(r.cells().len(), 3, "a dry run measures nothing");
    let planned =
        rec["plan"].as_array().unwrap().iter().filter(|p| p["kind"] == "decode" && p["status"] == "planned").count();
    assert_eq!(planned, 45);
    assert!(r.stdout.contains("Over capacity 256K (257,984) × 64"), "{}", r.stdout);
    assert!(r.stdout.contains("Decode contexts: 8K, 16K, 32K, 64K, 128K, 256K (257,984)"), "{}", r.stdout);
    assert!(
        r.stdout.contains("Prefill contexts: 8K, 16K, 32K, 64K, 128K, 256K (257,984), 256K (262,079)"),
        "{}",
        r.stdout
    );
    assert_eq!(rec["server"]["kv_budget_tokens"], 12_582_912);
    assert_eq!(rec["server"]["engine"], "vllm");
    // methodology §2.2: the facts discovery found besides the typed fields are kept in server.extra
    assert_eq!(rec["server"]["extra"]["block_size"], 256, "{}", rec["server"]);
    assert_eq!(rec["server"]["extra"]["max_num_seqs_source"], "vLLM default", "{}", rec["server"]);
    sim.handle.shutdown().await;
}

#[tokio::test]
async fn unreachable_server_exits_1_with_the_fix() {
    let dir = tempfile::tempdir().unwrap();
    // a port nothing listens on: bind, read the port, close
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let r = run(dir.path(), &["--url", &format!("http://127.0.0.1:{port}")]).await;
    assert_eq!(r.code, 1);
    assert!(r.stderr.contains("is the server running? check --url"), "{}", r.stderr);
    assert!(r.record.is_none(), "nothing is written before the server answers");
}

#[tokio::test]
async fn a_host_name_that_does_not_resolve_exits_1_with_the_fix() {
    let dir = tempfile::tempdir().unwrap();
    // `.invalid` never resolves (RFC 6761)
    let r = run(dir.path(), &["--url", "http://speedmatrix-no-such-host.invalid:8000"]).await;
    assert_eq!(r.code, 1, "{}", r.stderr);
    let err = r.stderr.trim();
    assert_eq!(err.lines().count(), 1, "one line: {err}");
    assert!(err.contains("'speedmatrix-no-such-host.invalid'") && err.contains("does not resolve"), "{err}");
    assert!(err.contains("check the name in --url"), "and what to do: {err}");
    assert!(r.record.is_none(), "nothing is written before the server answers");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn https_to_a_plain_http_server_is_a_tls_error_with_the_fix() {
    let sim = sim(SimSpec::default()).await;
    let dir = tempfile::tempdir().unwrap();
    let url = sim.handle.url().replace("http://", "https://");
    let r = run(dir.path(), &["--url", &url, "--dry-run"]).await;
    assert_eq!(r.code, 1, "{}", r.stderr);
    assert!(r.stderr.contains("TLS") && r.stderr.contains("use http://"), "{}", r.stderr);
    sim.handle.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn missing_key_exits_1_and_says_how_to_pass_it() {
    let sim = sim(SimSpec { api_key: Some("sk-right-one"), ..SimSpec::default() }).await;
    let dir = tempfile::tempdir().unwrap();
    let r = run(dir.path(), &["--url", &sim.handle.url(), "--dry-run"]).await;
    assert_eq!(r.code, 1, "{}", r.stderr);
    assert!(r.stderr.contains("--api-key") && r.stderr.contains("OPENAI_API_KEY"), "{}", r.stderr);
    sim.handle.shutdown().await;
}

#[test]
fn bad_flags_name_the_flag_and_the_accepted_values() {
    for (args, expect) in [
        (vec!["--contexts", "8q"], "--contexts"),
        (vec!["--concurrency", "1,1"], "appears twice"),
        (vec!["--duration", "soon"], "30s, 2m"),
        (vec!["--capacity-rule", "maybe"], "prefix-shared"),
        (vec!["--api", "grpc"], "chat"),
    ] {
        let out = common::bin().arg("run").args(&args).output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "clap's usage error for {args:?}");
        assert!(err.contains(expect), "{args:?}: {err}");
    }
}
