//! A run sent with tools on the results site, over HTTP against a real `speedmatrix serve`: the
//! run page shows the wait for the first tool call; the comparison of two such runs sets their
//! TTFTC side by side, marked by its intervals, and a comparison of runs without tools has no
//! TTFTC column.

use reqwest::StatusCode;
use serde_json::{Value, json};
use sm_site::tokens;

use crate::site_common::site::{start, unique};

/// The every-phase golden run (one of its cells was sent with tools), given tool-call figures and
/// their intervals in its first valid cell below.
const RUN: &str = include_str!("../../../../tests/data/golden/every-phase.run.json");

/// The run with its first valid cell's TTFTC at `p50` (p90 half as long again) and their
/// intervals (order statistics, as a run of this version writes them).
fn with_tools(p50: f64) -> Value {
    let mut v: Value = serde_json::from_str(RUN).unwrap();
    let cell = v["decode"].as_array_mut().unwrap().iter_mut().find(|c| c["status"] == "valid").unwrap();
    let p90 = p50 * 1.5;
    for (key, value) in [("ttftc_ms_p50", p50), ("ttftc_ms_p90", p90), ("ttftc_ms_p99", p90 * 1.2)] {
        cell[key] = json!(value);
    }
    (cell["tool_call_tokens_mean"], cell["tool_args_valid"], cell["no_tool_call"]) =
        (json!(12.5), json!(0.875), json!(0));
    cell["requests"] = json!(200);
    cell["ci"]["ttftc_ms_p50"] = json!({"lo": p50 * 0.98, "hi": p50 * 1.02});
    cell["ci"]["ttftc_ms_p90"] = json!({"lo": p90 * 0.98, "hi": p90 * 1.02});
    v["label"] = json!(unique("tools"));
    v
}

async fn suite(url: &str) {
    let site = start(url).await;
    let token = tokens::create(&site.db, &unique("tools")).await.unwrap();
    let a = site.upload(&token, &with_tools(640.25).to_string(), false).await;
    let (status, html) = site.get(&format!("/runs/{a}")).await;
    assert_eq!(status, StatusCode::OK, "{html}");
    for text in ["TTFTC p50", "TTFTC p90", "640 ms", "960 ms"] {
        assert!(html.contains(text), "{text} is not on the run page");
    }

    // the same run with a call twice as slow: the comparison shows both waits, the change marked
    let b = site.upload(&token, &with_tools(1280.5).to_string(), false).await;
    let (status, html) = site.get(&format!("/compare?ids={a},{b}")).await;
    assert_eq!(status, StatusCode::OK);
    let section = &html[html.find("id=\"decode-differences\"").unwrap()..];
    assert!(section.contains(">TTFTC p50<") && section.contains(">TTFTC p90<"), "{section}");
    assert!(section.contains("+100.0 %*"), "{section}");

    // two runs without tools: no TTFTC column
    let mut plain: Value = serde_json::from_str(RUN).unwrap();
    for cell in plain["decode"].as_array_mut().unwrap() {
        let cell = cell.as_object_mut().unwrap();
        cell.retain(|k, _| {
            !k.starts_with("ttftc_")
                && !["tool_call_tokens_mean", "tool_args_valid", "no_tool_call"].contains(&k.as_str())
        });
    }
    plain["label"] = json!(unique("plain"));
    let c = site.upload(&token, &plain.to_string(), false).await;
    plain["label"] = json!(unique("plain"));
    let d = site.upload(&token, &plain.to_string(), false).await;
    let (status, html) = site.get(&format!("/compare?ids={c},{d}")).await;
    assert_eq!(status, StatusCode::OK);
    let section = &html[html.find("id=\"decode-differences\"").unwrap()..];
    assert!(!section.contains(">TTFTC p50<"), "{section}");
    site.db.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_tools() {
    let dir = tempfile::tempdir().unwrap();
    suite(&format!("sqlite://{}", dir.path().join("site.db").display())).await;
}
