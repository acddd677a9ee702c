//! The simulated engine's integration tests: its HTTP API, flavors, faults, scheduler and trace.
//!
//! One integration-test binary for the crate, its parts as modules: the crate and its
//! dependencies are linked once, not once per test file.

mod api;
mod common;
mod engine;
mod faults;
mod flavors;
mod noise;
mod reasoning;
mod schedule;
mod tools;
mod trace;
