//! `speedmatrix run`.

use std::process::ExitCode;

#[derive(Debug, clap::Args)]
pub struct RunArgs {}

pub async fn main(_args: RunArgs) -> ExitCode {
    eprintln!("speedmatrix run: not built yet");
    ExitCode::from(1)
}
