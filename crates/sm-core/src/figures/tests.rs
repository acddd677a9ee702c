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

/// The node `node` stands for: a `$ref` followed, and of `anyOf`/`oneOf` (a nullable section or
/// figure) the alternative that is not `null`.
fn resolve<'a>(root: &'a serde_json::Value, mut node: &'a serde_json::Value) -> &'a serde_json::Value {
    loop {
        if let Some(r) = node.get("$ref").and_then(serde_json::Value::as_str) {
            node = root.pointer(r.trim_start_matches('#')).unwrap_or_else(|| panic!("{r} is not in the schema"));
        } else if let Some(alts) = node.get("anyOf").or_else(|| node.get("oneOf")).and_then(|a| a.as_array()) {
            node = alts.iter().find(|a| a.get("type").and_then(|t| t.as_str()) != Some("null")).unwrap_or(node);
            if alts.iter().all(|a| a.get("type").and_then(|t| t.as_str()) == Some("null")) {
                return node;
            }
        } else {
            return node;
        }
    }
}

/// The schema of the section at `path` (`phases.burst.bursts[]`).
fn section_schema<'a>(root: &'a serde_json::Value, path: &str) -> &'a serde_json::Value {
    let mut node = resolve(root, root);
    for part in path.split('.') {
        let (key, each) = part.strip_suffix("[]").map_or((part, false), |k| (k, true));
        node = resolve(root, &node["properties"][key]);
        if each {
            node = resolve(root, &node["items"]);
        }
        assert!(node.is_object(), "the schema has no {key} on the way to {path}");
    }
    node
}

/// Whether a property's schema allows a number (an integer figure is a number too).
fn numeric(property: &serde_json::Value) -> bool {
    let is = |t: &serde_json::Value| matches!(t.as_str(), Some("number" | "integer"));
    match &property["type"] {
        serde_json::Value::Array(types) => types.iter().any(is),
        t => is(t),
    }
}

/// The schema is generated from the record types, so a figure added to a section's type is in it
/// by the same change; this proves each table entry names a number the schema knows where the
/// table says it sits (a nested figure's `ttft_ms_p50` is `ttft_ms.p50`, `idle_ttft_ms` is `idle.ttft_ms`), never below 0.
#[test]
fn the_schema_holds_every_figure_of_every_table() {
    let root = crate::record::schema::run_schema();
    for section in sections() {
        let schema = section_schema(&root, section.path);
        for f in &section.figures {
            let flat = schema["properties"].get(f.name);
            let nested = f.name.match_indices('_').find_map(|(i, _)| {
                let outer = resolve(&root, schema["properties"].get(&f.name[..i])?);
                outer["properties"].get(&f.name[i + 1..])
            });
            let property = flat.or(nested).map(|p| resolve(&root, p));
            let property = property.unwrap_or_else(|| panic!("{} has no {} in the schema", section.path, f.name));
            assert!(numeric(property), "{}.{} is not a number in the schema: {property}", section.path, f.name);
            if let Some(min) = property.get("minimum").and_then(serde_json::Value::as_f64) {
                assert!(min >= 0.0, "{}.{}: minimum {min}", section.path, f.name);
            }
        }
    }
}
