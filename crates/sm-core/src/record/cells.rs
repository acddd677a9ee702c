//! The record's rows: a prefill row, a decode cell (with its intervals, repeats and phase split)
//! and an entry of the plan.

use serde::{Deserialize, Serialize};

use super::percentiles::{Percentiles, flat_keys};
use super::settings::{TokenSource, is_false};
use super::status::{CellStatus, PlanStatus};
use crate::precision::Interval;
use crate::slo::BoundCheck;

/// One row of the prefill table: the cold, cache-warming scout of a context.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
// A valid row measured a TTFT; any other has neither figure.
#[schemars(extend("allOf" = [{
    "if": { "properties": { "status": { "const": "valid" } } },
    "then": { "properties": { "ttft_ms": { "type": "number", "exclusiveMinimum": 0 } } },
    "else": { "properties": { "ttft_ms": { "type": "null" }, "prompt_tok_s": { "type": "null" } } }
}]))]
pub struct PrefillRow {
    /// The context in tokens: a decode context's row has that decode row's fitted context (fitted with max_tokens: 256K
    /// becomes 257,984); a scout-only row is fitted with 1 output token (256K becomes 262,079 at max_model_len
    /// 262,144).
    pub context: u64,
    /// The context's name: floor(requested context / 1024) followed by `K`, or the plain number under 1,024 (256K for a
    /// row requested as 262,144 tokens and measured at 262,079). Views print the exact count beside it where the label
    /// does not say it: `256K (262,079)`. Imported records and older ones label the context itself (262,079 → `255K`).
    #[schemars(regex(pattern = r"^([1-9][0-9]*K|[0-9]{1,4})$"))]
    pub label: String,
    /// The prompt's actual length in tokens, from the server's `usage.prompt_tokens`; equals `context` when lengths
    /// were made exact with `/tokenize`.
    pub prompt_tokens: Option<u64>,
    /// Time to first token in ms: from the instant the request was sent to the arrival of the first chunk carrying
    /// content, reasoning content or a finish_reason. Client-observed: includes HTTP, queueing and tokenisation.
    pub ttft_ms: Option<f64>,
    /// Prefill speed: prompt_tokens / TTFT, in tokens per second.
    pub prompt_tok_s: Option<f64>,
    /// `usage.prompt_tokens_details.cached_tokens` where the server reports it:
    /// 0 proves the row was cold.
    pub cached_tokens: Option<u64>,
    /// Outcome of a prefill row or a decode cell (methodology §8). `valid`: measured; the only status that carries
    /// numbers. `over_capacity`: not run, because the server's KV cache or maximum number of sequences cannot hold it
    /// (reason and `kv_need_tokens` say why). `error`: run but invalid (reason: the first failed stream's HTTP status
    /// and body, a disconnect, a stall past the idle timeout, a malformed event, or no tokens in the window). `loop`: a
    /// stream's text repeated itself exactly (at least 4 cycles and 4,096 repeated characters). `skipped`: skipped by
    /// the user.
    pub status: CellStatus,
    /// Why the row is not valid (null when valid).
    pub reason: Option<String>,
    /// The server's gauges and the GPUs through the row's request (methodology §14).
    #[serde(flatten)]
    pub telemetry: crate::telemetry::Telemetry,
}

/// One cell of the sustained-decode matrix. Only `valid` cells carry numbers.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, schemars::JsonSchema)]
// Only a valid cell carries figures, and it measured something; a cell that is not valid says why;
// an over-capacity cell says what it would need.
#[schemars(extend("allOf" = [
    {
        "if": { "properties": { "status": { "const": "valid" } }, "required": ["status"] },
        "then": { "properties": {
            "total_tok_s": { "type": "number", "exclusiveMinimum": 0 },
            "output_tokens": { "type": "integer", "minimum": 1 },
            "measured_s": { "type": "number", "exclusiveMinimum": 0 },
            "requests": { "type": "integer", "minimum": 1 },
            "token_source": { "$ref": "#/$defs/TokenSource" }
        } },
        "else": { "properties": {
            "total_tok_s": { "type": "null" }, "per_request_tok_s": { "type": "null" },
            "ttft_ms_p50": { "type": "null" }, "ttft_ms_p90": { "type": "null" }, "ttft_ms_p99": { "type": "null" },
            "tbt_ms_p50": { "type": "null" }, "tbt_ms_p90": { "type": "null" }, "tbt_ms_p99": { "type": "null" },
            "chunk_gap_ms_p50": { "type": "null" }, "chunk_gap_ms_p99": { "type": "null" },
            "avg_active": { "type": "null" }, "completed": { "type": "null" }, "output_tokens": { "type": "null" },
            "measured_s": { "type": "null" }, "requests": { "type": "null" }, "token_source": { "type": "null" }
        } }
    },
    {
        "if": { "properties": { "status": { "enum": ["over_capacity", "error", "loop"] } }, "required": ["status"] },
        "then": { "properties": { "reason": { "type": "string" } } }
    },
    {
        "if": { "properties": { "status": { "const": "over_capacity" } }, "required": ["status"] },
        "then": { "required": ["kv_need_tokens"] }
    }
]))]
pub struct DecodeCell {
    /// The fitted context in tokens: the prompt of every request of the cell has this many tokens.
    pub context: u64,
    /// The context's name: floor(requested context / 1024) followed by `K`, or the plain number under 1,024 (256K for a
    /// row requested as 262,144 tokens and measured at 257,984). Views print the exact count beside it where the label
    /// does not say it: `256K (257,984)`. Imported records and older ones label the context itself (257,024 → `251K`).
    #[schemars(regex(pattern = r"^([1-9][0-9]*K|[0-9]{1,4})$"))]
    pub label: String,
    /// Requests at once (C): the number of workers, each keeping one stream in flight.
    pub concurrency: u32,
    /// The cell's outcome; null is read as `error`.
    pub status: Option<CellStatus>,
    /// Why the cell is not valid, e.g. `needs 17,301,504 KV tokens, the server has 12,582,912` or `concurrency 16 is
    /// above max-num-seqs 8` (null when valid).
    pub reason: Option<String>,
    /// Total tok/s: output_tokens / measured_s, across all streams of the cell.
    pub total_tok_s: Option<f64>,
    /// Per request tok/s: the median over requests of 1000 / TBT_request_ms, measured per stream (not total / C).
    pub per_request_tok_s: Option<f64>,
    /// Time to first token in ms over every request started in the cell whose first token
    /// arrived before the window closed: p50, p90, p99 (the keys `ttft_ms_p50`, … of
    /// `ttft_ms_keys`).
    #[serde(flatten, with = "ttft_ms_keys")]
    #[schemars(with = "ttft_ms_keys::Keys")]
    pub ttft_ms: Percentiles,
    /// Time between tokens in ms, per request, over requests: p50, p90, p99 (the keys
    /// `tbt_ms_p50`, … of `tbt_ms_keys`).
    #[serde(flatten, with = "tbt_ms_keys")]
    #[schemars(with = "tbt_ms_keys::Keys")]
    pub tbt_ms: Percentiles,
    /// Time in ms between consecutive token-bearing chunks of one request inside the window: p50,
    /// p99 (the keys `chunk_gap_ms_p50`, `chunk_gap_ms_p99` of `chunk_gap_ms_keys`).
    #[serde(flatten, with = "chunk_gap_ms_keys")]
    #[schemars(with = "chunk_gap_ms_keys::Keys")]
    pub chunk_gap_ms: Percentiles,
    /// Average active requests: time-weighted mean over the window of the server's running gauge (sampled every 250 ms,
    /// held between samples); without metrics, the client's count of streams that have received a token and not ended.
    pub avg_active: Option<f64>,
    /// Completed requests: requests whose end (finish_reason or `[DONE]`) arrived inside the window.
    pub completed: Option<u64>,
    /// Output tokens that arrived inside the window [W0, W1): the sum of per-chunk increases of
    /// `usage.completion_tokens`, or the number of content-bearing chunks when `token_source` is `chunks`.
    pub output_tokens: Option<u64>,
    /// Measured for: W1 − W0 in seconds, the denominator of total_tok_s; equals the window length exactly.
    pub measured_s: Option<f64>,
    /// Requests that produced at least one token inside the window.
    pub requests: Option<u64>,
    pub token_source: Option<TokenSource>,
    /// Over capacity: the KV tokens the cell would need.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kv_need_tokens: Option<u64>,
    /// How late the client's async runtime woke during the window, p99 (ms): chunk
    /// timestamps may be late by about as much.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0))]
    #[schemars(extend("x-nullable" = true))]
    pub client_lag_ms_p99: Option<f64>,
    /// CPU the speedmatrix process used during the window, % of one core.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0))]
    #[schemars(extend("x-nullable" = true))]
    pub client_cpu_pct: Option<f64>,
    /// `100 × Σ cached_tokens / Σ prompt_tokens` over the cell's decode requests that reported
    /// both (`usage.prompt_tokens_details.cached_tokens`); absent when the server reports no
    /// cached tokens. Low means TTFT was not measured cache-warm.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0, max = 100))]
    pub prompt_cache_hit_pct: Option<f64>,
    /// A reasoning model's cell (issue 33): from each request's send to its first answer chunk, ms,
    /// over the requests whose first answer arrived before the window closed: p50, p90, p99 (the
    /// keys `ttfa_ms_p50`, … of `ttfa_ms_keys`). Absent where no request of the cell thought (its
    /// TTFT is then the wait for the answer).
    #[serde(flatten, with = "ttfa_ms_keys")]
    #[schemars(with = "ttfa_ms_keys::Keys")]
    pub ttfa_ms: Percentiles,
    /// The mean thinking tokens of the cell's ended requests (those before each one's first answer
    /// chunk); absent where no request thought.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0))]
    pub reasoning_tokens_mean: Option<f64>,
    /// Requests that ended with no answer: their thinking used up `max_tokens`; absent where no
    /// request thought.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub no_answer: Option<u64>,
    /// The mean answer tokens of the cell's ended requests (from each one's first answer chunk
    /// on); absent where no request thought.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0))]
    pub answer_tokens_mean: Option<f64>,
    /// The answer's own speed: the median over the ended requests with an answer of their answer
    /// tokens after the first answer chunk over the time from it to their last chunk, tok/s;
    /// absent where no request thought (it is then `per_request_tok_s`'s kin over whole answers).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0))]
    pub answer_tok_s: Option<f64>,
    /// The mean `usage.completion_tokens_details.reasoning_tokens` of the ended requests that
    /// reported it: the server's own count of the thinking, beside the stream's
    /// (`reasoning_tokens_mean`); absent where none reported it or no request thought.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0))]
    pub usage_reasoning_tokens_mean: Option<f64>,
    /// Ended requests whose thinking by the stream and by usage differ by more than one token (the
    /// end-of-thinking marker, which servers count on either side); absent where none reported it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reasoning_disagree: Option<u64>,
    /// A cell sent with tools (`run --tools`, methodology §7.3.1): from each request's send to its
    /// first tool-call chunk, ms, over the requests whose first call arrived before the window
    /// closed: p50, p90, p99 (the keys `ttftc_ms_p50`, … of `ttftc_ms_keys`). Absent where the
    /// cell's requests carried no tools.
    #[serde(flatten, with = "ttftc_ms_keys")]
    #[schemars(with = "ttftc_ms_keys::Keys")]
    pub ttftc_ms: Percentiles,
    /// The mean tokens of a call over the cell's completed requests that made one; absent where
    /// none did or the requests carried no tools.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0))]
    pub tool_call_tokens_mean: Option<f64>,
    /// Of those requests, the share whose call's arguments parse as a JSON object, 0–1.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0, max = 1))]
    pub tool_args_valid: Option<f64>,
    /// The cell's completed requests sent with tools that made no call; absent where the requests
    /// carried no tools.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub no_tool_call: Option<u64>,
    /// Requests of the cell sent a second time because their connection broke before any byte
    /// of the answer (a pooled keep-alive connection the server closed); absent when none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub client_retries: Option<u64>,
    /// Things a reader should know about a valid figure (e.g. the server held fewer streams than asked).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<String>,
    /// Whether the cell met every bound of `settings.slo` (valid cells).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub slo_met: Option<bool>,
    /// Each bound of the SLO as this cell measured it.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub slo_bounds: Vec<BoundCheck>,
    /// Share of the cell's requests that met every bound on their own figures (%).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0, max = 100))]
    pub goodput_pct: Option<f64>,
    /// Output tokens/s of the requests that met every bound.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0))]
    pub goodput_tok_s: Option<f64>,
    /// `--cost-per-hour` over the output tokens an hour makes at `total_tok_s`, USD per million.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0))]
    pub usd_per_million_tokens: Option<f64>,
    /// Measured by `--find-capacity`, not part of the planned matrix.
    #[serde(default, skip_serializing_if = "is_false")]
    pub searched: bool,
    /// 95 % confidence intervals of the main figures (methodology §12); absent before 1.2.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ci: Option<CellIntervals>,
    /// With `--precision`: whether total tok/s and TBT p50 reached it within the window.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub precision_met: Option<bool>,
    /// With `--repeats N`: every measurement of the cell; the cell's main figures are their means.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub repeats: Vec<Repeat>,
    /// With two or more repeats: whether they agree within their intervals (methodology §12.4).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub repeats_agree: Option<bool>,
    /// Where the cell's wall time went (s); absent before 1.2.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phases: Option<CellPhases>,
    /// The memory-bandwidth bound on total tok/s (methodology §14.4), with a model shape.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0))]
    pub roofline_tok_s: Option<f64>,
    /// `total_tok_s ÷ roofline_tok_s`: the share of the roofline achieved.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0))]
    pub roofline_fraction: Option<f64>,
    /// Speculative decoding in the window, from the engine's counters (methodology §14.2); absent
    /// where the engine exports none or did not speculate.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spec_decode: Option<crate::spec_decode::SpecDecode>,
    /// GPU power, energy and throttling in the window (methodology §14.3); absent without a source.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gpu: Option<crate::gpu_telemetry::GpuCell>,
    /// The server's gauges over the window, from its `/metrics` (methodology §14.1); absent
    /// where it has none or `--metrics-interval off`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server_metrics: Option<crate::server_metrics::ServerMetrics>,
    /// With `--ranks N` (1.4): each client process's streams, tokens and health; absent with one.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ranks: Vec<crate::ranks::RankCell>,
}

flat_keys! {
    /// A decode cell's TTFT as run.json writes it: null keys when the cell is not valid.
    mod ttft_ms_keys {
        /// Median time to first token in ms over every request started in the cell whose first token arrived before the
        /// window closed (first wave included). The prompt is cached, so this is admission + queueing + first step under
        /// load, not prefill.
        p50: "ttft_ms_p50",
        /// 90th percentile of the same TTFT distribution, in ms.
        p90: "ttft_ms_p90",
        /// 99th percentile of the same TTFT distribution, in ms.
        p99: "ttft_ms_p99",
    }
}

flat_keys! {
    /// A decode cell's TBT as run.json writes it: null keys when the cell is not valid.
    mod tbt_ms_keys {
        /// Median time between tokens in ms over requests; per request (t_last − t_first) / (n_last − n_first) over its
        /// token-bearing chunks inside the window, n the cumulative token count after each chunk.
        p50: "tbt_ms_p50",
        /// 90th percentile of the per-request TBT, in ms.
        p90: "tbt_ms_p90",
        /// 99th percentile of the per-request TBT, in ms.
        p99: "tbt_ms_p99",
    }
}

flat_keys! {
    /// A reasoning model's cell's time to the first answer token: absent keys where no request
    /// thought, so a record of a model that does not think is as before.
    mod ttfa_ms_keys {
        /// Median time in ms from a request's send to its first chunk with answer text, over the requests whose first
        /// answer arrived before the window closed.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        p50: "ttfa_ms_p50",
        /// 90th percentile of the same time to the first answer token, in ms.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        p90: "ttfa_ms_p90",
        /// 99th percentile of the same time to the first answer token, in ms.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        p99: "ttfa_ms_p99",
    }
}

flat_keys! {
    /// A cell sent with tools: its time to the first tool call; absent keys where the requests
    /// carried no tools, so a record of a run without `--tools` is as before.
    mod ttftc_ms_keys {
        /// Median time in ms from a request's send to its first chunk with a tool-call delta, over the requests whose
        /// first call arrived before the window closed.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        p50: "ttftc_ms_p50",
        /// 90th percentile of the same time to the first tool call, in ms.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        p90: "ttftc_ms_p90",
        /// 99th percentile of the same time to the first tool call, in ms.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        p99: "ttftc_ms_p99",
    }
}

flat_keys! {
    /// A decode cell's chunk gaps as run.json writes them: null keys when the cell is not valid.
    mod chunk_gap_ms_keys {
        /// Median time in ms between consecutive token-bearing chunks of one request, both inside the window, over all such
        /// gaps of the cell.
        p50: "chunk_gap_ms_p50",
        /// 99th percentile of the same chunk gaps, in ms.
        p99: "chunk_gap_ms_p99",
    }
}

/// 95 % confidence intervals of a cell's main figures; a figure has none when its samples are too
/// few for one (methodology §12).
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize, schemars::JsonSchema)]
pub struct CellIntervals {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub total_tok_s: Option<Interval>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub per_request_tok_s: Option<Interval>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ttft_ms_p50: Option<Interval>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ttft_ms_p90: Option<Interval>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tbt_ms_p50: Option<Interval>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tbt_ms_p99: Option<Interval>,
    /// A reasoning model's cell: TTFA's, by order statistics as TTFT's (§12.2).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ttfa_ms_p50: Option<Interval>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ttfa_ms_p90: Option<Interval>,
    /// A cell sent with tools: TTFTC's, by order statistics as TTFT's (§12.2).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ttftc_ms_p50: Option<Interval>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ttftc_ms_p90: Option<Interval>,
}

/// The main figures of one measurement of a cell under `--repeats`.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Repeat {
    #[schemars(extend("x-optional" = true, "x-nullable" = true))]
    pub total_tok_s: Option<f64>,
    #[schemars(extend("x-optional" = true, "x-nullable" = true))]
    pub per_request_tok_s: Option<f64>,
    #[schemars(extend("x-optional" = true, "x-nullable" = true))]
    pub ttft_ms_p50: Option<f64>,
    #[schemars(extend("x-optional" = true, "x-nullable" = true))]
    pub ttft_ms_p90: Option<f64>,
    #[schemars(extend("x-optional" = true, "x-nullable" = true))]
    pub tbt_ms_p50: Option<f64>,
    #[schemars(extend("x-optional" = true, "x-nullable" = true))]
    pub tbt_ms_p99: Option<f64>,
    #[schemars(extend("x-optional" = true, "x-nullable" = true))]
    pub measured_s: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub goodput_tok_s: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ci: Option<CellIntervals>,
    /// Why this measurement has no figures (it was not valid).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

/// Where a cell's wall time went, in seconds: the scout and the drain before it, the ramp to
/// stable readiness, the window, and stopping the streams and draining after it.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize, schemars::JsonSchema)]
pub struct CellPhases {
    #[schemars(range(min = 0))]
    pub before_s: f64,
    #[schemars(range(min = 0))]
    pub ramp_s: f64,
    #[schemars(range(min = 0))]
    pub window_s: f64,
    #[schemars(range(min = 0))]
    pub after_s: f64,
}

impl DecodeCell {
    pub fn status(&self) -> CellStatus {
        self.status.unwrap_or(CellStatus::Error)
    }
}

/// A cell or prefill row of the plan, before it is measured.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct PlannedCell {
    pub kind: PlanKind,
    /// The context as requested, before fitting.
    pub requested_context: u64,
    /// The fitted context; 0 when the context was skipped because it does not fit the model.
    pub context: u64,
    /// The context's name, by what was requested: floor(requested_context / 1024) followed by `K`, or the plain number
    /// under 1,024.
    #[schemars(regex(pattern = r"^([1-9][0-9]*K|[0-9]{1,4})$"))]
    pub label: String,
    /// Requests at once; 1 for prefill rows, 0 for a skipped decode row (the whole row).
    pub concurrency: u32,
    pub status: PlanStatus,
    /// Why the cell is over capacity or skipped; null when planned (also when the context was trimmed to fit: `context`
    /// then differs from `requested_context`).
    pub reason: Option<String>,
}

/// What a plan entry measures; run.json writes `prefill` or `decode`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum PlanKind {
    Prefill,
    Decode,
}

impl PlanKind {
    pub fn name(self) -> &'static str {
        match self {
            PlanKind::Prefill => "prefill",
            PlanKind::Decode => "decode",
        }
    }
}

impl std::fmt::Display for PlanKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    /// A decode cell writes each key of its distributions where its fields stood, null when
    /// absent, and reads them back key by key (one key without the others included).
    #[test]
    fn a_distribution_writes_its_keys_flat_and_null_when_absent() {
        let cell =
            DecodeCell { ttft_ms: Percentiles { p90: Some(2.5), ..Percentiles::default() }, ..DecodeCell::default() };
        let text = serde_json::to_string(&cell).unwrap();
        let at = |k: &str| text.find(&format!("\"{k}\"")).unwrap();
        assert!(at("per_request_tok_s") < at("ttft_ms_p50") && at("ttft_ms_p99") < at("tbt_ms_p50"), "{text}");
        assert!(at("tbt_ms_p99") < at("chunk_gap_ms_p50") && at("chunk_gap_ms_p99") < at("avg_active"), "{text}");
        let json: serde_json::Value = serde_json::from_str(&text).unwrap();
        assert_eq!(json["ttft_ms_p50"], json!(null));
        assert_eq!((&json["ttft_ms_p90"], &json["chunk_gap_ms_p99"]), (&json!(2.5), &json!(null)));
        assert!(json.get("ttft_ms_max").is_none() && json.get("chunk_gap_ms_p90").is_none());
        assert_eq!(serde_json::from_value::<DecodeCell>(json).unwrap(), cell);
    }
}
