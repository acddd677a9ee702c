//! Each record section's figures as one table: name, unit, when a section carries
//! it, and how to read it. The consumers (the site's range checks, the CSV files, the docs' figure
//! list) iterate the table, so a new figure is its record field, its pure function, its table
//! entry and its methodology paragraph, and nothing else (ARCHITECTURE.md, "Adding a figure").
//!
//! The table is static, not a method that returns values: the CSV header, the docs' list and the
//! tests need the names and units of a section that has no value yet.

use crate::record::CellStatus;

pub mod intervals;
mod tables;
pub use tables::WHERE_CARRIED;
#[cfg(test)]
mod tests;

/// What a figure counts, and so which range it may take (the site's checks keep one bound per
/// unit) and how a reader is told what it is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unit {
    /// Milliseconds: latencies and spreads.
    Ms,
    /// Seconds: spans and times on the run's clock.
    Seconds,
    /// Tokens per second.
    TokPerS,
    /// Requests per second.
    ReqPerS,
    /// A share, 0 to 100.
    Percent,
    /// Percent of one CPU core, so above 100 on several.
    CorePercent,
    /// Requests in flight or streams active at once.
    Streams,
    /// A count of requests or tokens, however large.
    Count,
    /// A prompt's or answer's size in tokens: at most a context.
    Tokens,
    /// One figure over another of the same unit (a slowdown, a fraction of a bound).
    Ratio,
    /// A share of requests, 0 to 1 (tool calls whose arguments parse), written as a percent.
    Share,
    /// US dollars (per million tokens, per user-hour).
    Usd,
}

impl Unit {
    /// The unit as the docs and the tables write it after a number.
    pub fn symbol(self) -> &'static str {
        match self {
            Unit::Ms => "ms",
            Unit::Seconds => "s",
            Unit::TokPerS => "tok/s",
            Unit::ReqPerS => "req/s",
            Unit::Percent => "%",
            Unit::CorePercent => "% of a core",
            Unit::Streams => "streams",
            Unit::Count => "count",
            Unit::Tokens => "tokens",
            Unit::Ratio => "×",
            Unit::Share => "share",
            Unit::Usd => "USD",
        }
    }
}

/// When a section may carry a figure: the site refuses one carried otherwise.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Carried {
    /// Any section (client health, a turn's clock): measured whatever became of it.
    Always,
    /// Only a valid section: an error's numbers would read as a measurement.
    WhenValid,
    /// Any section that was sent: one the plan held back (over capacity) has nothing to show.
    WhenSent,
}

impl Carried {
    /// Which sections carry the figure, as the docs' list says it.
    pub fn words(self) -> &'static str {
        match self {
            Carried::Always => "any",
            Carried::WhenValid => "valid only",
            Carried::WhenSent => "sent only (not over capacity)",
        }
    }

    /// Whether a section of this status may carry the figure.
    pub fn allows(self, status: CellStatus) -> bool {
        match self {
            Carried::Always => true,
            Carried::WhenValid => status == CellStatus::Valid,
            Carried::WhenSent => status != CellStatus::OverCapacity,
        }
    }
}

/// One figure of a section `T`: its name as run.json and the CSV spell it, its unit, when it is
/// carried, and how to read it from a section.
pub struct Figure<T> {
    pub name: &'static str,
    /// How the page's and Markdown's tables of the section head the figure's column ("E2E p50");
    /// `None` where they do not show it.
    pub label: Option<&'static str>,
    pub unit: Unit,
    pub carried: Carried,
    pub value: fn(&T) -> Option<f64>,
}

impl<T> Figure<T> {
    /// The figure's value in `section`, `None` where the section does not carry it.
    pub fn of(&self, section: &T) -> Option<f64> {
        (self.value)(section)
    }
}

/// A record section whose figures are one table.
pub trait Figures: Sized + 'static {
    /// Every figure of the section, in the order the CSV writes them.
    const FIGURES: &'static [Figure<Self>];

    /// The section's status as [`Carried`] judges it; a section without one is always valid.
    fn status(&self) -> CellStatus {
        CellStatus::Valid
    }

    /// The figures the page's and Markdown's tables of the section show, in order: those with a
    /// heading.
    fn headed() -> impl Iterator<Item = &'static Figure<Self>> {
        Self::FIGURES.iter().filter(|f| f.label.is_some())
    }

    /// The figure named `name`, if the section has one.
    fn figure(name: &str) -> Option<&'static Figure<Self>> {
        Self::FIGURES.iter().find(|f| f.name == name)
    }
}

/// A figure of a section, without the section's type: what the docs' list and the tests that
/// follow every figure through the outputs iterate.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Entry {
    pub name: &'static str,
    pub label: Option<&'static str>,
    pub unit: Unit,
    pub carried: Carried,
}

/// One record section and its figures, named by where it sits in run.json (`phases.burst.bursts[]`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Section {
    pub path: &'static str,
    pub figures: Vec<Entry>,
}

fn section<T: Figures>(path: &'static str) -> Section {
    let figures =
        T::FIGURES.iter().map(|f| Entry { name: f.name, label: f.label, unit: f.unit, carried: f.carried }).collect();
    Section { path, figures }
}

/// Every record section that has a figure table, in run.json's order.
pub fn sections() -> Vec<Section> {
    use crate::phases::{burst, mixed, rate, sessions};
    vec![
        section::<crate::record::PrefillRow>("prefill[]"),
        section::<crate::record::DecodeCell>("decode[]"),
        section::<crate::capacity_answer::Capacity>("capacity[]"),
        section::<rate::RateLevel>("phases.rate.levels[]"),
        section::<burst::Burst>("phases.burst.bursts[]"),
        section::<mixed::MixedLevel>("phases.mixed_prefill.levels[]"),
        section::<mixed::MixedProbe>("phases.mixed_prefill.levels[].probes[]"),
        section::<sessions::SessionTurn>("phases.sessions.sessions[].turns[]"),
        section::<sessions::TurnFigures>("phases.sessions.by_turn[]"),
        section::<sessions::SessionsSummary>("phases.sessions.summary"),
    ]
}

/// A count as a figure: exact up to 2^53, far above any count a run makes.
fn count(n: Option<u64>) -> Option<f64> {
    n.map(|n| n as f64)
}
