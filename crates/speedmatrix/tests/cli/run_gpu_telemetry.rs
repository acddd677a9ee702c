//! GPU telemetry (methodology §14.3) against the simulated engine's `[gpu]`: its DCGM-format
//! endpoint draws `idle_w + per_sequence_w × running`, held at `tdp_w`, and integrates that into
//! its energy counter. A cell holds its C streams through the window (no request ends in it), so
//! its power is the profile's exactly, its energy that power over the window (to the scrapes'
//! timing: the client stamps each read at its round trip's midpoint), and the throttle verdict is
//! "power" exactly when the batch's power passes the cap.

use crate::common::{QUICK, SimSpec, num, run, sim};

const IDLE_W: f64 = 100.0;
const PER_SEQUENCE_W: f64 = 60.0;
const TDP_W: f64 = 250.0;

fn profile(dir: &std::path::Path) -> String {
    let path = dir.join("gpu.toml");
    let text = format!(
        "{}\n[gpu]\nname = \"Sim GPU\"\nidle_w = {IDLE_W}\nper_sequence_w = {PER_SEQUENCE_W}\ntdp_w = {TDP_W}\n",
        include_str!("../../../sm-sim/profiles/tiny.toml")
    );
    std::fs::write(&path, text).unwrap();
    path.to_str().unwrap().to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cells_report_power_energy_and_throttling_from_the_simulated_gpu() {
    let dir = tempfile::tempdir().unwrap();
    let profile = profile(dir.path());
    let sim = sim(SimSpec { profile: &profile, ..SimSpec::default() }).await;
    let url = sim.handle.url();
    let dcgm = format!("{url}/dcgm/metrics");
    // 8K-token answers outlast the 3 s window: every stream runs from readiness to the cancel
    let mut args = vec!["--url", url.clone().leak(), "--contexts", "1k", "--concurrency", "1,4", "--duration", "3s"];
    args.extend_from_slice(&["--max-tokens", "8000", "--gpu-metrics", dcgm.clone().leak(), "--cost-per-hour", "3.6"]);
    args.extend_from_slice(QUICK);
    let out = dir.path().join("out");
    let r = run(&out, &args).await;
    sim.handle.shutdown().await;
    assert_eq!(r.code, 0, "stdout:\n{}\nstderr:\n{}", r.stdout, r.stderr);

    for (c, want_w, throttle) in [(1, IDLE_W + PER_SEQUENCE_W, "none"), (4, TDP_W, "power")] {
        let cell = r.cell(1024, c);
        assert_eq!(cell["status"], "valid", "{cell}");
        let g = &cell["gpu"];
        assert_eq!(g["source"], "dcgm", "{g}");
        assert!(num(&g["samples"]) >= 3.0, "start, end and the interval's reads: {g}");
        // the power gauge at a constant batch is the profile's, to the record's 3 decimals
        assert!((num(&g["power_w"]) - want_w).abs() < 1e-3, "C={c}: {g}");
        assert_eq!(g["throttle"], throttle, "C={c}: {g}");
        assert_eq!(g["gpus"][0]["name"], "Sim GPU");
        assert_eq!(g["gpus"][0]["sm_clock_mhz"], 1980.0);
        assert_eq!(g["gpus"][0]["temp_c_max"], 40.0 + c as f64);
        // energy from the counter: the profile's power over the window's length
        assert_eq!(g["energy_from"], "counter", "{g}");
        let window_s = num(&cell["phases"]["window_s"]);
        let energy = num(&g["energy_j"]);
        assert!((energy / (want_w * window_s) - 1.0).abs() < 0.01, "C={c}: {energy} J over {window_s} s at {want_w} W");
        let tokens = num(&cell["output_tokens"]);
        let jpt = num(&g["joules_per_token"]);
        assert!((jpt - energy / tokens).abs() < 2e-6, "J/token = energy ÷ output tokens: {g}");
        assert!((num(&g["wh_per_million_tokens"]) - jpt * 1e6 / 3600.0).abs() < 2e-3, "{g}");
        // the price per token stays the cell's own figure, not repeated under gpu
        assert!(cell["usd_per_million_tokens"].is_number() && g.get("usd_per_million_tokens").is_none());
    }

    // the page, the Markdown and the CSV show it with the record's figures
    let cell = r.cell(1024, 4);
    let line = format!("{:.0} W · ", num(&cell["gpu"]["power_w"]));
    let html = std::fs::read_to_string(out.join("report.html")).unwrap();
    assert!(html.contains(&line) && html.contains("J/token"), "hover line");
    let md = std::fs::read_to_string(out.join("report.md")).unwrap();
    assert!(md.contains("GPU power and energy") && md.contains("power throttled"), "{md}");
    let csv = std::fs::read_to_string(out.join("measurements.csv")).unwrap();
    let header = csv.lines().next().unwrap();
    assert!(header.contains("gpu_power_w") && header.contains("gpu_joules_per_token"), "{header}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_a_gpu_source_the_fields_are_absent_and_a_bad_url_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let profile = profile(dir.path());
    let sim = sim(SimSpec { profile: &profile, ..SimSpec::default() }).await;
    let url = sim.handle.url();
    let mut args = vec!["--url", url.clone().leak(), "--contexts", "1k", "--concurrency", "1", "--duration", "1s"];
    args.extend_from_slice(QUICK);
    // `off`, not the default: on a machine with NVIDIA's driver the default reads its GPUs
    let off = [args.as_slice(), &["--gpu-metrics", "off"]].concat();
    let r = run(&dir.path().join("out"), &off).await;
    assert_eq!(r.code, 0, "stdout:\n{}\nstderr:\n{}", r.stdout, r.stderr);
    assert!(r.cell(1024, 1).get("gpu").is_none(), "no source, no figures (never zeros)");

    args.extend_from_slice(&["--gpu-metrics", "gpu-host:9400/metrics"]);
    let bad = run(&dir.path().join("bad"), &args).await;
    sim.handle.shutdown().await;
    assert_ne!(bad.code, 0);
    assert!(bad.stderr.contains("--gpu-metrics") && bad.stderr.contains("not a usable URL"), "{}", bad.stderr);
    assert!(!dir.path().join("bad").join("run.json").exists());
}
