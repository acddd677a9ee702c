//! The engine's scheduler as its `/metrics` shows it: read by the client, carried by the live
//! progress samples (so a display needs no HTTP client to show it).

#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SchedulerState {
    /// Requests the engine is generating for, summed over data-parallel engines.
    pub running: f64,
    pub waiting: f64,
    /// KV cache usage, 0..1 (mean over engines), where the engine reports it.
    pub kv_usage: Option<f64>,
    /// Speculative-decoding counters, where the engine exports them.
    pub spec: Option<crate::spec_decode::SpecCounters>,
}
