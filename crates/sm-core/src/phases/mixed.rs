//! Issue 17 §3 — a fresh prompt arriving at a busy server (`--mixed-prefill CTX@BG`): the phase's
//! section of `run.json` (methodology §13.3). One level per `CTX@BG` pair: BG background streams
//! decode while a fresh prompt of CTX tokens is sent, a few times; each probe keeps its TTFT, the
//! background's rate before / during / after its prefill, the longest stall and a timeline.

use serde::{Deserialize, Serialize};

/// The most `CTX@BG` levels one run measures.
pub const MAX_LEVELS: usize = 16;
/// The most probes per level (`--mixed-prefill-probes`).
pub const MAX_PROBES: u32 = 20;
/// The most bins of one probe's timeline: a longer span gets wider bins (methodology §13.3).
pub const MAX_TIMELINE_BINS: usize = 1200;
/// The timeline's bin width when the span fits in [`MAX_TIMELINE_BINS`] bins.
pub const TIMELINE_BIN_MS: f64 = 100.0;

/// The phase's section: its levels in the order asked for.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct MixedPrefillPhase {
    /// One per `CTX@BG` pair, in the order given.
    #[schemars(length(max = 16))]
    pub levels: Vec<MixedLevel>,
}

/// One `CTX@BG` level: its settings, the idle reference and its probes.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct MixedLevel {
    /// CTX: the fresh prompt's length in tokens.
    #[schemars(range(min = 1))]
    pub prompt_context: u64,
    /// BG: how many background streams decode while the prompt is prefilled.
    #[schemars(range(min = 1))]
    pub background: u32,
    /// The context of the background streams' prompt (the run's first decode context).
    pub background_context: u64,
    /// The background streams' `max_tokens` (the run's `--max-tokens`).
    pub background_max_tokens: u64,
    /// The length of the before and after intervals, seconds.
    #[schemars(range(min = 0))]
    pub window_s: f64,
    /// Probes planned (`--mixed-prefill-probes`).
    #[schemars(range(min = 1))]
    pub probes_planned: u32,
    /// The same-size fresh prompt's TTFT on the idle server; `None` where it failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub idle: Option<IdleReference>,
    /// The probes measured so far, in order.
    #[serde(default)]
    #[schemars(length(max = 20))]
    pub probes: Vec<MixedProbe>,
    /// Median TTFT of the valid probes, ms.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0))]
    pub ttft_ms_median: Option<f64>,
    /// `ttft_ms_median / idle.ttft_ms`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0))]
    pub slowdown: Option<f64>,
    /// Why the level could not be measured (or finished early), where it could not.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// The server's gauges and the GPUs from the background's start through every probe to its
    /// stop (methodology §14); only a level without an error, all its probes sent in one session.
    #[serde(flatten)]
    pub telemetry: crate::telemetry::Telemetry,
}

/// Where the idle TTFT came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum IdleSource {
    /// A fresh prompt of CTX tokens sent by this phase before its background started.
    Measured,
    /// The run's valid prefill row at CTX (with `--matrix`).
    PrefillRow,
}

/// The idle reference: a cold prompt of CTX tokens with nothing else running.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct IdleReference {
    /// Send → first token of the idle fresh prompt, ms.
    #[schemars(range(min = 0))]
    pub ttft_ms: f64,
    /// Its prompt tokens (the server's usage, else as sized).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prompt_tokens: Option<u64>,
    /// The server's cached tokens for it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cached_tokens: Option<u64>,
    pub source: IdleSource,
}

/// One fresh prompt sent into the background's steady decode.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct MixedProbe {
    /// When it was sent, seconds since the run started.
    #[schemars(range(min = 0))]
    pub sent_s: f64,
    /// Send → first token, ms; `None` when the probe failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0))]
    pub ttft_ms: Option<f64>,
    /// Its prompt tokens (the server's usage, else as sized).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prompt_tokens: Option<u64>,
    /// The server's cached tokens for the probe: at most one KV block, or the probe is not cold.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cached_tokens: Option<u64>,
    /// `ttft_ms / idle.ttft_ms`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0))]
    pub slowdown: Option<f64>,
    /// The background's output tok/s (all streams) in the `window_s` before the send.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0))]
    pub before_tok_s: Option<f64>,
    /// The same from the send to the probe's first token.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0))]
    pub during_tok_s: Option<f64>,
    /// The same in the `window_s` after the probe's first token.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0))]
    pub after_tok_s: Option<f64>,
    /// The longest gap between two chunks of one background request that overlaps send → first
    /// token, ms.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0))]
    pub longest_stall_ms: Option<f64>,
    /// Whether the background's rate had come back (to 90 % of the level's first before rate)
    /// before this probe was sent; the first probe is sent in steady decode by definition.
    pub steady: bool,
    /// Background tokens per bin around the probe.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeline: Option<Timeline>,
    /// Why the probe has no figures (failed, or served from the prefix cache).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

impl MixedProbe {
    pub fn is_valid(&self) -> bool {
        self.error.is_none() && self.ttft_ms.is_some()
    }
}

/// Background output tokens per bin, from `start_s` (relative to the probe's send, ≤ 0) on.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Timeline {
    /// The first bin's start, seconds relative to the probe's send.
    pub start_s: f64,
    /// Bin width, ms: [`TIMELINE_BIN_MS`] unless the span needed more than [`MAX_TIMELINE_BINS`].
    #[schemars(extend("exclusiveMinimum" = 0))]
    pub bin_ms: f64,
    /// Tokens whose chunk arrived in each bin (all background streams).
    #[schemars(length(max = 1200))]
    pub tokens: Vec<u64>,
    /// The probe's first token, seconds relative to its send.
    pub first_token_s: f64,
}

impl MixedLevel {
    /// The level's summary figures from its probes (median TTFT, slowdown).
    pub fn summarise(&mut self) {
        let ttfts: Vec<f64> = self.probes.iter().filter(|p| p.is_valid()).filter_map(|p| p.ttft_ms).collect();
        self.ttft_ms_median = crate::stats::median(&ttfts).map(|m| (m * 1000.0).round() / 1000.0);
        self.slowdown = slowdown(self.ttft_ms_median, self.idle.as_ref());
    }

    /// Whether every planned probe was measured (a resume skips the level).
    pub fn finished(&self) -> bool {
        self.error.is_some() || self.probes.len() as u32 >= self.probes_planned
    }
}

/// Loaded TTFT over idle TTFT, rounded to 0.01.
pub fn slowdown(ttft_ms: Option<f64>, idle: Option<&IdleReference>) -> Option<f64> {
    let idle = idle?.ttft_ms;
    let t = ttft_ms?;
    (idle > 0.0).then(|| (t / idle * 100.0).round() / 100.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn probe(ttft: Option<f64>) -> MixedProbe {
        MixedProbe {
            sent_s: 1.0,
            ttft_ms: ttft,
            prompt_tokens: None,
            cached_tokens: None,
            slowdown: None,
            before_tok_s: None,
            during_tok_s: None,
            after_tok_s: None,
            longest_stall_ms: None,
            steady: true,
            timeline: None,
            error: None,
        }
    }

    #[test]
    fn the_summary_is_the_median_of_valid_probes_over_the_idle_ttft() {
        let mut level = MixedLevel {
            prompt_context: 8192,
            background: 4,
            background_context: 1024,
            background_max_tokens: 512,
            window_s: 1.0,
            probes_planned: 3,
            idle: Some(IdleReference {
                ttft_ms: 100.0,
                prompt_tokens: None,
                cached_tokens: None,
                source: IdleSource::Measured,
            }),
            probes: vec![
                probe(Some(300.0)),
                probe(None),
                probe(Some(200.0)),
                MixedProbe { error: Some("x".into()), ..probe(Some(9e9)) },
            ],
            ttft_ms_median: None,
            slowdown: None,
            error: None,
            telemetry: Default::default(),
        };
        level.summarise();
        assert_eq!((level.ttft_ms_median, level.slowdown), (Some(250.0), Some(2.5)));
        assert!(level.finished());
        level.idle = None;
        level.summarise();
        assert_eq!(level.slowdown, None);
        let json = serde_json::to_value(&level).unwrap();
        assert_eq!(serde_json::from_value::<MixedLevel>(json).unwrap(), level);
    }
}
