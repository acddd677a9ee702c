//! Secrets never reach a result, a log, a page or a database (methodology §5).
//!
//! A launch command is redacted by shape: the value of `--api-key`, `--hf-token`
//! and of any flag or `NAME=value` assignment whose name contains TOKEN, KEY,
//! SECRET or PASSWORD (any case). Known secret values (the API key speedmatrix
//! itself was given) are also replaced wherever they appear in free text.

pub const REDACTED: &str = "<redacted>";

fn is_secret_name(name: &str) -> bool {
    let upper = name.trim_start_matches('-').to_ascii_uppercase().replace('-', "_");
    ["TOKEN", "KEY", "SECRET", "PASSWORD", "PASSWD"].iter().any(|word| upper.contains(word))
}

/// Redacts a shell-like command line, keeping its layout (words are split on
/// whitespace; quoting is preserved as written).
pub fn redact_command(command: &str) -> String {
    let mut out = Vec::new();
    let mut redact_next = false;
    for word in command.split_whitespace() {
        if redact_next {
            out.push(quote_like(word, REDACTED));
            redact_next = false;
            continue;
        }
        if let Some((name, _value)) = word.split_once('=') {
            if is_secret_name(name.trim_start_matches(['"', '\''])) {
                out.push(format!("{name}={REDACTED}"));
                continue;
            }
        } else if word.starts_with('-') && is_secret_name(word) {
            redact_next = true;
        }
        out.push(word.to_string());
    }
    out.join(" ")
}

/// Keeps surrounding quotes of a redacted word so the command stays readable.
fn quote_like(word: &str, replacement: &str) -> String {
    let first = word.chars().next();
    match first {
        Some(q @ ('"' | '\'')) if word.len() > 1 && word.ends_with(q) => {
            format!("{q}{replacement}{q}")
        }
        _ => replacement.to_string(),
    }
}

/// Replaces every occurrence of each known secret (of four or more characters)
/// in `text`.
pub fn redact_known(text: &str, secrets: &[&str]) -> String {
    let mut out = text.to_string();
    for s in secrets.iter().filter(|s| s.len() >= 4) {
        if out.contains(*s) {
            out = out.replace(*s, REDACTED);
        }
    }
    out
}

/// Redacts `NAME=value` environment entries whose name looks secret.
pub fn redact_env_value(name: &str, value: &str) -> String {
    if is_secret_name(name) { REDACTED.to_string() } else { value.to_string() }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn published_launch_command() {
        let cmd = "vllm serve m --max-model-len 262144 --host 0.0.0.0 --api-key sk-abc123 --mamba-cache-mode align";
        assert_eq!(
            redact_command(cmd),
            "vllm serve m --max-model-len 262144 --host 0.0.0.0 --api-key <redacted> --mamba-cache-mode align"
        );
    }

    #[test]
    fn flags_assignments_and_env() {
        let cmd =
            "HF_TOKEN=hf_x MY_SECRET=s PATH=/bin serve --hf-token=hf_y --db-password 'pw' --port 8000 --api-key=\"k\"";
        let r = redact_command(cmd);
        assert!(!r.contains("hf_x") && !r.contains("hf_y") && !r.contains("pw") && !r.contains("\"k\""), "{r}");
        assert!(r.contains("PATH=/bin") && r.contains("--port 8000"), "{r}");
        assert!(r.contains("--db-password '<redacted>'"), "{r}");
        assert_eq!(redact_env_value("OPENAI_API_KEY", "sk"), REDACTED);
        assert_eq!(redact_env_value("VLLM_USE_V1", "1"), "1");
    }

    #[test]
    fn known_secrets_anywhere() {
        assert_eq!(redact_known("Bearer sk-abcdef failed", &["sk-abcdef"]), "Bearer <redacted> failed");
        // very short strings would redact ordinary words
        assert_eq!(redact_known("a b", &["a"]), "a b");
    }
}
