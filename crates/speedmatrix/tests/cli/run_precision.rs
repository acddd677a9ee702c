//! Precision (methodology §12) against the simulated engine, whose true speed is the profile's:
//! with noise on every decode step the intervals cover the truth at about their nominal rate,
//! adaptive windows end early on a quiet server and run to the longest window on a noisy one, and
//! repeats flag a server that drifts.

use std::path::{Path, PathBuf};

use serde_json::Value;
use sm_core::precision::{self, Interval};

use crate::common::{QUICK, RunResult, SimSpec, run, sim};

/// Every decode step takes `STEP_MS` on average at every batch size and context, so a stream makes
/// 1000 / STEP_MS tok/s and C streams C times that; `noise` is the profile's `[noise]` table.
const STEP_MS: f64 = 10.0;

fn profile(dir: &Path, name: &str, noise: &str) -> String {
    let toml = format!(
        "name = \"{name}\"\nmodel = \"{name}\"\nmax_model_len = 8192\nkv_cache_tokens = 1048576\n\
         block_size = 16\nmax_num_seqs = 64\nmax_num_batched_tokens = 8192\n\
         [prefill]\ncontexts = [1024, 8192]\ntokens_per_s = [400000, 400000]\n\
         [decode]\nbatch = [1, 64]\ncontexts = [1024, 8192]\nstep_ms = [[{STEP_MS}, {STEP_MS}], [{STEP_MS}, {STEP_MS}]]\n\
         [overhead]\ncached_prefill_ms = 2\n{noise}"
    );
    let path = dir.join(format!("{name}.toml"));
    std::fs::write(&path, toml).unwrap();
    path.to_str().unwrap().to_string()
}

async fn run_on(dir: &Path, profile: &str, args: &[&str]) -> RunResult {
    let sim = sim(SimSpec { profile, ..SimSpec::default() }).await;
    let url = sim.handle.url();
    let mut all = vec!["--url", url.as_str(), "--contexts", "1k", "--max-tokens", "4096"];
    all.extend_from_slice(QUICK);
    all.extend_from_slice(args);
    let r = run(&dir.join("out"), &all).await;
    sim.handle.shutdown().await;
    assert_eq!(r.code, 0, "stdout:\n{}\nstderr:\n{}", r.stdout, r.stderr);
    r
}

fn interval(ci: &Value, figure: &str) -> Option<(f64, f64)> {
    let i = &ci[figure];
    Some((i["lo"].as_f64()?, i["hi"].as_f64()?))
}

/// Fewest intervals of `n` that must hold the truth: a figure's intervals over independent windows
/// are n Bernoulli trials, and intervals that really hold it with probability `p` cover fewer than
/// this with probability at most 0.1 % (methodology §12.1).
fn min_covered(n: usize, p: f64) -> usize {
    let pmf = |k: usize| {
        (0..k).fold(1.0, |c, i| c * (n - i) as f64 / (i + 1) as f64) * p.powi(k as i32) * (1.0 - p).powi((n - k) as i32)
    };
    let mut below = 0.0;
    (0..=n)
        .find(|&k| {
            below += pmf(k);
            below > 0.001
        })
        .unwrap_or(n)
}

/// Every repeat of every cell of one run of the noisy profile (its own noise seed), with the
/// cell's concurrency.
async fn noisy_windows(dir: PathBuf, seed: u64, args: Vec<&'static str>) -> Vec<(f64, Value)> {
    let dir = dir.join(format!("seed{seed}"));
    std::fs::create_dir_all(&dir).unwrap();
    let noisy = profile(&dir, "noisy", &format!("[noise]\nstep_cv = 0.3\nseed = {seed}\n"));
    let r = run_on(&dir, &noisy, &args).await;
    let mut windows = Vec::new();
    for cell in r.cells() {
        let c = cell["concurrency"].as_f64().unwrap();
        windows.extend(cell["repeats"].as_array().expect("repeats[]").iter().map(|rep| (c, rep.clone())));
    }
    windows
}

/// How many of the windows' intervals of each main figure hold the profile's truth: every step
/// takes STEP_MS on average, so a stream makes 1000 / STEP_MS tok/s and C streams C times that.
fn coverage(mode: &str, windows: &[(f64, Value)], nominal: f64) {
    let per_stream = 1000.0 / STEP_MS;
    let figures: [(&str, &dyn Fn(f64) -> f64); 3] =
        [("total_tok_s", &|c| c * per_stream), ("per_request_tok_s", &|_| per_stream), ("tbt_ms_p50", &|_| STEP_MS)];
    for (figure, truth) in figures {
        let (mut covered, mut widths) = (0, Vec::new());
        for (c, rep) in windows {
            let (lo, hi) =
                interval(&rep["ci"], figure).unwrap_or_else(|| panic!("{mode}: no {figure} interval: {rep}"));
            let truth = truth(*c);
            covered += usize::from(lo <= truth && truth <= hi);
            widths.push((hi - lo) / 2.0 / truth * 100.0);
        }
        let (n, need) = (windows.len(), min_covered(windows.len(), nominal));
        let mean_width = widths.iter().sum::<f64>() / n as f64;
        eprintln!(
            "{mode} {figure}: {covered} of {n} intervals hold the truth (need {need}); mean half-width ±{mean_width:.2} %"
        );
        assert!(covered >= need, "{mode} {figure}: {covered} of {n} intervals hold the truth, fewer than {need}");
        // 1 s windows of 100 steps with a 30 % CV: about ±7 %
        assert!(mean_width < 15.0, "{mode} {figure}: intervals of ±{mean_width:.1} % on average cover anything");
    }
}

/// Short noisy measurements (C = 1, 2, 4, each repeated): the intervals of total tok/s, per-request
/// tok/s and TBT p50 hold the profile's truth at their nominal 95 % with fixed 1 s windows (63),
/// as far as a binomial bound on the number of windows can tell ([`min_covered`]); with adaptive
/// windows (36) that stop at the first check within ±5 %, at least 90 %: stopping when the
/// sub-windows happen to agree costs some coverage (methodology §12.3). The runs go side by side,
/// each against its own sim and noise seed: they mostly wait.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn intervals_cover_the_profiles_truth() {
    let dir = tempfile::tempdir().unwrap();
    let levels = ["--concurrency", "1,2,4"];
    let fixed = [levels.as_slice(), &["--duration", "1s", "--repeats", "7"]].concat();
    let adaptive =
        [levels.as_slice(), &["--precision", "5%", "--min-duration", "1s", "--duration", "3s"], &["--repeats", "4"]]
            .concat();
    let runs: Vec<_> = [(16, &fixed), (17, &fixed), (18, &fixed), (26, &adaptive), (27, &adaptive), (28, &adaptive)]
        .into_iter()
        .map(|(seed, args)| tokio::spawn(noisy_windows(dir.path().to_path_buf(), seed, args.clone())))
        .collect();
    let (mut fixed_windows, mut adaptive_windows) = (Vec::new(), Vec::new());
    for (i, run) in runs.into_iter().enumerate() {
        let windows = run.await.unwrap();
        if i < 3 { fixed_windows.extend(windows) } else { adaptive_windows.extend(windows) }
    }
    assert_eq!((fixed_windows.len(), adaptive_windows.len()), (63, 36));
    coverage("fixed 1 s windows", &fixed_windows, 0.95);
    coverage("adaptive windows (--precision 5%)", &adaptive_windows, 0.90);
    let early = adaptive_windows.iter().filter(|(_, rep)| rep["measured_s"].as_f64().unwrap() < 2.9).count();
    assert!(early > 0, "some adaptive windows stopped before the longest: the stopping rule was exercised");
}

/// The same 1 % target on a quiet and on a noisy server: the quiet cell stops at the shortest
/// window with its precision reached; the noisy one runs to the longest and says why.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn adaptive_windows_stop_early_when_quiet_and_run_long_when_noisy() {
    let dir = tempfile::tempdir().unwrap();
    let args = ["--concurrency", "4", "--duration", "6s", "--precision", "1%", "--min-duration", "1s"];
    let quiet = profile(dir.path(), "quiet", "");
    let r = run_on(&dir.path().join("q"), &quiet, &args).await;
    let cell = r.cell(1024, 4);
    let measured = cell["measured_s"].as_f64().unwrap();
    // before the 6 s longest, not always at the 1 s shortest: the trend stretch (§12.3) projects
    // the slope of ten 0.1 s sub-windows 2.5 s ahead, and on a loaded machine the sim's step timing
    // gives even a flat profile such a slope; seen 1–4.7 s
    assert!(measured < 5.0, "a quiet cell stops early: {measured} s\n{cell}");
    assert_eq!(cell["precision_met"], true, "{cell}");
    assert_eq!(r.record()["settings"]["precision_pct"], 1.0);
    assert_eq!(r.record()["settings"]["min_duration_s"], 1.0);

    let noisy = profile(dir.path(), "noisy", "[noise]\nstep_cv = 0.6\nseed = 3\n");
    let r = run_on(&dir.path().join("n"), &noisy, &args).await;
    let cell = r.cell(1024, 4);
    assert!(cell["measured_s"].as_f64().unwrap() >= 5.9, "a noisy cell runs to the longest window: {cell}");
    assert_eq!(cell["precision_met"], false, "{cell}");
    let warned = cell["warnings"].as_array().unwrap().iter().any(|w| {
        let w = w.as_str().unwrap();
        w.starts_with("not within ±1 %: the longest window (6 s) ended first") && w.contains("total tok/s ±")
    });
    assert!(warned, "{cell}");
    let phases = &cell["phases"];
    assert!(phases["window_s"].as_f64().unwrap() >= 5.9 && phases["ramp_s"].as_f64().unwrap() > 0.0, "{phases}");
}

/// A server whose steps slow by 40 % a minute: three interleaved repeats disagree and the cell says
/// so; the same profile without drift agrees.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn repeats_flag_a_drifting_server() {
    let dir = tempfile::tempdir().unwrap();
    let args = ["--concurrency", "1,4", "--duration", "2s", "--repeats", "3"];
    let drifting = profile(dir.path(), "drifting", "[noise]\nstep_cv = 0.05\ndrift_pct_per_min = 40\n");
    let r = run_on(&dir.path().join("d"), &drifting, &args).await;
    for cell in r.cells() {
        assert_eq!(cell["repeats"].as_array().unwrap().len(), 3, "{cell}");
        assert_eq!(cell["repeats_agree"], false, "{cell}");
        let totals: Vec<f64> =
            cell["repeats"].as_array().unwrap().iter().map(|x| x["total_tok_s"].as_f64().unwrap()).collect();
        assert!(totals[0] > totals[1] && totals[1] > totals[2], "the drift shows in order: {totals:?}");
        let warned = cell["warnings"]
            .as_array()
            .unwrap()
            .iter()
            .any(|w| w.as_str().unwrap().starts_with("the repeats disagree beyond their intervals"));
        assert!(warned, "{cell}");
        let mean = totals.iter().sum::<f64>() / 3.0;
        assert!((cell["total_tok_s"].as_f64().unwrap() - mean).abs() < 0.01, "the mean: {cell}");
    }
    let steady = profile(dir.path(), "steady", "[noise]\nstep_cv = 0.05\n");
    let r = run_on(&dir.path().join("s"), &steady, &args).await;
    for cell in r.cells() {
        assert_eq!(cell["repeats_agree"], true, "{cell}");
    }
    assert_eq!(r.record()["settings"]["repeats"], 3);
}

/// `--repeats 2` over two cells measures in passes: every request of pass 1, of both cells, is
/// sent before any request of pass 2 (back-to-back repeats would send 1K × 1's second pass before
/// 1K × 2's first), and the run's events say the same order.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn repeats_are_interleaved_passes() {
    let dir = tempfile::tempdir().unwrap();
    let quiet = profile(dir.path(), "quiet", "");
    let args = ["--concurrency", "1,2", "--duration", "1s", "--repeats", "2", "--save-requests"];
    let r = run_on(dir.path(), &quiet, &args).await;
    let lines = crate::common::request_lines(&dir.path().join("out"));
    // (repeat, concurrency) → the span of its requests' sends
    let mut spans: Vec<((u64, u64), f64, f64)> = Vec::new();
    for l in lines.iter().filter(|l| l["phase"] == "decode") {
        let key = (l["repeat"].as_u64().expect("repeat on every line"), l["concurrency"].as_u64().unwrap());
        let sent = l["sent_s"].as_f64().unwrap();
        match spans.iter_mut().find(|s| s.0 == key) {
            Some(s) => (s.1, s.2) = (s.1.min(sent), s.2.max(sent)),
            None => spans.push((key, sent, sent)),
        }
    }
    spans.sort_by(|a, b| a.1.total_cmp(&b.1));
    let order: Vec<(u64, u64)> = spans.iter().map(|s| s.0).collect();
    assert_eq!(order, [(1, 1), (1, 2), (2, 1), (2, 2)], "pass 1 of every cell, then pass 2: {spans:?}");
    for pair in spans.windows(2) {
        assert!(pair[0].2 < pair[1].1, "a measurement's requests all go before the next one's: {spans:?}");
    }
    // the events log the cells' starts in the same order
    let results: Vec<u64> = r.record()["events"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|e| e["text"].as_str()?.strip_prefix("cell 1K × ")?.strip_suffix(" started")?.parse().ok())
        .collect();
    assert_eq!(results, [1, 2, 1, 2], "{}", r.record()["events"]);
}

/// Bad precision flags are refused before anything starts, saying what to give.
#[test]
fn bad_precision_flags_say_what_to_give() {
    let cases: [(&[&str], &str); 7] = [
        (&["--precision", "tight"], "half-width of the 95 % interval in percent, e.g. 1%"),
        (&["--precision", "0%"], "between 0.1% and 50%"),
        (&["--precision", "80"], "between 0.1% and 50%"),
        (&["--min-duration", "5s"], "--precision"),
        (
            &["--precision", "1%", "--min-duration", "40s", "--duration", "30s"],
            "--min-duration 40s is longer than --duration 30s",
        ),
        (&["--precision", "1%", "--min-duration", "0s"], "--min-duration"),
        (&["--repeats", "0"], "--repeats"),
    ];
    for (args, says) in cases {
        let out = crate::common::bin().arg("run").args(args).arg("--dry-run").output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_ne!(out.status.code(), Some(0), "{args:?}: {stderr}");
        assert!(stderr.contains(says), "{args:?}: {stderr}");
    }
}

/// A finished run gets more repeats later (`--resume DIR --repeats 2`): each valid cell is measured
/// once more, its first measurement kept as repeat 1, and the settings say so.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_resume_adds_repeats() {
    let dir = tempfile::tempdir().unwrap();
    let quiet = profile(dir.path(), "quiet", "");
    let sim = sim(SimSpec { profile: &quiet, ..SimSpec::default() }).await;
    let url = sim.handle.url();
    let out = dir.path().join("out");
    let mut args = vec!["--url", url.as_str(), "--contexts", "1k", "--duration", "1s", "--max-tokens", "2048"];
    args.extend_from_slice(QUICK);
    args.extend_from_slice(&["--concurrency", "1,2"]);
    let first = run(&out, &args).await;
    assert_eq!(first.code, 0, "{}", first.stderr);
    assert!(first.cells().iter().all(|c| c.get("repeats").is_none()), "one measurement keeps no repeats");
    let resumed = run(&out, &["--resume", out.to_str().unwrap(), "--repeats", "2"]).await;
    sim.handle.shutdown().await;
    assert_eq!(resumed.code, 0, "{}\n{}", resumed.stdout, resumed.stderr);
    assert_eq!(resumed.record()["settings"]["repeats"], 2);
    for c in [1, 2] {
        let (before, after) = (first.cell(1024, c), resumed.cell(1024, c));
        let repeats = after["repeats"].as_array().unwrap();
        assert_eq!(repeats.len(), 2, "{after}");
        assert_eq!(repeats[0]["total_tok_s"], before["total_tok_s"], "the first measurement is repeat 1");
        assert_eq!(after["measured_s"].as_f64().unwrap().round(), 2.0, "two 1 s windows");
    }
    assert_eq!(resumed.cells().len(), 2, "no cell twice");
}

/// A profile whose step takes `steps[0]` ms at 1K of context and `steps[1]` at 8K, at any batch
/// size: the step time grows as a request's context does, as on the seed profile and every real
/// engine.
fn growing_profile(dir: &Path, name: &str, steps: [f64; 2]) -> String {
    let [a, b] = steps;
    let toml = format!(
        "name = \"{name}\"\nmodel = \"{name}\"\nmax_model_len = 8192\nkv_cache_tokens = 1048576\n\
         block_size = 16\nmax_num_seqs = 64\nmax_num_batched_tokens = 8192\n\
         [prefill]\ncontexts = [1024, 8192]\ntokens_per_s = [400000, 400000]\n\
         [decode]\nbatch = [1, 64]\ncontexts = [1024, 8192]\nstep_ms = [[{a}, {b}], [{a}, {b}]]\n\
         [overhead]\ncached_prefill_ms = 2\n"
    );
    let path = dir.join(format!("{name}.toml"));
    std::fs::write(&path, toml).unwrap();
    path.to_str().unwrap().to_string()
}

/// Issue 16: all streams start together when a cell does, so a short window sees an earlier,
/// shorter-context part of each request than the longest window; here each stream's step grows by
/// about 0.5 % a second. The adaptive window sees the trend and runs until it, projected to the
/// longest window's centre, is within the precision (4.8–5.8 s in the runs when this was written),
/// its figures do not differ (§12.5) from a fixed window as long as the longest, and its TBT and
/// per-request intervals hold that window's figures. Without the stretch the window stopped at
/// 3.25–3.75 s claiming ±0.4 % about a per-request tok/s 0.6 % off the longest window's: this
/// test failed.
/// The same settings on a flat profile: `adaptive_windows_stop_early_when_quiet_and_run_long_when_noisy`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn adaptive_windows_wait_out_a_trend_and_agree_with_the_longest_window() {
    let dir = tempfile::tempdir().unwrap();
    let growing = growing_profile(dir.path(), "growing", [10.0, 13.6]);
    let longest = ["--concurrency", "4", "--duration", "6s"];
    let adaptive = [longest.as_slice(), &["--precision", "1%", "--min-duration", "1s"]].concat();
    let fixed = run_on(&dir.path().join("f"), &growing, &longest).await.cell(1024, 4).clone();
    let r = run_on(&dir.path().join("a"), &growing, &adaptive).await;
    let cell = r.cell(1024, 4);
    let measured = cell["measured_s"].as_f64().unwrap();
    eprintln!("growing: adaptive window {measured} s, precision_met {}", cell["precision_met"]);
    assert!(measured >= 2.5, "a trending cell runs past the shortest window: {cell}");
    for figure in ["total_tok_s", "per_request_tok_s", "tbt_ms_p50"] {
        let (a, f) = (cell[figure].as_f64().unwrap(), fixed[figure].as_f64().unwrap());
        let (ia, i_f) = (interval(&cell["ci"], figure).unwrap(), interval(&fixed["ci"], figure).unwrap());
        let interval = |(lo, hi): (f64, f64)| Some(Interval { lo, hi });
        let differ = precision::differ(f, interval(i_f), a, interval(ia)).unwrap();
        eprintln!("{figure}: fixed {f} {i_f:?}, adaptive {a} {ia:?}");
        assert!(!differ, "{figure}: the adaptive window's {a} {ia:?} differs from the longest window's {f} {i_f:?}");
        // the quiet per-stream figures: a window blind to its position claims ±0.3 % about a
        // figure 0.5 % off the longest window's; the stretched interval reaches it
        if figure != "total_tok_s" {
            assert!(ia.0 <= f && f <= ia.1, "{figure}: {ia:?} does not hold the longest window's {f}");
        }
    }
}
