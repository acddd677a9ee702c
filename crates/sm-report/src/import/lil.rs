//! lil-bench-result/1 uploads: the bench JSON under `results.bench`, plus the
//! server's launch argv and environment, hardware, the plan (with the cells
//! skipped as over capacity) and optionally engine build facts and uploader.
//!
//! The upload stores the server's argv verbatim, API key included (study
//! §5.3): its secrets are redacted where they stand (the launch command, the
//! environment), never by rewriting other fields that hold the same letters (a
//! key `mistral` leaves the model `mistralai/…` alone). A secret of 8
//! characters or more that also turns up elsewhere (an error text that echoed
//! it) refuses the file, like the site's check (`sm_site::scrub`).

use serde_json::{Value, json};
use sm_core::record::{Gpu, RunRecord, RunStatus, ServerInfo};
use sm_core::redact::{self, REDACTED};
use sm_core::server_gpus::{GpusFrom, ServerGpus};

use super::bench;
use super::value::{str_at, u64_at};
use super::{ImportError, Source};
use crate::meta;

const FORMAT: &str = "lil-bench-result/1";

/// One argv word as a shell would need it, with the user's home shown as
/// `$HOME` (the published page does the same: the path names the user).
fn shell_word(word: &str) -> String {
    let home_rest = word
        .strip_prefix("/home/")
        .or_else(|| word.strip_prefix("/Users/"))
        .and_then(|r| r.split_once('/').map(|(_, rest)| rest))
        .or_else(|| word.strip_prefix("/root/"));
    if let Some(rest) = home_rest {
        return format!("\"$HOME/{}\"", rest.replace(['"', '\\', '$', '`'], "_"));
    }
    let plain = !word.is_empty() && word.chars().all(|c| c.is_ascii_alphanumeric() || "_-./:=,+@%".contains(c));
    if plain { word.to_string() } else { format!("'{}'", word.replace('\'', "'\\''")) }
}

/// Values in argv and the environment that the redaction rules call secret.
fn secrets(argv: &[&str], env: Option<&serde_json::Map<String, Value>>) -> Vec<String> {
    let mut out = Vec::new();
    for (i, w) in argv.iter().enumerate() {
        if let Some((name, value)) = w.split_once('=') {
            if redact::redact_command(w) != *w {
                out.push(value.to_string());
            }
            let _ = name;
        } else if w.starts_with('-')
            && let Some(next) = argv.get(i + 1)
            && redact::redact_command(&format!("{w} x")).ends_with(REDACTED)
        {
            out.push(next.to_string());
        }
    }
    for (name, value) in env.into_iter().flatten() {
        if let Some(v) = value.as_str()
            && redact::redact_env_value(name, v) == REDACTED
        {
            out.push(v.to_string());
        }
    }
    // a value already redacted (`speedmatrix upload` scrubs the key shapes it knows before sending
    // the file) is no secret: the record's own launch command says `<redacted>` too
    out.retain(|s| s.len() >= 4 && s != REDACTED);
    out
}

pub fn import(doc: &Value, source: &Source) -> Result<RunRecord, ImportError> {
    let bench_doc = doc
        .get("results")
        .and_then(|r| r.get("bench"))
        .filter(|b| b.is_object())
        .ok_or(ImportError::Incomplete { format: FORMAT, missing: "results.bench" })?;
    let plan_entries = doc.get("plan").and_then(Value::as_array).map(Vec::as_slice);
    let mut rec = bench::import(bench_doc, source, plan_entries)?;
    let empty = json!({});
    let client = doc.get("client").unwrap_or(&empty);
    let server = doc.get("server").unwrap_or(&empty);

    rec.status = match str_at(doc, "status") {
        Some("failed") => RunStatus::Failed,
        Some("interrupted") => RunStatus::Interrupted,
        Some("running") => RunStatus::Running,
        _ => RunStatus::Complete,
    };
    if let Some(s) = str_at(doc, "started").and_then(bench::parse_timestamp) {
        rec.started = s;
        meta::set_known(&mut rec.server.extra, meta::STARTED);
    }
    rec.finished = str_at(doc, "finished").and_then(bench::parse_timestamp).or(rec.finished);
    if let Some(v) = str_at(client, "llm_decode_bench") {
        rec.tool.version = v.to_string();
        meta::set_known(&mut rec.server.extra, meta::TOOL_VERSION);
    }
    rec.label = str_at(client, "note").map(str::to_string);

    server_facts(&mut rec.server, doc, source);
    hardware(&mut rec, doc);

    let argv: Vec<&str> =
        server.get("argv").and_then(Value::as_array).into_iter().flatten().filter_map(Value::as_str).collect();
    let env = server.get("environment").and_then(Value::as_object);
    if !argv.is_empty() {
        let joined = argv.iter().map(|w| shell_word(w)).collect::<Vec<_>>().join(" ");
        rec.launch_command = Some(redact::redact_command(&joined));
    }
    // the server's command says its parallelism; the file's own tensor_parallel_size where it has none
    let tp = rec.server.extra.get("tensor_parallel_size").and_then(Value::as_u64).and_then(|n| u32::try_from(n).ok());
    rec.server_gpus = ServerGpus::resolve(None, rec.launch_command.as_deref())
        .or_else(|| tp.filter(|&n| n > 0).map(|count| ServerGpus { count, from: GpusFrom::Imported }));
    let text = serde_json::to_string(&rec).map_err(|source| ImportError::InvalidRun { source })?;
    let left = secrets(&argv, env).into_iter().filter(|s| s.chars().count() >= MIN_ELSEWHERE);
    if left.into_iter().any(|s| text.contains(&s) || text.contains(&json_escaped(&s))) {
        return Err(ImportError::SecretElsewhere);
    }
    Ok(rec)
}

/// Found secrets shorter than this are not searched for elsewhere: `EMPTY` is no credential, and
/// the letters of a short one are those of ordinary words (the site's `MIN_LEFTOVER`).
const MIN_ELSEWHERE: usize = 8;

/// `s` as a JSON string holds it, without the quotes.
fn json_escaped(s: &str) -> String {
    let quoted = serde_json::to_string(s).unwrap_or_default();
    quoted.get(1..quoted.len().saturating_sub(1)).unwrap_or_default().to_string()
}

/// What the upload says about the server (`server`, `engine`, `client`), over what the bench JSON
/// said; the environment with its secrets redacted.
fn server_facts(si: &mut ServerInfo, doc: &Value, source: &Source) {
    let empty = json!({});
    let client = doc.get("client").unwrap_or(&empty);
    let server = doc.get("server").unwrap_or(&empty);
    let api = server.get("api").unwrap_or(&empty);
    let limits = server.get("limits").unwrap_or(&empty);
    let engine = doc.get("engine").unwrap_or(&empty);
    if let Some(url) = str_at(server, "url") {
        si.url = url.to_string();
    }
    if let Some(name) = str_at(engine, "name") {
        si.engine = super::engine_name(name);
        meta::set_known(&mut si.extra, meta::ENGINE);
    }
    si.engine_version =
        str_at(engine, "version").or_else(|| str_at(api, "version")).map(str::to_string).or(si.engine_version.take());
    if si.model == "unknown"
        && let Some(m) = str_at(api, "model_id").or_else(|| str_at(limits, "served_model_name"))
    {
        si.model = m.to_string();
    }
    si.max_model_len = u64_at(api, "max_model_len").or_else(|| u64_at(limits, "max_model_len"));
    if let Some(kv) = u64_at(api, "kv_tokens").or_else(|| u64_at(limits, "kv_tokens")) {
        si.kv_budget_tokens = Some(kv);
        si.kv_budget_source = "lil-bench server.api.kv_tokens".into();
    }
    si.max_num_seqs = u64_at(limits, "max_num_seqs").map(|n| n as u32);
    let extra = &mut si.extra;
    for key in [meta::QUANTIZATION, meta::BACKEND, meta::REPOSITORY, meta::BUILD, meta::COMMIT, meta::REVISION] {
        if let Some(v) = str_at(engine, key) {
            extra.insert(key.into(), json!(v));
        }
    }
    if let Some(root) = str_at(server, "model").or_else(|| str_at(api, "root")) {
        extra.insert(meta::MODEL_ROOT.into(), json!(root));
    }
    for key in ["block_size", "num_gpu_blocks"] {
        if let Some(v) = u64_at(api, key) {
            extra.insert(key.into(), json!(v));
        }
    }
    if let Some(tp) = u64_at(limits, "tensor_parallel_size") {
        extra.insert("tensor_parallel_size".into(), json!(tp));
    }
    if let Some(who) = str_at(client, "uploader") {
        extra.insert(meta::UPLOADER.into(), json!(who));
    }
    let env = server.get("environment").and_then(Value::as_object);
    if let Some(env) = env {
        let redacted: serde_json::Map<String, Value> = env
            .iter()
            .map(|(k, v)| (k.clone(), json!(redact::redact_env_value(k, v.as_str().unwrap_or_default()))))
            .collect();
        extra.insert("environment".into(), Value::Object(redacted));
    }
    extra.insert(
        meta::IMPORTED_FROM.into(),
        json!({
            "format": FORMAT,
            "version": str_at(client, "lil_bench"),
            "file": source.file,
            "importer": format!("speedmatrix {}", env!("CARGO_PKG_VERSION")),
        }),
    );
}

/// The upload's hardware: GPUs, OS, kernel, CPU.
fn hardware(rec: &mut RunRecord, doc: &Value) {
    let empty = json!({});
    let hw = doc.get("hardware").unwrap_or(&empty);
    let gpus = hw.get("gpus").and_then(Value::as_array).cloned().unwrap_or_default();
    rec.hardware.gpus = gpus
        .iter()
        .map(|g| Gpu {
            name: str_at(g, "name").unwrap_or("unknown").to_string(),
            memory_mib: u64_at(g, "memory_total_mib"),
        })
        .collect();
    rec.hardware.gpu_count = rec.hardware.gpus.len() as u32;
    if let Some(kind) = gpus.first().and_then(|g| str_at(g, "type")) {
        rec.server.extra.insert(meta::HARDWARE_TYPE.into(), json!(kind));
    }
    let host = hw.get("host").unwrap_or(&empty);
    rec.hardware.os = str_at(hw, "os").or_else(|| str_at(host, "container_os")).unwrap_or("").to_string();
    rec.hardware.kernel = str_at(hw, "kernel").or_else(|| str_at(host, "kernel_release")).map(str::to_string);
    rec.hardware.cpu =
        str_at(hw, "cpu").or_else(|| hw.get("cpu").and_then(|c| str_at(c, "model_name"))).map(str::to_string);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn words() {
        assert_eq!(shell_word("/home/alice/env/bin/vllm"), "\"$HOME/env/bin/vllm\"");
        assert_eq!(shell_word("--port"), "--port");
        assert_eq!(shell_word("a b"), "'a b'");
        assert_eq!(shell_word("it's"), "'it'\\''s'");
    }

    fn reference(api_key: &str) -> Value {
        let path = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../tests/data/reference/ling-3.0-flash-int4-2xh200nvl.lil-bench-result.json"
        );
        let mut doc: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
        let argv = doc["server"]["argv"].as_array_mut().unwrap();
        let at = argv.iter().position(|w| w == "--api-key").unwrap();
        argv[at + 1] = json!(api_key);
        doc
    }

    #[test]
    fn a_key_inside_the_model_name_leaves_the_model_alone() {
        // the key is part of the model's name: only the launch command's value is the key
        let rec = import(&reference("flash"), &Source::default()).unwrap();
        let model = "inclusionAI/Ling-3.0-flash-int4";
        assert_eq!(meta::text(&rec, meta::MODEL_ROOT), Some(model));
        let cmd = rec.launch_command.as_deref().unwrap();
        assert!(cmd.contains(&format!("--api-key {REDACTED} --mamba-cache-mode")), "{cmd}");
        let text = serde_json::to_string(&rec).unwrap().replace(model, "");
        assert!(!text.contains("flash"), "the key is nowhere but in the model's name: {text}");
    }

    #[test]
    fn a_key_also_elsewhere_refuses_the_file() {
        let mut doc = reference("sk-echoed-123456");
        doc["client"]["note"] = json!("the proxy answered: bad key sk-echoed-123456");
        assert!(matches!(import(&doc, &Source::default()), Err(ImportError::SecretElsewhere)));
        // where it stands it is redacted, and nothing else refuses the file
        let rec = import(&reference("sk-echoed-123456"), &Source::default()).unwrap();
        assert!(!serde_json::to_string(&rec).unwrap().contains("sk-echoed"));
    }

    /// `speedmatrix upload` scrubs the key shapes it knows from the file before sending it: the
    /// site then reads `--api-key <redacted>`, which the launch command also says. Seen refused in
    /// the site's browser test (400, "a secret … also appears elsewhere").
    #[test]
    fn a_file_whose_key_was_already_redacted_is_imported() {
        let rec = import(&reference(REDACTED), &Source::default()).unwrap();
        let cmd = rec.launch_command.as_deref().unwrap();
        assert!(cmd.contains(&format!("--api-key '{REDACTED}'")), "{cmd}");
    }

    #[test]
    fn finds_secrets() {
        let env = json!({"HF_TOKEN": "hf_abcdef", "VLLM_USE_V1": "1"});
        let s = secrets(&["serve", "--api-key", "sk-12345", "--hf-token=hf_zzzzz", "--port", "8000"], env.as_object());
        assert_eq!(s, vec!["sk-12345", "hf_zzzzz", "hf_abcdef"]);
    }
}
