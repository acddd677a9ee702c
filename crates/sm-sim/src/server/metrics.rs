//! `/metrics` in the Prometheus text format, with each engine's own metric names.

use std::fmt::Write;
use std::sync::Arc;

use axum::extract::State;
use axum::http::header;
use axum::response::{IntoResponse, Response};

use super::AppState;
use crate::engine::{EngineStats, QUEUE_BOUNDS_S};
use crate::flavor::Flavor;

struct Out {
    s: String,
    labels: String,
}

impl Out {
    fn metric(&mut self, name: &str, kind: &str, help: &str, value: f64) {
        let labels = self.labels.clone();
        self.family(name, kind, help, &[(&labels, value)]);
    }

    fn family(&mut self, name: &str, kind: &str, help: &str, samples: &[(&str, f64)]) {
        let _ = writeln!(self.s, "# HELP {name} {help}");
        let _ = writeln!(self.s, "# TYPE {name} {kind}");
        for (labels, v) in samples {
            let _ = writeln!(self.s, "{name}{{{labels}}} {v:?}");
        }
    }
}

pub(crate) async fn metrics(State(st): State<Arc<AppState>>) -> Response {
    let s = st.stats();
    let mut o = Out { s: String::with_capacity(4096), labels: String::new() };
    match st.flavor {
        Flavor::Vllm | Flavor::Generic => vllm(&mut o, &st, &s),
        Flavor::Sglang => sglang(&mut o, &st, &s),
        Flavor::Llamacpp => llamacpp(&mut o, &st, &s),
        Flavor::Tgi => tgi(&mut o, &s),
    }
    // unlabelled samples render as `name{}`; drop the empty braces as real exporters do
    let text = o.s.replace("{} ", " ");
    ([(header::CONTENT_TYPE, "text/plain; version=0.0.4; charset=utf-8")], text).into_response()
}

/// The generation counter as reported: the `counter-skew` fault scales it (a whole token).
fn skewed(st: &AppState, tokens: u64) -> f64 {
    (tokens as f64 * st.faults.counter_scale()).round()
}

/// KV-cache usage, 0 … 1.
fn kv_perc(s: &EngineStats) -> f64 {
    if s.kv_total_blocks == 0 { 0.0 } else { s.kv_used_blocks as f64 / s.kv_total_blocks as f64 }
}

fn vllm(o: &mut Out, st: &AppState, s: &EngineStats) {
    let p = &st.profile;
    let kv_perc = kv_perc(s);
    o.labels = format!(r#"engine="0",model_name="{}""#, st.model);
    let l = o.labels.clone();
    o.metric("vllm:num_requests_running", "gauge", "Number of requests in model execution batches.", s.running as f64);
    o.metric("vllm:num_requests_waiting", "gauge", "Number of requests waiting to be processed.", s.waiting as f64);
    o.metric("vllm:kv_cache_usage_perc", "gauge", "KV-cache usage. 1 means 100 percent usage.", kv_perc);
    o.metric(
        "vllm:prompt_tokens_total",
        "counter",
        "Number of prefill tokens processed.",
        s.prompt_tokens_total as f64,
    );
    o.metric(
        "vllm:generation_tokens_total",
        "counter",
        "Number of generation tokens processed.",
        skewed(st, s.generation_tokens_total),
    );
    o.metric(
        "vllm:prefix_cache_queries_total",
        "counter",
        "Prefix cache queries, in terms of number of queried tokens.",
        s.prefix_queries_total as f64,
    );
    o.metric(
        "vllm:prefix_cache_hits_total",
        "counter",
        "Prefix cache hits, in terms of number of cached tokens.",
        s.prefix_hits_total as f64,
    );
    o.metric(
        "vllm:num_preemptions_total",
        "counter",
        "Cumulative number of preemption from the engine.",
        s.preemptions_total as f64,
    );
    let (stop, length, abort) = (
        format!(r#"{l},finished_reason="stop""#),
        format!(r#"{l},finished_reason="length""#),
        format!(r#"{l},finished_reason="abort""#),
    );
    o.family(
        "vllm:request_success_total",
        "counter",
        "Count of successfully processed requests.",
        &[(&stop, s.finished_stop as f64), (&length, s.finished_length as f64), (&abort, s.finished_abort as f64)],
    );
    queue_histogram(o, s, &l);
    if p.speculative.is_some() {
        // vLLM V1's names (vllm/v1/spec_decode/metrics.py); the client adds `_total` to counters
        o.metric(
            "vllm:spec_decode_num_drafts_total",
            "counter",
            "Number of spec decoding drafts.",
            s.spec_drafts_total as f64,
        );
        o.metric(
            "vllm:spec_decode_num_draft_tokens_total",
            "counter",
            "Number of draft tokens.",
            s.spec_draft_tokens_total as f64,
        );
        o.metric(
            "vllm:spec_decode_num_accepted_tokens_total",
            "counter",
            "Number of accepted tokens.",
            s.spec_accepted_total as f64,
        );
    }
    let info = format!(
        r#"block_size="{}",cache_dtype="auto",enable_prefix_caching="True",engine="0",gpu_memory_utilization="0.9",kv_cache_size_tokens="{}",num_gpu_blocks="{}""#,
        p.block_size,
        p.kv_cache_tokens,
        p.num_gpu_blocks()
    );
    o.family("vllm:cache_config_info", "gauge", "Information of the LLMEngine CacheConfig", &[(&info, 1.0)]);
}

/// `vllm:request_queue_time_seconds`: cumulative buckets, sum and count, as prometheus_client
/// writes a histogram.
fn queue_histogram(o: &mut Out, s: &EngineStats, labels: &str) {
    let name = "vllm:request_queue_time_seconds";
    let _ = writeln!(o.s, "# HELP {name} Histogram of time spent in WAITING phase for request.");
    let _ = writeln!(o.s, "# TYPE {name} histogram");
    let mut cumulative = 0;
    let bounds = QUEUE_BOUNDS_S.iter().map(|b| format!("{b:?}")).chain(["+Inf".to_string()]);
    for (le, n) in bounds.zip(s.queue_time_buckets) {
        cumulative += n;
        let _ = writeln!(o.s, "{name}_bucket{{{labels},le=\"{le}\"}} {:?}", cumulative as f64);
    }
    let _ = writeln!(o.s, "{name}_sum{{{labels}}} {:?}", s.queue_time_sum_s);
    let _ = writeln!(o.s, "{name}_count{{{labels}}} {:?}", cumulative as f64);
}

fn sglang(o: &mut Out, st: &AppState, s: &EngineStats) {
    let kv_perc = kv_perc(s);
    o.labels = format!(r#"model_name="{}""#, st.model);
    o.metric("sglang:num_running_reqs", "gauge", "The number of running requests.", s.running as f64);
    o.metric("sglang:num_queue_reqs", "gauge", "The number of requests in the waiting queue.", s.waiting as f64);
    o.metric("sglang:gen_throughput", "gauge", "The generation throughput (token/s).", s.gen_throughput);
    o.metric("sglang:token_usage", "gauge", "The token usage.", kv_perc);
    o.metric(
        "sglang:prompt_tokens_total",
        "counter",
        "Number of prefill tokens processed.",
        s.prompt_tokens_total as f64,
    );
    o.metric(
        "sglang:generation_tokens_total",
        "counter",
        "Number of generation tokens processed.",
        skewed(st, s.generation_tokens_total),
    );
}

fn llamacpp(o: &mut Out, st: &AppState, s: &EngineStats) {
    let kv_perc = kv_perc(s);
    // llama.cpp's exporter writes unlabelled samples
    o.metric(
        "llamacpp:prompt_tokens_total",
        "counter",
        "Number of prompt tokens processed.",
        s.prompt_tokens_total as f64,
    );
    o.metric(
        "llamacpp:tokens_predicted_total",
        "counter",
        "Number of generation tokens processed.",
        skewed(st, s.generation_tokens_total),
    );
    o.metric("llamacpp:requests_processing", "gauge", "Number of requests processing.", s.running as f64);
    o.metric("llamacpp:requests_deferred", "gauge", "Number of requests deferred.", s.waiting as f64);
    o.metric("llamacpp:kv_cache_usage_ratio", "gauge", "KV-cache usage. 1 means 100 percent usage.", kv_perc);
}

fn tgi(o: &mut Out, s: &EngineStats) {
    o.metric("tgi_batch_current_size", "gauge", "Current batch size", s.running as f64);
    o.metric("tgi_queue_size", "gauge", "Current queue size", s.waiting as f64);
    o.metric("tgi_request_generated_tokens_total", "counter", "Generated tokens", s.generation_tokens_total as f64);
}
