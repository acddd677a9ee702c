//! `run.json`, rewritten atomically (temporary file, fsync, rename) after every
//! cell: a crash or Ctrl-C loses at most the cell in progress. One process at a
//! time owns a run directory: two would measure the same cells twice.

use std::fs::{self, File, OpenOptions};
use std::io::{self, Read, Write};
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use sm_core::record::RunRecord;

/// The lock file in a run directory, held (`flock`) by the process writing the run.
pub const LOCK_FILE: &str = "run.lock";

#[derive(Debug, Clone)]
pub struct Journal {
    dir: PathBuf,
    /// Open and locked while any clone lives; the kernel drops the lock when the process dies,
    /// even by `kill -9`, so a stale file never blocks a resume.
    _lock: Arc<File>,
}

#[derive(Debug, thiserror::Error)]
pub enum JournalError {
    #[error("cannot create the output directory {}: {source}", .dir.display())]
    Create { dir: PathBuf, source: io::Error },
    #[error(
        "another speedmatrix process{} is running in {} (it holds {}); wait for it to end or stop it, or choose another directory",
        .pid.map(|p| format!(" (PID {p})")).unwrap_or_default(),
        .dir.display(),
        .lock.display()
    )]
    Busy { dir: PathBuf, lock: PathBuf, pid: Option<u32> },
}

impl Journal {
    /// Creates `dir` and takes its lock for as long as the journal (or a clone) lives.
    pub fn create(dir: &Path) -> Result<Journal, JournalError> {
        let create = |source| JournalError::Create { dir: dir.to_path_buf(), source };
        fs::create_dir_all(dir).map_err(create)?;
        let path = dir.join(LOCK_FILE);
        // not truncated before the lock is ours: the PID in it belongs to the holder
        let mut file =
            OpenOptions::new().read(true).write(true).create(true).truncate(false).open(&path).map_err(create)?;
        // SAFETY: flock on a descriptor this function owns; no memory is involved.
        if unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } != 0 {
            let err = io::Error::last_os_error();
            if err.kind() != io::ErrorKind::WouldBlock {
                return Err(create(err));
            }
            let mut text = String::new();
            let pid = file.read_to_string(&mut text).ok().and_then(|_| text.trim().parse().ok());
            return Err(JournalError::Busy { dir: dir.to_path_buf(), lock: path, pid });
        }
        file.set_len(0).map_err(create)?;
        writeln!(file, "{}", std::process::id()).map_err(create)?;
        Ok(Journal { dir: dir.to_path_buf(), _lock: Arc::new(file) })
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    pub fn path(&self) -> PathBuf {
        self.dir.join("run.json")
    }

    /// Writes the record with every secret this process was given scrubbed out
    /// ([`sm_core::secrets`]): whatever a server sent back, `run.json` never holds a secret.
    pub fn write(&self, record: &RunRecord) -> io::Result<()> {
        let mut value = serde_json::to_value(record).map_err(io::Error::other)?;
        sm_core::secrets::scrub_json(&mut value);
        let json = serde_json::to_vec_pretty(&value).map_err(io::Error::other)?;
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

    #[test]
    fn one_journal_at_a_time_per_directory() {
        let dir = tempfile::tempdir().unwrap();
        let first = Journal::create(dir.path()).unwrap();
        let copy = first.clone();
        // flock belongs to the open file, so a second open in this process is refused like another process
        let e = Journal::create(dir.path()).unwrap_err();
        let text = e.to_string();
        assert!(matches!(e, JournalError::Busy { pid: Some(p), .. } if p == std::process::id()), "{text}");
        assert!(text.contains(&format!("PID {}", std::process::id())) && text.contains(LOCK_FILE), "{text}");
        drop(first);
        assert!(Journal::create(dir.path()).is_err(), "a clone still holds the lock");
        drop(copy);
        Journal::create(dir.path()).expect("free once every clone is gone");
    }
}
