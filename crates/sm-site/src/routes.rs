//! The site's routes: pages, downloads, the upload form and the JSON API.

use axum::Router;
use axum::body::Body;
use axum::extract::{DefaultBodyLimit, Multipart, Path, Query, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{Html, IntoResponse, Redirect, Response};
use axum::routing::get;
use futures_util::StreamExt;
use serde_json::json;
use sm_core::record::RunRecord;

use crate::db::{Db, ListQuery, Sort, StoredRun};
use crate::ingest::{self, IngestError, MAX_BODY};
use crate::pages::{self, Nav, compare, runs, upload};
use crate::{SiteError, tokens};

/// A refusal with its status; rendered as JSON by the API, as a page elsewhere.
#[derive(Debug)]
pub struct Failure {
    status: StatusCode,
    message: String,
}

impl Failure {
    fn new(status: StatusCode, message: impl Into<String>) -> Failure {
        Failure { status, message: message.into() }
    }

    fn json(self) -> Response {
        let mut r = (self.status, axum::Json(json!({ "error": self.message }))).into_response();
        if self.status == StatusCode::UNAUTHORIZED {
            r.headers_mut().insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
        }
        r
    }

    fn page(self, nav: Nav, title: &str) -> Response {
        (self.status, Html(pages::message(nav, title, &self.message))).into_response()
    }
}

impl From<SiteError> for Failure {
    fn from(e: SiteError) -> Failure {
        tracing::error!("{e}");
        Failure::new(StatusCode::INTERNAL_SERVER_ERROR, "the site's database failed; nothing was stored")
    }
}

impl From<IngestError> for Failure {
    fn from(e: IngestError) -> Failure {
        let status = match e {
            IngestError::TooLarge => StatusCode::PAYLOAD_TOO_LARGE,
            IngestError::Internal(_) => StatusCode::INTERNAL_SERVER_ERROR,
            _ => StatusCode::BAD_REQUEST,
        };
        Failure::new(status, e.to_string())
    }
}

pub fn router(db: Db) -> Router {
    Router::new()
        .route("/", get(runs_page))
        .route("/runs/{id}", get(run_page))
        .route("/runs/{id}/run.json", get(run_json))
        .route("/runs/{id}/measurements.csv", get(run_csv))
        .route("/runs/{id}/report.md", get(run_markdown))
        .route("/compare", get(compare_page))
        .route("/upload", get(upload_form).post(upload_post))
        .route("/api/runs", get(api_list).post(api_upload))
        .route("/api/runs/{id}", get(api_get))
        .fallback(not_found)
        // the API reads its body itself; the form's multipart reader needs room for the file
        .layer(DefaultBodyLimit::max(MAX_BODY + 64 * 1024))
        .layer(axum::middleware::map_response(security_headers))
        .with_state(db)
}

async fn security_headers(mut r: Response) -> Response {
    let h = r.headers_mut();
    h.insert(header::X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff"));
    h.insert(header::REFERRER_POLICY, HeaderValue::from_static("no-referrer"));
    h.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    if let Ok(csp) = HeaderValue::from_str(pages::CSP) {
        h.insert(header::CONTENT_SECURITY_POLICY, csp);
    }
    r
}

async fn not_found() -> Response {
    Failure::new(StatusCode::NOT_FOUND, "There is no such page.").page(Nav::Runs, "Not found")
}

/// The public address of a run, from the Host the client used.
fn run_url(headers: &HeaderMap, id: &str) -> String {
    let host = headers
        .get(header::HOST)
        .and_then(|h| h.to_str().ok())
        .filter(|h| h.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | ':' | '[' | ']')));
    let proto = match headers.get("x-forwarded-proto").and_then(|h| h.to_str().ok()) {
        Some("https") => "https",
        _ => "http",
    };
    match host {
        Some(h) => format!("{proto}://{h}/runs/{id}"),
        None => format!("/runs/{id}"),
    }
}

async fn load(db: &Db, id: &str) -> Result<(StoredRun, RunRecord), Failure> {
    let Some(stored) = db.get_run(id).await? else {
        return Err(Failure::new(StatusCode::NOT_FOUND, format!("There is no run \"{id}\".")));
    };
    let record: RunRecord = serde_json::from_str(&stored.record).map_err(|e| {
        tracing::error!("stored run {id} does not parse: {e}");
        Failure::new(StatusCode::INTERNAL_SERVER_ERROR, "the stored run cannot be read")
    })?;
    Ok((stored, record))
}

async fn runs_page(State(db): State<Db>, Query(p): Query<runs::ListParams>) -> Response {
    let (q, notice) = match p.to_query() {
        Ok(q) => (q, None),
        Err(e) => (ListQuery::default(), Some(e)),
    };
    match db.list_runs(&q).await {
        Ok((list, total)) => Html(runs::page(&p, &q, &list, total, notice.as_deref())).into_response(),
        Err(e) => Failure::from(e).page(Nav::Runs, "Runs"),
    }
}

async fn run_page(State(db): State<Db>, Path(id): Path<String>) -> Response {
    match load(&db, &id).await {
        Ok((stored, record)) => {
            let id = &stored.id;
            let links = [
                ("← All runs".to_string(), "/".to_string()),
                ("JSON".into(), format!("/runs/{id}/run.json")),
                ("CSV".into(), format!("/runs/{id}/measurements.csv")),
                ("Markdown".into(), format!("/runs/{id}/report.md")),
                ("Compare with other runs".into(), format!("/compare?ids={id}")),
            ];
            Html(sm_report::html_page(&record, &links)).into_response()
        }
        Err(f) => f.page(Nav::Runs, "Run not found"),
    }
}

fn download(content_type: &'static str, name: String, body: String) -> Response {
    let disposition = HeaderValue::from_str(&format!("inline; filename=\"{name}\""))
        .unwrap_or_else(|_| HeaderValue::from_static("inline"));
    ([(header::CONTENT_TYPE, HeaderValue::from_static(content_type)), (header::CONTENT_DISPOSITION, disposition)], body)
        .into_response()
}

async fn run_json(State(db): State<Db>, Path(id): Path<String>) -> Response {
    match load(&db, &id).await {
        Ok((stored, _)) => download("application/json", format!("run-{}.json", stored.id), stored.record),
        Err(f) => f.page(Nav::Runs, "Run not found"),
    }
}

async fn run_csv(State(db): State<Db>, Path(id): Path<String>) -> Response {
    match load(&db, &id).await {
        Ok((stored, record)) => {
            download("text/csv; charset=utf-8", format!("measurements-{}.csv", stored.id), sm_report::csv(&record))
        }
        Err(f) => f.page(Nav::Runs, "Run not found"),
    }
}

async fn run_markdown(State(db): State<Db>, Path(id): Path<String>) -> Response {
    match load(&db, &id).await {
        Ok((stored, record)) => {
            download("text/markdown; charset=utf-8", format!("report-{}.md", stored.id), sm_report::markdown(&record))
        }
        Err(f) => f.page(Nav::Runs, "Run not found"),
    }
}

async fn compare_page(State(db): State<Db>, Query(pairs): Query<Vec<(String, String)>>) -> Response {
    let mut ids: Vec<String> = Vec::new();
    for (k, v) in pairs.iter().filter(|(k, _)| k == "ids" || k == "id") {
        let _ = k;
        for id in v.split(',').map(str::trim).filter(|s| !s.is_empty()) {
            if !ids.iter().any(|x| x == id) {
                ids.push(id.to_string());
            }
        }
    }
    let notice = if ids.len() > compare::MAX_RUNS {
        Some(format!("Choose at most {} runs ({} were chosen).", compare::MAX_RUNS, ids.len()))
    } else if ids.len() == 1 {
        Some("Choose at least one more run.".to_string())
    } else {
        None
    };
    if ids.len() < 2 || ids.len() > compare::MAX_RUNS {
        let recent = ListQuery { sort: Sort::Uploaded, per_page: 50, ..ListQuery::default() };
        return match db.list_runs(&recent).await {
            Ok((list, _)) => Html(compare::picker(&list, &ids, notice.as_deref())).into_response(),
            Err(e) => Failure::from(e).page(Nav::Compare, "Compare runs"),
        };
    }
    let mut chosen = Vec::new();
    for id in &ids {
        match load(&db, id).await {
            Ok((stored, record)) => chosen.push(compare::Compared { stored, record }),
            Err(f) => return f.page(Nav::Compare, "Compare runs"),
        }
    }
    Html(compare::page(&chosen)).into_response()
}

async fn upload_form() -> Response {
    Html(upload::page(None)).into_response()
}

/// Parses, redacts and stores an upload by the owner of `token`.
async fn store(db: &Db, token: &str, body: &[u8], gzip: bool) -> Result<StoredRun, Failure> {
    let Some(uploader) = tokens::check(db, token).await? else {
        return Err(Failure::new(StatusCode::UNAUTHORIZED, "the token is missing, unknown or revoked"));
    };
    let text = ingest::decode(body, gzip)?;
    let (_, stored) = ingest::prepare(&text, &uploader)?;
    db.insert_run(&stored).await?;
    tracing::info!(id = %stored.id, uploader = %stored.uploader, "stored a run");
    Ok(stored)
}

async fn upload_post(State(db): State<Db>, mut form: Multipart) -> Response {
    let mut file: Option<Vec<u8>> = None;
    let mut token = String::new();
    loop {
        match form.next_field().await {
            Ok(Some(field)) => {
                let name = field.name().unwrap_or_default().to_string();
                match field.bytes().await {
                    Ok(bytes) if name == "file" => file = Some(bytes.to_vec()),
                    Ok(bytes) if name == "token" => token = String::from_utf8_lossy(&bytes).trim().to_string(),
                    Ok(_) => {}
                    Err(e) => return form_failure(Failure::new(e.status(), e.body_text())),
                }
            }
            Ok(None) => break,
            Err(e) => return form_failure(Failure::new(e.status(), e.body_text())),
        }
    }
    let Some(file) = file.filter(|f| !f.is_empty()) else {
        return form_failure(Failure::new(StatusCode::BAD_REQUEST, "Choose a file to upload."));
    };
    match store(&db, &token, &file, false).await {
        Ok(stored) => Redirect::to(&format!("/runs/{}", stored.id)).into_response(),
        Err(f) => form_failure(f),
    }
}

fn form_failure(f: Failure) -> Response {
    let status = f.status;
    let text = if status == StatusCode::PAYLOAD_TOO_LARGE {
        format!("The file is larger than {} MiB.", MAX_BODY / (1024 * 1024))
    } else {
        format!("Not uploaded: {}", f.message)
    };
    (status, Html(upload::page(Some(&text)))).into_response()
}

/// Reads at most `MAX_BODY` bytes. A larger body is read on (up to twice the
/// limit) and dropped, so the client is not cut off mid-send and sees the 413.
async fn read_body(headers: &HeaderMap, body: Body) -> Result<Vec<u8>, Failure> {
    let declared =
        headers.get(header::CONTENT_LENGTH).and_then(|v| v.to_str().ok()).and_then(|v| v.parse::<usize>().ok());
    let too_large = || Failure::from(IngestError::TooLarge);
    if declared.is_some_and(|n| n > 2 * MAX_BODY) {
        return Err(too_large());
    }
    let mut stream = body.into_data_stream();
    let mut buf = Vec::with_capacity(declared.unwrap_or(0).min(MAX_BODY));
    let mut seen = 0usize;
    while let Some(chunk) = stream.next().await {
        let chunk = chunk.map_err(|e| Failure::new(StatusCode::BAD_REQUEST, format!("cannot read the body: {e}")))?;
        seen += chunk.len();
        if seen > 2 * MAX_BODY {
            return Err(too_large());
        }
        if seen <= MAX_BODY {
            buf.extend_from_slice(&chunk);
        }
    }
    if seen > MAX_BODY { Err(too_large()) } else { Ok(buf) }
}

fn bearer(headers: &HeaderMap) -> Option<&str> {
    let value = headers.get(header::AUTHORIZATION)?.to_str().ok()?;
    let (scheme, token) = value.split_once(' ')?;
    scheme.eq_ignore_ascii_case("bearer").then_some(token.trim())
}

async fn api_upload(State(db): State<Db>, headers: HeaderMap, body: Body) -> Response {
    let Some(token) = bearer(&headers).map(str::to_string) else {
        return Failure::new(StatusCode::UNAUTHORIZED, "send the upload token as Authorization: Bearer TOKEN").json();
    };
    // an unknown token is refused before its body is read
    match tokens::check(&db, &token).await {
        Ok(Some(_)) => {}
        Ok(None) => return Failure::new(StatusCode::UNAUTHORIZED, "the token is unknown or revoked").json(),
        Err(e) => return Failure::from(e).json(),
    }
    let gzip = match headers.get(header::CONTENT_ENCODING).and_then(|v| v.to_str().ok()).map(str::trim) {
        None | Some("identity") => false,
        Some(e) if e.eq_ignore_ascii_case("gzip") => true,
        Some(e) => {
            return Failure::new(
                StatusCode::UNSUPPORTED_MEDIA_TYPE,
                format!("Content-Encoding {e} is not accepted; use gzip"),
            )
            .json();
        }
    };
    let body = match read_body(&headers, body).await {
        Ok(b) => b,
        Err(f) => return f.json(),
    };
    match store(&db, &token, &body, gzip).await {
        Ok(stored) => {
            let url = run_url(&headers, &stored.id);
            let mut r = (StatusCode::CREATED, axum::Json(json!({ "id": stored.id, "url": url }))).into_response();
            if let Ok(loc) = HeaderValue::from_str(&format!("/runs/{}", stored.id)) {
                r.headers_mut().insert(header::LOCATION, loc);
            }
            r
        }
        Err(f) => f.json(),
    }
}

async fn api_list(State(db): State<Db>, headers: HeaderMap, Query(p): Query<runs::ListParams>) -> Response {
    let q = match p.to_query() {
        Ok(q) => q,
        Err(e) => return Failure::new(StatusCode::BAD_REQUEST, e).json(),
    };
    match db.list_runs(&q).await {
        Ok((list, total)) => {
            let runs: Vec<serde_json::Value> = list
                .iter()
                .map(|r| {
                    let mut v = serde_json::to_value(r).unwrap_or_default();
                    v["url"] = json!(run_url(&headers, &r.id));
                    v
                })
                .collect();
            axum::Json(json!({ "runs": runs, "total": total, "page": q.page, "per_page": q.per_page })).into_response()
        }
        Err(e) => Failure::from(e).json(),
    }
}

async fn api_get(State(db): State<Db>, Path(id): Path<String>) -> Response {
    match db.get_run(&id).await {
        Ok(Some(stored)) => ([(header::CONTENT_TYPE, "application/json")], stored.record).into_response(),
        Ok(None) => Failure::new(StatusCode::NOT_FOUND, format!("there is no run \"{id}\"")).json(),
        Err(e) => Failure::from(e).json(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bearer_tokens() {
        let mut h = HeaderMap::new();
        assert_eq!(bearer(&h), None);
        h.insert(header::AUTHORIZATION, HeaderValue::from_static("Bearer  smt_x "));
        assert_eq!(bearer(&h), Some("smt_x"));
        h.insert(header::AUTHORIZATION, HeaderValue::from_static("Basic abc"));
        assert_eq!(bearer(&h), None);
    }

    #[test]
    fn urls_use_a_plain_host_only() {
        let mut h = HeaderMap::new();
        h.insert(header::HOST, HeaderValue::from_static("127.0.0.1:8080"));
        assert_eq!(run_url(&h, "ab"), "http://127.0.0.1:8080/runs/ab");
        h.insert(header::HOST, HeaderValue::from_static("evil\"/><x"));
        assert_eq!(run_url(&h, "ab"), "/runs/ab");
    }
}
