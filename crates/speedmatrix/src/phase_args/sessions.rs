//! The flags of issue 17 §4 multi-turn sessions (methodology §13.4).

use std::time::Duration;

use anyhow::{Result, bail, ensure};
use sm_bench::SessionsConfig;
use sm_core::Tokens;
use sm_core::phases::sessions::{MAX_TURNS, MAX_TURNS_TOTAL, MAX_USERS};
use sm_core::record::RunRecord;

use crate::limits::{CountLimit, DurationLimit};

pub const USERS: CountLimit = CountLimit {
    flag: "--sessions",
    min: 1,
    max: MAX_USERS as u64,
    hint: "simulated users, each holding one conversation, e.g. 8",
};
pub const TURNS: CountLimit =
    CountLimit { flag: "--turns", min: 1, max: MAX_TURNS as u64, hint: "turns per conversation, e.g. 4" };
pub const TURN_TOKENS: CountLimit =
    CountLimit { flag: "--turn-tokens", min: 16, max: 1 << 20, hint: "tokens of each new user message, e.g. 256" };
pub const SHARED_PREFIX: CountLimit = CountLimit {
    flag: "--shared-prefix",
    min: 16,
    max: 16 << 20,
    hint: "tokens of a system prompt common to every user, e.g. 2k",
};
pub const THINK_TIME: DurationLimit = DurationLimit {
    flag: "--think-time",
    min: Duration::from_millis(1),
    max: Duration::from_secs(3600),
    zero: Some("0s sends the next turn as soon as the answer ends"),
    hint: "the pause between an answer and the user's next turn, e.g. 2s",
};

const DEFAULT_TURNS: u32 = 3;
const DEFAULT_THINK_TIME: Duration = Duration::from_secs(1);
const DEFAULT_TURN_TOKENS: u64 = 128;

#[derive(Debug, Default, clap::Args)]
pub struct SessionsArgs {
    /// Multi-turn sessions: this many simulated users, each holding a conversation whose every
    /// turn resends the whole history (measures prefix caching). Chat API only.
    #[arg(long, value_name = "USERS", value_parser = |s: &str| USERS.parse_u32(s))]
    pub(crate) sessions: Option<u32>,
    /// With --sessions: turns per conversation [default: 3].
    #[arg(long, value_name = "T", value_parser = |s: &str| TURNS.parse_u32(s))]
    pub(crate) turns: Option<u32>,
    /// With --sessions: the pause between an answer's end and the next turn, e.g. 2s or 500ms
    /// [default: 1s]; users start this time ÷ USERS apart.
    #[arg(long, value_name = "DURATION", allow_hyphen_values = true, value_parser = |s: &str| THINK_TIME.parse(s))]
    pub(crate) think_time: Option<Duration>,
    /// With --sessions: tokens of each new user message, exact as the decode prompts are
    /// [default: 128]; unused with --prompts (the file's messages are sent).
    #[arg(long, value_name = "TOKENS", value_parser = |s: &str| TURN_TOKENS.parse_tokens(s))]
    pub(crate) turn_tokens: Option<Tokens>,
    /// With --sessions: a system prompt of this many tokens common to every user [default: none:
    /// each user's short system prompt is its own, so only its own history can be cached].
    #[arg(long, value_name = "TOKENS", value_parser = |s: &str| SHARED_PREFIX.parse_tokens(s))]
    pub(crate) shared_prefix: Option<Tokens>,
}

impl SessionsArgs {
    /// Whether any of this phase's flags was given.
    pub(crate) fn given(&self) -> bool {
        self.sessions.is_some()
            || self.turns.is_some()
            || self.think_time.is_some()
            || self.turn_tokens.is_some()
            || self.shared_prefix.is_some()
    }

    /// The phase's settings, or `None` when it does not run. On `--resume` without the flags,
    /// the recorded settings; with them, they must be the recorded ones.
    pub(crate) fn resolve(&self, resumed: Option<&RunRecord>) -> Result<Option<SessionsConfig>> {
        let recorded =
            resumed.and_then(|r| r.phases.sessions.as_ref()).map(|p| SessionsConfig::from_settings(&p.settings));
        let Some(users) = self.sessions else {
            if self.given() {
                bail!(
                    "--turns, --think-time, --turn-tokens and --shared-prefix shape the sessions phase: add --sessions USERS (e.g. --sessions 8)"
                );
            }
            return Ok(recorded);
        };
        let config = SessionsConfig {
            users,
            turns: self.turns.unwrap_or(DEFAULT_TURNS),
            think_time: self.think_time.unwrap_or(DEFAULT_THINK_TIME),
            turn_tokens: self.turn_tokens.map_or(DEFAULT_TURN_TOKENS, |t| t.0),
            shared_prefix: self.shared_prefix.map(|t| t.0),
        };
        check(&config)?;
        if let Some(old) = recorded.filter(|old| *old != config) {
            bail!(
                "--resume: the sessions phase was recorded with {}; give the same flags, or none to keep them",
                describe(&old)
            );
        }
        Ok(Some(config))
    }
}

/// The checks clap made, made again for settings that came from a record, and the phase's size.
fn check(c: &SessionsConfig) -> Result<()> {
    let checked = [
        USERS.check_flag(c.users.into()),
        TURNS.check_flag(c.turns.into()),
        TURN_TOKENS.check_flag(c.turn_tokens),
        THINK_TIME.check_flag(c.think_time),
    ];
    for r in checked.into_iter().chain(c.shared_prefix.map(|t| SHARED_PREFIX.check_flag(t))) {
        r.map_err(anyhow::Error::msg)?;
    }
    let total = u64::from(c.users) * u64::from(c.turns);
    ensure!(
        total <= MAX_TURNS_TOTAL,
        "--sessions {} × --turns {} is {total} turns: give at most {MAX_TURNS_TOTAL} in all (fewer users or turns)",
        c.users,
        c.turns
    );
    Ok(())
}

fn describe(c: &SessionsConfig) -> String {
    let shared = c.shared_prefix.map(|t| format!(" --shared-prefix {t}")).unwrap_or_default();
    format!(
        "--sessions {} --turns {} --think-time {} --turn-tokens {}{shared}",
        c.users,
        c.turns,
        crate::limits::show(c.think_time),
        c.turn_tokens
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(users: Option<u32>) -> SessionsArgs {
        SessionsArgs { sessions: users, ..SessionsArgs::default() }
    }

    #[test]
    fn defaults_and_a_flag_without_sessions() {
        let c = args(Some(4)).resolve(None).unwrap().unwrap();
        assert_eq!(
            (c.users, c.turns, c.think_time, c.turn_tokens, c.shared_prefix),
            (4, 3, DEFAULT_THINK_TIME, 128, None)
        );
        assert!(args(None).resolve(None).unwrap().is_none());
        let e = SessionsArgs { turns: Some(2), ..args(None) }.resolve(None).unwrap_err().to_string();
        assert!(e.contains("add --sessions USERS"), "{e}");
    }

    #[test]
    fn out_of_range_values_say_what_to_give() {
        assert!(USERS.parse_u32("0").unwrap_err().contains("give 1 to 256"));
        assert!(TURNS.parse_u32("0").unwrap_err().contains("too small"));
        assert!(THINK_TIME.parse("-1").is_err());
        assert!(THINK_TIME.parse("0s").is_ok());
        let e = SessionsArgs { turns: Some(64), ..args(Some(256)) }.resolve(None).unwrap_err().to_string();
        assert!(e.contains("at most 4096"), "{e}");
    }
}
