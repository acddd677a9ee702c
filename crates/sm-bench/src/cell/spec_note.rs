//! The cell's speculative-decoding figures (methodology §14.2), and the note for a server whose
//! chunks carry several tokens while it exports no counters to say why.

use sm_core::spec_decode::{SpecCounters, SpecDecode};

use crate::stream::request_log::RequestLog;
use crate::stream::tokens::{ChunkRatio, RatioSource, last_anchor};

/// Below this many tokens per chunk a stream is one token per chunk (a short last chunk pulls the
/// ratio just under 1; rounding of usage totals nudges it just over).
const MULTI_TOKEN_CHUNKS: f64 = 1.05;

/// Tokens per chunk over the cell's requests whose usage counted their chunks (per chunk or at
/// the end), whether or not the figures needed the ratio.
pub(crate) fn tokens_per_chunk(logs: &[RequestLog]) -> Option<f64> {
    let counted = logs.iter().filter(|l| l.usage || l.usage_at_end).filter_map(last_anchor);
    ChunkRatio::measure(counted, RatioSource::EndedRequests).map(|r| r.tokens_per_chunk)
}

/// The window's figures and any note, from the counters at the window's start and end (`None`:
/// the scrape had no counters) and the tokens per chunk the cell counted with.
pub(crate) fn spec_decode(
    start: Option<SpecCounters>,
    end: Option<SpecCounters>,
    tokens_per_chunk: Option<f64>,
) -> (Option<SpecDecode>, Option<String>) {
    if let (Some(a), Some(b)) = (start, end) {
        return (SpecDecode::between(a, b), None);
    }
    let note = tokens_per_chunk.filter(|r| *r >= MULTI_TOKEN_CHUNKS).map(|r| {
        format!(
            "chunks carried {r:.2} tokens each on average, and the server exports no speculative-decoding counters: \
             whether that is speculative decoding or tokens batched per chunk is unknown"
        )
    });
    (None, note)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counters_give_figures_and_their_absence_a_note_on_multi_token_chunks() {
        let c = |d: f64, t: f64, a: f64| Some(SpecCounters { drafts: d, draft_tokens: t, accepted: a });
        let (s, note) = spec_decode(c(0.0, 0.0, 0.0), c(10.0, 40.0, 16.0), Some(2.6));
        assert_eq!(s.map(|s| (s.acceptance_length, s.acceptance_rate)), Some((2.6, 0.4)));
        assert_eq!(note, None);
        let (s, note) = spec_decode(None, None, Some(2.6));
        assert_eq!(s, None);
        assert!(note.unwrap().starts_with("chunks carried 2.60 tokens each"));
        assert_eq!(spec_decode(None, None, Some(1.0)), (None, None));
        assert_eq!(spec_decode(None, None, None), (None, None));
    }
}
