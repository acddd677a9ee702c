//! Storage: SQLite (a file, the default) or PostgreSQL through sqlx's `Any`
//! driver, so both run the same queries and the same migrations. Queries are
//! built at run time with bound parameters only (`$1`, which both accept);
//! the only text spliced into SQL comes from fixed whitelists.

use serde::Serialize;
use sqlx::AnyPool;
use sqlx::Connection;
use sqlx::Row;
use sqlx::any::AnyPoolOptions;

use sm_core::context::ContextQuery;

use crate::SiteError;

mod capacity;
pub use capacity::CapacityRow;
use sm_core::phases::replay::ReplayCapacity;

/// Embedded migrations, applied in order, each in its own transaction.
const MIGRATIONS: &[(i64, &str)] = &[
    (1, include_str!("../migrations/0001_runs_and_tokens.sql")),
    (2, include_str!("../migrations/0002_filter_indexes.sql")),
    (3, include_str!("../migrations/0003_content_hash.sql")),
    (4, include_str!("../migrations/0004_capacity.sql")),
    (5, include_str!("../migrations/0005_context_names.sql")),
    (6, include_str!("../migrations/0006_replay_capacity.sql")),
];

/// How long opening the database may take before it is reported unreachable.
pub const CONNECT_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(5);

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    Sqlite,
    Postgres,
}

#[derive(Debug, Clone)]
pub struct Db {
    pool: AnyPool,
    backend: Backend,
}

/// A run as stored: the index columns and the whole record as JSON.
#[derive(Debug, Clone, Serialize)]
pub struct StoredRun {
    pub id: String,
    pub uploaded_at: String,
    pub uploader: String,
    pub model: String,
    pub gpu: String,
    pub gpu_count: i64,
    pub engine: String,
    pub engine_version: String,
    pub measured_at: String,
    pub label: String,
    pub status: String,
    /// The best total tok/s of the decode matrix (0 when none was valid).
    pub peak_tok_s: f64,
    #[serde(skip)]
    pub record: String,
    /// What makes two uploads the same run ([`crate::identity`]); `None` for runs stored before it.
    #[serde(skip)]
    pub content_hash: Option<String>,
    /// The SLO the capacity answer used (its expression); `""` before the site has worked it out.
    pub slo: String,
    /// What the cells were judged from: [`crate::answer::JudgedFrom`]'s name; `""` as `slo`.
    pub judged_from: String,
    /// The capacity answer per decode context, context ascending (in a list: only the chosen
    /// context's, when the list is filtered by one).
    pub capacity: Vec<CapacityRow>,
    /// The capacity answer on a replayed trace, where the run has one (absent from the API's JSON
    /// of a run without, which reads as before).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub replay_capacity: Option<ReplayCapacity>,
}

/// Where an upload ended up.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Inserted {
    /// Stored under the id it was given.
    New,
    /// The same run was stored before, under this id; nothing was written.
    Existing(String),
}

/// Filters of the runs list. Free text (model, GPU, engine, label) matches
/// case-insensitive substrings, which scans the table; the uploader, engine
/// version and GPU count match exactly and the measurement dates (inclusive)
/// as a range, so those use their indexes.
#[derive(Debug, Clone, Default)]
pub struct Filter {
    pub model: Option<String>,
    pub gpu: Option<String>,
    pub gpu_count: Option<i64>,
    pub engine: Option<String>,
    pub engine_version: Option<String>,
    pub uploader: Option<String>,
    pub label: Option<String>,
    pub from: Option<time::Date>,
    pub to: Option<time::Date>,
    /// Only runs whose answer covers this decode context: by the name it was asked as (`256K`),
    /// its exact tokens, or both.
    pub context: Option<ContextQuery>,
    /// The viewer's SLO (its expression as [`sm_core::slo::Slo`] writes it): ranked by users,
    /// the runs judged under it come first; the others follow in their own SLOs' groups, and the
    /// page re-judges them under it where their figures can ([`crate::rejudge`]).
    pub slo: Option<String>,
}

/// A value bound to a statement's numbered parameter.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Bind {
    Text(String),
    Int(i64),
}

impl Bind {
    fn onto<'q>(
        self,
        q: sqlx::query::Query<'q, sqlx::Any, sqlx::any::AnyArguments<'q>>,
    ) -> sqlx::query::Query<'q, sqlx::Any, sqlx::any::AnyArguments<'q>> {
        match self {
            Bind::Text(t) => q.bind(t),
            Bind::Int(n) => q.bind(n),
        }
    }
}

/// The condition on `capacity`'s columns that picks the filter's context, its values appended
/// to `binds` (numbered after those already there).
pub(crate) fn context_condition(c: &ContextQuery, binds: &mut Vec<Bind>) -> String {
    let mut parts = Vec::new();
    if let Some(label) = &c.label {
        binds.push(Bind::Text(label.clone()));
        parts.push(format!("capacity.context_label = ${}", binds.len()));
    }
    if let Some(tokens) = c.tokens {
        binds.push(Bind::Int(i64::try_from(tokens).unwrap_or(i64::MAX)));
        parts.push(format!("capacity.context = ${}", binds.len()));
    }
    if parts.is_empty() { "1 = 0".into() } else { parts.join(" AND ") }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Sort {
    #[default]
    Measured,
    Uploaded,
    Model,
    Gpu,
    Engine,
    Peak,
    /// The most users at the filter's context (needs [`Filter::context`]).
    Users,
}

impl Sort {
    pub const ALL: [(Sort, &'static str); 7] = [
        (Sort::Measured, "measured"),
        (Sort::Uploaded, "uploaded"),
        (Sort::Model, "model"),
        (Sort::Gpu, "gpu"),
        (Sort::Engine, "engine"),
        (Sort::Peak, "peak"),
        (Sort::Users, "users"),
    ];

    pub fn parse(s: &str) -> Option<Sort> {
        Self::ALL.iter().find(|(_, name)| *name == s).map(|(k, _)| *k)
    }

    pub fn name(self) -> &'static str {
        Self::ALL.iter().find(|(k, _)| *k == self).map_or("measured", |(_, n)| n)
    }

    fn column(self) -> &'static str {
        match self {
            Sort::Measured => "measured_at",
            Sort::Uploaded => "uploaded_at",
            Sort::Model => "model",
            Sort::Gpu => "gpu",
            Sort::Engine => "engine",
            Sort::Peak => "peak_tok_s",
            Sort::Users => "max_users",
        }
    }
}

#[derive(Debug, Clone)]
pub struct ListQuery {
    pub filter: Filter,
    pub sort: Sort,
    pub descending: bool,
    /// 1-based.
    pub page: i64,
    pub per_page: i64,
}

impl Default for ListQuery {
    fn default() -> Self {
        ListQuery { filter: Filter::default(), sort: Sort::Measured, descending: true, page: 1, per_page: 25 }
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct TokenInfo {
    pub name: String,
    pub created_at: String,
    pub revoked_at: Option<String>,
}

const SUMMARY_COLUMNS: &str = "id, uploaded_at, uploader, model, gpu, gpu_count, engine, engine_version, \
    measured_at, label, status, peak_tok_s, slo, judged_from, replay_capacity";

/// Turns the accepted spellings of a database into a URL sqlx understands:
/// a bare path is an SQLite file, and an SQLite file is created when missing.
pub fn normalise_url(url: &str) -> String {
    let url = url.trim();
    let sqlite = if url.starts_with("postgres://") || url.starts_with("postgresql://") {
        return url.to_string();
    } else if url.starts_with("sqlite:") {
        url.to_string()
    } else {
        format!("sqlite://{url}")
    };
    if sqlite.contains("mode=") || sqlite.contains(":memory:") {
        sqlite
    } else if sqlite.contains('?') {
        format!("{sqlite}&mode=rwc")
    } else {
        format!("{sqlite}?mode=rwc")
    }
}

fn like_pattern(text: &str) -> String {
    let mut p = String::from("%");
    for ch in text.trim().to_lowercase().chars() {
        if matches!(ch, '%' | '_' | '\\') {
            p.push('\\');
        }
        p.push(ch);
    }
    p.push('%');
    p
}

/// A WHERE clause with its bound values, numbered from `$1`.
fn where_clause(f: &Filter) -> (String, Vec<Bind>) {
    let mut parts = Vec::new();
    let mut binds = Vec::new();
    let mut like = |column: &str, value: &Option<String>, parts: &mut Vec<String>| {
        if let Some(v) = value.as_deref().filter(|v| !v.trim().is_empty()) {
            binds.push(Bind::Text(like_pattern(v)));
            parts.push(format!("LOWER({column}) LIKE ${} ESCAPE '\\'", binds.len()));
        }
    };
    like("model", &f.model, &mut parts);
    like("gpu", &f.gpu, &mut parts);
    like("engine", &f.engine, &mut parts);
    like("label", &f.label, &mut parts);
    for (column, value) in [("uploader", &f.uploader), ("engine_version", &f.engine_version)] {
        if let Some(v) = value.as_deref().map(str::trim).filter(|v| !v.is_empty()) {
            binds.push(Bind::Text(v.to_string()));
            parts.push(format!("{column} = ${}", binds.len()));
        }
    }
    // RFC 3339 text sorts as time, so a day range is a plain range on the
    // column (which its index serves): from the first day to before the day after the last
    let until = f.to.and_then(|d| d.next_day());
    for (day, op) in [(f.from, ">="), (until, "<")] {
        if let Some(day) = day {
            binds.push(Bind::Text(day.to_string()));
            parts.push(format!("measured_at {op} ${}", binds.len()));
        }
    }
    if let Some(count) = f.gpu_count {
        binds.push(Bind::Int(count));
        parts.push(format!("gpu_count = ${}", binds.len()));
    }
    let clause = if parts.is_empty() { String::new() } else { format!(" WHERE {}", parts.join(" AND ")) };
    (clause, binds)
}

/// The runs list's one statement and its parameters (the filter's, then the page's size and
/// offset), numbered in that order. Filtered by a context, each run is joined to its answer there
/// (the shorter where two of its contexts share the name); sorted by users, the runs are
/// ranked within the SLO each was judged under (methodology §11.3): by SLO first (the viewer's
/// first, when they name one), then users.
fn list_statement(q: &ListQuery) -> (String, Vec<Bind>) {
    let (clause, mut binds) = where_clause(&q.filter);
    let from = match &q.filter.context {
        Some(c) => {
            let condition = context_condition(c, &mut binds);
            // by name alone two contexts of a run may match (10,000 and 10,100 tokens are both 9K):
            // the run is listed once, at the shorter, which its primary key finds
            let once = if c.tokens.is_none() {
                " AND NOT EXISTS (SELECT 1 FROM capacity twin WHERE twin.run_id = capacity.run_id \
                 AND twin.context < capacity.context AND twin.context_label = capacity.context_label)"
            } else {
                ""
            };
            format!("runs JOIN capacity ON capacity.run_id = runs.id AND {condition}{once}")
        }
        None => "runs".to_string(),
    };
    let users = if q.filter.context.is_some() { ", max_users" } else { "" };
    let dir = if q.descending { "DESC" } else { "ASC" };
    // without a context there is no one answer to sort by: the page refuses that earlier
    let column = if q.sort == Sort::Users && users.is_empty() { Sort::default().column() } else { q.sort.column() };
    let (group, outer) = match (&q.filter.slo, column == Sort::Users.column()) {
        (Some(viewer), true) => {
            binds.push(Bind::Text(viewer.clone()));
            let first = |col: &str| format!("CASE WHEN {col} = ${} THEN 0 ELSE 1 END ASC, {col} ASC, ", binds.len());
            (first("slo"), first("r.slo"))
        }
        (None, true) => ("slo ASC, ".to_string(), "r.slo ASC, ".to_string()),
        (_, false) => (String::new(), String::new()),
    };
    let n = binds.len();
    // the filter's parameters are numbered, so both sides share them
    let sql = format!(
        "SELECT t.total, r.* FROM (SELECT COUNT(*) AS total FROM {from}{clause}) t LEFT JOIN \
         (SELECT {SUMMARY_COLUMNS}{users} FROM {from}{clause} ORDER BY {group}{column} {dir}, id {dir} LIMIT ${} OFFSET ${}) r \
         ON 1 = 1 ORDER BY {outer}r.{column} {dir}, r.id {dir}",
        n + 1,
        n + 2
    );
    let per_page = q.per_page.clamp(1, 200);
    binds.extend([Bind::Int(per_page), Bind::Int((q.page.max(1) - 1).saturating_mul(per_page))]);
    (sql, binds)
}

fn summary(row: &sqlx::any::AnyRow, with_record: bool) -> Result<StoredRun, sqlx::Error> {
    Ok(StoredRun {
        id: row.try_get("id")?,
        uploaded_at: row.try_get("uploaded_at")?,
        uploader: row.try_get("uploader")?,
        model: row.try_get("model")?,
        gpu: row.try_get("gpu")?,
        gpu_count: row.try_get("gpu_count")?,
        engine: row.try_get("engine")?,
        engine_version: row.try_get("engine_version")?,
        measured_at: row.try_get("measured_at")?,
        label: row.try_get("label")?,
        status: row.try_get("status")?,
        peak_tok_s: row.try_get("peak_tok_s")?,
        record: if with_record { row.try_get("record")? } else { String::new() },
        content_hash: if with_record { row.try_get("content_hash")? } else { None },
        slo: row.try_get("slo")?,
        judged_from: row.try_get("judged_from")?,
        capacity: Vec::new(),
        replay_capacity: capacity::replay_from(&row.try_get::<String, _>("replay_capacity")?),
    })
}

impl Db {
    /// Opens (creating an SQLite file if needed) and migrates the database.
    pub async fn connect(url: &str) -> Result<Db, SiteError> {
        sqlx::any::install_default_drivers();
        let url = normalise_url(url);
        let backend = if url.starts_with("sqlite:") { Backend::Sqlite } else { Backend::Postgres };
        // SQLite has one writer at a time; more connections only queue on its lock.
        let max = if backend == Backend::Sqlite { 4 } else { 8 };
        // one connection first: the pool would retry a refused connection until its
        // acquire timeout and then report only "pool timed out", hiding why
        let mut first = tokio::time::timeout(CONNECT_TIMEOUT, sqlx::AnyConnection::connect(&url))
            .await
            .map_err(|_| SiteError::ConnectTimeout(CONNECT_TIMEOUT.as_secs()))?
            .map_err(SiteError::Connect)?;
        // migrated on that connection, before the pool opens any: an SQLite connection that
        // read the schema before a migration may prepare statements against the old one
        migrate(&mut first).await?;
        let _ = first.close().await;
        let pool = AnyPoolOptions::new()
            .max_connections(max)
            .acquire_timeout(CONNECT_TIMEOUT)
            .connect(&url)
            .await
            .map_err(SiteError::Connect)?;
        Ok(Db { pool, backend })
    }

    pub fn backend(&self) -> Backend {
        self.backend
    }

    /// Stores a run in one transaction: it is there whole or not at all. A run
    /// with the content hash of one stored before is not stored again (the
    /// unique index decides, so two uploads at once cannot both be stored).
    pub async fn insert_run(&self, run: &StoredRun) -> Result<Inserted, SiteError> {
        let mut tx = self.pool.begin().await?;
        let done = sqlx::query(
            "INSERT INTO runs (id, uploaded_at, uploader, model, gpu, gpu_count, engine, engine_version, \
             measured_at, label, status, peak_tok_s, record, content_hash, slo, judged_from, replay_capacity) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17) \
             ON CONFLICT (content_hash) DO NOTHING",
        )
        .bind(&run.id)
        .bind(&run.uploaded_at)
        .bind(&run.uploader)
        .bind(&run.model)
        .bind(&run.gpu)
        .bind(run.gpu_count)
        .bind(&run.engine)
        .bind(&run.engine_version)
        .bind(&run.measured_at)
        .bind(&run.label)
        .bind(&run.status)
        .bind(run.peak_tok_s)
        .bind(&run.record)
        .bind(run.content_hash.clone())
        .bind(&run.slo)
        .bind(&run.judged_from)
        .bind(capacity::replay_text(run.replay_capacity.as_ref()))
        .execute(&mut *tx)
        .await?;
        let outcome = if done.rows_affected() > 0 {
            capacity::insert(&mut tx, &run.id, &run.capacity).await?;
            Inserted::New
        } else {
            let id: String = sqlx::query("SELECT id FROM runs WHERE content_hash = $1")
                .bind(run.content_hash.clone())
                .fetch_one(&mut *tx)
                .await?
                .try_get(0)?;
            Inserted::Existing(id)
        };
        tx.commit().await?;
        Ok(outcome)
    }

    pub async fn get_run(&self, id: &str) -> Result<Option<StoredRun>, SiteError> {
        let row = sqlx::query(&format!("SELECT {SUMMARY_COLUMNS}, record, content_hash FROM runs WHERE id = $1"))
            .bind(id)
            .fetch_optional(&self.pool)
            .await?;
        let Some(mut run) = row.map(|r| summary(&r, true)).transpose()? else { return Ok(None) };
        run.capacity = self.capacity_of(std::slice::from_ref(&run.id), None).await?.remove(&run.id).unwrap_or_default();
        Ok(Some(run))
    }

    /// One page of runs (without their records) and how many match in all,
    /// from one statement: the count and the page are of the same moment
    /// however many uploads land meanwhile. The count is the left side of a
    /// join, so an empty page still brings it. Filtered by a context, the runs
    /// are joined to their answer there (its index serves the filter and the
    /// sort by users); each run's answers then come in one more query, bounded
    /// by the page's size.
    pub async fn list_runs(&self, q: &ListQuery) -> Result<(Vec<StoredRun>, i64), SiteError> {
        let (sql, binds) = list_statement(q);
        let mut list = sqlx::query(&sql);
        for b in binds {
            list = b.onto(list);
        }
        let rows = list.fetch_all(&self.pool).await?;
        let total: i64 = match rows.first() {
            Some(r) => r.try_get("total")?,
            None => 0,
        };
        let mut runs = Vec::with_capacity(rows.len());
        for r in &rows {
            if r.try_get::<Option<String>, _>("id")?.is_some() {
                runs.push(summary(r, false)?);
            }
        }
        let ids: Vec<String> = runs.iter().map(|r| r.id.clone()).collect();
        let mut answers = self.capacity_of(&ids, q.filter.context.as_ref()).await?;
        for run in &mut runs {
            run.capacity = answers.remove(&run.id).unwrap_or_default();
        }
        Ok((runs, total))
    }

    /// Every row of `runs` and `tokens`, whole and in a fixed order: a write
    /// that was refused must leave this unchanged.
    pub async fn snapshot(&self) -> Result<Vec<String>, SiteError> {
        let mut rows = Vec::new();
        let runs = sqlx::query(&format!("SELECT {SUMMARY_COLUMNS}, record, content_hash FROM runs ORDER BY id"))
            .fetch_all(&self.pool)
            .await?;
        for r in &runs {
            let run = summary(r, true)?;
            rows.push(format!("run {} {}", serde_json::to_string(&run).unwrap_or_default(), run.record));
        }
        rows.extend(self.capacity_snapshot().await?);
        let tokens = sqlx::query("SELECT name, hash, created_at, revoked_at FROM tokens ORDER BY name")
            .fetch_all(&self.pool)
            .await?;
        for r in &tokens {
            let (name, hash, created): (String, String, String) = (r.try_get(0)?, r.try_get(1)?, r.try_get(2)?);
            let revoked: Option<String> = r.try_get(3)?;
            rows.push(format!("token {name} {hash} {created} {revoked:?}"));
        }
        Ok(rows)
    }

    pub async fn count_runs(&self) -> Result<i64, SiteError> {
        Ok(sqlx::query("SELECT COUNT(*) FROM runs").fetch_one(&self.pool).await?.try_get(0)?)
    }

    /// Stores a token's hash under `name`. A revoked name may be given a new token.
    pub async fn add_token(&self, name: &str, hash: &str) -> Result<(), SiteError> {
        let mut tx = self.pool.begin().await?;
        let existing = sqlx::query("SELECT revoked_at FROM tokens WHERE name = $1")
            .bind(name)
            .fetch_optional(&mut *tx)
            .await?
            .map(|r| r.try_get::<Option<String>, _>(0))
            .transpose()?;
        let now = sm_core::record::now_rfc3339();
        match existing {
            Some(None) => return Err(SiteError::TokenExists(name.to_string())),
            Some(Some(_)) => {
                sqlx::query("UPDATE tokens SET hash = $1, created_at = $2, revoked_at = NULL WHERE name = $3")
                    .bind(hash)
                    .bind(now)
                    .bind(name)
                    .execute(&mut *tx)
                    .await?;
            }
            None => {
                sqlx::query("INSERT INTO tokens (name, hash, created_at) VALUES ($1, $2, $3)")
                    .bind(name)
                    .bind(hash)
                    .bind(now)
                    .execute(&mut *tx)
                    .await?;
            }
        }
        tx.commit().await?;
        Ok(())
    }

    pub async fn list_tokens(&self) -> Result<Vec<TokenInfo>, SiteError> {
        let rows =
            sqlx::query("SELECT name, created_at, revoked_at FROM tokens ORDER BY name").fetch_all(&self.pool).await?;
        rows.iter()
            .map(|r| Ok(TokenInfo { name: r.try_get(0)?, created_at: r.try_get(1)?, revoked_at: r.try_get(2)? }))
            .collect::<Result<_, sqlx::Error>>()
            .map_err(SiteError::from)
    }

    /// Whether a live token of that name was revoked.
    pub async fn revoke_token(&self, name: &str) -> Result<bool, SiteError> {
        let done = sqlx::query("UPDATE tokens SET revoked_at = $1 WHERE name = $2 AND revoked_at IS NULL")
            .bind(sm_core::record::now_rfc3339())
            .bind(name)
            .execute(&self.pool)
            .await?;
        Ok(done.rows_affected() > 0)
    }

    /// The name of the live token with this hash.
    pub async fn token_name(&self, hash: &str) -> Result<Option<String>, SiteError> {
        let row = sqlx::query("SELECT name FROM tokens WHERE hash = $1 AND revoked_at IS NULL")
            .bind(hash)
            .fetch_optional(&self.pool)
            .await?;
        Ok(row.map(|r| r.try_get(0)).transpose()?)
    }

    pub async fn close(&self) {
        self.pool.close().await;
    }
}

/// Applies the migrations not applied yet, each in its own transaction.
async fn migrate(conn: &mut sqlx::AnyConnection) -> Result<(), SiteError> {
    sqlx::query("CREATE TABLE IF NOT EXISTS sm_migrations (version BIGINT PRIMARY KEY, applied_at TEXT NOT NULL)")
        .execute(&mut *conn)
        .await?;
    for (version, sql) in MIGRATIONS {
        let mut tx = conn.begin().await?;
        let done: i64 = sqlx::query("SELECT COUNT(*) FROM sm_migrations WHERE version = $1")
            .bind(*version)
            .fetch_one(&mut *tx)
            .await?
            .try_get(0)?;
        if done > 0 {
            continue;
        }
        // Statements one by one: PostgreSQL's extended protocol takes one per query.
        for statement in statements(sql) {
            sqlx::query(&statement).execute(&mut *tx).await?;
        }
        sqlx::query("INSERT INTO sm_migrations (version, applied_at) VALUES ($1, $2)")
            .bind(*version)
            .bind(sm_core::record::now_rfc3339())
            .execute(&mut *tx)
            .await?;
        tx.commit().await?;
    }
    Ok(())
}

/// The statements of a migration, without `--` comment lines (which may hold
/// semicolons of their own).
fn statements(sql: &str) -> Vec<String> {
    let code: Vec<&str> = sql.lines().filter(|l| !l.trim_start().starts_with("--")).collect();
    code.join("\n").split(';').map(|s| s.trim().to_string()).filter(|s| !s.is_empty()).collect()
}

#[cfg(test)]
mod tests;
