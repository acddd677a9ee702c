//! What the two floor readers share (read_floor.rs on tokio, uring/ on io_uring), so that they
//! send the same request, count tokens the same way and read their CPU the same way.

use memchr::memmem;

/// This process's CPU seconds (user + system), from /proc/self/stat.
pub fn cpu_seconds() -> f64 {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    // the fields after the command name, which is in parentheses and may hold spaces
    let after = stat.rsplit_once(')').map_or("", |(_, r)| r);
    let f: Vec<&str> = after.split_whitespace().collect();
    let ticks = |i: usize| f.get(i).and_then(|v| v.parse::<f64>().ok()).unwrap_or(0.0);
    // utime and stime are fields 14 and 15 of the line: 12 and 13 after the state field's 1
    (ticks(11) + ticks(12)) / 100.0
}

/// The streamed completions request, head and body (`host_port` like `127.0.0.1:8000`).
pub fn request(host_port: &str, model: &str, max_tokens: u32) -> Vec<u8> {
    let body = format!(
        r#"{{"model":"{model}","prompt":"floor","max_tokens":{max_tokens},"stream":true,"ignore_eos":true,"stream_options":{{"include_usage":true,"continuous_usage_stats":true}}}}"#
    );
    format!(
        "POST /v1/completions HTTP/1.1\r\nHost: {host_port}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .into_bytes()
}

/// The token chunks in one read: events with choices (the usage-only chunk at the end has none).
pub fn tokens_in(read: &[u8]) -> u64 {
    let events = memmem::find_iter(read, b"data: {").count();
    let usage_only = memmem::find_iter(read, b"\"choices\":[]").count();
    events.saturating_sub(usage_only) as u64
}
