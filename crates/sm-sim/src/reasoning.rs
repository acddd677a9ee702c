//! A profile's optional `[reasoning]` table: a reasoning model. For a chat request, the first R
//! generated tokens are *thinking*, streamed in the configured delta field (`reasoning_content` or
//! `reasoning`), and the answer follows as `content`. R is fixed or drawn uniformly per request
//! from (seed, request id), so a run replays exactly and the trace carries the truth.

use std::fmt;
use std::str::FromStr;

use toml::{Table, Value};

use crate::natural::mix;

const KEYS: &[&str] = &["tokens", "field", "seed"];

/// The delta (and message) key the thinking text goes in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ReasoningField {
    /// vLLM's older spelling (before 0.10), DeepSeek's API.
    #[default]
    ReasoningContent,
    /// vLLM ≥ 0.10 and OpenRouter.
    Reasoning,
}

impl ReasoningField {
    pub fn as_str(self) -> &'static str {
        match self {
            ReasoningField::ReasoningContent => "reasoning_content",
            ReasoningField::Reasoning => "reasoning",
        }
    }
}

impl fmt::Display for ReasoningField {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for ReasoningField {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        match s.trim() {
            "reasoning_content" => Ok(ReasoningField::ReasoningContent),
            "reasoning" => Ok(ReasoningField::Reasoning),
            other => Err(format!("`{other}` is not a reasoning field (reasoning_content or reasoning)")),
        }
    }
}

/// Thinking tokens per chat request: uniform on `min..=max` (equal for a fixed count).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Reasoning {
    pub min: u32,
    pub max: u32,
    pub field: ReasoningField,
    pub seed: u64,
}

impl Reasoning {
    /// Checks `min ≤ max`; the caller names the key or flag they came from.
    pub fn new(min: u32, max: u32, field: ReasoningField, seed: u64) -> Result<Self, String> {
        if min > max {
            return Err(format!("the range's MIN {min} is above its MAX {max}"));
        }
        Ok(Self { min, max, field, seed })
    }

    /// The thinking tokens of request `id` (the trace's id): a pure function of (seed, id), so the
    /// same seed and the same arrival order give the same counts.
    pub fn tokens(&self, id: u64) -> u32 {
        let span = u64::from(self.max - self.min) + 1;
        self.min + (mix(self.seed ^ mix(id)) % span) as u32
    }

    /// Reads `[reasoning]`; an unknown key is an error (a misspelt key would silently change the
    /// model).
    pub(crate) fn from_table(t: &Table) -> Result<Reasoning, String> {
        if let Some(k) = t.keys().find(|k| !KEYS.contains(&k.as_str())) {
            return Err(format!("reasoning.{k}: unknown key (known: {})", KEYS.join(", ")));
        }
        let (min, max) = match t.get("tokens") {
            None => return Err("reasoning.tokens: missing (N, or [MIN, MAX] for a uniform draw)".into()),
            Some(v @ Value::Integer(_)) => {
                let n = count(v, "reasoning.tokens")?;
                (n, n)
            }
            Some(Value::Array(a)) if a.len() == 2 => {
                (count(&a[0], "reasoning.tokens[0]")?, count(&a[1], "reasoning.tokens[1]")?)
            }
            Some(v) => {
                let found = match v {
                    Value::Array(a) => format!("an array of {}", a.len()),
                    v => v.type_str().to_string(),
                };
                return Err(format!("reasoning.tokens: expected an integer N or a pair [MIN, MAX], found {found}"));
            }
        };
        let field = match t.get("field") {
            None => ReasoningField::default(),
            Some(Value::String(s)) => s.parse().map_err(|e| format!("reasoning.field: {e}"))?,
            Some(v) => return Err(format!("reasoning.field: expected a string, found {}", v.type_str())),
        };
        let seed = match t.get("seed") {
            None => 0,
            Some(Value::Integer(i)) if *i >= 0 => *i as u64,
            Some(Value::Integer(i)) => return Err(format!("reasoning.seed: must be an integer ≥ 0, got {i}")),
            Some(v) => return Err(format!("reasoning.seed: expected an integer, found {}", v.type_str())),
        };
        Reasoning::new(min, max, field, seed).map_err(|e| format!("reasoning.tokens: {e}"))
    }
}

fn count(v: &Value, key: &str) -> Result<u32, String> {
    match v {
        Value::Integer(i) => u32::try_from(*i).map_err(|_| format!("{key}: must be an integer ≥ 0, got {i}")),
        v => Err(format!("{key}: expected an integer, found {}", v.type_str())),
    }
}

/// `N` or `MIN-MAX` (the `--reasoning-tokens` flag).
pub fn parse_tokens(s: &str) -> Result<(u32, u32), String> {
    let num = |x: &str| {
        x.trim().parse::<u32>().map_err(|_| format!("`{s}` is not N or MIN-MAX (whole numbers, e.g. 256 or 100-400)"))
    };
    match s.split_once('-') {
        Some((a, b)) => Ok((num(a)?, num(b)?)),
        None => {
            let n = num(s)?;
            Ok((n, n))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn table(text: &str) -> Result<Reasoning, String> {
        Reasoning::from_table(&toml::from_str::<Table>(text).unwrap())
    }

    #[test]
    fn fixed_and_ranged_counts_parse() {
        let r = table("tokens = 64").unwrap();
        assert_eq!((r.min, r.max, r.field, r.seed), (64, 64, ReasoningField::ReasoningContent, 0));
        assert!((1..50).all(|id| r.tokens(id) == 64));
        let r = table("tokens = [10, 20]\nfield = \"reasoning\"\nseed = 3").unwrap();
        assert_eq!((r.min, r.max, r.field, r.seed), (10, 20, ReasoningField::Reasoning, 3));
    }

    #[test]
    fn ranged_counts_cover_the_range_and_replay() {
        let r = Reasoning::new(10, 20, ReasoningField::Reasoning, 7).unwrap();
        let draws: Vec<u32> = (1..=2000).map(|id| r.tokens(id)).collect();
        assert!(draws.iter().all(|n| (10..=20).contains(n)));
        for n in 10..=20 {
            let hits = draws.iter().filter(|d| **d == n).count();
            // uniform: 2000 / 11 ≈ 182 each; a 5-sigma band
            assert!((120..=250).contains(&hits), "{n}: {hits}");
        }
        assert_eq!(draws, (1..=2000).map(|id| r.tokens(id)).collect::<Vec<_>>(), "same seed, same counts");
        let other = Reasoning { seed: 8, ..r };
        assert_ne!(draws, (1..=2000).map(|id| other.tokens(id)).collect::<Vec<_>>());
    }

    #[test]
    fn bad_tables_say_which_key() {
        for (text, want) in [
            ("field = \"reasoning\"", "reasoning.tokens: missing"),
            ("tokens = -1", "reasoning.tokens: must be an integer ≥ 0, got -1"),
            ("tokens = [20, 10]", "reasoning.tokens: the range's MIN 20 is above its MAX 10"),
            ("tokens = [1, 2, 3]", "reasoning.tokens: expected an integer N or a pair"),
            ("tokens = [1, \"x\"]", "reasoning.tokens[1]: expected an integer"),
            ("tokens = 5\nfield = \"thinking\"", "reasoning.field: `thinking` is not a reasoning field"),
            ("tokens = 5\nfield = 1", "reasoning.field: expected a string"),
            ("tokens = 5\nseed = -2", "reasoning.seed: must be an integer ≥ 0"),
            ("tokens = 5\ntoken = 5", "reasoning.token: unknown key (known: tokens, field, seed)"),
        ] {
            let e = table(text).unwrap_err();
            assert!(e.starts_with(want), "{text}: {e}");
        }
    }

    #[test]
    fn flag_values_parse() {
        assert_eq!(parse_tokens("256"), Ok((256, 256)));
        assert_eq!(parse_tokens("100-400"), Ok((100, 400)));
        assert!(parse_tokens("x").unwrap_err().contains("not N or MIN-MAX"));
        assert!(parse_tokens("-5").is_err());
        assert!(parse_tokens("5-").is_err());
    }
}
