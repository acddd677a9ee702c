//! Secrets never reach a result, a log, a page or a database (docs/run.md, "Secrets").
//!
//! Redaction by *shape* replaces a secret's value where it stands and nothing else: the value of
//! a secret flag (`--api-key`, `--hf-token`, `--admin-api-key`, … see [`names`]), of a secret
//! environment assignment (`HF_TOKEN=…`, `*_API_KEY=…`, `*_PASSWORD=…`), credentials and secret
//! query parameters in URLs, `Authorization`-style headers, and JSON values under a secret key.
//! A flag that only mentions tokens or keys (`--max-num-batched-tokens`, `--tokenizer-mode`) is
//! left alone, and no other field is ever rewritten because it contains the same letters.
//!
//! Redaction by *value* (the API key speedmatrix itself was given) is [`crate::secrets`].

mod names;
mod shell;
mod text;

pub use names::{is_secret_env, is_secret_flag, is_secret_header, is_secret_query};

pub const REDACTED: &str = "<redacted>";

/// Redacted text and the secret values that were taken out of it (in order, as written).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Redaction {
    pub text: String,
    pub secrets: Vec<String>,
}

/// Redacts a shell-like command line, keeping its layout: quoting, line continuations and
/// every character that is not a secret stay exactly as written.
pub fn redact_command(command: &str) -> String {
    redact_command_found(command).text
}

/// [`redact_command`], also returning the values it removed.
pub fn redact_command_found(command: &str) -> Redaction {
    let words = shell::words(command);
    let mut edits = Vec::new();
    let mut secrets = Vec::new();
    let mut i = 0;
    while i < words.len() {
        let w = &words[i];
        let raw = &command[w.span.clone()];
        if let Some((name, value)) = w.text.split_once('=') {
            if is_secret_assignment(name)
                && is_value(value)
                && let Some(eq) = raw.find('=')
            {
                edits.push((w.span.start + eq + 1..w.span.end, quote_like(&raw[eq + 1..])));
                secrets.push(value.to_string());
            }
        } else if w.text.starts_with('-')
            && is_secret_flag(&w.text)
            && let Some(next) = words.get(i + 1).filter(|n| !looks_like_flag(&n.text) && is_value(&n.text))
        {
            edits.push((next.span.clone(), quote_like(&command[next.span.clone()])));
            secrets.push(next.text.clone());
            i += 1;
        }
        i += 1;
    }
    let mut out = String::with_capacity(command.len());
    let mut at = 0;
    for (range, replacement) in edits {
        out.push_str(&command[at..range.start]);
        out.push_str(&replacement);
        at = range.end;
    }
    out.push_str(&command[at..]);
    let mut found = text::Found { secrets };
    let out = text::json(&out, &mut found);
    let out = text::urls(&out, &mut found);
    let out = text::pairs(&out, true, &mut found);
    Redaction { text: out, secrets: found.secrets }
}

/// Redacts what is a secret by its shape in free text (an error body, a URL, an environment
/// value): URL credentials and secret query parameters, `Authorization`-style headers and JSON
/// values under a secret key. Prose is never mistaken for a secret: `first token: 12 ms` stays.
pub fn redact_text(text: &str) -> Redaction {
    let mut found = text::Found::default();
    let out = text::json(text, &mut found);
    let out = text::urls(&out, &mut found);
    let out = text::pairs(&out, false, &mut found);
    Redaction { text: out, secrets: found.secrets }
}

/// Redacts one environment entry: the whole value of a secret variable (`HF_TOKEN`,
/// `OPENAI_API_KEY`, `DB_PASSWORD`), else what [`redact_text`] finds in it (the password of a
/// `DATABASE_URL`).
pub fn redact_env_value(name: &str, value: &str) -> String {
    if is_secret_env(name) && is_value(value) { REDACTED.to_string() } else { redact_text(value).text }
}

/// `NAME=value` on a command line: an environment assignment (`HF_TOKEN=…`) or a flag with its
/// value (`--api-key=…`), or a dotted setting (`tokenizer.ggml.add_bos_token=…`, not secret).
fn is_secret_assignment(name: &str) -> bool {
    let env_like = name.bytes().next().is_some_and(|b| b.is_ascii_alphabetic() || b == b'_')
        && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_');
    if env_like { is_secret_env(name) } else { is_secret_flag(name) }
}

fn is_value(v: &str) -> bool {
    !v.is_empty() && v != REDACTED && !is_variable(v)
}

/// `$VLLM_API_KEY` or `${HF_TOKEN}` as written in a script: a reference, not the secret.
fn is_variable(v: &str) -> bool {
    let name = v.strip_prefix("${").and_then(|r| r.strip_suffix('}')).or_else(|| v.strip_prefix('$'));
    name.is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_'))
}

/// The next word is another flag (`--hf-token --port 8000`: vLLM's --hf-token takes no value
/// then), not the secret: `--name` or a short `-x`/`-ngl`/`-hft`.
fn looks_like_flag(word: &str) -> bool {
    match word.strip_prefix("--") {
        Some(rest) => rest.chars().next().is_some_and(|c| c.is_ascii_alphabetic()),
        None => word
            .strip_prefix('-')
            .is_some_and(|r| !r.is_empty() && r.len() <= 4 && r.bytes().all(|b| b.is_ascii_alphabetic())),
    }
}

/// The redaction marker, keeping the quotes the value was written with.
fn quote_like(raw: &str) -> String {
    let lead = raw.chars().next().filter(|c| matches!(c, '"' | '\''));
    let trail = raw.chars().next_back().filter(|c| matches!(c, '"' | '\'') && (raw.len() > 1 || lead.is_none()));
    format!("{}{REDACTED}{}", lead.map(String::from).unwrap_or_default(), trail.map(String::from).unwrap_or_default())
}

#[cfg(test)]
mod corpus;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_removed_are_returned() {
        let r = redact_command_found("HF_TOKEN=hf_a vllm serve m --api-key 'k 1' --hf-token=hf_b --port 8000");
        assert_eq!(r.text, "HF_TOKEN=<redacted> vllm serve m --api-key '<redacted>' --hf-token=<redacted> --port 8000");
        assert_eq!(r.secrets, ["hf_a", "k 1", "hf_b"]);
    }

    #[test]
    fn redaction_is_idempotent() {
        let once = redact_command("vllm serve m --api-key k -H 'Authorization: Bearer b' http://u:p@h?token=t");
        assert_eq!(redact_command(&once), once);
        assert!(redact_command_found(&once).secrets.is_empty());
    }

    #[test]
    fn environment_values() {
        assert_eq!(redact_env_value("OPENAI_API_KEY", "sk"), REDACTED);
        assert_eq!(redact_env_value("VLLM_USE_V1", "1"), "1");
        assert_eq!(redact_env_value("DATABASE_URL", "postgres://app:pw@db/x"), "postgres://app:<redacted>@db/x");
        assert_eq!(redact_env_value("HF_HOME", "/data/hf"), "/data/hf");
    }

    #[test]
    fn prose_is_not_a_secret() {
        for text in ["first token: 12 ms", "max_tokens=4096", "cell 8K × 4 done: 10 tok/s", "the key: a value"] {
            assert_eq!(redact_text(text).text, text);
        }
    }
}
