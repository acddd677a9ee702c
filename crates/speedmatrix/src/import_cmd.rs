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
    /// Judge the file's cells against this service level instead of the default, from their
    /// summary figures, e.g. 'tok_s>=30,ttft_p99<=1s'.
    #[arg(long, value_name = "EXPR", value_parser = crate::report_cmd::parse_slo)]
    pub slo: Option<sm_core::slo::Slo>,
}

pub fn main(args: ImportArgs) -> ExitCode {
    let record = match sm_report::load(&args.file, &sm_report::Judging { slo: args.slo.clone(), shape: None }) {
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
            let plural = sm_core::units::plural;
            let (rows, cells) =
                (plural(record.prefill.len() as u64, "prefill row"), plural(record.decode.len() as u64, "decode cell"));
            println!("wrote {} ({rows}, {cells})", p.display());
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("error: cannot write {}: {e}", path.display());
            ExitCode::from(1)
        }
    }
}
