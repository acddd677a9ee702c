//! `speedmatrix import`: converts a reference-tool result into a
//! `speedmatrix.run/1` record (DIR/run.json).

use std::path::PathBuf;
use std::process::ExitCode;

#[derive(Debug, clap::Args)]
pub struct ImportArgs {
    /// An llm-inference-bench result JSON (0.4.x–0.7.x) or a lil-bench-result/1 upload.
    pub file: PathBuf,
    /// Directory to write run.json into (created if missing).
    #[arg(long, value_name = "DIR", default_value = ".")]
    pub out: PathBuf,
}

pub fn main(args: ImportArgs) -> ExitCode {
    let record = match sm_report::load_any(&args.file) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(2);
        }
    };
    let json = match serde_json::to_string_pretty(&record) {
        Ok(j) => j + "\n",
        Err(e) => {
            eprintln!("error: cannot serialise the record: {e}");
            return ExitCode::from(1);
        }
    };
    let path = args.out.join("run.json");
    let written = std::fs::create_dir_all(&args.out).and_then(|()| sm_report::write_atomic(&path, &json));
    match written {
        Ok(p) => {
            let cells = record.decode.len();
            println!("wrote {} ({} prefill rows, {cells} decode cells)", p.display(), record.prefill.len());
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("error: cannot write {}: {e}", path.display());
            ExitCode::from(1)
        }
    }
}
