//! What each request of an open-loop level sends. A synthetic level sends one body (or a prompts
//! file's few) in turn; a replayed trace has a body per request — tens of thousands of prompts of
//! thousands of tokens — so its bodies are made as each request comes due, never held together.

use std::sync::Arc;

use sm_client::http::JsonBody;

use super::drain;

/// A body per request of a schedule, made when asked for.
pub trait BodySource: Send + Sync {
    /// The body of request `i`.
    fn body(&self, i: usize) -> JsonBody;
    /// The most output tokens any request asks for (the drain's bound needs it, before any is made).
    fn most_tokens(&self) -> Option<u64>;
    /// The request that must end before request `i` is sent: a session's previous turn, whose
    /// answer its user waited for. Always an earlier request of the schedule.
    fn after(&self, _i: usize) -> Option<usize> {
        None
    }
    /// Whether any request waits for another ([`BodySource::after`]).
    fn has_turns(&self) -> bool {
        false
    }
}

/// The bodies of a level.
#[derive(Clone)]
pub enum Bodies {
    /// Sent in turn: request `i` sends body `i` modulo their number.
    Cycle(Arc<[JsonBody]>),
    /// One per request, made as it comes due.
    Each(Arc<dyn BodySource>),
}

impl From<Arc<[JsonBody]>> for Bodies {
    fn from(bodies: Arc<[JsonBody]>) -> Bodies {
        Bodies::Cycle(bodies)
    }
}

impl Bodies {
    pub fn body(&self, i: usize) -> JsonBody {
        match self {
            Bodies::Cycle(b) => b[i % b.len()].clone(),
            Bodies::Each(s) => s.body(i),
        }
    }

    pub fn most_tokens(&self) -> Option<u64> {
        match self {
            Bodies::Cycle(b) => drain::most_tokens(b),
            Bodies::Each(s) => s.most_tokens(),
        }
    }

    pub fn after(&self, i: usize) -> Option<usize> {
        match self {
            Bodies::Cycle(_) => None,
            Bodies::Each(s) => s.after(i).filter(|&j| j < i),
        }
    }

    pub fn has_turns(&self) -> bool {
        matches!(self, Bodies::Each(s) if s.has_turns())
    }

    /// The bodies as a list, for the ranks (which are sent every body up front); `None` for bodies
    /// made one by one.
    pub fn listed(&self) -> Option<&Arc<[JsonBody]>> {
        match self {
            Bodies::Cycle(b) => Some(b),
            Bodies::Each(_) => None,
        }
    }
}
