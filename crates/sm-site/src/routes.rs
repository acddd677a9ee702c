//! The site's routes: pages, downloads, the upload form and the JSON API.

use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::extract::multipart::Field;
use axum::extract::{DefaultBodyLimit, Multipart, Path, Query, Request, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::{Html, IntoResponse, Redirect, Response};
use axum::routing::get;
use futures_util::StreamExt;
use serde_json::json;
use sm_core::record::RunRecord;

use crate::db::{Db, Inserted, ListQuery, Sort, StoredRun};
use crate::ingest::{self, IngestError, MAX_BODY};
use crate::pages::{self, Nav, compare, runs, upload};
use crate::{SiteError, tokens, validate};

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

/// The site's routes. Every request must be done within `request_timeout`,
/// its body included.
pub fn router(db: Db, request_timeout: Duration) -> Router {
    Router::new()
        .route("/", get(runs_page))
        .route("/runs/{id}", get(run_page))
        .route("/runs/{id}/run.json", get(run_json))
        .route("/runs/{id}/measurements.csv", get(run_csv))
        .route("/runs/{id}/phases/{file}", get(run_phase_csv))
        .route("/runs/{id}/report.md", get(run_markdown))
        .route("/compare", get(compare_page))
        .route("/upload", get(upload_form).post(upload_post))
        .route("/api/runs", get(api_list).post(api_upload))
        .route("/api/runs/{id}", get(api_get))
        .fallback(not_found)
        // the API reads its body itself; the form's multipart reader needs room for the file
        .layer(DefaultBodyLimit::max(MAX_BODY + 64 * 1024))
        .layer(middleware::from_fn_with_state(request_timeout, deadline))
        .layer(middleware::from_fn(uniform_errors))
        .layer(middleware::map_response(security_headers))
        .with_state(db)
}

/// A request (a slow upload's body included) that is not done in time is
/// dropped, which rolls back whatever it had begun to write.
async fn deadline(State(limit): State<Duration>, req: Request, next: Next) -> Response {
    match tokio::time::timeout(limit, next.run(req)).await {
        Ok(r) => r,
        Err(_) => (
            StatusCode::REQUEST_TIMEOUT,
            format!("the request was not done within {} s; send the body faster or in a smaller file", limit.as_secs()),
        )
            .into_response(),
    }
}

/// One shape for every refusal, whoever made it (an extractor's rejection, a
/// method the route lacks, the deadline): JSON under `/api/`, an error page
/// elsewhere. Handlers' own refusals already have that shape and pass as they are.
async fn uniform_errors(req: Request, next: Next) -> Response {
    let api = req.uri().path().starts_with("/api/");
    let response = next.run(req).await;
    let status = response.status();
    if !(status.is_client_error() || status.is_server_error()) {
        return response;
    }
    let kind = response.headers().get(header::CONTENT_TYPE).and_then(|v| v.to_str().ok()).unwrap_or("");
    if (api && kind.starts_with("application/json")) || (!api && kind.starts_with("text/html")) {
        return response;
    }
    let (parts, body) = response.into_parts();
    let text = axum::body::to_bytes(body, 16 * 1024).await.unwrap_or_default();
    let text = String::from_utf8_lossy(&text).trim().to_string();
    let reason = status.canonical_reason().unwrap_or("Error");
    let failure = Failure::new(status, if text.is_empty() { reason.to_string() } else { text });
    let mut out = if api { failure.json() } else { failure.page(Nav::Runs, reason) };
    // keep what the refusal said besides its body (Allow on a 405, WWW-Authenticate)
    for (name, value) in &parts.headers {
        if name != header::CONTENT_TYPE && name != header::CONTENT_LENGTH {
            out.headers_mut().insert(name.clone(), value.clone());
        }
    }
    out
}

async fn security_headers(mut r: Response) -> Response {
    let h = r.headers_mut();
    h.insert(header::X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff"));
    h.insert(header::REFERRER_POLICY, HeaderValue::from_static("no-referrer"));
    h.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    if let Ok(csp) = HeaderValue::from_str(&pages::csp()) {
        h.insert(header::CONTENT_SECURITY_POLICY, csp);
    }
    r
}

async fn not_found(uri: axum::http::Uri) -> Response {
    if uri.path().starts_with("/api/") {
        return Failure::new(StatusCode::NOT_FOUND, "there is no such address in the API").json();
    }
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

/// A stored run to render: one stored before the size limits that exceeds
/// them is not rendered (its run.json still downloads), so no page costs more
/// than the limits allow.
async fn load_renderable(db: &Db, id: &str) -> Result<(StoredRun, RunRecord), Failure> {
    let (stored, record) = load(db, id).await?;
    if let Err(e) = validate::limits(&record) {
        let text = format!("This run is too large to show ({e}); its run.json is at /runs/{}/run.json.", stored.id);
        return Err(Failure::new(StatusCode::UNPROCESSABLE_ENTITY, text));
    }
    Ok((stored, record))
}

/// The runs list. A parameter that is not valid is a 400 whose page says why, above the
/// unfiltered list (so the page still leads somewhere).
async fn runs_page(State(db): State<Db>, Query(p): Query<runs::ListParams>) -> Response {
    let (q, notice) = match p.to_query() {
        Ok(q) => (q, None),
        Err(e) => (ListQuery::default(), Some(e)),
    };
    let status = if notice.is_some() { StatusCode::BAD_REQUEST } else { StatusCode::OK };
    let listed = match db.list_runs(&q).await {
        Ok(listed) => listed,
        Err(e) => return Failure::from(e).page(Nav::Runs, "Runs"),
    };
    match crate::rejudge::page(&db, &listed.0, q.filter.slo.as_deref()).await {
        Ok(again) => (status, Html(runs::page(&p, &q, &listed.0, &again, listed.1, notice.as_deref()))).into_response(),
        Err(e) => Failure::from(e).page(Nav::Runs, "Runs"),
    }
}

async fn run_page(State(db): State<Db>, Path(id): Path<String>) -> Response {
    match load_renderable(&db, &id).await {
        Ok((stored, record)) => {
            let links = run_links(&stored.id, &record);
            Html(sm_report::html_page(&record, &links)).into_response()
        }
        Err(f) => f.page(Nav::Runs, "Run not found"),
    }
}

/// The run page's links: the record, its CSVs as `speedmatrix report` writes them (no
/// `measurements.csv` for a run of load phases only, one CSV per phase that ran), the Markdown.
fn run_links(id: &str, record: &RunRecord) -> Vec<(String, String)> {
    let mut links = vec![("← All runs".to_string(), "/".to_string()), ("JSON".into(), format!("/runs/{id}/run.json"))];
    if sm_report::has_measurements(record) {
        links.push(("CSV".into(), format!("/runs/{id}/measurements.csv")));
    }
    for kind in record.phases.kinds() {
        let file = sm_report::phases::csv_file_name(kind);
        links.push((file.clone(), format!("/runs/{id}/phases/{file}")));
    }
    links.push(("Markdown".into(), format!("/runs/{id}/report.md")));
    links.push(("Compare with other runs".into(), format!("/compare?ids={id}")));
    links
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
    match load_renderable(&db, &id).await {
        Ok((stored, record)) if !sm_report::has_measurements(&record) => {
            let files: Vec<String> = record.phases.kinds().into_iter().map(sm_report::phases::csv_file_name).collect();
            let why = format!(
                "Run \"{}\" measured load phases only: it has no matrix rows. Its rows are in {} under /runs/{}/phases/.",
                stored.id,
                files.join(", "),
                stored.id
            );
            Failure::new(StatusCode::NOT_FOUND, why).page(Nav::Runs, "No measurements.csv")
        }
        Ok((stored, record)) => {
            download("text/csv; charset=utf-8", format!("measurements-{}.csv", stored.id), sm_report::csv(&record))
        }
        Err(f) => f.page(Nav::Runs, "Run not found"),
    }
}

/// One load phase's CSV (`rate.csv`, `burst.csv`, …), as `speedmatrix report` writes it beside
/// run.json; 404 for a phase the run did not measure.
async fn run_phase_csv(State(db): State<Db>, Path((id, file)): Path<(String, String)>) -> Response {
    match load_renderable(&db, &id).await {
        Ok((stored, record)) => match sm_report::phases::csv_files(&record).into_iter().find(|(name, _)| *name == file)
        {
            Some((name, text)) => download("text/csv; charset=utf-8", format!("{}-{name}", stored.id), text),
            None => {
                Failure::new(StatusCode::NOT_FOUND, format!("Run \"{}\" has no phase CSV of that name.", stored.id))
                    .page(Nav::Runs, "Not found")
            }
        },
        Err(f) => f.page(Nav::Runs, "Run not found"),
    }
}

async fn run_markdown(State(db): State<Db>, Path(id): Path<String>) -> Response {
    match load_renderable(&db, &id).await {
        Ok((stored, record)) => {
            download("text/markdown; charset=utf-8", format!("report-{}.md", stored.id), sm_report::markdown(&record))
        }
        Err(f) => f.page(Nav::Runs, "Run not found"),
    }
}

async fn compare_page(State(db): State<Db>, Query(pairs): Query<Vec<(String, String)>>) -> Response {
    // the runs in the order the address gives them: the first is the baseline (A)
    let mut ids: Vec<String> = Vec::new();
    let mut bad: Option<String> = None;
    for (_, v) in pairs.iter().filter(|(k, _)| k == "ids" || k == "id") {
        for id in v.split(',').map(str::trim).filter(|s| !s.is_empty()) {
            if !compare::is_run_id(id) {
                bad.get_or_insert_with(|| {
                    format!("\"{}\" is not a run's id: choose runs below.", id.chars().take(40).collect::<String>())
                });
            } else if !ids.iter().any(|x| x == id) && ids.len() <= compare::MAX_RUNS {
                ids.push(id.to_string());
            }
        }
    }
    let notice = if bad.is_some() {
        ids.clear();
        bad
    } else if ids.len() > compare::MAX_RUNS {
        Some(format!("Choose at most {} runs.", compare::MAX_RUNS))
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
        match load_renderable(&db, id).await {
            Ok((stored, record)) => chosen.push(compare::Compared { stored, record }),
            Err(f) => return f.page(Nav::Compare, "Compare runs"),
        }
    }
    Html(compare::page(&chosen)).into_response()
}

async fn upload_form() -> Response {
    Html(upload::page(None)).into_response()
}

/// The uploader's name for a live token, or the 401 that says it is not one.
async fn uploader_of(db: &Db, token: &str) -> Result<String, Failure> {
    match tokens::check(db, token).await? {
        Some(name) => Ok(name),
        None => Err(Failure::new(StatusCode::UNAUTHORIZED, "the token is missing, unknown or revoked")),
    }
}

/// Parses, checks, redacts and stores an upload by `uploader`: the stored run
/// and whether it was there already (the same run uploaded before).
async fn store(db: &Db, uploader: &str, body: &[u8], gzip: bool) -> Result<(String, bool), Failure> {
    let text = ingest::decode(body, gzip)?;
    let (_, stored) = ingest::prepare(&text, uploader)?;
    match db.insert_run(&stored).await? {
        Inserted::New => {
            tracing::info!(id = %stored.id, uploader = %stored.uploader, "stored a run");
            Ok((stored.id, false))
        }
        Inserted::Existing(id) => {
            tracing::info!(id = %id, uploader = %stored.uploader, "the run was stored before");
            Ok((id, true))
        }
    }
}

/// A short form field (the token), read whole only up to 4 KiB.
async fn small_field(mut field: Field<'_>) -> Result<String, Failure> {
    let mut bytes = Vec::new();
    while let Some(chunk) = field.chunk().await.map_err(|e| Failure::new(e.status(), e.body_text()))? {
        bytes.extend_from_slice(&chunk);
        if bytes.len() > 4096 {
            return Err(Failure::new(StatusCode::BAD_REQUEST, "the token field is too long"));
        }
    }
    Ok(String::from_utf8_lossy(&bytes).trim().to_string())
}

/// The upload form. The token comes first (the form sends its fields in that
/// order; a client may send `Authorization: Bearer` instead), so a file is read
/// only for a live token: a wrong token is refused before a large body arrives.
async fn upload_post(State(db): State<Db>, headers: HeaderMap, form: Multipart) -> Response {
    match read_form(&db, &headers, form).await {
        Ok((uploader, file)) => match store(&db, &uploader, &file, false).await {
            Ok((id, _)) => Redirect::to(&format!("/runs/{id}")).into_response(),
            Err(f) => form_failure(f),
        },
        Err(f) => form_failure(f),
    }
}

async fn read_form(db: &Db, headers: &HeaderMap, mut form: Multipart) -> Result<(String, Vec<u8>), Failure> {
    let multipart = |e: axum::extract::multipart::MultipartError| Failure::new(e.status(), e.body_text());
    let mut uploader = match bearer(headers) {
        Some(token) => Some(uploader_of(db, token).await?),
        None => None,
    };
    let mut file: Option<Vec<u8>> = None;
    while let Some(mut field) = form.next_field().await.map_err(multipart)? {
        let name = field.name().map(str::to_string);
        match name.as_deref() {
            Some("token") if uploader.is_none() => uploader = Some(uploader_of(db, &small_field(field).await?).await?),
            Some("file") => {
                if uploader.is_none() {
                    return Err(Failure::new(
                        StatusCode::UNAUTHORIZED,
                        "the token is missing: send the token field before the file",
                    ));
                }
                file = Some(field.bytes().await.map_err(multipart)?.to_vec());
            }
            // anything else is read past, not kept
            _ => while field.chunk().await.map_err(multipart)?.is_some() {},
        }
    }
    let Some(uploader) = uploader else {
        return Err(Failure::new(StatusCode::UNAUTHORIZED, "the token is missing, unknown or revoked"));
    };
    match file.filter(|f| !f.is_empty()) {
        Some(file) => Ok((uploader, file)),
        None => Err(Failure::new(StatusCode::BAD_REQUEST, "Choose a file to upload.")),
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
    let Some(token) = bearer(&headers) else {
        return Failure::new(StatusCode::UNAUTHORIZED, "send the upload token as Authorization: Bearer TOKEN").json();
    };
    // an unknown token is refused before its body is read
    let uploader = match uploader_of(&db, token).await {
        Ok(u) => u,
        Err(f) => return f.json(),
    };
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
    match store(&db, &uploader, &body, gzip).await {
        Ok((id, existing)) => {
            let url = run_url(&headers, &id);
            // the same run again (a retry whose answer was lost): its id, 200 instead of 201
            let status = if existing { StatusCode::OK } else { StatusCode::CREATED };
            let mut r = (status, axum::Json(json!({ "id": id, "url": url, "existing": existing }))).into_response();
            if let Ok(loc) = HeaderValue::from_str(&format!("/runs/{id}")) {
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
    let listed = match db.list_runs(&q).await {
        Ok(listed) => crate::rejudge::page(&db, &listed.0, q.filter.slo.as_deref()).await.map(|a| (listed, a)),
        Err(e) => Err(e),
    };
    match listed {
        Ok(((list, total), again)) => {
            let runs: Vec<serde_json::Value> = list
                .iter()
                .map(|r| {
                    let mut v = serde_json::to_value(r).unwrap_or_default();
                    v["url"] = json!(run_url(&headers, &r.id));
                    if let Some(a) = again.get(&r.id) {
                        v["rejudged"] = serde_json::to_value(a).unwrap_or_default();
                    }
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
