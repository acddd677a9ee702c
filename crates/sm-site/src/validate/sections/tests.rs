//! Every figure of every section's table reaches the outputs, proven by iterating the tables: a
//! figure added to a table is covered here without editing this file. Each is refused by the
//! site's checks when out of its unit's range (named in the refusal), is a column of its
//! section's CSV file, and, where its entry gives the page's heading, a column of the page's and
//! Markdown's tables. That the schema holds each of them is `sm-core`'s
//! `figures::tests::the_schema_holds_every_figure_of_every_table`, beside the generator.

use serde_json::Value;
use sm_core::figures::{Section, Unit, sections};
use sm_core::record::RunRecord;

use super::super::{Refusal, check};
use super::bound;

/// A run with every phase, as `speedmatrix run` wrote it (the golden test's).
fn every_phase() -> Value {
    serde_json::from_str(include_str!("../../../../../tests/data/golden/every-phase.run.json")).unwrap()
}

fn record(json: &Value) -> RunRecord {
    serde_json::from_value(json.clone()).unwrap()
}

/// The section's instances in the record: `phases.burst.bursts[]` is each burst, `[]` inside
/// a path every element at that depth.
fn instances(json: &Value, path: &str) -> Vec<String> {
    let mut at = vec![String::new()];
    for part in path.split('.') {
        let (key, each) = part.strip_suffix("[]").map_or((part, false), |k| (k, true));
        at = at.into_iter().map(|p| format!("{p}/{key}")).collect();
        if each {
            at = at
                .into_iter()
                .flat_map(|p| {
                    let n = json.pointer(&p).and_then(Value::as_array).map_or(0, Vec::len);
                    (0..n).map(move |i| format!("{p}/{i}"))
                })
                .collect();
        }
    }
    at.retain(|p| json.pointer(p).is_some());
    at
}

/// Every number under `value` (a figure may sit in a nested object: `ttft_ms.p50`).
fn leaves(value: &Value, at: String, out: &mut Vec<String>) {
    match value {
        Value::Number(_) => out.push(at),
        Value::Object(map) => map.iter().for_each(|(k, v)| leaves(v, format!("{at}/{k}"), out)),
        _ => {}
    }
}

/// Whether setting some number of the section at `at` (or its field named like the figure, where
/// the section has none yet) to `value` makes the site refuse the figure by name.
fn refused(json: &Value, at: &str, name: &str, value: f64) -> bool {
    let mut places = vec![format!("{at}/{name}")];
    leaves(json.pointer(at).unwrap(), at.to_string(), &mut places);
    places.into_iter().any(|place| {
        let mut changed = json.clone();
        let (parent, key) = place.rsplit_once('/').unwrap();
        let Some(Value::Object(map)) = changed.pointer_mut(parent) else { return false };
        // whole numbers as integers, so that a figure stored as a u64 takes them
        let number = if value.fract() == 0.0 && value < u64::MAX as f64 {
            serde_json::json!(value as u64)
        } else {
            serde_json::json!(value)
        };
        map.insert(key.to_string(), number);
        let Ok(r) = serde_json::from_value::<RunRecord>(changed) else { return false };
        matches!(check(&r), Err(Refusal::BadFigure { field, .. }) if field == name)
    })
}

#[test]
fn a_figure_out_of_its_units_range_is_refused_by_name() {
    let json = every_phase();
    assert_eq!(check(&record(&json)), Ok(()), "the run as written is accepted");
    for Section { path, figures } in sections() {
        let at = instances(&json, path);
        assert!(!at.is_empty(), "the every-phase run has no {path}");
        for f in figures {
            // a count is a u64 in run.json: no value it can hold is out of its range
            if f.unit == Unit::Count {
                continue;
            }
            // whole, so that a figure stored as an integer takes it
            let over = (bound(f.unit) * 2.0).ceil();
            assert!(at.iter().any(|a| refused(&json, a, f.name, over)), "{path} {}: {over} is accepted", f.name);
        }
    }
}

/// The CSV file whose rows are the section's, `None` for a section without rows of its own
/// (a summary, or one whose figures a row of another section repeats).
fn csv_of(path: &str) -> Option<&'static str> {
    match path {
        "prefill[]" | "decode[]" => Some("measurements.csv"),
        "phases.rate.levels[]" => Some("rate.csv"),
        "phases.burst.bursts[]" => Some("burst.csv"),
        "phases.mixed_prefill.levels[].probes[]" => Some("mixed_prefill.csv"),
        "phases.sessions.sessions[].turns[]" => Some("sessions.csv"),
        "capacity[]" | "phases.mixed_prefill.levels[]" | "phases.sessions.by_turn[]" | "phases.sessions.summary" => {
            None
        }
        other => panic!("{other}: say which CSV file has its rows, if any"),
    }
}

#[test]
fn every_figure_is_a_column_of_its_sections_csv_and_page_tables() {
    let r = record(&every_phase());
    let mut files = sm_report::phases::csv_files(&r);
    files.push(("measurements.csv".into(), sm_report::csv(&r)));
    let html = sm_report::html_page(&r, &[]);
    let md = sm_report::markdown(&r);
    for Section { path, figures } in sections() {
        let header = csv_of(path).map(|name| {
            let (_, text) = files.iter().find(|(n, _)| n == name).unwrap_or_else(|| panic!("no {name}"));
            text.lines().next().unwrap().split(',').map(str::to_string).collect::<Vec<_>>()
        });
        for f in figures {
            if let Some(header) = &header {
                assert!(header.iter().any(|h| h == f.name), "{path} {} is not a column of its CSV", f.name);
            }
            if let Some(label) = f.label {
                assert!(
                    html.contains(&format!("<th>{label}</th>"))
                        || html.contains(&format!("<th scope=\"col\">{label}</th>")),
                    "{path} {}: no column {label} on the page",
                    f.name
                );
                assert!(md.contains(&format!("| {label} |")), "{path} {}: no column {label} in report.md", f.name);
            }
        }
    }
}
