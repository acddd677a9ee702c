//! The engine's scheduler as `/metrics` shows it (readiness, drain, average
//! active requests), and SGLang's targeted abort.

use std::time::Duration;

use serde_json::json;

use super::Engine;
use crate::http::{Client, ClientError};
use crate::metrics::Metrics;

/// A scrape is polled about once a second; a slower answer is a stuck server.
const SCRAPE_TIMEOUT: Duration = Duration::from_secs(5);

pub use sm_core::scheduler::SchedulerState;
use sm_core::spec_decode::SpecCounters;

/// Gauge names per engine: running, waiting, KV usage.
fn gauges(engine: Engine) -> Option<(&'static str, &'static str, Option<&'static str>)> {
    match engine {
        Engine::Vllm => {
            Some(("vllm:num_requests_running", "vllm:num_requests_waiting", Some("vllm:kv_cache_usage_perc")))
        }
        Engine::Sglang => Some(("sglang:num_running_reqs", "sglang:num_queue_reqs", Some("sglang:token_usage"))),
        Engine::Llamacpp => {
            Some(("llamacpp:requests_processing", "llamacpp:requests_deferred", Some("llamacpp:kv_cache_usage_ratio")))
        }
        Engine::Tgi => Some(("tgi_batch_current_size", "tgi_queue_size", None)),
        Engine::Generic => None,
    }
}

/// One scrape read as the engine's scheduler gauges; `None` when the engine has
/// none or they are missing. A missing waiting gauge reads as 0: some builds omit
/// an empty queue.
pub fn scheduler_state_from(metrics: &Metrics, engine: Engine) -> Option<SchedulerState> {
    let (running, waiting, kv) = gauges(engine)?;
    Some(SchedulerState {
        running: metrics.sum(running)?,
        waiting: metrics.sum(waiting).unwrap_or(0.0),
        kv_usage: kv.and_then(|k| metrics.mean(k)),
        spec: spec_counters(metrics, engine),
    })
}

/// vLLM's speculative-decoding counters (V1 names, `vllm/v1/spec_decode/metrics.py`), summed over
/// data-parallel engines; `None` without all three. SGLang reports acceptance only as gauges of
/// recent steps (not counters a window can difference), and llama.cpp and TGI export none.
pub fn spec_counters(metrics: &Metrics, engine: Engine) -> Option<SpecCounters> {
    if engine != Engine::Vllm {
        return None;
    }
    Some(SpecCounters {
        drafts: metrics.sum("vllm:spec_decode_num_drafts_total")?,
        draft_tokens: metrics.sum("vllm:spec_decode_num_draft_tokens_total")?,
        accepted: metrics.sum("vllm:spec_decode_num_accepted_tokens_total")?,
    })
}

/// One scrape of `/metrics` read as the engine's scheduler gauges (None if the engine has none).
pub async fn scheduler_state(client: &Client, engine: Engine) -> Result<Option<SchedulerState>, ClientError> {
    if gauges(engine).is_none() {
        return Ok(None);
    }
    Ok(scheduler_state_from(&fetch_metrics(client).await?, engine))
}

/// `GET /metrics`, parsed; a status other than 2xx is an error with the body's excerpt.
pub(super) async fn fetch_metrics(client: &Client) -> Result<Metrics, ClientError> {
    let resp = client.get("/metrics", SCRAPE_TIMEOUT).await?;
    if !resp.is_success() {
        return Err(ClientError::Status {
            path: "/metrics".into(),
            status: resp.status,
            body: crate::http::excerpt(&resp.body),
            key_sent: client.has_api_key(),
        });
    }
    Ok(Metrics::parse(&resp.body))
}

/// SGLang targeted abort, while the stream is still open: a closed stream alone
/// keeps generating inside SGLang (methodology §5).
pub async fn abort_request(client: &Client, rid: &str) -> Result<(), ClientError> {
    match client.post_json("/abort_request", &json!({ "rid": rid }), SCRAPE_TIMEOUT).await {
        // SGLang answers 200 with an empty body: the status is what matters.
        Ok(_) | Err(ClientError::NotJson { .. }) => Ok(()),
        Err(e) => Err(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn vllm_data_parallel_sums() {
        let m = Metrics::parse(concat!(
            "vllm:num_requests_running{engine=\"0\",model_name=\"m\"} 3.0\n",
            "vllm:num_requests_running{engine=\"1\",model_name=\"m\"} 5.0\n",
            "vllm:num_requests_waiting{engine=\"0\",model_name=\"m\"} 1.0\n",
            "vllm:num_requests_waiting{engine=\"1\",model_name=\"m\"} 0.0\n",
            "vllm:num_requests_waiting_by_reason{engine=\"0\",reason=\"capacity\"} 7.0\n",
            "vllm:kv_cache_usage_perc{engine=\"0\"} 0.2\n",
            "vllm:kv_cache_usage_perc{engine=\"1\"} 0.4\n",
        ));
        let s = scheduler_state_from(&m, Engine::Vllm).unwrap();
        assert_eq!((s.running, s.waiting), (8.0, 1.0));
        assert!((s.kv_usage.unwrap() - 0.3).abs() < 1e-12);
        // The same text says nothing about another engine.
        assert_eq!(scheduler_state_from(&m, Engine::Sglang), None);
        assert_eq!(scheduler_state_from(&m, Engine::Generic), None);
    }

    #[test]
    fn other_engines() {
        let sg = Metrics::parse(concat!(
            "sglang:num_running_reqs{model_name=\"m\",tp_rank=\"0\"} 4\n",
            "sglang:num_running_reqs{model_name=\"m\",tp_rank=\"1\"} 4\n",
            "sglang:num_queue_reqs{model_name=\"m\",tp_rank=\"0\"} 2\n",
            "sglang:token_usage{model_name=\"m\",tp_rank=\"0\"} 0.5\n",
        ));
        assert_eq!(
            scheduler_state_from(&sg, Engine::Sglang),
            Some(SchedulerState { running: 4.0, waiting: 2.0, kv_usage: Some(0.5), spec: None })
        );
        let ll = Metrics::parse("llamacpp:requests_processing 2\nllamacpp:requests_deferred 1\n");
        assert_eq!(
            scheduler_state_from(&ll, Engine::Llamacpp),
            Some(SchedulerState { running: 2.0, waiting: 1.0, kv_usage: None, spec: None })
        );
        let tgi = Metrics::parse("tgi_batch_current_size 6\ntgi_queue_size 0\n");
        assert_eq!(scheduler_state_from(&tgi, Engine::Tgi).map(|s| s.running), Some(6.0));
        let no_running = Metrics::parse("tgi_queue_size 3\n");
        assert_eq!(scheduler_state_from(&no_running, Engine::Tgi), None);
    }

    #[test]
    fn vllm_spec_decode_counters_sum_over_engines() {
        let m = Metrics::parse(concat!(
            "vllm:num_requests_running{engine=\"0\"} 1.0\n",
            "vllm:spec_decode_num_drafts_total{engine=\"0\"} 10.0\n",
            "vllm:spec_decode_num_drafts_total{engine=\"1\"} 5.0\n",
            "vllm:spec_decode_num_draft_tokens_total{engine=\"0\"} 60.0\n",
            "vllm:spec_decode_num_accepted_tokens_total{engine=\"0\"} 21.0\n",
        ));
        let s = scheduler_state_from(&m, Engine::Vllm).unwrap().spec.unwrap();
        assert_eq!((s.drafts, s.draft_tokens, s.accepted), (15.0, 60.0, 21.0));
        assert_eq!(spec_counters(&m, Engine::Sglang), None);
        let without = Metrics::parse("vllm:num_requests_running 1.0\n");
        assert_eq!(scheduler_state_from(&without, Engine::Vllm).unwrap().spec, None);
    }
}
