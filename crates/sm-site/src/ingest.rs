//! Turning an uploaded body into a stored run: size limits (also after
//! decompression, so a small gzip bomb is refused like a big body), any format
//! `speedmatrix report` reads, secrets redacted again whatever the uploader's
//! tool did ([`crate::scrub`], which refuses a record it cannot clean), the
//! capacity answer where the record has none ([`crate::answer`]), and the
//! index columns worked out from the record.

use std::io::Read;

use serde_json::Value;
use sm_core::record::{CellStatus, RunRecord};
use sm_report::meta;

use crate::db::StoredRun;
use crate::tokens;

/// The largest body accepted, compressed or not.
pub const MAX_BODY: usize = 32 * 1024 * 1024;

#[derive(Debug, thiserror::Error)]
pub enum IngestError {
    #[error("the body is larger than {} MiB", MAX_BODY / (1024 * 1024))]
    TooLarge,
    #[error("the body is empty; send a run.json or a reference-tool file")]
    Empty,
    #[error("the body is not valid gzip: {0}")]
    BadGzip(String),
    #[error("the body is not UTF-8 text")]
    NotUtf8,
    #[error("{0}")]
    Import(#[from] sm_report::ImportError),
    #[error("the run is not accepted: {0}")]
    Refused(#[from] crate::validate::Refusal),
    #[error("the record cannot be stored: {0}")]
    Internal(String),
    #[error("{0}")]
    Secret(#[from] crate::scrub::ScrubError),
}

/// The body's text: gunzipped when the client said so or the bytes are gzip.
pub fn decode(body: &[u8], gzip: bool) -> Result<String, IngestError> {
    if body.len() > MAX_BODY {
        return Err(IngestError::TooLarge);
    }
    let bytes = if gzip || body.starts_with(&[0x1f, 0x8b]) {
        let mut out = Vec::new();
        flate2::read::GzDecoder::new(body)
            .take(MAX_BODY as u64 + 1)
            .read_to_end(&mut out)
            .map_err(|e| IngestError::BadGzip(e.to_string()))?;
        if out.len() > MAX_BODY {
            return Err(IngestError::TooLarge);
        }
        out
    } else {
        body.to_vec()
    };
    let text = String::from_utf8(bytes).map_err(|_| IngestError::NotUtf8)?;
    if text.trim().is_empty() {
        return Err(IngestError::Empty);
    }
    Ok(text)
}

/// Parses, redacts and indexes an upload by `uploader`.
pub fn prepare(text: &str, uploader: &str) -> Result<(RunRecord, StoredRun), IngestError> {
    let mut record = sm_report::import_str(text)?;
    crate::validate::check(&record)?;
    crate::scrub::scrub_record(&mut record)?;
    // redaction rewrites texts (a one-letter `?token=a` becomes `<redacted>`): what is stored must
    // pass the same checks as what was sent
    crate::validate::check(&record)?;
    // the hash is of the run as uploaded, so the same file is the same run before and after the
    // site learnt to answer (the answer is a function of the record)
    let content_hash = crate::identity::content_hash(&record).map_err(|e| IngestError::Internal(e.to_string()))?;
    let answer = crate::answer::ensure(&mut record).map_err(IngestError::Internal)?;
    record.server.extra.insert(meta::UPLOADER.into(), Value::String(uploader.to_string()));
    let json = serde_json::to_string(&record).map_err(|e| IngestError::Internal(e.to_string()))?;
    let id = tokens::random_hex(6).map_err(|e| IngestError::Internal(e.to_string()))?;
    let stored = StoredRun {
        content_hash: Some(content_hash),
        judged_from: answer.judged_from.name().to_string(),
        ..index(&record, id, uploader, json)
    };
    Ok((record, stored))
}

pub fn index(record: &RunRecord, id: String, uploader: &str, json: String) -> StoredRun {
    let gpu = record.hardware.gpus.first().map(|g| g.name.trim().trim_start_matches("NVIDIA ").to_string());
    let peak = record
        .decode
        .iter()
        .filter(|c| c.status() == CellStatus::Valid)
        .filter_map(|c| c.total_tok_s)
        .filter(|v| v.is_finite())
        .fold(0.0, f64::max);
    StoredRun {
        id,
        uploaded_at: sm_core::record::now_rfc3339(),
        uploader: uploader.to_string(),
        model: sm_report::view::model_name(record),
        gpu: gpu.unwrap_or_default(),
        gpu_count: i64::from(record.hardware.gpu_count.max(record.hardware.gpus.len() as u32)),
        engine: record.server.engine.to_string(),
        engine_version: record.server.engine_version.clone().unwrap_or_default(),
        measured_at: measured_at(record),
        label: record.label.clone().unwrap_or_default(),
        status: serde_json::to_value(record.status)
            .ok()
            .and_then(|v| v.as_str().map(str::to_string))
            .unwrap_or_default(),
        peak_tok_s: peak,
        record: json,
        content_hash: None,
        slo: record.settings.slo.as_ref().map(ToString::to_string).unwrap_or_default(),
        // a record without an SLO is answered by the site when it starts (`answer::backfill`)
        judged_from: match record.settings.slo {
            Some(_) if record.server.extra.contains_key(sm_report::meta::SLO_JUDGED_FROM) => "summaries".into(),
            Some(_) => "requests".into(),
            None => String::new(),
        },
        capacity: crate::answer::rows(record),
        replay_capacity: record.phases.replay.as_ref().and_then(sm_report::phases::replay::answer::capacity),
    }
}

/// When the run was measured, or `""` when an imported file gave no time (its `started` is then a
/// placeholder): a run of unknown date must not be listed as measured in 1970.
fn measured_at(record: &RunRecord) -> String {
    match &record.finished {
        Some(t) => t.clone(),
        None if sm_report::meta::unknown(record, sm_report::meta::STARTED) => String::new(),
        None => record.started.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> String {
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../tests/data/run-sample.json")).unwrap()
    }

    #[test]
    fn secrets_are_redacted_or_the_upload_refused() {
        let mut v: Value = serde_json::from_str(&sample()).unwrap();
        v["launch_command"] = "vllm serve m --api-key sk-supersecret --port 8000".into();
        v["server"]["url"] = "http://user:pw-secret@127.0.0.1:8000".into();
        v["server"]["extra"] =
            serde_json::json!({"environment": {"HF_TOKEN": "hf_abcdefgh", "CUDA_VISIBLE_DEVICES": "0"}});
        let (_, stored) = prepare(&v.to_string(), "alice").unwrap();
        for secret in ["sk-supersecret", "hf_abcdefgh", "pw-secret"] {
            assert!(!stored.record.contains(secret), "{secret} leaked: {}", stored.record);
        }
        assert!(stored.record.contains("CUDA_VISIBLE_DEVICES") && stored.record.contains("--port 8000"));
        assert!(stored.record.contains("\"uploader\":\"alice\""));
        // the same secret left in an event: refused, never stored
        v["events"] = serde_json::json!([{"t": 1.0, "text": "using sk-supersecret and hf_abcdefgh"}]);
        let e = prepare(&v.to_string(), "alice").unwrap_err();
        assert!(matches!(e, IngestError::Secret(_)), "{e}");
        assert!(!e.to_string().contains("sk-supersecret"), "{e}");
    }

    #[test]
    fn the_run_is_checked_again_after_redaction() {
        use crate::validate::MAX_TEXT_BYTES;
        let mut v: Value = serde_json::from_str(&sample()).unwrap();
        // within the limit as sent; each one-letter token grows into `<redacted>`
        let link = " http://h/?token=a";
        let label = link.repeat(MAX_TEXT_BYTES / link.len());
        assert!(label.len() <= MAX_TEXT_BYTES && label.len() + 9 * (MAX_TEXT_BYTES / link.len()) > MAX_TEXT_BYTES);
        v["label"] = label.into();
        let mut sent: RunRecord = serde_json::from_value(v.clone()).unwrap();
        assert_eq!(crate::validate::check(&sent), Ok(()), "the run as sent is within the limits");
        crate::scrub::scrub_record(&mut sent).unwrap();
        assert!(sent.label.as_deref().unwrap().contains("?token=<redacted>"));
        let e = prepare(&v.to_string(), "alice").unwrap_err();
        assert!(
            matches!(&e, IngestError::Refused(crate::validate::Refusal::TextTooLong { path, .. }) if path == "label"),
            "{e}"
        );
    }

    /// The reference tool's upload stores the server's argv with its API key: redacted there, and
    /// nowhere else rewritten, though the key is a piece of the model's name.
    #[test]
    fn a_reference_upload_keeps_its_model_when_the_key_is_part_of_it() {
        let path = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../tests/data/reference/ling-3.0-flash-int4-2xh200nvl.lil-bench-result.json"
        );
        let mut v: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
        let argv = v["server"]["argv"].as_array_mut().unwrap();
        let at = argv.iter().position(|w| w == "--api-key").unwrap();
        argv[at + 1] = "Ling".into();
        let (record, stored) = prepare(&v.to_string(), "alice").unwrap();
        assert_eq!(stored.model, "Ling-3.0-flash-int4");
        assert!(record.launch_command.as_deref().unwrap().contains("--api-key <redacted>"));
        assert!(!stored.record.replace("inclusionAI/Ling-3.0-flash-int4", "").contains("Ling"), "{}", stored.record);
        // a key that is also elsewhere in the file: refused, never stored
        let argv = v["server"]["argv"].as_array_mut().unwrap();
        argv[at + 1] = "sk-echoed-98765".into();
        v["client"]["note"] = "bad key sk-echoed-98765".into();
        let e = prepare(&v.to_string(), "alice").unwrap_err();
        assert!(matches!(e, IngestError::Import(sm_report::ImportError::SecretElsewhere)), "{e}");
        assert!(!e.to_string().contains("sk-echoed"), "{e}");
    }

    #[test]
    fn a_run_of_unknown_date_is_not_listed_as_1970() {
        let path = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../tests/data/reference/llm-inference-bench-0.4.18.vllm-cpu-tiny.json"
        );
        let mut v: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
        let (_, dated) = prepare(&v.to_string(), "alice").unwrap();
        assert!(dated.measured_at.starts_with("20"), "{}", dated.measured_at);
        v["metadata"].as_object_mut().unwrap().remove("timestamp");
        let (_, undated) = prepare(&v.to_string(), "alice").unwrap();
        assert_eq!(undated.measured_at, "");
        assert_eq!(crate::pages::short_time(&undated.measured_at), "unknown");
    }

    #[test]
    fn limits_and_gzip() {
        use std::io::Write;
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        gz.write_all(sample().as_bytes()).unwrap();
        let packed = gz.finish().unwrap();
        assert_eq!(decode(&packed, true).unwrap(), sample());
        assert_eq!(decode(&packed, false).unwrap(), sample(), "gzip is recognised by its magic bytes");
        // 40 MiB of spaces compress to a few KiB: refused after decompression
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        gz.write_all(&vec![b' '; 40 * 1024 * 1024]).unwrap();
        assert!(matches!(decode(&gz.finish().unwrap(), true), Err(IngestError::TooLarge)));
        assert!(matches!(decode(b"\x1f\x8bnot gzip", true), Err(IngestError::BadGzip(_))));
        assert!(matches!(decode(b"  ", false), Err(IngestError::Empty)));
    }

    #[test]
    fn index_columns() {
        let (record, stored) = prepare(&sample(), "bob").unwrap();
        assert_eq!(stored.engine, record.server.engine.as_str());
        assert_eq!(stored.uploader, "bob");
        assert!(stored.peak_tok_s > 0.0);
        assert_eq!(stored.id.len(), 12);
        assert!(matches!(prepare("{\"a\": 1}", "bob"), Err(IngestError::Import(_))));
    }
}
