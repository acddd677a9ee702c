//! Secrets in an uploaded run, whatever tool wrote it: each is found by its shape where it
//! stands — the launch command's secret flags and assignments, secret environment entries,
//! credentials in the server URL or any other URL, `Authorization` headers and JSON values under a
//! secret key in any text — and replaced there; no other field is rewritten because it happens to
//! contain the same letters.
//!
//! Then the site fails closed: a secret found in its place that also appears anywhere else in the
//! record (an error text that echoed the API key) makes the upload refused, naming the field, and
//! a record that no longer reads as a run after redaction is refused too. Nothing is stored with a
//! secret in it.

use serde_json::Value;
use sm_core::record::RunRecord;
use sm_core::redact::{self, REDACTED};

/// Found secrets shorter than this are not searched for elsewhere: a value like `EMPTY` or `1234`
/// is not a credential, and would refuse ordinary records that contain the same characters.
pub const MIN_LEFTOVER: usize = 8;

#[derive(Debug, thiserror::Error)]
pub enum ScrubError {
    #[error(
        "the run holds a secret in {field}: the {origin} has a secret that also appears there. Remove it from \
         that field (or upload a run.json written by speedmatrix, which never writes one) and upload again"
    )]
    Leftover { field: String, origin: &'static str },
    #[error("the run cannot be checked for secrets: {0}")]
    Invalid(String),
}

/// A secret value and the place it was found in.
struct Found {
    value: String,
    origin: &'static str,
}

/// Redacts `record`'s secrets in place, or refuses it (see the module's documentation).
pub fn scrub_record(record: &mut RunRecord) -> Result<(), ScrubError> {
    let mut value = serde_json::to_value(&*record).map_err(|e| ScrubError::Invalid(e.to_string()))?;
    let mut found = Vec::new();
    if let Some(Value::String(cmd)) = value.get_mut("launch_command") {
        let r = redact::redact_command_found(cmd);
        found.extend(r.secrets.into_iter().map(|value| Found { value, origin: "launch command" }));
        *cmd = r.text;
    }
    if let Some(Value::Object(env)) = value.pointer_mut("/server/extra/environment") {
        for (name, v) in env.iter_mut() {
            let Value::String(s) = v else { continue };
            let clean = redact::redact_env_value(name, s);
            if clean == REDACTED && s != REDACTED {
                found.push(Found { value: std::mem::take(s), origin: "server environment" });
            }
            *s = clean;
        }
    }
    shapes(&mut value, &mut found);
    found.retain(|f| f.value.chars().count() >= MIN_LEFTOVER && f.value != REDACTED);
    if let Some((field, origin)) = leftover(&value, &found, &mut String::new()) {
        return Err(ScrubError::Leftover { field, origin });
    }
    *record = serde_json::from_value(value).map_err(|e| ScrubError::Invalid(e.to_string()))?;
    Ok(())
}

/// Redacts secrets by their shape in every string of the record (URLs, headers, JSON values).
fn shapes(value: &mut Value, found: &mut Vec<Found>) {
    match value {
        Value::String(s) => {
            let r = redact::redact_text(s);
            if r.text != *s {
                found.extend(r.secrets.into_iter().map(|value| Found { value, origin: "text of the run" }));
                *s = r.text;
            }
        }
        Value::Array(items) => items.iter_mut().for_each(|v| shapes(v, found)),
        Value::Object(map) => map.values_mut().for_each(|v| shapes(v, found)),
        _ => {}
    }
}

/// The first field (as a path like `events[3].text`) that still holds a found secret.
fn leftover(value: &Value, found: &[Found], path: &mut String) -> Option<(String, &'static str)> {
    match value {
        Value::String(s) => found.iter().find(|f| s.contains(&f.value)).map(|f| (path.clone(), f.origin)),
        Value::Array(items) => items.iter().enumerate().find_map(|(i, v)| {
            let len = path.len();
            path.push_str(&format!("[{i}]"));
            let hit = leftover(v, found, path);
            path.truncate(len);
            hit
        }),
        Value::Object(map) => map.iter().find_map(|(k, v)| {
            let len = path.len();
            if !path.is_empty() {
                path.push('.');
            }
            path.push_str(k);
            let hit = leftover(v, found, path);
            path.truncate(len);
            hit
        }),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Value {
        let text =
            std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../tests/data/run-sample.json")).unwrap();
        serde_json::from_str(&text).unwrap()
    }

    fn scrub(v: &Value) -> Result<RunRecord, ScrubError> {
        let mut record: RunRecord = serde_json::from_value(v.clone()).unwrap();
        scrub_record(&mut record).map(|()| record)
    }

    #[test]
    fn secrets_are_replaced_where_they_stand() {
        let mut v = sample();
        v["launch_command"] = "vllm serve mistralai/Mistral-Small-3.1 --tokenizer-mode mistral --api-key sk-site-123 \
                               --max-num-batched-tokens 2048"
            .into();
        v["server"]["model"] = "mistralai/Mistral-Small-3.1".into();
        v["server"]["url"] = "http://user:pw-secret-9@10.0.0.5:8000/?api_key=qk-abcdef".into();
        v["server"]["extra"] = serde_json::json!({"environment": {
            "HF_TOKEN": "hf_abcdefgh", "CUDA_VISIBLE_DEVICES": "0",
            "DATABASE_URL": "postgres://runs:db-pass-77@db/runs"}});
        v["label"] = "mistral on 2×H200".into();
        let record = scrub(&v).unwrap();
        let text = serde_json::to_string(&record).unwrap();
        for secret in ["sk-site-123", "pw-secret-9", "qk-abcdef", "hf_abcdefgh", "db-pass-77"] {
            assert!(!text.contains(secret), "{secret} leaked: {text}");
        }
        assert_eq!(
            record.launch_command.as_deref(),
            Some(
                "vllm serve mistralai/Mistral-Small-3.1 --tokenizer-mode mistral --api-key <redacted> \
                 --max-num-batched-tokens 2048"
            )
        );
        // nothing is rewritten by value: the model and the label keep "mistral"
        assert_eq!(record.server.model, "mistralai/Mistral-Small-3.1");
        assert_eq!(record.label.as_deref(), Some("mistral on 2×H200"));
        assert_eq!(record.server.url, "http://user:<redacted>@10.0.0.5:8000/?api_key=<redacted>");
        let env = &record.server.extra["environment"];
        assert_eq!(env["CUDA_VISIBLE_DEVICES"], "0");
        assert_eq!(env["DATABASE_URL"], "postgres://runs:<redacted>@db/runs");
    }

    #[test]
    fn echoed_headers_are_redacted_in_any_text() {
        let mut v = sample();
        v["events"] = serde_json::json!([{"t": 1.0, "text": "HTTP 401: {\"headers\": {\"authorization\": \"Bearer sk-echo-555\"}}"}]);
        let record = scrub(&v).unwrap();
        assert_eq!(record.events[0].text, "HTTP 401: {\"headers\": {\"authorization\": \"Bearer <redacted>\"}}");
    }

    #[test]
    fn a_secret_left_elsewhere_refuses_the_upload() {
        let mut v = sample();
        v["launch_command"] = "vllm serve m --api-key sk-leftover-4242".into();
        v["events"] = serde_json::json!([{"t": 1.0, "text": "error: key sk-leftover-4242 refused"}]);
        let e = scrub(&v).unwrap_err();
        let text = e.to_string();
        assert!(matches!(&e, ScrubError::Leftover { field, .. } if field == "events[0].text"), "{text}");
        assert!(text.contains("launch command") && !text.contains("sk-leftover"), "{text}");
        // a short placeholder value is not searched for
        v["launch_command"] = "vllm serve m --api-key EMPTY".into();
        v["events"] = serde_json::json!([{"t": 1.0, "text": "EMPTY"}]);
        assert_eq!(scrub(&v).unwrap().events[0].text, "EMPTY");
    }
}
