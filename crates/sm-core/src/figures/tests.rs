//! The tables against what they describe: docs/methodology.md §7.6 is generated from
//! [`sections`], so a figure added to a table fails until its line is there; and a number a
//! section writes to run.json without a table entry fails until it has one.

use super::sections;

const BEGIN: &str = "<!-- figures:begin -->\n";
const END: &str = "<!-- figures:end -->";

/// The list as docs/methodology.md holds it between its markers.
fn list() -> String {
    let mut s = String::from("| Section | Figure | Unit | Carried by |\n|---|---|---|---|\n");
    for section in sections() {
        for f in &section.figures {
            s += &format!("| `{}` | `{}` | {} | {} |\n", section.path, f.name, f.unit.symbol(), f.carried.words());
        }
    }
    s
}

#[test]
fn the_docs_list_every_figure_of_every_table() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/methodology.md");
    let doc = std::fs::read_to_string(path).unwrap();
    let start = doc.find(BEGIN).expect("methodology.md has the figure list's markers") + BEGIN.len();
    let end = start + doc[start..].find(END).expect("the list's end marker");
    let want = list();
    if doc[start..end] != want && std::env::var_os("SPEEDMATRIX_BLESS").is_some() {
        std::fs::write(path, format!("{}{want}{}", &doc[..start], &doc[end..])).unwrap();
        return;
    }
    assert_eq!(
        doc[start..end],
        want,
        "docs/methodology.md §7.6 differs from the tables: SPEEDMATRIX_BLESS=1 rewrites it"
    );
}

/// The numbers of a section that are not figures: which section it is, what was planned or asked,
/// what its requests came to. Anything else a section writes is a figure and needs its entry.
fn keys(path: &str) -> &'static [&'static str] {
    match path {
        "prefill[]" => &["context"],
        "decode[]" => &["context", "concurrency", "kv_need_tokens"],
        "capacity[]" => &["context", "max_users", "cell", "failed_cell", "fit_limit"],
        "phases.rate.levels[]" => &["context", "rate"],
        "phases.burst.bursts[]" => &["context", "concurrency", "round", "requests", "completed", "failed"],
        "phases.mixed_prefill.levels[]" => {
            &["prompt_context", "background", "background_context", "background_max_tokens", "probes_planned"]
        }
        "phases.sessions.sessions[].turns[]" => &["turn"],
        "phases.sessions.by_turn[]" => &["turn", "completed", "failed"],
        "phases.sessions.summary" => &["completed", "failed", "output_tokens"],
        _ => &[],
    }
}

/// The section's instances in `record`: `[]` in a path is every element at that depth.
fn instances<'a>(record: &'a serde_json::Value, path: &str) -> Vec<&'a serde_json::Value> {
    let mut at = vec![record];
    for part in path.split('.') {
        let (key, each) = part.strip_suffix("[]").map_or((part, false), |k| (k, true));
        at = at.into_iter().filter_map(|v| v.get(key)).collect();
        if each {
            at = at.into_iter().filter_map(|v| v.as_array()).flatten().collect();
        }
    }
    at
}

/// A number a section writes that is neither a figure of its table nor one of its keys is a
/// figure someone added to the record and not to the table: the run with every phase shows it.
#[test]
fn every_number_a_section_writes_is_a_figure_of_its_table_or_a_key() {
    let text = include_str!("../../../../tests/data/golden/every-phase.run.json");
    let record: serde_json::Value = serde_json::from_str(text).unwrap();
    for section in sections() {
        let named = |k: &str| section.figures.iter().any(|f| f.name == k) || keys(section.path).contains(&k);
        let found = instances(&record, section.path);
        assert!(!found.is_empty(), "the every-phase run has no {}", section.path);
        for instance in found {
            let numbers = instance.as_object().unwrap().iter().filter(|(_, v)| v.is_number());
            for (k, _) in numbers {
                assert!(named(k), "{} writes {k}: give it an entry in its figure table", section.path);
            }
        }
    }
}
