//! `run --tools FILE.json` (methodology §7.3.1, issue 33 §2): the file read and checked before the
//! server is asked anything, and on `--resume` held to the file the run recorded.

use std::path::Path;
use std::sync::Arc;

use anyhow::{Context, Result, bail};
use sha2::{Digest, Sha256};
use sm_bench::ToolSet;
use sm_core::record::{Api, RunRecord};
use sm_core::tools::ToolsInfo;

/// The tools every chat request carries, or `None` without `--tools` (a resumed run that sent
/// tools must be given the same file again: its requests would not compare otherwise).
pub(crate) fn resolve(path: Option<&Path>, api: Api, resumed: Option<&RunRecord>) -> Result<Option<ToolSet>> {
    let recorded = resumed.and_then(|r| r.settings.tools.as_ref());
    let Some(path) = path else {
        if let Some(old) = recorded {
            bail!(
                "this run sent the tools of {} (sha256 {}): give --tools with that file to resume it",
                old.name,
                old.sha256
            );
        }
        return Ok(None);
    };
    if api == Api::Completions {
        bail!("--tools goes with --api chat: /v1/completions takes no tool definitions");
    }
    let set = load(path)?;
    match (resumed, recorded) {
        (Some(_), None) => bail!("--resume: this run sent no tools, so --tools would change what it measures"),
        (_, Some(old)) if old.sha256 != set.info.sha256 => bail!(
            "--resume: the run sent the tools of {} (sha256 {}), and {} is different (sha256 {}): give the same file",
            old.name,
            old.sha256,
            path.display(),
            set.info.sha256
        ),
        _ => Ok(Some(set)),
    }
}

/// Reads and checks the file: a JSON array of function tools, each with a `function.name`.
pub(crate) fn load(path: &Path) -> Result<ToolSet> {
    let bytes = std::fs::read(path).with_context(|| format!("--tools: cannot read {}", path.display()))?;
    let (definitions, names) =
        sm_core::tools::parse(&bytes).with_context(|| format!("--tools: {} is not a list of tools", path.display()))?;
    let name = path.file_name().map_or_else(|| path.display().to_string(), |n| n.to_string_lossy().into_owned());
    let sha256 = Sha256::digest(&bytes).iter().map(|b| format!("{b:02x}")).collect();
    let info = ToolsInfo { name, sha256, bytes: bytes.len() as u64, names };
    Ok(ToolSet { definitions: Arc::new(definitions), info })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_is_read_with_its_hash_and_names_and_bad_ones_say_why() {
        let dir = tempfile::tempdir().unwrap();
        let good = dir.path().join("tools.json");
        std::fs::write(&good, r#"[{"type":"function","function":{"name":"get_weather","parameters":{}}}]"#).unwrap();
        let set = load(&good).unwrap();
        assert_eq!(
            (set.info.name.as_str(), set.info.names.as_slice()),
            ("tools.json", &["get_weather".to_string()][..])
        );
        assert_eq!((set.info.bytes, set.info.sha256.len()), (71, 64));
        let e = format!("{:#}", resolve(Some(&good), Api::Completions, None).unwrap_err());
        assert!(e.contains("--tools goes with --api chat"), "{e}");
        let e = format!("{:#}", load(&dir.path().join("missing.json")).unwrap_err());
        assert!(e.starts_with("--tools: cannot read") && e.contains("missing.json"), "{e}");
        let bad = dir.path().join("bad.json");
        std::fs::write(&bad, r#"[{"type":"function","function":{}}]"#).unwrap();
        let e = format!("{:#}", load(&bad).unwrap_err());
        assert!(e.contains("bad.json is not a list of tools: tool 1 has no function.name"), "{e}");
    }
}
