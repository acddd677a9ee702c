//! Emission accuracy of the simulated engine: N concurrent streams over loopback HTTP, a flat decode
//! step, and the lateness of every emission against its scheduled step end, measured where the
//! scheduler releases tokens and where the HTTP handler writes the chunk into the response body.
//!
//! cargo run --release -p sm-sim --example emission_bench -- [STREAMS] [STEP_MS] [SECONDS]
//! (defaults: 1000 streams, 10 ms, 10 s of measurement after all streams are decoding)

use std::time::{Duration, Instant};

use sm_sim::{Profile, SimOptions};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

fn profile(streams: u64, step_ms: f64) -> Profile {
    Profile::from_toml_str(&format!(
        r#"
name = "emission-bench"
model = "bench"
max_model_len = 65536
kv_cache_tokens = {kv}
block_size = 16
max_num_seqs = {streams}
max_num_batched_tokens = 65536
natural_output_tokens = 1000000
[prefill]
contexts = [1024]
tokens_per_s = [100000000]
[decode]
batch = [1]
contexts = [1024]
step_ms = [[{step_ms}]]
[overhead]
cached_prefill_ms = 1
"#,
        kv = streams * 8192,
    ))
    .expect("bench profile is valid")
}

/// User + system CPU seconds of this process's thread named `name` (Linux only).
fn thread_cpu_s(name: &str) -> Option<f64> {
    let tick = 100.0; // USER_HZ on Linux
    for entry in std::fs::read_dir("/proc/self/task").ok()?.flatten() {
        let comm = std::fs::read_to_string(entry.path().join("comm")).unwrap_or_default();
        if comm.trim() == name {
            let stat = std::fs::read_to_string(entry.path().join("stat")).ok()?;
            let after = &stat[stat.rfind(')')? + 2..];
            let f: Vec<&str> = after.split(' ').collect();
            let (u, s): (f64, f64) = (f[11].parse().ok()?, f[12].parse().ok()?);
            return Some((u + s) / tick);
        }
    }
    None
}

fn process_cpu_s() -> f64 {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    let after = stat.rfind(')').map_or("", |i| &stat[i + 2..]);
    let f: Vec<&str> = after.split(' ').collect();
    let get = |i: usize| f.get(i).and_then(|v| v.parse::<f64>().ok()).unwrap_or(0.0);
    (get(11) + get(12)) / 100.0
}

#[tokio::main]
async fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let streams: u64 = args.first().and_then(|a| a.parse().ok()).unwrap_or(1000);
    let step_ms: f64 = args.get(1).and_then(|a| a.parse().ok()).unwrap_or(10.0);
    let seconds: f64 = args.get(2).and_then(|a| a.parse().ok()).unwrap_or(10.0);
    let warmup = 3.0;
    let max_tokens = ((warmup + seconds + 3.0) * 1000.0 / step_ms) as u64;

    let sim = sm_sim::start(SimOptions::new(profile(streams, step_ms))).await.expect("sim starts");
    // raw HTTP/1.1 sinks: an HTTP client library would cost more CPU than the sim on 2 cores
    let addr = sim.addr();
    let mut tasks = Vec::new();
    for i in 0..streams {
        tasks.push(tokio::spawn(async move {
            let body = serde_json::json!({
                "prompt": format!("stream {i} says hello"), "max_tokens": max_tokens,
                "ignore_eos": true, "stream": true,
            })
            .to_string();
            let req = format!(
                "POST /v1/completions HTTP/1.1\r\nhost: bench\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{body}",
                body.len()
            );
            let mut sock = tokio::net::TcpStream::connect(addr).await.expect("connect");
            sock.write_all(req.as_bytes()).await.expect("send");
            let mut buf = vec![0u8; 16384];
            let mut bytes = 0usize;
            while let Ok(n) = sock.read(&mut buf).await {
                if n == 0 || buf[..n].ends_with(b"0\r\n\r\n") {
                    break;
                }
                bytes += n;
            }
            bytes
        }));
    }
    tokio::time::sleep(Duration::from_secs_f64(warmup)).await;
    let stats = sim.emission_stats();
    stats.scheduler.reset();
    stats.wake.reset();
    stats.handler.reset();
    let (cpu0, sched0, t0) = (process_cpu_s(), thread_cpu_s("sm-sim-sched"), Instant::now());
    tokio::time::sleep(Duration::from_secs_f64(seconds)).await;
    let (cpu1, sched1, wall) = (process_cpu_s(), thread_cpu_s("sm-sim-sched"), t0.elapsed().as_secs_f64());
    let expected = streams as f64 * seconds * 1000.0 / step_ms;
    println!("streams {streams}, step {step_ms} ms, measured {seconds} s after {warmup} s warm-up");
    println!(
        "emissions measured: scheduler {} , handler {} (expected ≈ {expected:.0})",
        stats.scheduler.count(),
        stats.handler.count()
    );
    for (name, h) in
        [("scheduler wake", &stats.wake), ("scheduler release", &stats.scheduler), ("handler write", &stats.handler)]
    {
        println!(
            "{name:>18}: lateness p50 {:.3} ms, p99 {:.3} ms, max {:.3} ms",
            h.quantile_ms(0.5),
            h.quantile_ms(0.99),
            h.max_ms()
        );
    }
    if let (Some(a), Some(b)) = (sched0, sched1) {
        println!("scheduler thread CPU: {:.1}% of one core", (b - a) / wall * 100.0);
    }
    println!("whole process CPU (sim + {streams} raw HTTP sinks): {:.0}% of one core", (cpu1 - cpu0) / wall * 100.0);
    sim.shutdown().await;
    for t in tasks {
        let _ = t.await;
    }
}
