//! `--prompts FILE.jsonl`: the user's own prompts, one JSON object per line — `{"prompt": "…"}` or
//! `{"messages": [{"role": "…", "content": "…"}, …]}`, optionally with `"max_tokens": N` — sent by
//! the load phases in place of synthetic text. The content goes only to the server; the record keeps
//! the file's name, hash and line count ([`PromptsFileInfo`]).

use std::path::Path;
use std::sync::Arc;

use serde::Deserialize;
use sm_client::openai::Prompt;
use sm_core::phases::PromptsFileInfo;
use sm_core::record::fnv1a64;

/// The most prompts one file may hold: it is read whole into memory.
pub const MAX_PROMPTS: usize = 1_000_000;

/// One prompt of the file.
#[derive(Debug, Clone)]
pub struct FilePrompt {
    pub prompt: Arc<Prompt>,
    /// The line's own `max_tokens`, where it has one.
    pub max_tokens: Option<u64>,
}

/// The file, read and checked.
#[derive(Debug, Clone)]
pub struct PromptFile {
    pub prompts: Vec<FilePrompt>,
    pub info: PromptsFileInfo,
}

#[derive(Debug, thiserror::Error)]
pub enum PromptFileError {
    #[error("cannot read the prompts file {path}: {source}")]
    Read { path: String, source: std::io::Error },
    #[error(
        "{path} line {line}: {why}. Each line must be a JSON object with \"prompt\" (text) or \"messages\" \
         (a list of {{\"role\", \"content\"}}), and optionally \"max_tokens\" (a positive integer)"
    )]
    Line { path: String, line: usize, why: String },
    #[error("{path} holds no prompt: give at least one line like {{\"prompt\": \"Hello\"}}")]
    Empty { path: String },
    #[error("{path} holds more than {MAX_PROMPTS} prompts: split it")]
    TooMany { path: String },
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Line {
    prompt: Option<String>,
    messages: Option<Vec<Message>>,
    max_tokens: Option<u64>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Message {
    role: String,
    content: String,
}

impl PromptFile {
    pub fn load(path: &Path) -> Result<PromptFile, PromptFileError> {
        let shown = path.display().to_string();
        let bytes = std::fs::read(path).map_err(|source| PromptFileError::Read { path: shown.clone(), source })?;
        let text = String::from_utf8(bytes).map_err(|e| PromptFileError::Line {
            path: shown.clone(),
            line: 1 + e.as_bytes()[..e.utf8_error().valid_up_to()].iter().filter(|b| **b == b'\n').count(),
            why: "it is not UTF-8 text".into(),
        })?;
        let name = path.file_name().map_or_else(|| "prompts.jsonl".into(), |n| n.to_string_lossy().into_owned());
        Self::parse(&text, &shown, name)
    }

    /// Parses the file's text; `shown` names it in errors, `name` in the record.
    pub fn parse(text: &str, shown: &str, name: String) -> Result<PromptFile, PromptFileError> {
        let mut prompts = Vec::new();
        for (i, raw) in text.lines().enumerate() {
            if raw.trim().is_empty() {
                continue;
            }
            if prompts.len() == MAX_PROMPTS {
                return Err(PromptFileError::TooMany { path: shown.into() });
            }
            let bad = |why: String| PromptFileError::Line { path: shown.into(), line: i + 1, why };
            let line: Line = serde_json::from_str(raw).map_err(|e| bad(format!("not a valid line ({e})")))?;
            prompts.push(line.into_prompt().map_err(bad)?);
        }
        if prompts.is_empty() {
            return Err(PromptFileError::Empty { path: shown.into() });
        }
        let info = PromptsFileInfo { name, hash: fnv1a64(&[text]), prompts: prompts.len() as u64 };
        Ok(PromptFile { prompts, info })
    }

    /// The `i`-th prompt, round the file again when `i` passes its end.
    pub fn get(&self, i: usize) -> &FilePrompt {
        &self.prompts[i % self.prompts.len()]
    }
}

impl Line {
    fn into_prompt(self) -> Result<FilePrompt, String> {
        if self.max_tokens == Some(0) {
            return Err("\"max_tokens\" must be at least 1".into());
        }
        let messages = match (self.prompt, self.messages) {
            (Some(p), None) if !p.is_empty() => vec![("user".to_string(), p)],
            (None, Some(m)) if !m.is_empty() => m.into_iter().map(|m| (m.role, m.content)).collect(),
            (Some(_), Some(_)) => return Err("it has both \"prompt\" and \"messages\"; keep one".into()),
            (Some(_), None) | (None, Some(_)) => return Err("its prompt is empty".into()),
            (None, None) => return Err("it has neither \"prompt\" nor \"messages\"".into()),
        };
        Ok(FilePrompt { prompt: Arc::new(Prompt { messages }), max_tokens: self.max_tokens })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<PromptFile, PromptFileError> {
        PromptFile::parse(text, "p.jsonl", "p.jsonl".into())
    }

    #[test]
    fn reads_both_forms_and_hashes_the_bytes() {
        let text = "{\"prompt\": \"hi\", \"max_tokens\": 5}\n\n{\"messages\": [{\"role\": \"system\", \"content\": \"s\"}, {\"role\": \"user\", \"content\": \"u\"}]}\n";
        let f = parse(text).unwrap();
        assert_eq!(f.prompts.len(), 2);
        assert_eq!(f.info.prompts, 2);
        assert_eq!(f.prompts[0].max_tokens, Some(5));
        assert_eq!(f.prompts[0].prompt.messages, vec![("user".to_string(), "hi".to_string())]);
        assert_eq!(f.prompts[1].prompt.messages.len(), 2);
        assert_eq!(f.get(3).prompt.messages.len(), 2, "wraps round");
        assert_eq!(f.info.hash, fnv1a64(&[text]));
        assert_ne!(parse("{\"prompt\": \"ho\"}").unwrap().info.hash, parse("{\"prompt\": \"hi\"}").unwrap().info.hash);
    }

    #[test]
    fn a_bad_line_is_named_with_what_to_do() {
        for (text, line, why) in [
            ("{\"prompt\": \"a\"}\nnot json", 2, "not a valid line"),
            ("{\"text\": \"a\"}", 1, "not a valid line"),
            ("{\"prompt\": \"\"}", 1, "empty"),
            ("{\"prompt\": \"a\", \"messages\": [{\"role\": \"user\", \"content\": \"b\"}]}", 1, "both"),
            ("{\"max_tokens\": 3}", 1, "neither"),
            ("{\"prompt\": \"a\", \"max_tokens\": 0}", 1, "at least 1"),
            ("{\"prompt\": \"a\", \"max_tokens\": -1}", 1, "not a valid line"),
        ] {
            let e = parse(text).unwrap_err().to_string();
            assert!(
                e.contains(&format!("line {line}:")) && e.contains(why) && e.contains("\"messages\""),
                "{text}: {e}"
            );
        }
        assert!(parse("\n  \n").unwrap_err().to_string().contains("no prompt"));
    }
}
