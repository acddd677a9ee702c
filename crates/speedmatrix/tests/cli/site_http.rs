//! The results site over HTTP against a real `speedmatrix serve` process:
//! upload → list → view → compare, the pager's links, the filters' edges, the
//! upload form, redaction on the way in, and hostile input (escaped text, 413,
//! 415, 401, 400), with every row of the database unchanged after each refusal.
//! Runs on SQLite always and on PostgreSQL when `SPEEDMATRIX_TEST_POSTGRES`
//! names a database (required under CI=true; scripts/postgres-test.sh sets it).

use std::time::Duration;

use crate::site_common::Server;
use crate::site_common::site::{Site, gz, ids, mark, start, unique};
use reqwest::StatusCode;
use serde_json::{Value, json};
use sm_site::db::Inserted;
use sm_site::{Db, tokens};

const SAMPLE: &str = include_str!("../../../../tests/data/run-sample.json");
const LIL: &str = include_str!("../../../../tests/data/reference/ling-3.0-flash-int4-2xh200nvl.lil-bench-result.json");
const BENCH: &str = include_str!("../../../../tests/data/reference/llm-inference-bench-0.4.18.vllm-cpu-tiny.json");

/// The `href` of the pager's link `rel` (`next`, `prev`), unescaped.
fn pager_link(html: &str, rel: &str) -> Option<String> {
    let key = format!("rel=\"{rel}\" href=\"");
    let start = html.find(&key)? + key.len();
    Some(html[start..start + html[start..].find('"')?].replace("&amp;", "&"))
}

async fn suite(url: &str) {
    let site = start(url).await;
    let who = unique("tester");
    let token = tokens::create(&site.db, &who).await.unwrap();
    assert!(matches!(tokens::create(&site.db, &who).await, Err(sm_site::SiteError::TokenExists(_))));

    // upload: a run as it is, a gzipped reference-tool upload, a raw llm-inference-bench file
    let sample = site.upload(&token, SAMPLE, false).await;
    let lil = site.upload(&token, LIL, true).await;
    let bench = site.upload(&token, BENCH, false).await;

    list(&site, &who, [&sample, &lil, &bench]).await;
    pager(&site, &who).await;
    view_and_compare(&site, &who, [&sample, &lil, &bench]).await;
    form(&site, &token, &who, [&sample, &lil]).await;
    redaction(&site, &token).await;
    hostile(&site, &token, &who, &sample).await;
    idempotent(&site, &token, &sample).await;
    refused_records(&site, &token, &who).await;
    one_shape_of_refusal(&site).await;
    oversize_stored_runs_are_not_rendered(&site, &who).await;
    list_is_one_snapshot(&site).await;
    site.db.close().await;
}

/// The same run sent again — as it is, gzipped, spaced otherwise, by another
/// uploader, several at once — is the run stored the first time.
async fn idempotent(site: &Site, token: &str, sample: &str) {
    let someone = tokens::create(&site.db, &unique("someone")).await.unwrap();
    let before = site.snapshot().await;
    assert_eq!(site.upload_expect(token, SAMPLE, false, true).await, sample);
    assert_eq!(site.upload_expect(token, SAMPLE, true, true).await, sample);
    let spaced = serde_json::to_string(&serde_json::from_str::<Value>(SAMPLE).unwrap()).unwrap();
    assert_eq!(site.upload_expect(token, &spaced, false, true).await, sample, "other bytes, the same run");
    assert_eq!(site.upload_expect(&someone, SAMPLE, false, true).await, sample, "another uploader");
    assert_eq!(site.snapshot().await, before, "a repeated upload wrote something");

    // a new run sent four times at once (a client retrying while the first is in flight): stored once
    let mut v: Value = serde_json::from_str(SAMPLE).unwrap();
    v["label"] = json!(unique("at-once"));
    let body = mark(&v.to_string(), &site.tag);
    let send = || site.post(token, body.clone().into_bytes(), false);
    let (a, b, c, d) = tokio::join!(send(), send(), send(), send());
    let answers = [a, b, c, d];
    let ids: Vec<&str> = answers.iter().map(|(_, v)| v["id"].as_str().unwrap()).collect();
    assert!(ids.iter().all(|id| *id == ids[0]), "{answers:?}");
    let created = answers.iter().filter(|(status, _)| *status == StatusCode::CREATED).count();
    assert_eq!(created, 1, "{answers:?}");
    let label = v["label"].as_str().unwrap();
    let stored = site.snapshot().await.iter().filter(|row| row.contains(label)).count();
    assert_eq!(stored, 1, "one row holds the run");
}

/// A run whose figures are not measurements, or that is larger than the site
/// shows, is refused with a 400 that names the figure or the limit.
async fn refused_records(site: &Site, token: &str, who: &str) {
    let sample: Value = serde_json::from_str(SAMPLE).unwrap();
    let valid = sample["decode"].as_array().unwrap().iter().position(|c| c["status"] == "valid").unwrap();
    let error = json!({"context": 8192, "label": "8K", "concurrency": 3, "status": "error", "reason": "boom",
        "total_tok_s": 5.0, "per_request_tok_s": null, "ttft_ms_p50": null, "ttft_ms_p90": null, "ttft_ms_p99": null,
        "tbt_ms_p50": null, "tbt_ms_p90": null, "tbt_ms_p99": null, "chunk_gap_ms_p50": null, "chunk_gap_ms_p99": null,
        "avg_active": null, "completed": null, "output_tokens": null, "measured_s": null, "requests": null,
        "token_source": null});
    let plan_row = |i: u64| {
        json!({"kind": "decode", "requested_context": 1024 + i, "context": 1024 + i, "label": "1K",
            "concurrency": 1 + i, "status": "planned", "reason": null})
    };
    type Change = Box<dyn Fn(&mut Value)>;
    let cases: Vec<(Change, &str)> = vec![
        (Box::new(move |v| v["decode"][valid]["total_tok_s"] = json!(-5000.0)), "total_tok_s is -5000"),
        (Box::new(move |v| v["decode"][valid]["total_tok_s"] = json!(1.7e308)), "total_tok_s is"),
        (Box::new(move |v| v["decode"][valid]["ttft_ms_p50"] = json!(-1)), "ttft_ms_p50 is -1"),
        (Box::new(move |v| v["decode"][valid]["concurrency"] = json!(0)), "concurrency must be at least 1"),
        (Box::new(move |v| v["prefill"][0]["prompt_tok_s"] = json!(-3.5)), "prompt_tok_s is -3.5"),
        (Box::new(move |v| v["decode"].as_array_mut().unwrap().push(error.clone())), "only valid cells"),
        // the issue's example: 2,000 plan rows, each its own context and concurrency
        (Box::new(move |v| v["plan"] = (0..2000).map(plan_row).collect()), "MAX_"),
        (Box::new(|v| v["label"] = json!("x".repeat(20_000))), "MAX_TEXT_BYTES"),
        (Box::new(|v| v["events"] = (0..10_001).map(|i| json!({"t": i, "text": "e"})).collect()), "MAX_EVENTS"),
    ];
    let before = site.snapshot().await;
    for (change, why) in cases {
        let mut v = sample.clone();
        change(&mut v);
        let (status, answer) = site.post(token, mark(&v.to_string(), &site.tag).into_bytes(), false).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{why}: {answer}");
        assert!(answer["error"].as_str().unwrap().contains(why), "{why}: {answer}");
        assert_eq!(site.snapshot().await, before, "{why}: stored");
    }
    // nothing refused tops the list by peak
    let top = site.get_json(&format!("/api/runs?uploader={who}&sort=peak&dir=desc&per_page=1")).await;
    assert!(top["runs"][0]["peak_tok_s"].as_f64().unwrap() < 1e6, "{top}");
}

/// Every refusal is JSON under /api/ and an error page elsewhere, whoever made
/// it: a query string that does not parse, a method the route lacks, a path
/// that does not decode, a form that is not multipart.
async fn one_shape_of_refusal(site: &Site) {
    let cases = [
        ("GET", "/api/runs?model=a&model=b", StatusCode::BAD_REQUEST),
        ("GET", "/api/runs?per_page=x", StatusCode::BAD_REQUEST),
        ("GET", "/api/runs/%FF%FE", StatusCode::BAD_REQUEST),
        ("DELETE", "/api/runs", StatusCode::METHOD_NOT_ALLOWED),
        ("GET", "/api/nothing-here", StatusCode::NOT_FOUND),
        ("GET", "/?model=a&model=b", StatusCode::BAD_REQUEST),
        ("GET", "/compare?ids=a&ids", StatusCode::OK),
        ("GET", "/runs/%FF%FE", StatusCode::BAD_REQUEST),
        ("DELETE", "/upload", StatusCode::METHOD_NOT_ALLOWED),
        ("POST", "/upload", StatusCode::BAD_REQUEST),
    ];
    for (method, path, expected) in cases {
        let method = reqwest::Method::from_bytes(method.as_bytes()).unwrap();
        let r = site.http.request(method.clone(), format!("{}{path}", site.base)).send().await.unwrap();
        let status = r.status();
        let kind = r.headers().get("content-type").map(|v| v.to_str().unwrap().to_string()).unwrap_or_default();
        let body = r.text().await.unwrap();
        assert_eq!(status, expected, "{method} {path}: {body}");
        if status.is_success() {
            continue;
        }
        if path.starts_with("/api/") {
            assert!(kind.starts_with("application/json"), "{method} {path}: {kind} {body}");
            let v: Value = serde_json::from_str(&body).unwrap();
            assert!(!v["error"].as_str().unwrap().is_empty(), "{method} {path}: {body}");
        } else {
            assert!(kind.starts_with("text/html"), "{method} {path}: {kind} {body}");
            assert!(body.contains("role=\"alert\"") && body.contains("</html>"), "{method} {path}: {body}");
        }
    }
}

/// A run stored before the limits (written here past the upload checks) that
/// exceeds them is not rendered: a short page says so, and its run.json still downloads.
async fn oversize_stored_runs_are_not_rendered(site: &Site, who: &str) {
    let mut v: Value = serde_json::from_str(SAMPLE).unwrap();
    v["plan"] = (0..2000u64)
        .map(|i| {
            json!({"kind": "decode", "requested_context": 1024 + i, "context": 1024 + i, "label": "1K",
                "concurrency": 1 + i, "status": "planned", "reason": null})
        })
        .collect();
    let record: sm_core::record::RunRecord = serde_json::from_value(v).unwrap();
    let json = serde_json::to_string(&record).unwrap();
    let id = tokens::random_hex(6).unwrap();
    let stored = sm_site::ingest::index(&record, id.clone(), who, json.clone());
    assert_eq!(site.db.insert_run(&stored).await.unwrap(), Inserted::New);
    for path in ["", "/measurements.csv", "/report.md"] {
        let (status, body) = site.get(&format!("/runs/{id}{path}")).await;
        assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{path}");
        assert!(body.contains("too large to show") && body.contains("MAX_") && body.len() < 64 * 1024, "{path}");
    }
    let (status, raw) = site.get(&format!("/runs/{id}/run.json")).await;
    assert_eq!((status, raw.len()), (StatusCode::OK, json.len()));
}

/// The list's total and its rows are of one moment, while uploads land.
async fn list_is_one_snapshot(site: &Site) {
    let who = unique("snapshot");
    let mine = tokens::create(&site.db, &who).await.unwrap();
    let writer = {
        let (http, base, tag) = (site.http.clone(), site.base.clone(), site.tag.clone());
        tokio::spawn(async move {
            for i in 0..12 {
                let mut v: Value = serde_json::from_str(SAMPLE).unwrap();
                v["label"] = json!(format!("snapshot {i}"));
                let r = http
                    .post(format!("{base}/api/runs"))
                    .bearer_auth(&mine)
                    .body(mark(&v.to_string(), &tag))
                    .send()
                    .await
                    .unwrap();
                assert_eq!(r.status(), StatusCode::CREATED);
            }
        })
    };
    while !writer.is_finished() {
        let page = site.get_json(&format!("/api/runs?uploader={who}&per_page=200")).await;
        assert_eq!(page["total"].as_u64().unwrap() as usize, page["runs"].as_array().unwrap().len(), "{page}");
    }
    writer.await.unwrap();
    assert_eq!(site.get_json(&format!("/api/runs?uploader={who}")).await["total"], 12);
}

/// The list through the API: filters, sorting, pagination, and as the page.
async fn list(site: &Site, who: &str, [sample, lil, bench]: [&String; 3]) {
    let mine = |q: &str| format!("/api/runs?uploader={who}{q}");
    let all = site.get_json(&mine("")).await;
    assert_eq!(all["total"], 3, "{all}");
    assert!(all["runs"].as_array().unwrap().iter().all(|r| r["uploader"] == who));
    assert_eq!(site.get_json(&mine("x")).await["total"], 0, "the uploader matches exactly");
    assert_eq!(site.get_json(&format!("/api/runs?uploader=@{who}")).await["total"], 3, "a leading @ is allowed");
    let h200 = site.get_json(&mine("&gpu=h200&engine=VLLM")).await;
    assert_eq!(h200["total"], 2, "{h200}");
    assert!(ids(&h200).contains(sample) && ids(&h200).contains(lil));
    assert_eq!(ids(&site.get_json(&mine("&gpu_count=2")).await), ids(&h200), "both H200 runs have 2 GPUs");
    let tiny = site.get_json(&mine("&model=tiny")).await;
    assert_eq!(tiny["runs"][0]["id"], bench.as_str(), "{tiny}");
    let by_peak = site.get_json(&mine("&sort=peak&dir=desc")).await;
    let peaks: Vec<f64> =
        by_peak["runs"].as_array().unwrap().iter().map(|r| r["peak_tok_s"].as_f64().unwrap()).collect();
    assert!(peaks.windows(2).all(|w| w[0] >= w[1]) && peaks[0] > 6000.0, "{peaks:?}");
    let page2 = site.get_json(&mine("&sort=peak&dir=asc&per_page=1&page=2")).await;
    assert_eq!((page2["total"].as_i64(), page2["runs"].as_array().unwrap().len()), (Some(3), 1));
    assert_eq!(page2["runs"][0]["peak_tok_s"].as_f64().unwrap(), peaks[1]);
    let september = site.get_json(&mine("&from=2026-09-01&to=2026-09-30")).await;
    assert_eq!(september["total"], 2, "the sample and the lil upload were measured in September 2026: {september}");
    // the sample finished at 2026-09-03T16:52:41Z: both ends of a range are whole days
    for (range, holds) in [
        ("&from=2026-09-03&to=2026-09-03", true),
        ("&to=2026-09-03", true),
        ("&from=2026-09-03", true),
        ("&to=2026-09-02", false),
        ("&from=2026-09-04", false),
    ] {
        let found = ids(&site.get_json(&mine(range)).await).contains(sample);
        assert_eq!(found, holds, "{range}");
    }
    let (status, body) = site.get(&mine("&to=2026-02-30")).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "not a day: {body}");
    // the engine version matches exactly (`+` encoded as %2B)
    let version = site.get_json(&mine("&engine_version=0.27.2rc1.dev113%2Bg5cecfc013")).await;
    assert!(ids(&version).contains(sample) && !ids(&version).contains(bench), "{version}");
    assert!(!ids(&site.get_json(&mine("&engine_version=0.27.2")).await).contains(sample));
    let (status, body) = site.get(&mine("&sort=id;drop")).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");

    // as the page: filtered, with the run and a sort link
    let (status, html) = site.get(&format!("/?uploader={who}&model=ling")).await;
    assert_eq!(status, StatusCode::OK);
    assert!(html.contains(&format!("/runs/{sample}")) && html.contains(&format!("/runs/{lil}")), "{html}");
    assert!(!html.contains(&format!("/runs/{bench}")));
    assert!(html.contains("sort=peak") && html.contains("1–2 of 2"), "{html}");
    assert!(html.contains("name=\"engine_version\""), "the form filters by engine version");
}

/// The pager's links keep the filters, the sort and the page size, and lead
/// where they say.
async fn pager(site: &Site, who: &str) {
    let (_, html) = site.get(&format!("/?uploader={who}&per_page=1&page=2")).await;
    assert!(html.contains("2–2 of 3") && html.contains("page 2 of 3"), "{html}");
    let next = pager_link(&html, "next").expect("a next link");
    assert_eq!(next, format!("/?uploader={who}&per_page=1&sort=measured&dir=desc&page=3"));
    let prev = pager_link(&html, "prev").expect("a previous link");
    assert_eq!(prev, format!("/?uploader={who}&per_page=1&sort=measured&dir=desc&page=1"));
    let (_, third) = site.get(&next).await;
    assert!(third.contains("3–3 of 3") && pager_link(&third, "next").is_none(), "{third}");
    let (_, first) = site.get(&prev).await;
    assert!(first.contains("1–1 of 3") && pager_link(&first, "prev").is_none(), "{first}");
    // sorted by model, "newer" means nothing
    let (_, by_model) = site.get(&format!("/?uploader={who}&sort=model&per_page=1&page=2")).await;
    assert!(by_model.contains("← Previous page") && !by_model.contains("Newer"), "{by_model}");
    let next = pager_link(&by_model, "next").unwrap();
    assert!(next.contains("per_page=1") && next.contains("sort=model&dir=asc&page=3"), "{next}");
}

async fn view_and_compare(site: &Site, who: &str, [sample, lil, bench]: [&String; 3]) {
    let (status, page) = site.get(&format!("/runs/{sample}")).await;
    assert_eq!(status, StatusCode::OK);
    assert!(page.contains("Sustained decode") && page.contains(&format!("by @{who}")), "{page}");
    for (path, kind, needle) in [
        ("run.json", "application/json", "speedmatrix.run/1"),
        ("measurements.csv", "text/csv", "total_tok_s"),
        ("report.md", "text/markdown", "Sustained decode"),
    ] {
        assert!(page.contains(&format!("href=\"/runs/{sample}/{path}\"")), "no link to {path}");
        let r = site.http.get(format!("{}/runs/{sample}/{path}", site.base)).send().await.unwrap();
        assert_eq!(r.status(), StatusCode::OK);
        assert!(r.headers()["content-type"].to_str().unwrap().starts_with(kind));
        assert!(r.text().await.unwrap().contains(needle), "{path}");
    }
    let record = site.get_json(&format!("/api/runs/{lil}")).await;
    assert_eq!(record["schema"], sm_core::record::SCHEMA);
    assert_eq!(record["server"]["extra"]["uploader"], who);
    assert_eq!(site.get(&format!("/api/runs/{}", unique("nope"))).await.0, StatusCode::NOT_FOUND);
    assert_eq!(site.get("/runs/nope").await.0, StatusCode::NOT_FOUND);

    // compare: 2 and 3 runs, both spellings of the query; more than 4 and unknown runs refused
    let (status, cmp) = site.get(&format!("/compare?ids={sample},{lil}")).await;
    assert_eq!(status, StatusCode::OK);
    assert!(cmp.contains("Comparing 2 runs") && cmp.contains("Settings and provenance"), "{cmp}");
    // the sample and the imported run share cells (8K at 1, 64 and 128): ratios near 1
    assert!(cmp.contains("1.00×"), "{cmp}");
    assert!(cmp.contains("class=\"differs\""), "the two runs' tools differ");
    assert!(cmp.contains("Total tok/s at 8K context") && cmp.contains("Prompt tok/s by context"));
    let (status, cmp3) = site.get(&format!("/compare?ids={sample}&ids={lil}&ids={bench}")).await;
    assert_eq!(status, StatusCode::OK);
    assert!(cmp3.contains("Comparing 3 runs"));
    let (status, five) = site.get(&format!("/compare?ids={sample},{lil},{bench},a,b")).await;
    assert_eq!(status, StatusCode::OK);
    assert!(five.contains("at most 4"), "{five}");
    assert_eq!(site.get(&format!("/compare?ids={sample},missing")).await.0, StatusCode::NOT_FOUND);
}

/// The upload form: a run and a reference-tool file stored; a malformed file
/// refused with a 400 that says why, and nothing stored.
/// The form's uploads of runs the API stored already lead to those runs.
async fn form(site: &Site, token: &str, who: &str, [sample, lil]: [&String; 2]) {
    for (name, file, id) in [("run.json", SAMPLE, sample), ("lil.json", LIL, lil)] {
        let r = site.upload_form(token, name, file.as_bytes()).await;
        assert_eq!(r.status(), StatusCode::SEE_OTHER, "{name}");
        let location = r.headers()["location"].to_str().unwrap().to_string();
        assert_eq!(location, format!("/runs/{id}"), "{name}: the same run, stored once");
        let (status, page) = site.get(&location).await;
        assert_eq!(status, StatusCode::OK);
        assert!(page.contains("Sustained decode") && page.contains(&format!("by @{who}")), "{name}");
    }
    // a new run through the form
    let mut v: Value = serde_json::from_str(SAMPLE).unwrap();
    v["label"] = "sent with the form".into();
    let r = site.upload_form(token, "new.json", v.to_string().as_bytes()).await;
    assert_eq!(r.status(), StatusCode::SEE_OTHER);
    assert_eq!(site.get_json(&format!("/api/runs?uploader={who}")).await["total"], 4);
    let before = site.snapshot().await;
    let r = site.upload_form(token, "broken.json", b"{\"schema\": \"speedmatrix.run/1\", ").await;
    assert_eq!(r.status(), StatusCode::BAD_REQUEST);
    let page = r.text().await.unwrap();
    assert!(page.contains("Not uploaded") && page.contains("not JSON"), "{page}");
    assert_eq!(site.snapshot().await, before, "a refused form upload stored something");
}

/// Secrets the uploading tool left in are redacted where they stand; one that is also elsewhere
/// refuses the upload (the site never rewrites other fields by value, and never stores a secret).
async fn redaction(site: &Site, token: &str) {
    let mut v: Value = serde_json::from_str(SAMPLE).unwrap();
    v["launch_command"] = "vllm serve m --api-key SECRETVALUE --port 8000".into();
    v["label"] = "the key was SECRETVALUE".into();
    let (status, answer) = site.post(token, v.to_string().into_bytes(), false).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{answer}");
    let message = answer["error"].as_str().unwrap_or_default();
    assert!(message.contains("label") && !message.contains("SECRETVALUE"), "{answer}");
    v["label"] = "a label".into();
    let id = site.upload(token, &v.to_string(), false).await;
    let record = site.get_json(&format!("/api/runs/{id}")).await;
    let command = record["launch_command"].as_str().unwrap();
    assert_eq!(command, format!("vllm serve m --api-key {} --port 8000", sm_core::redact::REDACTED));
    for path in [format!("/api/runs/{id}"), format!("/runs/{id}"), format!("/runs/{id}/report.md"), "/".into()] {
        let (status, body) = site.get(&path).await;
        assert_eq!(status, StatusCode::OK, "{path}");
        assert!(!body.contains("SECRETVALUE"), "{path} shows the secret: {body}");
    }
    let stored = site.db.get_run(&id).await.unwrap().unwrap();
    assert!(!stored.record.contains("SECRETVALUE") && !stored.label.contains("SECRETVALUE"));
}

async fn hostile(site: &Site, token: &str, who: &str, sample: &str) {
    // a model name and label that are markup render as text everywhere, the comparison included
    let mut v: Value = serde_json::from_str(SAMPLE).unwrap();
    // no '/': the page names a model by the last part of its path
    v["server"]["model"] = "<script>alert(1)".into();
    v["launch_command"] = Value::Null;
    v["label"] = "<img src=x onerror=alert(2)>".into();
    let id = site.upload(token, &v.to_string(), false).await;
    for path in [format!("/runs/{id}"), format!("/?uploader={who}"), format!("/compare?ids={id},{sample}")] {
        let (status, html) = site.get(&path).await;
        assert_eq!(status, StatusCode::OK, "{path}");
        // the site's one script (allowed by its hash) aside, no markup of the run's runs
        let own = format!("<script>{}</script>", sm_site::pages::COMPARE_ORDER_JS);
        let html = html.replace(&own, "");
        assert!(!html.to_ascii_lowercase().contains("<script") && !html.contains("<img src=x"), "{path}: {html}");
        assert!(html.contains("&lt;script&gt;alert(1)"), "{path}: {html}");
        if path.starts_with("/compare") {
            assert!(html.contains("Comparing 2 runs"), "{html}");
        }
    }

    let other = unique("revoked");
    let revoked = tokens::create(&site.db, &other).await.unwrap();
    assert!(site.db.revoke_token(&other).await.unwrap());
    let before = site.snapshot().await;
    // 40 MiB: refused, whatever its content
    let (status, v) = site.post(token, vec![b' '; 40 * 1024 * 1024], false).await;
    assert_eq!(status, StatusCode::PAYLOAD_TOO_LARGE, "{v}");
    assert_eq!(site.snapshot().await, before);
    // 40 MiB that gzip to a few KiB: refused after decompression
    let (status, _) = site.post(token, gz(&vec![b' '; 40 * 1024 * 1024]), true).await;
    assert_eq!(status, StatusCode::PAYLOAD_TOO_LARGE);
    assert_eq!(site.snapshot().await, before);
    // an encoding other than gzip
    let (status, _, v) = site.post_with(token, SAMPLE.into(), Some("br")).await;
    assert_eq!(status, StatusCode::UNSUPPORTED_MEDIA_TYPE, "{v}");
    assert!(v["error"].as_str().unwrap().contains("br"), "{v}");
    assert_eq!(site.snapshot().await, before);
    // a wrong, a missing and a revoked token
    let (status, v) =
        site.post("smt_0000000000000000000000000000000000000000000000000000000000000000", SAMPLE.into(), false).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED, "{v}");
    let r = site.http.post(format!("{}/api/runs", site.base)).body(SAMPLE).send().await.unwrap();
    assert_eq!(r.status(), StatusCode::UNAUTHORIZED);
    assert_eq!(site.post(&revoked, SAMPLE.into(), false).await.0, StatusCode::UNAUTHORIZED);
    assert_eq!(site.snapshot().await, before);
    // malformed JSON, JSON that is no run, a broken run, broken gzip: 400 that says why
    let cases: [(&[u8], bool, &str); 5] = [
        (b"{\"schema\": \"speedmatrix.run/1\", ", false, "not JSON"),
        (b"{\"hello\": \"world\"}", false, "unrecognised"),
        (b"{\"schema\": \"speedmatrix.run/1\", \"status\": \"complete\"}", false, "invalid speedmatrix.run/1"),
        (b"\x1f\x8b\x08garbage", true, "gzip"),
        (b"\xff\xfe\x00", false, "UTF-8"),
    ];
    for (body, gzip, why) in cases {
        let (status, v) = site.post(token, body.to_vec(), gzip).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{v}");
        assert!(v["error"].as_str().unwrap().contains(why), "{why}: {v}");
        assert_eq!(site.snapshot().await, before, "{why}");
    }
    // the form refuses a wrong token the same way and shows why
    let r = site.upload_form("smt_wrong", "run.json", SAMPLE.as_bytes()).await;
    assert_eq!(r.status(), StatusCode::UNAUTHORIZED);
    assert!(r.text().await.unwrap().contains("Not uploaded"));
    assert_eq!(site.snapshot().await, before);
    // SQL in a filter is only text
    let injected = site.get_json("/api/runs?model=%27%20OR%201%3D1%20--").await;
    assert_eq!(injected["total"], 0, "{injected}");
    // a write that fails (a duplicate id) leaves nothing behind
    let mut dup = site.db.get_run(&id).await.unwrap().unwrap();
    dup.model = "should not appear".into();
    assert_eq!(site.db.insert_run(&dup).await.unwrap(), Inserted::Existing(id.clone()), "the same content hash");
    dup.content_hash = Some(unique("other-content"));
    assert!(site.db.insert_run(&dup).await.is_err());
    assert_eq!(site.snapshot().await, before);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_upload_list_view_compare_and_hostile_input() {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite://{}", dir.path().join("site.db").display());
    suite(&url).await;
    // reopening migrates nothing twice and keeps the runs
    let db = Db::connect(&url).await.unwrap();
    assert_eq!(db.count_runs().await.unwrap(), 20);
    db.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_upload_list_view_compare_and_hostile_input() {
    if let Some((url, _one_suite)) = crate::site_common::postgres().await {
        suite(&url).await;
    }
}

// ---- slow and idle clients, over raw sockets (the database does not matter: SQLite) ----

/// What arrives until the server closes the connection or `limit` passes, and whether it closed.
async fn read_until_closed(stream: &mut tokio::net::TcpStream, limit: Duration) -> (String, bool) {
    use tokio::io::AsyncReadExt;
    let deadline = tokio::time::Instant::now() + limit;
    let mut got = Vec::new();
    let mut buf = [0u8; 8192];
    loop {
        match tokio::time::timeout_at(deadline, stream.read(&mut buf)).await {
            Err(_) => return (String::from_utf8_lossy(&got).into_owned(), false),
            Ok(Ok(0) | Err(_)) => return (String::from_utf8_lossy(&got).into_owned(), true),
            Ok(Ok(n)) => got.extend_from_slice(&buf[..n]),
        }
    }
}

/// Writes `bytes` one at a time, `every` apart, until the peer stops taking them.
fn trickle(stream: tokio::net::tcp::OwnedWriteHalf, bytes: Vec<u8>, every: Duration) -> tokio::task::JoinHandle<()> {
    use tokio::io::AsyncWriteExt;
    tokio::spawn(async move {
        let mut stream = stream;
        for b in bytes {
            if stream.write_all(&[b]).await.is_err() {
                return;
            }
            tokio::time::sleep(every).await;
        }
    })
}

async fn connect(addr: &str) -> tokio::net::TcpStream {
    tokio::net::TcpStream::connect(addr).await.unwrap()
}

async fn send(stream: &mut tokio::net::TcpStream, bytes: &[u8]) {
    use tokio::io::AsyncWriteExt;
    stream.write_all(bytes).await.unwrap();
}

/// A site on a fresh SQLite file with `flags`, and a live token.
async fn raw_site(flags: &[&str]) -> (Server, String, String, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite://{}", dir.path().join("site.db").display());
    let db = Db::connect(&url).await.unwrap();
    let token = tokens::create(&db, "slow").await.unwrap();
    db.close().await;
    let (server, addr) = crate::site_common::serve_with(&url, flags).await;
    (server, addr, token, dir)
}

/// An idle connection, a head sent a byte at a time, a connection left open
/// after its request and a body sent a byte at a time are all cut, instead of
/// holding a connection for as long as the client likes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_and_slow_clients_are_cut() {
    let (_server, addr, token, _dir) = raw_site(&["--header-timeout", "1s", "--request-timeout", "2s"]).await;
    let limit = Duration::from_secs(15);

    let mut idle = connect(&addr).await;
    let (got, closed) = read_until_closed(&mut idle, limit).await;
    assert!(closed && got.is_empty(), "an idle connection stayed open: {got:?}");

    let (mut read, write) = connect(&addr).await.into_split();
    let head = b"GET / HTTP/1.1\r\nHost: x\r\n".iter().chain(b"X-Slow: 1\r\n".repeat(200).iter()).copied().collect();
    let writer = trickle(write, head, Duration::from_millis(50));
    let mut buf = Vec::new();
    let got = tokio::time::timeout(limit, tokio::io::AsyncReadExt::read_to_end(&mut read, &mut buf)).await;
    assert!(got.is_ok(), "a head sent a byte at a time was not cut");
    assert!(!String::from_utf8_lossy(&buf).contains(" 200 "), "{}", String::from_utf8_lossy(&buf));
    writer.abort();

    let mut kept = connect(&addr).await;
    send(&mut kept, b"GET /api/runs HTTP/1.1\r\nHost: x\r\n\r\n").await;
    let (got, closed) = read_until_closed(&mut kept, limit).await;
    assert!(got.starts_with("HTTP/1.1 200") && closed, "a kept-alive connection stayed open after its request: {got}");

    let (mut read, mut write) = connect(&addr).await.into_split();
    let head = format!(
        "POST /api/runs HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {token}\r\nContent-Length: 100000\r\n\r\n{{\"schema\""
    );
    tokio::io::AsyncWriteExt::write_all(&mut write, head.as_bytes()).await.unwrap();
    let writer = trickle(write, vec![b' '; 100_000], Duration::from_millis(50));
    let mut buf = Vec::new();
    let got = tokio::time::timeout(limit, tokio::io::AsyncReadExt::read_to_end(&mut read, &mut buf)).await;
    let text = String::from_utf8_lossy(&buf);
    assert!(got.is_ok(), "a body sent a byte at a time was not cut: {text}");
    assert!(text.starts_with("HTTP/1.1 408") && text.contains("application/json"), "{text}");
    writer.abort();
}

/// Beyond --max-connections a connection waits until one ends (here: the idle
/// ones, cut by the header timeout), then is served.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connections_beyond_the_bound_wait_for_a_slot() {
    let (_server, addr, _, _dir) = raw_site(&["--max-connections", "2", "--header-timeout", "3s"]).await;
    let mut first = connect(&addr).await;
    let mut second = connect(&addr).await;
    let mut third = connect(&addr).await;
    send(&mut third, b"GET /api/runs HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").await;
    let (early, _) = read_until_closed(&mut third, Duration::from_millis(1000)).await;
    assert!(early.is_empty(), "the third connection was served while two held the slots: {early}");
    for idle in [&mut first, &mut second] {
        let (_, closed) = read_until_closed(idle, Duration::from_secs(20)).await;
        assert!(closed, "an idle connection held its slot");
    }
    let (answer, _) = read_until_closed(&mut third, Duration::from_secs(20)).await;
    assert!(answer.starts_with("HTTP/1.1 200"), "the waiting connection was not served: {answer:?}");
}

/// A wrong token on a 32 MiB upload is refused when the token arrives, not
/// after the site has waited for (and buffered) the whole body: the form
/// (token field first) and the API (Authorization header).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wrong_token_is_refused_before_the_body() {
    let (_server, addr, _, _dir) = raw_site(&[]).await;
    let wrong = format!("smt_{}", "0".repeat(64));
    let length = 32 * 1024 * 1024;
    let boundary = "b0undary";
    let form_start = format!(
        "--{boundary}\r\ncontent-disposition: form-data; name=\"token\"\r\n\r\n{wrong}\r\n--{boundary}\r\n\
         content-disposition: form-data; name=\"file\"; filename=\"run.json\"\r\n\r\n{{\"schema\": "
    );
    let requests = [
        format!(
            "POST /upload HTTP/1.1\r\nHost: x\r\nContent-Type: multipart/form-data; boundary={boundary}\r\n\
             Content-Length: {length}\r\n\r\n{form_start}"
        ),
        format!(
            "POST /api/runs HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {wrong}\r\nContent-Length: {length}\r\n\r\n{{"
        ),
    ];
    for request in requests {
        let mut stream = connect(&addr).await;
        send(&mut stream, request.as_bytes()).await;
        send(&mut stream, &vec![b' '; 64 * 1024]).await;
        // the rest of the 32 MiB never comes
        let (answer, _) = read_until_closed(&mut stream, Duration::from_secs(20)).await;
        assert!(answer.starts_with("HTTP/1.1 401"), "{request:.40}: {answer:?}");
    }
}
