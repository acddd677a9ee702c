//! `run --resume` and the telemetry settings (methodology §14): the sampling interval and the GPU
//! source are the run's, like its other settings — taken from run.json when no flag is given, and
//! a resume that asks for others is refused with the differences listed.

use crate::common::{QUICK, SimSpec, num, run, sim};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_resume_samples_as_the_run_did_and_refuses_other_telemetry_settings() {
    let sim = sim(SimSpec::default()).await;
    let url = sim.handle.url();
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run");
    let mut args = vec!["--url", url.as_str(), "--contexts", "1k", "--concurrency", "1,2", "--duration", "1s"];
    args.extend_from_slice(&["--metrics-interval", "250ms", "--gpu-metrics", "off"]);
    args.extend_from_slice(QUICK);
    let r = run(&out, &args).await;
    assert_eq!(r.code, 0, "{}", r.stderr);
    let settings = &r.record()["settings"];
    assert_eq!((num(&settings["metrics_interval_s"]), &settings["gpu_metrics"]), (0.25, &"off".into()));
    // interrupted before its second cell
    let mut record = r.record().clone();
    record["status"] = "interrupted".into();
    record["decode"].as_array_mut().unwrap().retain(|c| c["concurrency"] == 1);
    std::fs::write(out.join("run.json"), serde_json::to_string_pretty(&record).unwrap()).unwrap();

    let resume = ["--resume", out.to_str().unwrap()];
    let other = ["--metrics-interval", "500ms", "--gpu-metrics", "nvml"];
    let refused = run(&out, &[&resume[..], &other[..]].concat()).await;
    assert_eq!(refused.code, 1, "{}", refused.stderr);
    for expected in ["metrics-interval: was 0.25 s, now 0.5 s", "GPU metrics (--gpu-metrics): was off, now nvml"] {
        assert!(refused.stderr.contains(expected), "{expected:?} missing:\n{}", refused.stderr);
    }

    let resumed = run(&out, &resume).await;
    sim.handle.shutdown().await;
    assert_eq!(resumed.code, 0, "{}", resumed.stderr);
    let cell = resumed.cell(1024, 2);
    assert_eq!(cell["status"], "valid", "{cell}");
    assert_eq!(num(&cell["server_metrics"]["interval_s"]), 0.25, "the run's interval, not the default");
    assert!(cell.get("gpu").is_none(), "the run's source (off), not the default's NVML: {cell}");
    assert_eq!(resumed.record()["settings"]["gpu_metrics"], "off");
}
