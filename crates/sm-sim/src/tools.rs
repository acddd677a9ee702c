//! Tool calls: a chat request that carries a non-empty `tools` array (and a `tool_choice` other than
//! `"none"`) is answered with one call of its first tool, streamed in OpenAI's shape. Its answer
//! tokens (those after any thinking) are the call: the first is the function's name (the delta with
//! `id`, `type`, `name` and empty `arguments`), each later one a fragment of the arguments. The
//! fragments make a JSON object when the call runs to its planned end, unless the profile's
//! optional `[tools]` table draws this call among its `invalid_json` share (seeded per request
//! id, so a run replays exactly); the trace says which.

use serde_json::Value;
use toml::{Table, Value as Toml};

use crate::natural::mix;

const KEYS: &[&str] = &["invalid_json", "seed"];

/// The argument text of a call is `{"q":"` + words + `"}`; words come from the sim's text
/// generator (letters and spaces only, so they need no escaping inside a JSON string).
const OPEN: &str = r#"{"q":""#;
const CLOSE: &str = r#""}"#;
/// What an invalid call's last fragment is instead of [`CLOSE`]: the object never closes.
const CLOSE_INVALID: &str = "\"";

/// The `[tools]` table; its defaults (every call valid) apply to a profile without one.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Tools {
    /// Share of calls whose arguments are deliberately not JSON, 0–1.
    pub invalid_json: f64,
    pub seed: u64,
}

impl Tools {
    /// Checks the share is within 0–1; the caller names the key or flag it came from.
    pub fn new(invalid_json: f64, seed: u64) -> Result<Self, String> {
        if !(0.0..=1.0).contains(&invalid_json) {
            return Err(format!("must be a share between 0 and 1, got {invalid_json}"));
        }
        Ok(Self { invalid_json, seed })
    }

    /// Whether request `id`'s call is planned with valid arguments: a pure function of (seed, id).
    pub fn plans_valid(&self, id: u64) -> bool {
        // a different stream of draws from [reasoning]'s, which mixes the same id
        let u = (mix(self.seed ^ mix(id ^ 0x7001_5eed)) >> 11) as f64 / (1u64 << 53) as f64;
        u >= self.invalid_json
    }

    /// Reads `[tools]`; an unknown key is an error (a misspelt key would silently change the model).
    pub(crate) fn from_table(t: &Table) -> Result<Tools, String> {
        if let Some(k) = t.keys().find(|k| !KEYS.contains(&k.as_str())) {
            return Err(format!("tools.{k}: unknown key (known: {})", KEYS.join(", ")));
        }
        let invalid_json = match t.get("invalid_json") {
            None => 0.0,
            Some(Toml::Float(f)) => *f,
            Some(Toml::Integer(i)) => *i as f64,
            Some(v) => return Err(format!("tools.invalid_json: expected a number, found {}", v.type_str())),
        };
        let seed = match t.get("seed") {
            None => 0,
            Some(Toml::Integer(i)) if *i >= 0 => *i as u64,
            Some(Toml::Integer(i)) => return Err(format!("tools.seed: must be an integer ≥ 0, got {i}")),
            Some(v) => return Err(format!("tools.seed: expected an integer, found {}", v.type_str())),
        };
        Tools::new(invalid_json, seed).map_err(|e| format!("tools.invalid_json: {e}"))
    }
}

/// The function a request's call names: its first tool's, or the one `tool_choice` forces; `None`
/// when the request has no tools or `tool_choice` is `"none"` (it then answers with content).
pub(crate) fn called_function(body: &Value) -> Option<String> {
    let tools = body.get("tools")?.as_array().filter(|a| !a.is_empty())?;
    let choice = body.get("tool_choice");
    if choice.and_then(Value::as_str) == Some("none") {
        return None;
    }
    let forced = choice.and_then(|c| c.pointer("/function/name")).and_then(Value::as_str);
    let first = tools[0].pointer("/function/name").and_then(Value::as_str);
    Some(forced.or(first).unwrap_or("tool").to_string())
}

/// One request's call as planned: its argument fragments come from this and the text generator.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct CallPlan {
    /// Tokens of the call: the name's one, then `tokens - 1` argument fragments.
    pub tokens: u32,
    pub valid: bool,
}

impl CallPlan {
    /// What the argument fragment at `k` (0-based, after the name) is: the opening, a word from
    /// the text generator, or the closing. One token each.
    pub(crate) fn fragment(&self, k: u32) -> Fragment {
        let args = self.tokens.saturating_sub(1);
        match (args, k) {
            // a single argument token: the whole object (or its unclosed start)
            (1, _) => Fragment::Fixed(if self.valid { "{}" } else { "{" }),
            (_, 0) => Fragment::Fixed(OPEN),
            (n, k) if k + 1 == n => Fragment::Fixed(if self.valid { CLOSE } else { CLOSE_INVALID }),
            _ => Fragment::Word,
        }
    }

    /// Whether `emitted` tokens of this call (the name's included) make valid JSON arguments: only
    /// a call that ran to its planned end, planned valid and with at least one argument token.
    pub(crate) fn valid_after(&self, emitted: u32) -> bool {
        self.valid && emitted >= self.tokens && self.tokens >= 2
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Fragment {
    Fixed(&'static str),
    Word,
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn args(plan: CallPlan) -> String {
        (0..plan.tokens.saturating_sub(1))
            .map(|k| match plan.fragment(k) {
                Fragment::Fixed(s) => s.to_string(),
                Fragment::Word => " word".to_string(),
            })
            .collect()
    }

    #[test]
    fn fragments_make_an_object_unless_planned_invalid() {
        for tokens in 2..8 {
            let valid = CallPlan { tokens, valid: true };
            let v: Value = serde_json::from_str(&args(valid)).unwrap_or_else(|e| panic!("{tokens}: {e}"));
            assert!(v.is_object(), "{tokens}");
            assert!(valid.valid_after(tokens) && !valid.valid_after(tokens - 1));
            let invalid = CallPlan { tokens, valid: false };
            assert!(serde_json::from_str::<Value>(&args(invalid)).is_err(), "{tokens}");
            assert!(!invalid.valid_after(tokens));
        }
        // a call of its name alone has empty arguments, which are not JSON
        assert!(!CallPlan { tokens: 1, valid: true }.valid_after(1));
    }

    #[test]
    fn the_invalid_share_is_drawn_per_request() {
        let t = Tools::new(0.25, 9).unwrap();
        let invalid = (0..4000).filter(|&id| !t.plans_valid(id)).count();
        assert!((850..=1150).contains(&invalid), "{invalid}");
        assert!((0..100).all(|id| Tools::default().plans_valid(id)));
        assert!((0..100).all(|id| !Tools::new(1.0, 0).unwrap().plans_valid(id)));
    }

    #[test]
    fn the_called_function_is_the_first_tool_or_the_forced_one() {
        let tool = |n: &str| json!({"type": "function", "function": {"name": n, "parameters": {}}});
        let body = json!({"tools": [tool("get_weather"), tool("b")]});
        assert_eq!(called_function(&body).as_deref(), Some("get_weather"));
        let forced =
            json!({"tools": [tool("a"), tool("b")], "tool_choice": {"type": "function", "function": {"name": "b"}}});
        assert_eq!(called_function(&forced).as_deref(), Some("b"));
        assert_eq!(called_function(&json!({"tools": [tool("a")], "tool_choice": "none"})), None);
        assert_eq!(called_function(&json!({"tools": []})), None);
        assert_eq!(called_function(&json!({})), None);
    }

    #[test]
    fn bad_tables_say_which_key() {
        let table = |s: &str| Tools::from_table(&toml::from_str::<Table>(s).unwrap());
        assert_eq!(table("invalid_json = 0.5\nseed = 2"), Ok(Tools { invalid_json: 0.5, seed: 2 }));
        assert_eq!(table(""), Ok(Tools::default()));
        for (text, want) in [
            ("invalid_json = 1.5", "tools.invalid_json: must be a share between 0 and 1"),
            ("invalid_json = \"x\"", "tools.invalid_json: expected a number"),
            ("seed = -1", "tools.seed: must be an integer ≥ 0"),
            ("lead = 1", "tools.lead: unknown key (known: invalid_json, seed)"),
        ] {
            let e = table(text).unwrap_err();
            assert!(e.starts_with(want), "{text}: {e}");
        }
    }
}
