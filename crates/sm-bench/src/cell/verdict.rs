//! A measured cell's verdict (methodology §7.3, §8): valid with its warnings, or an error that
//! says why its figures cannot be trusted.

use std::time::Duration;

use sm_core::record::{CellStatus, TokenSource};

use crate::cell::health::Health;
use crate::cell::window::Figures;
use crate::stream::tokens::{ChunkRatio, ChunkSpread, RatioSource, Z95};

/// What a cell ended with: its status, why, its figures where valid, and what to warn about.
#[derive(Debug, Clone, PartialEq)]
pub struct CellOutcome {
    pub status: CellStatus,
    pub reason: Option<String>,
    pub figures: Option<Figures>,
    pub warnings: Vec<String>,
    /// The client's own health over the window.
    pub health: Option<Health>,
    /// The server went away during the cell (or before it): the reason is then marked by
    /// [`crate::cell::lost_reason`] (once, by this flag), and the runner waits for the server
    /// before the next cell.
    pub server_lost: bool,
    /// Where the cell's wall time went (a measured cell).
    pub phases: Option<sm_core::record::CellPhases>,
    /// Speculative decoding in the window, where the engine exports its counters.
    pub spec_decode: Option<sm_core::spec_decode::SpecDecode>,
    /// GPU power and energy in the window, with a GPU source (methodology §14.3).
    pub gpu: Option<sm_core::gpu_telemetry::GpuCell>,
    /// The server's gauges over the window (methodology §14.1), where it has `/metrics`.
    pub server_metrics: Option<sm_core::server_metrics::ServerMetrics>,
    /// Every request the cell sent, once its streams ran (for `--save-requests`).
    pub requests: Option<crate::runner::requests::CellRequests>,
    /// With `--ranks N`: each rank's share of the window (rank 0 first).
    pub ranks: Vec<sm_core::ranks::RankCell>,
}

impl CellOutcome {
    pub fn failed(status: CellStatus, reason: impl Into<String>) -> CellOutcome {
        CellOutcome {
            status,
            reason: Some(reason.into()),
            figures: None,
            warnings: Vec::new(),
            health: None,
            server_lost: false,
            phases: None,
            spec_decode: None,
            gpu: None,
            server_metrics: None,
            requests: None,
            ranks: Vec::new(),
        }
    }
}

/// Below this share of the prompt served from the prefix cache, a decode cell's TTFT includes
/// real prefill and is not the cache-warm figure §7.3 describes.
pub const CACHE_HIT_WARN_PCT: f64 = 50.0;

/// Turns figures into a verdict: a cell without tokens is an error, never 0 tok/s; nor is a cell
/// valid whose token count may be off by more than [`MAX_COUNT_ERROR`], or one that a stream's
/// censored gap shows stalled past `stall` (`--stall-timeout`).
pub(crate) fn judge(f: Figures, concurrency: u32, metrics: bool, stall: Duration) -> CellOutcome {
    if f.output_tokens == 0 {
        return CellOutcome::failed(CellStatus::Error, "no tokens arrived inside the window");
    }
    let mut warnings = Vec::new();
    match token_count_note(&f, concurrency) {
        Ok(note) => warnings.extend(note),
        Err(reason) => return CellOutcome::failed(CellStatus::Error, reason),
    }
    match open_gap_note(&f, stall) {
        Ok(note) => warnings.extend(note),
        Err(reason) => return CellOutcome::failed(CellStatus::Error, reason),
    }
    if let Some(pct) = f.prompt_cache_hit_pct.filter(|p| *p < CACHE_HIT_WARN_PCT) {
        warnings.push(format!(
            "the server served only {pct:.0} % of the decode requests' prompt tokens from its prefix cache: TTFT includes prefill and is not cache-warm"
        ));
    }
    if concurrency > 1 && f.avg_active < 0.95 * concurrency as f64 {
        let who = if metrics { "the server ran" } else { "streams were generating" };
        warnings.push(format!("{who} only {:.1} of {concurrency} requests on average", f.avg_active));
    }
    CellOutcome {
        status: CellStatus::Valid,
        reason: None,
        figures: Some(f),
        warnings,
        health: None,
        server_lost: false,
        phases: None,
        spec_decode: None,
        gpu: None,
        server_metrics: None,
        requests: None,
        ranks: Vec::new(),
    }
}

/// A token count known to be off by more than this share is not a valid cell's.
pub const MAX_COUNT_ERROR: f64 = 0.01;

/// A censored gap longer than this share of `--stall-timeout` gets a warning (methodology §6.11).
pub const OPEN_GAP_WARN_SHARE: f64 = 0.1;

/// What the cell says about how its tokens were counted: `Err` when the count cannot be trusted
/// within [`MAX_COUNT_ERROR`] (methodology §7.3, `token_source`).
fn token_count_note(f: &Figures, concurrency: u32) -> Result<Option<String>, String> {
    match f.token_source {
        Some(TokenSource::UsageAtEnd) => {}
        Some(TokenSource::Chunks) => {
            return Ok(Some("the server sent no usage: tokens were counted from chunks, which undercounts chunks carrying several tokens".into()));
        }
        _ => return Ok(None),
    }
    let spread = "the server reports usage only at the end of a request: each request's total was spread over the chunks that carried it";
    if f.estimated_tokens == 0 {
        return Ok(Some(spread.into()));
    }
    let Some(r) = f.chunk_ratio else {
        return Err(format!(
            "the token count is unknown: the server reports usage only at the end of a request, and {} of the window's tokens came in requests cut off before their end, while no request of the cell ended and the probe request gave no usage total to tell how many tokens a chunk carries (a smaller --max-tokens or a longer --duration lets requests end inside the cell)",
            f.estimated_tokens
        ));
    };
    let from = match r.source {
        RatioSource::EndedRequests => format!("measured over {} request(s) of the cell that ended", r.requests),
        RatioSource::Probe { batch: 1 } => {
            "measured by a probe request after the cell, as none of its requests ended".into()
        }
        RatioSource::Probe { batch } => {
            format!("measured by {batch} probe requests sent together after the cell, as none of its requests ended")
        }
    };
    let what = format!(
        "{} of the window's {} tokens came in requests cut off before their usage total and were counted at {:.3} tokens per chunk ({from})",
        f.estimated_tokens, f.output_tokens, r.tokens_per_chunk
    );
    let bound = count_error_bound(f, &r, concurrency)
        .map_err(|why| format!("the token count cannot be trusted: {what}, but {why}; {LET_REQUESTS_END}"))?;
    if bound > MAX_COUNT_ERROR {
        return Err(format!(
            "the token count may be off by up to {:.1} %: {what}; {}",
            bound * 100.0,
            match r.spread {
                ChunkSpread::Constant => format!(
                    "a chunk's worth of tokens in {:.1} % of the sample's chunks is too coarse (a larger --max-tokens makes finished requests longer)",
                    r.uncertainty * 100.0
                ),
                ChunkSpread::Variable { .. } =>
                    format!("tokens per chunk vary between requests (speculative decoding?); {LET_REQUESTS_END}"),
            }
        ));
    }
    Ok(Some(format!("{spread}; {what}, good to ±{:.2} %", bound * 100.0)))
}

const LET_REQUESTS_END: &str = "a smaller --max-tokens or a longer --duration lets more requests end inside the cell and be counted by their totals";

/// The count's possible error, relative to `output_tokens`: the short last chunks of the
/// sample (share of tokens counted at ρ × the ratio's remainder bound) and, where chunks carry
/// varying counts, [`Z95`] standard deviations of the counted chunks and of the split totals.
/// `Err` says why no bound can be given: a single request cannot tell how much chunks vary, and a
/// probe on an idle server at batch 1 does not tell what chunks carried at C streams.
fn count_error_bound(f: &Figures, r: &ChunkRatio, concurrency: u32) -> Result<f64, String> {
    let share = f.estimated_tokens as f64 / f.output_tokens as f64;
    let remainder = share * r.uncertainty;
    if matches!(r.spread, ChunkSpread::Constant) {
        return Ok(remainder);
    }
    if let RatioSource::Probe { batch } = r.source
        && batch < concurrency
    {
        return Err(format!(
            "chunks carried a varying number of tokens ({:.3} on average in the probe), and only {batch} of the probe's {concurrency} requests answered together: what chunks carried in a smaller batch says nothing of what they carried at {concurrency} streams",
            r.tokens_per_chunk
        ));
    }
    let estimated_chunks = f.estimated_tokens as f64 / r.tokens_per_chunk;
    match r.count_sd(estimated_chunks, f.split_chunks) {
        Some(sd) => Ok(remainder + Z95 * sd / f.output_tokens as f64),
        None => Err(format!(
            "chunks carried a varying number of tokens ({:.3} on average) and a single request cannot tell by how much they vary",
            r.tokens_per_chunk
        )),
    }
}

/// What a censored gap says (methodology §6.11): `Err` past `stall`, a warning past
/// [`OPEN_GAP_WARN_SHARE`] of it.
fn open_gap_note(f: &Figures, stall: Duration) -> Result<Option<String>, String> {
    let Some(gap_ms) = f.longest_open_gap_ms else { return Ok(None) };
    let (gap_s, stall_s) = (gap_ms / 1000.0, stall.as_secs_f64());
    if gap_s >= stall_s {
        return Err(format!(
            "the stream stalled: no data for the last {gap_s:.1} s of the window (--stall-timeout {stall_s:.0} s)"
        ));
    }
    Ok((gap_s > stall_s * OPEN_GAP_WARN_SHARE).then(|| {
        format!(
            "a stream sent nothing in the last {gap_s:.1} s of the window (over {:.0} % of --stall-timeout {stall_s:.0} s): the end of the window cut off a possible stall, and the cell may count fewer tokens than the server made",
            OPEN_GAP_WARN_SHARE * 100.0
        )
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn figures_with_hit(pct: Option<f64>) -> Figures {
        Figures { output_tokens: 10, avg_active: 1.0, prompt_cache_hit_pct: pct, ..Figures::default() }
    }

    #[test]
    fn a_cold_prompt_cache_is_a_warning_on_a_valid_cell() {
        let warned = |pct| {
            let o = judge(figures_with_hit(pct), 1, true, Duration::from_secs(15));
            assert_eq!(o.status, CellStatus::Valid);
            o.warnings.iter().any(|w| w.contains("prefix cache"))
        };
        assert!(warned(Some(12.5)));
        assert!(!warned(Some(87.5)), "vLLM's 896 of 1,024 tokens is warm");
        assert!(!warned(None), "a server that reports no cached tokens says nothing either way");
    }

    fn usage_at_end(estimated: u64, ratio: Option<ChunkRatio>) -> Figures {
        Figures {
            output_tokens: 1000,
            avg_active: 1.0,
            token_source: Some(TokenSource::UsageAtEnd),
            estimated_tokens: estimated,
            chunk_ratio: ratio,
            ..Figures::default()
        }
    }

    fn ratio(uncertainty: f64, source: RatioSource) -> Option<ChunkRatio> {
        Some(ChunkRatio {
            tokens_per_chunk: 4.0,
            uncertainty,
            requests: 2,
            chunks: 500,
            spread: ChunkSpread::Constant,
            source,
        })
    }

    #[test]
    fn a_token_count_that_may_be_off_by_more_than_one_percent_is_not_valid() {
        let stall = Duration::from_secs(15);
        let verdict = |f| judge(f, 1, true, stall);
        // every count from the server's totals
        assert_eq!(verdict(usage_at_end(0, None)).status, CellStatus::Valid);
        // all tokens estimated, ratio unknown: the count is unknown
        let o = verdict(usage_at_end(1000, None));
        assert_eq!(o.status, CellStatus::Error);
        assert!(o.reason.unwrap().contains("token count is unknown"));
        // estimated at a ratio good to 0.5 %: valid, and said
        let o = verdict(usage_at_end(1000, ratio(0.005, RatioSource::Probe { batch: 1 })));
        assert_eq!(o.status, CellStatus::Valid);
        assert!(o.warnings.iter().any(|w| w.contains("4.000 tokens per chunk") && w.contains("probe")), "{o:?}");
        // a 4 % bound on all tokens is not; on a fifth of them it is 0.8 %
        assert_eq!(verdict(usage_at_end(1000, ratio(0.04, RatioSource::EndedRequests))).status, CellStatus::Error);
        assert_eq!(verdict(usage_at_end(200, ratio(0.04, RatioSource::EndedRequests))).status, CellStatus::Valid);
    }

    fn variable(sd: Option<f64>, source: RatioSource) -> Option<ChunkRatio> {
        let spread = ChunkSpread::Variable { sd };
        Some(ChunkRatio { tokens_per_chunk: 4.0, uncertainty: 0.001, requests: 2, chunks: 500, spread, source })
    }

    #[test]
    fn varying_tokens_per_chunk_widen_the_bound_and_only_a_probe_batch_of_c_speaks_for_c_streams() {
        let stall = Duration::from_secs(15);
        // 1,000 tokens at 4 per chunk, σ 0.5 a chunk: 1.96 × 0.5 × √(250 + 125) = 19 tokens, 1.9 %
        let o = judge(usage_at_end(1000, variable(Some(0.5), RatioSource::EndedRequests)), 2, true, stall);
        assert_eq!(o.status, CellStatus::Error, "{o:?}");
        assert!(o.reason.unwrap().contains("tokens per chunk vary"));
        // a tenth of them: 1.96 × 0.5 × √(25 + 1.25) = 5 tokens, 0.5 %: valid, and the bound said
        let o = judge(usage_at_end(100, variable(Some(0.5), RatioSource::EndedRequests)), 2, true, stall);
        assert_eq!(o.status, CellStatus::Valid, "{o:?}");
        assert!(o.warnings.iter().any(|w| w.contains("good to ±0.51 %")), "{o:?}");
        // a probe batch smaller than the cell, with varying counts, cannot count it, however few tokens
        let o = judge(usage_at_end(10, variable(Some(0.5), RatioSource::Probe { batch: 3 })), 4, true, stall);
        assert_eq!(o.status, CellStatus::Error);
        assert!(o.reason.unwrap().contains("only 3 of the probe's 4 requests answered together"));
        // a probe batch of the cell's size does, with its bound: the same 0.5 % as above
        let o = judge(usage_at_end(100, variable(Some(0.5), RatioSource::Probe { batch: 4 })), 4, true, stall);
        assert_eq!(o.status, CellStatus::Valid, "{o:?}");
        assert!(o.warnings.iter().any(|w| w.contains("4 probe requests sent together")), "{o:?}");
        // one request cannot tell how much chunks vary
        let o = judge(usage_at_end(100, variable(None, RatioSource::Probe { batch: 1 })), 1, true, stall);
        assert_eq!(o.status, CellStatus::Error);
        assert!(o.reason.unwrap().contains("a single request cannot tell"));
    }

    #[test]
    fn a_censored_gap_warns_past_a_tenth_of_the_stall_timeout_and_fails_past_it() {
        let stall = Duration::from_secs(15);
        let gap = |ms| judge(Figures { longest_open_gap_ms: Some(ms), ..figures_with_hit(None) }, 1, true, stall);
        assert!(gap(1400.0).warnings.is_empty());
        let o = gap(2600.0);
        assert_eq!(o.status, CellStatus::Valid);
        assert!(o.warnings.iter().any(|w| w.contains("last 2.6 s of the window")), "{o:?}");
        let o = gap(15_000.0);
        assert_eq!(o.status, CellStatus::Error);
        assert!(o.reason.unwrap().contains("stalled"));
    }
}
