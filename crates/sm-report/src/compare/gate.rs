//! `--fail-on`: the bounds a comparison must stay within, e.g. `total_tok_s<-3%,ttft_p90>+10%`.
//! A bound says its own direction: `<-3%` fails a figure that fell by more than 3 %, `>+10%` one
//! that rose by more than 10 %, whichever way is worse for that figure. A cell fails a bound only
//! when its difference is beyond the bound **and** significant (beyond both runs' noise): a
//! difference without intervals never fails one.

use std::fmt;
use std::str::FromStr;

use sm_core::record::CellStatus;

use super::{Comparison, Figure, Significance};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Direction {
    /// `<`: fails below the bound.
    Below,
    /// `>`: fails above it.
    Above,
}

/// One bound: a figure, a direction and a difference in % of the baseline.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Bound {
    pub figure: Figure,
    pub direction: Direction,
    pub pct: f64,
}

impl Bound {
    /// Whether a difference of `pct` is past this bound (the noise aside).
    pub fn beyond(&self, pct: f64) -> bool {
        match self.direction {
            Direction::Below => pct < self.pct,
            Direction::Above => pct > self.pct,
        }
    }
}

impl fmt::Display for Bound {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let op = if self.direction == Direction::Below { '<' } else { '>' };
        write!(f, "{}{op}{:+}%", self.figure.name(), self.pct)
    }
}

/// The bounds of `--fail-on`, in the order given.
#[derive(Debug, Clone, PartialEq)]
pub struct Gate {
    pub bounds: Vec<Bound>,
}

impl fmt::Display for Gate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let terms: Vec<String> = self.bounds.iter().map(Bound::to_string).collect();
        f.write_str(&terms.join(","))
    }
}

const SYNTAX: &str = "write FIGURE<-PCT% or FIGURE>+PCT%, comma-separated, e.g. 'total_tok_s<-3%,ttft_p90>+10%'";

fn figures() -> String {
    Figure::ALL.iter().map(|f| f.name()).collect::<Vec<_>>().join(", ")
}

#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum GateError {
    #[error("--fail-on is empty: {SYNTAX}")]
    Empty,
    #[error("'{term}': no '<' or '>': {SYNTAX}")]
    NoOperator { term: String },
    #[error("'{term}': unknown figure '{name}'; the figures are {}", figures())]
    UnknownFigure { term: String, name: String },
    #[error(
        "'{term}': the difference must be a signed percentage such as -3% or +10% (the sign says which way is worse): {SYNTAX}"
    )]
    BadPercent { term: String },
}

impl FromStr for Bound {
    type Err = GateError;
    fn from_str(term: &str) -> Result<Bound, GateError> {
        let bad = || GateError::BadPercent { term: term.to_string() };
        let at = term.find(['<', '>']).ok_or_else(|| GateError::NoOperator { term: term.to_string() })?;
        let name = term[..at].trim();
        let direction = if term[at..].starts_with('<') { Direction::Below } else { Direction::Above };
        // `<=` reads the same as `<`: a difference exactly at the bound is not one past it
        let rest = term[at + 1..].strip_prefix('=').unwrap_or(&term[at + 1..]).trim();
        let figure = Figure::from_name(name)
            .ok_or_else(|| GateError::UnknownFigure { term: term.to_string(), name: name.to_string() })?;
        let number = rest.strip_suffix('%').ok_or_else(bad)?.trim();
        if !number.starts_with(['+', '-']) {
            return Err(bad());
        }
        let pct: f64 = number.parse().map_err(|_| bad())?;
        if !pct.is_finite() || pct.abs() > 1e6 {
            return Err(bad());
        }
        Ok(Bound { figure, direction, pct })
    }
}

impl FromStr for Gate {
    type Err = GateError;
    fn from_str(s: &str) -> Result<Gate, GateError> {
        let bounds =
            s.split(',').map(str::trim).filter(|t| !t.is_empty()).map(str::parse).collect::<Result<Vec<_>, _>>()?;
        if bounds.is_empty() {
            return Err(GateError::Empty);
        }
        Ok(Gate { bounds })
    }
}

/// Why a cell fails the gate.
#[derive(Debug, Clone, PartialEq)]
pub enum Why {
    /// A figure's difference is past a bound and significant.
    Bound { bound: Bound, pct: f64 },
    /// The cell was valid in the baseline and is not in the other run: every bound is moot.
    Lost { status: CellStatus },
}

#[derive(Debug, Clone, PartialEq)]
pub struct Failure {
    pub context: u64,
    pub label: String,
    pub concurrency: u32,
    pub why: Why,
}

impl Gate {
    /// The cells of `comparison` that fail, each bound it fails once.
    pub fn check(&self, comparison: &Comparison) -> Vec<Failure> {
        let mut out = Vec::new();
        for cell in &comparison.cells {
            let fail =
                |why| Failure { context: cell.context, label: cell.label.clone(), concurrency: cell.concurrency, why };
            if let Some(status) = cell.lost() {
                out.push(fail(Why::Lost { status }));
                continue;
            }
            let super::Outcome::Compared(diffs) = &cell.outcome else { continue };
            for bound in &self.bounds {
                let past = diffs.iter().find(|d| d.figure == bound.figure).and_then(|d| {
                    let pct = d.pct?;
                    (d.significance == Significance::Significant && bound.beyond(pct)).then_some(pct)
                });
                if let Some(pct) = past {
                    out.push(fail(Why::Bound { bound: *bound, pct }));
                }
            }
        }
        out
    }
}
