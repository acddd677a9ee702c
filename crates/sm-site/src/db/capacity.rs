//! The `capacity` table: each run's answer per decode context, written with
//! the run (same transaction) and read for a page's runs only.

use std::collections::HashMap;

use serde::Serialize;
use sm_core::answer::BoundedBy;
use sm_core::phases::replay::ReplayCapacity;
use sqlx::Row;

use super::{Db, SiteError};

/// A run's answer at one decode context, as the list shows and sorts it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct CapacityRow {
    pub context: i64,
    pub label: String,
    /// The most simultaneous users whose cell met the SLO; 0 when none did.
    pub max_users: i64,
    /// What stopped it from being more; the column holds it as run.json's `bounded_by` writes it.
    pub bounded_by: BoundedBy,
}

/// The replay's answer as the `replay_capacity` column holds it: run.json's JSON, `''` for none.
pub(super) fn replay_text(cap: Option<&ReplayCapacity>) -> String {
    cap.and_then(|c| serde_json::to_string(c).ok()).unwrap_or_default()
}

/// The column read back; text this version cannot read is no answer, not a failed page.
pub(super) fn replay_from(text: &str) -> Option<ReplayCapacity> {
    if text.is_empty() { None } else { serde_json::from_str(text).ok() }
}

/// Writes a run's answer inside the transaction that stores the run.
pub(super) async fn insert(
    tx: &mut sqlx::Transaction<'_, sqlx::Any>,
    id: &str,
    rows: &[CapacityRow],
) -> Result<(), sqlx::Error> {
    for row in rows {
        sqlx::query(
            // two sites starting at once on one database may both answer a run stored before
            // answers: the second one's rows are the same, and are not an error
            "INSERT INTO capacity (run_id, context, context_label, max_users, bounded_by) VALUES ($1, $2, $3, $4, $5) \
             ON CONFLICT (run_id, context) DO NOTHING",
        )
        .bind(id)
        .bind(row.context)
        .bind(&row.label)
        .bind(row.max_users)
        .bind(row.bounded_by.to_string())
        .execute(&mut **tx)
        .await?;
    }
    Ok(())
}

fn row(r: &sqlx::any::AnyRow) -> Result<(String, CapacityRow), sqlx::Error> {
    Ok((
        r.try_get("run_id")?,
        CapacityRow {
            context: r.try_get("context")?,
            label: r.try_get("context_label")?,
            max_users: r.try_get("max_users")?,
            bounded_by: bounded_by(r)?,
        },
    ))
}

/// The column read once into its type: the site writes only answers it validated, so text that
/// does not parse is a database no site wrote, and an error rather than a guess.
fn bounded_by(r: &sqlx::any::AnyRow) -> Result<BoundedBy, sqlx::Error> {
    let text: String = r.try_get("bounded_by")?;
    text.parse().map_err(|e: String| sqlx::Error::ColumnDecode { index: "bounded_by".into(), source: e.into() })
}

const COLUMNS: &str = "run_id, context, context_label, max_users, bounded_by";

impl Db {
    /// The answers of `ids` (a page's runs), context ascending; only at `context` when given.
    pub async fn capacity_of(
        &self,
        ids: &[String],
        context: Option<&sm_core::context::ContextQuery>,
    ) -> Result<HashMap<String, Vec<CapacityRow>>, SiteError> {
        let mut out: HashMap<String, Vec<CapacityRow>> = HashMap::new();
        if ids.is_empty() {
            return Ok(out);
        }
        let mut binds: Vec<super::Bind> = ids.iter().map(|id| super::Bind::Text(id.clone())).collect();
        let marks: Vec<String> = (1..=ids.len()).map(|i| format!("${i}")).collect();
        let only = match context {
            Some(c) => format!(" AND {}", super::context_condition(c, &mut binds)),
            None => String::new(),
        };
        let sql = format!(
            "SELECT {COLUMNS} FROM capacity WHERE run_id IN ({}){only} ORDER BY run_id, context",
            marks.join(", ")
        );
        let mut q = sqlx::query(&sql);
        for b in binds {
            q = b.onto(q);
        }
        for r in q.fetch_all(&self.pool).await? {
            let (id, answer) = row(&r)?;
            out.entry(id).or_default().push(answer);
        }
        Ok(out)
    }

    /// The stored records of `ids` (a page's runs to re-judge), by id.
    pub async fn records_of(&self, ids: &[String]) -> Result<HashMap<String, String>, SiteError> {
        if ids.is_empty() {
            return Ok(HashMap::new());
        }
        let marks: Vec<String> = (1..=ids.len()).map(|i| format!("${i}")).collect();
        let sql = format!("SELECT id, record FROM runs WHERE id IN ({})", marks.join(", "));
        let mut q = sqlx::query(&sql);
        for id in ids {
            q = q.bind(id);
        }
        let rows = q.fetch_all(&self.pool).await?;
        rows.iter().map(|r| Ok((r.try_get(0)?, r.try_get(1)?))).collect::<Result<_, sqlx::Error>>().map_err(Into::into)
    }

    /// Up to `limit` runs stored before the site recorded answers: `(id, record)`.
    pub async fn unanswered(&self, limit: i64) -> Result<Vec<(String, String)>, SiteError> {
        let rows = sqlx::query("SELECT id, record FROM runs WHERE judged_from = '' ORDER BY id LIMIT $1")
            .bind(limit)
            .fetch_all(&self.pool)
            .await?;
        rows.iter().map(|r| Ok((r.try_get(0)?, r.try_get(1)?))).collect::<Result<_, sqlx::Error>>().map_err(Into::into)
    }

    /// Stores the answer worked out for a run stored before answers were, and its record with
    /// the answer in it, in one transaction. Its content hash stays: it is of the run as uploaded.
    pub async fn set_answer(
        &self,
        id: &str,
        record: &str,
        slo: &str,
        judged_from: &str,
        rows: &[CapacityRow],
    ) -> Result<(), SiteError> {
        let mut tx = self.pool.begin().await?;
        sqlx::query("UPDATE runs SET record = $1, slo = $2, judged_from = $3 WHERE id = $4")
            .bind(record)
            .bind(slo)
            .bind(judged_from)
            .bind(id)
            .execute(&mut *tx)
            .await?;
        sqlx::query("DELETE FROM capacity WHERE run_id = $1").bind(id).execute(&mut *tx).await?;
        insert(&mut tx, id, rows).await?;
        tx.commit().await?;
        Ok(())
    }

    /// Every row of `capacity`, in a fixed order, for [`Db::snapshot`].
    pub(super) async fn capacity_snapshot(&self) -> Result<Vec<String>, SiteError> {
        let rows = sqlx::query(&format!("SELECT {COLUMNS} FROM capacity ORDER BY run_id, context"))
            .fetch_all(&self.pool)
            .await?;
        rows.iter()
            .map(|r| row(r).map(|(id, a)| format!("capacity {id} {a:?}")))
            .collect::<Result<_, sqlx::Error>>()
            .map_err(Into::into)
    }
}
