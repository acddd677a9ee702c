//! One step from a loaded record to its judged form: the service level its cells are judged
//! against (the one it was measured with; one the user asks for; or, for a record never judged,
//! the default from its summary figures), the capacity answer that follows, and the
//! memory-bandwidth roofline of a model shape. `run`, `report`, `import`, `compare` and the site
//! take every record through [`judge`] (the last three by reading it with [`crate::load_any`] or
//! [`crate::import_str`]), so a record is judged once, in one place, before it is rendered.

use std::path::Path;

use sm_core::answer::judge_from_summaries;
use sm_core::record::{CellStatus, RunRecord};
use sm_core::roofline_record::RecordedShape;
use sm_core::slo::Slo;

use crate::import::ImportError;
use crate::meta;

/// What the user asked of the judging: another service level (`--slo` of `report` or `import`),
/// a model shape for the roofline (`--model-config` or `--active-params` …). The default asks
/// for nothing: a record never judged is judged against the default service level.
#[derive(Debug, Clone, Default)]
pub struct Judging {
    pub slo: Option<Slo>,
    pub shape: Option<RecordedShape>,
}

/// Judges `record` as `how` asks. A record judged while it was measured keeps its judgement (and
/// another SLO is refused); the roofline replaces any recorded one. On `Err` from the roofline
/// (the record names no GPU, or one the table lacks) the record is judged but has no roofline.
pub fn judge(record: &mut RunRecord, how: &Judging) -> Result<(), ImportError> {
    match &how.slo {
        Some(slo) => judge_again(record, slo)?,
        None if record.settings.slo.is_none() => {
            let (slo, medians) = default_slo(record);
            judge_again(record, &slo)?;
            if medians {
                record.server.extra.insert(meta::SLO_JUDGED_FROM.into(), meta::MEDIANS.into());
            }
        }
        None => {}
    }
    if let Some(shape) = &how.shape {
        sm_core::roofline_record::apply(record, shape.clone())?;
    }
    Ok(())
}

/// Reads `path` in any accepted format and judges it as `how` asks, once: a record read for
/// another SLO is not first judged against the default.
pub fn load(path: &Path, how: &Judging) -> Result<RunRecord, ImportError> {
    let mut record = crate::import::read_any(path)?;
    judge(&mut record, how)?;
    Ok(record)
}

/// Reads a `run.json`, a run directory (its `run.json`), or a reference-tool file, judged as a
/// record is by default: a record never judged against the default service level.
pub fn load_any(path: &Path) -> Result<RunRecord, ImportError> {
    let mut record = crate::import::read_any(path)?;
    judge(&mut record, &Judging::default())?;
    Ok(record)
}

/// Reads a record from text in any accepted format, judged by default as [`load_any`] does.
pub fn import_str(text: &str) -> Result<RunRecord, ImportError> {
    let mut record = crate::import::import_with(text, &crate::import::Source::default())?;
    judge(&mut record, &Judging::default())?;
    Ok(record)
}

/// The SLO an unjudged record is judged against: the default, or, for a file whose cells carry
/// medians only (the reference tool's older files: no p90 or p99), the default's bounds taken at
/// the median, so that its cells get an answer rather than none (`true`: the page says so).
fn default_slo(record: &RunRecord) -> (Slo, bool) {
    let slo = Slo::default();
    let valid = || record.decode.iter().filter(|c| c.status() == CellStatus::Valid);
    let gives = |slo: &Slo| valid().all(|c| slo.judge_summary(&sm_core::answer::summary(c)).is_ok());
    if gives(&slo) {
        return (slo, false);
    }
    let medians = Slo { bounds: slo.bounds.iter().map(|b| sm_core::slo::Bound { percentile: 50, ..*b }).collect() };
    if valid().next().is_some() && gives(&medians) { (medians, true) } else { (slo, false) }
}

/// Judges a record that was not judged while it was measured (an imported file, a run recorded
/// before speedmatrix.run/1.1) against `slo`, from its cells' summary figures, replacing any
/// judgement made that way before (`--slo` of `report` and `import`). A run judged per request while it
/// was measured is refused: its summaries would give a different answer than its requests did.
fn judge_again(record: &mut RunRecord, slo: &Slo) -> Result<(), ImportError> {
    if record.settings.slo.is_some() && !meta::slo_from_summaries(record) {
        let slo = record.settings.slo.as_ref().map(ToString::to_string).unwrap_or_default();
        return Err(ImportError::SloJudgedWhenMeasured { slo });
    }
    let missing = slo.unjudgeable_from_summary();
    if !missing.is_empty() {
        return Err(ImportError::SloNotInSummaries { missing });
    }
    for cell in record.decode.iter_mut().filter(|c| c.status() == CellStatus::Valid) {
        cell.slo_met = None;
        cell.slo_bounds.clear();
    }
    record.settings.slo = None;
    judge_from_summaries(record, slo).map_err(|missing| ImportError::SloNotInSummaries { missing })?;
    record.server.extra.insert(meta::SLO_JUDGED_FROM.into(), "summaries".into());
    Ok(())
}
