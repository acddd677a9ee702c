//! `--tokenizer`: a server without /tokenize (a hosted API, say) gets exact prompt lengths from a
//! local tokenizer file; a file that is not the server's tokenizer is refused, not trusted.

use std::path::Path;

use crate::common::{QUICK, SimSpec, run, sim};
use sm_sim::Flavor;

/// The sim's own tokenizer, as `speedmatrix sim --write-tokenizer` writes it.
fn write_sim_tokenizer(dir: &Path) {
    sm_sim::hf_tokenizer::write(dir, 32_768).unwrap();
}

async fn generic_run(tokenizer: &Path, api: &str) -> crate::common::RunResult {
    let sim = sim(SimSpec { flavor: Flavor::Generic, ..SimSpec::default() }).await;
    let dir = tempfile::tempdir().unwrap();
    let url = sim.handle.url();
    let tok = tokenizer.to_str().unwrap();
    let mut args = vec!["--url", url.as_str(), "--contexts", "2k,5000", "--concurrency", "1", "--duration", "1s"];
    args.extend_from_slice(&["--api", api, "--tokenizer", tok]);
    args.extend_from_slice(QUICK);
    let r = run(dir.path(), &args).await;
    sim.handle.shutdown().await;
    r
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_local_tokenizer_makes_prompts_exact_where_the_server_cannot_count() {
    let tok = tempfile::tempdir().unwrap();
    write_sim_tokenizer(tok.path());
    for api in ["chat", "completions"] {
        let r = generic_run(tok.path(), api).await;
        assert_eq!(r.code, 0, "{api}: {}", r.stderr);
        let rec = r.record();
        assert_eq!(rec["server"]["engine"], "generic");
        assert_eq!(rec["settings"]["prompt_source"], "tokenizer_file", "{api}");
        let rows = rec["prefill"].as_array().unwrap();
        assert_eq!(rows.len(), 2);
        for row in rows {
            // exact, where usage calibration only promises 1 %
            assert_eq!(row["prompt_tokens"], row["context"], "{api}: {row}");
        }
        for p in rec["prompts"].as_array().unwrap() {
            assert_eq!(p["tokens"], p["context"], "{api}: the sized count is recorded: {p}");
        }
        assert_eq!(r.cell(2048, 1)["status"], "valid");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tokenizer_that_is_not_the_servers_is_refused() {
    let tok = tempfile::tempdir().unwrap();
    write_sim_tokenizer(tok.path());
    // the same file, but cutting words into pieces of at most two characters
    let path = tok.path().join("tokenizer.json");
    let text = std::fs::read_to_string(&path).unwrap();
    let wrong = text.replace("{1,3}", "{1,1}").replace("{1,4}", "{1,2}");
    assert_ne!(text, wrong);
    std::fs::write(&path, wrong).unwrap();
    let r = generic_run(&path, "chat").await;
    assert_eq!(r.code, 1, "{}", r.stderr);
    let said = format!("{}{}", r.stdout, r.stderr);
    assert!(said.contains("does not count like the server"), "{said}");
    assert!(r.record()["prefill"].as_array().unwrap().is_empty(), "nothing was measured with wrong prompts");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_missing_tokenizer_fails_at_once_and_says_what_to_pass() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("nope");
    let out = crate::common::bin()
        .args(["run", "--url", "http://127.0.0.1:9", "--tokenizer"])
        .arg(&missing)
        .env_remove("OPENAI_API_KEY")
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("--tokenizer") && err.contains("no such file"), "{err}");
    assert_eq!(err.trim().lines().count(), 1, "one line: {err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_that_counts_itself_does_not_need_the_file() {
    let tok = tempfile::tempdir().unwrap();
    write_sim_tokenizer(tok.path());
    let sim = sim(SimSpec::default()).await;
    let dir = tempfile::tempdir().unwrap();
    let url = sim.handle.url();
    let t = tok.path().to_str().unwrap();
    let mut args = vec!["--url", url.as_str(), "--contexts", "1k", "--concurrency", "1", "--duration", "1s"];
    args.extend_from_slice(&["--tokenizer", t]);
    args.extend_from_slice(QUICK);
    let r = run(dir.path(), &args).await;
    sim.handle.shutdown().await;
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(r.record()["settings"]["prompt_source"], "server_tokenize");
    let said = format!("{}{}", r.stdout, r.stderr);
    assert!(said.contains("was not needed"), "{said}");
}
