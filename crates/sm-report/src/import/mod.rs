//! Reading runs: speedmatrix's own `run.json`, and the reference tool's two
//! formats (llm-inference-bench JSON, 0.4.x–0.7.x, and the lil-bench-result/1
//! upload that wraps it), converted to a `speedmatrix.run/1` record.

mod bench;
mod burst;
mod lil;
mod plan;
mod value;

use std::path::{Path, PathBuf};

use serde_json::Value;
use sm_core::answer::judge_from_summaries;
use sm_core::record::{CellStatus, Engine, RunRecord, schema_readable};
use sm_core::slo::Slo;

use crate::meta;

/// The formats `load_any` and `import_str` accept, for error messages.
pub const ACCEPTED: &str = "a speedmatrix run (run.json, schema speedmatrix.run/1 or /1.N, or its run directory), \
an llm-inference-bench result JSON (versions 0.4.x–0.7.x: metadata, prefill, results, summary_table), \
or a lil-bench-result/1 upload";

#[derive(Debug, thiserror::Error)]
pub enum ImportError {
    #[error("cannot read {path}: {source}")]
    Io { path: PathBuf, source: std::io::Error },
    #[error("{path} is a directory without a run.json")]
    NoRunInDirectory { path: PathBuf },
    #[error("not JSON ({source}); accepted formats: {ACCEPTED}")]
    NotJson { source: serde_json::Error },
    #[error("unrecognised file: {what}; accepted formats: {ACCEPTED}")]
    UnknownFormat { what: String },
    #[error(
        "a speedmatrix run of schema \"{schema}\", which this version cannot read (it reads speedmatrix.run/1 and \
         /1.N): a newer speedmatrix wrote it; update speedmatrix"
    )]
    UnreadableSchema { schema: String },
    #[error("invalid speedmatrix.run/1 record: {source}")]
    InvalidRun { source: serde_json::Error },
    #[error("{format} file without {missing}")]
    Incomplete { format: &'static str, missing: &'static str },
    #[error(
        "this run was judged against its own SLO ({slo}) from each request's figures while it was measured: \
         --slo applies to imported files and runs recorded before speedmatrix.run/1.1, which are judged from \
         their summary figures; measure again with `speedmatrix run --slo` for another service level"
    )]
    SloJudgedWhenMeasured { slo: String },
    #[error(
        "the SLO names {}, which a cell's summary figures (p50, p90 and p99) cannot give: use ttft and tbt at \
         p50, p90 or p99 and tok_s at p50, p10 or p1",
        .missing.join(", ")
    )]
    SloNotInSummaries { missing: Vec<String> },
    #[error(
        "a secret of the server's launch command or environment (its API key, a token) also appears elsewhere in \
         the file, e.g. in an error text that echoed it; remove it there and try again"
    )]
    SecretElsewhere,
}

/// What an imported record came from, recorded under `server.extra.imported_from`.
#[derive(Debug, Clone, Default)]
pub struct Source {
    /// The file name (never the full path: it may name a user's home).
    pub file: Option<String>,
}

/// Reads a `run.json`, a run directory (its `run.json`), or a reference-tool
/// file, and returns a speedmatrix record.
pub fn load_any(path: &Path) -> Result<RunRecord, ImportError> {
    let file = if path.is_dir() {
        let candidate = path.join("run.json");
        if !candidate.is_file() {
            return Err(ImportError::NoRunInDirectory { path: path.to_path_buf() });
        }
        candidate
    } else {
        path.to_path_buf()
    };
    let text = std::fs::read_to_string(&file).map_err(|source| ImportError::Io { path: file.clone(), source })?;
    let source = Source { file: file.file_name().map(|n| n.to_string_lossy().into_owned()) };
    import_with(&text, &source)
}

/// Reads a record from text in any accepted format.
pub fn import_str(text: &str) -> Result<RunRecord, ImportError> {
    import_with(text, &Source::default())
}

/// What kind of file `value` is, if any accepted one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    Speedmatrix,
    LilBench,
    LlmInferenceBench,
}

pub fn detect(value: &Value) -> Result<Format, ImportError> {
    let Some(obj) = value.as_object() else {
        return Err(ImportError::UnknownFormat { what: "the top level is not a JSON object".into() });
    };
    match obj.get("schema").and_then(Value::as_str) {
        Some(s) if schema_readable(s) => return Ok(Format::Speedmatrix),
        Some(s) if s.starts_with("lil-bench-result/1") => return Ok(Format::LilBench),
        Some(s) if s.starts_with("speedmatrix.run/") => {
            return Err(ImportError::UnreadableSchema { schema: s.chars().take(64).collect() });
        }
        Some(s) => return Err(ImportError::UnknownFormat { what: format!("schema \"{s}\"") }),
        None => {}
    }
    let has = |k: &str| obj.contains_key(k);
    if has("metadata") && (has("results") || has("summary_table") || has("prefill")) {
        return Ok(Format::LlmInferenceBench);
    }
    let mut keys: Vec<&str> = obj.keys().map(String::as_str).take(6).collect();
    if obj.len() > 6 {
        keys.push("…");
    }
    Err(ImportError::UnknownFormat { what: format!("a JSON object with keys {}", keys.join(", ")) })
}

pub fn import_with(text: &str, source: &Source) -> Result<RunRecord, ImportError> {
    let value: Value = serde_json::from_str(text).map_err(|source| ImportError::NotJson { source })?;
    let mut record = match detect(&value)? {
        Format::Speedmatrix => serde_json::from_value(value).map_err(|source| ImportError::InvalidRun { source })?,
        Format::LilBench => lil::import(&value, source)?,
        Format::LlmInferenceBench => bench::import(&value, source, None)?,
    };
    if record.settings.slo.is_none() {
        let (slo, medians) = default_slo(&record);
        judge(&mut record, &slo)?;
        if medians {
            record.server.extra.insert(meta::SLO_JUDGED_FROM.into(), meta::MEDIANS.into());
        }
    }
    Ok(record)
}

/// The SLO an unjudged record is judged against: the default, or, for a file whose cells carry
/// medians only (the reference tool's older files: no p90 or p99), the default's bounds taken at
/// the median, so that its cells get an answer rather than none (`true`: the page says so).
fn default_slo(record: &RunRecord) -> (Slo, bool) {
    let slo = Slo::default();
    let valid = || record.decode.iter().filter(|c| c.status() == CellStatus::Valid);
    let gives = |slo: &Slo| valid().all(|c| slo.judge_summary(&sm_core::answer::summary(c)).is_ok());
    if gives(&slo) {
        return (slo, false);
    }
    let medians = Slo { bounds: slo.bounds.iter().map(|b| sm_core::slo::Bound { percentile: 50, ..*b }).collect() };
    if valid().next().is_some() && gives(&medians) { (medians, true) } else { (slo, false) }
}

/// Judges a record that was not judged while it was measured (an imported file, a run recorded
/// before speedmatrix.run/1.1) against `slo`, from its cells' summary figures, replacing any
/// judgement made that way before (`speedmatrix report --slo`). A run judged per request while it
/// was measured is refused: its summaries would give a different answer than its requests did.
pub fn judge(record: &mut RunRecord, slo: &Slo) -> Result<(), ImportError> {
    if record.settings.slo.is_some() && !meta::slo_from_summaries(record) {
        let slo = record.settings.slo.as_ref().map(ToString::to_string).unwrap_or_default();
        return Err(ImportError::SloJudgedWhenMeasured { slo });
    }
    let missing = slo.unjudgeable_from_summary();
    if !missing.is_empty() {
        return Err(ImportError::SloNotInSummaries { missing });
    }
    for cell in record.decode.iter_mut().filter(|c| c.status() == CellStatus::Valid) {
        cell.slo_met = None;
        cell.slo_bounds.clear();
    }
    record.settings.slo = None;
    judge_from_summaries(record, slo).map_err(|missing| ImportError::SloNotInSummaries { missing })?;
    record.server.extra.insert(meta::SLO_JUDGED_FROM.into(), "summaries".into());
    Ok(())
}

/// Engines the record's schema names; anything else (`openai_proxy`) is generic.
pub(super) fn engine_name(reported: &str) -> Engine {
    match reported.to_ascii_lowercase().as_str() {
        "vllm" => Engine::Vllm,
        "sglang" => Engine::Sglang,
        "llamacpp" | "llama.cpp" | "llama-cpp" => Engine::Llamacpp,
        "tgi" => Engine::Tgi,
        _ => Engine::Generic,
    }
}
