//! The server's gauges and counters for the per-cell series (methodology §14.1), under each
//! engine's own metric names.

use sm_core::server_metrics::{Histogram, ServerScrape};

use super::Engine;
use super::scheduler::{fetch_metrics, scheduler_state_from};
use crate::http::{Client, ClientError};
use crate::metrics::Metrics;

/// The counter and histogram names of one engine, beyond the scheduler gauges.
struct Names {
    prompt: Option<&'static str>,
    generation: Option<&'static str>,
    preemptions: Option<&'static str>,
    /// Prefix-cache (queries, hits), in tokens.
    prefix: Option<(&'static str, &'static str)>,
    /// A histogram's base name (`_bucket`, `_sum`, `_count` follow).
    queue_time: Option<&'static str>,
}

/// TGI counts generated tokens only per finished request (a histogram), which a window cannot
/// difference; llama.cpp has no preemption or queue-time export.
fn names(engine: Engine) -> Option<Names> {
    Some(match engine {
        Engine::Vllm => Names {
            prompt: Some("vllm:prompt_tokens_total"),
            generation: Some("vllm:generation_tokens_total"),
            preemptions: Some("vllm:num_preemptions_total"),
            prefix: Some(("vllm:prefix_cache_queries_total", "vllm:prefix_cache_hits_total")),
            queue_time: Some("vllm:request_queue_time_seconds"),
        },
        Engine::Sglang => Names {
            prompt: Some("sglang:prompt_tokens_total"),
            generation: Some("sglang:generation_tokens_total"),
            preemptions: Some("sglang:num_retracted_requests_total"),
            prefix: None,
            queue_time: Some("sglang:queue_time_seconds"),
        },
        Engine::Llamacpp => Names {
            prompt: Some("llamacpp:prompt_tokens_total"),
            generation: Some("llamacpp:tokens_predicted_total"),
            preemptions: None,
            prefix: None,
            queue_time: None,
        },
        Engine::Tgi => Names {
            prompt: None,
            generation: None,
            preemptions: None,
            prefix: None,
            queue_time: Some("tgi_request_queue_duration"),
        },
        Engine::Generic => return None,
    })
}

/// One scrape read as the engine-neutral [`ServerScrape`]; `None` without the scheduler gauges.
pub fn server_scrape_from(metrics: &Metrics, engine: Engine) -> Option<ServerScrape> {
    let state = scheduler_state_from(metrics, engine)?;
    let n = names(engine)?;
    let sum = |name: Option<&str>| name.and_then(|m| metrics.sum(m));
    Some(ServerScrape {
        running: state.running,
        waiting: state.waiting,
        kv_usage: state.kv_usage,
        prompt_tokens: sum(n.prompt),
        generation_tokens: sum(n.generation),
        preemptions: sum(n.preemptions),
        prefix_queries: sum(n.prefix.map(|p| p.0)),
        prefix_hits: sum(n.prefix.map(|p| p.1)),
        queue_time: n.queue_time.and_then(|h| histogram(metrics, h)),
    })
}

/// A histogram summed over label sets (data-parallel engines) bound by bound.
pub fn histogram(metrics: &Metrics, base: &str) -> Option<Histogram> {
    let mut buckets: Vec<(f64, f64)> = Vec::new();
    for (labels, v) in metrics.series(&format!("{base}_bucket")) {
        let le = match labels.get("le")? {
            "+Inf" | "Inf" | "inf" => f64::INFINITY,
            s => s.parse::<f64>().ok()?,
        };
        match buckets.iter_mut().find(|(b, _)| *b == le) {
            Some(b) => b.1 += v,
            None => buckets.push((le, v)),
        }
    }
    if buckets.is_empty() {
        return None;
    }
    buckets.sort_by(|a, b| a.0.total_cmp(&b.0));
    Some(Histogram {
        buckets,
        sum: metrics.sum(&format!("{base}_sum"))?,
        count: metrics.sum(&format!("{base}_count"))?,
    })
}

/// One scrape of `/metrics` as a [`ServerScrape`] (None if the engine has no gauges).
pub async fn server_scrape(client: &Client, engine: Engine) -> Result<Option<ServerScrape>, ClientError> {
    if names(engine).is_none() {
        return Ok(None);
    }
    Ok(server_scrape_from(&fetch_metrics(client).await?, engine))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn vllm_counters_and_queue_histogram_sum_over_engines() {
        let m = Metrics::parse(concat!(
            "vllm:num_requests_running{engine=\"0\"} 2.0\n",
            "vllm:num_requests_running{engine=\"1\"} 2.0\n",
            "vllm:generation_tokens_total{engine=\"0\"} 100.0\n",
            "vllm:generation_tokens_total{engine=\"1\"} 50.0\n",
            "vllm:num_preemptions_total{engine=\"0\"} 3.0\n",
            "vllm:prefix_cache_queries_total{engine=\"0\"} 10.0\n",
            "vllm:prefix_cache_hits_total{engine=\"0\"} 4.0\n",
            "vllm:request_queue_time_seconds_bucket{engine=\"0\",le=\"0.5\"} 1.0\n",
            "vllm:request_queue_time_seconds_bucket{engine=\"0\",le=\"+Inf\"} 2.0\n",
            "vllm:request_queue_time_seconds_bucket{engine=\"1\",le=\"0.5\"} 3.0\n",
            "vllm:request_queue_time_seconds_bucket{engine=\"1\",le=\"+Inf\"} 3.0\n",
            "vllm:request_queue_time_seconds_sum{engine=\"0\"} 1.5\n",
            "vllm:request_queue_time_seconds_count{engine=\"0\"} 2.0\n",
            "vllm:request_queue_time_seconds_count{engine=\"1\"} 3.0\n",
        ));
        let s = server_scrape_from(&m, Engine::Vllm).unwrap();
        assert_eq!((s.running, s.generation_tokens, s.preemptions), (4.0, Some(150.0), Some(3.0)));
        assert_eq!((s.prefix_queries, s.prefix_hits, s.prompt_tokens), (Some(10.0), Some(4.0), None));
        let q = s.queue_time.unwrap();
        assert_eq!((q.buckets, q.count), (vec![(0.5, 4.0), (f64::INFINITY, 5.0)], 5.0));
        assert_eq!(server_scrape_from(&m, Engine::Generic), None);
    }

    #[test]
    fn llamacpp_names_its_generation_counter_differently() {
        let m = Metrics::parse("llamacpp:requests_processing 1\nllamacpp:tokens_predicted_total 77\n");
        let s = server_scrape_from(&m, Engine::Llamacpp).unwrap();
        assert_eq!((s.generation_tokens, s.queue_time), (Some(77.0), None));
    }
}
