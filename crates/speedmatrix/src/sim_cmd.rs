//! `speedmatrix sim`: owned by the simulated-engine work (crates/sm-sim).

use std::process::ExitCode;

#[derive(Debug, clap::Args)]
pub struct SimArgs {}

pub async fn main(_args: SimArgs) -> ExitCode {
    eprintln!("speedmatrix sim: not built yet");
    ExitCode::from(1)
}
