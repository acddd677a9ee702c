//! `run.json`, rewritten atomically (temporary file, fsync, rename) after every
//! cell: a crash or Ctrl-C loses at most the cell in progress.

use std::fs::{self, File};
use std::io::{self, Write};
use std::path::{Path, PathBuf};

use sm_core::record::RunRecord;

#[derive(Debug, Clone)]
pub struct Journal {
    dir: PathBuf,
}

impl Journal {
    pub fn create(dir: &Path) -> io::Result<Journal> {
        fs::create_dir_all(dir)?;
        Ok(Journal { dir: dir.to_path_buf() })
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    pub fn path(&self) -> PathBuf {
        self.dir.join("run.json")
    }

    pub fn write(&self, record: &RunRecord) -> io::Result<()> {
        let json = serde_json::to_vec_pretty(record).map_err(io::Error::other)?;
        write_atomic(&self.path(), &json)
    }
}

/// Writes `bytes` to `path` so that readers see the old file or the new one, never a mix.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> io::Result<()> {
    let tmp = path.with_extension("json.tmp");
    {
        let mut f = File::create(&tmp)?;
        f.write_all(bytes)?;
        f.write_all(b"\n")?;
        f.sync_all()?;
    }
    fs::rename(&tmp, path)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replaces_whole_file_and_leaves_no_temporary() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("run.json");
        write_atomic(&p, b"{\"a\":1}").unwrap();
        write_atomic(&p, b"{}").unwrap();
        assert_eq!(fs::read_to_string(&p).unwrap(), "{}\n");
        let names: Vec<_> = fs::read_dir(dir.path()).unwrap().map(|e| e.unwrap().file_name()).collect();
        assert_eq!(names, vec![std::ffi::OsString::from("run.json")]);
    }
}
