//! `--sessions` against the simulated engine (methodology §13.4): every turn's prompt, cached and
//! output tokens and TTFT agree with the engine's trace; turn k resends turn k−1's history with
//! the answer as received; the shared system prompt is served from the prefix cache to a user who
//! arrives after another user's prefill; the per-turn figures are those of the turns; a resume
//! keeps finished conversations; bad flags are refused with what to give.

use std::collections::HashMap;
use std::path::Path;

use serde_json::Value;

use crate::common::{SimSpec, num as f, run, sim, trace_lines};

const SHARED: u64 = 512;
const TURN_TOKENS: u64 = 64;
const THINK_S: f64 = 0.2;

fn u(v: &Value) -> u64 {
    v.as_u64().unwrap_or_else(|| panic!("not a count: {v}"))
}

fn args<'a>(url: &'a str, extra: &[&'a str]) -> Vec<&'a str> {
    let mut a = vec!["--url", url, "--contexts", "1k", "--concurrency", "1", "--max-tokens", "24"];
    a.extend_from_slice(&["--ready-stable", "300ms", "--warmup", "0s", "--no-prefill-at-max"]);
    a.extend_from_slice(extra);
    a
}

fn trace_by_id(dir: &Path) -> HashMap<String, Value> {
    trace_lines(&dir.join("trace.jsonl")).into_iter().map(|t| (format!("chatcmpl-{}", t["id"]), t)).collect()
}

fn mean(v: &[f64]) -> f64 {
    v.iter().sum::<f64>() / v.len() as f64
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_turn_agrees_with_the_trace_and_resends_the_history() {
    let dir = tempfile::tempdir().unwrap();
    let sim = sim(SimSpec { trace_dir: Some(dir.path()), ..SimSpec::default() }).await;
    let url = sim.handle.url();
    let out = dir.path().join("out");
    let extra = ["--sessions", "3", "--turns", "3", "--think-time", "200ms", "--turn-tokens", "64"];
    let r = run(&out, &args(&url, &[&extra[..], &["--shared-prefix", "512", "--save-requests"]].concat())).await;
    assert_eq!(r.code, 0, "{}", r.stderr);
    sim.handle.shutdown().await;
    let rec = r.record();
    assert_eq!(rec["settings"]["matrix"], false, "a phase alone runs no matrix");
    assert!(rec["decode"].as_array().is_none_or(Vec::is_empty));
    let p = &rec["phases"]["sessions"];
    assert_eq!((u(&p["settings"]["users"]), u(&p["settings"]["turns"])), (3, 3));
    assert!((f(&p["settings"]["stagger_s"]) - THINK_S / 3.0).abs() < 1e-6, "users start think ÷ users apart");
    let trace = trace_by_id(dir.path());
    let block = sm_sim::Profile::resolve("tiny").unwrap().block_size;
    let sessions = p["sessions"].as_array().unwrap();
    assert_eq!(sessions.len(), 3);
    // (turn, prompt, cached, TTFT ms from the scheduled start) of every turn, from the trace
    let mut truth: Vec<(u64, f64, f64, f64)> = Vec::new();
    let mut first_turns = Vec::new();
    for s in sessions {
        assert_eq!(s["status"], "complete", "{s}");
        let turns = s["turns"].as_array().unwrap();
        assert_eq!(turns.len(), 3);
        for (i, t) in turns.iter().enumerate() {
            assert_eq!((u(&t["turn"]), t["status"].as_str()), (i as u64 + 1, Some("completed")), "{t}");
            let id = t["request_id"].as_str().expect("the server's id");
            let tr = &trace[id];
            for field in ["prompt_tokens", "cached_tokens"] {
                assert_eq!(t[field], tr[field], "{field} of {t}\ntrace {tr}");
            }
            assert_eq!(u(&t["output_tokens"]), u(&tr["completion_tokens"]));
            assert_eq!(u(&t["output_tokens"]), 24);
            // TTFT from the scheduled start: the client's includes the loopback trip the engine does not see
            let (ttft, engine) = (f(&t["first_token_s"]) - f(&t["sent_s"]), f(&tr["first_token"]) - f(&tr["arrival"]));
            assert!(ttft >= engine - 0.002 && ttft <= engine + 0.5, "{id}: TTFT {ttft} s, the trace says {engine} s");
            assert!(f(&t["sent_s"]) >= f(&t["scheduled_s"]) - 1e-6, "{t}");
            let from_due = (f(&t["first_token_s"]) - f(&t["scheduled_s"])) * 1000.0;
            truth.push((i as u64 + 1, f(&tr["prompt_tokens"]), f(&tr["cached_tokens"]), from_due));
            if i == 0 {
                first_turns.push(tr.clone());
                // the sim's chat template: each sized chat counts 2 generation-prompt tokens once
                assert_eq!(u(&t["prompt_tokens"]), SHARED + TURN_TOKENS - 2, "shared prompt + first message: {t}");
                continue;
            }
            let prev = &turns[i - 1];
            let (p0, p1, out0) = (u(&prev["prompt_tokens"]), u(&t["prompt_tokens"]), u(&prev["output_tokens"]));
            // the history grows by the answer as received (with its 4 template tokens) and the new
            // message (a 64-token chat less its 2 generation-prompt tokens, plus 4 template tokens … = 64 + 2)
            assert_eq!(p1, p0 + out0 + 4 + TURN_TOKENS - 2, "turn {} resends turn {}'s history and answer", i + 1, i);
            // the sim caches the blocks turn k−1 filled (its prompt, the template's separator and
            // its answer): turn k finds them all (docs/sim.md)
            let filled = (p0 + 1 + out0) / block * block;
            assert!(u(&t["cached_tokens"]) >= filled, "turn {} cached {t}, turn {i} filled {filled}", i + 1);
            let think = f(&t["scheduled_s"]) - f(&prev["ended_s"]);
            assert!((think - THINK_S).abs() < 1e-5, "turn {} is due the think time after the answer: {think}", i + 1);
        }
    }
    // a user whose first turn arrived after another user's prefill ended finds the shared prompt cached
    let mut later = 0;
    for t in &first_turns {
        let prefilled_before =
            first_turns.iter().any(|o| o["id"] != t["id"] && f(&o["first_token"]) < f(&t["arrival"]));
        if prefilled_before {
            later += 1;
            assert!(u(&t["cached_tokens"]) >= SHARED / block * block - block, "shared prefix not cached: {t}");
        }
    }
    assert!(later >= 1, "users start 67 ms apart: some arrived after the first one's prefill: {first_turns:?}");

    // the per-turn figures are those of the turns (truth from the trace)
    let by_turn = p["by_turn"].as_array().unwrap();
    assert_eq!(by_turn.len(), 3);
    for fig in by_turn {
        let k = u(&fig["turn"]);
        let of: Vec<_> = truth.iter().filter(|t| t.0 == k).collect();
        let prompt: Vec<f64> = of.iter().map(|t| t.1).collect();
        let cached: Vec<f64> = of.iter().map(|t| t.2).collect();
        assert!((f(&fig["prompt_tokens_mean"]) - mean(&prompt)).abs() < 0.01, "{fig}");
        assert!((f(&fig["cached_tokens_mean"]) - mean(&cached)).abs() < 0.01, "{fig}");
        let pct = 100.0 * cached.iter().sum::<f64>() / prompt.iter().sum::<f64>();
        assert!((f(&fig["cache_hit_pct"]) - pct).abs() < 0.01, "{fig}: {pct}");
        assert_eq!(u(&fig["completed"]), 3);
        // TTFT counts from the turn's due time (methodology §13): the median of the three users'
        let mut ttft: Vec<f64> = of.iter().map(|t| t.3).collect();
        ttft.sort_by(f64::total_cmp);
        assert!((f(&fig["ttft_ms_p50"]) - ttft[1]).abs() < 0.01, "{fig}: {ttft:?}");
        assert!(f(&fig["ttft_ms_p50"]) <= f(&fig["ttft_ms_p90"]));
        if k > 1 {
            assert!(f(&fig["cache_hit_pct"]) > 50.0, "a later turn is mostly history: {fig}");
        }
    }
    let summary = &p["summary"];
    assert_eq!((u(&summary["completed"]), u(&summary["failed"]), u(&summary["output_tokens"])), (9, 0, 9 * 24));
    assert!(f(&summary["output_tok_s"]) > 0.0);

    let csv = std::fs::read_to_string(out.join("sessions.csv")).unwrap();
    assert_eq!(csv.lines().count(), 1 + 9, "{csv}");
    assert!(csv.starts_with("user,turn,status,"));
    let md = std::fs::read_to_string(out.join("report.md")).unwrap();
    assert!(md.contains("## Multi-turn sessions"), "{md}");
    let lines = std::fs::read_to_string(out.join("requests.jsonl")).unwrap();
    let sessions_lines = lines.lines().filter(|l| l.contains("\"phase\":\"sessions\"")).count();
    assert_eq!(sessions_lines, 9, "one line per turn");
    assert!(r.stdout.contains("Multi-turn sessions"), "the console summary: {}", r.stdout);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_resume_keeps_finished_conversations_and_sends_nothing_again() {
    let dir = tempfile::tempdir().unwrap();
    let sim = sim(SimSpec { trace_dir: Some(dir.path()), ..SimSpec::default() }).await;
    let url = sim.handle.url();
    let out = dir.path().join("out");
    let first =
        run(&out, &args(&url, &["--sessions", "2", "--turns", "2", "--think-time", "0s", "--turn-tokens", "32"])).await;
    assert_eq!(first.code, 0, "{}", first.stderr);
    let before = first.record()["phases"]["sessions"].clone();
    let out_s = out.to_string_lossy().to_string();
    let again = run(&out, &["--resume", &out_s, "--url", &url]).await;
    assert_eq!(again.code, 0, "{}", again.stderr);
    let after = &again.record()["phases"]["sessions"];
    assert_eq!(after["sessions"], before["sessions"], "finished conversations are kept as they were");
    assert_eq!(after["settings"], before["settings"]);
    let changed = run(&out, &["--resume", &out_s, "--url", &url, "--sessions", "3"]).await;
    assert_ne!(changed.code, 0);
    assert!(changed.stderr.contains("recorded with --sessions 2 --turns 2"), "{}", changed.stderr);
    sim.handle.shutdown().await;
    let turns =
        trace_lines(&dir.path().join("trace.jsonl")).iter().filter(|t| u(&t["completion_tokens"]) == 24).count();
    assert_eq!(turns, 4, "the resume sent no turn again");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_session_flags_say_what_to_give() {
    let dir = tempfile::tempdir().unwrap();
    let url = "http://127.0.0.1:9";
    for (bad, says) in [
        (&["--sessions", "0"][..], "give 1 to 256"),
        (&["--sessions", "2", "--turns", "0"][..], "--turns"),
        (&["--sessions", "2", "--think-time", "-1"][..], "not a duration"),
        (&["--turns", "3"][..], "add --sessions USERS"),
        (&["--sessions", "256", "--turns", "64"][..], "at most 4096"),
    ] {
        let r = run(&dir.path().join("out"), &[&["--url", url][..], bad].concat()).await;
        assert_ne!(r.code, 0, "{bad:?}");
        assert!(r.stderr.contains(says), "{bad:?}: {}", r.stderr);
        assert!(r.record.is_none(), "{bad:?} wrote a record");
    }
}

/// Ctrl-C in the middle of the conversations: the turns that ended are in run.json, their
/// conversations marked interrupted; `--resume` holds those conversations again from turn 1 and
/// ends with every conversation complete.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ctrl_c_keeps_the_finished_turns_and_a_resume_holds_the_conversations_again() {
    use std::time::{Duration, Instant};
    let dir = tempfile::tempdir().unwrap();
    let sim = sim(SimSpec { trace_dir: Some(dir.path()), ..SimSpec::default() }).await;
    let url = sim.handle.url();
    let out = dir.path().join("out");
    let flags = ["--sessions", "2", "--turns", "6", "--think-time", "300ms", "--turn-tokens", "32"];
    let child = crate::common::bin()
        .arg("run")
        .args(args(&url, &flags))
        .args(["--progress", "plain", "--out"])
        .arg(&out)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let turns_in = |rec: &Value| -> usize {
        rec["phases"]["sessions"]["sessions"]
            .as_array()
            .map_or(0, |s| s.iter().map(|x| x["turns"].as_array().map_or(0, Vec::len)).sum())
    };
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let rec =
            std::fs::read_to_string(out.join("run.json")).ok().and_then(|s| serde_json::from_str::<Value>(&s).ok());
        if rec.as_ref().is_some_and(|r| turns_in(r) >= 2) {
            break;
        }
        assert!(Instant::now() < deadline, "no turn ended within 60 s");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let pid = child.id().to_string();
    assert!(std::process::Command::new("kill").args(["-INT", &pid]).status().unwrap().success());
    let output = tokio::task::spawn_blocking(move || child.wait_with_output().unwrap()).await.unwrap();
    let stopped = crate::common::result(&out, output);
    assert_eq!(stopped.record()["status"], "interrupted", "{}", stopped.stderr);
    let kept = &stopped.record()["phases"]["sessions"];
    let finished = turns_in(stopped.record());
    assert!((2..12).contains(&finished), "the turns that ended are kept: {kept}");
    assert!(kept["sessions"].as_array().unwrap().iter().any(|s| s["status"] == "interrupted"), "{kept}");
    assert!(
        kept["sessions"].as_array().unwrap().iter().all(|s| s["turns"]
            .as_array()
            .unwrap()
            .iter()
            .all(|t| t["status"] == "completed")),
        "no half turn: {kept}"
    );

    let out_s = out.to_string_lossy().to_string();
    let resumed = run(&out, &["--resume", &out_s, "--url", &url]).await;
    assert_eq!(resumed.code, 0, "{}", resumed.stderr);
    sim.handle.shutdown().await;
    let p = &resumed.record()["phases"]["sessions"];
    for s in p["sessions"].as_array().unwrap() {
        assert_eq!(s["status"], "complete", "{s}");
        let turns = s["turns"].as_array().unwrap();
        assert_eq!(turns.iter().map(|t| u(&t["turn"])).collect::<Vec<_>>(), [1, 2, 3, 4, 5, 6], "{s}");
    }
    // every recorded turn is a request the engine served
    let trace = trace_by_id(dir.path());
    for t in p["sessions"].as_array().unwrap().iter().flat_map(|s| s["turns"].as_array().unwrap()) {
        assert_eq!(trace[t["request_id"].as_str().unwrap()]["prompt_tokens"], t["prompt_tokens"]);
    }
}

/// `--prompts FILE.jsonl`: each user's turns send T consecutive lines' last user messages, in file
/// order, with a line's own `max_tokens`; the record says the file was used.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_user_messages_come_from_the_prompts_file() {
    let dir = tempfile::tempdir().unwrap();
    let sim = sim(SimSpec { trace_dir: Some(dir.path()), ..SimSpec::default() }).await;
    let url = sim.handle.url();
    let messages = ["Hello there.", "And then?", "Tell me a long story about measuring rivers in spring.", "Why?"];
    let file = dir.path().join("prompts.jsonl");
    let lines = [
        serde_json::json!({"prompt": messages[0]}),
        serde_json::json!({"messages": [{"role": "system", "content": "ignored"}, {"role": "user", "content": messages[1]}], "max_tokens": 5}),
        serde_json::json!({"messages": [{"role": "user", "content": messages[2]}, {"role": "assistant", "content": "not this"}]}),
        serde_json::json!({"prompt": messages[3]}),
    ];
    std::fs::write(&file, lines.iter().map(|l| format!("{l}\n")).collect::<String>()).unwrap();
    let out = dir.path().join("out");
    let file_s = file.to_string_lossy().to_string();
    let r =
        run(&out, &args(&url, &["--sessions", "2", "--turns", "2", "--think-time", "0s", "--prompts", &file_s])).await;
    assert_eq!(r.code, 0, "{}", r.stderr);
    sim.handle.shutdown().await;
    let p = &r.record()["phases"]["sessions"];
    assert_eq!(p["settings"]["prompts_file"], true);
    assert_eq!(r.record()["settings"]["prompts_file"]["prompts"], 4);
    let s = p["sessions"].as_array().unwrap();
    let turn = |user: usize, k: usize| &s[user]["turns"][k];
    // user 0 sends lines 0 and 1, user 1 lines 2 and 3; line 1 asks for 5 tokens
    assert_eq!(u(&turn(0, 1)["output_tokens"]), 5);
    assert_eq!(u(&turn(0, 0)["output_tokens"]), 24);
    let count = |m: &str| sm_sim::tokenizer::count(m) as u64;
    // both users' system prompts are as long: their first turns differ by their messages
    assert_eq!(
        u(&turn(1, 0)["prompt_tokens"]) - u(&turn(0, 0)["prompt_tokens"]),
        count(messages[2]) - count(messages[0]),
        "{p}"
    );
    // turn 2 adds the answer (and its 4 template tokens) and the file's message (and its 4)
    let grown = u(&turn(1, 1)["prompt_tokens"]) - u(&turn(1, 0)["prompt_tokens"]);
    assert_eq!(grown, 4 + u(&turn(1, 0)["output_tokens"]) + 4 + count(messages[3]), "{p}");
}

/// A completions prompt has no turns: a run whose only phase is the sessions one can measure nothing,
/// and is refused before anything is sent, saying what to give; beside the matrix, the phase is
/// refused the same way rather than skipped in silence.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_completions_api_refuses_the_phase_and_says_why() {
    let dir = tempfile::tempdir().unwrap();
    let sim = sim(SimSpec::default()).await;
    let url = sim.handle.url();
    let r = run(&dir.path().join("out"), &args(&url, &["--api", "completions", "--sessions", "2"])).await;
    let with_matrix =
        run(&dir.path().join("m"), &args(&url, &["--api", "completions", "--sessions", "2", "--matrix"])).await;
    sim.handle.shutdown().await;
    for r in [&r, &with_matrix] {
        assert_eq!(r.code, 1, "{}", r.stderr);
        assert!(r.stderr.contains("nothing asked for could be measured"), "{}", r.stderr);
        assert!(r.stderr.contains("a conversation needs the chat API; run it with --api chat"), "{}", r.stderr);
    }
}
