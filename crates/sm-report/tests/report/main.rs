//! sm-report's integration tests: importers, the page, its notes, style and CSV.
//!
//! One integration-test binary for the crate, its parts as modules: the crate and its
//! dependencies are linked once, not once per test file.

mod burst_page;
mod capacity_page;
mod common;
mod csv_columns;
mod import_and_render;
mod import_fixtures;
mod import_prop;
mod mixed_page;
mod page_notes;
mod page_style;
mod precision_page;
mod reference_page;
mod replay_page;
mod server_gauges_page;
mod sessions_page;
