//! `run.json`, rewritten atomically (temporary file, fsync, rename) after every
//! cell: a crash or Ctrl-C loses at most the cell in progress. One process at a
//! time owns a run directory: two would measure the same cells twice. Its lock
//! file is removed when the run ends, without opening a window for a second owner.

use std::fs::{self, File, OpenOptions};
use std::io::{self, Read, Write};
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use sm_core::record::RunRecord;

/// The lock file in a run directory, held (`flock`) by the process writing the run and removed
/// when it ends.
pub const LOCK_FILE: &str = "run.lock";
/// The record in a run directory.
pub const RUN_FILE: &str = "run.json";

#[derive(Debug, Clone)]
pub struct Journal {
    dir: PathBuf,
    /// Held while any clone lives; the kernel drops the lock when the process dies, even by
    /// `kill -9`, so a file left behind never blocks a resume.
    _lock: Arc<Lock>,
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
    /// A new run was to start in a directory that already holds one.
    #[error("{} already holds a run (run.json)", .dir.display())]
    HoldsRun { dir: PathBuf },
}

impl Journal {
    /// Creates `dir` and takes its lock for as long as the journal (or a clone) lives: for a run
    /// that continues the one in `dir`.
    pub fn create(dir: &Path) -> Result<Journal, JournalError> {
        let existed = dir.try_exists().unwrap_or(true);
        fs::create_dir_all(dir).map_err(|source| JournalError::Create { dir: dir.to_path_buf(), source })?;
        let mut lock = Lock::acquire(dir)?;
        lock.made_dir = (!existed).then(|| dir.to_path_buf());
        Ok(Journal { dir: dir.to_path_buf(), _lock: Arc::new(lock) })
    }

    /// Like [`Journal::create`], for a new run: a directory that holds a run already is refused
    /// ([`JournalError::HoldsRun`]) unless `overwrite`. Checked under the lock, so two new runs
    /// cannot both take the same directory.
    pub fn create_new(dir: &Path, overwrite: bool) -> Result<Journal, JournalError> {
        let journal = Journal::create(dir)?;
        if !overwrite && journal.path().try_exists().unwrap_or(true) {
            return Err(JournalError::HoldsRun { dir: dir.to_path_buf() });
        }
        Ok(journal)
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    pub fn path(&self) -> PathBuf {
        self.dir.join(RUN_FILE)
    }

    /// Writes the record with every secret this process was given scrubbed out
    /// ([`sm_core::secrets`]): whatever a server sent back, `run.json` never holds a secret. A
    /// secret that is a word of the record's structure fails the write rather than leave it.
    pub fn write(&self, record: &RunRecord) -> io::Result<()> {
        let clean = sm_core::secrets::scrubbed(record).map_err(io::Error::other)?;
        let json = serde_json::to_vec_pretty(&clean).map_err(io::Error::other)?;
        write_atomic(&self.path(), &json)
    }
}

/// The lock file while this process holds it. Removing it is safe only while it is still locked:
/// the next process may then hold the old file, which [`Lock::acquire`] notices.
#[derive(Debug)]
struct Lock {
    path: PathBuf,
    /// Which entry of [`HELD`] is this lock.
    id: u64,
    _file: File,
    /// The directory, when this process created it: a run that ends before writing anything
    /// (the server could not be reached) leaves no empty directory behind.
    made_dir: Option<PathBuf>,
}

/// Locks whose files this process holds, so that [`remove_held_locks`] can remove them on the
/// ways out that skip destructors (`std::process::exit`).
static HELD: Mutex<Vec<(u64, PathBuf)>> = Mutex::new(Vec::new());
static NEXT_ID: AtomicU64 = AtomicU64::new(0);
/// A lock file that is replaced this many times between our open and our lock is not a race any more.
const ATTEMPTS: usize = 16;

fn held() -> MutexGuard<'static, Vec<(u64, PathBuf)>> {
    HELD.lock().unwrap_or_else(|p| p.into_inner())
}

impl Lock {
    fn acquire(dir: &Path) -> Result<Lock, JournalError> {
        let path = dir.join(LOCK_FILE);
        let create = |source| JournalError::Create { dir: dir.to_path_buf(), source };
        for _ in 0..ATTEMPTS {
            // not truncated before the lock is ours: the PID in it belongs to the holder
            let file =
                OpenOptions::new().read(true).write(true).create(true).truncate(false).open(&path).map_err(create)?;
            if let Some(lock) = Lock::take(file, &path, dir)? {
                return Ok(lock);
            }
        }
        Err(create(io::Error::other(format!("{} keeps being replaced by another process", path.display()))))
    }

    /// Locks `file`, opened at `path`; `None` when it turns out to be a lock file that its holder
    /// removed meanwhile (it ended between our open and our lock): holding that one would let a
    /// third process take the new file at `path` as well.
    fn take(mut file: File, path: &Path, dir: &Path) -> Result<Option<Lock>, JournalError> {
        let create = |source| JournalError::Create { dir: dir.to_path_buf(), source };
        // SAFETY: flock on a descriptor this function owns; no memory is involved.
        if unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } != 0 {
            let err = io::Error::last_os_error();
            if err.kind() != io::ErrorKind::WouldBlock {
                return Err(create(err));
            }
            let mut text = String::new();
            let pid = file.read_to_string(&mut text).ok().and_then(|_| text.trim().parse().ok());
            return Err(JournalError::Busy { dir: dir.to_path_buf(), lock: path.to_path_buf(), pid });
        }
        if !same_file(&file, path).map_err(create)? {
            return Ok(None);
        }
        file.set_len(0).map_err(create)?;
        writeln!(file, "{}", std::process::id()).map_err(create)?;
        let id = NEXT_ID.fetch_add(1, Ordering::Relaxed);
        held().push((id, path.to_path_buf()));
        Ok(Some(Lock { path: path.to_path_buf(), id, _file: file, made_dir: None }))
    }
}

impl Drop for Lock {
    fn drop(&mut self) {
        let mut held = held();
        // not when remove_held_locks already did: the path may be another process's lock by now
        if let Some(i) = held.iter().position(|(id, _)| *id == self.id) {
            held.remove(i);
            // while the file is still open and locked (it closes after this)
            let _ = fs::remove_file(&self.path);
            if let Some(dir) = &self.made_dir {
                // fails, as it should, unless the directory is empty
                let _ = fs::remove_dir(dir);
            }
        }
    }
}

fn same_file(file: &File, path: &Path) -> io::Result<bool> {
    use std::os::unix::fs::MetadataExt;
    let ours = file.metadata()?;
    match fs::metadata(path) {
        Ok(now) => Ok(now.dev() == ours.dev() && now.ino() == ours.ino()),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(false),
        Err(e) => Err(e),
    }
}

/// Removes the lock files this process holds, for a way out that ends the process without
/// running destructors (a second signal). They are still locked, so removing them is safe.
pub fn remove_held_locks() {
    for (_, path) in held().drain(..) {
        let _ = fs::remove_file(path);
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
    fn a_directory_made_for_a_run_that_wrote_nothing_is_removed() {
        let root = tempfile::tempdir().unwrap();
        let new = root.path().join("a/new");
        drop(Journal::create_new(&new, false).unwrap());
        assert!(!new.exists(), "an empty directory the journal made is removed");
        assert!(root.path().join("a").exists(), "only the run's own directory");

        let written = root.path().join("written");
        let j = Journal::create_new(&written, false).unwrap();
        write_atomic(&j.path(), b"{}").unwrap();
        drop(j);
        assert!(written.join(RUN_FILE).exists(), "a directory with a run is kept");

        let existing = root.path().join("existing");
        fs::create_dir(&existing).unwrap();
        drop(Journal::create_new(&existing, false).unwrap());
        assert!(existing.exists(), "a directory the user made is kept, empty or not");
    }

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

    #[test]
    fn the_lock_file_is_removed_when_the_last_clone_ends() {
        let dir = tempfile::tempdir().unwrap();
        let lock = dir.path().join(LOCK_FILE);
        let journal = Journal::create(dir.path()).unwrap();
        let copy = journal.clone();
        assert!(lock.exists());
        drop(journal);
        assert!(lock.exists(), "a clone still holds it");
        drop(copy);
        assert!(!lock.exists(), "run.lock left behind");
    }

    /// Process B opened run.lock just before its holder A ended (and removed it), and C has
    /// taken the new run.lock since: B's lock on the old file must not count as owning the directory.
    #[test]
    fn a_lock_taken_on_a_removed_file_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(LOCK_FILE);
        let a = Journal::create(dir.path()).unwrap();
        let opened_by_b = OpenOptions::new().read(true).write(true).open(&path).unwrap();
        drop(a);
        let c = Journal::create(dir.path()).unwrap();
        assert!(Lock::take(opened_by_b, &path, dir.path()).unwrap().is_none(), "B holds a stale file");
        assert!(matches!(Journal::create(dir.path()), Err(JournalError::Busy { .. })), "C owns the directory");
        drop(c);
        assert!(!path.exists());
    }

    #[test]
    fn a_new_run_is_refused_where_a_run_is_unless_told_to_overwrite() {
        let dir = tempfile::tempdir().unwrap();
        let first = Journal::create_new(dir.path(), false).expect("an empty directory is free");
        fs::write(first.path(), "{}").unwrap();
        drop(first);
        let e = Journal::create_new(dir.path(), false).unwrap_err();
        assert!(matches!(e, JournalError::HoldsRun { .. }), "{e}");
        assert!(!dir.path().join(LOCK_FILE).exists(), "a refused claim leaves no lock file");
        Journal::create_new(dir.path(), true).expect("overwrite");
        Journal::create(dir.path()).expect("a resume takes a directory that holds a run");
    }
}
