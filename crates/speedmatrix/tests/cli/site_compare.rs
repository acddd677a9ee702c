//! Comparisons on the results site and of site runs, over HTTP against a real `speedmatrix
//! serve`: the compare page marks each figure's difference as `speedmatrix compare` does (from the
//! same data), cell labels escaped; the command reads site runs by address and by id with `--site`
//! and reaches the same verdict as on the files; runs whose 1.2 fields are not numbers, intervals
//! or bounded counts are refused with a 400 that names the field, and nothing is stored.

use reqwest::StatusCode;
use serde_json::{Value, json};
use sm_site::tokens;

use crate::site_common::site::{Site, mark, start, unique};

const SAMPLE: &str = include_str!("../../../../tests/data/run-sample.json");
const FIGURES: [&str; 6] =
    ["total_tok_s", "per_request_tok_s", "ttft_ms_p50", "ttft_ms_p90", "tbt_ms_p50", "tbt_ms_p99"];

/// The sample with every valid cell's figures given ±1 % intervals, scaled by `speed` (tok/s
/// divided by it, TBT p50 multiplied), one cell label markup.
fn run(speed: f64) -> Value {
    let mut v: Value = serde_json::from_str(SAMPLE).unwrap();
    for cell in v["decode"].as_array_mut().unwrap().iter_mut().filter(|c| c["status"] == "valid") {
        for (f, k) in [("total_tok_s", 1.0 / speed), ("per_request_tok_s", 1.0 / speed), ("tbt_ms_p50", speed)] {
            if let Some(x) = cell[f].as_f64() {
                cell[f] = json!(x * k);
            }
        }
        let mut ci = serde_json::Map::new();
        for f in FIGURES {
            if let Some(x) = cell[f].as_f64() {
                ci.insert(f.into(), json!({ "lo": x * 0.99, "hi": x * 1.01 }));
            }
        }
        cell["ci"] = Value::Object(ci);
    }
    v["decode"][0]["label"] = json!("<b>8K</b>");
    v
}

async fn compare(args: Vec<String>) -> (i32, String, String) {
    tokio::task::spawn_blocking(move || {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        crate::compare_cli::compare(&args)
    })
    .await
    .unwrap()
}

async fn suite(url: &str) {
    let site = start(url).await;
    let who = unique("compare");
    let token = tokens::create(&site.db, &who).await.unwrap();
    let (a, b) = (run(1.0), run(1.05));
    let ida = site.upload(&token, &a.to_string(), false).await;
    let idb = site.upload(&token, &b.to_string(), false).await;
    let old = site.upload(&token, SAMPLE, false).await;
    page(&site, &ida, &idb, &old).await;
    command_line(&site, [&a, &b], &ida, &idb).await;
    refused(&site, &token).await;
    site.db.close().await;
}

/// The page's marks: significant differences bold with `*`, noise plain, no interval `?`.
async fn page(site: &Site, ida: &str, idb: &str, old: &str) {
    let (status, html) = site.get(&format!("/compare?ids={ida},{idb}")).await;
    assert_eq!(status, StatusCode::OK, "{html}");
    assert!(html.contains("Differences from A, with their significance"), "{html}");
    // total tok/s 4.8 % lower beyond ±1 % intervals; TBT p99 unchanged
    assert!(
        html.contains(
            "<td class=\"num sig\" title=\"significant: beyond the 95 % intervals of both runs\">-4.8 %*</td>"
        ),
        "{html}"
    );
    assert!(html.contains("<td class=\"num noise\" title=\"within the noise of the two runs\">+0.0 %</td>"), "{html}");
    assert!(!html.contains("<b>8K") && html.contains("&lt;b&gt;8K&lt;/b&gt;"), "{html}");
    // a run recorded before 1.2 has no intervals: marked, explained, never significant
    let (status, html) = site.get(&format!("/compare?ids={old},{idb}")).await;
    assert_eq!(status, StatusCode::OK);
    assert!(html.contains("<td class=\"num noint\"") && html.contains("?</td>"), "{html}");
    assert!(html.contains("no interval: a run has none for this figure") && !html.contains("num sig"), "{html}");
}

/// The command reads the site's runs by address and by id, with the verdict the files give.
async fn command_line(site: &Site, [a, b]: [&Value; 2], ida: &str, idb: &str) {
    let dir = tempfile::tempdir().unwrap();
    let (fa, fb) = (dir.path().join("a.json"), dir.path().join("b.json"));
    std::fs::write(&fa, mark(&a.to_string(), &site.tag)).unwrap();
    std::fs::write(&fb, mark(&b.to_string(), &site.tag)).unwrap();
    let flags = ["--format", "json", "--fail-on", "total_tok_s<-3%"].map(String::from);
    let files = [fa.display().to_string(), fb.display().to_string()];
    let (code, local, err) = compare(files.into_iter().chain(flags.clone()).collect()).await;
    assert_eq!(code, 1, "{local}\n{err}");
    let remote = [format!("{}/runs/{ida}", site.base), idb.to_string(), "--site".into(), site.base.clone()];
    let (code, fetched, err) = compare(remote.into_iter().chain(flags).collect()).await;
    assert_eq!(code, 1, "{fetched}\n{err}");
    let (local, fetched): (Value, Value) =
        (serde_json::from_str(&local).unwrap(), serde_json::from_str(&fetched).unwrap());
    assert_eq!(fetched["comparisons"][0]["cells"], local["comparisons"][0]["cells"]);
    assert_eq!(fetched["comparisons"][0]["failures"], local["comparisons"][0]["failures"]);
    assert!(!local["comparisons"][0]["failures"].as_array().unwrap().is_empty());
    // an id the site does not have, a page that is not a run
    let (code, _, err) = compare(vec![ida.into(), "0123456789ab".into(), "--site".into(), site.base.clone()]).await;
    assert_eq!(code, 2);
    assert!(err.contains("the site has no run at") && err.contains("(404)"), "{err}");
    let (code, _, err) = compare(vec![format!("{}/runs/{ida}/run.json", site.base), format!("{}/", site.base)]).await;
    assert_eq!(code, 2);
    assert!(err.contains("not a run's address on a results site"), "{err}");
}

/// 1.2 fields that are not what the schema says: a 400 naming the field, nothing stored.
async fn refused(site: &Site, token: &str) {
    let base = run(1.0);
    let valid = base["decode"].as_array().unwrap().iter().position(|c| c["status"] == "valid").unwrap();
    let error = base["decode"].as_array().unwrap().iter().position(|c| c["status"] == "error").unwrap();
    type Change = Box<dyn Fn(&mut Value)>;
    let cases: Vec<(Change, &str)> = vec![
        (
            Box::new(move |v| v["decode"][valid]["ci"]["total_tok_s"] = json!({"lo": 9.0, "hi": 1.0})),
            "ci.total_tok_s is [9, 1], not an interval",
        ),
        (
            Box::new(move |v| v["decode"][valid]["ci"]["tbt_ms_p99"] = json!({"lo": 0.0, "hi": 1e300})),
            "ci.tbt_ms_p99 is [0, 1e300]",
        ),
        (Box::new(move |v| v["decode"][error]["ci"] = json!({})), "is error, yet carries ci"),
        (Box::new(move |v| v["decode"][valid]["repeats"] = json!(vec![json!({}); 101])), "limit MAX_REPEATS"),
        (
            Box::new(move |v| v["decode"][valid]["repeats"] = json!([{"total_tok_s": -3.0}])),
            "repeat 1: total_tok_s is -3",
        ),
        (
            Box::new(move |v| {
                v["decode"][valid]["phases"] = json!({"before_s": 0.1, "ramp_s": -2.0, "window_s": 5.0, "after_s": 0.0})
            }),
            "phases.ramp_s is -2",
        ),
        (Box::new(|v| v["settings"]["precision_pct"] = json!(-1.0)), "precision_pct is -1"),
        (Box::new(|v| v["settings"]["repeats"] = json!(0)), "repeats is 0"),
    ];
    let before = site.snapshot().await;
    for (change, why) in cases {
        let mut v = base.clone();
        change(&mut v);
        let (status, answer) = site.post(token, mark(&v.to_string(), &site.tag).into_bytes(), false).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{why}: {answer}");
        assert!(answer["error"].as_str().unwrap().contains(why), "{why}: {answer}");
        assert_eq!(site.snapshot().await, before, "{why}: stored");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_compare_marks_and_precision_checks() {
    let dir = tempfile::tempdir().unwrap();
    suite(&format!("sqlite://{}", dir.path().join("site.db").display())).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_compare_marks_and_precision_checks() {
    if let Some((url, _one_suite)) = crate::site_common::postgres().await {
        suite(&url).await;
    }
}
