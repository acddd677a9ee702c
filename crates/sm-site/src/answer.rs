//! Every stored run carries the capacity answer (methodology §11.3). A run
//! recorded with speedmatrix.run/1.1 brings its own, judged from each
//! request's figures; one without (recorded before 1.1, or imported from a
//! reference tool) is judged from its cells' p50/p90/p99 summaries against
//! the default SLO by the one judging step every command takes
//! ([`sm_report::judge`]), once, when it is stored — or, for a run stored
//! before the site kept answers, when the site starts.

use serde_json::Value;
use sm_core::answer::capacities;
use sm_core::record::{RunRecord, SCHEMA, schema_readable};
use sm_report::meta::SLO_JUDGED_FROM;

use crate::SiteError;
use crate::db::{CapacityRow, Db};

const SUMMARIES: &str = "summaries";

/// What a run's cells were judged from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum JudgedFrom {
    /// Every request's own figures, as the run measured the cell (with goodput).
    Requests,
    /// The cells' p50/p90/p99 summaries, after the fact (no goodput, no search).
    Summaries,
}

impl JudgedFrom {
    pub fn name(self) -> &'static str {
        match self {
            JudgedFrom::Requests => "requests",
            JudgedFrom::Summaries => SUMMARIES,
        }
    }

    fn of(record: &RunRecord) -> JudgedFrom {
        match record.server.extra.get(SLO_JUDGED_FROM) {
            Some(Value::String(_)) => JudgedFrom::Summaries,
            _ => JudgedFrom::Requests,
        }
    }
}

/// What the runs table indexes of a run's answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Answer {
    pub slo: String,
    pub judged_from: JudgedFrom,
    pub capacity: Vec<CapacityRow>,
}

/// Gives `record` its answer if it has none, and returns it. A record that was judged (when it
/// was measured, or by an import) keeps its judgement (its `capacity[]` computed from its cells
/// if it left it out); one that was not is judged as `speedmatrix report` judges it: from its
/// summaries against the default SLO, or at the median for a file of medians only.
pub fn ensure(record: &mut RunRecord) -> Result<Answer, String> {
    if record.settings.slo.is_some() {
        if record.capacity.is_empty() {
            record.capacity = capacities(record);
        }
    } else {
        sm_report::judge(record, &sm_report::Judging::default()).map_err(|e| e.to_string())?;
    }
    // a record older than the fields it now holds says the schema that has them
    if minor(&record.schema).is_some_and(|m| minor(SCHEMA).is_some_and(|ours| m < ours)) {
        record.schema = SCHEMA.to_string();
    }
    Ok(Answer {
        slo: record.settings.slo.as_ref().map(ToString::to_string).unwrap_or_default(),
        judged_from: JudgedFrom::of(record),
        capacity: rows(record),
    })
}

/// The minor version of a readable schema: `speedmatrix.run/1` is 0, `/1.1` is 1.
fn minor(schema: &str) -> Option<u32> {
    if !schema_readable(schema) {
        return None;
    }
    let rest = schema.strip_prefix("speedmatrix.run/1")?;
    if rest.is_empty() { Some(0) } else { rest.strip_prefix('.')?.parse().ok() }
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
            bounded_by: c.bounded_by.clone(),
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
                Ok((json, a)) => db.set_answer(&id, &json, &a.slo, a.judged_from.name(), &a.capacity).await?,
                Err(e) => {
                    tracing::warn!(id = %id, "stored run has no capacity answer: {e}");
                    db.set_answer(&id, &text, "", "none", &[]).await?;
                }
            }
            done += 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn schema_minors() {
        assert_eq!(minor("speedmatrix.run/1"), Some(0));
        assert_eq!(minor("speedmatrix.run/1.1"), Some(1));
        assert_eq!(minor("speedmatrix.run/1.12"), Some(12));
        assert_eq!(minor("speedmatrix.run/2"), None);
        assert_eq!(minor("speedmatrix.run/1.x"), None);
    }

    /// A stored record of medians only (an old reference-tool file) is answered as the report
    /// answers it, at the median, and not refused for the percentiles it lacks.
    #[test]
    fn the_site_judges_a_record_as_the_report_does() {
        let text = include_str!("../../../tests/data/run-sample.json");
        let mut medians: RunRecord = serde_json::from_str(text).unwrap();
        for c in &mut medians.decode {
            (c.ttft_ms.p90, c.ttft_ms.p99, c.tbt_ms.p90, c.tbt_ms.p99) = (None, None, None, None);
        }
        let mut by_report = medians.clone();
        sm_report::judge(&mut by_report, &sm_report::Judging::default()).unwrap();
        let answer = ensure(&mut medians).unwrap();
        assert_eq!((&medians.decode, &medians.capacity), (&by_report.decode, &by_report.capacity));
        assert_eq!(medians.settings.slo, by_report.settings.slo);
        assert_eq!(answer.judged_from, JudgedFrom::Summaries);
        assert!(answer.slo.contains("p50") && !answer.capacity.is_empty(), "{answer:?}");
        assert_eq!(sm_report::meta::text(&medians, SLO_JUDGED_FROM), Some(sm_report::meta::MEDIANS));
    }

    #[test]
    fn an_old_record_is_judged_from_its_summaries_and_says_so() {
        let text = include_str!("../../../tests/data/run-sample.json");
        let mut record: RunRecord = serde_json::from_str(text).unwrap();
        let answer = ensure(&mut record).unwrap();
        assert_eq!(answer.judged_from, JudgedFrom::Summaries);
        assert_eq!(answer.slo, sm_core::slo::DEFAULT_SLO);
        assert_eq!(record.schema, SCHEMA);
        assert!(!answer.capacity.is_empty() && answer.capacity.len() == record.capacity.len());
        // judged once: a second pass changes nothing
        let again = ensure(&mut record.clone()).unwrap();
        assert_eq!(again, answer);
        // a newer minor is never written down to ours
        let mut newer = record.clone();
        newer.schema = "speedmatrix.run/1.9".into();
        ensure(&mut newer).unwrap();
        assert_eq!(newer.schema, "speedmatrix.run/1.9");
    }
}
