//! The capacity answer on the results site, over HTTP against a real
//! `speedmatrix serve`: a speedmatrix.run/1.1 run keeps the answer it brings;
//! a run recorded before 1.1 and a reference-tool file get one worked out at
//! upload (default SLO, from the cells' summaries), and so does a run stored
//! before the site kept answers, when the site starts. The runs list shows the
//! answers, filters by a context and sorts by the users there; bad parameters
//! are 400s; incoherent answers are refused; hostile labels are escaped; the
//! comparison puts the answers side by side and says when the SLOs differ.
//! On SQLite always, on PostgreSQL when `SPEEDMATRIX_TEST_POSTGRES` names one.

use reqwest::StatusCode;
use serde_json::{Value, json};
use sm_core::record::RunRecord;
use sm_site::db::Inserted;
use sm_site::tokens;

use crate::site_common::serve;
use crate::site_common::site::{Site, ids, mark, start, unique};

const SAMPLE: &str = include_str!("../../../../tests/data/run-sample.json");
const BENCH: &str = include_str!("../../../../tests/data/reference/llm-inference-bench-0.4.18.vllm-cpu-tiny.json");
/// A run of the tiny simulated engine with `--slo 'tok_s_p10>=400' --cost-per-hour 10`, contexts
/// 1K and 8K at 1, 4 and 16 users: 1K is bounded by tok_s_p10 (16 failed), 8K by the KV cache
/// (16 did not fit).
const CAPACITY: &str = include_str!("../../../../tests/data/run-capacity-1.1.json");

/// The answer the site stores for a record without one: the core's, from its summaries.
fn expected_answer(text: &str) -> Value {
    let mut record = sm_report::import_str(text).unwrap();
    sm_core::answer::judge_from_summaries(&mut record, &sm_core::slo::Slo::default()).unwrap();
    serde_json::to_value(&record.capacity).unwrap()
}

/// `(context, max_users, bounded_by)` of a listed run's answers.
fn answers(run: &Value) -> Vec<(u64, u64, String)> {
    run["capacity"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| (a["context"].as_u64().unwrap(), a["max_users"].as_u64().unwrap(), a["bounded_by"].to_string()))
        .collect()
}

fn listed<'a>(list: &'a Value, id: &str) -> &'a Value {
    list["runs"].as_array().unwrap().iter().find(|r| r["id"] == id).unwrap_or_else(|| panic!("{id} not in {list}"))
}

async fn suite(url: &str) {
    let site = start(url).await;
    let who = unique("capacity");
    let token = tokens::create(&site.db, &who).await.unwrap();

    let fresh = site.upload(&token, CAPACITY, false).await;
    let old = site.upload(&token, SAMPLE, false).await;
    let bench = site.upload(&token, BENCH, false).await;
    ingest(&site, &who, [&fresh, &old, &bench]).await;
    list(&site, &who, [&fresh, &old, &bench]).await;
    bad_parameters(&site, &who).await;
    refused(&site, &token).await;
    hostile(&site, &token, &who, &old).await;
    compare(&site, [&fresh, &old, &bench]).await;
    stored_before_answers(&site, url, &who).await;
    site.db.close().await;
}

/// What the site stores and lists of each run's answer.
async fn ingest(site: &Site, who: &str, [fresh, old, bench]: [&String; 3]) {
    // a 1.1 run keeps the answer it measured, with its SLO and its costs
    let record = site.get_json(&format!("/api/runs/{fresh}")).await;
    let brought: Value = serde_json::from_str(CAPACITY).unwrap();
    assert_eq!(record["capacity"], brought["capacity"]);
    assert_eq!(record["settings"]["slo"], "tok_s_p10>=400");
    assert_eq!(record["capacity"][0]["usd_per_user_hour"], 2.5);
    // a record from before 1.1 and a reference-tool file: answered at upload with the default SLO
    for (id, text) in [(old, SAMPLE), (bench, BENCH)] {
        let record = site.get_json(&format!("/api/runs/{id}")).await;
        assert_eq!(record["schema"], sm_core::record::SCHEMA, "{id}");
        assert_eq!(record["settings"]["slo"], sm_core::slo::DEFAULT_SLO, "{id}");
        assert!(!record["capacity"].as_array().unwrap().is_empty(), "{id}: {record}");
        assert_eq!(record["capacity"], expected_answer(text), "{id}");
    }
    let all = site.get_json(&format!("/api/runs?uploader={who}")).await;
    assert_eq!(all["total"], 3, "{all}");
    let f = listed(&all, fresh);
    assert_eq!((f["slo"].as_str(), f["judged_from"].as_str()), (Some("tok_s_p10>=400"), Some("requests")));
    assert_eq!(answers(f), [(1024, 4, "\"slo:tok_s_p10\"".to_string()), (8192, 4, "\"kv_cache\"".to_string())], "{f}");
    for id in [old, bench] {
        let r = listed(&all, id);
        assert_eq!(
            (r["slo"].as_str(), r["judged_from"].as_str()),
            (Some(sm_core::slo::DEFAULT_SLO), Some("summaries"))
        );
        let stored = site.get_json(&format!("/api/runs/{id}")).await;
        let expected: Vec<(u64, u64, String)> = answers(&json!({"capacity": stored["capacity"]}));
        assert_eq!(answers(r), expected, "the list shows the stored record's answer");
    }
    // the same old file again is the same run: its identity is the file as uploaded
    assert_eq!(
        site.upload_expect(&tokens::create(&site.db, &unique("again")).await.unwrap(), SAMPLE, false, true).await,
        *old
    );
}

/// Filtered by a context: only the runs that measured it, sorted by the users there.
async fn list(site: &Site, who: &str, [fresh, old, bench]: [&String; 3]) {
    let mine = |q: &str| format!("/api/runs?uploader={who}{q}");
    let at_8k = site.get_json(&mine("&context=8192")).await;
    let bench_has_8k = answers(listed(&site.get_json(&mine("")).await, bench)).iter().any(|a| a.0 == 8192);
    let expected = 2 + usize::from(bench_has_8k);
    assert_eq!(at_8k["total"], expected, "{at_8k}");
    assert!(ids(&at_8k).contains(fresh) && ids(&at_8k).contains(old), "{at_8k}");
    for r in at_8k["runs"].as_array().unwrap() {
        assert!(answers(r).iter().all(|a| a.0 == 8192), "only the chosen context's answer: {r}");
    }
    // ranked within each SLO (methodology §11.3): by SLO, then by users
    let users = |list: &Value| -> Vec<(String, u64)> {
        list["runs"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| (r["slo"].as_str().unwrap().to_string(), answers(r)[0].1))
            .collect()
    };
    let down = users(&at_8k);
    assert!(
        down.windows(2).all(|w| w[0].0 < w[1].0 || (w[0].0 == w[1].0 && w[0].1 >= w[1].1)),
        "a context sorts by users within each SLO, most first: {down:?}"
    );
    let up = users(&site.get_json(&mine("&context=8K&sort=users&dir=asc")).await);
    assert!(up.windows(2).all(|w| w[0].0 < w[1].0 || (w[0].0 == w[1].0 && w[0].1 <= w[1].1)), "{up:?}");
    let mut sorted = down.clone();
    sorted.sort_unstable();
    assert_eq!(up, sorted, "8K and 8192 are the same context");
    // 1K: the 1.1 run and the reference file measured it, the sample did not
    let at_1k = ids(&site.get_json(&mine("&context=1k")).await);
    assert!(at_1k.contains(fresh) && !at_1k.contains(old), "{at_1k:?}");
    let bench_has_1k = answers(listed(&site.get_json(&mine("")).await, bench)).iter().any(|a| a.0 == 1024);
    assert_eq!(at_1k.contains(bench), bench_has_1k, "{at_1k:?}");
    assert_eq!(site.get_json(&mine("&context=12345")).await["total"], 0, "a context nobody measured");
    // paging a sorted context keeps the order
    let second = site.get_json(&mine("&context=8192&per_page=1&page=2")).await;
    assert_eq!(users(&second), [down[1].clone()], "{second}");

    // the page: every run's answers with what bounds them, a sortable column once a context is chosen
    let (status, html) = site.get(&format!("/?uploader={who}")).await;
    assert_eq!(status, StatusCode::OK);
    assert!(html.contains("Capacity (users)") && html.contains("name=\"context\""), "{html}");
    assert!(html.contains("1K: 4<") && html.contains("8K: 4<"), "{html}");
    assert!(html.contains(">tok/s</abbr>") && html.contains(">KV</abbr>"), "{html}");
    assert!(html.contains("tok_s_p10&gt;=400") && html.contains("ttft_p90&lt;=2s"), "each run's SLO: {html}");
    assert!(html.contains("context=8K&amp;sort=users&amp;dir=desc"), "each answer leads to its context's name: {html}");
    let (status, html) = site.get(&format!("/?uploader={who}&context=8K")).await;
    assert_eq!(status, StatusCode::OK);
    assert!(html.contains("Users at 8K ↓") && html.contains("aria-sort=\"descending\""), "{html}");
    assert!(!html.contains("1K: 4<"), "only the chosen context's answer: {html}");
    assert_eq!(html.contains(&format!("/runs/{bench}\"")), bench_has_8k, "{html}");
    assert!(html.contains(&format!("1–{expected} of {expected}")), "{html}");
}

/// Every parameter that is not valid is a 400 that says what to send, as JSON and as a page.
async fn bad_parameters(site: &Site, who: &str) {
    for (query, why) in [
        ("context=abc", "or its exact tokens, e.g. 32K"),
        ("context=256K%20(x)", "context must be"),
        ("slo=fast", "slo must be an SLO expression"),
        ("context=0", "context must be"),
        ("context=-5", "context must be"),
        ("context=99999999999999999999", "context must be"),
        ("context=1e3", "context must be"),
        ("sort=users", "add context"),
        ("context=8K&sort=capacity", "sort must be one of"),
        ("context=8K&dir=up", "dir must be asc or desc"),
    ] {
        let (status, body) = site.get(&format!("/api/runs?uploader={who}&{query}")).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{query}: {body}");
        let v: Value = serde_json::from_str(&body).unwrap();
        assert!(v["error"].as_str().unwrap().contains(why), "{query}: {body}");
        let (status, page) = site.get(&format!("/?uploader={who}&{query}")).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{query}");
        assert!(page.contains("role=\"alert\"") && page.contains(why) && page.contains("</html>"), "{query}: {page}");
    }
    let (status, page) = site.get("/?context=%3Cscript%3Ealert(1)%3C/script%3E").await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert!(!page.contains("<script>alert") && page.contains("&lt;script&gt;alert(1)"), "{page}");
}

/// Answers that are not numbers, not known, or not backed by the run's cells are refused with
/// a 400 that names them, and nothing is stored.
async fn refused(site: &Site, token: &str) {
    let base: Value = serde_json::from_str(CAPACITY).unwrap();
    let over = base["decode"].as_array().unwrap().iter().position(|c| c["status"] == "over_capacity").unwrap();
    let valid = base["decode"].as_array().unwrap().iter().position(|c| c["status"] == "valid").unwrap();
    type Change = Box<dyn Fn(&mut Value)>;
    let cases: Vec<(Change, &str)> = vec![
        (Box::new(|v| v["capacity"][0]["bounded_by"] = json!("bogus")), "unknown bounded_by"),
        (Box::new(|v| v["capacity"][0]["bounded_by"] = json!("slo:<script>")), "unknown bound"),
        (Box::new(|v| v["capacity"][0]["max_users"] = json!(1000)), "not a measured cell"),
        (
            Box::new(|v| {
                v["capacity"][0]["max_users"] = json!(16);
                v["capacity"][0]["cell"] = json!(16);
            }),
            "met the SLO",
        ),
        (Box::new(|v| v["capacity"][1]["context"] = json!(1024)), "two answers"),
        (Box::new(|v| v["capacity"][0]["context"] = json!(4096)), "not a decode context"),
        (Box::new(|v| v["capacity"][0]["bounded_by"] = json!("matrix_top")), "does not follow from the cells"),
        (Box::new(move |v| v["decode"][valid]["slo_met"] = json!(false)), "slo_met is not whether every bound holds"),
        (
            Box::new(move |v| v["decode"][valid]["slo_bounds"][0]["limit"] = json!(1.0)),
            "not the bounds of settings.slo",
        ),
        (
            Box::new(move |v| {
                let holds = v["decode"][valid]["slo_bounds"][0]["holds"].as_bool().unwrap();
                v["decode"][valid]["slo_bounds"][0]["holds"] = json!(!holds);
            }),
            "slo_bounds says tok_s_p10",
        ),
        (Box::new(|v| v["capacity"][1]["fit_limit"] = json!(3)), "does not follow from the cells"),
        (Box::new(|v| v["capacity"][0]["max_users"] = json!(-1)), "invalid speedmatrix.run/1"),
        (Box::new(|v| v["capacity"][0]["usd_per_user_hour"] = json!(-2.5)), "usd_per_user_hour is -2.5"),
        (Box::new(|v| v["capacity"][0]["failed_cell"] = json!(64)), "failed_cell 64"),
        (Box::new(move |v| v["decode"][valid]["goodput_pct"] = json!(150.0)), "goodput_pct is 150"),
        (Box::new(move |v| v["decode"][valid]["usd_per_million_tokens"] = json!(1e300)), "usd_per_million_tokens is"),
        (Box::new(move |v| v["decode"][over]["slo_met"] = json!(true)), "yet carries slo_met"),
        (
            Box::new(move |v| v["decode"][valid]["slo_bounds"][0]["bound"] = json!("latency_p50")),
            "unknown bound \"latency_p50\"",
        ),
        (Box::new(|v| v["settings"]["slo"] = json!("speed>=3")), "not measure"),
        (Box::new(|v| v["settings"]["slo"] = json!("tok_s>=1e300")), "a limit is"),
        (Box::new(|v| v["settings"]["cost_per_hour_usd"] = Value::Null), "without settings.cost_per_hour_usd"),
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

/// Labels and bounds from a file are text on every page that shows an answer.
async fn hostile(site: &Site, token: &str, who: &str, old: &str) {
    let mut v: Value = serde_json::from_str(CAPACITY).unwrap();
    let evil = "<img src=x onerror=alert(3)>";
    for cell in v["decode"].as_array_mut().unwrap().iter_mut().filter(|c| c["context"] == 8192) {
        cell["label"] = json!(evil);
    }
    v["capacity"][1]["label"] = json!(evil);
    v["label"] = json!("hostile capacity labels");
    let id = site.upload(token, &v.to_string(), false).await;
    for path in
        [format!("/?uploader={who}"), format!("/?uploader={who}&context=8192"), format!("/compare?ids={id},{old}")]
    {
        let (status, html) = site.get(&path).await;
        assert_eq!(status, StatusCode::OK, "{path}");
        assert!(!html.contains("<img src=x"), "{path}: {html}");
        assert!(html.contains("&lt;img src=x onerror=alert(3)&gt;"), "{path}: {html}");
    }
}

/// The comparison puts the answers side by side, with costs where a run has them, and says
/// when the runs' SLOs differ.
async fn compare(site: &Site, [fresh, old, bench]: [&String; 3]) {
    let (status, html) = site.get(&format!("/compare?ids={fresh},{old}")).await;
    assert_eq!(status, StatusCode::OK);
    assert!(html.contains("id=\"capacity\"") && html.contains("8K context") && html.contains("1K context"), "{html}");
    let section = &html[html.find("id=\"capacity\"").unwrap()..html.find("id=\"settings\"").unwrap()];
    assert!(section.contains("used different SLOs") && section.contains("not comparable"), "{section}");
    assert!(section.contains("A: tok_s_p10&gt;=400; B: tok_s_p10&gt;=20,ttft_p90&lt;=2s"), "{section}");
    assert!(section.contains("$2.50 per user-hour") && section.contains("$1.62 per million tokens"), "{section}");
    assert!(
        section.contains("judged from every request's figures") && section.contains("judged after the fact"),
        "{section}"
    );
    assert!(section.contains(">4 users<") && section.contains(">KV</abbr>"), "{section}");
    assert!(section.contains("KV cache holds no more distinct users"), "{section}");
    // A measured no 128K context; B's answer there stands beside "not measured"
    assert!(section.contains("128K context") && section.contains("not measured"), "{section}");
    let old_record: RunRecord = serde_json::from_value(site.get_json(&format!("/api/runs/{old}")).await).unwrap();
    for a in old_record.capacity.iter().filter(|a| a.max_users > 0) {
        let users = sm_site::pages::capacity::users_phrase(a.max_users.into(), &a.bounded_by);
        assert!(section.contains(&format!(">{users}<")), "{a:?}: {section}");
    }
    // the same SLO: no warning
    let (_, html) = site.get(&format!("/compare?ids={old},{bench}")).await;
    let section = &html[html.find("id=\"capacity\"").unwrap()..html.find("id=\"settings\"").unwrap()];
    assert!(!section.contains("different SLOs") && !section.contains("per user-hour"), "{section}");
}

/// A run stored before the site kept answers (written here as the old site did) gets its
/// answer when the site starts, in the list and in its record.
async fn stored_before_answers(site: &Site, url: &str, who: &str) {
    let mut v: Value = serde_json::from_str(SAMPLE).unwrap();
    v["label"] = json!(unique("stored-before"));
    v["run_id"] = json!(site.tag);
    let record: RunRecord = serde_json::from_value(v).unwrap();
    let id = tokens::random_hex(6).unwrap();
    let json = serde_json::to_string(&record).unwrap();
    let stored = sm_site::ingest::index(&record, id.clone(), who, json);
    assert_eq!((stored.judged_from.as_str(), stored.capacity.len()), ("", 0));
    assert_eq!(site.db.insert_run(&stored).await.unwrap(), Inserted::New);
    let before = listed(&site.get_json(&format!("/api/runs?uploader={who}&per_page=200")).await, &id).clone();
    assert_eq!(before["capacity"], json!([]), "{before}");

    let (_restarted, addr) = serve(url).await;
    let list: Value = reqwest::get(format!("http://{addr}/api/runs?uploader={who}&per_page=200"))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let after = listed(&list, &id);
    assert_eq!(after["judged_from"], "summaries", "{after}");
    let record: Value = reqwest::get(format!("http://{addr}/api/runs/{id}")).await.unwrap().json().await.unwrap();
    assert_eq!(record["capacity"], expected_answer(SAMPLE));
    assert_eq!(answers(after).len(), record["capacity"].as_array().unwrap().len());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_capacity_answers() {
    let dir = tempfile::tempdir().unwrap();
    suite(&format!("sqlite://{}", dir.path().join("site.db").display())).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_capacity_answers() {
    if let Some((url, _one_suite)) = crate::site_common::postgres().await {
        suite(&url).await;
    }
}
