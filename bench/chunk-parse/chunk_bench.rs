//! User-space cost of reading one token's chunk: the reference path (copying SSE parser +
//! `parse_chunk`) against the fast path (`push_bytes` + `read_chunk`), on the sim's vLLM-flavour
//! chat chunk, one event per read as at 1,000 streams. A timing loop, not a criterion benchmark:
//! it only says how the two compare on this machine (docs/performance.md).
//!
//!   cargo run --release -p sm-client --example chunk_bench -- [iterations]

use std::hint::black_box;
use std::time::Instant;

use bytes::Bytes;
use sm_client::openai::parse_chunk;
use sm_client::scan::read_chunk;
use sm_client::sse::{SseEvent, SseParser};

const EVENT: &[u8] = b"data: {\"id\":\"chatcmpl-17\",\"object\":\"chat.completion.chunk\",\"created\":1796226205,\"model\":\"fidelity\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\" hefejod\"},\"logprobs\":null,\"finish_reason\":null}],\"usage\":{\"prompt_tokens\":1024,\"total_tokens\":1031,\"completion_tokens\":7}}\n\n";

fn reference(reads: &[Bytes], out: &mut Vec<SseEvent>) -> usize {
    let mut p = SseParser::new();
    let mut n = 0;
    for read in reads {
        // as the old read loop: each event copied out of the read (`push` copies), a serde tree per chunk
        p.push(read, out);
        for ev in out.drain(..) {
            if let SseEvent::Data(d) = ev {
                let c = parse_chunk(&d).unwrap();
                n += usize::from(c.has_text) + c.text.len();
            }
        }
    }
    n
}

fn fast(reads: &[Bytes], out: &mut Vec<SseEvent>) -> usize {
    let mut p = SseParser::new();
    let mut n = 0;
    for read in reads {
        p.push_bytes(read, out);
        for ev in out.drain(..) {
            if let SseEvent::Data(d) = ev {
                let c = read_chunk(&d).unwrap();
                n += usize::from(c.has_text) + c.text.len();
            }
        }
    }
    n
}

/// This thread's user + system CPU seconds (`/proc/thread-self/stat`, in 10 ms ticks): on a shared
/// machine the wall clock also counts the time other processes had the core.
fn cpu_s() -> f64 {
    let stat = std::fs::read_to_string("/proc/thread-self/stat").unwrap_or_default();
    let fields: Vec<&str> = stat.rsplit_once(')').map_or("", |(_, r)| r).split_whitespace().collect();
    let ticks = |i: usize| fields.get(i).and_then(|f| f.parse::<f64>().ok()).unwrap_or(0.0);
    (ticks(11) + ticks(12)) / 100.0
}

fn time(name: &str, reads: &[Bytes], rounds: usize, f: fn(&[Bytes], &mut Vec<SseEvent>) -> usize) {
    let mut out = Vec::new();
    black_box(f(reads, &mut out)); // warm-up
    let (t, cpu) = (Instant::now(), cpu_s());
    for _ in 0..rounds {
        black_box(f(black_box(reads), &mut out));
    }
    let chunks = (rounds * reads.len()) as f64;
    let wall = t.elapsed().as_secs_f64() * 1e9 / chunks;
    let cpu = (cpu_s() - cpu) * 1e9 / chunks;
    println!("{name:<40} {cpu:>6.0} ns CPU per chunk ({wall:.0} ns wall)");
}

fn main() {
    let n: usize = std::env::args().nth(1).and_then(|a| a.parse().ok()).unwrap_or(2_000_000);
    let reads: Vec<Bytes> = (0..1000).map(|_| Bytes::from_static(EVENT)).collect();
    let rounds = (n / reads.len()).max(1);
    time("reference: copying SSE + parse_chunk", &reads, rounds, reference);
    time("fast path: push_bytes + read_chunk", &reads, rounds, fast);
}
