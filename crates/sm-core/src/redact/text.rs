//! Secrets by their shape inside free text: credentials in URLs, `Authorization`-style headers,
//! JSON (or Python-dict) values under a secret key, and `name=value` / `name: value` pairs.
//! Each scanner replaces only the value where it stands and records what it removed.

use super::names::{is_secret_env, is_secret_flag, is_secret_header, is_secret_query};
use super::{REDACTED, is_value};

/// Longest quoted string the JSON scanner follows; longer runs are not keys.
const MAX_STRING: usize = 4096;
/// A user name without a password counts as a token (`https://ghp_…@github.com`) from this length.
const TOKEN_USER_LEN: usize = 16;

/// What the scanners found: the text with values replaced and the values themselves.
#[derive(Debug, Default)]
pub struct Found {
    pub secrets: Vec<String>,
}

/// Applies `edits` (non-overlapping byte ranges, any order) to `text`.
fn apply(text: &str, mut edits: Vec<(std::ops::Range<usize>, String)>, found: &mut Found) -> String {
    if edits.is_empty() {
        return text.to_string();
    }
    edits.sort_by_key(|(r, _)| r.start);
    let mut out = String::with_capacity(text.len());
    let mut at = 0;
    for (range, replacement) in edits {
        if range.start < at {
            continue;
        }
        found.secrets.push(text[range.clone()].to_string());
        out.push_str(&text[at..range.start]);
        out.push_str(&replacement);
        at = range.end;
    }
    out.push_str(&text[at..]);
    out
}

fn url_end(c: char) -> bool {
    c.is_whitespace() || matches!(c, '"' | '\'' | '<' | '>' | '`' | '\\')
}

fn value_end(c: char) -> bool {
    c.is_whitespace() || matches!(c, '"' | '\'' | '`' | '&' | ';' | ',' | ')' | ']' | '}' | '<' | '>' | '\\')
}

/// `user:password@` and `?api_key=…` / `&token=…` / `#access_token=…` in every URL of `text`.
pub fn urls(text: &str, found: &mut Found) -> String {
    let mut edits = Vec::new();
    let mut from = 0;
    while let Some(p) = text[from..].find("://").map(|p| p + from) {
        from = p + 3;
        let scheme = text[..p].chars().next_back().is_some_and(|c| c.is_ascii_alphanumeric());
        if !scheme {
            continue;
        }
        let start = p + 3;
        let end = text[start..].find(url_end).map_or(text.len(), |e| start + e);
        let url = &text[start..end];
        if let Some(at) = url.find('@') {
            userinfo(&url[..at], start, &mut edits);
        }
        if let Some(q) = url.find(['?', '#']) {
            let mut offset = start + q + 1;
            for param in url[q + 1..].split(['&', ';', '#', '?']) {
                if let Some((name, value)) = param.split_once('=')
                    && is_secret_query(name)
                    && is_value(value)
                {
                    let v = offset + name.len() + 1;
                    edits.push((v..v + value.len(), REDACTED.to_string()));
                }
                offset += param.len() + 1;
            }
        }
        from = end.max(from);
    }
    apply(text, edits, found)
}

/// The credentials before `@` in a URL's authority (`info` starts at byte `start` of the text).
fn userinfo(info: &str, start: usize, edits: &mut Vec<(std::ops::Range<usize>, String)>) {
    if info.contains(['?', '#']) {
        return;
    }
    match info.split_once(':') {
        // `host:8000/@user` is a path with an @, not a password
        Some((_, pass))
            if pass.contains('/') && pass.split('/').next().is_some_and(|p| p.bytes().all(|b| b.is_ascii_digit())) => {}
        Some((user, pass)) if is_value(pass) => {
            let s = start + user.len() + 1;
            edits.push((s..start + info.len(), REDACTED.to_string()));
        }
        None if info.len() >= TOKEN_USER_LEN && !info.contains('/') && info != REDACTED => {
            edits.push((start..start + info.len(), REDACTED.to_string()));
        }
        _ => {}
    }
}

/// The run of name characters that ends at byte `end` of `text`.
fn name_before(text: &str, end: usize) -> &str {
    let start = text[..end]
        .char_indices()
        .rev()
        .find(|(_, c)| !(c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.')))
        .map_or(0, |(i, c)| i + c.len_utf8());
    &text[start..end]
}

/// An authentication scheme before the credential (`Bearer`, `Basic`, `Token`…), kept as written.
fn scheme_len(value: &str) -> usize {
    let word: &str = value.split(' ').next().unwrap_or_default();
    let known = ["bearer", "basic", "token", "digest", "apikey", "negotiate", "key"];
    if value.len() > word.len() && known.contains(&word.to_ascii_lowercase().as_str()) { word.len() + 1 } else { 0 }
}

/// `Authorization: Bearer …`, `X-Api-Key: …` and similar headers; with `loose`, also any
/// `name: value` or `name=value` whose name is a secret flag or variable (for commands, where
/// there is no prose to misread).
pub fn pairs(text: &str, loose: bool, found: &mut Found) -> String {
    let mut edits = Vec::new();
    for (i, sep) in text.char_indices().filter(|(_, c)| matches!(c, ':' | '=')) {
        let name = name_before(text, i);
        let env_like =
            !name.is_empty() && name.bytes().all(|b| b.is_ascii_uppercase() || b.is_ascii_digit() || b == b'_');
        let secret = match (sep, loose) {
            (':', false) => is_secret_header(name),
            (':', true) => is_secret_header(name) || is_secret_flag(name),
            (_, false) => false,
            (_, true) => is_secret_flag(name) || (env_like && is_secret_env(name)),
        };
        if !secret || text[i + 1..].starts_with("//") {
            continue;
        }
        let rest = &text[i + 1..];
        let skip = rest.len() - rest.trim_start_matches([' ', '\t']).len();
        let mut start = i + 1 + skip;
        if sep == ':' {
            start += scheme_len(&text[start..]);
        }
        let (start, end) = match text.as_bytes().get(start) {
            Some(b'"' | b'\'') => match string_end(text, start) {
                Some(e) => (start + 1, e - 1),
                None => continue,
            },
            _ => (start, text[start..].find(value_end).map_or(text.len(), |e| start + e)),
        };
        if is_value(&text[start..end]) {
            edits.push((start..end, REDACTED.to_string()));
        }
    }
    apply(text, edits, found)
}

/// A quoted string starting at byte `open` (its quote character): the byte after its closing
/// quote, or `None` when it does not close within [`MAX_STRING`].
fn string_end(text: &str, open: usize) -> Option<usize> {
    let bytes = text.as_bytes();
    let q = bytes[open];
    let mut i = open + 1;
    while i < bytes.len() && i - open <= MAX_STRING {
        match bytes[i] {
            b'\\' => i += 2,
            b if b == q => return Some(i + 1),
            _ => i += 1,
        }
    }
    None
}

fn json_key_is_secret(key: &str) -> bool {
    let env_like = key.bytes().all(|b| b.is_ascii_uppercase() || b.is_ascii_digit() || b == b'_');
    is_secret_flag(key) || (env_like && is_secret_env(key))
}

/// `"token": "…"`, `'api_key': '…'` and every other quoted value under a secret key.
pub fn json(text: &str, found: &mut Found) -> String {
    let bytes = text.as_bytes();
    let mut edits = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        if !matches!(bytes[i], b'"' | b'\'') {
            i += 1;
            continue;
        }
        let Some(key_end) = string_end(text, i) else {
            i += 1;
            continue;
        };
        let key = &text[i + 1..key_end - 1];
        let after = text[key_end..].trim_start();
        let colon = key_end + (text.len() - key_end - after.len());
        let value_at = after
            .strip_prefix(':')
            .map(|v| colon + 1 + (v.len() - v.trim_start().len()))
            .filter(|&v| matches!(bytes.get(v), Some(b'"' | b'\'')));
        match value_at.and_then(|v| string_end(text, v).map(|e| (v, e))) {
            Some((v, e)) if json_key_is_secret(key) => {
                let mut start = v + 1;
                start += scheme_len(&text[start..e - 1]);
                if is_value(&text[start..e - 1]) {
                    edits.push((start..e - 1, REDACTED.to_string()));
                }
                i = e;
            }
            Some((_, e)) => i = e,
            None if after.starts_with(':') => i = key_end,
            // not a key: look inside it too (an apostrophe in prose opens nothing)
            None => i += 1,
        }
    }
    apply(text, edits, found)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(f: impl Fn(&str, &mut Found) -> String, text: &str) -> (String, Vec<String>) {
        let mut found = Found::default();
        let out = f(text, &mut found);
        (out, found.secrets)
    }

    #[test]
    fn url_credentials_and_query() {
        let (out, s) = run(urls, "see postgres://app:pa55@db:5432/x and http://h:8000/v1?api_key=abc&model=m#token=t");
        assert_eq!(
            out,
            "see postgres://app:<redacted>@db:5432/x and http://h:8000/v1?api_key=<redacted>&model=m#token=<redacted>"
        );
        assert_eq!(s, ["pa55", "abc", "t"]);
        // a path with an @, an e-mail in a query, a short user name: no secret
        for keep in
            ["http://localhost:8000/@user", "https://h/x?email=a@b.c", "ssh://git@github.com/x", "redis://h:6379"]
        {
            assert_eq!(run(urls, keep).0, keep);
        }
        assert_eq!(run(urls, "redis://:s3cret@h:6379/0").0, "redis://:<redacted>@h:6379/0");
        assert_eq!(run(urls, "https://ghp_abcdefghijklmnopqrst@github.com").0, "https://<redacted>@github.com");
    }

    #[test]
    fn headers_strict_and_loose() {
        let (out, s) =
            run(|t, f| pairs(t, false, f), "echo: authorization: Bearer sk-1 x-api-key: k2, first token: 12");
        assert_eq!(out, "echo: authorization: Bearer <redacted> x-api-key: <redacted>, first token: 12");
        assert_eq!(s, ["sk-1", "k2"]);
        let (out, _) = run(|t, f| pairs(t, true, f), "a=1 token=t HF_TOKEN=h eos_token=x apikey: z max_tokens=3");
        assert_eq!(out, "a=1 token=<redacted> HF_TOKEN=<redacted> eos_token=x apikey: <redacted> max_tokens=3");
    }

    #[test]
    fn json_values() {
        let (out, s) = run(json, r#"{"token": "hf_x y", "max_tokens": 5, 'apiKey': 'k', "Authorization": "Bearer b"}"#);
        assert_eq!(
            out,
            r#"{"token": "<redacted>", "max_tokens": 5, 'apiKey': '<redacted>', "Authorization": "Bearer <redacted>"}"#
        );
        assert_eq!(s, ["hf_x y", "k", "b"]);
        let text = r#"don't {"eos_token": "</s>", "hf_token": "a\"b"}"#;
        assert_eq!(run(json, text).0, r#"don't {"eos_token": "</s>", "hf_token": "<redacted>"}"#);
    }
}
