//! The floor reader (../read_floor.rs) on io_uring instead of tokio: one thread, one `Recv` per
//! stream armed again after each completion, the ring set up with DEFER_TASKRUN so that the
//! receives run, batched, when the thread enters the ring; an optional sleep before each wait
//! batches more. It asks whether io_uring would lower the kernel's cost per chunk read
//! (docs/performance.md): it did not here.
//!
//!   uring-floor http://HOST:PORT STREAMS SLEEP_US
//!
//! Prints one JSON line: the tokens counted over 8 s after 4 s of warm-up, and the process's CPU
//! per token. Linux only.
use io_uring::{IoUring, opcode, types};
use std::io::Write;
use std::net::TcpStream;
use std::os::fd::AsRawFd;
use std::time::{Duration, Instant};

#[path = "../../common.rs"]
mod common;
use common::{cpu_seconds, request, tokens_in};

fn main() {
    let a: Vec<String> = std::env::args().collect();
    if a.len() != 4 {
        eprintln!("usage: uring-floor http://HOST:PORT STREAMS SLEEP_US");
        std::process::exit(2);
    }
    let addr = a[1].trim_start_matches("http://").to_string();
    let streams: usize = a[2].parse().unwrap();
    let sleep_us: u64 = a[3].parse().unwrap();
    let (warmup, seconds) = (4.0, 8.0);
    let req = request(&addr, "fidelity", 100);
    let mut socks: Vec<TcpStream> = (0..streams)
        .map(|_| {
            let s = TcpStream::connect(&addr).unwrap();
            s.set_nodelay(true).unwrap();
            s
        })
        .collect();
    const BUF: usize = 16 * 1024;
    let mut bufs = vec![0u8; BUF * streams];
    let mut ring: IoUring =
        IoUring::builder().setup_single_issuer().setup_defer_taskrun().setup_cqsize(8192).build(4096).unwrap();
    let arm = |ring: &mut IoUring, bufs: &mut [u8], socks: &[TcpStream], i: usize| {
        let ptr = bufs[i * BUF..].as_mut_ptr();
        let e = opcode::Recv::new(types::Fd(socks[i].as_raw_fd()), ptr, BUF as u32).build().user_data(i as u64);
        loop {
            // SAFETY: the buffer is this stream's slice of `bufs`, which outlives the ring's use
            // of it (one Recv in flight per stream; `bufs` lives to the end of main)
            if unsafe { ring.submission().push(&e) }.is_ok() {
                break;
            }
            ring.submit().unwrap();
        }
    };
    for i in 0..streams {
        socks[i].write_all(&req).unwrap();
        arm(&mut ring, &mut bufs, &socks, i);
    }
    let start = Instant::now();
    let (mut tokens, mut mark): (u64, Option<(Instant, f64, u64)>) = (0, None);
    let mut done = Vec::with_capacity(4096);
    loop {
        if sleep_us > 0 {
            std::thread::sleep(Duration::from_micros(sleep_us));
        }
        ring.submit_and_wait(1).unwrap();
        done.clear();
        for c in ring.completion() {
            done.push((c.user_data() as usize, c.result()));
        }
        for &(i, n) in &done {
            assert!(n > 0, "stream {i}: {n}");
            let read = &bufs[i * BUF..i * BUF + n as usize];
            tokens += tokens_in(read);
            if read.ends_with(b"0\r\n\r\n") {
                socks[i].write_all(&req).unwrap();
            }
            arm(&mut ring, &mut bufs, &socks, i);
        }
        let el = start.elapsed().as_secs_f64();
        match mark {
            None if el >= warmup => mark = Some((Instant::now(), cpu_seconds(), tokens)),
            Some((t0, c0, n0)) if t0.elapsed().as_secs_f64() >= seconds => {
                let (secs, cpu, n) = (t0.elapsed().as_secs_f64(), cpu_seconds() - c0, tokens - n0);
                println!(
                    r#"{{"streams":{streams},"sleep_us":{sleep_us},"tokens":{n},"tok_s":{:.1},"cpu_s":{cpu:.2},"cpu_us_per_token":{:.3}}}"#,
                    n as f64 / secs,
                    cpu * 1e6 / n as f64
                );
                std::process::exit(0);
            }
            _ => {}
        }
    }
}
