//! The speed test matrix page that people read, made from a `speedmatrix.run/1`
//! record: a self-contained HTML page ([`html_page`]), the same content as
//! GitHub-flavoured Markdown ([`markdown`]), one CSV row per measurement
//! ([`csv`]) and the end-of-run console view ([`terminal`]). [`import`] reads
//! the reference tool's result files into the same record.
//!
//! All views are built from one model of the page ([`view`]), so they cannot
//! disagree about a figure; numbers are formatted as on the published page
//! ([`format`]).

pub mod capacity;
pub mod charts;
pub mod compare;
mod csv;
pub mod escape;
mod facts;
pub mod format;
pub mod frontier;
mod html;
pub use html::{CSS, head_meta};
pub mod gpu;
pub mod import;
mod judged;
mod markdown;
pub mod meta;
mod methodology;
pub mod phases;
pub mod server_metrics;
pub mod spec_decode;
pub mod svg;
mod telemetry;
mod terminal;
pub mod view;
mod wrap;

use std::path::{Path, PathBuf};

use sm_core::record::RunRecord;

pub use csv::csv;
pub use html::html_page;
pub use import::ImportError;
pub use judged::{Judging, import_str, judge, load, load_any};
pub use markdown::markdown;
pub use terminal::{capacity_text, terminal};

pub const HTML_FILE: &str = "report.html";
pub const MARKDOWN_FILE: &str = "report.md";
pub const CSV_FILE: &str = "measurements.csv";

/// Writes `report.html`, `report.md`, `measurements.csv` and a CSV per load phase that ran
/// ([`phases::csv_files`]) into `dir` and
/// returns their paths. Each file is written to a temporary name and renamed,
/// so a reader (or a second Ctrl-C) never sees half a page.
///
/// The pages are made from the record with this process's secrets scrubbed out, so a secret
/// still in a page is a word of the page itself (a secret like `background`): then nothing is
/// written and the error says so, rather than a page broken by scrubbing its own words.
pub fn write_all(record: &RunRecord, dir: &Path) -> std::io::Result<Vec<PathBuf>> {
    let record = &sm_core::secrets::scrubbed(record).map_err(std::io::Error::other)?;
    let mut outputs = vec![(HTML_FILE, html_page(record, &[])), (MARKDOWN_FILE, markdown(record))];
    if has_measurements(record) {
        outputs.push((CSV_FILE, csv(record)));
    }
    let outputs: Vec<(String, String)> =
        outputs.into_iter().map(|(name, text)| (name.to_string(), text)).chain(phases::csv_files(record)).collect();
    for (_, text) in &outputs {
        sm_core::secrets::check_clean(text).map_err(std::io::Error::other)?;
    }
    outputs.iter().map(|(name, text)| write_atomic(&dir.join(name), text)).collect()
}

/// Whether `measurements.csv` has rows to hold: a run of load phases only (`--matrix` off) has no
/// decode cell and no prefill row, and a file of a header alone would only look like a failed run;
/// its rows are in the phases' own CSVs. A matrix run has the file even before its first cell.
pub fn has_measurements(record: &RunRecord) -> bool {
    record.settings.matrix || !record.decode.is_empty() || !record.prefill.is_empty()
}

/// Writes `text` to `path` through a temporary file in the same directory, without any secret
/// this process was given ([`sm_core::secrets`]): every report file passes here.
pub fn write_atomic(path: &Path, text: &str) -> std::io::Result<PathBuf> {
    let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_else(|| "out".into());
    let tmp = path.with_file_name(format!(".{name}.tmp"));
    std::fs::write(&tmp, sm_core::secrets::scrub(text).as_bytes())?;
    std::fs::rename(&tmp, path)?;
    Ok(path.to_path_buf())
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_page_and_the_markdown_report_carry_a_phase_section() {
        let r = crate::phases::sample_with_rate();
        assert!(crate::html_page(&r, &[]).contains("<h2>Arrivals at a rate</h2>"));
        assert!(crate::markdown(&r).contains("## Arrivals at a rate"));
        assert!(crate::html::CSS.contains("td.verdict"), "the page wraps the verdict column");
    }

    /// The page's markup is all `maud` templates, which escape what they splice: outside the
    /// tests no module writes a tag as a string or escapes by hand, so no escaping can be forgotten.
    #[test]
    fn no_markup_is_written_by_hand() {
        fn sources(dir: &std::path::Path, out: &mut Vec<std::path::PathBuf>) {
            for entry in std::fs::read_dir(dir).unwrap() {
                let path = entry.unwrap().path();
                if path.is_dir() {
                    sources(&path, out);
                } else if path.extension().is_some_and(|e| e == "rs") && !path.ends_with("tests.rs") {
                    out.push(path);
                }
            }
        }
        let mut files = Vec::new();
        sources(&std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src"), &mut files);
        assert!(files.len() > 20, "{files:?}");
        for file in files {
            let text = std::fs::read_to_string(&file).unwrap();
            let code = text.split("#[cfg(test)]").next().unwrap();
            for (i, line) in code.lines().enumerate().filter(|(_, l)| !l.trim_start().starts_with("//")) {
                let at = format!("{}:{}: {line}", file.display(), i + 1);
                assert!(!line.contains("escape::html") && !line.contains("PreEscaped(format"), "{at}");
                assert!(!line.contains("\"<") && !line.contains("r#\"<"), "a tag written as a string: {at}");
            }
        }
    }
}
