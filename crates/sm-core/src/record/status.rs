//! What became of a run, a cell or a planned entry: the statuses run.json writes. Their own module,
//! so that the phases' sections (which carry a cell status) need not import the whole record.

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum RunStatus {
    /// `--dry-run`: discovered and planned, nothing measured.
    Planned,
    Running,
    Complete,
    Interrupted,
    Failed,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum CellStatus {
    Valid,
    OverCapacity,
    Error,
    Loop,
    Skipped,
}

impl CellStatus {
    /// The status as the console, the tables and the dashboard say it ("over capacity").
    pub fn word(self) -> &'static str {
        match self {
            CellStatus::Valid => "valid",
            CellStatus::OverCapacity => "over capacity",
            CellStatus::Error => "error",
            CellStatus::Loop => "loop",
            CellStatus::Skipped => "skipped",
        }
    }

    /// The status as run.json, the CSV and the site's messages spell it ("over_capacity").
    pub fn name(self) -> &'static str {
        match self {
            CellStatus::OverCapacity => "over_capacity",
            other => other.word(),
        }
    }
}

/// What the plan decided for an entry; run.json writes `planned`, `over_capacity` or `skipped`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum PlanStatus {
    Planned,
    OverCapacity,
    Skipped,
}
