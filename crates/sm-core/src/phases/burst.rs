//! Issue 17 §2 — bursts of C requests at once (`--burst`): the phase's section of `run.json`
//! (methodology §13.2). One [`Burst`] per context × concurrency × round, in the order measured;
//! over-capacity cells are kept as bursts that did not run, with the plan's reason.

use serde::{Deserialize, Serialize};

use crate::phases::answers::{ThinkingFigures, ToolCallFigures};
use crate::record::percentiles::{Percentiles, flat_keys};
use crate::record::status::CellStatus;

/// The burst phase: its settings and every burst measured so far.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct BurstPhase {
    /// `max_tokens` of each request (a prompts-file line may set its own).
    pub max_tokens: u64,
    /// Whether the requests asked the server to ignore end-of-sequence (`--no-ignore-eos` clears it).
    pub ignore_eos: bool,
    /// `--burst-rounds`: how many times each burst is sent; the views show the median over rounds.
    #[schemars(range(min = 1))]
    pub rounds: u32,
    /// Where the bursts came from when this run did not measure them (an imported file).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub imported_from: Option<String>,
    /// Every burst, in the order measured; an over-capacity cell once, unsent.
    pub bursts: Vec<Burst>,
}

/// One burst: `concurrency` requests due at the same instant, each read to its end.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Burst {
    /// The prompt's planned length in tokens; `None` when the prompts came from `--prompts FILE`.
    pub context: Option<u64>,
    /// The context as the user asked for it ("8K"), or "file" for a prompts file.
    pub label: String,
    /// C: requests due at once.
    #[schemars(range(min = 1))]
    pub concurrency: u32,
    /// Which round of the cell this is, from 1.
    #[schemars(range(min = 1))]
    pub round: u32,
    /// `valid` when every request completed; `error` when one failed; `over_capacity` when the
    /// burst was not sent because the plan says it does not fit. A burst the user stopped is not
    /// recorded: a resume sends it again.
    pub status: CellStatus,
    /// Why the burst is not valid.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// Requests sent (imported files: the reference tool's request count, which may exceed C).
    pub requests: u64,
    /// Requests that completed (finish_reason or [DONE]).
    pub completed: u64,
    /// Requests that did not complete.
    pub failed: u64,
    /// When the burst was due, seconds since the run started (the run's clock, §13).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0))]
    #[schemars(extend("x-nullable" = true))]
    pub scheduled_s: Option<f64>,
    /// End-to-end latency of the completed requests, from the burst's scheduled time to the
    /// request's end, in ms: p50, p90, max (the keys `e2e_ms_p50`, … of `e2e_ms_keys`).
    #[serde(flatten, with = "e2e_ms_keys")]
    #[schemars(with = "e2e_ms_keys::Keys")]
    pub e2e_ms: Percentiles,
    /// From the scheduled time to the end of the last completed request, in ms.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0))]
    #[schemars(extend("x-nullable" = true))]
    pub last_completion_ms: Option<f64>,
    /// Time to first token from the scheduled time, over requests that received one, in ms: p50,
    /// p90, max (the keys `ttft_ms_p50`, … of `ttft_ms_keys`).
    #[serde(flatten, with = "ttft_ms_keys")]
    #[schemars(with = "ttft_ms_keys::Keys")]
    pub ttft_ms: Percentiles,
    /// Output tokens of the completed requests.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("x-nullable" = true))]
    pub output_tokens: Option<u64>,
    /// `output_tokens` ÷ `last_completion_ms`, in tokens per second.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0))]
    #[schemars(extend("x-nullable" = true))]
    pub total_tok_s: Option<f64>,
    /// From the first request's send to the last one's, in ms: how far the client was from
    /// sending all C at once.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0))]
    #[schemars(extend("x-nullable" = true))]
    pub send_spread_ms: Option<f64>,
    /// A reasoning model's burst (issue 33): TTFA from the burst's scheduled instant over the
    /// completed requests that answered, their mean thinking tokens, those left without an answer;
    /// absent where no request thought.
    #[serde(flatten)]
    pub thinking: crate::phases::answers::ThinkingFigures,
    /// A run with `--tools`: time to the first tool call from the scheduled instant, the calls'
    /// tokens, whether their arguments parse, the requests that made none; absent without tools.
    #[serde(flatten)]
    pub tool_calls: crate::phases::answers::ToolCallFigures,
    /// The server's gauges and the GPUs from just before the burst is sent to its last request's
    /// end (methodology §14); only a valid burst.
    #[serde(flatten)]
    pub telemetry: crate::telemetry::Telemetry,
    /// With `--ranks N` (1.4): each client process's part of the burst; absent with one.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ranks: Vec<crate::ranks::RankLevel>,
}

flat_keys! {
    /// A burst's end-to-end latencies as run.json writes them: an absent key is left out.
    mod e2e_ms_keys {
        /// End-to-end latency of the completed requests, from the burst's scheduled time to the
        /// request's end, in ms.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        #[schemars(range(min = 0))]
        #[schemars(extend("x-nullable" = true))]
        p50: "e2e_ms_p50",
        /// End-to-end latency p90, ms.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        #[schemars(range(min = 0))]
        #[schemars(extend("x-nullable" = true))]
        p90: "e2e_ms_p90",
        /// End-to-end latency of the slowest completed request, ms.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        #[schemars(range(min = 0))]
        #[schemars(extend("x-nullable" = true))]
        max: "e2e_ms_max",
    }
}

flat_keys! {
    /// A burst's times to first token as run.json writes them: an absent key is left out.
    mod ttft_ms_keys {
        /// Time to first token from the scheduled time, over requests that received one, in ms.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        #[schemars(range(min = 0))]
        #[schemars(extend("x-nullable" = true))]
        p50: "ttft_ms_p50",
        /// Time to first token p90, ms.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        #[schemars(range(min = 0))]
        #[schemars(extend("x-nullable" = true))]
        p90: "ttft_ms_p90",
        /// The longest time to first token, ms.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        #[schemars(range(min = 0))]
        #[schemars(extend("x-nullable" = true))]
        max: "ttft_ms_max",
    }
}

impl Default for Burst {
    /// A burst with no figure yet, not valid until measured.
    fn default() -> Self {
        Burst {
            context: None,
            label: String::new(),
            concurrency: 0,
            round: 1,
            status: CellStatus::Error,
            reason: None,
            requests: 0,
            completed: 0,
            failed: 0,
            scheduled_s: None,
            e2e_ms: Percentiles::default(),
            last_completion_ms: None,
            ttft_ms: Percentiles::default(),
            output_tokens: None,
            total_tok_s: None,
            send_spread_ms: None,
            thinking: Default::default(),
            tool_calls: Default::default(),
            telemetry: Default::default(),
            ranks: Vec::new(),
        }
    }
}

impl BurstPhase {
    /// Whether a burst ended in an error (a failed request, or a looping answer).
    pub fn errored(&self) -> bool {
        self.bursts.iter().any(|b| matches!(b.status, CellStatus::Error | CellStatus::Loop))
    }

    /// The bursts of one cell (context × concurrency), every round.
    pub fn cell(&self, context: Option<u64>, concurrency: u32) -> impl Iterator<Item = &Burst> {
        self.bursts.iter().filter(move |b| b.context == context && b.concurrency == concurrency)
    }

    /// The cells in the order first measured: `(context, label, concurrency)`.
    pub fn cells(&self) -> Vec<(Option<u64>, String, u32)> {
        let mut cells: Vec<(Option<u64>, String, u32)> = Vec::new();
        for b in &self.bursts {
            if !cells.iter().any(|(c, _, n)| *c == b.context && *n == b.concurrency) {
                cells.push((b.context, b.label.clone(), b.concurrency));
            }
        }
        cells
    }

    /// One cell's figures over its rounds: each figure the median of the rounds that have it
    /// (one round: that round). `None` when the cell has no burst.
    pub fn summary(&self, context: Option<u64>, concurrency: u32) -> Option<Burst> {
        let rounds: Vec<&Burst> = self.cell(context, concurrency).collect();
        let first = *rounds.first()?;
        let valid: Vec<&Burst> = rounds.iter().copied().filter(|b| b.status == CellStatus::Valid).collect();
        let measured = if valid.is_empty() { rounds.clone() } else { valid };
        let med = |f: &dyn Fn(&Burst) -> Option<f64>| {
            crate::stats::median(&measured.iter().filter_map(|b| f(b)).collect::<Vec<_>>())
        };
        let worst = rounds.iter().find(|b| b.status != CellStatus::Valid).copied();
        Some(Burst {
            context,
            label: first.label.clone(),
            concurrency,
            round: rounds.len() as u32,
            status: worst.map_or(CellStatus::Valid, |b| b.status),
            reason: worst.and_then(|b| b.reason.clone()),
            requests: rounds.iter().map(|b| b.requests).sum(),
            completed: rounds.iter().map(|b| b.completed).sum(),
            failed: rounds.iter().map(|b| b.failed).sum(),
            scheduled_s: first.scheduled_s,
            e2e_ms: Percentiles::each(|q| med(&|b| q(&b.e2e_ms))),
            last_completion_ms: med(&|b| b.last_completion_ms),
            ttft_ms: Percentiles::each(|q| med(&|b| q(&b.ttft_ms))),
            output_tokens: med(&|b| b.output_tokens.map(|t| t as f64)).map(|t| t.round() as u64),
            total_tok_s: med(&|b| b.total_tok_s),
            send_spread_ms: med(&|b| b.send_spread_ms),
            thinking: ThinkingFigures::over(&measured.iter().map(|b| b.thinking).collect::<Vec<_>>()),
            tool_calls: ToolCallFigures::over(&measured.iter().map(|b| b.tool_calls).collect::<Vec<_>>()),
            // each round's telemetry is its own span's; a median of series means nothing
            telemetry: Default::default(),
            // and each round's parts are in its own record
            ranks: Vec::new(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn burst(round: u32, e2e: f64, status: CellStatus) -> Burst {
        Burst {
            context: Some(1024),
            label: "1K".into(),
            concurrency: 4,
            round,
            status,
            requests: 4,
            completed: if status == CellStatus::Valid { 4 } else { 3 },
            failed: if status == CellStatus::Valid { 0 } else { 1 },
            e2e_ms: Percentiles { p50: Some(e2e), ..Percentiles::default() },
            total_tok_s: Some(1000.0 / e2e),
            ..Burst::default()
        }
    }

    #[test]
    fn rounds_summarise_as_medians_of_the_valid_ones_and_a_failure_shows() {
        let phase = BurstPhase {
            bursts: vec![
                burst(1, 100.0, CellStatus::Valid),
                burst(2, 300.0, CellStatus::Valid),
                burst(3, 200.0, CellStatus::Valid),
                burst(4, 9_000.0, CellStatus::Error),
            ],
            ..BurstPhase::default()
        };
        let s = phase.summary(Some(1024), 4).unwrap();
        assert_eq!(s.e2e_ms.p50, Some(200.0), "the failed round's figures are left out");
        assert_eq!((s.round, s.requests, s.completed, s.failed), (4, 16, 15, 1));
        assert_eq!(s.status, CellStatus::Error);
        assert!(phase.summary(Some(2048), 4).is_none());
        assert_eq!(phase.cells(), vec![(Some(1024), "1K".to_string(), 4)]);
    }

    #[test]
    fn a_record_without_optional_figures_reads_back() {
        let b = Burst {
            status: CellStatus::OverCapacity,
            reason: Some("needs more KV".into()),
            ..burst(1, 1.0, CellStatus::Valid)
        };
        let b = Burst { e2e_ms: Percentiles::default(), total_tok_s: None, ..b };
        let text = serde_json::to_string(&b).unwrap();
        assert!(!text.contains("e2e_ms_p50") && text.contains("over_capacity"), "{text}");
        assert_eq!(serde_json::from_str::<Burst>(&text).unwrap(), b);
    }

    /// A burst leaves an absent key of a distribution out, and reads one key without the others.
    #[test]
    fn a_distribution_writes_the_keys_it_has() {
        let b = Burst { e2e_ms: Percentiles { max: Some(9.0), ..Percentiles::default() }, ..Burst::default() };
        let text = serde_json::to_string(&b).unwrap();
        assert!(
            text.contains(r#""e2e_ms_max":9.0"#) && !text.contains("e2e_ms_p50") && !text.contains("ttft_ms"),
            "{text}"
        );
        assert_eq!(serde_json::from_str::<Burst>(&text).unwrap(), b);
    }
}
