//! A cell, a rate level or a burst measured by several client processes (ranks, `--ranks N`): what each rank
//! drove and how healthy it was. The figures are the merge of every rank's requests (methodology
//! §7.3, §13.1); these are the per-rank facts a reader needs to trust that merge.

use serde::{Deserialize, Serialize};

/// One rank's share of a decode cell.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, schemars::JsonSchema)]
pub struct RankCell {
    /// 0 is the coordinator (it also drives streams); 1..N−1 are workers.
    pub rank: u32,
    /// The streams this rank held open: the ranks' streams add up to the cell's concurrency.
    pub streams: u32,
    /// Output tokens of this rank's requests inside the window: they add up to the cell's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_tokens: Option<u64>,
    /// This rank's requests with a token inside the window.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub requests: Option<u64>,
    /// How late this rank's async runtime woke during its window, p99 (ms).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0))]
    pub client_lag_ms_p99: Option<f64>,
    /// CPU this rank's process used during its window, % of one core.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0))]
    pub client_cpu_pct: Option<f64>,
    /// Round trip of the window-open message from rank 0 to this worker and back (ms): the
    /// worker's window opened at most this long after rank 0's (absent on rank 0).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0))]
    pub open_rtt_ms: Option<f64>,
}

/// One rank's part of a rate level or a burst (`--request-rate`, `--burst` over ranks): every N-th
/// request of the schedule.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, schemars::JsonSchema)]
pub struct RankLevel {
    /// 0 is the coordinator (it also sends requests); 1..N−1 are workers.
    pub rank: u32,
    /// The requests of the schedule that were this rank's: they add up to the level's.
    pub scheduled: u64,
    pub sent: u64,
    pub completed: u64,
    /// How far behind the schedule this rank sent, p99 over its sent requests (ms): a rank whose
    /// client could not keep up shows here, the server's cap too.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0))]
    pub send_lag_ms_p99: Option<f64>,
    /// Round trip of the level's open message from rank 0 to this worker and back (ms): the worker
    /// started its part at most this long after rank 0 (absent on rank 0).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0))]
    pub open_rtt_ms: Option<f64>,
}
