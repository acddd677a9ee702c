//! `[noise]`: random step times with the profile's mean, and drift, read from the engine's own release
//! times in `--trace` (so a loaded machine's client-side delays add nothing).

use std::path::PathBuf;

use crate::common::*;
use serde_json::{Value, json};
use sm_sim::{Noise, Profile};

const STEP_MS: f64 = 10.0;

/// Runs one request of `tokens` tokens alone on a fresh sim with `noise` on a flat 10 ms step, and
/// returns its trace record.
async fn one_request(noise: Noise, tokens: u32) -> Value {
    let dir = tempfile::tempdir().unwrap();
    let path: PathBuf = dir.path().join("trace.jsonl");
    let mut profile: Profile = flat_profile(STEP_MS, 400_000, 131_072, 4);
    profile.noise = noise;
    let p = path.clone();
    let sim = sim_with(move |o| {
        o.profile = profile;
        o.trace = Some(p);
    })
    .await;
    let body = json!({"prompt": words(50, "n"), "max_tokens": tokens, "ignore_eos": true, "stream": true});
    let s = post_stream(&sim.url(), "/v1/completions", body, &[]).await;
    assert_eq!(s.token_events().len(), tokens as usize);
    sim.shutdown().await;
    let text = std::fs::read_to_string(&path).unwrap();
    let mut recs: Vec<Value> = text.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert_eq!(recs.len(), 1, "{text}");
    recs.remove(0)
}

/// (step start, duration in ms) of every decode step: the gaps between consecutive emissions (the
/// first emission ends the prefill step, which has no decode work).
fn steps(rec: &Value) -> Vec<(f64, f64)> {
    let ts: Vec<f64> = rec["emissions"].as_array().unwrap().iter().map(|e| e[0].as_f64().unwrap()).collect();
    ts.windows(2).map(|w| (w[0], (w[1] - w[0]) * 1000.0)).collect()
}

fn sorted(mut xs: Vec<f64>) -> Vec<f64> {
    xs.sort_by(f64::total_cmp);
    xs
}

#[tokio::test]
async fn noisy_steps_keep_the_profile_mean_and_realise_the_cv() {
    const CV: f64 = 0.3;
    const N: u32 = 600;
    let noise = Noise::default().with_step_cv(CV).unwrap();
    let rec = one_request(noise, N).await;
    assert_eq!(rec["noise"], json!({"step_cv": CV, "drift_pct_per_min": 0.0, "seed": noise.seed}), "{rec}");
    let steps = steps(&rec);
    let n = steps.len() as f64;
    // Steps end on absolute deadlines, so the mean gap is the mean drawn step up to the lateness of
    // the last release (≪ 1 ms over 6 s). Its standard error is CV·step/√n (1.2 %); 4 of them.
    let mean = steps.iter().map(|s| s.1).sum::<f64>() / n;
    let tol = 4.0 * CV * STEP_MS / n.sqrt();
    assert!((mean - STEP_MS).abs() < tol, "mean step {mean:.3} ms, profile {STEP_MS} ± {tol:.3}");
    // The spread, robustly (a release delayed by a busy machine moves two gaps): ln(step) is normal
    // with σ² = ln(1 + CV²), and σ = IQR / 1.349. Its standard error is about 1.17σ/√n (4.8 %).
    let logs = sorted(steps.iter().map(|s| s.1.ln()).collect());
    let iqr = logs[logs.len() * 3 / 4] - logs[logs.len() / 4];
    let sigma = iqr / 1.349;
    let want = (1.0 + CV * CV).ln().sqrt();
    assert!((sigma / want - 1.0).abs() < 0.2, "σ of ln(step) {sigma:.3}, want {want:.3}");
    // and a quiet engine is quiet: its spread is the release jitter only
    let quiet = steps_of(one_request(Noise::default(), 100).await);
    let quiet_logs = sorted(quiet.iter().map(|s| s.ln()).collect());
    let quiet_iqr = quiet_logs[quiet_logs.len() * 3 / 4] - quiet_logs[quiet_logs.len() / 4];
    assert!(quiet_iqr < 0.25 * iqr, "without noise the IQR of ln(step) is {quiet_iqr:.4}, with it {iqr:.4}");
}

fn steps_of(rec: Value) -> Vec<f64> {
    assert!(rec.get("noise").is_none(), "a quiet profile records no noise: {rec}");
    steps(&rec).into_iter().map(|s| s.1).collect()
}

#[tokio::test]
async fn drift_slows_the_steps_as_configured() {
    // +600 %/min: +10 % per second since the sim started, the truth on the trace's own clock
    let noise = Noise::default().with_drift(600.0).unwrap();
    let rec = one_request(noise, 250).await;
    assert_eq!(rec["noise"]["drift_pct_per_min"], 600.0);
    let steps = steps(&rec);
    // each step lasts the profile's step times the drift at its start
    let ratios = sorted(steps.iter().map(|(t, ms)| ms / (STEP_MS * noise.drift_factor(*t))).collect());
    let median = ratios[ratios.len() / 2];
    assert!((median - 1.0).abs() < 0.02, "step / (profile × drift) has median {median:.4}");
    let (first, last) = (steps[0], steps[steps.len() - 1]);
    assert!(last.0 - first.0 > 2.0, "the request spans {:.2} s", last.0 - first.0);
    let early = sorted(steps[..20].iter().map(|s| s.1).collect())[10];
    let late = sorted(steps[steps.len() - 20..].iter().map(|s| s.1).collect())[10];
    let want = noise.drift_factor(last.0) / noise.drift_factor(first.0);
    assert!((late / early / want - 1.0).abs() < 0.05, "late/early steps {:.3}, want {want:.3}", late / early);
}

/// The median, over steps, of |ln(a's step) − ln(b's step)|: robust to the few releases a busy
/// machine delays.
fn median_log_gap(a: &[(f64, f64)], b: &[(f64, f64)]) -> f64 {
    let n = a.len().min(b.len());
    sorted((0..n).map(|i| (a[i].1.ln() - b[i].1.ln()).abs()).collect())[n / 2]
}

#[tokio::test]
async fn the_same_seed_replays_the_same_steps() {
    let noise = Noise { seed: 11, ..Noise::default().with_step_cv(0.5).unwrap() };
    let (a, b, c) =
        tokio::join!(one_request(noise, 150), one_request(noise, 150), one_request(Noise { seed: 12, ..noise }, 150));
    let (a, b, c) = (steps(&a), steps(&b), steps(&c));
    // the drawn factors are identical; only release jitter (≪ the 50 % spread) tells the runs apart.
    // Independent draws differ by |N(0, 2σ²)|, whose median is 0.67 × √2 × 0.47 ≈ 0.45.
    let same = median_log_gap(&a, &b);
    let other = median_log_gap(&a, &c);
    assert!(same < 0.05, "same seed: steps differ by {same:.3} in ln");
    assert!(other > 0.2, "another seed: steps differ by only {other:.3} in ln");
}
