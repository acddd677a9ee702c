//! speedmatrix's integration tests: the binary end to end against the simulated engine (run,
//! resume, faults, secrets, the dashboard, reports, the site), and against real engines
//! (`real_engines`: ignored unless scripts/engines/real-engine-tests.sh runs them).
//!
//! One integration-test binary for the crate, its parts as modules: the crate and its
//! dependencies are linked once, not once per test file.

mod common;
mod compare_cli;
mod dashboard;
mod dashboard_hangup;
mod fidelity;
mod golden;
mod progress;
mod real_engines;
mod report_cli;
mod run_burst;
mod run_cache_and_retry;
mod run_capacity;
mod run_faults;
mod run_frontier;
mod run_gpu_telemetry;
mod run_help;
mod run_interrupt;
mod run_measure;
mod run_mixed_prefill;
mod run_mixed_prefill_faults;
mod run_phase_faults;
mod run_phase_server_down;
mod run_phase_thinking;
pub mod run_phases;
mod run_plan;
mod run_precision;
mod run_ranks;
mod run_ranks_rate;
mod run_rate;
mod run_rate_verdicts;
mod run_replay;
mod run_requests;
mod run_resume;
mod run_resume_telemetry;
mod run_roofline;
mod run_secrets;
mod run_server_cmd;
mod run_server_down;
mod run_server_metrics;
mod run_sessions;
mod run_sessions_faults;
mod run_span_telemetry;
mod run_spec_decode;
mod run_thinking;
mod run_token_counts;
mod run_tokenizer;
mod run_tools;
mod seed_profile;
mod sim_flags;
mod site_capacity;
mod site_cli;
mod site_common;
mod site_compare;
mod site_contexts;
mod site_http;
mod site_phases;
mod site_rejudge;
mod site_thinking;
mod site_tools;
