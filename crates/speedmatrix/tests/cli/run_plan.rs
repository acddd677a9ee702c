//! `speedmatrix run`: the plan, start-up errors and exit codes (secrets: `run_secrets.rs`).

use crate::common::{SimSpec, run, sim};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn seed_profile_plan_equals_the_published_page() {
    let sim = sim(SimSpec { profile: "seed-ling-3.0-flash-h200nvl-x2", ..SimSpec::default() }).await;
    let dir = tempfile::tempdir().unwrap();
    let r = run(dir.path(), &["--url", &sim.handle.url(), "--dry-run"]).await;
    assert_eq!(r.code, 0, "{}", r.stderr);
    let rec = r.record();
    assert_eq!(rec["schema"], sm_core::record::SCHEMA, "a new run writes the current schema");
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
    assert!(r.stderr.contains("asks for an API key"), "{}", r.stderr);
    sim.handle.shutdown().await;
}

/// A wrong key is not a missing one: the server refused it, and the key is never printed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wrong_key_says_the_server_refused_it_without_printing_it() {
    let sim = sim(SimSpec { api_key: Some("sk-right-one"), ..SimSpec::default() }).await;
    let dir = tempfile::tempdir().unwrap();
    let r = run(dir.path(), &["--url", &sim.handle.url(), "--api-key", "sk-wrong-guess", "--dry-run"]).await;
    sim.handle.shutdown().await;
    assert_eq!(r.code, 1, "{}", r.stderr);
    assert!(r.stderr.contains("refused the API key"), "{}", r.stderr);
    assert!(!r.stderr.contains("asks for an API key") && !r.stderr.contains("pass --api-key"), "{}", r.stderr);
    assert!(!format!("{}{}", r.stdout, r.stderr).contains("sk-wrong-guess"), "{}", r.stderr);
}

/// Every context beyond the model, or every cell over capacity: nothing asked for can run, and the
/// run is refused before a request is sent, saying why and what to give (exit 1, not "run complete"
/// with nothing measured); a dry run still shows the plan.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plan_in_which_nothing_asked_for_can_run_is_refused() {
    let sim = sim(SimSpec::default()).await;
    let url = sim.handle.url();
    let cases: &[(&[&str], &str)] = &[
        (&["--contexts", "9999k", "--concurrency", "1"], "no context of --contexts 9999K fits the model"),
        (
            &["--contexts", "1k", "--concurrency", "4", "--max-num-seqs", "2"],
            "every cell is over the server's capacity",
        ),
        (&["--contexts", "9999k", "--request-rate", "2", "--requests", "2"], "the rate phase (--request-rate)"),
        (&["--contexts", "1k", "--concurrency", "8", "--max-num-seqs", "4", "--burst"], "the bursts (--burst)"),
        (&["--contexts", "1k", "--mixed-prefill", "9999k@2"], "no fresh prompt of --mixed-prefill fits"),
    ];
    for (flags, expect) in cases {
        let dir = tempfile::tempdir().unwrap();
        let mut args = vec!["--url", url.as_str(), "--warmup", "0s"];
        args.extend_from_slice(flags);
        let r = run(dir.path(), &args).await;
        assert_eq!(r.code, 1, "{flags:?}: {}\n{}", r.stdout, r.stderr);
        assert!(r.stderr.contains("nothing asked for could be measured"), "{flags:?}: {}", r.stderr);
        assert!(r.stderr.contains(expect), "{flags:?}: {}", r.stderr);
        assert!(!r.stdout.contains("run complete"), "{flags:?}: {}", r.stdout);
    }
    let dir = tempfile::tempdir().unwrap();
    let planned = run(dir.path(), &["--url", &url, "--contexts", "9999k", "--dry-run"]).await;
    assert_eq!(planned.code, 0, "a dry run shows the plan: {}", planned.stderr);
    assert!(planned.stdout.contains("9999K"), "{}", planned.stdout);
    sim.handle.shutdown().await;
}

/// A flag that nothing of the run uses (the decode matrix's, beside phases alone) is named with
/// what to do, not dropped in silence.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn flags_the_phases_do_not_use_are_named() {
    let sim = sim(SimSpec::default()).await;
    let url = sim.handle.url();
    let dir = tempfile::tempdir().unwrap();
    let args = ["--url", url.as_str(), "--contexts", "1k", "--concurrency", "4", "--duration", "5s", "--dry-run"];
    let r = run(dir.path(), &[args.as_slice(), &["--sessions", "2"]].concat()).await;
    sim.handle.shutdown().await;
    assert_eq!(r.code, 0, "{}", r.stderr);
    for flag in ["--contexts", "--concurrency", "--duration"] {
        let line = format!("warning: {flag} is not used by --sessions");
        assert!(r.stderr.contains(&line), "{flag}: {}", r.stderr);
    }
    assert!(r.stderr.contains("add --matrix"), "{}", r.stderr);
}

/// `run` exits 2 when cells errored, so a bad flag exits 1, like every failure to start.
#[test]
fn bad_flags_name_the_flag_and_the_accepted_values() {
    for (args, expect) in [
        (vec!["--contexts", "8q"], "--contexts"),
        (vec!["--concurrency", "1,1"], "appears twice"),
        (vec!["--duration", "soon"], "30s, 2m"),
        (vec!["--capacity-rule", "maybe"], "prefix-shared"),
        (vec!["--api", "grpc"], "chat"),
        (vec!["--no-such-flag"], "--no-such-flag"),
        (vec!["--force"], "--out"),
    ] {
        let out = crate::common::bin().arg("run").args(&args).output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "a usage error for {args:?}: {err}");
        assert!(err.contains(expect), "{args:?}: {err}");
    }
}

/// Settings that could only produce a run of errors, or a run that never ends, are refused before
/// anything is sent: exit 1, the flag, the accepted range, and nothing written.
#[tokio::test]
async fn nonsense_settings_are_refused_before_anything_is_sent() {
    // a port nothing listens on: a setting that got through would fail on the connection instead
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let url = format!("http://127.0.0.1:{port}");
    let cases: &[(&[&str], &str)] = &[
        (&["--max-tokens", "0"], "give 2 to"),
        (&["--max-tokens", "1"], "give 2 to"),
        (&["--max-tokens", "99999999m"], "too large"),
        (&["--duration", "0s"], "give 1s to 24h"),
        (&["--duration", "99999999999h"], "too long"),
        (&["--duration", "1e300s"], "not a duration"),
        (&["--duration", "300ms"], "too short"),
        // a bare number could be seconds or minutes: every duration flag asks for the unit
        (&["--duration", "5"], "write 5s for seconds"),
        (&["--warmup", "3"], "write 3s"),
        (&["--stall-timeout", "15"], "only 0 may go without one"),
        (&["--server-wait", "1.5"], "write 1.5s"),
        (&["--metrics-interval", "1"], "write 1s"),
        (&["--sessions", "2", "--think-time", "2"], "write 2s"),
        (&["--mixed-prefill", "8k@2", "--mixed-prefill-window", "2"], "write 2s"),
        (&["--stall-timeout", "0s"], "give 1s to 1h"),
        (&["--ready-timeout", "0s"], "too short"),
        (&["--ready-stable", "2h"], "too long"),
        (&["--ready-stable", "10s", "--ready-timeout", "5s"], "--ready-stable 10s is longer than --ready-timeout 5s"),
        (&["--ready-stable", "5m"], "longer than --ready-timeout 3m"),
        (&["--server-wait", "0s"], "too short"),
        (&["--warmup", "10ms"], "0s skips the warm-up"),
        (&["--concurrency", "0"], "too small"),
        (&["--concurrency", ""], "empty"),
        (&["--concurrency", "1,200000"], "give 1 to 131,072"),
        (&["--contexts", "0"], "too small"),
        (&["--contexts", "16"], "give 128 to"),
        (&["--contexts", ","], "empty"),
        (
            &[
                "--contexts",
                "1k,2k,3k,4k,5k,6k,7k,8k,9k,10k,11k,12k,13k,14k,15k,16k,17k,18k,19k,20k,21k,22k,23k,24k,25k,26k,27k,28k,29k,30k,31k,32k,33k",
            ],
            "at most 32",
        ),
        (&["--prefill-contexts", "0"], "too small"),
        (&["--kv-budget", "0"], "too small"),
        (&["--max-model-len", "0"], "too small"),
        (&["--max-num-seqs", "0"], "too small"),
        (&["--gpu", "H200", "--gpu-count", "0"], "too small"),
        (&["--client-threads", "0"], "give 1 to"),
        (&["--client-threads", "99999"], "too large"),
    ];
    for (flags, expect) in cases {
        let dir = tempfile::tempdir().unwrap();
        let mut args = vec!["--url", url.as_str()];
        args.extend_from_slice(flags);
        let r = run(dir.path(), &args).await;
        assert_eq!(r.code, 1, "{flags:?}: {}", r.stderr);
        assert!(r.stderr.contains(flags[flags.len() - 2]), "{flags:?} names the flag: {}", r.stderr);
        assert!(r.stderr.contains(expect), "{flags:?} says what to give: {}", r.stderr);
        assert!(!r.stderr.contains("server running"), "{flags:?} reached the server: {}", r.stderr);
        let left: Vec<_> = std::fs::read_dir(dir.path()).unwrap().collect();
        assert!(left.is_empty(), "{flags:?} wrote {left:?}");
    }
}

/// A resume takes the settings it is not given from run.json; values out of range there (a
/// hand-edited or damaged record) are refused like flags, before anything is sent.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_resume_refuses_settings_out_of_range_in_run_json() {
    let sim = sim(SimSpec::default()).await;
    let dir = tempfile::tempdir().unwrap();
    let planned = run(dir.path(), &["--url", &sim.handle.url(), "--contexts", "1k", "--dry-run"]).await;
    assert_eq!(planned.code, 0, "{}", planned.stderr);
    let path = dir.path().join("run.json");
    for (key, value, expect) in [
        ("max_tokens", serde_json::json!(0), "--max-tokens: 0 is too small"),
        ("duration_s", serde_json::json!(-1.0), "pass --duration"),
        ("duration_s", serde_json::json!(1e12), "--duration: "),
        ("concurrency", serde_json::json!([]), "--concurrency: the list is empty"),
        ("contexts", serde_json::json!([0]), "--contexts: 0 is too small"),
    ] {
        let mut record = planned.record().clone();
        record["settings"][key] = value;
        std::fs::write(&path, serde_json::to_string(&record).unwrap()).unwrap();
        let r = run(dir.path(), &["--resume", dir.path().to_str().unwrap()]).await;
        assert_eq!(r.code, 1, "{key}: {}", r.stderr);
        assert!(r.stderr.contains("cannot resume") && r.stderr.contains(expect), "{key}: {}", r.stderr);
        assert_eq!(r.record().to_string(), record.to_string(), "{key}: the refused resume changed run.json");
    }
    sim.handle.shutdown().await;
}

/// `--out DIR` where DIR holds a run: refused with the two ways on, unless `--force`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_run_into_a_directory_that_holds_one_is_refused_unless_forced() {
    let sim = sim(SimSpec::default()).await;
    let url = sim.handle.url();
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path();
    let first = run(out, &["--url", &url, "--contexts", "1k", "--label", "first", "--dry-run"]).await;
    assert_eq!(first.code, 0, "{}", first.stderr);
    let before = std::fs::read_to_string(out.join("run.json")).unwrap();
    std::fs::write(out.join("report.html"), "the first run's report").unwrap();
    for extra in [&["--dry-run"][..], &["--duration", "1s", "--concurrency", "1", "--warmup", "0s"][..]] {
        let mut args = vec!["--url", url.as_str(), "--contexts", "1k", "--label", "second"];
        args.extend_from_slice(extra);
        let r = run(out, &args).await;
        assert_eq!(r.code, 1, "{extra:?}: {}", r.stderr);
        let why = format!("{} already holds a run", out.display());
        assert!(r.stderr.contains(&why), "{extra:?}: {}", r.stderr);
        assert!(
            r.stderr.contains(&format!("--resume {}", out.display())) && r.stderr.contains("--force"),
            "{}",
            r.stderr
        );
        assert_eq!(std::fs::read_to_string(out.join("run.json")).unwrap(), before, "{extra:?} changed the old run");
        assert!(!out.join("run.lock").exists(), "a refused run left its lock file");
    }
    let forced = run(out, &["--url", &url, "--contexts", "1k", "--label", "second", "--dry-run", "--force"]).await;
    assert_eq!(forced.code, 0, "{}", forced.stderr);
    assert_eq!(forced.record()["label"], "second");
    assert!(!out.join("report.html").exists(), "--force left the old run's report beside the new run");
    assert!(!out.join("run.lock").exists(), "run.lock left behind by a finished run");
    sim.handle.shutdown().await;
}
