//! What the server's prefix cache reused over a level, against the trace's ideal (methodology
//! §13.5): a pure function of the requests' usage and the trace's shared prefixes.

use sm_core::phases::replay::PrefixReuse;
use sm_core::replay::ReplayInput;

use super::trace::Trace;
use crate::runner::phases::open_loop::Sent;

/// The ideal of one request: the prefix it shares with the requests before it, less its last
/// token (a server computes at least one token of a prompt), rounded down to the KV block (a
/// cache holds whole blocks).
pub fn ideal(shared: u64, input: u64, kv_block: Option<u64>) -> u64 {
    let tokens = shared.min(input.saturating_sub(1));
    match kv_block.filter(|&b| b > 0) {
        Some(b) => tokens / b * b,
        None => tokens,
    }
}

/// Over the completed requests: prompt tokens, what the server reported cached, and the ideal.
/// `requests[i]` is the trace's request `i` (one process sends the whole schedule, in due order).
pub fn reuse(requests: &[Sent], trace: &Trace, kv_block: Option<u64>) -> PrefixReuse {
    let mut r = PrefixReuse::default();
    let (mut ideal_all, mut ideal_reported) = (Some(0u64), 0u64);
    for (sent, request) in requests.iter().zip(&trace.requests) {
        let Some(log) = sent.completed() else { continue };
        r.requests += 1;
        r.prompt_tokens += log.prompt_tokens.unwrap_or(0);
        let ideal = match (&request.input, request.shared_tokens) {
            (ReplayInput::Mooncake(m), Some(shared)) => Some(ideal(shared, m.input_tokens, kv_block)),
            _ => None,
        };
        ideal_all = ideal_all.zip(ideal).map(|(a, b)| a + b);
        if let Some(cached) = log.cached_tokens {
            r.reported += 1;
            r.cached_tokens += cached;
            ideal_reported += ideal.unwrap_or(0);
        }
    }
    r.ideal_tokens = ideal_all.filter(|_| r.requests > 0);
    r.reached_pct = (r.ideal_tokens.is_some() && r.reported > 0 && ideal_reported > 0)
        .then(|| r.cached_tokens as f64 * 100.0 / ideal_reported as f64);
    r
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_ideal_is_whole_blocks_and_never_the_whole_prompt() {
        assert_eq!(ideal(1024, 2000, Some(16)), 1024);
        assert_eq!(ideal(1000, 2000, Some(16)), 992);
        // an identical earlier prompt: all but its last token, in whole blocks
        assert_eq!(ideal(1024, 1024, Some(16)), 1008);
        assert_eq!(ideal(1024, 1024, None), 1023);
        assert_eq!(ideal(0, 100, Some(16)), 0);
        assert_eq!(ideal(10, 0, Some(16)), 0);
    }
}
