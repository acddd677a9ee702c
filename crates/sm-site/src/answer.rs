//! Every stored run carries the capacity answer (methodology §8.3). A run
//! recorded with speedmatrix.run/1.1 brings its own, judged from each
//! request's figures; one without (recorded before 1.1, or imported from a
//! reference tool) is judged here from its cells' p50/p90/p99 summaries
//! against the default SLO, once, when it is stored — or, for a run stored
//! before the site kept answers, when the site starts.

use sm_core::answer::{capacities, judge_from_summaries};
use sm_core::record::{RunRecord, SCHEMA};
use sm_core::slo::Slo;

use crate::SiteError;
use crate::db::{CapacityRow, Db};

/// Who judged a run's cells against its SLO.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum JudgedBy {
    /// The run, as it measured them, from every request's own figures.
    Run,
    /// The site, from the cells' summaries (no goodput, no search).
    Site,
}

impl JudgedBy {
    pub fn name(self) -> &'static str {
        match self {
            JudgedBy::Run => "run",
            JudgedBy::Site => "site",
        }
    }
}

/// What the runs table indexes of a run's answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Answer {
    pub slo: String,
    pub judged_by: JudgedBy,
    pub capacity: Vec<CapacityRow>,
}

/// Gives `record` its answer if it has none, and returns it. A record judged when it was
/// measured keeps its own (its `capacity[]` computed from its cells if it left it out).
pub fn ensure(record: &mut RunRecord) -> Result<Answer, String> {
    let judged_by = if record.settings.slo.is_some() {
        if record.capacity.is_empty() {
            record.capacity = capacities(record);
        }
        JudgedBy::Run
    } else {
        judge_from_summaries(record, &Slo::default())
            .map_err(|missing| format!("the default SLO names {} which cell summaries lack", missing.join(", ")))?;
        // the record now holds the fields 1.1 added
        record.schema = SCHEMA.to_string();
        JudgedBy::Site
    };
    Ok(Answer {
        slo: record.settings.slo.as_ref().map(ToString::to_string).unwrap_or_default(),
        judged_by,
        capacity: rows(record),
    })
}

/// The record's `capacity[]` as table rows (contexts are bounded by [`crate::validate`]).
pub fn rows(record: &RunRecord) -> Vec<CapacityRow> {
    record
        .capacity
        .iter()
        .map(|c| CapacityRow {
            context: i64::try_from(c.context).unwrap_or(i64::MAX),
            label: c.label.clone(),
            max_users: i64::from(c.max_users),
            bounded_by: c.bounded_by.to_string(),
        })
        .collect()
}

/// Works out the answer of every run stored before the site kept answers, a batch at a time.
/// A stored record that no longer parses is marked judged with no answer, so it is not read
/// again at every start. Returns how many runs were answered.
pub async fn backfill(db: &Db) -> Result<usize, SiteError> {
    let mut done = 0;
    loop {
        let batch = db.unanswered(32).await?;
        if batch.is_empty() {
            return Ok(done);
        }
        for (id, text) in batch {
            let parsed = serde_json::from_str::<RunRecord>(&text).map_err(|e| e.to_string());
            let outcome = parsed.and_then(|mut record| {
                let answer = ensure(&mut record)?;
                let json = serde_json::to_string(&record).map_err(|e| e.to_string())?;
                Ok((json, answer))
            });
            match outcome {
                Ok((json, a)) => db.set_answer(&id, &json, &a.slo, a.judged_by.name(), &a.capacity).await?,
                Err(e) => {
                    tracing::warn!(id = %id, "stored run has no capacity answer: {e}");
                    db.set_answer(&id, &text, "", "none", &[]).await?;
                }
            }
            done += 1;
        }
    }
}
