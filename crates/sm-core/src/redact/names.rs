//! Which names hold secrets: command-line flags, environment variables, JSON keys, URL query
//! parameters and HTTP headers.
//!
//! The lists name the real secret settings of the engines and clients speedmatrix meets (vLLM,
//! SGLang, llama.cpp, TGI, Ollama's clients, hosted APIs); the generic forms catch the rest by
//! the *last* word of the name, so a name that merely mentions tokens or keys
//! (`--max-num-batched-tokens`, `--tokenizer-mode`, `--kv-cache-dtype`, `--api-key-file`,
//! `HF_TOKEN_PATH`) is not a secret.

/// Flags (and JSON keys) whose value is a secret, by exact normalised name.
const FLAGS: &[&str] = &[
    "api_key",       // vLLM, SGLang, llama.cpp, TGI router, `vllm chat`/`complete`
    "admin_api_key", // SGLang
    "hf_token",      // vLLM, llama.cpp (`-hft`)
    "hft",           // llama.cpp's short form of --hf-token
    "token",         // `hf auth login --token`, `huggingface-cli login --token`, JSON `"token"`
    "huggingface_hub_token",
    "password",
    "passwd",
    "passphrase",
    "secret",
    "auth",
    "basic_auth",
    "http_auth",
    "authorization",
    "proxy_authorization",
    "cookie",
];

/// Environment variables that hold secrets but do not end like one.
const ENV: &[&str] = &["AWS_ACCESS_KEY_ID", "MYSQL_PWD", "PGPASSWORD", "REDISCLI_AUTH"];
/// Environment variables whose names read as secrets' but are not.
const NOT_SECRET_ENV: &[&str] = &["PWD", "OLDPWD"];

/// Last words that name a secret's *place* or *kind*, not the secret: `--api-key-file`,
/// `HF_TOKEN_PATH`, `--secret-name`.
const NOT_THE_VALUE: &[&str] = &[
    "file", "path", "dir", "name", "id", "ids", "env", "var", "mode", "type", "len", "length", "size", "count",
    "limit", "header", "prefix", "url", "endpoint", "ttl", "expiry", "timeout",
];

/// Words before a final `token` that make it a credential: `--hf-token`, `--auth-token`,
/// `x-access-token`. Others (`--bos-token`, `--pad-token`, `eos_token`) are vocabulary.
const TOKEN_KINDS: &[&str] = &[
    "hf",
    "hub",
    "api",
    "auth",
    "access",
    "bearer",
    "session",
    "refresh",
    "id",
    "oauth",
    "jwt",
    "github",
    "gh",
    "gitlab",
    "wandb",
    "ngc",
    "secret",
    "security",
    "private",
    "personal",
    "upload",
    "admin",
    "client",
    "bot",
    "login",
    "user",
    "service",
    "sas",
    "huggingface",
];

/// Pairs of final words that make a key a credential: `*_api_key`, `*_secret_key`.
const KEY_KINDS: &[&str] = &["api", "secret", "access", "auth", "private", "encryption", "signing", "master"];

/// The words of a name: leading dashes dropped, camelCase split, `-`, `.` and `_` as separators,
/// lower case. `--hf-token` → `[hf, token]`, `apiKey` → `[api, key]`.
pub fn words(name: &str) -> Vec<String> {
    let name = name.trim_start_matches('-');
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut prev_lower = false;
    for c in name.chars() {
        if matches!(c, '-' | '_' | '.' | ' ') {
            if !cur.is_empty() {
                out.push(std::mem::take(&mut cur));
            }
            prev_lower = false;
            continue;
        }
        if c.is_ascii_uppercase() && prev_lower && !cur.is_empty() {
            out.push(std::mem::take(&mut cur));
        }
        prev_lower = c.is_ascii_lowercase() || c.is_ascii_digit();
        cur.push(c.to_ascii_lowercase());
    }
    if !cur.is_empty() {
        out.push(cur);
    }
    out
}

/// A flag, JSON key, query parameter or header whose value is a secret.
pub fn is_secret_flag(name: &str) -> bool {
    let w = words(name);
    let Some(last) = w.last().map(String::as_str) else { return false };
    if FLAGS.contains(&w.join("_").as_str()) {
        return true;
    }
    if NOT_THE_VALUE.contains(&last) {
        return false;
    }
    let before = w.len().checked_sub(2).map(|i| w[i].as_str());
    match last {
        "password" | "passwd" | "passphrase" | "pwd" | "apikey" | "secret" => true,
        "token" => before.is_some_and(|b| TOKEN_KINDS.contains(&b)),
        "key" => before.is_some_and(|b| KEY_KINDS.contains(&b)),
        _ => w.iter().any(|x| x == "secret") && !w.iter().any(|x| NOT_THE_VALUE.contains(&x.as_str())),
    }
}

/// An environment variable whose value is a secret: every flag form above, and any `*_TOKEN`,
/// `*_KEY` after API/SECRET/ACCESS…, `*PASSWORD`, `*_SECRET*` (`HF_TOKEN`, `OPENAI_API_KEY`,
/// `AWS_SECRET_ACCESS_KEY`, `DB_PASSWORD`, `PGPASSWORD`); not `HF_TOKEN_PATH` or `MAX_TOKENS`.
pub fn is_secret_env(name: &str) -> bool {
    let upper = name.to_ascii_uppercase();
    // the shell's working directories: "pwd" ends them as it ends DB_PWD, but they are paths every
    // process inherits, and a path taken for a secret would be cut out of every launch command
    if NOT_SECRET_ENV.contains(&upper.as_str()) {
        return false;
    }
    if ENV.contains(&upper.as_str()) || upper.ends_with("PASSWORD") || upper.ends_with("PASSWD") {
        return true;
    }
    let w = words(&upper);
    if w.last().is_some_and(|l| l == "token") {
        return true;
    }
    is_secret_flag(&upper)
}

/// A query parameter of a URL whose value is a secret (`?api_key=`, `?token=`, `?key=`, `&sig=`).
pub fn is_secret_query(name: &str) -> bool {
    let w = words(name).join("_");
    matches!(w.as_str(), "key" | "sig" | "signature" | "x_amz_signature" | "x_amz_security_token" | "x_amz_credential")
        || is_secret_flag(name)
}

/// An HTTP header whose value is a credential (`Authorization`, `X-Api-Key`, `X-Auth-Token`).
pub fn is_secret_header(name: &str) -> bool {
    let w = words(name);
    // a bare "token" or "secret" before a colon is prose more often than a header
    w.len() > 1 && is_secret_flag(name) || matches!(w.join("_").as_str(), "authorization" | "cookie")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flags_that_are_secrets() {
        for f in [
            "--api-key",
            "--admin-api-key",
            "--hf-token",
            "-hft",
            "--token",
            "--db-password",
            "--ssl-keyfile-password",
            "--client-secret",
            "--secret-key",
            "--openai-api-key",
            "--auth-token",
            "--access-token",
            "api_key",
            "apiKey",
            "hfToken",
            "aws_secret_access_key",
        ] {
            assert!(is_secret_flag(f), "{f}");
        }
    }

    #[test]
    fn flags_that_only_mention_tokens_or_keys() {
        for f in [
            "--max-num-batched-tokens",
            "--tokenizer-mode",
            "--tokenizer",
            "--max-tokens",
            "--api-key-file",
            "--ssl-keyfile",
            "--ssl-key-file",
            "--kv-cache-dtype",
            "--cache-type-k",
            "--skip-tokenizer-init",
            "--bos-token",
            "--eos-token",
            "--key",
            "--secret-name",
            "--hf-token-path",
            "--max-prefill-tokens",
            "--num-lookahead-slots",
            "eos_token",
            "pad_token_id",
            "tokenizer.ggml.add_bos_token",
        ] {
            assert!(!is_secret_flag(f), "{f}");
        }
    }

    #[test]
    fn environment_names() {
        for n in [
            "HF_TOKEN",
            "HUGGING_FACE_HUB_TOKEN",
            "OPENAI_API_KEY",
            "ANTHROPIC_API_KEY",
            "VLLM_API_KEY",
            "LLAMA_API_KEY",
            "AWS_SECRET_ACCESS_KEY",
            "AWS_SESSION_TOKEN",
            "AWS_ACCESS_KEY_ID",
            "DB_PASSWORD",
            "PGPASSWORD",
            "MY_SECRET",
            "CLIENT_SECRET_VALUE",
            "SPEEDMATRIX_TOKEN",
            "GITHUB_TOKEN",
        ] {
            assert!(is_secret_env(n), "{n}");
        }
        for n in [
            "PATH",
            "HF_HOME",
            "HF_TOKEN_PATH",
            "TOKENIZERS_PARALLELISM",
            "VLLM_MAX_TOKENS",
            "CUDA_VISIBLE_DEVICES",
            "OLLAMA_HOST",
            "VLLM_USE_V1",
            "GOOGLE_APPLICATION_CREDENTIALS",
            "SECRET_FILE",
            // the shell's working directory, which every process inherits
            "PWD",
            "OLDPWD",
        ] {
            assert!(!is_secret_env(n), "{n}");
        }
    }

    #[test]
    fn headers_and_query_parameters() {
        for h in ["Authorization", "Proxy-Authorization", "X-Api-Key", "api-key", "X-Auth-Token", "x-goog-api-key"] {
            assert!(is_secret_header(h), "{h}");
        }
        for h in ["Content-Type", "token", "X-Request-Id", "first token"] {
            assert!(!is_secret_header(h), "{h}");
        }
        for q in ["api_key", "token", "key", "access_token", "sig", "X-Amz-Signature", "password"] {
            assert!(is_secret_query(q), "{q}");
        }
        for q in ["model", "max_tokens", "stream", "page"] {
            assert!(!is_secret_query(q), "{q}");
        }
    }
}
