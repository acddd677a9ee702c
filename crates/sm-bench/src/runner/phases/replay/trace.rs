//! A trace file read once, before the run starts (a bad line is refused before anything is sent):
//! its requests placed on the recorded clock, each session's turns linked, and — for a Mooncake
//! trace — what each request shares with the requests before it. The text of the prompts is not
//! made here: a replay makes each body as its request comes due.

use std::collections::HashMap;
use std::fs::File;
use std::io::{BufReader, Read};
use std::path::Path;

use sm_core::phases::replay::TraceFileInfo;
use sm_core::replay::prefix::PrefixCache;
use sm_core::replay::{ReplayError, ReplayFormat, ReplayInput, ReplayOptions, ReplayReader, ReplaySpec};

/// Why a trace could not be read.
#[derive(Debug, thiserror::Error)]
pub enum TraceError {
    // the cause is the error's source: a caller that prints the chain shows it once
    #[error("cannot open the trace {path}")]
    Open { path: String, source: std::io::Error },
    #[error("the trace {path}")]
    Read { path: String, source: ReplayError },
    #[error("bad replay option: {0}")]
    Options(#[from] sm_core::replay::OptionsError),
    #[error(
        "the trace {path} has {count} requests in its slice; replay at most {max} (take a slice with --replay-start/--replay-duration)"
    )]
    TooMany { path: String, count: usize, max: usize },
}

/// The most requests one replay holds.
pub const MAX_REQUESTS: usize = 2_000_000;

/// One request of the trace.
#[derive(Debug, Clone, PartialEq)]
pub struct TraceRequest {
    /// Seconds after the slice's first request, at the recorded speed.
    pub at_s: f64,
    pub input: ReplayInput,
    /// A session's previous turn in this slice (its index), whose answer this one waits for.
    pub after: Option<u32>,
    /// Mooncake: the tokens of its prompt that the requests before it share (the trace's ideal
    /// prefix cache, before the server's block rounding).
    pub shared_tokens: Option<u64>,
}

/// A trace, read.
#[derive(Debug, Clone, PartialEq)]
pub struct Trace {
    pub info: TraceFileInfo,
    pub format: ReplayFormat,
    pub options: ReplayOptions,
    /// In the file's (the due) order.
    pub requests: Vec<TraceRequest>,
}

impl Trace {
    /// Reads the trace at `path` with the slice and block size of `spec` (its time scale is the
    /// level's, not the reader's: the trace is read at the recorded speed).
    pub fn load(path: &Path, spec: ReplaySpec) -> Result<Trace, TraceError> {
        let shown = path.display().to_string();
        let options = ReplayOptions::resolve(ReplaySpec { time_scale: 1.0, ..spec })?;
        let open = || File::open(path).map_err(|source| TraceError::Open { path: shown.clone(), source });
        let mut reader = ReplayReader::new(BufReader::new(open()?), options);
        let mut requests = Vec::new();
        let mut sessions: HashMap<String, u32> = HashMap::new();
        let mut cache = PrefixCache::new(options.block_tokens());
        for request in reader.by_ref() {
            let request = request.map_err(|source| TraceError::Read { path: shown.clone(), source })?;
            if requests.len() == MAX_REQUESTS {
                return Err(TraceError::TooMany { path: shown, count: requests.len() + 1, max: MAX_REQUESTS });
            }
            let index = requests.len() as u32;
            let (after, shared_tokens) = match &request.input {
                ReplayInput::Mooncake(m) => (None, Some(cache.admit(m).tokens)),
                ReplayInput::Messages(m) => {
                    (m.session_id.as_ref().and_then(|id| sessions.insert(id.clone(), index)), None)
                }
            };
            requests.push(TraceRequest { at_s: request.due.as_secs_f64(), input: request.input, after, shared_tokens });
        }
        let format = reader.format().unwrap_or(ReplayFormat::Mooncake);
        Ok(Trace { info: Trace::file_info(path)?, format, options, requests })
    }

    /// What the record keeps of the file: its name (no directories), hash and size.
    pub fn file_info(path: &Path) -> Result<TraceFileInfo, TraceError> {
        let shown = path.display().to_string();
        let open = File::open(path).map_err(|source| TraceError::Open { path: shown.clone(), source })?;
        let (hash, bytes) = hash_file(open).map_err(|source| TraceError::Open { path: shown.clone(), source })?;
        let name = path.file_name().map_or(shown, |n| n.to_string_lossy().into_owned());
        Ok(TraceFileInfo { name, hash, bytes })
    }

    /// From the first request to the last, at the recorded speed, s.
    pub fn span_s(&self) -> f64 {
        self.requests.last().map_or(0.0, |r| r.at_s)
    }

    /// The requests ÷ the span: the recorded rate a time scale multiplies; `None` for one request
    /// (or all at one instant).
    pub fn recorded_rps(&self) -> Option<f64> {
        let span = self.span_s();
        (span > 0.0).then(|| self.requests.len() as f64 / span)
    }

    /// The due times at `scale`, s after the level's start.
    pub fn due(&self, scale: f64) -> Vec<f64> {
        self.requests.iter().map(|r| r.at_s / scale).collect()
    }
}

/// FNV-1a 64 of the file's bytes, as [`sm_core::record::fnv1a64`] hashes one text, and its size.
fn hash_file(mut file: File) -> std::io::Result<(String, u64)> {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    let mut buf = vec![0u8; 1 << 16];
    let mut bytes = 0u64;
    loop {
        let n = file.read(&mut buf)?;
        if n == 0 {
            break;
        }
        bytes += n as u64;
        for &b in &buf[..n] {
            h ^= u64::from(b);
            h = h.wrapping_mul(0x0100_0000_01b3);
        }
    }
    // the part's end, as fnv1a64 marks it
    h = h.wrapping_mul(0x0100_0000_01b3);
    Ok((format!("{h:016x}"), bytes))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn file(lines: &[&str]) -> tempfile::NamedTempFile {
        let mut f = tempfile::NamedTempFile::new().unwrap();
        for l in lines {
            writeln!(f, "{l}").unwrap();
        }
        f
    }

    #[test]
    fn a_mooncake_trace_keeps_its_clock_and_its_sharing() {
        let f = file(&[
            r#"{"timestamp": 1000, "input_length": 1000, "output_length": 8, "hash_ids": [1, 2]}"#,
            r#"{"timestamp": 1500, "input_length": 1500, "output_length": 8, "hash_ids": [1, 2, 3]}"#,
            r#"{"timestamp": 3000, "input_length": 600, "output_length": 8, "hash_ids": [1, 9]}"#,
        ]);
        let t = Trace::load(f.path(), ReplaySpec::default()).unwrap();
        assert_eq!(t.format, ReplayFormat::Mooncake);
        let at: Vec<f64> = t.requests.iter().map(|r| r.at_s).collect();
        assert_eq!(at, [0.0, 0.5, 2.0]);
        let shared: Vec<Option<u64>> = t.requests.iter().map(|r| r.shared_tokens).collect();
        assert_eq!(shared, [Some(0), Some(1024), Some(512)]);
        assert_eq!(t.recorded_rps(), Some(1.5));
        assert_eq!(t.due(2.0), [0.0, 0.25, 1.0]);
        let text = std::fs::read_to_string(f.path()).unwrap();
        assert_eq!(t.info.hash, sm_core::record::fnv1a64(&[&text]));
        assert_eq!(t.info.bytes, text.len() as u64);
    }

    #[test]
    fn a_sessions_turns_follow_each_other() {
        let f = file(&[
            r#"{"timestamp": 0, "prompt": "a1", "session_id": "a"}"#,
            r#"{"timestamp": 1, "prompt": "b1", "session_id": "b"}"#,
            r#"{"timestamp": 2, "prompt": "a2", "session_id": "a"}"#,
            r#"{"timestamp": 3, "prompt": "x"}"#,
            r#"{"timestamp": 4, "prompt": "a3", "session_id": "a"}"#,
        ]);
        let t = Trace::load(f.path(), ReplaySpec::default()).unwrap();
        let after: Vec<Option<u32>> = t.requests.iter().map(|r| r.after).collect();
        assert_eq!(after, [None, None, Some(0), None, Some(2)]);
    }

    #[test]
    fn a_bad_trace_names_its_file_and_line() {
        let f = file(&[r#"{"timestamp": 0, "prompt": "a"}"#, "not json"]);
        let e = Trace::load(f.path(), ReplaySpec::default()).unwrap_err();
        let chain = format!("{e}: {}", std::error::Error::source(&e).unwrap());
        assert!(chain.contains("line 2") && chain.contains(&f.path().display().to_string()), "{chain}");
        assert_eq!(chain.matches("line 2").count(), 1, "{chain}");
        let e = Trace::load(Path::new("/nonexistent/trace.jsonl"), ReplaySpec::default()).unwrap_err();
        assert!(e.to_string().contains("cannot open"), "{e}");
    }
}
