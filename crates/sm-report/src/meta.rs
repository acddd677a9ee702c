//! What the page shows and `speedmatrix.run/1` has no typed field for lives in
//! `server.extra` under these keys, so the record's schema stays unchanged
//! while other tools keep writing it. The importer fills them from the
//! reference formats; `speedmatrix run` may fill them from discovery.

use serde_json::Value;
use sm_core::record::RunRecord;

/// Engine build facts (the published page's Engine section).
pub const QUANTIZATION: &str = "quantization";
pub const BACKEND: &str = "backend";
pub const REPOSITORY: &str = "repository";
pub const BUILD: &str = "build";
pub const COMMIT: &str = "commit";
/// The model revision (branch, tag or hash) the weights were loaded at.
pub const REVISION: &str = "revision";
/// The weights the server loaded, e.g. `inclusionAI/Ling-3.0-flash-int4`
/// (vLLM's `/v1/models` `root`): the page's title names the model by it.
pub const MODEL_ROOT: &str = "model_root";
/// `discrete`, `integrated`, … : the Hardware section's Type.
pub const HARDWARE_TYPE: &str = "hardware_type";
/// Who published the run (the page's `by @…`).
pub const UPLOADER: &str = "uploader";
/// How prefill rows were measured when not by speedmatrix's cold scouts:
/// the reference tool's `metadata.prefill_mode`.
pub const PREFILL_MODE: &str = "prefill_mode";
/// Provenance of an imported record: `{format, version, file, importer}`.
pub const IMPORTED_FROM: &str = "imported_from";

/// A non-empty string of `server.extra`.
pub fn text<'a>(record: &'a RunRecord, key: &str) -> Option<&'a str> {
    record.server.extra.get(key).and_then(Value::as_str).map(str::trim).filter(|s| !s.is_empty())
}

/// Whether the record measured speedmatrix's built-in simulated engine: `run` records its profile
/// in `server.extra.sim_profile`; records written before that are known by their launch command
/// (`speedmatrix sim --profile NAME`).
pub fn simulated(record: &RunRecord) -> bool {
    record.server.extra.get(sm_core::engine::SIM_PROFILE_KEY).is_some_and(|p| p.is_string())
        || record.launch_command.as_deref().is_some_and(|c| c.trim_start().starts_with("speedmatrix sim"))
}

/// The imported-from provenance, as `(format, version, file)`.
pub fn imported_from(record: &RunRecord) -> Option<(String, Option<String>, Option<String>)> {
    let v = record.server.extra.get(IMPORTED_FROM)?;
    let s = |k: &str| v.get(k).and_then(Value::as_str).map(str::to_string);
    Some((s("format")?, s("version"), s("file")))
}

/// Whether the record's timestamps are the measuring host's local time with
/// an unknown zone (the reference tool's `metadata.timestamp`).
pub fn local_time(record: &RunRecord) -> bool {
    record.server.extra.get(IMPORTED_FROM).and_then(|v| v.get("local_time")).and_then(Value::as_bool) == Some(true)
}

/// How the decode cells were measured, when not by speedmatrix's fixed
/// window: the reference tool's `metadata.decode_mode` (`duration`,
/// `request-count`).
pub const DECODE_MODE: &str = "decode_mode";
/// With `decode_mode` `request-count`: the requests each cell measured
/// (`metadata.request_count`).
pub const REQUEST_COUNT: &str = "request_count";
/// Record fields that the imported file did not give, so their values are
/// placeholders the schema requires (`1970-01-01T00:00:00Z`, `0`, `generic`)
/// and the page must print as unknown: a list of [`UNKNOWN_FIELDS`] names.
pub const UNKNOWN: &str = "unknown_fields";
/// The names [`UNKNOWN`] may list.
pub const STARTED: &str = "started";
pub const TOOL_VERSION: &str = "tool.version";
pub const DURATION: &str = "settings.duration_s";
pub const MAX_TOKENS: &str = "settings.max_tokens";
pub const ENGINE: &str = "server.engine";
pub const UNKNOWN_FIELDS: [&str; 5] = [STARTED, TOOL_VERSION, DURATION, MAX_TOKENS, ENGINE];

/// Whether `field` (one of [`UNKNOWN_FIELDS`]) is a placeholder for a value
/// the imported file did not give.
pub fn unknown(record: &RunRecord, field: &str) -> bool {
    record.server.extra.get(UNKNOWN).and_then(Value::as_array).is_some_and(|a| a.iter().any(|v| v == field))
}

/// Records `field` as known after all (a wrapper file gave it), dropping the
/// key when nothing is left unknown.
pub fn set_known(extra: &mut serde_json::Map<String, Value>, field: &str) {
    if let Some(Value::Array(a)) = extra.get_mut(UNKNOWN) {
        a.retain(|v| v != field);
        if a.is_empty() {
            extra.remove(UNKNOWN);
        }
    }
}

/// `"summaries"` when the record's cells were judged against `settings.slo` after the fact, from
/// each cell's summary figures (an imported file, a run recorded before speedmatrix.run/1.1),
/// not from its requests while it was measured: the page says so.
pub const SLO_JUDGED_FROM: &str = "slo_judged_from";

/// [`SLO_JUDGED_FROM`] for a file whose cells carry medians only: judged against the default
/// SLO's bounds taken at the median.
pub const MEDIANS: &str = "medians";

/// Whether the record's SLO judgement was computed from its cells' summary figures.
pub fn slo_from_summaries(record: &RunRecord) -> bool {
    matches!(text(record, SLO_JUDGED_FROM), Some("summaries" | MEDIANS))
}
