//! Units and the small parsers the command line uses.

use std::fmt;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use thiserror::Error;

/// A count of tokens. Kept apart from other integers so a token count is never
/// added to a byte count or a request count by mistake.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Tokens(pub u64);

impl Tokens {
    pub const fn get(self) -> u64 {
        self.0
    }
}

impl fmt::Display for Tokens {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&thousands(self.0))
    }
}

impl std::ops::Add for Tokens {
    type Output = Tokens;
    fn add(self, rhs: Tokens) -> Tokens {
        Tokens(self.0 + rhs.0)
    }
}

/// A duration in milliseconds, as reported in results (fractional).
#[derive(Debug, Clone, Copy, PartialEq, PartialOrd, Default, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Ms(pub f64);

impl Ms {
    pub fn from_duration(d: Duration) -> Ms {
        Ms(d.as_secs_f64() * 1000.0)
    }
    pub fn get(self) -> f64 {
        self.0
    }
}

/// `12582912` → `12,582,912`.
pub fn thousands(n: u64) -> String {
    let s = n.to_string();
    let mut out = String::with_capacity(s.len() + s.len() / 3);
    for (i, c) in s.chars().enumerate() {
        if i > 0 && (s.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// A count and its noun, in the singular for one: `1 row`, `2 rows`, `1,024 cells`. `noun` is the
/// singular; its plural adds an s (every noun the tool counts does).
pub fn plural(n: u64, noun: &str) -> String {
    if n == 1 { format!("1 {noun}") } else { format!("{} {noun}s", thousands(n)) }
}

#[derive(Debug, Error, PartialEq)]
pub enum ParseError {
    #[error("'{input}' is not a token count: use a number with an optional k or m suffix, e.g. 8192, 8k, 1m")]
    Tokens { input: String },
    #[error("'{input}' is not a whole number")]
    Integer { input: String },
    #[error("'{input}' is not a duration: use a number with s, m or ms, e.g. 30s, 2m, 500ms")]
    Duration { input: String },
    #[error("'{input}' has no unit: write {input}s for seconds (or {input}m, {input}ms); only 0 may go without one")]
    DurationUnit { input: String },
    #[error("the list is empty: give at least one value, e.g. 1,2,4")]
    EmptyList,
    #[error("{value} appears twice in the list")]
    Duplicate { value: u64 },
    #[error("0 is not allowed here")]
    Zero,
}

/// Parses `8192`, `8k`, `8K`, `1m` (k = 1024, m = 1024²: the page's context labels are binary).
pub fn parse_tokens(input: &str) -> Result<Tokens, ParseError> {
    let s = input.trim();
    let err = || ParseError::Tokens { input: input.to_string() };
    let (digits, mult) = match s.char_indices().last() {
        Some((i, 'k' | 'K')) => (&s[..i], 1024),
        Some((i, 'm' | 'M')) => (&s[..i], 1024 * 1024),
        _ => (s, 1),
    };
    let base: u64 = digits.trim().replace('_', "").parse().map_err(|_| err())?;
    base.checked_mul(mult).map(Tokens).ok_or_else(err)
}

/// A comma-separated list of token counts (`8k,16k,32k`), without duplicates or zeros.
pub fn parse_token_list(input: &str) -> Result<Vec<Tokens>, ParseError> {
    let values = split_list(input).map(parse_tokens).collect::<Result<Vec<_>, _>>()?;
    check_list(values.iter().map(|t| t.0))?;
    Ok(values)
}

/// A comma-separated list of positive integers (`1,2,4`).
pub fn parse_count_list(input: &str) -> Result<Vec<u32>, ParseError> {
    let values = split_list(input)
        .map(|s| s.parse::<u32>().map_err(|_| ParseError::Integer { input: s.to_string() }))
        .collect::<Result<Vec<_>, _>>()?;
    check_list(values.iter().map(|&v| u64::from(v)))?;
    Ok(values)
}

fn split_list(input: &str) -> impl Iterator<Item = &str> {
    input.split(',').map(str::trim).filter(|s| !s.is_empty())
}

fn check_list(values: impl Iterator<Item = u64>) -> Result<(), ParseError> {
    let mut seen = Vec::new();
    for v in values {
        if v == 0 {
            return Err(ParseError::Zero);
        }
        if seen.contains(&v) {
            return Err(ParseError::Duplicate { value: v });
        }
        seen.push(v);
    }
    if seen.is_empty() {
        return Err(ParseError::EmptyList);
    }
    Ok(())
}

/// Parses `30s`, `2m`, `500ms`, `1.5s`, `1h`, or a bare `0`. Any other bare number is refused:
/// `--duration 5` could mean seconds or minutes, and a guess measures the wrong window silently.
pub fn parse_duration(input: &str) -> Result<Duration, ParseError> {
    let s = input.trim();
    let err = || ParseError::Duration { input: input.to_string() };
    if s.parse::<f64>().is_ok_and(|v| v.is_finite() && v > 0.0) {
        return Err(ParseError::DurationUnit { input: s.to_string() });
    }
    let (num, scale) = if let Some(n) = s.strip_suffix("ms") {
        (n, 0.001)
    } else if let Some(n) = s.strip_suffix('s') {
        (n, 1.0)
    } else if let Some(n) = s.strip_suffix('m') {
        (n, 60.0)
    } else if let Some(n) = s.strip_suffix('h') {
        (n, 3600.0)
    } else {
        (s, 1.0)
    };
    let v: f64 = num.trim().parse().map_err(|_| err())?;
    if !v.is_finite() || v < 0.0 {
        return Err(err());
    }
    Duration::try_from_secs_f64(v * scale).map_err(|_| err())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn token_suffixes_are_binary() {
        assert_eq!(parse_tokens("8k").unwrap(), Tokens(8192));
        assert_eq!(parse_tokens("256K").unwrap(), Tokens(262_144));
        assert_eq!(parse_tokens("1m").unwrap(), Tokens(1_048_576));
        assert_eq!(parse_tokens("1000").unwrap(), Tokens(1000));
        assert!(parse_tokens("8q").is_err());
        assert!(parse_tokens("").is_err());
    }

    #[test]
    fn lists_reject_zero_duplicates_and_empty() {
        assert_eq!(parse_count_list("1, 2,4").unwrap(), vec![1, 2, 4]);
        assert_eq!(parse_count_list("1,1"), Err(ParseError::Duplicate { value: 1 }));
        assert_eq!(parse_count_list("0"), Err(ParseError::Zero));
        assert_eq!(parse_count_list(" , "), Err(ParseError::EmptyList));
        assert_eq!(parse_token_list("8k,16k").unwrap(), vec![Tokens(8192), Tokens(16384)]);
    }

    #[test]
    fn durations() {
        assert_eq!(parse_duration("30s").unwrap(), Duration::from_secs(30));
        assert_eq!(parse_duration("2m").unwrap(), Duration::from_secs(120));
        assert_eq!(parse_duration("500ms").unwrap(), Duration::from_millis(500));
        assert_eq!(parse_duration("1.5s").unwrap(), Duration::from_millis(1500));
        assert_eq!(parse_duration("0").unwrap(), Duration::ZERO);
        assert_eq!(parse_duration("0.0").unwrap(), Duration::ZERO);
        assert!(parse_duration("-1s").is_err());
        assert_eq!(parse_duration("-1"), Err(ParseError::Duration { input: "-1".into() }));
        assert!(parse_duration("soon").is_err());
    }

    #[test]
    fn a_bare_number_other_than_zero_needs_a_unit() {
        for bare in ["5", "1.5", " 30 ", "1e3"] {
            assert_eq!(
                parse_duration(bare),
                Err(ParseError::DurationUnit { input: bare.trim().to_string() }),
                "{bare}"
            );
        }
        let text = parse_duration("5").unwrap_err().to_string();
        assert!(text.contains("write 5s"), "{text}");
    }

    #[test]
    fn one_row_two_rows() {
        assert_eq!(plural(1, "row"), "1 row");
        assert_eq!(plural(0, "row"), "0 rows");
        assert_eq!(plural(2_000, "cell"), "2,000 cells");
    }

    #[test]
    fn thousands_separator() {
        assert_eq!(thousands(0), "0");
        assert_eq!(thousands(999), "999");
        assert_eq!(thousands(12_582_912), "12,582,912");
        assert_eq!(Tokens(1000).to_string(), "1,000");
    }
}
