//! A local tokenizer (`--tokenizer PATH`) for servers that cannot count tokens themselves
//! (methodology §4.3): a Hugging Face `tokenizer.json`, read from disk, never downloaded.
//!
//! It counts the text of a prompt's messages. What the server adds around them (the chat template,
//! a BOS token) is not in the file in a form that can be applied without a Jinja engine, so the sizer
//! measures that fixed cost once with a `usage` probe and adds it.

use std::path::{Path, PathBuf};

use sm_client::openai::Prompt;
use sm_core::record::Api;

#[derive(Debug, thiserror::Error)]
pub enum TokenizerError {
    #[error("--tokenizer {path}: no such file or directory (pass a tokenizer.json, or a model directory that has one)")]
    NotFound { path: PathBuf },
    #[error("--tokenizer {path}: the directory has no tokenizer.json (pass the file, or the model directory it is in)")]
    NoFileInDir { path: PathBuf },
    #[error(
        "--tokenizer {path}: not a Hugging Face tokenizer.json ({reason}); only the fast-tokenizer format is read, not tokenizer.model or vocab files"
    )]
    Invalid { path: PathBuf, reason: String },
    #[error("the local tokenizer cannot encode the prompt: {0}")]
    Encode(String),
}

pub struct LocalTokenizer {
    inner: tokenizers::Tokenizer,
    path: PathBuf,
}

impl std::fmt::Debug for LocalTokenizer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LocalTokenizer").field("path", &self.path).finish()
    }
}

impl LocalTokenizer {
    /// Loads `path`: a `tokenizer.json`, or a directory (a model snapshot) that contains one.
    pub fn load(path: &Path) -> Result<LocalTokenizer, TokenizerError> {
        let file = if path.is_dir() {
            let f = path.join("tokenizer.json");
            if !f.is_file() {
                return Err(TokenizerError::NoFileInDir { path: path.to_path_buf() });
            }
            f
        } else if path.is_file() {
            path.to_path_buf()
        } else {
            return Err(TokenizerError::NotFound { path: path.to_path_buf() });
        };
        let inner = tokenizers::Tokenizer::from_file(&file)
            .map_err(|e| TokenizerError::Invalid { path: file.clone(), reason: e.to_string() })?;
        Ok(LocalTokenizer { inner, path: file })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Tokens of `text` alone, without special tokens.
    pub fn count_text(&self, text: &str) -> Result<u64, TokenizerError> {
        let enc = self.inner.encode(text, false).map_err(|e| TokenizerError::Encode(e.to_string()))?;
        Ok(enc.len() as u64)
    }

    /// Special tokens the tokenizer's post-processor adds to one sequence (a BOS, say): the best
    /// estimate of the server's fixed cost for a completion when it reports no usage.
    pub fn added_special_tokens(&self) -> u64 {
        use tokenizers::PostProcessor;
        self.inner.get_post_processor().map_or(0, |p| p.added_tokens(false) as u64)
    }

    /// Tokens of the prompt's own text as `api` sends it: each chat message's content counted apart
    /// (the template separates them), or the completion text as one.
    pub fn count_prompt(&self, prompt: &Prompt, api: Api) -> Result<u64, TokenizerError> {
        match api {
            Api::Chat => prompt.messages.iter().map(|(_, content)| self.count_text(content)).sum(),
            Api::Completions => self.count_text(&prompt.as_text()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sim_tokenizer() -> (tempfile::TempDir, LocalTokenizer) {
        let dir = tempfile::tempdir().unwrap();
        sm_sim::hf_tokenizer::write(dir.path(), 4096).unwrap();
        let t = LocalTokenizer::load(dir.path()).unwrap();
        (dir, t)
    }

    #[test]
    fn counts_like_the_tokenizer_it_was_written_from() {
        let (_dir, t) = sim_tokenizer();
        for text in ["", "Hello, world!", " the tokenizer counts\n\nexactly", "naïve café — ok"] {
            assert_eq!(t.count_text(text).unwrap(), sm_sim::tokenizer::count(text) as u64, "{text:?}");
        }
        assert_eq!(t.added_special_tokens(), 0);
    }

    #[test]
    fn chat_counts_each_message_apart() {
        let (_dir, t) = sim_tokenizer();
        let p = Prompt { messages: vec![("user".into(), "ab".into()), ("user".into(), "cd".into())] };
        assert_eq!(t.count_prompt(&p, Api::Chat).unwrap(), 2);
        // "ab\n\ncd": ab, \n, \n, cd
        assert_eq!(t.count_prompt(&p, Api::Completions).unwrap(), 4);
    }

    #[test]
    fn errors_say_what_to_pass() {
        let dir = tempfile::tempdir().unwrap();
        let e = LocalTokenizer::load(&dir.path().join("nope.json")).unwrap_err().to_string();
        assert!(e.contains("no such file") && e.contains("tokenizer.json"), "{e}");
        let e = LocalTokenizer::load(dir.path()).unwrap_err().to_string();
        assert!(e.contains("has no tokenizer.json"), "{e}");
        let bad = dir.path().join("tokenizer.json");
        std::fs::write(&bad, "{\"not\": \"a tokenizer\"}").unwrap();
        let e = LocalTokenizer::load(&bad).unwrap_err().to_string();
        assert!(e.contains("not a Hugging Face tokenizer.json"), "{e}");
    }
}
