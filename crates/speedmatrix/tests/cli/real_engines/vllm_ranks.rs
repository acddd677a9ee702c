//! `--ranks 2` against vLLM serving the tiny model (docs/distributed.md): two local processes hold
//! one cell's streams between them, rank 0 gating readiness on vLLM's own gauge counting both, and
//! share one rate level's schedule and one burst. A short check of what only a real server can say: its gauge
//! sees every rank's streams.

use std::process::{Command, Stdio};

use super::support::{Vllm, run};

#[test]
#[ignore = "needs a real engine: scripts/engines/real-engine-tests.sh"]
fn vllm_two_ranks_share_a_cell_a_rate_level_and_a_burst() {
    let Some(vllm) = Vllm::from_env() else { return };
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let coordinator = format!("127.0.0.1:{port}");
    let args = [
        "--contexts",
        "256",
        "--concurrency",
        "2",
        "--duration",
        "3s",
        // long enough (2 to 3 s on a CPU) that both streams run at once for --ready-stable between
        // their restarts: with 32 tokens (a request of 0.2 s) and a busy client widening the gaps,
        // vLLM's gauge never held 2 for a second and readiness gave up after 180 s (CI, 2026-12-07)
        "--max-tokens",
        "512",
        "--matrix",
        "--request-rate",
        "2",
        "--arrival",
        "constant",
        "--requests",
        "4",
        "--burst",
        "--ready-stable",
        "1s",
        "--warmup",
        "0s",
        "--no-prefill-at-max",
        "--ranks",
        "2",
        "--coordinator",
        &coordinator,
        "--rank-wait",
        "120s",
    ];
    let args = vllm.with_key(&args);
    let worker = Command::new(env!("CARGO_BIN_EXE_speedmatrix"))
        .arg("run")
        .args(["--url", &vllm.url])
        .args(&args)
        .args(["--rank", "1"])
        .env_remove("OPENAI_API_KEY")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("speedmatrix starts");
    let dir = tempfile::tempdir().unwrap();
    let rank0 = [args.as_slice(), &["--rank", "0"]].concat();
    let r = run(&vllm.url, dir.path(), &rank0, None);
    let w = worker.wait_with_output().unwrap();
    assert!(w.status.success(), "rank 1: {}", String::from_utf8_lossy(&w.stderr));
    assert_eq!(r.code, 0, "{}", r.context());
    let cell = r.decode().into_iter().find(|c| c["concurrency"] == 2).expect("the C=2 cell");
    assert_eq!(cell["status"], "valid", "{cell}");
    let streams: Vec<u64> = cell["ranks"].as_array().unwrap().iter().map(|r| r["streams"].as_u64().unwrap()).collect();
    assert_eq!(streams, [1, 1], "{cell}");
    // both ranks streamed through the window
    let ranks = cell["ranks"].as_array().unwrap();
    assert!(ranks.iter().all(|r| r["output_tokens"].as_u64() > Some(0)), "{cell}");
    // vLLM ran both ranks' streams at once: readiness (rank 0's, methodology §6.3) opens the window
    // only once vLLM's own running gauge has read 2 with nothing waiting at every poll for
    // --ready-stable, and waits for that as long as it takes; a readiness that gave up says so in
    // the cell's warnings. (The window's scrape series is no such evidence: a scrape that lands
    // between one request's end and the next one's start reads 1, and a busy client widens those
    // gaps.)
    assert!(cell["server_metrics"]["scrapes"].as_u64() > Some(0), "readiness read vLLM's gauge: {cell}");
    let mut warnings = cell["warnings"].as_array().into_iter().flatten().filter_map(|w| w.as_str());
    assert!(!warnings.any(|w| w.starts_with("readiness timed out")), "vLLM never ran both ranks' streams: {cell}");
    let level = &r.record()["phases"]["rate"]["levels"][0];
    assert_eq!(level["status"], "measured", "{level}");
    assert_eq!(level["counts"]["completed"], 4, "{level}");
    let parts: Vec<(u64, u64)> = level["ranks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| (p["scheduled"].as_u64().unwrap(), p["completed"].as_u64().unwrap()))
        .collect();
    assert_eq!(parts, [(2, 2), (2, 2)], "{level}");
    let burst = &r.record()["phases"]["burst"]["bursts"][0];
    assert_eq!(burst["status"], "valid", "{burst}");
    let parts: Vec<u64> = burst["ranks"].as_array().unwrap().iter().map(|p| p["completed"].as_u64().unwrap()).collect();
    assert_eq!(parts, [1, 1], "{burst}");
}
