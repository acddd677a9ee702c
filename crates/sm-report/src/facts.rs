//! The page's fact cards (Hardware, Engine, Run) and the notes on an imported
//! record: what the record says about where and how it was measured, with
//! `unknown` (or `simulated`, for the built-in engine) where it does not say.

use crate::format;
use crate::meta;
use sm_core::record::{RunRecord, RunStatus};

fn unknown() -> String {
    "unknown".into()
}

pub(crate) fn hardware(record: &RunRecord) -> Vec<(String, String)> {
    let hw = &record.hardware;
    // the built-in engine runs on no hardware of its own: say so rather than "unknown"
    let missing: fn() -> String = if meta::simulated(record) { || "simulated".into() } else { unknown };
    let kind = meta::text(record, meta::HARDWARE_TYPE).map(|t| {
        let mut c = t.chars();
        let cap = c.next().map(|f| f.to_uppercase().chain(c).collect::<String>()).unwrap_or_default();
        if cap.to_lowercase().contains("gpu") { cap } else { format!("{cap} GPU") }
    });
    let mut names: Vec<&str> = Vec::new();
    for g in &hw.gpus {
        if !names.contains(&gpu_short(&g.name)) {
            names.push(gpu_short(&g.name));
        }
    }
    let count = gpu_count(record);
    let vram = {
        let mems: Vec<u64> = hw.gpus.iter().filter_map(|g| g.memory_mib).collect();
        if mems.is_empty() || mems.len() != hw.gpus.len() {
            None
        } else if mems.iter().all(|m| *m == mems[0]) {
            Some(format!("{} GB ({} × {} GB)", format::count(gib(mems.iter().sum())), mems.len(), gib(mems[0])))
        } else {
            Some(format!("{} GB", format::count(gib(mems.iter().sum()))))
        }
    };
    let mut lines = vec![
        ("Type".into(), kind.unwrap_or_else(missing)),
        ("GPU".into(), if names.is_empty() { missing() } else { names.join(", ") }),
        ("GPU count".into(), if count == 0 && hw.gpus.is_empty() { missing() } else { count.to_string() }),
        ("VRAM".into(), vram.unwrap_or_else(missing)),
        ("OS".into(), if hw.os.trim().is_empty() { unknown() } else { hw.os.clone() }),
    ];
    if let Some(cpu) = &hw.cpu {
        lines.push(("CPU".into(), cpu.clone()));
    }
    if let Some(kernel) = &hw.kernel {
        lines.push(("Kernel".into(), kernel.clone()));
    }
    lines
}

/// The engine's name, or `unknown` where an imported file did not say (the
/// record then holds the placeholder `generic`).
pub(crate) fn engine_name(record: &RunRecord) -> String {
    if meta::unknown(record, meta::ENGINE) { unknown() } else { record.server.engine.to_string() }
}

pub(crate) fn engine(record: &RunRecord) -> Vec<(String, String)> {
    let mut lines = vec![
        ("Engine".into(), engine_name(record)),
        ("Version".into(), record.server.engine_version.clone().unwrap_or_else(unknown)),
    ];
    for (title, key) in [
        ("Quantization", meta::QUANTIZATION),
        ("Backend", meta::BACKEND),
        ("Repository", meta::REPOSITORY),
        ("Build", meta::BUILD),
        ("Commit", meta::COMMIT),
    ] {
        if let Some(v) = meta::text(record, key) {
            lines.push((title.into(), v.to_string()));
        }
    }
    lines
}

fn prefill_mode(record: &RunRecord) -> String {
    match meta::text(record, meta::PREFILL_MODE) {
        // an imported file that does not say was not measured by speedmatrix's scouts
        None if meta::imported_from(record).is_some() => unknown(),
        None => "Cold request per context, before decode".into(),
        Some("integrated_decode_scout") => "Measured during decode warm-up".into(),
        Some("standalone_cold") => "Standalone cold requests".into(),
        Some("skipped") => "Not measured".into(),
        Some(other) => other.to_string(),
    }
}

/// speedmatrix measures every cell over a fixed window; the reference tool can
/// also measure a fixed number of requests (`--request-count`).
fn decode_mode(record: &RunRecord) -> String {
    match meta::text(record, meta::DECODE_MODE) {
        Some("duration") => "Fixed duration".into(),
        Some("request-count") => "Fixed request count".into(),
        Some(other) => other.to_string(),
        None if meta::imported_from(record).is_some() => unknown(),
        None => "Fixed duration".into(),
    }
}

pub(crate) fn run(record: &RunRecord) -> Vec<(String, String)> {
    let s = &record.settings;
    let mut lines = vec![("Served model".to_string(), record.server.model.clone())];
    if let Some(rev) = meta::text(record, meta::REVISION) {
        lines.push(("Revision".into(), rev.to_string()));
    }
    let mut tool = tool_name(record);
    if let Some(c) = &record.tool.commit {
        tool.push_str(&format!(" ({c})"));
    }
    lines.push(("Benchmark tool".into(), tool));
    let by_count = meta::text(record, meta::DECODE_MODE) == Some("request-count");
    if s.matrix {
        lines.push(("Decode test".into(), decode_mode(record)));
        lines.push(("Prefill mode".into(), prefill_mode(record)));
        lines.push(measurement_length(record, by_count));
    } else {
        // a run of load phases only: each phase's section says how it measured
        let phases: Vec<&str> = record.phases.kinds().into_iter().map(|k| k.title()).collect();
        lines.push(("Measured".into(), format!("load phases only: {}", phases.join(", "))));
    }
    let max_output = if meta::unknown(record, meta::MAX_TOKENS) {
        unknown()
    } else {
        format!("{} tokens", format::count(s.max_tokens))
    };
    lines.push(("Max output".into(), max_output));
    if let Some(mml) = record.server.max_model_len {
        lines.push(("Context limit".into(), format!("{} tokens", format::count(mml))));
    }
    if let Some(kv) = record.server.kv_budget_tokens {
        lines.push(("KV cache".into(), format!("{} tokens", format::count(kv))));
    }
    lines.extend(crate::spec_decode::fact(&record.decode));
    if record.status != RunStatus::Complete {
        lines.push(("Run status".into(), format!("{:?}", record.status).to_lowercase()));
    }
    if let Some((fmt, version, file)) = meta::imported_from(record) {
        let mut v = fmt;
        if let Some(ver) = version {
            v.push_str(&format!(" {ver}"));
        }
        if let Some(f) = file {
            v.push_str(&format!(" ({f})"));
        }
        lines.push(("Imported from".into(), v));
    }
    lines
}

/// How long (or how many requests) each decode measurement was.
fn measurement_length(record: &RunRecord, by_count: bool) -> (String, String) {
    if by_count {
        let n = record.server.extra.get(meta::REQUEST_COUNT).and_then(serde_json::Value::as_u64);
        ("Requests per measurement".into(), n.map(format::count).unwrap_or_else(unknown))
    } else if meta::unknown(record, meta::DURATION) {
        ("Time per measurement".into(), unknown())
    } else {
        ("Time per measurement".into(), format::secs_setting(record.settings.duration_s))
    }
}

/// `llm-inference-bench v0.4.29`; the version may be unknown in an imported file.
fn tool_name(record: &RunRecord) -> String {
    if meta::unknown(record, meta::TOOL_VERSION) {
        format!("{}, version unknown", record.tool.name)
    } else {
        format!("{} v{}", record.tool.name, record.tool.version.trim_start_matches('v'))
    }
}

pub(crate) fn import_notes(record: &RunRecord) -> Vec<String> {
    let Some((fmt, _, _)) = meta::imported_from(record) else {
        return Vec::new();
    };
    vec![format!(
        "Imported from a {fmt} file measured by {}: its figures follow that tool's definitions, which differ \
         from speedmatrix's in places (docs/methodology.md §10). Per request tok/s is its output_tps_per_user_p50, \
         Time between tokens its inter_token_latency_p50.",
        tool_name(record)
    )]
}

/// A GPU's name without the vendor's prefix ("H200 NVL").
pub(crate) fn gpu_short(name: &str) -> &str {
    name.strip_prefix("NVIDIA ").unwrap_or(name).trim()
}

/// MiB as whole GiB.
pub(crate) fn gib(mib: u64) -> u64 {
    (mib as f64 / 1024.0).round() as u64
}

/// GPUs in the run: the count given, or the GPUs listed where that is more.
pub(crate) fn gpu_count(record: &RunRecord) -> u32 {
    record.hardware.gpu_count.max(record.hardware.gpus.len() as u32)
}
