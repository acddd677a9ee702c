//! `schema/run.schema.json`, generated from the record types: the published JSON Schema of
//! run.json is what [`run_schema`] returns, so a field added to the record is in the schema by
//! the same change. Regenerate the file with `SPEEDMATRIX_BLESS=1 cargo test -p sm-core --lib
//! record::schema` (a test fails while the checked-in file differs).
//!
//! The types say the names, types, nullability, enums and which fields are always written; their
//! `#[schemars(...)]` attributes the bounds and patterns, and (on `PrefillRow` and `DecodeCell`) how
//! a row's figures follow its status. What the types cannot say is added here ([`finish`]): every
//! object is closed (`additionalProperties: false`, except the free-form `server.extra`) while serde
//! stays lenient, so that run.json files of every version still load; and the few fields older
//! versions wrote otherwise are marked ([`OPTIONAL`], [`NULLABLE`]).

use schemars::generate::SchemaSettings;
use serde_json::{Value, json};

use super::{RunRecord, SCHEMA};

/// The schema of a type written as text or a number by its own `Serialize` (a bound's name, an
/// SLO, a rate): inline, with the rule the text follows.
macro_rules! written_as {
    ($ty:ty, $name:literal, $schema:tt) => {
        impl schemars::JsonSchema for $ty {
            fn schema_name() -> std::borrow::Cow<'static, str> {
                $name.into()
            }

            fn inline_schema() -> bool {
                true
            }

            fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
                schemars::json_schema!($schema)
            }
        }
    };
}
pub(crate) use written_as;

/// The file the schema is published as, relative to the repository root.
pub const SCHEMA_FILE: &str = "schema/run.schema.json";

/// The record's JSON Schema (draft 2020-12), as `schema/run.schema.json` publishes it.
pub fn run_schema() -> Value {
    // What a writer writes: a field is required unless it is skipped when empty (the serialize
    // contract), less the few always-written fields that records of older versions lack.
    let generator = SchemaSettings::draft2020_12().for_serialize().into_generator();
    let mut schema = generator.into_root_schema_for::<RunRecord>().to_value();
    let root = schema.as_object_mut().expect("the root schema is an object");
    root.insert("title".into(), json!(SCHEMA));
    root.insert(
        "description".into(),
        json!(
            "The run record that `speedmatrix run` writes as run.json (rewritten atomically after every \
             cell). Generated from the record types in crates/sm-core/src/record/ (`RunRecord`) by \
             `sm_core::record::schema::run_schema`; do not edit it by hand: regenerate it with \
             `SPEEDMATRIX_BLESS=1 cargo test -p sm-core --lib record::schema`. docs/methodology.md defines \
             every figure. Field names are a contract: fields are added, never renamed or repurposed. \
             Every object except `server.extra` is closed (`additionalProperties: false`) so that a \
             renamed or misspelt field is caught."
        ),
    );
    finish(&mut schema);
    schema
}

/// A field's mark, `#[schemars(extend("x-optional" = true))]`: optional although it is always
/// written (records of older versions lack it).
const OPTIONAL: &str = "x-optional";
/// A field's mark, `#[schemars(extend("x-nullable" = true))]`: may be null although the writer now
/// leaves it out when empty (older versions wrote null).
const NULLABLE: &str = "x-nullable";

/// What the derive does not say. Every object schema that lists its properties is closed, so a
/// renamed or misspelt field is caught (free-form maps such as `server.extra` list none and stay
/// open); a field skipped when empty is absent rather than null; the [`OPTIONAL`] and [`NULLABLE`]
/// marks are applied and removed; a `u32` says its maximum as well as its format.
fn finish(schema: &mut Value) {
    match schema {
        Value::Object(map) => {
            if map.get("format").and_then(Value::as_str) == Some("uint32") && !map.contains_key("maximum") {
                map.insert("maximum".into(), json!(u32::MAX));
            }
            let is_object = match map.get("type") {
                Some(Value::String(t)) => t == "object",
                Some(Value::Array(ts)) => ts.iter().any(|t| t == "object"),
                _ => false,
            };
            if is_object && map.contains_key("properties") {
                close(map);
            }
            for (key, value) in map.iter_mut() {
                // a `const`/`enum`/`default` value is data, not a schema
                if !matches!(key.as_str(), "const" | "enum" | "default" | "examples") {
                    finish(value);
                }
            }
        }
        Value::Array(items) => items.iter_mut().for_each(finish),
        _ => {}
    }
}

fn close(object: &mut serde_json::Map<String, Value>) {
    object.entry("additionalProperties").or_insert(Value::Bool(false));
    let mut required: Vec<Value> = object.get("required").and_then(Value::as_array).cloned().unwrap_or_default();
    let Some(Value::Object(properties)) = object.get_mut("properties") else { return };
    for (name, property) in properties.iter_mut() {
        let Value::Object(property) = property else { continue };
        if property.remove(OPTIONAL).is_some() {
            required.retain(|r| r != name.as_str());
        }
        let nullable = property.remove(NULLABLE).is_some();
        if !nullable && !required.iter().any(|r| r == name.as_str()) {
            strip_null(property);
        }
    }
    if required.is_empty() {
        object.remove("required");
    } else {
        object.insert("required".into(), Value::Array(required));
    }
}

/// `Option<T>` of a field that is absent when `None`: `T` alone.
fn strip_null(property: &mut serde_json::Map<String, Value>) {
    if let Some(Value::Array(types)) = property.get_mut("type") {
        types.retain(|t| t != "null");
        if let [only] = types.as_slice() {
            let only = only.clone();
            property.insert("type".into(), only);
        }
    }
    if let Some(Value::Array(any_of)) = property.get_mut("anyOf") {
        any_of.retain(|s| s.get("type").and_then(Value::as_str) != Some("null"));
        if let [Value::Object(only)] = any_of.as_slice() {
            let only = only.clone();
            property.remove("anyOf");
            for (k, v) in only {
                property.entry(k).or_insert(v);
            }
        }
    }
}

/// The schema as the file holds it: pretty-printed, two-space indent, a final newline.
pub fn run_schema_text() -> String {
    let mut text = serde_json::to_string_pretty(&run_schema()).expect("a JSON value serialises");
    text.push('\n');
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every mark is consumed, and every object but `server.extra` is closed.
    #[test]
    fn marks_are_applied_and_objects_closed() {
        fn walk(value: &Value, path: &str, open: &mut Vec<String>) {
            match value {
                Value::Object(map) => {
                    assert!(!map.contains_key(OPTIONAL) && !map.contains_key(NULLABLE), "a mark left at {path}");
                    if map.get("type") == Some(&json!("object"))
                        && map.get("additionalProperties") != Some(&json!(false))
                    {
                        open.push(path.to_string());
                    }
                    for (k, v) in map {
                        walk(v, &format!("{path}/{k}"), open);
                    }
                }
                Value::Array(items) => {
                    items.iter().enumerate().for_each(|(i, v)| walk(v, &format!("{path}/{i}"), open))
                }
                _ => {}
            }
        }
        let mut open = Vec::new();
        walk(&run_schema(), "", &mut open);
        assert_eq!(open, ["/$defs/ServerInfo/properties/extra"]);
    }

    /// The checked-in schema is the generated one. `SPEEDMATRIX_BLESS=1` writes it.
    #[test]
    fn the_published_schema_is_generated() {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..").join(SCHEMA_FILE);
        let generated = run_schema_text();
        if std::env::var_os("SPEEDMATRIX_BLESS").is_some_and(|v| v == "1") {
            std::fs::write(&path, &generated).expect("write the schema");
            return;
        }
        let published = std::fs::read_to_string(&path).unwrap_or_default();
        assert!(
            published == generated,
            "{SCHEMA_FILE} is not the schema the record types generate; regenerate it with\n\n    \
             SPEEDMATRIX_BLESS=1 cargo test -p sm-core --lib record::schema\n\nand commit the result"
        );
    }
}
