//! What can go wrong talking to the server, shared by the reqwest client ([`crate::http`]) and
//! the streams' own connections ([`crate::wire`]).

#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    #[error("'{url}' is not a usable server URL: {reason}")]
    BadUrl { url: String, reason: String },
    #[error("cannot connect to {url}: {reason}")]
    Connect { url: String, reason: String },
    #[error("HTTP {status} from {path}: {body}")]
    Status { path: String, status: u16, body: String },
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

impl ClientError {
    pub fn status(&self) -> Option<u16> {
        match self {
            ClientError::Status { status, .. } => Some(*status),
            _ => None,
        }
    }
}
