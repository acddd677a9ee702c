//! sm-client's integration tests: discovery against the simulated engine, and the parsers' properties.
//!
//! One integration-test binary for the crate, its parts as modules: the crate and its
//! dependencies are linked once, not once per test file.

mod discover_sim;
mod fast_path;
mod parsers_prop;
mod stream_sim;
mod wire_sim;
