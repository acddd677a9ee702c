//! What the site accepts in a run, checked before anything is stored: the
//! record's size (so every page and export of a stored run costs little,
//! whoever uploaded it) and its figures as the schema defines them (finite,
//! non-negative, only `valid` cells and rows carry them). A refusal names the
//! limit or the figure, so the uploader knows what to change.

use std::collections::BTreeSet;

use serde_json::Value;
use sm_core::record::{CellStatus, DecodeCell, PrefillRow, RunRecord};

mod answer;
pub use answer::MAX_SLO_BOUNDS;
mod gpu;
mod phases;
pub use phases::{MAX_LIMITED_BY_BYTES, MAX_REPLAY_LEVELS};
mod precision;
pub use precision::MAX_REPEATS;
mod roofline;
mod sections;
pub use sections::{MAX_CONTEXT_TOKENS, bound};
mod server_metrics;
mod spec_decode;

/// Values one list flag of `speedmatrix run` may hold (`--contexts`, `--concurrency`,
/// `--prefill-contexts`): every run the tool can make must be accepted.
const RUN_LIST_MAX: usize = 32;
/// Distinct context lengths in a run (decode, prefill, plan and settings together): the
/// decode contexts, the prefill-only contexts and the prefill row at the model's maximum.
pub const MAX_CONTEXTS: usize = 2 * RUN_LIST_MAX + 8;
/// Distinct concurrency levels of a run's matrix (the cells `--find-capacity` searched aside).
pub const MAX_CONCURRENCY_LEVELS: usize = RUN_LIST_MAX;
/// Cells `--find-capacity` searched at one context: it doubles up to what fits and bisects down
/// to 5 %, at most about 24 levels each way even for a server that holds 2^24 streams.
pub const MAX_SEARCHED_PER_CONTEXT: usize = 64;
/// Decode cells: one per decode context and level of the matrix, and the searched ones.
pub const MAX_DECODE_CELLS: usize = RUN_LIST_MAX * (MAX_CONCURRENCY_LEVELS + MAX_SEARCHED_PER_CONTEXT);
/// Prefill rows: one per context.
pub const MAX_PREFILL_ROWS: usize = MAX_CONTEXTS;
/// Rows of the plan (the matrix's decode cells and prefill rows; searched cells are not planned).
pub const MAX_PLAN_ROWS: usize = RUN_LIST_MAX * MAX_CONCURRENCY_LEVELS + MAX_PREFILL_ROWS;
/// Lines of the run's event log.
pub const MAX_EVENTS: usize = 10_000;
/// Warnings of one decode cell.
pub const MAX_WARNINGS: usize = 32;
/// Bytes of any one text of the record (a label, a reason, an event, the launch command…).
pub const MAX_TEXT_BYTES: usize = 16 * 1024;

/// The largest figure taken for a measurement; above it a number is a typo or
/// an attack, and would top every sorted list. Far above any real server.
const MAX_TOK_S: f64 = 1e9;
const MAX_MS: f64 = 1e9;
const MAX_S: f64 = 1e8;

/// Why a run is refused.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum Refusal {
    #[error("the run holds {found} {what}; the site takes at most {limit} (limit {name})")]
    TooMany { what: &'static str, name: &'static str, found: usize, limit: usize },
    #[error(
        "{path} is {found} bytes long; the site takes at most {MAX_TEXT_BYTES} bytes per text (limit MAX_TEXT_BYTES)"
    )]
    TextTooLong { path: String, found: usize },
    #[error("{at}: {field} is {value}, not a measurement: figures are finite numbers from 0 to {max:e}")]
    BadFigure { at: String, field: &'static str, value: String, max: f64 },
    #[error("{at}: concurrency must be at least 1")]
    NoConcurrency { at: String },
    #[error("{at} is {status}, yet carries {field}: only valid cells and rows carry figures")]
    FigureOfInvalid { at: String, status: &'static str, field: &'static str },
    #[error("{at}: {why}")]
    Incoherent { at: String, why: String },
}

/// Every check: limits first (cheap, and they bound the rest), then figures.
pub fn check(record: &RunRecord) -> Result<(), Refusal> {
    limits(record)?;
    figures(record)
}

fn at_most(what: &'static str, name: &'static str, found: usize, limit: usize) -> Result<(), Refusal> {
    if found > limit { Err(Refusal::TooMany { what, name, found, limit }) } else { Ok(()) }
}

/// The size limits: what the pages of a run may cost. Also checked before a
/// stored run is rendered, so a run stored before the limits cannot slow the site.
pub fn limits(record: &RunRecord) -> Result<(), Refusal> {
    at_most("decode cells", "MAX_DECODE_CELLS", record.decode.len(), MAX_DECODE_CELLS)?;
    at_most("prefill rows", "MAX_PREFILL_ROWS", record.prefill.len(), MAX_PREFILL_ROWS)?;
    at_most("plan rows", "MAX_PLAN_ROWS", record.plan.len(), MAX_PLAN_ROWS)?;
    at_most("events", "MAX_EVENTS", record.events.len(), MAX_EVENTS)?;
    at_most("prompts", "MAX_CONTEXTS", record.prompts.len(), MAX_CONTEXTS)?;
    let s = &record.settings;
    let mut contexts: BTreeSet<u64> = s.contexts.iter().chain(&s.prefill_contexts).copied().collect();
    contexts.extend(record.decode.iter().map(|c| c.context));
    contexts.extend(record.prefill.iter().map(|p| p.context));
    contexts.extend(record.plan.iter().map(|p| p.context));
    at_most("distinct contexts", "MAX_CONTEXTS", contexts.len(), MAX_CONTEXTS)?;
    let mut levels: BTreeSet<u32> = s.concurrency.iter().copied().collect();
    levels.extend(record.decode.iter().filter(|c| !c.searched).map(|c| c.concurrency));
    levels.extend(record.plan.iter().filter(|p| p.kind == sm_core::record::PlanKind::Decode).map(|p| p.concurrency));
    at_most("distinct concurrency levels", "MAX_CONCURRENCY_LEVELS", levels.len(), MAX_CONCURRENCY_LEVELS)?;
    let mut searched: std::collections::BTreeMap<u64, usize> = std::collections::BTreeMap::new();
    for c in record.decode.iter().filter(|c| c.searched) {
        *searched.entry(c.context).or_default() += 1;
    }
    let most = searched.values().copied().max().unwrap_or(0);
    at_most("searched cells at one context", "MAX_SEARCHED_PER_CONTEXT", most, MAX_SEARCHED_PER_CONTEXT)?;
    let warnings = record.decode.iter().map(|c| c.warnings.len()).max().unwrap_or(0);
    at_most("warnings in one decode cell", "MAX_WARNINGS", warnings, MAX_WARNINGS)?;
    phases::limits(record)?;
    text_lengths(&serde_json::to_value(record).unwrap_or(Value::Null), &mut Vec::new())
}

/// Every string (and object key) of the record, however deep in free-form `extra`.
fn text_lengths<'a>(value: &'a Value, path: &mut Vec<&'a str>) -> Result<(), Refusal> {
    let too_long = |path: &[&str], found: usize| Refusal::TextTooLong { path: path.join("."), found };
    match value {
        Value::String(s) if s.len() > MAX_TEXT_BYTES => Err(too_long(path, s.len())),
        Value::Array(items) => {
            for item in items {
                path.push("[]");
                text_lengths(item, path)?;
                path.pop();
            }
            Ok(())
        }
        Value::Object(map) => {
            for (key, item) in map {
                if key.len() > MAX_TEXT_BYTES {
                    return Err(too_long(path, key.len()));
                }
                path.push(key);
                text_lengths(item, path)?;
                path.pop();
            }
            Ok(())
        }
        _ => Ok(()),
    }
}

fn figure(at: &str, field: &'static str, value: Option<f64>, max: f64) -> Result<(), Refusal> {
    match value {
        Some(v) if !(v.is_finite() && (0.0..=max).contains(&v)) => {
            // 1.7e308 as such, not as 309 digits
            let value = if v.is_finite() && v.abs() >= 1e15 { format!("{v:e}") } else { v.to_string() };
            Err(Refusal::BadFigure { at: at.to_string(), field, value, max })
        }
        _ => Ok(()),
    }
}

fn decode_cell(c: &DecodeCell, priced: bool) -> Result<(), Refusal> {
    let at = format!("decode cell {} × {}", c.label, c.concurrency);
    if c.concurrency < 1 {
        return Err(Refusal::NoConcurrency { at });
    }
    figure(&at, "context", Some(c.context as f64), MAX_CONTEXT_TOKENS)?;
    answer::cell(&at, c, priced)?;
    precision::cell(&at, c)?;
    spec_decode::cell(&at, c)?;
    gpu::cell(&at, c)?;
    server_metrics::cell(&at, c)?;
    sections::check(&at, c)?;
    let status = c.status();
    if status != CellStatus::Valid && c.token_source.is_some() {
        return Err(Refusal::FigureOfInvalid { at, status: status.name(), field: "token_source" });
    }
    Ok(())
}

fn prefill_row(p: &PrefillRow) -> Result<(), Refusal> {
    let at = format!("prefill row {}", p.label);
    sections::check(&at, p)?;
    // no J/token to check: a prefill row's energy is not divided by output tokens
    gpu::check(&at, p.status, p.telemetry.gpu.as_ref(), None)?;
    server_metrics::check(&at, p.status, p.telemetry.server_metrics.as_ref())
}

/// The figures as the schema defines them.
pub fn figures(record: &RunRecord) -> Result<(), Refusal> {
    let priced = record.settings.cost_per_hour_usd.is_some();
    record.decode.iter().try_for_each(|c| decode_cell(c, priced))?;
    record.prefill.iter().try_for_each(prefill_row)?;
    if let Some(c) = record.settings.concurrency.iter().find(|c| **c < 1) {
        return Err(Refusal::NoConcurrency { at: format!("settings.concurrency ({c})") });
    }
    let s = &record.settings;
    figure("settings", "duration_s", Some(s.duration_s), MAX_S)?;
    let t = &s.timing;
    for (field, value) in [
        ("warmup_s", t.warmup_s),
        ("ready_stable_s", t.ready_stable_s),
        ("ready_timeout_s", t.ready_timeout_s),
        ("stall_timeout_s", t.stall_timeout_s),
        ("server_wait_s", t.server_wait_s),
    ] {
        figure("settings", field, value, MAX_S)?;
    }
    answer::settings(record)?;
    precision::settings(record)?;
    roofline::settings(record)?;
    phases::figures(record)?;
    answer::capacity(record)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> RunRecord {
        let text = include_str!("../../../tests/data/run-sample.json");
        serde_json::from_str(text).unwrap()
    }

    #[test]
    fn the_sample_is_accepted() {
        assert_eq!(check(&sample()), Ok(()));
    }

    /// What the site stores must pass its own checks: a record it answered is downloaded and
    /// uploaded elsewhere. And a run as `speedmatrix run` writes it, with an SLO and a price.
    #[test]
    fn answered_records_are_accepted() {
        let mut r = sample();
        crate::answer::ensure(&mut r).unwrap();
        assert!(!r.capacity.is_empty());
        assert_eq!(check(&r), Ok(()));
        let run: RunRecord = serde_json::from_str(include_str!("../../../tests/data/run-capacity-1.1.json")).unwrap();
        assert!(run.settings.slo.is_some() && run.settings.cost_per_hour_usd.is_some() && !run.capacity.is_empty());
        assert_eq!(check(&run), Ok(()));
    }

    #[test]
    fn bad_figures_are_named() {
        let valid = |r: &RunRecord| r.decode.iter().position(|c| c.status() == CellStatus::Valid).unwrap();
        type Change = Box<dyn Fn(&mut RunRecord)>;
        let cases: Vec<(Change, &str)> = vec![
            (
                Box::new(move |r| {
                    let i = valid(r);
                    r.decode[i].total_tok_s = Some(-5000.0);
                }),
                "total_tok_s is -5000",
            ),
            (
                Box::new(move |r| {
                    let i = valid(r);
                    r.decode[i].total_tok_s = Some(1.7e308);
                }),
                "total_tok_s is 1.7e308",
            ),
            (
                Box::new(move |r| {
                    let i = valid(r);
                    r.decode[i].tbt_ms.p99 = Some(f64::NAN);
                }),
                "tbt_ms_p99 is NaN",
            ),
            (
                Box::new(move |r| {
                    let i = valid(r);
                    r.decode[i].avg_active = Some(f64::INFINITY);
                }),
                "avg_active is inf",
            ),
            (Box::new(|r| r.decode[0].concurrency = 0), "concurrency must be at least 1"),
            (Box::new(|r| r.settings.concurrency.push(0)), "concurrency must be at least 1"),
            (Box::new(|r| r.settings.duration_s = -1.0), "duration_s is -1"),
            (Box::new(|r| r.prefill[0].ttft_ms = Some(-1.0)), "ttft_ms is -1"),
            (
                Box::new(move |r| {
                    let i = valid(r);
                    r.decode[i].status = Some(CellStatus::Error);
                }),
                "is error, yet carries total_tok_s",
            ),
            (
                Box::new(|r| {
                    r.prefill[0].status = CellStatus::Error;
                }),
                "is error, yet carries prompt_tok_s",
            ),
        ];
        for (change, expected) in cases {
            let mut r = sample();
            change(&mut r);
            let err = check(&r).expect_err(expected).to_string();
            assert!(err.contains(expected), "{expected}: {err}");
        }
    }

    /// The largest run `speedmatrix run` accepts flags for: 32 decode contexts × 32 levels, 32
    /// prefill-only contexts and the prefill row at the model's maximum.
    #[test]
    fn the_largest_run_the_tool_makes_is_accepted() {
        let mut r = sample();
        let cell = r.decode[0].clone();
        let row = r.prefill[0].clone();
        let decode_ctx = |i: u64| 1024 * (i + 1);
        let prefill_ctx = |i: u64| 1024 * (i + 1) + 512;
        r.decode = (0..32u64)
            .flat_map(|i| (1..=32u32).map(move |c| (decode_ctx(i), c)))
            .map(|(context, concurrency)| DecodeCell { context, concurrency, ..cell.clone() })
            .collect();
        r.prefill = (0..32u64)
            .flat_map(|i| [decode_ctx(i), prefill_ctx(i)])
            .chain([1_000_000])
            .map(|context| PrefillRow { context, ..row.clone() })
            .collect();
        r.plan.clear();
        r.settings.contexts = (0..32).map(decode_ctx).collect();
        r.settings.prefill_contexts = (0..32).map(prefill_ctx).collect();
        r.settings.concurrency = (1..=32).collect();
        assert_eq!(check(&r), Ok(()));
        // and --find-capacity's cells on top, each context its own levels
        let searched: Vec<DecodeCell> = (0..32u64)
            .flat_map(|i| (0..MAX_SEARCHED_PER_CONTEXT as u32).map(move |k| (i, 33 + i as u32 * 100 + k)))
            .map(|(i, concurrency)| DecodeCell { context: decode_ctx(i), concurrency, searched: true, ..cell.clone() })
            .collect();
        r.decode.extend(searched);
        assert_eq!(check(&r), Ok(()));
        let one_more = DecodeCell { context: decode_ctx(0), concurrency: 9999, searched: true, ..cell.clone() };
        r.decode.pop();
        r.decode.push(one_more);
        let err = check(&r).unwrap_err();
        assert!(matches!(err, Refusal::TooMany { name: "MAX_SEARCHED_PER_CONTEXT", .. }), "{err}");
    }

    #[test]
    fn limits_are_named() {
        let mut r = sample();
        let template = r.decode[0].clone();
        r.decode = (0..80u32).map(|i| DecodeCell { context: 1000 + u64::from(i), ..template.clone() }).collect();
        let err = check(&r).unwrap_err();
        assert!(matches!(err, Refusal::TooMany { name: "MAX_CONTEXTS", found: 80.., .. }), "{err}");
        assert!(err.to_string().contains("distinct contexts") && err.to_string().contains("at most 72"), "{err}");

        let mut r = sample();
        r.events.push(sm_core::record::Event { t: 1.0, text: "x".repeat(MAX_TEXT_BYTES + 1) });
        let err = check(&r).unwrap_err().to_string();
        assert!(err.contains("events.[].text") && err.contains("MAX_TEXT_BYTES"), "{err}");

        let mut r = sample();
        r.server.extra.insert("k".into(), serde_json::json!({"deep": ["y".repeat(MAX_TEXT_BYTES + 1)]}));
        assert!(check(&r).unwrap_err().to_string().contains("server.extra.k.deep"));
    }
}
