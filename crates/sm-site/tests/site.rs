//! The results site through HTTP against a real server on 127.0.0.1: upload →
//! list → view → compare, the upload form, and hostile input (escaped text,
//! 413, 401, 400, with the database unchanged after each). Runs on SQLite
//! always and on PostgreSQL when `SPEEDMATRIX_TEST_POSTGRES` names a database
//! (required under CI=true).

use std::io::Write;
use std::net::SocketAddr;

use reqwest::StatusCode;
use serde_json::{Value, json};
use sm_site::{Db, tokens};

const SAMPLE: &str = include_str!("../../../tests/data/run-sample.json");
const LIL: &str = include_str!("../../../tests/data/reference/ling-3.0-flash-int4-2xh200nvl.lil-bench-result.json");
const BENCH: &str = include_str!("../../../tests/data/reference/llm-inference-bench-0.4.18.vllm-cpu-tiny.json");

struct Site {
    db: Db,
    base: String,
    http: reqwest::Client,
}

async fn start(url: &str) -> Site {
    let db = Db::connect(url).await.expect("connect and migrate");
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr: SocketAddr = listener.local_addr().unwrap();
    let served = db.clone();
    tokio::spawn(async move { sm_site::serve(served, listener, std::future::pending()).await });
    let http = reqwest::Client::builder().redirect(reqwest::redirect::Policy::none()).build().unwrap();
    Site { db, base: format!("http://{addr}"), http }
}

impl Site {
    async fn get(&self, path: &str) -> (StatusCode, String) {
        let r = self.http.get(format!("{}{path}", self.base)).send().await.unwrap();
        (r.status(), r.text().await.unwrap())
    }

    async fn get_json(&self, path: &str) -> Value {
        let (status, body) = self.get(path).await;
        assert_eq!(status, StatusCode::OK, "{path}: {body}");
        serde_json::from_str(&body).unwrap()
    }

    async fn post(&self, token: &str, body: Vec<u8>, gzip: bool) -> (StatusCode, Value) {
        let mut req = self.http.post(format!("{}/api/runs", self.base)).bearer_auth(token).body(body);
        if gzip {
            req = req.header("content-encoding", "gzip");
        }
        let r = req.send().await.unwrap();
        let status = r.status();
        let text = r.text().await.unwrap();
        (status, serde_json::from_str(&text).unwrap_or_else(|_| json!({ "raw": text })))
    }

    async fn upload(&self, token: &str, text: &str, gzip: bool) -> String {
        let body = if gzip { gz(text.as_bytes()) } else { text.as_bytes().to_vec() };
        let (status, v) = self.post(token, body, gzip).await;
        assert_eq!(status, StatusCode::CREATED, "{v}");
        let id = v["id"].as_str().unwrap().to_string();
        assert_eq!(v["url"].as_str().unwrap(), format!("{}/runs/{id}", self.base));
        id
    }

    async fn rows(&self) -> i64 {
        self.db.count_runs().await.unwrap()
    }
}

fn gz(bytes: &[u8]) -> Vec<u8> {
    let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    e.write_all(bytes).unwrap();
    e.finish().unwrap()
}

/// A name no earlier run of the suite used: a PostgreSQL database outlives the test.
fn unique(prefix: &str) -> String {
    format!("{prefix}-{}", tokens::random_hex(4).unwrap())
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

    // list, through the API: filters, sorting, pagination
    let mine = |q: &str| format!("/api/runs?uploader={who}{q}");
    let all = site.get_json(&mine("")).await;
    assert_eq!(all["total"], 3, "{all}");
    assert!(all["runs"].as_array().unwrap().iter().all(|r| r["uploader"] == who.as_str()));
    let h200 = site.get_json(&mine("&gpu=h200&engine=VLLM")).await;
    let ids: Vec<&str> = h200["runs"].as_array().unwrap().iter().map(|r| r["id"].as_str().unwrap()).collect();
    assert_eq!(h200["total"], 2, "{h200}");
    assert!(ids.contains(&sample.as_str()) && ids.contains(&lil.as_str()));
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
    let (status, body) = site.get(&mine("&sort=id;drop")).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");

    // list, as the page: filtered, with the run and a sort link
    let (status, html) = site.get(&format!("/?uploader={who}&model=ling")).await;
    assert_eq!(status, StatusCode::OK);
    assert!(html.contains(&format!("/runs/{sample}")) && html.contains(&format!("/runs/{lil}")), "{html}");
    assert!(!html.contains(&format!("/runs/{bench}")));
    assert!(html.contains("sort=peak") && html.contains("1–2 of 2"), "{html}");

    // view: the report's page, its downloads and the API's JSON
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
    assert_eq!(record["schema"], "speedmatrix.run/1");
    assert_eq!(record["server"]["extra"]["uploader"], who.as_str());
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

    // the upload form
    let form = reqwest::multipart::Form::new()
        .text("token", token.clone())
        .part("file", reqwest::multipart::Part::bytes(SAMPLE.as_bytes().to_vec()).file_name("run.json"));
    let r = site.http.post(format!("{}/upload", site.base)).multipart(form).send().await.unwrap();
    assert_eq!(r.status(), StatusCode::SEE_OTHER);
    let location = r.headers()["location"].to_str().unwrap().to_string();
    assert_eq!(site.get(&location).await.0, StatusCode::OK);
    assert_eq!(site.get_json(&mine("")).await["total"], 4);

    hostile(&site, &token, &who).await;
    site.db.close().await;
}

async fn hostile(site: &Site, token: &str, who: &str) {
    // a model name and label that are markup render as text everywhere
    let mut v: Value = serde_json::from_str(SAMPLE).unwrap();
    // no '/': the page names a model by the last part of its path
    v["server"]["model"] = "<script>alert(1)".into();
    v["launch_command"] = Value::Null;
    v["label"] = "<img src=x onerror=alert(2)>".into();
    let id = site.upload(token, &v.to_string(), false).await;
    for path in [format!("/runs/{id}"), format!("/?uploader={who}"), format!("/compare?ids={id},{id}x")] {
        let (_, html) = site.get(&path).await;
        if path.starts_with("/compare") {
            continue; // the second id is unknown: only the page above matters
        }
        assert!(!html.contains("<script>alert") && !html.contains("<img src=x"), "{path}: {html}");
        assert!(html.contains("&lt;script&gt;alert(1)"), "{path}: {html}");
    }
    let (_, cmp) = site.get(&format!("/compare?ids={id},{id}")).await;
    assert!(!cmp.contains("<script>alert") && cmp.contains("&lt;script&gt;"), "{cmp}");

    let before = site.rows().await;
    // 40 MiB: refused, whatever its content
    let (status, v) = site.post(token, vec![b' '; 40 * 1024 * 1024], false).await;
    assert_eq!(status, StatusCode::PAYLOAD_TOO_LARGE, "{v}");
    assert_eq!(site.rows().await, before);
    // 40 MiB that gzip to a few KiB: refused after decompression
    let (status, _) = site.post(token, gz(&vec![b' '; 40 * 1024 * 1024]), true).await;
    assert_eq!(status, StatusCode::PAYLOAD_TOO_LARGE);
    assert_eq!(site.rows().await, before);
    // a wrong, a missing and a revoked token
    let (status, v) =
        site.post("smt_0000000000000000000000000000000000000000000000000000000000000000", SAMPLE.into(), false).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED, "{v}");
    let r = site.http.post(format!("{}/api/runs", site.base)).body(SAMPLE).send().await.unwrap();
    assert_eq!(r.status(), StatusCode::UNAUTHORIZED);
    let other = unique("revoked");
    let revoked = tokens::create(&site.db, &other).await.unwrap();
    assert!(site.db.revoke_token(&other).await.unwrap());
    assert_eq!(site.post(&revoked, SAMPLE.into(), false).await.0, StatusCode::UNAUTHORIZED);
    assert_eq!(site.rows().await, before);
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
    }
    // the form refuses the same way and shows why
    let form = reqwest::multipart::Form::new()
        .text("token", "smt_wrong")
        .part("file", reqwest::multipart::Part::bytes(SAMPLE.as_bytes().to_vec()).file_name("run.json"));
    let r = site.http.post(format!("{}/upload", site.base)).multipart(form).send().await.unwrap();
    assert_eq!(r.status(), StatusCode::UNAUTHORIZED);
    assert!(r.text().await.unwrap().contains("Not uploaded"));
    // SQL in a filter is only text
    let injected = site.get_json("/api/runs?model=%27%20OR%201%3D1%20--").await;
    assert_eq!(injected["total"], 0, "{injected}");
    // a write that fails (a duplicate id) leaves nothing behind
    let mut dup = site.db.get_run(&id).await.unwrap().unwrap();
    dup.model = "should not appear".into();
    assert!(site.db.insert_run(&dup).await.is_err());
    assert_eq!(site.db.get_run(&id).await.unwrap().unwrap().model, "<script>alert(1)");
    assert_eq!(site.rows().await, before);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_upload_list_view_compare_and_hostile_input() {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite://{}", dir.path().join("site.db").display());
    suite(&url).await;
    // reopening migrates nothing twice and keeps the runs
    let db = Db::connect(&url).await.unwrap();
    assert!(db.count_runs().await.unwrap() >= 5);
    db.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_upload_list_view_compare_and_hostile_input() {
    match std::env::var("SPEEDMATRIX_TEST_POSTGRES") {
        Ok(url) if !url.trim().is_empty() => suite(url.trim()).await,
        _ if std::env::var("CI").as_deref() == Ok("true") => {
            panic!("CI=true but SPEEDMATRIX_TEST_POSTGRES is not set: run scripts/postgres-test.sh")
        }
        _ => eprintln!("skipped: set SPEEDMATRIX_TEST_POSTGRES=postgres://… (scripts/postgres-test.sh does)"),
    }
}

#[tokio::test]
async fn tokens_are_stored_as_hashes_only() {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite://{}", dir.path().join("t.db").display());
    let db = Db::connect(&url).await.unwrap();
    let token = tokens::create(&db, "carol").await.unwrap();
    assert!(matches!(tokens::create(&db, "bad name").await, Err(sm_site::SiteError::BadTokenName(_))));
    assert_eq!(tokens::check(&db, &token).await.unwrap().as_deref(), Some("carol"));
    db.close().await;
    let raw = std::fs::read(dir.path().join("t.db")).unwrap();
    let hay = String::from_utf8_lossy(&raw);
    assert!(!hay.contains(&token[4..]), "the token itself is in the database file");
    assert!(hay.contains(&tokens::hash(&token)));
    // a revoked name can be given a new token; the old one stays dead
    let db = Db::connect(&url).await.unwrap();
    assert!(db.revoke_token("carol").await.unwrap());
    assert!(!db.revoke_token("carol").await.unwrap());
    let again = tokens::create(&db, "carol").await.unwrap();
    assert_eq!(tokens::check(&db, &token).await.unwrap(), None);
    assert_eq!(tokens::check(&db, &again).await.unwrap().as_deref(), Some("carol"));
    let list = db.list_tokens().await.unwrap();
    assert_eq!(list.len(), 1);
    assert!(list[0].revoked_at.is_none());
    db.close().await;
}
