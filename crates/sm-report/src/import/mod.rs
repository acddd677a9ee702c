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
use sm_core::record::{Engine, RunRecord, schema_readable};

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
    #[error("no roofline: {0}")]
    NoRoofline(#[from] sm_core::roofline_record::RooflineError),
}

/// What an imported record came from, recorded under `server.extra.imported_from`.
#[derive(Debug, Clone, Default)]
pub struct Source {
    /// The file name (never the full path: it may name a user's home).
    pub file: Option<String>,
}

/// Reads a `run.json`, a run directory (its `run.json`), or a reference-tool
/// file, and returns a speedmatrix record as it is, not judged yet ([`crate::load_any`] judges it).
pub fn read_any(path: &Path) -> Result<RunRecord, ImportError> {
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

/// Reads a record from text in any accepted format, as it is, not judged yet.
pub fn import_with(text: &str, source: &Source) -> Result<RunRecord, ImportError> {
    let value: Value = serde_json::from_str(text).map_err(|source| ImportError::NotJson { source })?;
    match detect(&value)? {
        Format::Speedmatrix => serde_json::from_value(value).map_err(|source| ImportError::InvalidRun { source }),
        Format::LilBench => lil::import(&value, source),
        Format::LlmInferenceBench => bench::import(&value, source, None),
    }
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
