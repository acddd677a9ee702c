//! The load phases on the results site, over HTTP against a real `speedmatrix serve`: a run with
//! every phase, measured against the simulated engine, is taken and its page shows each phase's
//! section with text from the record escaped; a phase figure that is not a measurement is refused
//! with a 400 that names it, and nothing is stored.

use reqwest::StatusCode;
use serde_json::{Value, json};
use sm_site::tokens;

use crate::site_common::site::{mark, start, unique};

async fn suite(url: &str, rec: &Value) {
    let site = start(url).await;
    let token = tokens::create(&site.db, &unique("phases")).await.unwrap();
    // text a server or a user wrote reaches the page escaped, in every phase's section
    let mut hostile = rec.clone();
    hostile["phases"]["rate"]["levels"][0]["label"] = json!("<i>rate</i>");
    hostile["phases"]["burst"]["bursts"][0]["label"] = json!("<i>burst</i>");
    let id = site.upload(&token, &mark(&hostile.to_string(), &site.tag), false).await;
    let (status, html) = site.get(&format!("/runs/{id}")).await;
    assert_eq!(status, StatusCode::OK, "{html}");
    for heading in ["Arrivals at a rate", "Bursts", "A new user under load", "Multi-turn sessions"] {
        assert!(html.contains(heading), "{heading} missing");
    }
    assert!(!html.contains("<i>rate</i>") && html.contains("&lt;i&gt;rate&lt;/i&gt;"), "rate label escaped");
    assert!(!html.contains("<i>burst</i>") && html.contains("&lt;i&gt;burst&lt;/i&gt;"), "burst label escaped");
    assert!(!html.contains("id=\"sustained-decode\""), "a run of phases only has no matrix section");
    let (status, md) = site.get(&format!("/runs/{id}/report.md")).await;
    assert_eq!(status, StatusCode::OK);
    assert!(md.contains("Multi-turn sessions") && md.contains("Bursts"), "{md}");
    phase_csvs(&site, &id, &html).await;

    type Change = Box<dyn Fn(&mut Value)>;
    let cases: Vec<(Change, &str)> = vec![
        (Box::new(|v| v["phases"]["rate"]["levels"][0]["achieved_rps"] = json!(-1.0)), "achieved_rps is -1"),
        (Box::new(|v| v["phases"]["burst"]["bursts"][0]["total_tok_s"] = json!(-2.0)), "total_tok_s is -2"),
        (
            Box::new(|v| v["phases"]["mixed_prefill"]["levels"][0]["probes"][0]["longest_stall_ms"] = json!(-3.0)),
            "longest_stall_ms is -3",
        ),
        (Box::new(|v| v["phases"]["sessions"]["by_turn"][0]["cache_hit_pct"] = json!(150.0)), "cache_hit_pct is 150"),
    ];
    let before = site.snapshot().await;
    for (change, why) in cases {
        let mut v = rec.clone();
        change(&mut v);
        let (status, answer) = site.post(&token, mark(&v.to_string(), &site.tag).into_bytes(), false).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{why}: {answer}");
        assert!(answer["error"].as_str().unwrap().contains(why), "{why}: {answer}");
        assert_eq!(site.snapshot().await, before, "{why}: stored");
    }
    site.db.close().await;
}

/// A run of phases only offers each phase's CSV, as `speedmatrix report` writes them, and no
/// `measurements.csv` (it would be a header alone): the page links the four, each has its rows,
/// and the matrix CSV's address says where the rows are instead.
async fn phase_csvs(site: &crate::site_common::site::Site, id: &str, html: &str) {
    assert!(!html.contains(&format!("/runs/{id}/measurements.csv")), "no link to a header-only CSV");
    for (file, column) in [
        ("rate.csv", "rate"),
        ("burst.csv", "concurrency"),
        ("mixed_prefill.csv", "background"),
        ("sessions.csv", "turn"),
    ] {
        let path = format!("/runs/{id}/phases/{file}");
        assert!(html.contains(&path), "the page links {path}");
        let (status, text) = site.get(&path).await;
        assert_eq!(status, StatusCode::OK, "{path}: {text}");
        let mut lines = text.lines();
        let header = lines.next().unwrap_or_default();
        assert!(header.split(',').any(|c| c.contains(column)), "{file}: {header}");
        assert!(lines.count() >= 1, "{file} has rows: {text}");
    }
    let (status, page) = site.get(&format!("/runs/{id}/measurements.csv")).await;
    assert_eq!(status, StatusCode::NOT_FOUND, "{page}");
    assert!(page.contains("load phases only") && page.contains("sessions.csv"), "{page}");
    let (status, _) = site.get(&format!("/runs/{id}/phases/nope.csv")).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_and_postgres_show_each_phase_escaped_and_refuse_bad_phase_figures() {
    let rec = crate::run_phases::every_phase_run().await;
    let dir = tempfile::tempdir().unwrap();
    suite(&format!("sqlite://{}", dir.path().join("site.db").display()), &rec).await;
    if let Some((url, _one_suite)) = crate::site_common::postgres().await {
        suite(&url, &rec).await;
    }
}
