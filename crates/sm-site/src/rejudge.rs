//! A page's runs judged under another SLO than the viewer's, re-judged under the viewer's where
//! their stored figures answer it exactly (methodology §11.3, [`sm_core::rejudge`]). Only the rows
//! of the page are re-judged, from their records read in one query: a page costs what it shows,
//! and nothing derived is stored.

use std::collections::{HashMap, HashSet};

use serde::Serialize;
use sm_core::record::RunRecord;
use sm_core::rejudge::{Measured, rejudge};
use sm_core::slo::Slo;

use crate::SiteError;
use crate::answer::{JudgedFrom, rows};
use crate::db::{CapacityRow, Db, StoredRun};

/// A run's answer under the viewer's SLO, worked out from its stored figures.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Rejudged {
    /// The answer per context (the list's contexts only, when it is filtered by one).
    Answer(Vec<CapacityRow>),
    /// Why its figures cannot answer the SLO: `cannot answer ttft_p90 (the run stored p50 only)`.
    Cannot(String),
}

/// How a run's cells were judged, from the runs table's `judged_from`; `None`: not judged.
pub fn measured(judged_from: &str) -> Option<Measured> {
    if judged_from == JudgedFrom::Requests.name() {
        Some(Measured::Requests)
    } else if judged_from == JudgedFrom::Summaries.name() {
        Some(Measured::Summaries)
    } else {
        None
    }
}

/// One run's answer under `slo`, at the contexts `shown` (its answer's rows on the page).
pub fn of(record: &RunRecord, slo: &Slo, how: Measured, shown: &[CapacityRow]) -> Rejudged {
    match rejudge(record, slo, how) {
        Ok(capacity) => {
            let mut judged = record.clone();
            judged.capacity = capacity;
            let contexts: HashSet<i64> = shown.iter().map(|r| r.context).collect();
            Rejudged::Answer(rows(&judged).into_iter().filter(|r| contexts.contains(&r.context)).collect())
        }
        Err(why) => Rejudged::Cannot(why.to_string()),
    }
}

/// The page's runs judged under another SLO than `slo` (the viewer's, as the list's query
/// validated it), each re-judged under it, by id.
pub async fn page(db: &Db, runs: &[StoredRun], slo: Option<&str>) -> Result<HashMap<String, Rejudged>, SiteError> {
    let Some(viewer) = slo.and_then(|s| s.parse::<Slo>().ok()) else { return Ok(HashMap::new()) };
    let asked = viewer.to_string();
    let others: Vec<&StoredRun> =
        runs.iter().filter(|r| r.slo != asked && measured(&r.judged_from).is_some()).collect();
    let ids: Vec<String> = others.iter().map(|r| r.id.clone()).collect();
    let records = db.records_of(&ids).await?;
    let mut out = HashMap::new();
    for run in others {
        let (Some(text), Some(how)) = (records.get(&run.id), measured(&run.judged_from)) else { continue };
        let answer = match serde_json::from_str::<RunRecord>(text) {
            Ok(record) => of(&record, &viewer, how, &run.capacity),
            Err(_) => Rejudged::Cannot("cannot answer: the stored record no longer reads".into()),
        };
        out.insert(run.id.clone(), answer);
    }
    Ok(out)
}

#[cfg(test)]
mod tests;
