//! The secrets this process was given, and the one place every output passes to lose them.
//!
//! A run is given secrets (`--api-key` or `OPENAI_API_KEY`, an upload token, secret values in
//! `--launch-command` or `--label`, secret environment variables); a server may send any of them
//! back (a proxy that echoes the `Authorization` header in an error body). Rather than cleaning
//! each field that might hold server text, every writer — the run record, the reports, the
//! console and log lines, the dashboard's events — passes its text through [`scrub`], which
//! replaces each known secret (and a known secret cut short by an excerpt) with `<redacted>`,
//! and redacts credentials by shape ([`crate::redact::redact_text`]).
//!
//! The set is resolved once at start-up ([`register_startup`]) into a process-wide registry, so
//! that no writer has to be handed it and none can forget it.

use std::borrow::Cow;
use std::sync::RwLock;

use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::redact::{self, REDACTED};

/// Shorter values are not scrubbed: they would replace ordinary words.
pub const MIN_LEN: usize = 4;
/// From this length a given value is scrubbed whatever its letters: a real key may be a plain
/// lower-case word (`--api-key mysecretkey`). Shorter plain words (`none`, `dummy`) are placeholders.
pub const MIN_WORD_LEN: usize = 8;
/// Environment values are scrubbed from this length (flags like `HF_HUB_DISABLE_…_TOKEN=1`).
const MIN_ENV_LEN: usize = 8;
/// A secret cut short by an excerpt (`sk-test-SE…`) is scrubbed when this much of it is left.
const MIN_CUT: usize = 6;

/// A set of secret values, in every form they may be written back in (as is, JSON-escaped,
/// percent-encoded, HTML-escaped).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Secrets {
    /// The values as given, longest first.
    values: Vec<String>,
    /// `values` and their other spellings, longest first.
    forms: Vec<String>,
}

#[derive(Debug, thiserror::Error)]
pub enum ScrubError {
    #[error(
        "a secret given to speedmatrix ({len} characters) is also part of the structure of the record or of a \
         report (a status, a field name, a word of the page), so it cannot be written without it; nothing was \
         written with it. Use a real key, not a word like a status or a field name"
    )]
    Structure { len: usize },
}

impl Secrets {
    pub const fn new() -> Secrets {
        Secrets { values: Vec::new(), forms: Vec::new() }
    }

    /// Adds a secret; `false` when it is too short or too plain to scrub safely (see [`worth`]).
    pub fn add(&mut self, value: &str) -> bool {
        let value = value.trim();
        if !worth(value) {
            return false;
        }
        if !self.values.iter().any(|v| v == value) {
            self.values.push(value.to_string());
            self.values.sort_by_key(|v| std::cmp::Reverse(v.len()));
        }
        for form in forms_of(value) {
            if !self.forms.contains(&form) {
                self.forms.push(form);
            }
        }
        self.forms.sort_by_key(|f| std::cmp::Reverse(f.len()));
        true
    }

    pub fn is_empty(&self) -> bool {
        self.values.is_empty()
    }

    /// Whether `text` holds any of the secrets in any of their forms.
    pub fn found_in(&self, text: &str) -> bool {
        self.forms.iter().any(|f| text.contains(f.as_str()))
    }

    /// `text` without any known secret and without credentials by shape.
    pub fn scrub<'a>(&self, text: &'a str) -> Cow<'a, str> {
        let mut out = Cow::Borrowed(text);
        for form in &self.forms {
            if out.contains(form.as_str()) {
                out = Cow::Owned(out.replace(form.as_str(), REDACTED));
            }
        }
        if let Some(cut) = self.cut_short(&out) {
            out = Cow::Owned(cut);
        }
        let shaped = redact::redact_text(&out);
        if shaped.text != *out { Cow::Owned(shaped.text) } else { out }
    }

    /// A secret whose start is left before an ellipsis (`…`, `...`) or at the very end of
    /// `text`: what a truncated excerpt of an echoed header leaves.
    fn cut_short(&self, text: &str) -> Option<String> {
        let ends = text.match_indices(['…']).map(|(i, _)| (i, MIN_CUT));
        let ends = ends.chain(text.match_indices("...").map(|(i, _)| (i, MIN_CUT)));
        // at the very end a longer piece is needed: prose may end like a secret begins
        let ends: Vec<(usize, usize)> = ends.chain(std::iter::once((text.len(), MIN_CUT + 2))).collect();
        let mut edits: Vec<std::ops::Range<usize>> = Vec::new();
        for &(end, min) in &ends {
            let before = &text[..end];
            let longest = self
                .values
                .iter()
                .filter_map(|v| (min..v.len()).rev().find(|&k| v.is_char_boundary(k) && before.ends_with(&v[..k])))
                .max();
            if let Some(k) = longest {
                edits.push(end - k..end);
            }
        }
        if edits.is_empty() {
            return None;
        }
        edits.sort_by_key(|r| r.start);
        let mut out = String::with_capacity(text.len());
        let mut at = 0;
        for r in edits {
            if r.start < at {
                continue;
            }
            out.push_str(&text[at..r.start]);
            out.push_str(REDACTED);
            at = r.end;
        }
        out.push_str(&text[at..]);
        Some(out)
    }

    /// Scrubs every string of a JSON document (object keys are the record's own names).
    pub fn scrub_json(&self, value: &mut Value) {
        match value {
            Value::String(s) => {
                if let Cow::Owned(clean) = self.scrub(s) {
                    *s = clean;
                }
            }
            Value::Array(items) => items.iter_mut().for_each(|v| self.scrub_json(v)),
            Value::Object(map) => map.values_mut().for_each(|v| self.scrub_json(v)),
            _ => {}
        }
    }

    /// A scrubbed copy of any serialisable value (a run record, a cell, a prefill row), or
    /// [`ScrubError::Structure`] where the secret is part of its structure: a word of an enum (the
    /// scrubbed copy no longer reads) or an object key (scrubbing leaves it in place).
    pub fn scrubbed<T: Serialize + DeserializeOwned>(&self, value: &T) -> Result<T, ScrubError> {
        let mut json = serde_json::to_value(value).map_err(|_| self.structure())?;
        self.scrub_json(&mut json);
        let clean: T = serde_json::from_value(json).map_err(|_| self.structure())?;
        let text = serde_json::to_string(&clean).map_err(|_| self.structure())?;
        self.check_clean(&text)?;
        Ok(clean)
    }

    /// `Ok` when `text`, made from values already scrubbed, holds no secret; else the secret is a
    /// word of the text's own structure (a field name, a word of a page's template) and the text
    /// must not be written.
    pub fn check_clean(&self, text: &str) -> Result<(), ScrubError> {
        match self.values.iter().find(|v| forms_of(v).iter().any(|f| text.contains(f.as_str()))) {
            Some(v) => Err(ScrubError::Structure { len: v.chars().count() }),
            None => Ok(()),
        }
    }

    fn structure(&self) -> ScrubError {
        ScrubError::Structure { len: self.values.first().map_or(0, |v| v.chars().count()) }
    }
}

/// A value worth scrubbing: of [`MIN_WORD_LEN`] characters or more whatever its letters, else of
/// [`MIN_LEN`] or more and not a plain lower-case word (`none`, `dummy`, `valid`: placeholders, and
/// words of the record's own vocabulary). A long word that is also part of the record's structure
/// is refused where it is written ([`Secrets::scrubbed`], [`Secrets::check_clean`]).
fn worth(value: &str) -> bool {
    let len = value.chars().count();
    let word = value.bytes().all(|b| b.is_ascii_lowercase() || b == b'_');
    len >= MIN_LEN && !value.contains(REDACTED) && (len >= MIN_WORD_LEN || !word)
}

/// The spellings a value may be written back in.
fn forms_of(value: &str) -> Vec<String> {
    let json = serde_json::to_string(value).unwrap_or_default();
    let json = json[1..json.len().saturating_sub(1).max(1)].to_string();
    let percent: String = value
        .bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect();
    let html = value
        .replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
        .replace('\'', "&#39;");
    let mut out = vec![value.to_string()];
    for form in [json, percent, html] {
        if !form.is_empty() && !out.contains(&form) {
            out.push(form);
        }
    }
    out
}

static GIVEN: RwLock<Secrets> = RwLock::new(Secrets::new());

fn given() -> std::sync::RwLockReadGuard<'static, Secrets> {
    GIVEN.read().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Adds a secret to the process-wide set every output is scrubbed with.
pub fn register(value: &str) -> bool {
    GIVEN.write().unwrap_or_else(std::sync::PoisonError::into_inner).add(value)
}

/// A copy of the process-wide set.
pub fn registered() -> Secrets {
    given().clone()
}

/// Registers what this process was given: the values of secret flags on its command line
/// (`--api-key`, `--token`), the secrets inside any other argument (`--launch-command "… --api-key
/// …"`, `--label`), and the values of secret environment variables (`OPENAI_API_KEY`,
/// `SPEEDMATRIX_TOKEN`, `HF_TOKEN`, …).
pub fn register_startup(args: &[String], env: impl IntoIterator<Item = (String, String)>) {
    let mut i = 0;
    while i < args.len() {
        let arg = &args[i];
        match arg.split_once('=') {
            Some((flag, value)) if flag.starts_with("--") && redact::is_secret_flag(flag) => {
                register(value);
            }
            None if arg.starts_with('-') && redact::is_secret_flag(arg) => {
                if let Some(value) = args.get(i + 1) {
                    register(value);
                    i += 1;
                }
            }
            _ => {
                for found in redact::redact_command_found(arg).secrets {
                    register(&found);
                }
            }
        }
        i += 1;
    }
    for (name, value) in env {
        if redact::is_secret_env(&name) && value.trim().chars().count() >= MIN_ENV_LEN {
            register(&value);
        }
    }
}

/// [`Secrets::scrub`] with the process-wide set.
pub fn scrub(text: &str) -> Cow<'_, str> {
    given().scrub(text)
}

/// [`Secrets::scrub_json`] with the process-wide set.
pub fn scrub_json(value: &mut Value) {
    given().scrub_json(value);
}

/// [`Secrets::check_clean`] with the process-wide set.
pub fn check_clean(text: &str) -> Result<(), ScrubError> {
    given().check_clean(text)
}

/// [`Secrets::scrubbed`] with the process-wide set.
pub fn scrubbed<T: Serialize + DeserializeOwned>(value: &T) -> Result<T, ScrubError> {
    given().scrubbed(value)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(values: &[&str]) -> Secrets {
        let mut s = Secrets::new();
        for v in values {
            s.add(v);
        }
        s
    }

    #[test]
    fn known_values_in_every_spelling() {
        let s = set(&["sk-A/b+c\"d"]);
        assert_eq!(s.scrub("raw sk-A/b+c\"d"), "raw <redacted>");
        assert_eq!(s.scrub(r#"json "sk-A/b+c\"d""#), r#"json "<redacted>""#);
        assert_eq!(s.scrub("url ?k=sk-A%2Fb%2Bc%22d"), "url ?k=<redacted>");
        assert_eq!(s.scrub("html sk-A/b+c&quot;d"), "html <redacted>");
        assert!(matches!(s.scrub("nothing here"), Cow::Borrowed(_)));
    }

    #[test]
    fn a_secret_cut_short_by_an_excerpt() {
        let s = set(&["sk-test-SECRET-4242"]);
        assert_eq!(
            s.scrub("HTTP 400: echo Bearer sk-test-SE… (retried)"),
            "HTTP 400: echo Bearer <redacted>… (retried)"
        );
        assert_eq!(s.scrub("body ends sk-test-SECR"), "body ends <redacted>");
        // a few characters are not the secret
        assert_eq!(s.scrub("ask-t"), "ask-t");
    }

    #[test]
    fn plain_words_and_short_values_are_not_registered() {
        let mut s = Secrets::new();
        for v in ["abc", "none", "dummy", "valid", " ", REDACTED] {
            assert!(!s.add(v), "{v}");
        }
        assert!(s.add("EMPTY") && s.add("token-abc123"));
    }

    #[test]
    fn a_long_lower_case_key_is_a_secret() {
        let s = set(&["mysecretkey"]);
        assert_eq!(s.scrub("401: key mysecretkey refused"), "401: key <redacted> refused");
        assert_eq!(s.scrub("cut mysecre…"), "cut <redacted>…");
        // seven letters are still a placeholder word
        assert!(!Secrets::new().add("invalid"));
    }

    #[test]
    fn a_secret_that_is_part_of_the_structure_is_refused() {
        #[derive(Serialize, serde::Deserialize, Debug)]
        #[serde(rename_all = "snake_case")]
        enum Status {
            Complete,
        }
        #[derive(Serialize, serde::Deserialize, Debug)]
        struct Rec {
            status: Status,
            concurrency: u32,
            reason: String,
        }
        let rec = Rec { status: Status::Complete, concurrency: 1, reason: "echo: mysecretkey".into() };
        let clean = set(&["mysecretkey"]).scrubbed(&rec).unwrap();
        assert_eq!(clean.reason, "echo: <redacted>");
        // a status word: the scrubbed record no longer reads
        assert!(matches!(set(&["complete"]).scrubbed(&rec), Err(ScrubError::Structure { len: 8 })));
        // a field name: scrubbing would leave it in place
        assert!(matches!(set(&["concurrency"]).scrubbed(&rec), Err(ScrubError::Structure { len: 11 })));
        assert!(set(&["background"]).check_clean("<style>p { background: red }</style>").is_err());
    }

    #[test]
    fn records_and_shapes() {
        let s = set(&["k-123456"]);
        let mut v = serde_json::json!({"a": ["x k-123456 y", {"b": "Authorization: Bearer other-secret"}], "n": 1});
        s.scrub_json(&mut v);
        assert_eq!(v, serde_json::json!({"a": ["x <redacted> y", {"b": "Authorization: Bearer <redacted>"}], "n": 1}));
    }

    #[test]
    fn startup_arguments_and_environment() {
        let args: Vec<String> = [
            "speedmatrix",
            "run",
            "--api-key",
            "sk-startup-1",
            "--token=smt_startup_2",
            "--launch-command",
            "vllm serve m --api-key launch-secret-3",
            "--max-tokens",
            "4096",
        ]
        .map(String::from)
        .to_vec();
        let env = [("HF_TOKEN".to_string(), "hf_startup_env_4".to_string()), ("HF_HUB_OFFLINE".into(), "1".into())];
        register_startup(&args, env);
        let text = "sk-startup-1 smt_startup_2 launch-secret-3 hf_startup_env_4 4096 HF_HUB_OFFLINE";
        assert_eq!(scrub(text), "<redacted> <redacted> <redacted> <redacted> 4096 HF_HUB_OFFLINE");
    }
}
