//! `speedmatrix sim --max-num-seqs / --kv-cache-tokens / --step-scale`: a sweep over the sim's
//! settings has a known right answer. The same profile with a smaller KV cache serves fewer users at
//! a long context, and a lower running-sequence limit is what discovery records and plans by.

use std::io::{BufRead, BufReader};
use std::process::{Child, Stdio};

use crate::common::{QUICK, bin, run};

/// `speedmatrix sim ARGS --port 0` as a child process, and the URL it serves at.
fn spawn_sim(args: &[&str]) -> (Child, String) {
    let mut child =
        bin().args(["sim", "--port", "0"]).args(args).stdout(Stdio::piped()).stderr(Stdio::null()).spawn().unwrap();
    let mut first = String::new();
    BufReader::new(child.stdout.take().unwrap()).read_line(&mut first).unwrap();
    let url = first.trim().rsplit(' ').next().unwrap().to_string();
    assert!(url.starts_with("http://"), "sim said: {first}");
    (child, url)
}

fn stop(mut child: Child) {
    child.kill().unwrap();
    child.wait().unwrap();
}

/// tiny holds 131,072 KV tokens: 4 users of 8K + 64 tokens fit. With `--kv-cache-tokens 20000`
/// (1,250 blocks of 16) only 2 do (2 × 8,256 = 16,512; 3 would need 24,768): the capacity answer at
/// 8K falls from 4 to 2, and 1K (4 × 1,088 tokens) is unchanged.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_smaller_kv_cache_serves_fewer_users_at_a_long_context() {
    let dir = tempfile::tempdir().unwrap();
    let mut answers = Vec::new();
    for (name, extra) in [("full", &[][..]), ("small", &["--kv-cache-tokens", "20000"][..])] {
        let (sim, url) = spawn_sim(&[&["--profile", "tiny"], extra].concat());
        let mut args = vec!["--url", url.as_str(), "--contexts", "1k,8k", "--concurrency", "1,2,4"];
        args.extend(["--slo", "tok_s>=5", "--duration", "1s", "--max-tokens", "64"]);
        args.extend_from_slice(QUICK);
        let r = run(&dir.path().join(name), &args).await;
        stop(sim);
        assert_eq!(r.code, 0, "stdout:\n{}\nstderr:\n{}", r.stdout, r.stderr);
        let rec = r.record();
        let users = |ctx: u64| {
            let caps = rec["capacity"].as_array().expect("capacity[]");
            let a = caps.iter().find(|a| a["context"] == ctx).unwrap_or_else(|| panic!("no answer at {ctx}: {caps:?}"));
            a["max_users"].as_u64().unwrap()
        };
        answers.push((
            rec["server"]["kv_budget_tokens"].as_u64(),
            users(1024),
            users(8192),
            r.cell(8192, 4)["status"].clone(),
        ));
    }
    assert_eq!(answers[0], (Some(131_072), 4, 4, "valid".into()));
    assert_eq!(answers[1], (Some(20_000), 4, 2, "over_capacity".into()));
}

/// `--max-num-seqs 3` on an SGLang-flavored sim (which reports `max_running_requests`; vLLM's
/// /metrics does not say): discovery records 3 and the plan puts 4 users over capacity.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn max_num_seqs_is_what_discovery_records_and_plans_by() {
    let dir = tempfile::tempdir().unwrap();
    let (sim, url) = spawn_sim(&["--profile", "tiny", "--flavor", "sglang", "--max-num-seqs", "3"]);
    let r = run(dir.path(), &["--url", &url, "--contexts", "1k", "--concurrency", "1,2,4", "--dry-run"]).await;
    stop(sim);
    assert_eq!(r.code, 0, "stdout:\n{}\nstderr:\n{}", r.stdout, r.stderr);
    assert_eq!(r.record()["server"]["max_num_seqs"], 3, "{}", r.record()["server"]);
    assert_eq!(r.cell(1024, 4)["status"], "over_capacity", "{}", r.cell(1024, 4));
    assert_eq!(r.cells().len(), 1, "only 4 is over capacity");
}

#[test]
fn bad_values_exit_1_with_the_flag_and_the_range() {
    for (flag, value, want) in [
        ("--max-num-seqs", "0", "error: --max-num-seqs: must be from 1 to 65536, got 0"),
        ("--kv-cache-tokens", "-5", "error: --kv-cache-tokens: must be positive, got -5"),
        ("--kv-cache-tokens", "1000", "error: --kv-cache-tokens: 1000 (in whole blocks of 16: 992) is less than"),
        ("--step-scale", "20", "error: --step-scale: must be a number from 0.1 to 10, got 20"),
        ("--step-scale", "x", "error: --step-scale: `x` is not a number"),
    ] {
        // `--flag=VALUE`: clap would take a separate `-5` for a flag
        let arg = format!("{flag}={value}");
        let out = bin().args(["sim", "--profile", "tiny", "--port", "0", &arg]).output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{flag} {value}: {err}");
        assert!(err.starts_with(want), "{flag} {value}: {err}");
    }
}
