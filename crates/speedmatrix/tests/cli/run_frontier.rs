//! The frontier (issue 34 §1, methodology §11.7) against the simulated engine: the server's GPU
//! count from `--gpu-count` or the launch command's parallelism (never this host's), and per
//! valid cell one point of tok/s per user at the SLO's percentile against tok/s per GPU.

use serde_json::{Value, json};

use crate::common::{SimSpec, num as f, run, sim};

/// A figure as the report prints it: one decimal, thousands separated.
fn fixed1(v: f64) -> String {
    let s = format!("{v:.1}");
    let (int, frac) = s.split_once('.').unwrap();
    let digits: Vec<char> = int.chars().collect();
    let mut out = String::new();
    for (i, ch) in digits.iter().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(*ch);
    }
    format!("{out}.{frac}")
}

fn args<'a>(url: &'a str, extra: &[&'a str]) -> Vec<&'a str> {
    let mut a = vec!["--url", url, "--contexts", "1k", "--concurrency", "1,4", "--duration", "2s"];
    a.extend_from_slice(&["--ready-stable", "300ms", "--warmup", "0s", "--no-prefill-at-max", "--max-tokens", "64"]);
    a.extend_from_slice(extra);
    a
}

/// The tok_s_p10 bound's value of a cell: what one user got, as the SLO judges users.
fn p10(cell: &Value) -> f64 {
    let bounds = cell["slo_bounds"].as_array().unwrap();
    f(&bounds.iter().find(|b| b["bound"] == "tok_s_p10").unwrap()["value"])
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn per_gpu_figures_divide_by_the_servers_gpus() {
    let dir = tempfile::tempdir().unwrap();
    let sim = sim(SimSpec::default()).await;
    let url = sim.handle.url();

    // --gpu-count: the report's rows are the cells, per GPU, priced
    let out = dir.path().join("flag");
    let r = run(&out, &args(&url, &["--gpu-count", "2", "--cost-per-hour", "4"])).await;
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(r.record()["server_gpus"], json!({"count": 2, "from": "gpu_count_flag"}));
    assert_eq!(r.record()["hardware"]["gpus"], json!([]), "--gpu-count alone names no hardware");
    let md = std::fs::read_to_string(out.join("report.md")).unwrap();
    assert!(md.contains("| Context | Users | tok/s per user (p10) | tok/s per GPU | $ per M tokens | SLO |"), "{md}");
    assert!(md.contains("the server's 2 GPUs, from --gpu-count"), "{md}");
    let cells = r.cells();
    assert_eq!(cells.len(), 2);
    for c in &cells {
        assert_eq!(c["status"], "valid", "{c}");
        let row =
            format!("| 1K | {} | {} | {} |", c["concurrency"], fixed1(p10(c)), fixed1(f(&c["total_tok_s"]) / 2.0));
        assert!(md.contains(&row), "{row} in\n{md}");
    }
    let html = std::fs::read_to_string(out.join("report.html")).unwrap();
    assert!(html.contains("id=\"frontier\"") && html.contains("aria-label=\"Throughput against interactivity\""));

    // the launch command's tensor × data parallel sizes
    let out = dir.path().join("launch");
    let r = run(&out, &args(&url, &["--launch-command", "vllm serve M -tp 2 --data-parallel-size 2"])).await;
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(r.record()["server_gpus"], json!({"count": 4, "from": "launch_command"}));

    // the simulated engine runs on no GPU: per server, and the page says how to give the count
    let out = dir.path().join("none");
    let r = run(&out, &args(&url, &[])).await;
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(r.record().get("server_gpus").is_none(), "{}", r.record());
    let md = std::fs::read_to_string(out.join("report.md")).unwrap();
    assert!(md.contains("tok/s per server") && md.contains("pass --gpu-count N"), "{md}");
    sim.handle.shutdown().await;
}
