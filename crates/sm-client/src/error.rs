//! What can go wrong talking to the server, shared by the reqwest client ([`crate::http`]) and
//! the streams' own connections ([`crate::wire`]).

#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    #[error("'{url}' is not a usable server URL: {reason}")]
    BadUrl { url: String, reason: String },
    #[error("cannot connect to {url}: {reason}")]
    Connect { url: String, reason: String },
    /// `key_sent`: whether the request carried an API key, so that a 401 or 403 can say whether
    /// the server refused the key or asks for one ([`refusal`]).
    #[error("HTTP {status} from {path}: {body}{}", refusal(*status, *key_sent).map(|r| format!(" — {r}")).unwrap_or_default())]
    Status { path: String, status: u16, body: String, key_sent: bool },
    #[error("no response from {path} within {secs:.0} s")]
    Timeout { path: String, secs: f64 },
    #[error("the stream stalled: no bytes for {secs:.1} s")]
    Stalled { secs: f64 },
    /// `before_response`: the request failed before any byte of the answer arrived. That is
    /// what a pooled keep-alive connection that the server closed looks like; reqwest does not
    /// say whether the connection was a reused one, so a fresh connection failing the same way
    /// looks alike.
    #[error("connection to {path} broke: {reason}")]
    Broken { path: String, reason: String, before_response: bool },
    #[error("{path} did not answer JSON: {reason}")]
    NotJson { path: String, reason: String },
    #[error("cannot build the HTTP client: {0}")]
    Build(String),
}

/// What a 401 or 403 means for the user, by whether the request carried an API key (the key itself
/// is never shown); `None` for any other status.
pub fn refusal(status: u16, key_sent: bool) -> Option<&'static str> {
    match (status, key_sent) {
        (401, true) => {
            Some("the server refused the API key: check the key given by --api-key or OPENAI_API_KEY (it is not shown)")
        }
        (401 | 403, false) => Some("the server asks for an API key: pass --api-key or set OPENAI_API_KEY"),
        (403, true) => {
            Some("the server knows the API key but does not allow this request with it: use a key with access to it")
        }
        _ => None,
    }
}

impl ClientError {
    pub fn status(&self) -> Option<u16> {
        match self {
            ClientError::Status { status, .. } => Some(*status),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_refusal_says_whether_the_key_was_refused_or_missing() {
        let status =
            |status, key_sent| ClientError::Status { path: "/v1/models".into(), status, body: "no".into(), key_sent };
        assert!(status(401, true).to_string().contains("refused the API key"), "{}", status(401, true));
        assert!(status(401, false).to_string().contains("asks for an API key: pass --api-key"));
        assert!(status(403, false).to_string().contains("asks for an API key"));
        assert!(status(403, true).to_string().contains("does not allow this request"));
        assert_eq!(status(500, true).to_string(), "HTTP 500 from /v1/models: no");
    }
}
