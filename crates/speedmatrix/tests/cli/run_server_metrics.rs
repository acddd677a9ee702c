//! The server's gauges over each cell's window (methodology §14.1) against the simulated engine: the
//! series shows the cell's C requests running and none waiting, the server's own tok/s agrees with
//! ours over the scrapes' own span and with the trace's emissions, a KV cache too small for the cell
//! shows preemptions, a server whose counter disagrees or that another client uses is warned about,
//! and `--metrics-interval off` records nothing.

use reqwest::StatusCode;
use serde_json::Value;
use sm_site::tokens;

use crate::common::{QUICK, RunResult, SimSpec, metric_sums, num, run, scheduler, sim, trace_lines};
use crate::site_common::site::{mark, start, unique};

const C: u64 = 4;

async fn run_cell(url: String, out: &std::path::Path, extra: &[&str]) -> RunResult {
    let mut args = vec!["--url", url.leak(), "--contexts", "1k", "--concurrency", "4", "--duration", "3s"];
    if !extra.contains(&"--max-tokens") {
        args.extend_from_slice(&["--max-tokens", "4096"]);
    }
    args.extend_from_slice(extra);
    if !extra.contains(&"--metrics-interval") {
        args.extend_from_slice(&["--metrics-interval", "250ms"]);
    }
    args.extend_from_slice(QUICK);
    let r = run(out, &args).await;
    assert_eq!(r.code, 0, "stdout:\n{}\nstderr:\n{}", r.stdout, r.stderr);
    r
}

/// The trace's tokens per second while all of the cell's requests were streaming: from the last of
/// their first tokens to the first of their ends, a margin inside.
fn trace_rate(trace: &[Value]) -> f64 {
    let cell: Vec<&Value> = trace.iter().filter(|t| num(&t["completion_tokens"]) > 200.0).collect();
    assert_eq!(cell.len() as u64, C, "the cell's requests: {}", cell.len());
    let from = cell.iter().map(|t| num(&t["first_token"])).fold(0.0, f64::max) + 0.2;
    let to = cell.iter().map(|t| num(&t["end"])).fold(f64::INFINITY, f64::min) - 0.2;
    assert!(to - from > 2.0, "{from} … {to}");
    let tokens: f64 = cell
        .iter()
        .flat_map(|t| t["emissions"].as_array().unwrap())
        .filter(|e| (from..to).contains(&num(&e[0])))
        .map(|e| num(&e[1]))
        .sum();
    tokens / (to - from)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_series_and_the_servers_tok_s_match_the_trace() {
    let dir = tempfile::tempdir().unwrap();
    let sim = sim(SimSpec { trace_dir: Some(dir.path()), ..SimSpec::default() }).await;
    let url = sim.handle.url();
    let out = dir.path().join("out");
    let r = run_cell(url.clone(), &out, &[]).await;
    let [generated] = metric_sums(&url, ["vllm:generation_tokens_total"]).await;
    sim.handle.shutdown().await;
    let trace = trace_lines(&dir.path().join("trace.jsonl"));
    let emitted: f64 = trace.iter().map(|t| num(&t["completion_tokens"])).sum();
    assert_eq!(generated, emitted, "the counter is the trace's truth");

    let cell = r.cell(1024, C);
    assert_eq!(cell["status"], "valid", "{cell}");
    let m = &cell["server_metrics"];
    let series = m["series"].as_array().unwrap();
    // a scrape at the window's start, every 250 ms, and one at its end
    assert!(series.len() >= 10 && series.len() as f64 == num(&m["scrapes"]), "{m}");
    assert!(num(&series[0]["t_s"]) < 0.1, "{m}");
    assert!((num(&m["span_s"]) - num(&cell["measured_s"])).abs() < 0.1, "{m}");
    for p in series {
        assert_eq!((num(&p["running"]), num(&p["waiting"])), (C as f64, 0.0), "steady state: {p}");
        assert!(num(&p["kv_usage"]) > 0.0, "{p}");
    }
    assert_eq!((num(&m["running_mean"]), num(&m["preemptions"])), (C as f64, 0.0), "{m}");
    // the server's rate is its counter over the span, set against what the streams received over
    // the same span (not the window), and agrees with it and with the trace's
    let server = num(&m["server_tok_s"]);
    let (generated, ours) = (num(&m["generation_tokens"]), num(&m["measured_tokens"]));
    assert!((server - generated / num(&m["span_s"])).abs() < 0.5, "{m}");
    let (diff, timing) = (num(&m["tok_s_diff_pct"]), num(&m["tok_s_timing_pct"]));
    assert!((diff - 100.0 * (generated - ours) / ours).abs() < 0.01, "{m}");
    assert!(diff.abs() < 3.0 && (0.0..3.0).contains(&timing), "server {generated} vs ours {ours} tokens: {m}");
    let truth = trace_rate(&trace);
    assert!((server / truth - 1.0).abs() < 0.03, "server {server} vs trace {truth}");
    let warned = cell["warnings"].to_string().contains("the server counted");
    assert_eq!(warned, diff.abs() > 2.0 + timing, "the warning follows the 2 % rule past the timing: {cell}");

    let md = std::fs::read_to_string(out.join("report.md")).unwrap();
    assert!(md.contains(&format!("{server:.1}")), "server tok/s in the Markdown: {md}");
    let csv = std::fs::read_to_string(out.join("measurements.csv")).unwrap();
    assert!(csv.lines().next().unwrap().contains("server_tok_s"), "{csv}");
    let html = std::fs::read_to_string(out.join("report.html")).unwrap();
    assert!(html.contains("server-gauges"), "the chart on demand");
    site_keeps_and_checks(r.record()).await;
}

/// The results site stores the series and shows it as the report does; a series point that is
/// not a measurement is refused with a 400 that names it, and nothing is stored.
async fn site_keeps_and_checks(rec: &Value) {
    let dir = tempfile::tempdir().unwrap();
    let site = start(&format!("sqlite://{}", dir.path().join("site.db").display())).await;
    let token = tokens::create(&site.db, &unique("gauges")).await.unwrap();
    let id = site.upload(&token, &mark(&rec.to_string(), &site.tag), false).await;
    let (status, html) = site.get(&format!("/runs/{id}")).await;
    assert_eq!(status, StatusCode::OK, "{html}");
    assert!(html.contains("class=\"server-gauges\"") && html.contains("<details><summary>1K × 4: server "), "{html}");
    let before = site.snapshot().await;
    let mut bad = rec.clone();
    bad["decode"][0]["server_metrics"]["series"][1]["kv_usage"] = serde_json::json!(1.5);
    let (status, answer) = site.post(&token, mark(&bad.to_string(), &site.tag).into_bytes(), false).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{answer}");
    assert!(answer["error"].as_str().unwrap().contains("server_metrics.series.kv_usage is 1.5"), "{answer}");
    assert_eq!(site.snapshot().await, before, "nothing stored");
    site.db.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_counter_that_disagrees_is_a_warning() {
    let dir = tempfile::tempdir().unwrap();
    let sim = sim(SimSpec { faults: &["counter-skew=80"], ..SimSpec::default() }).await;
    let r = run_cell(sim.handle.url(), &dir.path().join("out"), &[]).await;
    sim.handle.shutdown().await;
    let cell = r.cell(1024, C);
    assert_eq!(cell["status"], "valid", "a warning, not an error: {cell}");
    let diff = num(&cell["server_metrics"]["tok_s_diff_pct"]);
    assert!((-23.0..-17.0).contains(&diff), "80 % of the tokens: {diff}");
    let warnings = cell["warnings"].to_string();
    assert!(warnings.contains("the server counted") && warnings.contains(&format!("{diff:+.1} %")), "{warnings}");
}

/// Another client streams from the server through the cell's window: its tokens are in the server's
/// counter and not in ours, beyond what the scrapes' timing explains, and the cell says so.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn another_client_on_the_server_is_a_warning() {
    let dir = tempfile::tempdir().unwrap();
    let sim = sim(SimSpec::default()).await;
    let url = sim.handle.url();
    let other = tokio::spawn(another_client(url.clone()));
    let r = run_cell(url, &dir.path().join("out"), &[]).await;
    other.await.unwrap();
    sim.handle.shutdown().await;
    let cell = r.cell(1024, C);
    assert_eq!(cell["status"], "valid", "a warning, not an error: {cell}");
    let m = &cell["server_metrics"];
    let (diff, timing) = (num(&m["tok_s_diff_pct"]), num(&m["tok_s_timing_pct"]));
    // one stream beside the cell's four: about a quarter more
    assert!(diff > 10.0 && diff > 2.0 + timing, "{m}");
    let warnings = cell["warnings"].to_string();
    assert!(
        warnings.contains("another client may be using it") && warnings.contains(&format!("{diff:+.1} %")),
        "{warnings}"
    );
}

/// Streams one long answer from the moment the cell's requests all run until they are gone (the
/// cell's window is over), so that the cell's drain finds the server idle.
async fn another_client(url: String) {
    let tick = std::time::Duration::from_millis(20);
    while scheduler(&url).await.0 < C as f64 {
        tokio::time::sleep(tick).await;
    }
    // longer than the cell's window at the tiny profile's pace (about 30 s), within its 16K context
    let body =
        serde_json::json!({"prompt": "another client", "max_tokens": 12_000, "ignore_eos": true, "stream": true});
    let mut answer = reqwest::Client::new().post(format!("{url}/v1/completions")).json(&body).send().await.unwrap();
    assert!(answer.status().is_success(), "{}", answer.text().await.unwrap_or_default());
    let read = async { while let Ok(Some(_)) = answer.chunk().await {} };
    // the cell's streams cancelled: this one alone runs
    let cell_over = async {
        while scheduler(&url).await.0 > 1.0 {
            tokio::time::sleep(tick).await;
        }
    };
    tokio::select! {
        _ = read => panic!("the long answer ended first"),
        _ = cell_over => {}
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_small_kv_cache_shows_preemptions_and_off_records_nothing() {
    let dir = tempfile::tempdir().unwrap();
    // room for the cell's four 1K prompts and little more: decoding soon preempts (--kv-budget
    // tells the planner otherwise, so that the cell runs)
    let profile = dir.path().join("small-kv.toml");
    let text = include_str!("../../../sm-sim/profiles/tiny.toml")
        .replace("kv_cache_tokens = 131072", "kv_cache_tokens = 6144")
        .replace("max_model_len = 16384", "max_model_len = 6144");
    std::fs::write(&profile, text).unwrap();
    let sim = sim(SimSpec { profile: profile.to_str().unwrap(), ..SimSpec::default() }).await;
    let url = sim.handle.url();
    let r = run_cell(url.clone(), &dir.path().join("small"), &["--ready-timeout", "2s", "--kv-budget", "100k"]).await;
    let [total] = metric_sums(&url, ["vllm:num_preemptions_total"]).await;
    let cell = r.cell(1024, C);
    let m = &cell["server_metrics"];
    assert!(m.is_object(), "{}", r.stdout);
    let preempted = num(&m["preemptions"]);
    assert!(preempted > 0.0 && preempted <= total, "window {preempted}, server's whole life {total}: {cell}");
    assert!(num(&m["kv_usage_max"]) > 0.9, "{m}");

    // the same cell measured (without --kv-budget it would be over capacity: nothing to run)
    let off_args = ["--ready-timeout", "2s", "--kv-budget", "100k", "--metrics-interval", "off"];
    let off = run_cell(url, &dir.path().join("off"), &off_args).await;
    sim.handle.shutdown().await;
    assert_eq!(off.cell(1024, C)["status"], "valid", "{}", off.cell(1024, C));
    assert!(off.cell(1024, C).get("server_metrics").is_none(), "{}", off.cell(1024, C));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn queue_time_comes_from_the_engines_histogram() {
    let dir = tempfile::tempdir().unwrap();
    let sim = sim(SimSpec { trace_dir: Some(dir.path()), ..SimSpec::default() }).await;
    let url = sim.handle.url();
    // short requests: new ones are admitted, and queued, inside the window
    let r = run_cell(url.clone(), &dir.path().join("out"), &["--max-tokens", "64"]).await;
    let name = "vllm:request_queue_time_seconds";
    let [count, sum] = metric_sums(&url, [&format!("{name}_count"), &format!("{name}_sum")].map(|s| s.as_str())).await;
    sim.handle.shutdown().await;
    // the histogram is the trace's truth: one observation per admitted request, arrival to admission
    let trace = trace_lines(&dir.path().join("trace.jsonl"));
    let queued: Vec<f64> = trace.iter().filter_map(|t| Some(t["admitted"].as_f64()? - num(&t["arrival"]))).collect();
    assert_eq!(count, queued.len() as f64);
    assert!((sum - queued.iter().sum::<f64>()).abs() < 1e-6, "{sum} vs the trace");
    let m = &r.cell(1024, C)["server_metrics"];
    let (p50, mean) = (num(&m["queue_time_ms_p50"]), num(&m["queue_time_ms_mean"]));
    let longest_ms = queued.iter().fold(0.0, |a: f64, b| a.max(*b)) * 1000.0;
    assert!((0.0..=longest_ms + 1e-6).contains(&mean), "mean {mean} ms, the trace's longest {longest_ms} ms");
    // every queue time is under the first bound, 1 ms: the p50 is interpolated inside it
    assert!(longest_ms > 1.0 || p50 <= 1.0, "p50 {p50} ms");
}
