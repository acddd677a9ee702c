//! Each request's body, made as it comes due ([`BodySource`]): a Mooncake request's prompt from its
//! block ids (exact in the server's tokens, the blocks where the trace has them), a messages
//! request as recorded.

use std::sync::Arc;

use sm_client::http::JsonBody;
use sm_client::openai::{Prompt, RequestSpec};
use sm_core::replay::{ReplayInput, ReplayPrompt};

use super::trace::Trace;
use crate::prompts::blocks::{LEAD, Vocabulary};
use crate::runner::phases::bodies::BodySource;

/// How a Mooncake trace's prompts are written on this server.
#[derive(Debug, Clone)]
pub struct Blocks {
    pub vocabulary: Vocabulary,
    /// The server's tokens of a prompt whose content is [`LEAD`] alone: its chat template and the
    /// lead, all of which a prompt has besides its words.
    pub lead_tokens: u64,
    /// Of those, the tokens after the words (the template's end: its close of the user's turn and
    /// the assistant's start). The words start where the trace's tokens would after the template's
    /// head and the lead, so a block shared in the trace is a prefix shared in the server's tokens
    /// of the same length; the template's end takes the last tokens of the prompt instead.
    pub tail_tokens: u64,
}

/// The bodies of a trace's requests.
#[derive(Clone)]
pub struct TraceBodies {
    trace: Arc<super::trace::Trace>,
    /// `max_tokens` is each request's own; `ignore_eos` set for a Mooncake trace.
    spec: RequestSpec,
    /// For a Mooncake trace.
    blocks: Option<Blocks>,
    /// `--max-tokens`: for a messages line without its own.
    max_tokens: u64,
    turns: bool,
    /// Each level's own: its blocks and first messages differ from every other level's, so one
    /// level never finds another's prompts in the server's cache (the ideal counts sharing within
    /// one replay only). 0 sends the trace's text unchanged.
    salt: u64,
}

impl TraceBodies {
    pub fn new(trace: Arc<Trace>, mut spec: RequestSpec, blocks: Option<Blocks>, max_tokens: u64) -> TraceBodies {
        if blocks.is_some() {
            // the trace's output length is what each request generates, as the matrix's are
            spec.ignore_eos = true;
        }
        let turns = trace.requests.iter().any(|r| r.after.is_some());
        TraceBodies { trace, spec, blocks, max_tokens, turns, salt: 0 }
    }

    /// The same bodies for another level.
    pub fn salted(&self, salt: u64) -> TraceBodies {
        TraceBodies { salt, ..self.clone() }
    }

    /// The prompt of request `i` and its `max_tokens`.
    pub fn prompt(&self, i: usize) -> (Prompt, u64) {
        match &self.trace.requests[i].input {
            ReplayInput::Mooncake(m) => {
                let block = u64::from(self.trace.options.block_tokens());
                // the same salt for every id keeps which blocks are shared, and only that
                let ids: Vec<u64> = m.hash_ids.iter().map(|&id| id ^ self.salt).collect();
                let content = match &self.blocks {
                    // the reader checked that the ids cover the input
                    Some(b) => b
                        .vocabulary
                        .content_at(
                            &ids,
                            block,
                            b.lead_tokens - b.tail_tokens,
                            m.input_tokens.max(b.lead_tokens + 1) - b.tail_tokens,
                        )
                        .unwrap_or_else(|| LEAD.to_string()),
                    None => LEAD.to_string(),
                };
                (Prompt { messages: vec![("user".into(), content)] }, m.output_tokens)
            }
            ReplayInput::Messages(m) => {
                let mut messages: Vec<(String, String)> = match &m.prompt {
                    ReplayPrompt::Messages(list) => list.iter().map(|x| (x.role.clone(), x.content.clone())).collect(),
                    ReplayPrompt::Text(text) => vec![("user".into(), text.clone())],
                };
                if let Some((_, first)) = messages.first_mut().filter(|_| self.salt != 0) {
                    first.insert_str(0, &format!("[{:016x}] ", self.salt));
                }
                (Prompt { messages }, m.max_tokens.unwrap_or(self.max_tokens))
            }
        }
    }
}

impl BodySource for TraceBodies {
    fn body(&self, i: usize) -> JsonBody {
        let (prompt, max_tokens) = self.prompt(i);
        let spec = RequestSpec { max_tokens, ..self.spec.clone() };
        JsonBody::new(&spec.body(&prompt))
    }

    fn most_tokens(&self) -> Option<u64> {
        self.trace
            .requests
            .iter()
            .map(|r| match &r.input {
                ReplayInput::Mooncake(m) => m.output_tokens,
                ReplayInput::Messages(m) => m.max_tokens.unwrap_or(self.max_tokens),
            })
            .max()
    }

    fn after(&self, i: usize) -> Option<usize> {
        self.trace.requests[i].after.map(|j| j as usize)
    }

    fn has_turns(&self) -> bool {
        self.turns
    }
}
