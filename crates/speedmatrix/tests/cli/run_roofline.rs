//! The memory-bandwidth roofline (methodology §14.4) on a run of the simulated engine: each
//! valid cell's bound follows the formula from the config.json and the GPUs named, its fraction
//! is the measured tok/s over it, and a model described far larger than the served one flags
//! every cell.

use crate::common::{QUICK, SimSpec, bin, run, sim};

const LLAMA: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../tests/data/config-llama-3.1-8b.json");

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_cell_gets_the_bound_of_its_shape_and_the_fraction_measured() {
    let sim = sim(SimSpec::default()).await;
    let url = sim.handle.url();
    let dir = tempfile::tempdir().unwrap();
    let gpu = ["--gpu", "NVIDIA H200", "--gpu-count", "2"];
    let matrix = ["--contexts", "1k,4k", "--concurrency", "1,4", "--duration", "1s"];
    let mut args = vec!["--url", url.as_str(), "--model-config", LLAMA];
    args.extend_from_slice(&gpu);
    args.extend_from_slice(&matrix);
    args.extend_from_slice(QUICK);
    let r = run(&dir.path().join("cfg"), &args).await;
    assert_eq!(r.code, 0, "stderr:\n{}", r.stderr);
    let shape = &r.record()["settings"]["model_shape"];
    assert_eq!(shape["source"], "config_json");
    assert_eq!(shape["config_file"], "config-llama-3.1-8b.json");
    // Llama 3.1 8B by hand: 32 layers of attention 4096·128·80 and MLP 3·4096·14336, plus the
    // output head; bf16; K and V of 8 heads of 128 in 32 layers.
    let active = 32.0 * (4096.0 * 128.0 * 80.0 + 3.0 * 4096.0 * 14336.0) + 128256.0 * 4096.0;
    let kv = 2.0 * 32.0 * 8.0 * 128.0 * 2.0;
    let bandwidth = 2.0 * 4800e9;
    for ctx in [1024u64, 4096] {
        for c in [1u64, 4] {
            let cell = r.cell(ctx, c);
            assert_eq!(cell["status"], "valid", "{cell}");
            let bound = cell["roofline_tok_s"].as_f64().expect("a bound");
            let expect = c as f64 * bandwidth / (active * 2.0 + c as f64 * ctx as f64 * kv);
            assert!((bound / expect - 1.0).abs() < 1e-9, "{ctx}×{c}: {bound} vs {expect}");
            let measured = cell["total_tok_s"].as_f64().unwrap();
            let fraction = cell["roofline_fraction"].as_f64().unwrap();
            assert!((fraction - measured / bound).abs() < 1e-12, "{ctx}×{c}: {fraction}");
        }
    }
    // The page's hover, the Markdown and the CSV say it, with the fraction of the record.
    let cfg = dir.path().join("cfg");
    let cell = r.cell(4096, 4);
    let pct = (cell["roofline_fraction"].as_f64().unwrap() * 100.0).round();
    let said = format!("{pct:.0} % of the 2 × H200's memory-bandwidth roofline");
    let md = std::fs::read_to_string(cfg.join("report.md")).unwrap();
    assert!(md.contains("## Memory-bandwidth roofline") && md.contains(&format!("4K × 4: {said}")), "{md}");
    let html = std::fs::read_to_string(cfg.join("report.html")).unwrap();
    assert!(html.contains(&said.replace('\'', "&#39;")) || html.contains(&said), "page says {said}");
    let csv = std::fs::read_to_string(cfg.join("measurements.csv")).unwrap();
    let header = csv.lines().next().unwrap();
    assert!(header.contains("roofline_tok_s") && header.contains("roofline_fraction"), "{header}");

    // An interrupted run (its last cell not measured) resumed without the flags measures that
    // cell with the shape the run was given.
    let path = cfg.join("run.json");
    let mut rec: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    rec["status"] = "interrupted".into();
    rec["decode"].as_array_mut().unwrap().retain(|c| !(c["context"] == 4096 && c["concurrency"] == 4));
    std::fs::write(&path, serde_json::to_string(&rec).unwrap()).unwrap();
    let mut args = vec!["--url", url.as_str(), "--resume", cfg.to_str().unwrap()];
    args.extend_from_slice(&gpu);
    args.extend_from_slice(&matrix);
    args.extend_from_slice(QUICK);
    let resumed = run(&cfg, &args).await;
    assert_eq!(resumed.code, 0, "stderr:\n{}", resumed.stderr);
    assert_eq!(resumed.record()["settings"]["model_shape"]["source"], "config_json", "shape kept");
    let expect = 4.0 * bandwidth / (active * 2.0 + 4.0 * 4096.0 * kv);
    let bound = resumed.cell(4096, 4)["roofline_tok_s"].as_f64().expect("a bound on the resumed cell");
    assert!((bound / expect - 1.0).abs() < 1e-9, "{bound} vs {expect}");

    // A 100-trillion-parameter description cannot make the sim's tok/s on two H200s.
    let mut args = vec!["--url", url.as_str(), "--active-params", "100T", "--bytes-per-weight", "2"];
    args.extend_from_slice(&["--kv-bytes-per-token", "0"]);
    args.extend_from_slice(&gpu);
    args.extend_from_slice(&["--contexts", "1k", "--concurrency", "1", "--duration", "1s"]);
    args.extend_from_slice(QUICK);
    let r = run(&dir.path().join("huge"), &args).await;
    assert_eq!(r.code, 0, "stderr:\n{}", r.stderr);
    assert_eq!(r.record()["settings"]["model_shape"]["source"], "flags");
    let cell = r.cell(1024, 1);
    assert!((cell["roofline_tok_s"].as_f64().unwrap() - 9.6e12 / 2e14).abs() < 1e-12, "{cell}");
    assert!(cell["roofline_fraction"].as_f64().unwrap() > 1.05, "{cell}");
    let warnings = cell["warnings"].to_string();
    assert!(warnings.contains("above the memory-bandwidth roofline"), "{warnings}");
    assert!(warnings.contains("model description"), "one token per chunk: not speculative decoding: {warnings}");
    sim.handle.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wrong_model_description_is_refused_before_anything_is_sent() {
    let sim = sim(SimSpec::default()).await;
    let url = sim.handle.url();
    let cases: &[(&[&str], &str)] = &[
        (&["--model-config", "/nonexistent/config.json"], "cannot read --model-config"),
        (&["--active-params", "lots", "--bytes-per-weight", "2", "--kv-bytes-per-token", "1"], "write e.g. 8B"),
        (
            &["--active-params", "8B", "--bytes-per-weight", "0", "--kv-bytes-per-token", "1"],
            "positive number of bytes",
        ),
        (&["--active-params", "8B"], "--bytes-per-weight"),
    ];
    for (flags, expect) in cases {
        let dir = tempfile::tempdir().unwrap();
        let mut args = vec!["--url", url.as_str(), "--contexts", "1k"];
        args.extend_from_slice(flags);
        let r = run(dir.path(), &args).await;
        assert_eq!(r.code, 1, "{flags:?}: {}", r.stderr);
        assert!(r.stderr.contains(expect), "{flags:?}: {}", r.stderr);
        assert!(std::fs::read_dir(dir.path()).unwrap().next().is_none(), "{flags:?} wrote a file");
    }
    sim.handle.shutdown().await;
}

/// A run recorded without a model description gets its roofline in the reports `report
/// --model-config` writes: each valid cell's bound and fraction as the formula gives them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn report_adds_the_roofline_to_a_run_recorded_without_a_model() {
    let sim = sim(SimSpec::default()).await;
    let url = sim.handle.url();
    let dir = tempfile::tempdir().unwrap();
    let mut args = vec!["--url", url.as_str(), "--gpu", "NVIDIA H200", "--gpu-count", "2"];
    args.extend_from_slice(&["--contexts", "4k", "--concurrency", "4", "--duration", "1s"]);
    args.extend_from_slice(QUICK);
    let out = dir.path().join("run");
    let r = run(&out, &args).await;
    sim.handle.shutdown().await;
    assert_eq!(r.code, 0, "stderr:\n{}", r.stderr);
    assert!(r.cell(4096, 4).get("roofline_tok_s").is_none(), "no model, no roofline");

    let md = dir.path().join("report.md");
    let report = bin().arg("report").arg(&out).arg("--model-config").arg(LLAMA).arg("--md").arg(&md).output().unwrap();
    assert!(report.status.success(), "{}", String::from_utf8_lossy(&report.stderr));
    let active = 32.0 * (4096.0 * 128.0 * 80.0 + 3.0 * 4096.0 * 14336.0) + 128256.0 * 4096.0;
    let kv = 2.0 * 32.0 * 8.0 * 128.0 * 2.0;
    let bound = 4.0 * 2.0 * 4800e9 / (active * 2.0 + 4.0 * 4096.0 * kv);
    let pct = (r.cell(4096, 4)["total_tok_s"].as_f64().unwrap() / bound * 100.0).round();
    let md = std::fs::read_to_string(&md).unwrap();
    let said = format!("4K × 4: {pct:.0} % of the 2 × H200's memory-bandwidth roofline");
    assert!(md.contains("## Memory-bandwidth roofline") && md.contains(&said), "{said} missing:\n{md}");
    let unchanged: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("run.json")).unwrap()).unwrap();
    assert!(unchanged["settings"].get("model_shape").is_none(), "run.json is not changed");

    // a run that names no GPU: refused, saying what is missing
    let mut plain = r.record().clone();
    plain["hardware"]["gpus"] = serde_json::json!([]);
    plain["hardware"]["gpu_count"] = 0.into();
    let bare = dir.path().join("bare.json");
    std::fs::write(&bare, plain.to_string()).unwrap();
    let refused = bin()
        .arg("report")
        .arg(&bare)
        .arg("--model-config")
        .arg(LLAMA)
        .arg("--md")
        .arg(dir.path().join("x.md"))
        .output()
        .unwrap();
    assert_eq!(refused.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&refused.stderr).contains("no roofline: the record names no GPU"));
}
