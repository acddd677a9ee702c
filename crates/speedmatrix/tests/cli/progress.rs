//! `--progress plain` says where the run is, one stamped line per event, with the figures of every
//! row and cell; `--quiet` says nothing until the summary.

use crate::common::{QUICK, SimSpec, run, sim};

/// The `[    12.3s] ` stamp taken off, or None for a line that has none.
fn unstamped(line: &str) -> Option<&str> {
    let (stamp, text) = line.split_once("s] ")?;
    let t = stamp.strip_prefix('[')?.trim();
    t.parse::<f64>().ok().map(|_| text)
}

/// The number after `label` in `text`, e.g. the 499.0 of "499.0 tok/s total".
fn number_before(text: &str, unit: &str) -> Option<f64> {
    let head = &text[..text.find(unit)?];
    head.split_whitespace().last()?.parse().ok()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn plain_progress_names_the_plan_the_phases_the_warm_up_and_every_figure() {
    let sim = sim(SimSpec::default()).await;
    let dir = tempfile::tempdir().unwrap();
    let url = sim.handle.url();
    // 16 × (1K + 512) needs 24,576 KV tokens: over an 8K budget, so 1K × 16 is not run
    let mut args = vec!["--url", url.as_str(), "--contexts", "1k", "--concurrency", "1,2,16", "--duration", "1s"];
    args.extend_from_slice(&["--ready-stable", "300ms", "--no-prefill-at-max", "--kv-budget", "8k"]);
    args.extend_from_slice(&["--warmup", "1s", "--progress", "plain"]);
    let r = run(dir.path(), &args).await;
    sim.handle.shutdown().await;
    assert_eq!(r.code, 0, "{}\n{}", r.stdout, r.stderr);
    let progress: Vec<&str> = r.stdout.lines().take_while(|l| !l.is_empty()).collect();
    let text: Vec<&str> = progress.iter().filter_map(|l| unstamped(l)).collect();
    let all = progress.join("\n");
    let find = |prefix: &str| -> &str {
        text.iter().copied().find(|l| l.starts_with(prefix)).unwrap_or_else(|| panic!("no {prefix:?} line in:\n{all}"))
    };

    let plan = find("plan: ");
    assert!(plan.contains("2 decode cells to measure, 1 over capacity, 1 prefill row,"), "{plan}");
    assert!(all.contains("\n           over capacity: 1K × 16: needs 24,576 KV tokens"), "{all}");
    assert!(all.contains("\n           service level: tok_s_p10>=20,ttft_p90<=2s\n"), "the default SLO: {all}");

    find("prefill phase started: 1 row to measure");
    find("prefill 1K started");
    let row = find("prefill    1K ");
    assert!(number_before(row, "prompt tok/s").is_some_and(|v| v > 0.0), "{row}");
    assert!(row.contains("TTFT"), "{row}");
    find("prefill phase done: 1 row (1 valid)");

    // the hidden warm-up cell says what it is, and ends
    find("decode warm-up at 1K for 1 s");
    find("decode warm-up 1K × 1 started (not measured)");
    find("decode warm-up 1K × 1 window open after ");
    find("decode warm-up 1K × 1 done (not measured)");
    assert!(!text.contains(&"decode warm-up done"), "{all}");

    find("decode matrix started: 2 cells to measure");
    for c in [1, 2] {
        find(&format!("cell 1K × {c} started"));
        let open = find(&format!("cell 1K × {c} window open after "));
        assert!(number_before(open, "s ramp-up").is_some(), "{open}");
        let done = find(&format!("decode    1K × {c} "));
        assert!(number_before(done, "tok/s total").is_some_and(|v| v > 0.0), "{done}");
        let ttft = done.split("TTFT").nth(1).unwrap_or_else(|| panic!("no TTFT: {done}"));
        assert!(number_before(ttft, "ms").is_some_and(|v| v > 0.0), "{done}");
    }
    assert!(!all.contains("cell 1K × 16"), "an over-capacity cell was run:\n{all}");
    find("decode matrix done: 2 of 2 cells measured (2 valid)");
    assert_eq!(text.last(), Some(&"run complete"), "{all}");
    // phase lines come in the order the run went
    let at = |prefix: &str| text.iter().position(|l| l.starts_with(prefix)).unwrap();
    let order = ["plan: ", "prefill phase started", "prefill phase done", "decode warm-up at", "decode matrix started"];
    let positions: Vec<usize> = order.iter().map(|p| at(p)).collect();
    assert!(positions.is_sorted(), "{order:?} out of order:\n{all}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn quiet_prints_only_the_summary() {
    let dir = tempfile::tempdir().unwrap();
    // no --url: the built-in simulated engine, whose notice --quiet also keeps back
    let mut args = vec!["--sim-profile", "tiny", "--contexts", "1k", "--concurrency", "1", "--duration", "1s", "-q"];
    args.extend_from_slice(QUICK);
    let r = run(dir.path(), &args).await;
    assert_eq!(r.code, 0, "{}\n{}", r.stdout, r.stderr);
    assert!(r.stdout.contains("Sustained decode") && r.stdout.contains("results:"), "{}", r.stdout);
    let said = format!("{}{}", r.stdout, r.stderr);
    for noise in ["s] ", "server: ", "No --url given", "cell 1K", "prefill 1K", "run complete"] {
        assert!(!said.contains(noise), "{noise:?} in quiet output:\n{said}");
    }
    assert_eq!(r.record()["status"], "complete");
}
