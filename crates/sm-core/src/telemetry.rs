//! The telemetry of a measured span that is not a decode cell — a prefill row, a load phase's
//! level, burst or probe (methodology §14.1 and §14.3): the same server series and GPU figures
//! as a decode cell's, under the same names (`server_metrics`, `gpu`), absent where there is no
//! source.

use serde::{Deserialize, Serialize};

use crate::gpu_telemetry::GpuCell;
use crate::server_metrics::ServerMetrics;

/// Flattened into the row or level that it measures, so its fields sit beside the row's own.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Telemetry {
    /// The server's gauges over the span, from its `/metrics`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server_metrics: Option<ServerMetrics>,
    /// GPU power and energy over the span.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gpu: Option<GpuCell>,
}

impl Telemetry {
    pub fn is_empty(&self) -> bool {
        self.server_metrics.is_none() && self.gpu.is_none()
    }
}
