//! `speedmatrix report`: renders a run (run.json, a run directory, or a
//! reference-tool file, imported on the fly) as HTML, Markdown and CSV.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use sm_core::slo::Slo;

/// Renders a record as one output format.
type Render = fn(&sm_core::record::RunRecord) -> String;

#[derive(Debug, clap::Args)]
pub struct ReportArgs {
    /// A run.json, a run directory, or a reference-tool result (llm-inference-bench JSON, lil-bench-result/1).
    pub run: PathBuf,
    /// Write the HTML page here.
    #[arg(long, value_name = "FILE")]
    pub html: Option<PathBuf>,
    /// Write the Markdown version here.
    #[arg(long, value_name = "FILE")]
    pub md: Option<PathBuf>,
    /// Write the measurements as CSV here; each load phase that ran gets its own CSV beside it,
    /// FILE's name with `-<phase>` added (e.g. measurements-rate.csv).
    #[arg(long, value_name = "FILE")]
    pub csv: Option<PathBuf>,
    /// Open the HTML page in the default browser afterwards.
    #[arg(long)]
    pub open: bool,
    /// Judge an imported file (or a run recorded before speedmatrix.run/1.1) against this service
    /// level instead of the default, from its cells' summary figures, e.g. 'tok_s>=30,ttft_p99<=1s'.
    #[arg(long, value_name = "EXPR", value_parser = parse_slo)]
    pub slo: Option<Slo>,
    /// For a run recorded without a model description: `--model-config` (or `--active-params` …)
    /// gives its valid cells their memory-bandwidth roofline in the reports written now
    /// (run.json is not changed).
    #[command(flatten)]
    pub roofline: crate::roofline_args::RooflineArgs,
}

pub(crate) fn parse_slo(s: &str) -> Result<Slo, String> {
    s.parse::<Slo>().map_err(|e| e.to_string())
}

pub fn main(args: ReportArgs) -> ExitCode {
    // the model shape (for the roofline) is read first: a bad --model-config is the flag's error
    let shape = match args.roofline.shape() {
        Ok(shape) => shape,
        Err(e) => {
            eprintln!("error: {e:#}");
            return ExitCode::from(2);
        }
    };
    let judging = sm_report::Judging { slo: args.slo.clone(), shape };
    let record = match sm_report::load(&args.run, &judging) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(2);
        }
    };
    let written = if args.html.is_none() && args.md.is_none() && args.csv.is_none() {
        let dir = default_dir(&args.run);
        sm_report::write_all(&record, &dir)
    } else {
        let mut out = Vec::new();
        let mut result = Ok(());
        let csv = args.csv.as_ref().filter(|_| sm_report::has_measurements(&record));
        if let Some(path) = args.csv.as_ref().filter(|_| csv.is_none()) {
            eprintln!(
                "note: {} is not written: the run measured load phases only, whose CSVs are written beside it",
                path.display()
            );
        }
        let jobs: [(Option<&PathBuf>, Render); 3] = [
            (args.html.as_ref(), |r| sm_report::html_page(r, &[])),
            (args.md.as_ref(), sm_report::markdown),
            (csv, sm_report::csv),
        ];
        for (path, render) in jobs {
            if let Some(path) = path {
                match sm_report::write_atomic(path, &render(&record)) {
                    Ok(p) => out.push(p),
                    Err(e) => {
                        result = Err(std::io::Error::new(e.kind(), format!("{}: {e}", path.display())));
                        break;
                    }
                }
            }
        }
        if let (Ok(()), Some(path)) = (&result, &args.csv) {
            for (name, text) in sm_report::phases::csv_files(&record) {
                match sm_report::write_atomic(&phase_csv_path(path, &name), &text) {
                    Ok(p) => out.push(p),
                    Err(e) => {
                        result = Err(std::io::Error::new(e.kind(), format!("{}: {e}", path.display())));
                        break;
                    }
                }
            }
        }
        result.map(|()| out)
    };
    let written = match written {
        Ok(w) => w,
        Err(e) => {
            eprintln!("error: cannot write the report: {e}");
            return ExitCode::from(1);
        }
    };
    let answer = sm_report::capacity_text(&record, crate::run_cmd::terminal_width());
    if !answer.is_empty() {
        println!("{answer}");
    }
    for p in &written {
        println!("wrote {}", p.display());
    }
    if args.open {
        match written.iter().find(|p| p.extension().is_some_and(|e| e == "html")) {
            Some(html) => {
                if let Err(e) = open(html) {
                    eprintln!("warning: cannot open {} in a browser: {e}; open it yourself", html.display());
                }
            }
            None => eprintln!("warning: --open: no HTML page was written (name one with --html FILE)"),
        }
    }
    ExitCode::SUCCESS
}

/// `dir/measurements.csv` and `rate.csv` → `dir/measurements-rate.csv`.
fn phase_csv_path(csv: &Path, phase_file: &str) -> PathBuf {
    let stem = csv.file_stem().map_or_else(|| "measurements".into(), |s| s.to_string_lossy().into_owned());
    csv.with_file_name(format!("{stem}-{phase_file}"))
}

/// Next to the run for a speedmatrix run; the current directory for a
/// reference-tool file, whose own directory may be read-only or shared.
fn default_dir(run: &Path) -> PathBuf {
    if run.is_dir() {
        return run.to_path_buf();
    }
    let is_own_run = run.file_name().is_some_and(|n| n == "run.json");
    match run.parent() {
        Some(p) if is_own_run && !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    }
}

fn open(path: &Path) -> std::io::Result<()> {
    let opener = if cfg!(target_os = "macos") {
        "open"
    } else if cfg!(windows) {
        "explorer"
    } else {
        "xdg-open"
    };
    let mut child = std::process::Command::new(opener).arg(path).spawn().map_err(|e| {
        let why = if e.kind() == std::io::ErrorKind::NotFound { "not found".to_string() } else { e.to_string() };
        std::io::Error::new(e.kind(), format!("{opener}: {why}"))
    })?;
    // An opener that fails (no browser configured) exits at once; one that
    // started a browser may stay until the browser closes, so wait only briefly.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    while std::time::Instant::now() < deadline {
        if let Some(status) = child.try_wait()? {
            return if status.success() {
                Ok(())
            } else {
                Err(std::io::Error::other(format!("{opener} failed ({status})")))
            };
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    Ok(())
}
