//! Against llama.cpp's llama-server serving the tiny model as GGUF: another
//! metrics dialect (`llamacpp:*`), slots instead of a block pool, and usage only
//! in a stream's last chunk.

use super::support::{Metrics, Poll, check_drained_between_cells, counter_delta, get_json, run, server, window_span};

const URL: &str = "SPEEDMATRIX_LLAMACPP_URL";
/// Polled during the run; the counters give the server's own time per output token over each cell.
const SCHED: Poll<'static> = Poll {
    running: "llamacpp:requests_processing",
    waiting: "llamacpp:requests_deferred",
    counters: &["llamacpp:tokens_predicted_seconds_total", "llamacpp:tokens_predicted_total"],
};
const FAST: &[&str] = &["--ready-stable", "1s", "--warmup", "0s", "--no-prefill-at-max"];
/// Short enough that requests end inside even the 16-stream cells of a loaded CI machine, so
/// that their totals, not a probe batch after the cell, count the tokens (methodology §7.3).
const MAX_TOKENS: u64 = 64;

/// Slots and context come from /props and /slots; the engine is `llamacpp`.
#[test]
#[ignore = "needs a real engine: scripts/engines/real-engine-tests.sh"]
fn llamacpp_discovery_matches_the_server() {
    let Some(url) = server(URL) else { return };
    let dir = tempfile::tempdir().unwrap();
    let r = run(&url, dir.path(), &["--dry-run", "--contexts", "1k,4k", "--concurrency", "1,4"], None);
    assert_eq!(r.code, 0, "{}", r.context());
    let s = &r.record()["server"];
    assert_eq!(s["engine"], "llamacpp", "{s}");
    let props = get_json(&url, "/props", None);
    let slots = get_json(&url, "/slots", None);
    assert_eq!(s["max_num_seqs"], props["total_slots"], "{s}");
    assert_eq!(slots.as_array().unwrap().len() as u64, props["total_slots"].as_u64().unwrap());
    assert_eq!(s["max_model_len"], slots[0]["n_ctx"], "{s}");
    assert_eq!(s["metrics_available"], true, "started with --metrics");
    // unified KV: the pool is --ctx-size, read from the local server's command line
    let cmd = r.record()["launch_command"].as_str().unwrap_or_else(|| panic!("no launch command: {}", r.context()));
    assert!(cmd.contains("llama-server") && cmd.contains("-kvu"), "{cmd}");
    let ctx: u64 = cmd.split_whitespace().skip_while(|a| *a != "-c").nth(1).unwrap().parse().unwrap();
    assert_eq!(s["kv_budget_tokens"], ctx, "{s}");
}

/// The short matrix against llama.cpp: usage arrives only in the last chunk, yet
/// tokens and TBT come out right, compared with the server's own counters; pooled
/// connections that the server closed do not turn into failed cells. Every broken
/// expectation is collected, so that one run shows them all.
///
/// Contexts 1k and 4k, not the 16k of the vLLM matrix: 16 slots of 16k need a KV cache of
/// about 270,000 tokens, and llama-server on one CPU thread prefills 16k-token prompts so
/// slowly (attention grows with the square of the context; the research measured prefill
/// above 8k as slow) that the cells alone would add several minutes to every CI run. The
/// 16k path is covered against vLLM (docs/real-engines.md).
#[test]
#[ignore = "needs a real engine: scripts/engines/real-engine-tests.sh"]
fn llamacpp_short_matrix() {
    let Some(url) = server(URL) else { return };
    let dir = tempfile::tempdir().unwrap();
    let before = Metrics::scrape(&url);
    let max_tokens = MAX_TOKENS.to_string();
    let mut args =
        vec!["--contexts", "1k,4k", "--concurrency", "1,4,16", "--duration", "5s", "--max-tokens", &max_tokens];
    args.extend_from_slice(FAST);
    let r = run(&url, dir.path(), &args, Some(SCHED));
    let after = Metrics::scrape(&url);
    assert_eq!(r.code, 0, "{}", r.context());
    let rec = r.record();
    assert_eq!(rec["status"], "complete", "{}", r.context());
    let planned = rec["plan"].as_array().unwrap().iter().filter(|p| p["kind"] == "decode" && p["status"] == "planned");
    assert_eq!(planned.count(), 6, "16 slots hold every cell: {}", rec["plan"]);

    let mut problems: Vec<String> = Vec::new();
    let mut check = |ok: bool, what: String| {
        if !ok {
            problems.push(what);
        }
    };
    let (mut counted, mut completed, mut recorded_retries) = (0, 0, 0);
    let mut tbt_compared: Vec<u64> = Vec::new();
    for c in r.decode() {
        assert_eq!(c["status"], "valid", "{c}\n{}", r.context());
        check(c["token_source"] == "usage_at_end", format!("llama.cpp sends usage in the last chunk only: {c}"));
        // the drain barrier's own warning ("after the cell: …"), not a warning that merely says "after the cell"
        let drain = c["warnings"].as_array().into_iter().flatten().filter_map(|w| w.as_str());
        check(!drain.clone().any(|w| w.starts_with("after the cell:")), format!("drain timed out: {c}"));
        // usage arrives at the end, with the cached count: the slots keep the scout's prompt
        let hit = c["prompt_cache_hit_pct"].as_f64();
        eprintln!("llama.cpp {} × {}: prompt cache hit {hit:?} %", c["label"], c["concurrency"]);
        // usage comes with a request's last chunk only: a cell in which none ended has no share
        check(hit.is_some() || c["completed"] == 0, format!("no cache hit share, yet requests ended: {c}"));
        if c["concurrency"] == 1 {
            check(hit.is_some_and(|h| h >= 90.0), format!("the decode requests missed the slot's cache: {c}"));
        }
        let retries = c["client_retries"].as_u64().unwrap_or(0);
        recorded_retries += retries;
        if retries > 0 {
            check(c["warnings"].to_string().contains("sent a second time"), format!("a silent retry: {c}"));
        }
        if check_server_tbt(&r, c, &mut check) {
            tbt_compared.push(c["concurrency"].as_u64().unwrap());
        }
        let tokens = c["output_tokens"].as_u64().unwrap();
        let done = c["completed"].as_u64().unwrap();
        assert!(tokens > 0, "{c}");
        counted += tokens;
        completed += done;
        // TBT is the gap between tokens, not between a request's first chunk and its
        // final usage chunk: at C=1 the per-request rate is about 1/TBT.
        let (tbt, per_request) = (c["tbt_ms_p50"].as_f64().unwrap(), c["per_request_tok_s"].as_f64().unwrap());
        if c["concurrency"] == 1 {
            let ratio = per_request * tbt / 1000.0;
            check((0.3..=1.5).contains(&ratio), format!("per-request {per_request} tok/s vs TBT {tbt} ms: {c}"));
        }
        // llama.cpp does send usage, in the last chunk: tokens must not be counted from chunks
        let warnings = c["warnings"].to_string();
        check(!warnings.contains("sent no usage"), format!("the final usage chunk was not used: {c}"));
    }
    // C = 1 at both contexts and 1K × 4 have requests far shorter than the window, on any machine
    let (compared, batched) = (tbt_compared.len(), tbt_compared.iter().any(|&c| c > 1));
    check(compared >= 3 && batched, format!("TBT compared with the server in too few cells: {tbt_compared:?}"));
    // the server generated every token we counted, and the completed requests' share
    let d = |name: &str| after.sum(name) - before.sum(name);
    let predicted = d("llamacpp:tokens_predicted_total");
    check(predicted >= counted as f64, format!("server predicted {predicted}, we counted {counted}"));
    check(predicted >= (completed * MAX_TOKENS) as f64, format!("server predicted {predicted}, {completed} completed"));
    check(counted as f64 >= 0.5 * predicted, format!("we counted {counted} of the {predicted} tokens the server made"));

    // prompts exact (llama.cpp has /tokenize); scouts cold but for the few tokens all
    // prompts share (template, run tag); decode requests served from the slots' cache
    for row in rec["prefill"].as_array().unwrap() {
        assert_eq!(row["status"], "valid", "{row}");
        check(row["prompt_tokens"] == row["context"], format!("prompt length is not exact: {row}"));
        let cached = row["cached_tokens"].as_u64().unwrap_or(u64::MAX);
        check(cached * 50 < row["context"].as_u64().unwrap(), format!("the scout is not cold: {row}"));
    }
    let (prompt, cached) = (d("llamacpp:prompt_tokens_total"), d("llamacpp:prompt_tokens_cached_total"));
    eprintln!("llama.cpp prompt tokens {prompt}, of which cached {cached}");
    // llamacpp:prompt_tokens_total counts only the tokens it evaluated, so the cached
    // ones must outnumber them by far once the scouts have warmed the slots.
    check(cached > 2.0 * prompt, format!("decode requests missed the cache: {cached} cached, {prompt} evaluated"));

    let gaps = check_drained_between_cells(&r);
    check(gaps >= 2, format!("too few scrapes between cells ({gaps}) to check the drain barrier"));
    check((after.sum(SCHED.running), after.sum(SCHED.waiting)) == (0.0, 0.0), "busy after the run".into());
    // a retry on a connection the server closed is logged, never silent; the cells record the
    // workers' retries (a scout's retry is logged only)
    for p in rec["prompts"].as_array().unwrap() {
        check(p["tokens"] == p["context"], format!("prompt length is not exact: {p}"));
    }
    let logged = r.stderr.lines().filter(|l| l.contains("retrying a request once")).count() as u64;
    eprintln!(
        "requests retried after llama-server closed a pooled connection: {logged} logged, {recorded_retries} in cells"
    );
    check(recorded_retries <= logged, format!("{recorded_retries} retries recorded, {logged} logged"));
    assert!(problems.is_empty(), "{} problem(s):\n- {}\n{}", problems.len(), problems.join("\n- "), r.context());
}

/// speedmatrix's TBT p50 against the server's own time per output token over the cell's window:
/// `tokens_predicted_seconds_total / tokens_predicted_total`, both counted when a request ends,
/// for the request's whole generation. So the figure is the window's only where a request's
/// generation fits well inside it (at most half the window): otherwise the requests that end in the
/// window generated mostly before it, during the ramp-up, through the other slots' cold prefills
/// (CI, 4K × 16: 128 tokens at about 50 ms make 6.4 s against a 5 s window, and the server said
/// 125 ms per token against 49 ms in the window); so the server's counters are read from a request's
/// length after the window opens. Returns whether the cell was compared: not
/// where a request lasts over half the window, the server lacks either counter, or fewer than
/// two requests' tokens ended inside the window.
fn check_server_tbt(r: &super::support::Run, c: &serde_json::Value, check: &mut impl FnMut(bool, String)) -> bool {
    let (label, conc) = (c["label"].as_str().unwrap(), c["concurrency"].as_u64().unwrap());
    let window_s = c["measured_s"].as_f64().unwrap();
    let Some((from, to)) = window_span(r, label, conc, window_s) else {
        check(false, format!("no window line for {label} × {conc}"));
        return false;
    };
    let tbt = c["tbt_ms_p50"].as_f64().unwrap();
    // a request's length at the slow end of its gaps: on a busy machine p50 × tokens understates it
    let slow = c["tbt_ms_p99"].as_f64().unwrap_or(tbt).max(tbt);
    let request_s = MAX_TOKENS as f64 * slow / 1000.0;
    if request_s > window_s / 2.0 {
        eprintln!("llama.cpp {label} × {conc}: TBT not compared with the server: a request lasts {request_s:.1} s");
        return false;
    }
    // the server counts a request when it ends: only those that end a request's length after the
    // window opened generated inside it (CI, 4K × 4 on a busy machine: 26.5 ms in the window, 44.2
    // ms from the server over the whole window, whose first requests began in a 9.8 s ramp-up)
    let from = from + std::time::Duration::from_secs_f64(request_s);
    let (Some(secs), Some(tokens)) = (counter_delta(r, 0, from, to), counter_delta(r, 1, from, to)) else {
        return false;
    };
    if secs <= 0.0 || tokens < 2.0 * MAX_TOKENS as f64 {
        return false;
    }
    let server_ms = 1000.0 * secs / tokens;
    eprintln!("llama.cpp {label} × {conc}: TBT p50 {tbt:.2} ms, server {server_ms:.2} ms per token");
    // ±35 %: the machine is shared, and the server's figure is a mean over the requests that ended
    let ratio = tbt / server_ms;
    check((0.65..=1.35).contains(&ratio), format!("TBT p50 {tbt:.2} ms vs the server's {server_ms:.2} ms: {c}"));
    true
}
