//! Service levels (methodology §11): bounds on what one user sees, and the judgement of a decode
//! cell against them. Pure functions over per-request figures, like the window's.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use crate::stats::percentile;

/// A figure of one user's experience that a bound can name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Figure {
    /// Per-request decode speed, tokens/s: more is better.
    TokS,
    /// Time to first token, ms: less is better.
    Ttft,
    /// Time to first answer token (a reasoning model's wait past its thinking, §7.3), ms: less is
    /// better. The same as TTFT for a request that did not think.
    Ttfa,
    /// Time to first tool call (a run sent with tools, §7.3.1), ms: less is better. Only a run
    /// whose requests carried tools (`run --tools`) has it.
    Ttftc,
    /// Time between tokens (a request's mean), ms: less is better.
    Tbt,
}

impl Figure {
    pub fn name(self) -> &'static str {
        match self {
            Figure::TokS => "tok_s",
            Figure::Ttft => "ttft",
            Figure::Ttfa => "ttfa",
            Figure::Ttftc => "ttftc",
            Figure::Tbt => "tbt",
        }
    }

    pub const ALL: [Figure; 5] = [Figure::TokS, Figure::Ttft, Figure::Ttfa, Figure::Ttftc, Figure::Tbt];

    /// Whether a larger value is the better one (the bound is a floor, not a ceiling).
    pub fn higher_is_better(self) -> bool {
        self == Figure::TokS
    }
}

/// One bound: `tok_s_p10>=30` (90 % of requests get at least 30 tok/s), `ttft_p90<=2s`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Bound {
    pub figure: Figure,
    /// The percentile over the cell's requests, 1–99.
    pub percentile: u8,
    /// tok/s for [`Figure::TokS`], ms otherwise.
    pub limit: f64,
}

/// A bound without its limit, a figure at a percentile: what `slo_bounds` and `bounded_by` name,
/// written `tok_s_p10`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct BoundKey {
    pub figure: Figure,
    pub percentile: u8,
}

impl fmt::Display for BoundKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}_p{}", self.figure.name(), self.percentile)
    }
}

impl FromStr for BoundKey {
    type Err = ();
    /// Only the text [`Display`](fmt::Display) writes (`tok_s_p10`, not `tok_s_p010` nor `tok_s`),
    /// so that a key read from a record is written back the same.
    fn from_str(s: &str) -> Result<BoundKey, ()> {
        let (name, p) = s.rsplit_once("_p").ok_or(())?;
        let figure = Figure::ALL.into_iter().find(|f| f.name() == name).ok_or(())?;
        let percentile: u8 = p.parse().map_err(|_| ())?;
        let key = BoundKey { figure, percentile };
        ((1..=99).contains(&percentile) && key.to_string() == s).then_some(key).ok_or(())
    }
}

/// What a stored judgement names as the bound: a figure at a percentile; the SLO as a whole
/// (`slo`, a cell that failed without naming a bound); or text no bound reads as (a record edited
/// by hand or from a later version), kept so that a reader can refuse or show it by name.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum BoundName {
    Key(BoundKey),
    Whole,
    Unknown(String),
}

impl BoundName {
    /// The bound's figure, where it names one.
    pub fn figure(&self) -> Option<Figure> {
        match self {
            BoundName::Key(k) => Some(k.figure),
            BoundName::Whole | BoundName::Unknown(_) => None,
        }
    }
}

impl From<BoundKey> for BoundName {
    fn from(k: BoundKey) -> BoundName {
        BoundName::Key(k)
    }
}

impl From<&str> for BoundName {
    fn from(s: &str) -> BoundName {
        match s {
            "slo" => BoundName::Whole,
            _ => s.parse().map_or_else(|()| BoundName::Unknown(s.to_string()), BoundName::Key),
        }
    }
}

impl fmt::Display for BoundName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            BoundName::Key(k) => k.fmt(f),
            BoundName::Whole => f.write_str("slo"),
            BoundName::Unknown(text) => f.write_str(text),
        }
    }
}

// Written as its text, so run.json is the same as when the bound was a string; any text reads
// back (unknown text as `Unknown`), so refusing it is the reader's choice, with its own words.
impl Serialize for BoundName {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for BoundName {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<BoundName, D::Error> {
        Ok(BoundName::from(String::deserialize(d)?.as_str()))
    }
}

// A record's bound names one figure and percentile; `slo` and unknown text read back, but are not
// what a writer writes.
crate::record::schema::written_as!(BoundName, "BoundName", {
    "type": "string",
    "pattern": "^(tok_s|ttft|ttfa|ttftc|tbt)_p[0-9]{1,2}$",
    "description": "The figure and percentile, e.g. `tok_s_p10`."
});

impl Bound {
    /// `tok_s_p10`: how `bounded_by` and the record name the bound.
    pub fn key(&self) -> BoundKey {
        BoundKey { figure: self.figure, percentile: self.percentile }
    }

    /// Whether `value` (the cell's figure at this bound's percentile) meets the bound.
    pub fn holds(&self, value: f64) -> bool {
        if self.figure.higher_is_better() { value >= self.limit } else { value <= self.limit }
    }

    /// Whether one request's own figure meets the bound's limit (for goodput). A request without a
    /// speed (fewer than two tokens in the window) is held to its silence instead: its time between
    /// tokens was at least that long, so a user who waited longer than the bound allows between two
    /// tokens did not meet it (methodology §11.2).
    fn request_holds(&self, request: &RequestFigures) -> bool {
        let tbt = request.tbt_ms.or(request.silent_ms);
        match self.figure {
            Figure::TokS => tbt.is_none_or(|t| t <= 0.0 || self.holds(1000.0 / t)),
            Figure::Ttft => request.ttft_ms.is_none_or(|v| self.holds(v)),
            Figure::Ttfa => request.ttfa_ms.is_none_or(|v| self.holds(v)),
            Figure::Ttftc => request.ttftc_ms.is_none_or(|v| self.holds(v)),
            Figure::Tbt => tbt.is_none_or(|v| self.holds(v)),
        }
    }

    /// The cell's value of the bound's figure at its percentile, over its requests.
    fn value(&self, requests: &[RequestFigures]) -> Option<f64> {
        let values: Vec<f64> = match self.figure {
            Figure::TokS => requests.iter().filter_map(RequestFigures::tok_s).collect(),
            Figure::Ttft => requests.iter().filter_map(|r| r.ttft_ms).collect(),
            Figure::Ttfa => requests.iter().filter_map(|r| r.ttfa_ms).collect(),
            Figure::Ttftc => requests.iter().filter_map(|r| r.ttftc_ms).collect(),
            Figure::Tbt => requests.iter().filter_map(|r| r.tbt_ms).collect(),
        };
        percentile(&values, f64::from(self.percentile))
    }
}

impl fmt::Display for Bound {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.figure {
            Figure::TokS => write!(f, "{}>={}", self.key(), trim(self.limit)),
            _ if self.limit >= 1000.0 && (self.limit / 1000.0).fract() == 0.0 => {
                write!(f, "{}<={}s", self.key(), trim(self.limit / 1000.0))
            }
            _ => write!(f, "{}<={}ms", self.key(), trim(self.limit)),
        }
    }
}

fn trim(v: f64) -> String {
    let s = format!("{v:.3}");
    s.trim_end_matches('0').trim_end_matches('.').to_string()
}

/// A service level: every bound must hold. Written in run.json as its expression.
#[derive(Debug, Clone, PartialEq)]
pub struct Slo {
    pub bounds: Vec<Bound>,
}

/// The default service level, for a chat user: see methodology §11.1 for why.
pub const DEFAULT_SLO: &str = "tok_s_p10>=20,ttft_p90<=2s";

impl Default for Slo {
    fn default() -> Self {
        DEFAULT_SLO.parse().expect("the default SLO parses")
    }
}

impl fmt::Display for Slo {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, b) in self.bounds.iter().enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            write!(f, "{b}")?;
        }
        Ok(())
    }
}

/// Why an SLO expression was refused; each says what to write instead.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SloError {
    #[error("the SLO is empty: give bounds such as '{DEFAULT_SLO}'")]
    Empty,
    #[error("'{0}' is not a bound: write FIGURE[_pNN]>=VALUE or <=VALUE, e.g. 'tok_s_p10>=30' or 'ttft_p90<=2s'")]
    Syntax(String),
    #[error(
        "'{0}' names a figure speedmatrix does not measure per request: use tok_s, ttft, ttfa, ttftc or tbt (each with an optional _pNN percentile)"
    )]
    UnknownFigure(String),
    #[error("'{0}': the percentile must be a whole number from 1 to 99 (p50 is the median)")]
    Percentile(String),
    #[error("'{0}': {1}")]
    Direction(String, &'static str),
    #[error("'{0}': the limit must be a positive number{1}")]
    Value(String, &'static str),
    #[error("'{0}' is given twice: give each figure and percentile once")]
    Duplicate(String),
}

impl FromStr for Slo {
    type Err = SloError;
    fn from_str(s: &str) -> Result<Slo, SloError> {
        let mut bounds: Vec<Bound> = Vec::new();
        for part in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let bound = parse_bound(part)?;
            if bounds.iter().any(|b| b.key() == bound.key()) {
                return Err(SloError::Duplicate(bound.key().to_string()));
            }
            bounds.push(bound);
        }
        if bounds.is_empty() {
            return Err(SloError::Empty);
        }
        Ok(Slo { bounds })
    }
}

fn parse_bound(part: &str) -> Result<Bound, SloError> {
    let compact: String = part.chars().filter(|c| !c.is_whitespace()).collect();
    let (name, higher, value) = if let Some((n, v)) = compact.split_once(">=") {
        (n, true, v)
    } else if let Some((n, v)) = compact.split_once("<=") {
        (n, false, v)
    } else {
        return Err(SloError::Syntax(part.to_string()));
    };
    let (figure_name, percentile) = match name.rsplit_once("_p") {
        Some((f, p)) if !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()) => {
            let pct: u8 = p.parse().map_err(|_| SloError::Percentile(part.to_string()))?;
            if !(1..=99).contains(&pct) {
                return Err(SloError::Percentile(part.to_string()));
            }
            (f, pct)
        }
        _ => (name, 50),
    };
    let figure = match figure_name {
        "tok_s" => Figure::TokS,
        "ttft" => Figure::Ttft,
        "ttfa" => Figure::Ttfa,
        "ttftc" => Figure::Ttftc,
        "tbt" => Figure::Tbt,
        _ => return Err(SloError::UnknownFigure(part.to_string())),
    };
    if higher != figure.higher_is_better() {
        let why = if figure.higher_is_better() {
            "a speed is bounded from below: write tok_s>=VALUE"
        } else {
            "a time is bounded from above: write <=VALUE"
        };
        return Err(SloError::Direction(part.to_string(), why));
    }
    let limit = if figure == Figure::TokS { parse_number(value) } else { parse_ms(value) }
        .filter(|v| v.is_finite() && *v > 0.0)
        .ok_or_else(|| {
            let hint = if figure == Figure::TokS { " of tokens/s" } else { " with a unit, e.g. 2s or 150ms" };
            SloError::Value(part.to_string(), hint)
        })?;
    Ok(Bound { figure, percentile, limit })
}

fn parse_number(v: &str) -> Option<f64> {
    v.strip_suffix("tok/s").unwrap_or(v).parse().ok()
}

/// `2s`, `150ms`: a time must carry its unit, so `2` is never read as 2 ms by mistake.
fn parse_ms(v: &str) -> Option<f64> {
    if let Some(n) = v.strip_suffix("ms") {
        n.parse().ok()
    } else {
        v.strip_suffix('s').and_then(|n| n.parse::<f64>().ok()).map(|s| s * 1000.0)
    }
}

impl Serialize for Slo {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for Slo {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Slo, D::Error> {
        let text = String::deserialize(d)?;
        text.parse().map_err(serde::de::Error::custom)
    }
}

crate::record::schema::written_as!(Slo, "Slo", {
    "type": "string",
    "maxLength": 1000,
    "description": "A service level as its canonical expression, e.g. `tok_s_p10>=20,ttft_p90<=2s` (methodology §11.1)."
});

/// What one request of a cell saw inside the window.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct RequestFigures {
    /// Output tokens it received inside the window.
    pub tokens: f64,
    pub ttft_ms: Option<f64>,
    /// Time to its first answer token: the TTFT of a request that did not think; infinite for one
    /// that ended with no answer (its thinking used up `max_tokens`), so a bound on it fails.
    pub ttfa_ms: Option<f64>,
    /// Time to its first tool-call delta (a run sent with tools, §7.3.1); infinite for one that
    /// ended with no call, so a bound on it fails: its user waited for a call that never came.
    /// `None` for a run without tools, and while a request's call may still come.
    pub ttftc_ms: Option<f64>,
    /// Its mean time between tokens inside the window; `None` with fewer than two tokens there.
    pub tbt_ms: Option<f64>,
    /// Without `tbt_ms`: the longest time inside the window, while it streamed (after its first
    /// token, before it ended), that it went without a token. A stalled stream's is most of the
    /// window; one that began just before the window's end has little. `None` where not known.
    pub silent_ms: Option<f64>,
}

impl RequestFigures {
    pub fn tok_s(&self) -> Option<f64> {
        self.tbt_ms.filter(|&t| t > 0.0).map(|t| 1000.0 / t)
    }
}

/// One bound as a cell measured it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct BoundCheck {
    /// The bound's figure and percentile, written `tok_s_p10`.
    pub bound: BoundName,
    /// The limit (tok/s for `tok_s`, ms for `ttft`, `ttfa`, `ttftc` and `tbt`).
    #[schemars(extend("exclusiveMinimum" = 0))]
    pub limit: f64,
    /// The cell's figure at the bound's percentile; null when no request measured it, or (`ttfa`,
    /// `ttftc`) when the percentile falls on a request that never answered or never called a tool.
    pub value: Option<f64>,
    pub holds: bool,
}

/// A cell judged against an SLO.
#[derive(Debug, Clone, PartialEq)]
pub struct Judgement {
    pub met: bool,
    pub bounds: Vec<BoundCheck>,
    /// Share of the requests that met every bound on their own figures; `None` without requests.
    pub goodput_pct: Option<f64>,
    /// Output tokens/s of those requests.
    pub goodput_tok_s: Option<f64>,
}

impl Judgement {
    /// The first bound that failed, as `bounded_by` names it (`slo:tbt_p99`).
    pub fn first_failed(&self) -> Option<&BoundName> {
        self.bounds.iter().find(|b| !b.holds).map(|b| &b.bound)
    }
}

impl Slo {
    /// Judges a measured cell from its requests' own figures (methodology §11.2).
    pub fn judge(&self, requests: &[RequestFigures], measured_s: f64) -> Judgement {
        let bounds: Vec<BoundCheck> = self.bounds.iter().map(|b| check(b, b.value(requests))).collect();
        let good: Vec<&RequestFigures> =
            requests.iter().filter(|r| self.bounds.iter().all(|b| b.request_holds(r))).collect();
        let has_requests = !requests.is_empty() && measured_s > 0.0;
        Judgement {
            met: bounds.iter().all(|b| b.holds),
            bounds,
            goodput_pct: has_requests.then(|| good.len() as f64 * 100.0 / requests.len() as f64),
            goodput_tok_s: has_requests.then(|| good.iter().fold(0.0, |sum, r| sum + r.tokens) / measured_s),
        }
    }

    /// Whether one request met every bound on its own figures (what goodput counts, §11.2).
    pub fn meets(&self, request: &RequestFigures) -> bool {
        self.bounds.iter().all(|b| b.request_holds(request))
    }

    /// Judges a cell from its summary figures only (an imported file, a record written before
    /// SLOs): see [`SummaryFigures`]. No goodput; a bound the summary cannot give is `Err(key)`.
    pub fn judge_summary(&self, s: &SummaryFigures) -> Result<Judgement, String> {
        let bounds = self
            .bounds
            .iter()
            .map(|b| s.value(b).map(|v| check(b, Some(v))).ok_or_else(|| b.key().to_string()))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Judgement { met: bounds.iter().all(|b| b.holds), bounds, goodput_pct: None, goodput_tok_s: None })
    }

    /// The bounds a summary of p50/p90/p99 figures cannot judge (for an error before a report).
    pub fn unjudgeable_from_summary(&self) -> Vec<String> {
        self.bounds.iter().filter(|b| !SummaryFigures::can_give(b)).map(|b| b.key().to_string()).collect()
    }
}

fn check(b: &Bound, value: Option<f64>) -> BoundCheck {
    // an infinite TTFA or TTFTC (a request that never answered, or never called its tool) fails the
    // bound and has no value to show
    let holds = value.is_some_and(|v| b.holds(v));
    BoundCheck { bound: b.key().into(), limit: b.limit, value: value.filter(|v| v.is_finite()), holds }
}

/// The percentiles a cell's summary carries: per-request tok/s (median), TTFT and TBT at p50,
/// p90 and p99. `tok_s_pNN` is read as `1000 / tbt_p(100−NN)`: a request's speed is 1000 over
/// its TBT, so the slowest 10 % by speed are the slowest 10 % by TBT.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct SummaryFigures {
    pub per_request_tok_s: Option<f64>,
    pub ttft_ms: [Option<f64>; 3],
    /// Only where the cell stored them (a request thought): none is read off TTFT.
    pub ttfa_ms: [Option<f64>; 3],
    /// Only where the cell's requests carried tools.
    pub ttftc_ms: [Option<f64>; 3],
    pub tbt_ms: [Option<f64>; 3],
}

impl SummaryFigures {
    const PERCENTILES: [u8; 3] = [50, 90, 99];

    fn at(values: &[Option<f64>; 3], p: u8) -> Option<f64> {
        Self::PERCENTILES.iter().position(|&q| q == p).and_then(|i| values[i])
    }

    fn can_give(b: &Bound) -> bool {
        match b.figure {
            Figure::TokS => Self::PERCENTILES.contains(&(100 - b.percentile)),
            _ => Self::PERCENTILES.contains(&b.percentile),
        }
    }

    fn value(&self, b: &Bound) -> Option<f64> {
        match b.figure {
            Figure::TokS if b.percentile == 50 => {
                self.per_request_tok_s.or_else(|| Self::at(&self.tbt_ms, 50).map(|t| 1000.0 / t))
            }
            Figure::TokS => Self::at(&self.tbt_ms, 100 - b.percentile).filter(|&t| t > 0.0).map(|t| 1000.0 / t),
            Figure::Ttft => Self::at(&self.ttft_ms, b.percentile),
            Figure::Ttfa => Self::at(&self.ttfa_ms, b.percentile),
            Figure::Ttftc => Self::at(&self.ttftc_ms, b.percentile),
            Figure::Tbt => Self::at(&self.tbt_ms, b.percentile),
        }
    }
}

#[cfg(test)]
mod tests;
