//! What makes two uploads the same run: the record as the site stores it
//! (parsed, redacted, before the uploader is added), whatever the bytes that
//! carried it (gzip or not, spacing, key order). Its SHA-256 is a unique key
//! of the runs table, so an upload sent twice — or retried after its answer
//! was lost — is stored once and answered with the same run id.

use sha2::{Digest, Sha256};
use sm_core::record::RunRecord;

/// The hex SHA-256 of the record's canonical JSON (serde_json writes the
/// struct's fields in declaration order and `extra` sorted by key).
pub fn content_hash(record: &RunRecord) -> Result<String, serde_json::Error> {
    let json = serde_json::to_vec(record)?;
    Ok(Sha256::digest(&json).iter().map(|b| format!("{b:02x}")).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_same_run_in_other_bytes_has_the_same_hash() {
        let text = include_str!("../../../tests/data/run-sample.json");
        let a: RunRecord = serde_json::from_str(text).unwrap();
        let spaced: RunRecord = serde_json::from_str(
            &serde_json::to_string_pretty(&serde_json::from_str::<serde_json::Value>(text).unwrap()).unwrap(),
        )
        .unwrap();
        assert_eq!(content_hash(&a).unwrap(), content_hash(&spaced).unwrap());
        let mut b = a.clone();
        b.label = Some("another".into());
        assert_ne!(content_hash(&a).unwrap(), content_hash(&b).unwrap());
    }
}
