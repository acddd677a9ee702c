//! `run --server-cmd`: speedmatrix starts the server (here, itself as `speedmatrix sim`), measures
//! it as `--url` would, and stops it on every way out, leaving no process of its group and a free
//! port; a server that ends or never answers fails the run with the cause and its log.

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use crate::common::{QUICK, RunResult};

/// A server command that writes its shell's pid (the process group, since the shell leads it) to
/// `pid_file` first, then runs `rest`.
fn recording_pid(pid_file: &Path, rest: &str) -> String {
    format!("echo $$ > '{}'; {rest}", pid_file.display())
}

fn sim_cmd() -> String {
    format!("exec '{}' sim --profile tiny --port {{port}}", env!("CARGO_BIN_EXE_speedmatrix"))
}

fn group_alive(pid_file: &Path) -> bool {
    let pgid = std::fs::read_to_string(pid_file).expect("the server command wrote its pid");
    Command::new("kill")
        .args(["-0", "--", &format!("-{}", pgid.trim())])
        .stderr(std::process::Stdio::null())
        .status()
        .unwrap()
        .success()
}

fn port_of(launch: &str) -> u16 {
    launch.split("--port ").nth(1).and_then(|p| p.split_whitespace().next()).and_then(|p| p.parse().ok()).unwrap()
}

fn port_free(port: u16) -> bool {
    std::net::TcpStream::connect(("127.0.0.1", port)).is_err()
}

const MATRIX: &[&str] = &["--contexts", "1k", "--concurrency", "1,2", "--duration", "2s", "--max-tokens", "64"];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_started_server_is_measured_recorded_and_stopped() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    let pid_file = dir.path().join("pid");
    let cmd = recording_pid(&pid_file, &sim_cmd());
    let mut args = vec!["--server-cmd", &cmd];
    args.extend(MATRIX);
    args.extend(QUICK);
    let r = crate::common::run(&out, &args).await;
    assert_eq!(r.code, 0, "{}\n{}", r.stdout, r.stderr);
    let cells = r.cells();
    assert_eq!(cells.len(), 2, "{}", r.stderr);
    assert!(cells.iter().all(|c| c["status"] == "valid"), "{:?}", cells);
    let launch = r.record()["launch_command"].as_str().unwrap().to_string();
    let port = port_of(&launch);
    assert_eq!(launch, cmd.replace("{port}", &port.to_string()), "the recorded launch command is the one run");
    assert!(!launch.contains("{port}"));
    assert_eq!(r.record()["server"]["url"], format!("http://127.0.0.1:{port}"));
    assert!(!group_alive(&pid_file), "a process of the server's group is still alive");
    assert!(port_free(port), "the server's port still takes connections");
    assert!(out.join("server.log").exists(), "the server's log is beside run.json");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_that_exits_at_once_fails_the_run_with_its_status_and_log() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    let started = Instant::now();
    let r = crate::common::run(&out, &["--server-cmd", "echo {port} boom >&2; exit 3", "--max-tokens", "64"]).await;
    assert_eq!(r.code, 1, "{}\n{}", r.stdout, r.stderr);
    assert!(r.stderr.contains("exit status 3"), "{}", r.stderr);
    assert!(r.stderr.contains("boom"), "the log's last lines are in the error: {}", r.stderr);
    assert!(started.elapsed() < Duration::from_secs(10), "not quick: {:?}", started.elapsed());
    assert!(r.record.is_none() || r.record()["decode"].as_array().is_none_or(Vec::is_empty));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_that_never_answers_times_out_and_is_stopped() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    let pid_file = dir.path().join("pid");
    let cmd = recording_pid(&pid_file, "echo waiting; sleep 30 # {port}");
    let started = Instant::now();
    let r = crate::common::run(&out, &["--server-cmd", &cmd, "--serve-timeout", "2s"]).await;
    assert_eq!(r.code, 1, "{}\n{}", r.stdout, r.stderr);
    assert!(r.stderr.contains("did not answer") && r.stderr.contains("--serve-timeout"), "{}", r.stderr);
    assert!(r.stderr.contains("waiting"), "the log's last lines are in the error: {}", r.stderr);
    assert!(started.elapsed() < Duration::from_secs(20), "{:?}", started.elapsed());
    assert!(!group_alive(&pid_file), "the sleep of the server's group is still alive");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_command_without_the_port_or_with_url_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    let r = crate::common::run(&out, &["--server-cmd", "vllm serve m"]).await;
    assert_eq!(r.code, 1, "{}", r.stderr);
    assert!(r.stderr.contains("must contain {port}") && r.stderr.contains("add it"), "{}", r.stderr);
    let r = crate::common::run(&out, &["--server-cmd", "x --port {port}", "--url", "http://127.0.0.1:1"]).await;
    assert_ne!(r.code, 0, "{}", r.stderr);
    assert!(r.stderr.contains("cannot be used with '--url"), "{}", r.stderr);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ctrl_c_during_the_run_stops_the_server() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    let pid_file = dir.path().join("pid");
    let cmd = recording_pid(&pid_file, &sim_cmd());
    let mut args = vec!["--server-cmd", cmd.as_str(), "--contexts", "1k", "--concurrency", "1,2,4,8"];
    args.extend(["--duration", "2s", "--max-tokens", "64"]);
    args.extend(QUICK);
    let child = crate::common::spawn_run(&out, &args);
    crate::common::wait_for_record(&out, "a finished cell", |r| r["decode"].as_array().is_some_and(|d| !d.is_empty()))
        .await;
    let r: RunResult = crate::common::interrupt(child, &out, Duration::ZERO).await;
    assert_eq!(r.code, 130, "{}\n{}", r.stdout, r.stderr);
    let port = port_of(r.record()["launch_command"].as_str().unwrap());
    assert!(!group_alive(&pid_file), "a process of the server's group is still alive after Ctrl-C");
    assert!(port_free(port));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ctrl_c_while_waiting_for_the_server_stops_it() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    let pid_file = dir.path().join("pid");
    let cmd = recording_pid(&pid_file, "sleep 30 # {port}");
    let child = crate::common::spawn_run(&out, &["--server-cmd", &cmd, "--serve-timeout", "60s"]);
    let deadline = Instant::now() + Duration::from_secs(20);
    while !pid_file.exists() || std::fs::read_to_string(&pid_file).unwrap().trim().is_empty() {
        assert!(Instant::now() < deadline, "the server command did not start");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let started = Instant::now();
    let r = crate::common::interrupt(child, &out, Duration::from_millis(300)).await;
    assert_eq!(r.code, 1, "{}\n{}", r.stdout, r.stderr);
    assert!(r.stderr.contains("SIGINT while waiting for the server"), "{}", r.stderr);
    assert!(started.elapsed() < Duration::from_secs(15), "{:?}", started.elapsed());
    assert!(!group_alive(&pid_file), "the sleep of the server's group is still alive");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_that_fails_after_the_server_answered_still_stops_it() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    let pid_file = dir.path().join("pid");
    let cmd = recording_pid(&pid_file, &sim_cmd());
    let mut args = vec!["--server-cmd", cmd.as_str(), "--model", "no-such-model"];
    args.extend(MATRIX);
    args.extend(QUICK);
    let r = crate::common::run(&out, &args).await;
    assert_eq!(r.code, 1, "{}\n{}", r.stdout, r.stderr);
    assert!(r.stderr.contains("no-such-model"), "{}", r.stderr);
    assert!(!group_alive(&pid_file), "a process of the server's group is still alive after the failed run");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_ctrl_c_that_aborts_the_run_kills_the_server() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    let pid_file = dir.path().join("pid");
    let cmd = recording_pid(&pid_file, &sim_cmd());
    let mut args = vec!["--server-cmd", cmd.as_str(), "--contexts", "1k", "--concurrency", "1,2,4,8"];
    args.extend(["--duration", "5s", "--max-tokens", "64"]);
    args.extend(QUICK);
    let child = crate::common::spawn_run(&out, &args);
    let pid = child.id().to_string();
    crate::common::wait_for_record(&out, "a finished cell", |r| r["decode"].as_array().is_some_and(|d| !d.is_empty()))
        .await;
    assert!(Command::new("kill").args(["-INT", &pid]).status().unwrap().success());
    std::thread::sleep(Duration::from_millis(5));
    let _ = Command::new("kill").args(["-INT", &pid]).status();
    let output = tokio::task::spawn_blocking(move || child.wait_with_output().unwrap()).await.unwrap();
    let r = crate::common::result(&out, output);
    assert_eq!(r.code, 130, "{}\n{}", r.stdout, r.stderr);
    assert!(r.stderr.contains("aborted by a second signal"), "{}", r.stderr);
    // the group is killed with SIGKILL on the way out; the kernel may take a moment to reap it
    let deadline = Instant::now() + Duration::from_secs(5);
    while group_alive(&pid_file) {
        assert!(Instant::now() < deadline, "a process of the server's group outlived the aborted run");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_resumed_run_starts_the_server_again_on_the_port_it_recorded() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    let pid_file = dir.path().join("pid");
    let cmd = recording_pid(&pid_file, &sim_cmd());
    let mut args = vec!["--server-cmd", cmd.as_str(), "--contexts", "1k", "--concurrency", "1,2,4"];
    args.extend(["--duration", "2s", "--max-tokens", "64"]);
    args.extend(QUICK);
    let child = crate::common::spawn_run(&out, &args);
    crate::common::wait_for_record(&out, "a finished cell", |r| r["decode"].as_array().is_some_and(|d| !d.is_empty()))
        .await;
    let first = crate::common::interrupt(child, &out, Duration::ZERO).await;
    assert_eq!(first.code, 130, "{}", first.stderr);
    let port = port_of(first.record()["launch_command"].as_str().unwrap());
    assert!(!group_alive(&pid_file));

    let out_arg = out.to_str().unwrap();
    let r = crate::common::run(&out, &["--resume", out_arg, "--server-cmd", &cmd]).await;
    assert_eq!(r.code, 0, "{}\n{}", r.stdout, r.stderr);
    assert_eq!(r.cells().len(), 3, "{}", r.stderr);
    assert!(r.cells().iter().all(|c| c["status"] == "valid"));
    assert_eq!(port_of(r.record()["launch_command"].as_str().unwrap()), port, "the same port as the first part");
    assert!(!group_alive(&pid_file));
    assert!(port_free(port));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_that_ignores_sigterm_is_killed_after_the_grace() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    let pid_file = dir.path().join("pid");
    // an ignored signal stays ignored across fork and exec: the sleep ignores SIGTERM too
    let cmd = recording_pid(&pid_file, "trap '' TERM; sleep 60 # {port}");
    let started = Instant::now();
    let r = crate::common::run(&out, &["--server-cmd", &cmd, "--serve-timeout", "1s"]).await;
    assert_eq!(r.code, 1, "{}\n{}", r.stdout, r.stderr);
    assert!(r.stderr.contains("sending SIGKILL"), "{}", r.stderr);
    let took = started.elapsed();
    assert!(took >= Duration::from_secs(10) && took < Duration::from_secs(30), "{took:?}");
    assert!(!group_alive(&pid_file), "the server's group outlived SIGKILL");
}

/// A server prints its arguments (vLLM logs its non-default args, the API key among them): the
/// key in the command is in neither the log, the record nor the reports.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_commands_secrets_are_scrubbed_from_the_servers_log() {
    const KEY: &str = "sk-server-secret-4f9a8b7c6d5e";
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    let cmd = format!("echo \"non-default args: --api-key {KEY}\"; echo \"api_key={KEY}\" >&2; {}", sim_cmd());
    let mut args = vec!["--server-cmd", &cmd];
    args.extend(["--contexts", "1k", "--concurrency", "1", "--duration", "1s", "--max-tokens", "32"]);
    args.extend(QUICK);
    let r = crate::common::run(&out, &args).await;
    assert_eq!(r.code, 0, "{}\n{}", r.stdout, r.stderr);
    let log = std::fs::read_to_string(out.join("server.log")).unwrap();
    assert!(log.contains("non-default args: --api-key <redacted>"), "{log}");
    for entry in std::fs::read_dir(&out).unwrap() {
        let path = entry.unwrap().path();
        let text = std::fs::read_to_string(&path).unwrap_or_default();
        assert!(!text.contains(KEY), "{} holds the key", path.display());
    }
    assert!(!r.stdout.contains(KEY) && !r.stderr.contains(KEY));
}
