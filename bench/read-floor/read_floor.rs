//! The least a tokio client can do per token: N streams on their own keep-alive connections, each
//! read as speedmatrix's owned reader reads (one `read` per wake-up into one buffer), with nothing
//! done with the bytes but counting `data:` events. Its CPU per token is the floor under any
//! client that reads each chunk when it arrives: the kernel's receive path, the epoll wake-up and
//! tokio's scheduler (docs/performance.md, issue 19 §1). Not a measuring tool: no timestamps, no
//! parsing, and an event whose first bytes are split across two reads goes uncounted.
//!
//!   cargo run --release -p sm-client --example read_floor -- --url http://127.0.0.1:PORT \
//!       [--streams 1000] [--warmup 5] [--seconds 10] [--max-tokens 100] [--model fidelity] [--out F]
//!       [--park-sleep-us 0]
//!
//! `--park-sleep-us N` is an experiment: each worker thread sleeps N µs before it waits for the
//! next chunk, so that it wakes to many chunks at once. It says what batching reads would save
//! (fewer wake-ups and epoll calls per token); a measuring client could only do so with the
//! kernel's arrival time of each chunk, since its reads are then late by up to N µs.
//!
//! It prints one JSON line (and writes it to `--out`): the tokens it counted in the measured
//! seconds, its own CPU in them (from /proc/self/stat), and the CPU per token. It exits without
//! closing its streams, so a sim's `--trace` ends every stream at that instant
//! (bench/fidelity/fidelity.py's `floor` tool takes its window from there, as speedmatrix's).

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

#[path = "common.rs"]
mod common;
use common::{cpu_seconds, request, tokens_in};

struct Args {
    host: String,
    port: u16,
    streams: usize,
    warmup: f64,
    seconds: f64,
    max_tokens: u32,
    model: String,
    out: Option<String>,
    park_sleep_us: u64,
}

fn parse_args() -> Result<Args, String> {
    let mut a = Args {
        host: String::new(),
        port: 0,
        streams: 1000,
        warmup: 5.0,
        seconds: 10.0,
        max_tokens: 100,
        model: "fidelity".into(),
        out: None,
        park_sleep_us: 0,
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let value = it.next().ok_or(format!("{flag} needs a value"))?;
        let num = |v: &str| v.parse::<f64>().map_err(|_| format!("{flag}: not a number: {v}"));
        match flag.as_str() {
            "--url" => {
                let rest = value.strip_prefix("http://").ok_or("--url must be http://host:port")?;
                let (host, port) = rest.trim_end_matches('/').rsplit_once(':').ok_or("--url needs a port")?;
                a.host = host.to_string();
                a.port = port.parse().map_err(|_| format!("--url: bad port {port}"))?;
            }
            "--streams" => a.streams = num(&value)? as usize,
            "--warmup" => a.warmup = num(&value)?,
            "--seconds" => a.seconds = num(&value)?,
            "--max-tokens" => a.max_tokens = num(&value)? as u32,
            "--model" => a.model = value,
            "--out" => a.out = Some(value),
            "--park-sleep-us" => a.park_sleep_us = num(&value)? as u64,
            _ => return Err(format!("unknown flag {flag}")),
        }
    }
    if a.host.is_empty() {
        return Err("--url http://host:port is required".into());
    }
    Ok(a)
}

/// One stream: request after request on one connection, each read to its chunked body's end.
async fn stream(host: String, port: u16, req: Arc<Vec<u8>>, tokens: Arc<AtomicU64>) -> std::io::Result<()> {
    let mut tcp = TcpStream::connect((host.as_str(), port)).await?;
    tcp.set_nodelay(true)?;
    let mut buf = vec![0u8; 16 * 1024];
    loop {
        tcp.write_all(&req).await?;
        loop {
            let n = tcp.read(&mut buf).await?;
            if n == 0 {
                return Ok(());
            }
            let read = &buf[..n];
            tokens.fetch_add(tokens_in(read), Ordering::Relaxed);
            // the chunked body's last chunk (a response's head never ends so)
            if read.ends_with(b"0\r\n\r\n") {
                break;
            }
        }
    }
}

fn main() {
    let args = match parse_args() {
        Ok(a) => a,
        Err(e) => {
            eprintln!("error: {e}");
            std::process::exit(2);
        }
    };
    let mut builder = tokio::runtime::Builder::new_multi_thread();
    if args.park_sleep_us > 0 {
        // The experiment: a worker about to sleep until the next chunk sleeps this long first,
        // so that it then finds many chunks at once (reads late by up to this much).
        let pause = Duration::from_micros(args.park_sleep_us);
        builder.on_thread_park(move || std::thread::sleep(pause));
    }
    let rt = builder.enable_all().build().expect("a tokio runtime");
    rt.block_on(async move {
        let req = Arc::new(request(&format!("{}:{}", args.host, args.port), &args.model, args.max_tokens));
        let tokens = Arc::new(AtomicU64::new(0));
        for _ in 0..args.streams {
            let (host, req, tokens) = (args.host.clone(), Arc::clone(&req), Arc::clone(&tokens));
            tokio::spawn(async move {
                if let Err(e) = stream(host, args.port, req, tokens).await {
                    eprintln!("a stream failed: {e}");
                }
            });
        }
        tokio::time::sleep(Duration::from_secs_f64(args.warmup)).await;
        let (t0, c0, n0) = (Instant::now(), cpu_seconds(), tokens.load(Ordering::Relaxed));
        tokio::time::sleep(Duration::from_secs_f64(args.seconds)).await;
        let (secs, cpu, n) = (t0.elapsed().as_secs_f64(), cpu_seconds() - c0, tokens.load(Ordering::Relaxed) - n0);
        let line = format!(
            r#"{{"streams":{},"seconds":{secs:.3},"tokens":{n},"tok_s":{:.1},"cpu_s":{cpu:.2},"cpu_us_per_token":{:.3}}}"#,
            args.streams,
            n as f64 / secs,
            cpu * 1e6 / n.max(1) as f64
        );
        println!("{line}");
        if let Some(out) = &args.out {
            std::fs::write(out, format!("{line}\n")).expect("--out is writable");
        }
        // no orderly close: every stream ends now, which is the window's end in a sim's trace
        std::process::exit(0);
    });
}
