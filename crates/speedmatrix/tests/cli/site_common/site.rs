//! A running site and the test's own connection to its database, with the
//! requests the site's HTTP tests make.

use std::io::Write;
use std::time::Duration;

use reqwest::StatusCode;
use reqwest::header::HeaderMap;
use serde_json::{Value, json};
use sm_site::{Db, tokens};

use super::{Server, serve};

/// A site's tests' own connection and the site they talk to.
pub struct Site {
    /// The test's own connection, for tokens and for reading every row.
    pub db: Db,
    /// Marks every file this site is sent, so that a PostgreSQL database an
    /// earlier suite left holds none of the same runs (uploads are idempotent).
    pub tag: String,
    pub base: String,
    pub http: reqwest::Client,
    pub _server: Server,
}

/// Migrates `url` here, then starts `speedmatrix serve` on it on a free port.
pub async fn start(url: &str) -> Site {
    let db = Db::connect(url).await.expect("connect and migrate");
    let (server, addr) = serve(url).await;
    let http = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .timeout(Duration::from_secs(120))
        .build()
        .unwrap();
    Site { db, tag: unique("suite"), base: format!("http://{addr}"), http, _server: server }
}

/// `text` with `tag` in a field each format keeps: a run's id, a lil-bench
/// note, an llm-inference-bench server's path.
pub fn mark(text: &str, tag: &str) -> String {
    let Ok(mut v) = serde_json::from_str::<Value>(text) else { return text.to_string() };
    if v["schema"].as_str().is_some_and(sm_core::record::schema_readable) {
        v["run_id"] = json!(tag);
    } else if v["client"].is_object() {
        v["client"]["note"] = json!(tag);
    } else if v["metadata"].is_object() {
        v["metadata"]["server"] = json!(format!("http://127.0.0.1/{tag}"));
    } else {
        return text.to_string();
    }
    serde_json::to_string_pretty(&v).unwrap()
}

impl Site {
    pub async fn get(&self, path: &str) -> (StatusCode, String) {
        let r = self.http.get(format!("{}{path}", self.base)).send().await.unwrap();
        (r.status(), r.text().await.unwrap())
    }

    pub async fn get_json(&self, path: &str) -> Value {
        let (status, body) = self.get(path).await;
        assert_eq!(status, StatusCode::OK, "{path}: {body}");
        serde_json::from_str(&body).unwrap()
    }

    pub async fn post_with(
        &self,
        token: &str,
        body: Vec<u8>,
        encoding: Option<&str>,
    ) -> (StatusCode, HeaderMap, Value) {
        let mut req = self.http.post(format!("{}/api/runs", self.base)).bearer_auth(token).body(body);
        if let Some(e) = encoding {
            req = req.header("content-encoding", e);
        }
        let r = req.send().await.unwrap();
        let (status, headers) = (r.status(), r.headers().clone());
        let text = r.text().await.unwrap();
        (status, headers, serde_json::from_str(&text).unwrap_or_else(|_| json!({ "raw": text })))
    }

    pub async fn post(&self, token: &str, body: Vec<u8>, gzip: bool) -> (StatusCode, Value) {
        let (status, _, v) = self.post_with(token, body, gzip.then_some("gzip")).await;
        (status, v)
    }

    /// Uploads a new run through the API; checks the 201's body and its Location.
    pub async fn upload(&self, token: &str, text: &str, gzip: bool) -> String {
        self.upload_expect(token, text, gzip, false).await
    }

    /// Uploads (marked); `existing`: the site must answer 200 with the run it had, else 201.
    pub async fn upload_expect(&self, token: &str, text: &str, gzip: bool, existing: bool) -> String {
        let text = mark(text, &self.tag);
        let body = if gzip { gz(text.as_bytes()) } else { text.as_bytes().to_vec() };
        let (status, headers, v) = self.post_with(token, body, gzip.then_some("gzip")).await;
        let expected = if existing { StatusCode::OK } else { StatusCode::CREATED };
        assert_eq!(status, expected, "{v}");
        assert_eq!(v["existing"], existing, "{v}");
        let id = v["id"].as_str().unwrap().to_string();
        assert!(id.len() == 12 && id.chars().all(|c| c.is_ascii_hexdigit()), "run ids are 12 hex digits: {id}");
        assert_eq!(v["url"].as_str().unwrap(), format!("{}/runs/{id}", self.base));
        assert_eq!(headers["location"].to_str().unwrap(), format!("/runs/{id}"));
        id
    }

    /// Posts the upload form (multipart, built by hand) with a token and a file.
    pub async fn upload_form(&self, token: &str, file_name: &str, file: &[u8]) -> reqwest::Response {
        let boundary = "speedmatrix-test-3f9c1e";
        let mut body = Vec::new();
        write!(body, "--{boundary}\r\ncontent-disposition: form-data; name=\"token\"\r\n\r\n{token}\r\n").unwrap();
        write!(
            body,
            "--{boundary}\r\ncontent-disposition: form-data; name=\"file\"; filename=\"{file_name}\"\r\n\
             content-type: application/json\r\n\r\n"
        )
        .unwrap();
        body.extend_from_slice(mark(&String::from_utf8_lossy(file), &self.tag).as_bytes());
        write!(body, "\r\n--{boundary}--\r\n").unwrap();
        self.http
            .post(format!("{}/upload", self.base))
            .header("content-type", format!("multipart/form-data; boundary={boundary}"))
            .body(body)
            .send()
            .await
            .unwrap()
    }

    pub async fn snapshot(&self) -> Vec<String> {
        self.db.snapshot().await.unwrap()
    }
}

pub fn gz(bytes: &[u8]) -> Vec<u8> {
    let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    e.write_all(bytes).unwrap();
    e.finish().unwrap()
}

/// A name no earlier run of the suite used: a PostgreSQL database outlives the test.
pub fn unique(prefix: &str) -> String {
    format!("{prefix}-{}", tokens::random_hex(4).unwrap())
}

pub fn ids(list: &Value) -> Vec<String> {
    list["runs"].as_array().unwrap().iter().map(|r| r["id"].as_str().unwrap().to_string()).collect()
}
