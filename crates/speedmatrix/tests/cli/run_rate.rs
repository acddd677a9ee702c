//! `--request-rate` (methodology §13.1) against the simulated engine, checked with its trace: the
//! requests arrive on the schedule whatever the server does, the level's achieved rate, latency
//! and send lag agree with what the engine saw, a cap makes requests late and the level saturated,
//! a sweep stops after two saturated levels, a seed fixes the schedule, and bad flags are refused.

use std::collections::HashMap;
use std::path::Path;

use serde_json::Value;

use crate::common::{
    SimSpec, bin, interrupt, num as f, request_lines as lines, run, sim, spawn_run, trace_lines, wait_for_record,
};

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// The trace line of each saved request, by the request's id.
fn joined<'a>(lines: &'a [Value], trace: &'a HashMap<String, Value>) -> Vec<(&'a Value, &'a Value)> {
    lines
        .iter()
        .map(|l| {
            let id = l["request_id"].as_str().expect("the server's id");
            (l, trace.get(id).unwrap_or_else(|| panic!("{id} is not in the trace")))
        })
        .collect()
}

fn trace_by_id(dir: &Path) -> HashMap<String, Value> {
    trace_lines(&dir.join("trace.jsonl")).into_iter().map(|t| (format!("chatcmpl-{}", t["id"]), t)).collect()
}

/// The lines of one level: the requests saved between its first and last due time, in due order.
fn level_lines(all: &[Value], index: usize, per_level: usize) -> Vec<Value> {
    all[index * per_level..(index + 1) * per_level].to_vec()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_level_arrives_on_schedule_and_its_figures_agree_with_the_trace() {
    let dir = tempfile::tempdir().unwrap();
    let sim = sim(SimSpec { trace_dir: Some(dir.path()), ..SimSpec::default() }).await;
    let url = sim.handle.url();
    let out = dir.path().join("out");
    let args = [
        "--url",
        url.as_str(),
        "--contexts",
        "1k",
        "--request-rate",
        "20,40",
        "--arrival",
        "constant",
        "--requests",
        "12",
        "--max-tokens",
        "16",
        "--save-requests",
        "--ready-stable",
        "300ms",
    ];
    let r = run(&out, &args).await;
    assert_eq!(r.code, 0, "{}", r.stderr);
    sim.handle.shutdown().await;
    let record = r.record();
    assert_eq!(record["settings"]["matrix"], false, "a phase alone runs no matrix");
    assert!(record["decode"].as_array().is_none_or(|d| d.is_empty()));
    let phase = &record["phases"]["rate"];
    assert_eq!(phase["settings"]["seed"], 17);
    assert_eq!(phase["settings"]["arrival"], "constant");
    let levels = phase["levels"].as_array().unwrap();
    assert_eq!(levels.len(), 2);
    assert!(out.join("rate.csv").exists());

    let trace = trace_by_id(dir.path());
    let all: Vec<Value> = lines(&out).into_iter().filter(|l| l["phase"] == "rate").collect();
    assert_eq!(all.len(), 24, "one line per request of each level");
    for (i, (level, rate)) in levels.iter().zip([20.0, 40.0]).enumerate() {
        assert_eq!(f(&level["rate"]), rate);
        assert_eq!(level["status"], "measured", "{level}");
        let c = &level["counts"];
        assert_eq!(
            (c["scheduled"].as_u64(), c["completed"].as_u64(), c["sent"].as_u64()),
            (Some(12), Some(12), Some(12))
        );
        assert_eq!(level["saturated"], false, "the tiny engine keeps up with {rate} req/s: {level}");
        let mine = level_lines(&all, i, 12);
        let pairs = joined(&mine, &trace);
        // the engine saw the requests arrive 1/rate apart: the schedule, not the server's pace
        let arrivals: Vec<f64> = pairs.iter().map(|(_, t)| f(&t["arrival"])).collect();
        let gaps: Vec<f64> = arrivals.windows(2).map(|w| w[1] - w[0]).collect();
        let gap = median(gaps.clone());
        assert!((gap - 1.0 / rate).abs() < 0.004, "{rate} req/s: median gap {gap} s at the engine");
        let span = arrivals.last().unwrap() - arrivals[0];
        assert!((span - 11.0 / rate).abs() < 0.03, "{rate} req/s: 12 arrivals over {span} s");
        // the due times the lines say are the schedule's
        let due: Vec<f64> = mine.iter().map(|l| f(&l["scheduled_s"])).collect();
        assert!(due.windows(2).all(|w| ((w[1] - w[0]) - 1.0 / rate).abs() < 1e-5), "{due:?}");
        // send lag: the line's sent − due, and the engine saw each arrive no earlier than sent
        let lag_max = mine.iter().map(|l| f(&l["sent_s"]) - f(&l["scheduled_s"])).fold(0.0, f64::max);
        assert!((f(&level["send_lag_ms"]["max"]) - lag_max * 1000.0).abs() < 0.01, "{level}");
        // latency from the due time: the engine's arrival → end, plus the lag and the loopback trip
        let truth_e2e: Vec<f64> = pairs
            .iter()
            .map(|(l, t)| (f(&t["end"]) - f(&t["arrival"])) + (f(&l["sent_s"]) - f(&l["scheduled_s"])))
            .collect();
        let e2e = f(&level["e2e_ms"]["p50"]) / 1000.0;
        let truth = median(truth_e2e);
        assert!(e2e >= truth - 0.002 && e2e <= truth + 0.05, "e2e p50 {e2e} s, the trace says {truth} s");
        let truth_ttft = median(
            pairs
                .iter()
                .map(|(l, t)| f(&t["first_token"]) - f(&t["arrival"]) + f(&l["sent_s"]) - f(&l["scheduled_s"]))
                .collect(),
        );
        let ttft = f(&level["ttft_ms"]["p50"]) / 1000.0;
        assert!(
            ttft >= truth_ttft - 0.002 && ttft <= truth_ttft + 0.05,
            "TTFT p50 {ttft} s, the trace says {truth_ttft} s"
        );
        // achieved: completed ÷ (first due → last end); the engine's first arrival → last end is
        // that span less the first request's send lag and trip
        let last_end = pairs.iter().map(|(_, t)| f(&t["end"])).fold(0.0, f64::max);
        let engine_span = last_end - arrivals[0];
        let achieved = f(&level["achieved_rps"]);
        let expect = 12.0 / engine_span;
        assert!((achieved - expect).abs() <= expect * 0.1, "achieved {achieved} req/s, the trace says {expect}");
        // output tokens: every request's completion tokens, over the span
        let tokens: f64 = pairs.iter().map(|(_, t)| f(&t["completion_tokens"])).sum();
        let out_tok_s = f(&level["output_tok_s"]);
        assert!(
            (out_tok_s * f(&level["span_s"]) - tokens).abs() < 0.5,
            "{out_tok_s} tok/s over the span vs {tokens} tokens"
        );
        // input: the prompt tokens the engine counted, over the span
        let prompt: f64 = pairs.iter().map(|(_, t)| f(&t["prompt_tokens"])).sum();
        assert!((f(&level["input_tok_s"]) * f(&level["span_s"]) - prompt).abs() < 0.5, "{level}");
        // TBT: each request's emissions, first to last, over the tokens between (§7.3)
        let truth_tbt = median(
            pairs
                .iter()
                .map(|(_, t)| {
                    let e = t["emissions"].as_array().unwrap();
                    let tokens: f64 = e[1..].iter().map(|x| f(&x[1])).sum();
                    (f(&e[e.len() - 1][0]) - f(&e[0][0])) / tokens * 1000.0
                })
                .collect(),
        );
        let tbt = f(&level["tbt_ms"]["p50"]);
        assert!((tbt - truth_tbt).abs() < truth_tbt * 0.25 + 0.5, "TBT p50 {tbt} ms, the trace says {truth_tbt} ms");
        // in flight: the engine's arrival → end intervals overlap as the client's did
        let mut most = 0;
        for (_, t) in &pairs {
            let at = f(&t["arrival"]);
            let n = pairs.iter().filter(|(_, u)| f(&u["arrival"]) <= at && f(&u["end"]) > at).count();
            most = most.max(n);
        }
        let max = level["in_flight_max"].as_u64().unwrap() as usize;
        assert!(max.abs_diff(most) <= 1, "at most {max} in flight, the trace says {most}");
        // goodput against the default SLO (TTFT p90 ≤ 2 s, tok/s ≥ 20): every request meets it here
        let good = pairs
            .iter()
            .filter(|(l, t)| {
                let ttft = f(&t["first_token"]) - f(&t["arrival"]) + f(&l["sent_s"]) - f(&l["scheduled_s"]);
                ttft <= 2.0
            })
            .count();
        assert_eq!(f(&level["goodput_pct"]), good as f64 * 100.0 / 12.0, "{level}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cap_makes_requests_late_the_level_saturated_and_the_sweep_stops_after_two() {
    let dir = tempfile::tempdir().unwrap();
    let sim = sim(SimSpec { trace_dir: Some(dir.path()), ..SimSpec::default() }).await;
    let url = sim.handle.url();
    let out = dir.path().join("out");
    let args = [
        "--url",
        url.as_str(),
        "--contexts",
        "1k",
        "--request-rate",
        "100,200,400,800",
        "--arrival",
        "constant",
        "--requests",
        "16",
        "--max-concurrency",
        "1",
        "--max-tokens",
        "32",
        "--save-requests",
        "--ready-stable",
        "300ms",
    ];
    let r = run(&out, &args).await;
    assert_eq!(r.code, 0, "{}", r.stderr);
    sim.handle.shutdown().await;
    let levels = r.record()["phases"]["rate"]["levels"].as_array().unwrap().clone();
    assert_eq!(levels.len(), 4, "{levels:?}");
    for l in &levels[..2] {
        assert_eq!((l["status"].as_str(), l["saturated"].as_bool()), (Some("measured"), Some(true)), "{l}");
        assert!(l["counts"]["late"].as_u64().unwrap() >= 12, "most requests waited for the slot: {l}");
        assert_eq!(l["in_flight_max"], 1, "the cap holds: {l}");
    }
    for l in &levels[2..] {
        assert_eq!(l["status"], "skipped", "{l}");
        assert!(l["reason"].as_str().unwrap().contains("saturated at 100 and 200 req/s"), "{l}");
    }
    let trace = trace_by_id(dir.path());
    let all: Vec<Value> = lines(&out).into_iter().filter(|l| l["phase"] == "rate").collect();
    assert_eq!(all.len(), 32, "the skipped levels sent nothing");
    for (i, level) in levels[..2].iter().enumerate() {
        let mine = level_lines(&all, i, 16);
        let pairs = joined(&mine, &trace);
        // one at a time at the engine: each arrived after the one before it ended
        for w in pairs.windows(2) {
            assert!(f(&w[1].1["arrival"]) >= f(&w[0].1["end"]) - 0.001, "{} overlaps {}", w[1].1, w[0].1);
        }
        // the last request's lag is the engine's time for the first fifteen, less its due offset
        let rate = f(&level["rate"]);
        let engine = f(&pairs[15].1["arrival"]) - f(&pairs[0].1["arrival"]);
        let lag = f(&level["send_lag_ms"]["max"]) / 1000.0;
        let expect = engine - 15.0 / rate;
        assert!((lag - expect).abs() < 0.02, "{rate} req/s: send lag max {lag} s, the trace says {expect} s");
        // the due-time latency holds the wait: the last request's e2e is its lag plus its own run
        let e2e_p99 = f(&level["e2e_ms"]["p99"]) / 1000.0;
        assert!(e2e_p99 > lag, "e2e p99 {e2e_p99} s includes the {lag} s wait");
        let achieved = f(&level["achieved_rps"]);
        assert!(achieved < rate / 2.0, "one at a time cannot reach {rate} req/s: {achieved}");
    }
}

/// The `scheduled_s` of a run's rate lines, relative to each level's first.
fn schedule_of(out: &Path) -> Vec<f64> {
    let all: Vec<Value> = lines(out).into_iter().filter(|l| l["phase"] == "rate").collect();
    let first = f(&all[0]["scheduled_s"]);
    all.iter().map(|l| f(&l["scheduled_s"]) - first).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_same_seed_sends_the_same_schedule() {
    let dir = tempfile::tempdir().unwrap();
    let sim = sim(SimSpec::default()).await;
    let url = sim.handle.url();
    let mut schedules = Vec::new();
    for (i, seed) in ["5", "5", "6"].into_iter().enumerate() {
        let out = dir.path().join(format!("out{i}"));
        let args = [
            "--url",
            url.as_str(),
            "--contexts",
            "1k",
            "--request-rate",
            "50",
            "--requests",
            "10",
            "--seed",
            seed,
            "--max-tokens",
            "8",
            "--save-requests",
            "--ready-stable",
            "300ms",
        ];
        let r = run(&out, &args).await;
        assert_eq!(r.code, 0, "{}", r.stderr);
        assert_eq!(r.record()["phases"]["rate"]["settings"]["seed"].as_u64(), seed.parse().ok());
        schedules.push(schedule_of(&out));
    }
    sim.handle.shutdown().await;
    let close = |a: &[f64], b: &[f64]| a.len() == b.len() && a.iter().zip(b).all(|(x, y)| (x - y).abs() < 3e-6);
    assert!(close(&schedules[0], &schedules[1]), "seed 5 twice: {:?} vs {:?}", schedules[0], schedules[1]);
    assert!(!close(&schedules[0], &schedules[2]), "seeds 5 and 6 drew the same gaps");
}

#[test]
fn bad_rate_flags_are_refused_with_what_to_give() {
    for (args, says) in [
        (&["--request-rate", "0"][..], "above 0"),
        (&["--request-rate", "2,x"], "requests per second"),
        (&["--request-rate", "2", "--arrival", "gamma:-1"], "CV must be"),
        (&["--request-rate", "2", "--arrival", "foo"], "poisson, constant or gamma:CV"),
        (&["--request-rate", "inf"], "add --requests N"),
        (&["--request-rate", "2", "--max-concurrency", "0"], "1 to 100000"),
        (&["--arrival", "constant"], "goes with --request-rate"),
    ] {
        let out = bin()
            .arg("run")
            .args(["--url", "http://127.0.0.1:9", "--out", "/nonexistent/x"])
            .args(args)
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_ne!(out.status.code(), Some(0), "{args:?}");
        assert!(stderr.contains(says), "{args:?}: {stderr}");
    }
}

/// The tiny engine with room for two requests at a time: far below the rates asked of it.
const TWO_SEATS: &str = r#"
name = "two-seats"
model = "tiny"
max_model_len = 16384
kv_cache_tokens = 131072
block_size = 16
max_num_seqs = 2
max_num_batched_tokens = 4096
natural_output_tokens = 256

[prefill]
contexts = [1024, 16384]
tokens_per_s = [400000, 400000]

[decode]
batch = [1, 2]
contexts = [1024, 16384]
step_ms = [[2.0, 2.2], [2.1, 2.3]]

[overhead]
cached_prefill_ms = 2
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_far_below_the_rate_is_saturated_and_the_sweep_stops() {
    let dir = tempfile::tempdir().unwrap();
    let profile = dir.path().join("two.toml");
    std::fs::write(&profile, TWO_SEATS).unwrap();
    let sim =
        sim(SimSpec { profile: profile.to_str().unwrap(), trace_dir: Some(dir.path()), ..SimSpec::default() }).await;
    let url = sim.handle.url();
    let out = dir.path().join("out");
    // about 70 ms a request, two at a time: some 28 req/s, asked for 400 and more; no client cap
    let args = [
        "--url",
        url.as_str(),
        "--contexts",
        "1k",
        "--request-rate",
        "400,800,1600",
        "--requests",
        "24",
        "--max-tokens",
        "32",
        "--save-requests",
        "--ready-stable",
        "300ms",
    ];
    let r = run(&out, &args).await;
    assert_eq!(r.code, 0, "{}", r.stderr);
    sim.handle.shutdown().await;
    let levels = r.record()["phases"]["rate"]["levels"].as_array().unwrap().clone();
    assert_eq!(
        levels.iter().map(|l| l["status"].as_str().unwrap()).collect::<Vec<_>>(),
        ["measured", "measured", "skipped"]
    );
    let trace = trace_by_id(dir.path());
    let all: Vec<Value> = lines(&out).into_iter().filter(|l| l["phase"] == "rate").collect();
    for (i, level) in levels[..2].iter().enumerate() {
        assert_eq!(level["saturated"], true, "{level}");
        let pairs = joined(&all[i * 24..(i + 1) * 24], &trace);
        // the client kept to the schedule: the queue was at the engine, which the trace shows
        assert!(f(&level["send_lag_ms"]["p50"]) < 20.0, "{level}");
        let queued = pairs.iter().filter(|(_, t)| f(&t["admitted"]) - f(&t["arrival"]) > 0.05).count();
        assert!(queued >= 12, "the engine held {queued} of 24 back: {level}");
        // the engine's own completion rate is what the level achieved
        let first = pairs.iter().map(|(_, t)| f(&t["arrival"])).fold(f64::MAX, f64::min);
        let last = pairs.iter().map(|(_, t)| f(&t["end"])).fold(0.0, f64::max);
        let engine_rate = 24.0 / (last - first);
        let achieved = f(&level["achieved_rps"]);
        assert!((achieved - engine_rate).abs() < engine_rate * 0.1, "achieved {achieved}, the engine {engine_rate}");
        assert!(achieved < f(&level["rate"]) / 4.0);
        assert!(f(&level["in_flight_max"]) >= 20.0, "the requests piled up in flight: {level}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_resume_keeps_the_finished_levels_and_measures_the_next() {
    let dir = tempfile::tempdir().unwrap();
    let sim = sim(SimSpec::default()).await;
    let url = sim.handle.url();
    let out = dir.path().join("out");
    let args = [
        "--url",
        url.as_str(),
        "--contexts",
        "1k",
        "--request-rate",
        "20,40",
        "--requests",
        "6",
        "--max-tokens",
        "8",
        "--ready-stable",
        "300ms",
        "--seed",
        "3",
    ];
    let first = run(&out, &args).await;
    assert_eq!(first.code, 0, "{}", first.stderr);
    // as a run stopped during its second level leaves it
    let mut record = first.record().clone();
    let kept = record["phases"]["rate"]["levels"][0].clone();
    record["phases"]["rate"]["levels"].as_array_mut().unwrap().truncate(1);
    record["status"] = "interrupted".into();
    std::fs::write(out.join("run.json"), serde_json::to_string_pretty(&record).unwrap()).unwrap();
    let resumed = run(&out, &["--resume", out.to_str().unwrap()]).await;
    sim.handle.shutdown().await;
    assert_eq!(resumed.code, 0, "{}", resumed.stderr);
    let phase = &resumed.record()["phases"]["rate"];
    assert_eq!(phase["settings"]["seed"], 3, "the settings come from the record");
    let levels = phase["levels"].as_array().unwrap();
    assert_eq!(levels.len(), 2);
    assert_eq!(levels[0], kept, "the finished level is kept as it was");
    assert_eq!((f(&levels[1]["rate"]), levels[1]["status"].as_str()), (40.0, Some("measured")));
    assert_eq!(levels[1]["counts"]["completed"], 6);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ctrl_c_keeps_the_finished_levels() {
    let sim = sim(SimSpec::default()).await;
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().to_path_buf();
    let url = sim.handle.url();
    // each level is a 3 s window: Ctrl-C half a second into the second lands inside it
    let args = ["--url", &url, "--contexts", "1k", "--request-rate", "10,20", "--duration", "3s"];
    let child = spawn_run(&out, &[&args[..], &["--max-tokens", "8", "--ready-stable", "300ms"]].concat());
    let levels = |v: &Value| v["phases"]["rate"]["levels"].as_array().map_or(0, Vec::len);
    wait_for_record(&out, "a finished level", |v| levels(v) >= 1).await;
    let r = interrupt(child, &out, std::time::Duration::from_millis(500)).await;
    sim.handle.shutdown().await;
    assert_eq!(r.code, 130, "{}\n{}", r.stdout, r.stderr);
    let rec = r.record();
    assert_eq!(rec["status"], "interrupted");
    let levels = rec["phases"]["rate"]["levels"].as_array().unwrap();
    assert_eq!(levels.len(), 1, "the level in progress is dropped, the finished one kept: {levels:?}");
    assert_eq!((f(&levels[0]["rate"]), levels[0]["status"].as_str()), (10.0, Some("measured")));
    let csv = std::fs::read_to_string(out.join("rate.csv")).unwrap();
    assert_eq!(csv.lines().count(), 2, "{csv}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_prompts_file_is_sent_in_order_with_each_lines_max_tokens_and_inf_sends_all_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let sim = sim(SimSpec { trace_dir: Some(dir.path()), ..SimSpec::default() }).await;
    let url = sim.handle.url();
    let file = dir.path().join("mine.jsonl");
    let text = "{\"prompt\": \"one two three\", \"max_tokens\": 5}\n\
                {\"messages\": [{\"role\": \"user\", \"content\": \"a longer question than the first\"}], \"max_tokens\": 9}\n\
                {\"prompt\": \"no max tokens of its own\"}\n";
    std::fs::write(&file, text).unwrap();
    let out = dir.path().join("out");
    let args = [
        "--url",
        url.as_str(),
        "--request-rate",
        "30,inf",
        "--arrival",
        "constant",
        "--requests",
        "6",
        "--prompts",
        file.to_str().unwrap(),
        "--max-tokens",
        "7",
        "--save-requests",
        "--ready-stable",
        "300ms",
    ];
    let r = run(&out, &args).await;
    assert_eq!(r.code, 0, "{}", r.stderr);
    sim.handle.shutdown().await;
    let levels = r.record()["phases"]["rate"]["levels"].as_array().unwrap().clone();
    assert_eq!(levels.len(), 2, "one row for the file: {levels:?}");
    assert!(levels.iter().all(|l| l["context"] == 0 && l["label"].as_str().unwrap().contains("mine.jsonl")));
    assert_eq!(r.record()["settings"]["prompts_file"]["prompts"], 3);
    let trace = trace_by_id(dir.path());
    let all: Vec<Value> = lines(&out).into_iter().filter(|l| l["phase"] == "rate").collect();
    assert_eq!(all.len(), 12);
    for (i, level) in levels.iter().enumerate() {
        assert_eq!(level["counts"]["completed"], 6, "{level}");
        let mine = level_lines(&all, i, 6);
        let pairs = joined(&mine, &trace);
        // the file's lines in order, round again, each with its own max_tokens (else --max-tokens)
        let made: Vec<u64> = pairs.iter().map(|(_, t)| t["completion_tokens"].as_u64().unwrap()).collect();
        assert_eq!(made, [5, 9, 7, 5, 9, 7], "level {i}");
        let prompts: Vec<u64> = pairs.iter().map(|(_, t)| t["prompt_tokens"].as_u64().unwrap()).collect();
        assert_eq!((prompts[0], prompts[1], prompts[2]), (prompts[3], prompts[4], prompts[5]));
        assert_ne!(prompts[0], prompts[1], "different prompts were sent");
    }
    // inf: every request of the level was due at its start
    let inf = level_lines(&all, 1, 6);
    assert!(inf.iter().all(|l| l["scheduled_s"] == inf[0]["scheduled_s"]), "{inf:?}");
    assert_eq!(levels[1]["rate"], "inf");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_that_goes_away_fails_the_run_and_keeps_the_finished_levels() {
    use std::io::{BufRead, BufReader};
    use std::process::Stdio;
    let mut server = bin()
        .args(["sim", "--profile", "tiny", "--port", "0"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut first = String::new();
    BufReader::new(server.stdout.take().unwrap()).read_line(&mut first).unwrap();
    let url = first.trim().rsplit(' ').next().unwrap().to_string();
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().to_path_buf();
    let child = bin()
        .args(["run", "--url", &url, "--contexts", "1k", "--request-rate", "10,20", "--duration", "2s"])
        .args(["--max-tokens", "8", "--ready-stable", "300ms", "--server-wait", "2s", "--out"])
        .arg(&out)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while std::fs::read_to_string(out.join("run.json"))
        .ok()
        .and_then(|s| serde_json::from_str::<Value>(&s).ok())
        .is_none_or(|v| v["phases"]["rate"]["levels"].as_array().is_none_or(Vec::is_empty))
    {
        assert!(std::time::Instant::now() < deadline, "no level finished within 60 s");
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    server.kill().unwrap();
    server.wait().unwrap();
    let output = tokio::task::spawn_blocking(move || child.wait_with_output().unwrap()).await.unwrap();
    let r = crate::common::result(&out, output);
    assert_eq!(r.code, 1, "{}", r.stderr);
    let rec = r.record();
    assert_eq!(rec["status"], "failed");
    let levels = rec["phases"]["rate"]["levels"].as_array().unwrap();
    assert_eq!(levels[0]["status"], "measured", "the finished level is kept: {levels:?}");
    assert!(levels[1]["counts"]["failed"].as_u64().unwrap() >= 1, "{:?}", levels[1]);
    assert_eq!(levels[1]["status"], "error", "{:?}", levels[1]);
    assert!(levels[1]["reason"].as_str().unwrap().starts_with("server stopped responding"), "{:?}", levels[1]);
    assert!(rec["events"].to_string().contains("did not come back"), "{}", rec["events"]);

    // back on its port: --retry-failed measures the cut level again and keeps the finished one
    let (mut back, _) = crate::run_server_down::sim_process(crate::run_server_down::port_of(&url));
    let retried = crate::common::run(&out, &["--resume", out.to_str().unwrap(), "--retry-failed"]).await;
    back.kill().unwrap();
    back.wait().unwrap();
    assert_eq!(retried.record()["status"], "complete", "{}", retried.stderr);
    let again = retried.record()["phases"]["rate"]["levels"].as_array().unwrap();
    assert_eq!(again.len(), 2, "{again:?}");
    assert_eq!(again[0], levels[0]);
    assert_eq!((&again[1]["rate"], &again[1]["status"]), (&levels[1]["rate"], &Value::from("measured")), "{again:?}");
}
