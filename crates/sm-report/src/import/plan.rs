//! A plan as the lil-bench upload writes it (`plan[]`), read into speedmatrix plan entries. Both
//! importers use it: a lil-bench upload carries its plan beside the bench JSON, whose own importer
//! otherwise makes a plan from the grid.

use serde_json::Value;
use sm_core::Tokens;
use sm_core::context::label;
use sm_core::record::{PlanKind, PlanStatus, PlannedCell};

use super::value::{str_at, u64_at};

/// The lil-bench plan as speedmatrix plan entries: a decode cell skipped for
/// KV or for the server's sequence limit is over capacity.
pub(super) fn plan(entries: &[Value], _max_tokens: u64) -> Vec<PlannedCell> {
    entries
        .iter()
        .filter_map(|p| {
            let kind = str_at(p, "kind")?;
            let requested = u64_at(p, "requested_context").or_else(|| u64_at(p, "context"))?;
            let context = u64_at(p, "context").unwrap_or(requested);
            let reason = str_at(p, "reason").map(str::to_string);
            // lil-bench's own words, read at the edge
            let status = match str_at(p, "status").unwrap_or("planned") {
                "planned" => PlanStatus::Planned,
                _ if kind == "decode" && reason.as_deref().is_some_and(is_capacity_reason) => PlanStatus::OverCapacity,
                _ => PlanStatus::Skipped,
            };
            Some(PlannedCell {
                kind: if kind == "prefill" { PlanKind::Prefill } else { PlanKind::Decode },
                requested_context: requested,
                context,
                label: label(Tokens(if context > 0 { context } else { requested })),
                concurrency: u64_at(p, "concurrency").unwrap_or(1) as u32,
                status,
                reason: if status == PlanStatus::Planned { None } else { reason },
            })
        })
        .collect()
}

fn is_capacity_reason(reason: &str) -> bool {
    let r = reason.to_ascii_lowercase();
    r.contains("kv") || r.contains("max-num-seqs") || r.contains("max_num_seqs")
}
