//! `/dcgm/metrics`: the profile's simulated GPU in a DCGM exporter's Prometheus text (the
//! `DCGM_FI_DEV_*` names of dcgm-exporter's default counters), so the whole telemetry path is
//! tested without a GPU. Power follows the running batch; the energy counter integrates it.

use std::fmt::Write;
use std::sync::Arc;

use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};

use super::AppState;

pub(crate) async fn dcgm(State(st): State<Arc<AppState>>) -> Response {
    let Some(gpu) = &st.profile.gpu else { return StatusCode::NOT_FOUND.into_response() };
    let s = st.stats();
    let (power, capped) = gpu.power(s.running);
    let energy = s.energy.at(gpu, s.running, st.clock.now());
    let labels = format!(
        r#"gpu="0",UUID="GPU-00000000-5157-0000-0000-000000000000",device="nvidia0",modelName="{}",Hostname="sm-sim""#,
        gpu.name
    );
    let reasons = if capped { crate::gpu::SW_POWER_CAP } else { 0 };
    let util = if s.running > 0 { 100 } else { 0 };
    let mut out = String::with_capacity(2048);
    let mut gauge = |name: &str, kind: &str, help: &str, value: String| {
        let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} {kind}\n{name}{{{labels}}} {value}");
    };
    gauge("DCGM_FI_DEV_SM_CLOCK", "gauge", "SM clock frequency (in MHz).", "1980".into());
    gauge("DCGM_FI_DEV_MEM_CLOCK", "gauge", "Memory clock frequency (in MHz).", "2619".into());
    gauge("DCGM_FI_DEV_GPU_TEMP", "gauge", "GPU temperature (in C).", format!("{}", 40 + s.running.min(40)));
    gauge("DCGM_FI_DEV_POWER_USAGE", "gauge", "Power draw (in W).", format!("{power:?}"));
    // DCGM exports the counter in whole millijoules
    let mj = (energy.joules * 1000.0).floor();
    gauge(
        "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION",
        "counter",
        "Total energy consumption since boot (in mJ).",
        format!("{mj:.0}"),
    );
    gauge("DCGM_FI_DEV_GPU_UTIL", "gauge", "GPU utilization (in %).", util.to_string());
    gauge("DCGM_FI_DEV_XID_ERRORS", "gauge", "Value of the last XID error encountered.", "0".into());
    gauge("DCGM_FI_DEV_CLOCKS_EVENT_REASONS", "gauge", "Current clock event reasons (bitmask).", reasons.to_string());
    ([(header::CONTENT_TYPE, "text/plain; version=0.0.4; charset=utf-8")], out).into_response()
}
