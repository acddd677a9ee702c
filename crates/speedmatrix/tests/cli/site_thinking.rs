//! A reasoning model's run on the results site, over HTTP against a real `speedmatrix serve`: the
//! run page, its Markdown and CSV show the wait for the first answer token and the thinking; the
//! comparison of two runs sets their TTFA side by side; a thinking figure that is not a measurement
//! is refused with a 400 that names it.

use reqwest::StatusCode;
use serde_json::{Value, json};
use sm_site::tokens;

use crate::site_common::site::{mark, start, unique};

/// The every-phase golden run: its 1K × 1 cell thought (TTFA p50 812 ms, p90 1,104 ms).
const THOUGHT: &str = include_str!("../../../../tests/data/golden/every-phase.run.json");

async fn suite(url: &str) {
    let site = start(url).await;
    let token = tokens::create(&site.db, &unique("thinking")).await.unwrap();
    // with TTFA intervals (order statistics, as a run of this version writes them)
    let thinking_cell = |v: &mut Value, p50: f64| {
        let cell = v["decode"].as_array_mut().unwrap().iter_mut().find(|c| c.get("ttfa_ms_p50").is_some()).unwrap();
        cell["ttfa_ms_p50"] = json!(p50);
        cell["ci"]["ttfa_ms_p50"] = json!({"lo": p50 * 0.98, "hi": p50 * 1.02});
    };
    let mut base: Value = serde_json::from_str(THOUGHT).unwrap();
    thinking_cell(&mut base, 812.25);
    let a = site.upload(&token, &base.to_string(), false).await;
    let (status, html) = site.get(&format!("/runs/{a}")).await;
    assert_eq!(status, StatusCode::OK, "{html}");
    for text in ["TTFA p50", "TTFA p90", "Thinking tokens", "No answer", "Answer tok/s", "812 ms", "1,104 ms"] {
        assert!(html.contains(text), "{text} is not on the run page");
    }
    let (_, md) = site.get(&format!("/runs/{a}/report.md")).await;
    assert!(md.contains("| TTFA p50 |") && md.contains("| 812 ms | 1,104 ms | 96 | 1 | 38.2 |"), "{md}");
    let (_, csv) = site.get(&format!("/runs/{a}/measurements.csv")).await;
    assert!(csv.lines().next().unwrap().contains("ttfa_ms_p90") && csv.contains("812.25"), "{csv}");

    // the same run with a slower answer: the comparison shows both waits
    let mut slower = base.clone();
    thinking_cell(&mut slower, 1624.5);
    slower["label"] = json!(unique("slower"));
    let b = site.upload(&token, &slower.to_string(), false).await;
    let (status, html) = site.get(&format!("/compare?ids={a},{b}")).await;
    assert_eq!(status, StatusCode::OK);
    let section = &html[html.find("id=\"decode-differences\"").unwrap()..];
    assert!(section.contains(">TTFA p50<") && section.contains("+100.0 %*"), "{section}");

    // a thinking figure that is not a measurement is refused, and nothing is stored
    let before = site.snapshot().await;
    for (field, value, why) in
        [("ttfa_ms_p90", json!(-5.0), "ttfa_ms_p90 is -5"), ("answer_tok_s", json!(-1.0), "answer_tok_s is -1")]
    {
        let mut v: Value = serde_json::from_str(THOUGHT).unwrap();
        let cell = v["decode"].as_array_mut().unwrap().iter_mut().find(|c| c.get("ttfa_ms_p50").is_some()).unwrap();
        cell[field] = value;
        let (status, answer) = site.post(&token, mark(&v.to_string(), &site.tag).into_bytes(), false).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{why}: {answer}");
        assert!(answer["error"].as_str().unwrap().contains(why), "{why}: {answer}");
    }
    assert_eq!(site.snapshot().await, before);
    site.db.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_thinking() {
    let dir = tempfile::tempdir().unwrap();
    suite(&format!("sqlite://{}", dir.path().join("site.db").display())).await;
}
