//! What each simulated user says: its system prompt and the user message of every turn, made
//! before the phase starts so that no sizing happens while it is timed. Synthetic messages are
//! exact in tokens as the decode prompts are (methodology §4.3); with `--prompts FILE.jsonl` they
//! are the file's messages.

use std::sync::Arc;

use sm_client::openai::Prompt;

use super::SessionsConfig;
use crate::prompts::prompt::{SESSION, filler};
use crate::prompts::prompt_file::PromptFile;
use crate::prompts::sizing::Sizer;

/// One user's script: its system prompt and, per turn, the new message and its `max_tokens`.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Script {
    pub system: String,
    pub turns: Vec<(String, Option<u64>)>,
}

/// The tag that starts a user's own system prompt (or, for `user: None`, the shared one):
/// different in every session of the run (`salt`), so a conversation held again after a resume
/// meets nothing its interrupted attempt left in the cache.
fn tag(run_id: &str, salt: &str, user: Option<u32>) -> String {
    format!("[sm {run_id} {SESSION}{salt}{:010}]", user.map_or(0, |u| u64::from(u) + 1))
}

fn system_text(tag: &str, chars: usize) -> String {
    format!("{tag} You are a helpful assistant. Keep these reference notes in mind.\n\n{}", filler(chars))
}

/// A user message: its own tag first, so that no two messages share a prefix.
fn user_text(user: u32, turn: u32, chars: usize) -> String {
    format!("[u{user:05} t{turn:04}] {}\n\nPlease answer in detail.", filler(chars))
}

fn single(role: &str, text: String) -> Prompt {
    Prompt { messages: vec![(role.to_string(), text)] }
}

/// The text a file line gives a turn: its last user message (else its last message).
fn file_message(p: &Prompt) -> String {
    let last_user = p.messages.iter().rev().find(|(r, _)| r == "user");
    last_user.or(p.messages.last()).map(|(_, c)| c.clone()).unwrap_or_default()
}

/// Makes the scripts of `users`. The shared system prompt is sized so that a chat of it alone
/// counts `shared_prefix` tokens; each synthetic user message so that a chat of it alone counts
/// `turn_tokens`. Without a shared prefix each user's system prompt is one short line of its own.
pub(super) async fn scripts(
    config: &SessionsConfig,
    users: &[u32],
    sizer: &Sizer,
    file: Option<&Arc<PromptFile>>,
    ids: (&str, &str),
) -> Result<Vec<Script>, String> {
    let (run_id, salt) = ids;
    let shared = match config.shared_prefix {
        Some(tokens) => {
            let tag = tag(run_id, salt, None);
            let sized = sizer.size_with(&|n| single("system", system_text(&tag, n)), tokens).await?;
            Some(sized.prompt.messages[0].1.clone())
        }
        None => None,
    };
    let mut out = Vec::with_capacity(users.len());
    // the last message's length: the next one, of the same form, most likely takes it too
    let mut guess = None;
    for &user in users {
        let system = shared.clone().unwrap_or_else(|| {
            format!("{} You are a helpful assistant in conversation {user}.", tag(run_id, salt, Some(user)))
        });
        let mut turns = Vec::with_capacity(config.turns as usize);
        for turn in 1..=config.turns {
            turns.push(match file {
                Some(f) => {
                    let line = f.get(user as usize * config.turns as usize + turn as usize - 1);
                    (file_message(&line.prompt), line.max_tokens)
                }
                None => {
                    let build = |n| single("user", user_text(user, turn, n));
                    let sized = sizer.size_near(&build, config.turn_tokens, guess).await?;
                    guess = Some(sized.chars);
                    (sized.prompt.messages[0].1.clone(), None)
                }
            });
        }
        out.push(Script { system, turns });
    }
    Ok(out)
}

/// A conversation so far: what turn k sends is this plus its new message.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct History {
    messages: Vec<(String, String)>,
}

impl History {
    pub(super) fn new(system: &str) -> History {
        History { messages: vec![("system".to_string(), system.to_string())] }
    }

    /// The prompt of the next turn: the whole history and the new user message.
    pub(super) fn prompt(&self, message: &str) -> Prompt {
        let mut messages = self.messages.clone();
        messages.push(("user".to_string(), message.to_string()));
        Prompt { messages }
    }

    /// A turn was answered: its message and the answer as received join the history.
    pub(super) fn answered(&mut self, message: &str, answer: String) {
        self.messages.push(("user".to_string(), message.to_string()));
        self.messages.push(("assistant".to_string(), answer));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_turn_sends_the_whole_history_and_the_new_message() {
        let mut h = History::new("sys");
        assert_eq!(h.prompt("a").messages, [("system".into(), "sys".into()), ("user".into(), "a".into())]);
        h.answered("a", " ans".into());
        let p = h.prompt("b");
        let roles: Vec<&str> = p.messages.iter().map(|(r, _)| r.as_str()).collect();
        assert_eq!(roles, ["system", "user", "assistant", "user"]);
        assert_eq!(p.messages[2].1, " ans", "the answer as received");
        assert_eq!(p.messages[3].1, "b");
    }

    #[test]
    fn tags_and_messages_are_unique_and_of_one_width() {
        let (a, b, shared) = (tag("r", "s", Some(0)), tag("r", "s", Some(11)), tag("r", "s", None));
        assert!(a != b && a != shared && a.len() == b.len() && a.len() == shared.len());
        assert_ne!(tag("r", "t", Some(0)), a, "another session of the run, another tag");
        let (m1, m2) = (user_text(1, 2, 50), user_text(2, 2, 50));
        assert_ne!(m1[..14], m2[..14]);
        assert_eq!(m1.len(), m2.len());
    }

    #[test]
    fn a_file_line_gives_its_last_user_message() {
        let p = Prompt {
            messages: vec![
                ("system".into(), "s".into()),
                ("user".into(), "q".into()),
                ("assistant".into(), "a".into()),
            ],
        };
        assert_eq!(file_message(&p), "q");
        assert_eq!(file_message(&single("system", "only".into())), "only");
    }
}
