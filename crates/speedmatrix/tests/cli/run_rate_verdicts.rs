//! Issue 29 §2: every verdict of the rate phase from evidence (methodology §13.1). Against the
//! simulated engine's trace: a level waits for long answers that are still streaming (its own
//! bound, not a fixed grace), long answers among short ones are not "behind", stalls are a fault
//! that neither stretches the span nor makes the level saturated, requests the client cut make
//! the verdict unknown (exit 0, said in words), and a level in error is neither saturated nor the
//! end of the sweep.

use std::collections::HashMap;
use std::path::Path;

use serde_json::Value;

use crate::common::{RunResult, SimSpec, num as f, request_lines, run, sim, trace_lines};

/// The tiny engine at 10 ms a token whatever the batch, with room for 64 requests: an answer of
/// N tokens takes N × 10 ms, and nothing queues at the rates these tests send.
const TEN_MS: &str = r#"
name = "ten-ms"
model = "tiny"
max_model_len = 16384
kv_cache_tokens = 1048576
block_size = 16
max_num_seqs = 64
max_num_batched_tokens = 8192
natural_output_tokens = 256

[prefill]
contexts = [1024, 16384]
tokens_per_s = [400000, 400000]

[decode]
batch = [1, 64]
contexts = [1024, 16384]
step_ms = [[10.0, 10.0], [10.0, 10.0]]

[overhead]
cached_prefill_ms = 2
"#;

/// The ten-ms engine with `faults`, tracing into `dir`.
async fn ten_ms(dir: &Path, faults: &'static [&'static str]) -> crate::common::Sim {
    let profile = dir.join("ten-ms.toml");
    std::fs::write(&profile, TEN_MS).unwrap();
    let profile: &'static str = Box::leak(profile.to_str().unwrap().to_string().into_boxed_str());
    sim(SimSpec { profile, faults, trace_dir: Some(dir), ..SimSpec::default() }).await
}

fn levels(r: &RunResult) -> Vec<Value> {
    r.record()["phases"]["rate"]["levels"].as_array().cloned().unwrap_or_default()
}

/// The trace's lines by the id the client saw.
fn trace_by_id(dir: &Path) -> HashMap<String, Value> {
    trace_lines(&dir.join("trace.jsonl")).into_iter().map(|t| (format!("chatcmpl-{}", t["id"]), t)).collect()
}

/// The trace line of each of the run's rate requests, in the order saved.
fn traced(out: &Path, dir: &Path) -> Vec<(Value, Value)> {
    let trace = trace_by_id(dir);
    request_lines(out)
        .into_iter()
        .filter(|l| l["phase"] == "rate")
        .filter_map(|l| {
            let id = l["request_id"].as_str()?.to_string();
            Some((l, trace.get(&id)?.clone()))
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_level_waits_for_answers_longer_than_its_window_while_they_stream() {
    let dir = tempfile::tempdir().unwrap();
    let sim = ten_ms(dir.path(), &[]).await;
    let url = sim.handle.url();
    let out = dir.path().join("out");
    // 600 tokens: 6 s answers, longer than the 5 s a level used to wait after its last due time
    let args = [
        "--url",
        &url,
        "--contexts",
        "1k",
        "--request-rate",
        "2,4",
        "--arrival",
        "constant",
        "--requests",
        "6",
        "--max-tokens",
        "600",
        "--save-requests",
        "--ready-stable",
        "300ms",
    ];
    let r = run(&out, &args).await;
    sim.handle.shutdown().await;
    assert_eq!(r.code, 0, "{}\n{}", r.stdout, r.stderr);
    let levels = levels(&r);
    assert_eq!(levels.len(), 2, "{levels:?}");
    let pairs = traced(&out, dir.path());
    assert_eq!(pairs.len(), 12);
    for (i, l) in levels.iter().enumerate() {
        let c = &l["counts"];
        assert_eq!((c["completed"].as_u64(), c["cancelled"].as_u64()), (Some(6), Some(0)), "{l}");
        assert_eq!((l["saturation"].as_str(), l["saturated"].as_bool()), (Some("kept_up"), Some(false)), "{l}");
        assert!(l.get("drain_s").is_none(), "nothing was cut: {l}");
        let mine = &pairs[i * 6..(i + 1) * 6];
        // the engine ran every request to its length, none queued: it kept up
        for (_, t) in mine {
            assert_eq!((t["completion_tokens"].as_u64(), t["finish"].as_str()), (Some(600), Some("length")), "{t}");
            assert!(f(&t["admitted"]) - f(&t["arrival"]) < 0.05, "queued at the engine: {t}");
        }
        // the level's span holds the last answer: the engine's first arrival → last end, give or
        // take the first request's send lag and the loopback trip
        let first = mine.iter().map(|(_, t)| f(&t["arrival"])).fold(f64::MAX, f64::min);
        let last = mine.iter().map(|(_, t)| f(&t["end"])).fold(0.0, f64::max);
        let span = f(&l["span_s"]);
        assert!((span - (last - first)).abs() < 0.1, "span {span} s, the trace says {}", last - first);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn long_answers_among_short_ones_are_not_behind() {
    let dir = tempfile::tempdir().unwrap();
    let sim = ten_ms(dir.path(), &[]).await;
    let url = sim.handle.url();
    let file = dir.path().join("mixed.jsonl");
    // two short answers, then a 4 s one, round again: the first quarter is mostly short
    let lines = [16, 16, 400].map(|n| format!("{{\"prompt\": \"a question\", \"max_tokens\": {n}}}\n")).concat();
    std::fs::write(&file, lines).unwrap();
    let out = dir.path().join("out");
    let args = [
        "--url",
        &url,
        "--request-rate",
        "4",
        "--arrival",
        "constant",
        "--requests",
        "12",
        "--prompts",
        file.to_str().unwrap(),
        "--save-requests",
        "--ready-stable",
        "300ms",
    ];
    let r = run(&out, &args).await;
    sim.handle.shutdown().await;
    assert_eq!(r.code, 0, "{}\n{}", r.stdout, r.stderr);
    let l = &levels(&r)[0];
    assert_eq!(l["counts"]["completed"], 12, "{l}");
    assert_eq!(l["saturation"], "kept_up", "{l}");
    assert_eq!(f(&l["backlog_pct"]), 0.0, "{l}");
    assert!(!r.stdout.contains("SATURATED"), "{}", r.stdout);
    // the engine agrees: nothing waited to be admitted, each ran its own length
    let pairs = traced(&out, dir.path());
    let made: Vec<u64> = pairs.iter().map(|(_, t)| t["completion_tokens"].as_u64().unwrap()).collect();
    assert_eq!(made, [16, 16, 400].repeat(4));
    assert!(pairs.iter().all(|(_, t)| f(&t["admitted"]) - f(&t["arrival"]) < 0.05), "{pairs:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stalled_streams_are_a_fault_not_load_and_do_not_stretch_the_span() {
    let dir = tempfile::tempdir().unwrap();
    // the last two requests of the first level stall after 5 tokens (48-token answers: 0.5 s)
    let sim = ten_ms(dir.path(), &["stall-after=5@max-tokens=48,from=15,to=16"]).await;
    let url = sim.handle.url();
    let out = dir.path().join("out");
    let args = [
        "--url",
        &url,
        "--contexts",
        "1k",
        "--request-rate",
        "8,16",
        "--arrival",
        "constant",
        "--requests",
        "16",
        "--max-tokens",
        "48",
        "--stall-timeout",
        "1s",
        "--save-requests",
        "--ready-stable",
        "300ms",
    ];
    let r = run(&out, &args).await;
    sim.handle.shutdown().await;
    assert_eq!(r.code, 0, "a level with failures is measured, not an error: {}\n{}", r.stdout, r.stderr);
    let levels = levels(&r);
    assert_eq!(levels.iter().map(|l| l["status"].as_str().unwrap()).collect::<Vec<_>>(), ["measured", "measured"]);
    let l = &levels[0];
    let c = &l["counts"];
    assert_eq!((c["completed"].as_u64(), c["failed"].as_u64(), c["cancelled"].as_u64()), (Some(14), Some(2), Some(0)));
    assert_eq!(l["saturation"], "kept_up", "two stalls are not a queue: {l}");
    assert!(l["first_failure"].as_str().unwrap().contains("stall"), "{l}");
    // the span ends at the last completion the engine made, not at the stall timeout a second later
    let pairs = traced(&out, dir.path());
    let mine = &pairs[..16];
    let first = mine.iter().map(|(_, t)| f(&t["arrival"])).fold(f64::MAX, f64::min);
    // (the engine made the stalled ones' tokens too: it is the stream that stalled)
    let done = mine.iter().filter(|(l, _)| l["status"] == "completed").map(|(_, t)| f(&t["end"])).fold(0.0, f64::max);
    let span = f(&l["span_s"]);
    assert!((span - (done - first)).abs() < 0.1, "span {span} s, the engine's last completion {} s", done - first);
    let achieved = f(&l["achieved_rps"]);
    assert!((achieved - 14.0 / span).abs() < 1e-6 && achieved > 5.0, "{l}");
    // said as a fault, in the run's own words
    assert!(r.stdout.contains("2 of 16 requests failed (a fault, not load"), "{}", r.stdout);
    // the engine counted the stalled streams' tokens too: no comparison, so no "another client"
    let m = &l["server_metrics"];
    assert!(m.is_object() && m.get("tok_s_diff_pct").is_none(), "{m}");
    assert!(!format!("{}{}", r.stdout, r.stderr).contains("another client"), "{}", r.stderr);
    assert!(levels[1]["server_metrics"]["tok_s_diff_pct"].is_number(), "a clean level compares: {}", levels[1]);
    assert_eq!(levels[1]["counts"]["failed"], 0, "{}", levels[1]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn requests_the_client_cut_make_the_verdict_unknown_and_are_said() {
    let dir = tempfile::tempdir().unwrap();
    let sim = ten_ms(dir.path(), &[]).await;
    let url = sim.handle.url();
    let file = dir.path().join("mixed.jsonl");
    std::fs::write(&file, "{\"prompt\": \"short\", \"max_tokens\": 16}\n{\"prompt\": \"long\", \"max_tokens\": 600}\n")
        .unwrap();
    let out = dir.path().join("out");
    // --drain-max 1s: the 6 s answers are cut a second after the last due time, still streaming
    let args = [
        "--url",
        &url,
        "--request-rate",
        "4",
        "--arrival",
        "constant",
        "--requests",
        "6",
        "--prompts",
        file.to_str().unwrap(),
        "--drain-max",
        "1s",
        "--save-requests",
        "--ready-stable",
        "300ms",
    ];
    let r = run(&out, &args).await;
    sim.handle.shutdown().await;
    assert_eq!(r.code, 0, "a cut is the client's doing, not an error: {}\n{}", r.stdout, r.stderr);
    let record = r.record();
    assert_eq!(record["phases"]["rate"]["settings"]["drain_max_s"], 1.0);
    let l = &levels(&r)[0];
    assert_eq!(l["status"], "measured", "{l}");
    let c = &l["counts"];
    assert_eq!((c["completed"].as_u64(), c["cancelled"].as_u64(), c["failed"].as_u64()), (Some(3), Some(3), Some(0)));
    assert_eq!((l["saturation"].as_str(), l["saturated"].as_bool()), (Some("unknown"), Some(false)), "{l}");
    assert_eq!(f(&l["drain_s"]), 1.0, "{l}");
    // goodput of the requests the server answered, not of the ones the client cut
    assert_eq!(f(&l["goodput_pct"]), 100.0, "{l}");
    // the engine was still streaming the long ones when the client left
    let pairs = traced(&out, dir.path());
    let cut: Vec<&Value> = pairs.iter().filter(|(l, _)| l["status"] == "cancelled").map(|(_, t)| t).collect();
    assert_eq!(cut.len(), 3, "{pairs:?}");
    for t in cut {
        let made = t["completion_tokens"].as_u64().unwrap();
        assert!(made > 50 && made < 600, "cut mid-answer after {made} tokens: {t}");
    }
    let said = format!("{}{}", r.stdout, r.stderr);
    assert!(said.contains("the client cut 3 requests still running"), "{said}");
    assert!(said.contains("whether the server kept up is unknown"), "{said}");
    let csv = std::fs::read_to_string(out.join("rate.csv")).unwrap();
    assert!(csv.lines().nth(1).unwrap().contains(",unknown,1,"), "{csv}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_level_in_error_is_not_saturated_and_does_not_end_the_sweep() {
    let dir = tempfile::tempdir().unwrap();
    // every request of the first two levels (four each) is refused
    let sim = ten_ms(dir.path(), &["status=503@max-tokens=40,to=8"]).await;
    let url = sim.handle.url();
    let out = dir.path().join("out");
    let args = [
        "--url",
        &url,
        "--contexts",
        "1k",
        "--request-rate",
        "2,4,8",
        "--arrival",
        "constant",
        "--requests",
        "4",
        "--max-tokens",
        "40",
        "--ready-stable",
        "300ms",
    ];
    let r = run(&out, &args).await;
    sim.handle.shutdown().await;
    assert_eq!(r.code, 2, "levels in error: {}\n{}", r.stdout, r.stderr);
    let levels = levels(&r);
    assert_eq!(
        levels.iter().map(|l| l["status"].as_str().unwrap()).collect::<Vec<_>>(),
        ["error", "error", "measured"],
        "{levels:?}"
    );
    for l in &levels[..2] {
        assert_eq!(l["saturated"], false, "{l}");
        assert!(l.get("saturation").is_none(), "{l}");
        assert!(l["reason"].as_str().unwrap().contains("503"), "{l}");
    }
    assert_eq!(
        (levels[2]["counts"]["completed"].as_u64(), levels[2]["saturation"].as_str()),
        (Some(4), Some("kept_up")),
        "{:?}",
        levels.iter().map(|l| &l["counts"]).collect::<Vec<_>>()
    );
}
