//! The sessions phase (methodology §13.4) against vLLM serving the tiny model: short
//! conversations whose every turn resends the history, answered and counted.

use super::support::Vllm;

/// Two users × three turns: every turn answered, each turn's prompt holds the previous one and
/// its answer, the server's cached counts are reported and coherent, and its prefix cache
/// serves some of the resent history (vLLM caches by default; the CPU backend's blocks are 128).
#[test]
#[ignore = "needs a real engine: scripts/engines/real-engine-tests.sh"]
fn vllm_sessions_phase() {
    let Some(vllm) = Vllm::from_env() else { return };
    let mut args = vec!["--contexts", "256", "--concurrency", "1", "--max-tokens", "16"];
    args.extend(["--ready-stable", "1s", "--warmup", "0s", "--no-prefill-at-max"]);
    args.extend(["--sessions", "2", "--turns", "3", "--think-time", "0s", "--turn-tokens", "64"]);
    args.extend(["--shared-prefix", "256"]);
    let (r, dir) = vllm.run(&args);
    assert_eq!(r.code, 0, "{}", r.context());
    let rec = r.record();
    assert_eq!(rec["status"], "complete");
    let p = &rec["phases"]["sessions"];
    let sessions = p["sessions"].as_array().unwrap_or_else(|| panic!("no sessions: {p}"));
    assert_eq!(sessions.len(), 2, "{p}");
    for s in sessions {
        assert_eq!(s["status"], "complete", "{s}");
        let turns = s["turns"].as_array().unwrap();
        assert_eq!(turns.len(), 3, "{s}");
        let count = |t: &serde_json::Value, f: &str| t[f].as_u64().unwrap_or_else(|| panic!("{f} of {t}"));
        for (i, t) in turns.iter().enumerate() {
            assert_eq!(t["status"], "completed", "{t}");
            assert!(count(t, "output_tokens") >= 1, "{t}");
            assert!(count(t, "cached_tokens") <= count(t, "prompt_tokens"), "{t}");
            let (sched, first) = (t["scheduled_s"].as_f64().unwrap(), t["first_token_s"].as_f64().unwrap());
            assert!(first >= sched, "{t}");
            if i > 0 {
                let prev = &turns[i - 1];
                assert!(
                    count(t, "prompt_tokens") > count(prev, "prompt_tokens") + count(prev, "output_tokens"),
                    "turn {} resends turn {}'s prompt and answer: {prev}\n{t}",
                    i + 1,
                    i
                );
            }
        }
    }
    let by_turn = p["by_turn"].as_array().unwrap();
    assert_eq!(by_turn.len(), 3, "{p}");
    assert!(by_turn.iter().all(|t| t["completed"] == 2 && t["failed"] == 0), "{p}");
    let summary = &p["summary"];
    assert_eq!((summary["completed"].as_u64(), summary["failed"].as_u64()), (Some(6), Some(0)), "{summary}");
    assert!(summary["cache_hit_pct"].as_f64().is_some_and(|h| h > 0.0), "the resent history hit the cache: {summary}");
    assert!(dir.path().join("sessions.csv").exists());
}
