//! The matrix to measure: fitted contexts, prefill rows, decode cells with their
//! capacity verdicts, and the order cells run in (methodology §1.2–1.3, §1.7).

use crate::Tokens;
use crate::capacity::{CapacityRule, Limits, kv_need, over_capacity_reason};
use crate::context::{Fit, fit_context, label};
use crate::record::{PlanKind, PlanStatus, PlannedCell};

#[derive(Debug, Clone, PartialEq)]
pub struct PlanInput {
    pub contexts: Vec<Tokens>,
    pub concurrency: Vec<u32>,
    pub max_tokens: Tokens,
    /// Extra prefill-only contexts (every decode context gets a prefill row anyway).
    pub prefill_contexts: Vec<Tokens>,
    /// Add the largest context that fits `max_tokens: 1` as a prefill row.
    pub prefill_at_max: bool,
    pub max_model_len: Option<Tokens>,
    pub limits: Limits,
    pub rule: CapacityRule,
}

/// A decode row: one context.
#[derive(Debug, Clone, PartialEq)]
pub struct Row {
    pub requested: Tokens,
    pub fit: Fit,
}

#[derive(Debug, Clone, PartialEq)]
pub struct PrefillPoint {
    pub requested: Tokens,
    pub context: Tokens,
    pub label: String,
    /// True when no decode row has this context (the scout is measured on its own).
    pub scout_only: bool,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Cell {
    pub context: Tokens,
    pub label: String,
    pub concurrency: u32,
    /// `Some(reason)`: over capacity, written but not run.
    pub over_capacity: Option<String>,
    pub kv_need: Tokens,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Plan {
    pub rows: Vec<Row>,
    pub prefill: Vec<PrefillPoint>,
    /// Decode cells in measurement order.
    pub cells: Vec<Cell>,
    /// Prefill contexts that do not fit the model, with the reason.
    pub prefill_skipped: Vec<(Tokens, String)>,
}

impl Plan {
    pub fn build(input: &PlanInput) -> Plan {
        let rows: Vec<Row> = input
            .contexts
            .iter()
            .map(|&requested| Row { requested, fit: fit_context(requested, input.max_tokens, input.max_model_len) })
            .collect();
        let contexts: Vec<Tokens> = rows.iter().filter_map(|r| r.fit.context()).collect();
        // a row is named by what the user asked for (256K), not by what it was fitted to (251K)
        let row_label =
            |ctx: Tokens| label(rows.iter().find(|r| r.fit.context() == Some(ctx)).map_or(ctx, |r| r.requested));
        let cells = order(&contexts, &input.concurrency)
            .into_iter()
            .map(|(ctx, c)| Cell {
                context: ctx,
                label: row_label(ctx),
                concurrency: c,
                over_capacity: over_capacity_reason(input.rule, &input.limits, ctx, input.max_tokens, c),
                kv_need: kv_need(input.rule, ctx, input.max_tokens, c, input.limits.block_size),
            })
            .collect();
        let (prefill, prefill_skipped) = prefill_points(input, &contexts);
        Plan { rows, prefill, cells, prefill_skipped }
    }

    pub fn runnable(&self) -> impl Iterator<Item = &Cell> {
        self.cells.iter().filter(|c| c.over_capacity.is_none())
    }

    /// The plan as it is written into `run.json`.
    pub fn to_record(&self) -> Vec<PlannedCell> {
        let mut out: Vec<PlannedCell> = self
            .prefill
            .iter()
            .map(|p| PlannedCell {
                kind: PlanKind::Prefill,
                requested_context: p.requested.0,
                context: p.context.0,
                label: p.label.clone(),
                concurrency: 1,
                status: PlanStatus::Planned,
                reason: None,
            })
            .collect();
        out.extend(self.prefill_skipped.iter().map(|(req, reason)| PlannedCell {
            kind: PlanKind::Prefill,
            requested_context: req.0,
            context: 0,
            label: label(*req),
            concurrency: 1,
            status: PlanStatus::Skipped,
            reason: Some(reason.clone()),
        }));
        for row in &self.rows {
            if let Fit::Skipped { requested, reason } = &row.fit {
                out.push(PlannedCell {
                    kind: PlanKind::Decode,
                    requested_context: requested.0,
                    context: 0,
                    label: label(*requested),
                    concurrency: 0,
                    status: PlanStatus::Skipped,
                    reason: Some(reason.clone()),
                });
            }
        }
        out.extend(self.cells.iter().map(|c| PlannedCell {
            kind: PlanKind::Decode,
            requested_context: self.requested_of(c.context).0,
            context: c.context.0,
            label: c.label.clone(),
            concurrency: c.concurrency,
            status: if c.over_capacity.is_some() { PlanStatus::OverCapacity } else { PlanStatus::Planned },
            reason: c.over_capacity.clone(),
        }));
        out
    }

    fn requested_of(&self, ctx: Tokens) -> Tokens {
        self.rows.iter().find(|r| r.fit.context() == Some(ctx)).map(|r| r.requested).unwrap_or(ctx)
    }
}

/// The label the plan gave a context of this `kind`, so every view of a
/// record names a row as its plan did; the context's own label when the plan has none (an old or
/// imported record).
pub fn planned_label(plan: &[PlannedCell], kind: PlanKind, context: u64) -> String {
    plan.iter()
        .find(|p| p.kind == kind && p.context == context && p.context > 0)
        .map_or_else(|| label(Tokens(context)), |p| p.label.clone())
}

/// A context of the plan as every view names it ([`crate::context::shown`]): the name the user
/// asked for (a row of `kind`, else of the other kind) with the exact tokens where it does not say
/// them: `256K (257,984)`, never the `251K` a label made from the fitted tokens would give.
pub fn shown_context(plan: &[PlannedCell], kind: PlanKind, context: u64) -> String {
    let other = if kind == PlanKind::Decode { PlanKind::Prefill } else { PlanKind::Decode };
    let planned = |k| plan.iter().find(|p| p.kind == k && p.context == context && p.context > 0);
    let name = planned(kind).or_else(|| planned(other)).map_or_else(|| label(Tokens(context)), |p| p.label.clone());
    crate::context::shown(&name, context)
}

/// What a plan holds, counted once for every view of it (the console, the `--dry-run` table, the
/// dashboard, the page).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct PlanSummary<'a> {
    /// Decode cells that will be measured.
    pub decode_planned: usize,
    /// Decode cells the server cannot hold, with their reasons.
    pub over_capacity: Vec<&'a PlannedCell>,
    /// Prefill rows that will be measured.
    pub prefill_planned: Vec<&'a PlannedCell>,
    /// Contexts (decode or prefill) that are not run, with their reasons.
    pub skipped: Vec<&'a PlannedCell>,
    /// The decode matrix's rows, (context, label) in plan order: every decode context not skipped.
    pub decode_rows: Vec<(u64, String)>,
}

impl<'a> PlanSummary<'a> {
    pub fn of(plan: &'a [PlannedCell]) -> PlanSummary<'a> {
        let mut s = PlanSummary::default();
        for p in plan {
            match (p.kind, p.status) {
                (_, PlanStatus::Skipped) => s.skipped.push(p),
                (PlanKind::Prefill, PlanStatus::Planned) => s.prefill_planned.push(p),
                (PlanKind::Prefill, PlanStatus::OverCapacity) => {}
                (PlanKind::Decode, status) => {
                    if !s.decode_rows.iter().any(|(c, _)| *c == p.context) {
                        s.decode_rows.push((p.context, p.label.clone()));
                    }
                    match status {
                        PlanStatus::OverCapacity => s.over_capacity.push(p),
                        _ => s.decode_planned += 1,
                    }
                }
            }
        }
        s
    }
}

/// What the user asked for to get `context` (of `kind`, fitted with `output_tokens`), as the plan
/// of an earlier run recorded it; `context` itself when the plan does not say or when the request
/// would no longer fit to the same context. Resuming plans again from these, so a row keeps its name.
pub fn planned_request(
    plan: &[PlannedCell],
    kind: PlanKind,
    context: u64,
    output_tokens: Tokens,
    max_model_len: Option<Tokens>,
) -> Tokens {
    plan.iter()
        .filter(|p| p.kind == kind && p.context == context && p.context > 0)
        .map(|p| Tokens(p.requested_context))
        .find(|&r| fit_context(r, output_tokens, max_model_len).context() == Some(Tokens(context)))
        .unwrap_or(Tokens(context))
}

/// Methodology §1.7: the first column (every context at the first concurrency),
/// then the rest of the first row, then the remaining rows in order.
pub fn order(contexts: &[Tokens], concurrency: &[u32]) -> Vec<(Tokens, u32)> {
    let mut out = Vec::with_capacity(contexts.len() * concurrency.len());
    let Some((&c0, rest)) = concurrency.split_first() else {
        return out;
    };
    out.extend(contexts.iter().map(|&ctx| (ctx, c0)));
    if let Some((&first, other_rows)) = contexts.split_first() {
        out.extend(rest.iter().map(|&c| (first, c)));
        for &ctx in other_rows {
            out.extend(rest.iter().map(|&c| (ctx, c)));
        }
    }
    out
}

fn prefill_points(input: &PlanInput, decode: &[Tokens]) -> (Vec<PrefillPoint>, Vec<(Tokens, String)>) {
    let mut points: Vec<PrefillPoint> = input
        .rows_requested_for(decode)
        .map(|(requested, ctx)| PrefillPoint { requested, context: ctx, label: label(requested), scout_only: false })
        .collect();
    let mut skipped = Vec::new();
    let mut extras: Vec<Tokens> = input.prefill_contexts.clone();
    if input.prefill_at_max
        && let Some(mml) = input.max_model_len
    {
        extras.push(mml);
    }
    for requested in extras {
        match fit_context(requested, Tokens(1), input.max_model_len) {
            Fit::Skipped { reason, .. } => skipped.push((requested, reason)),
            fit => {
                let ctx = fit.context().unwrap_or(requested);
                if !points.iter().any(|p| p.context == ctx) {
                    points.push(PrefillPoint { requested, context: ctx, label: label(requested), scout_only: true });
                }
            }
        }
    }
    points.sort_by_key(|p| p.context);
    (points, skipped)
}

impl PlanInput {
    fn rows_requested_for<'a>(&'a self, decode: &'a [Tokens]) -> impl Iterator<Item = (Tokens, Tokens)> + 'a {
        decode.iter().map(move |&ctx| {
            let requested = self
                .contexts
                .iter()
                .copied()
                .find(|&r| fit_context(r, self.max_tokens, self.max_model_len).context() == Some(ctx))
                .unwrap_or(ctx);
            (requested, ctx)
        })
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use super::*;
    use crate::context::shown;

    const K: u64 = 1024;

    fn seed_input() -> PlanInput {
        PlanInput {
            contexts: [8, 16, 32, 64, 128, 256].iter().map(|k| Tokens(k * K)).collect(),
            concurrency: vec![1, 2, 4, 8, 16, 32, 64, 128],
            max_tokens: Tokens(4096),
            prefill_contexts: vec![],
            prefill_at_max: true,
            max_model_len: Some(Tokens(262_144)),
            limits: Limits { kv_budget: Some(Tokens(12_582_912)), block_size: Some(256), max_num_seqs: Some(256) },
            rule: CapacityRule::Reference,
        }
    }

    #[test]
    fn published_matrix() {
        let plan = Plan::build(&seed_input());
        // a trimmed row keeps the name the user asked for; views show its exact count beside it
        let labels: BTreeSet<(&str, u64)> = plan.cells.iter().map(|c| (c.label.as_str(), c.context.0)).collect();
        let want =
            [("8K", 8 * K), ("16K", 16 * K), ("32K", 32 * K), ("64K", 64 * K), ("128K", 128 * K), ("256K", 257_984)];
        assert_eq!(labels, BTreeSet::from(want));
        let over: Vec<(String, u32)> =
            plan.cells.iter().filter(|c| c.over_capacity.is_some()).map(|c| (c.label.clone(), c.concurrency)).collect();
        assert_eq!(over, [("128K".to_string(), 128), ("256K".into(), 64), ("256K".into(), 128)]);
        assert_eq!(plan.cells.len(), 48);
        // prefill at max asks for max_model_len (256K) and is measured at 262,079 tokens
        let prefill: Vec<String> = plan.prefill.iter().map(|p| shown(&p.label, p.context.0)).collect();
        assert_eq!(prefill, ["8K", "16K", "32K", "64K", "128K", "256K (257,984)", "256K (262,079)"]);
        let record = plan.to_record();
        assert!(record.iter().filter(|p| p.context == 257_984).all(|p| p.label == "256K"));
        assert!(plan.prefill.last().unwrap().scout_only);
    }

    #[test]
    fn a_plan_made_again_from_its_record_keeps_its_names() {
        let input = seed_input();
        let first = Plan::build(&input).to_record();
        let requested: Vec<Tokens> = [8192, 16384, 32768, 65536, 131072, 257_984]
            .iter()
            .map(|&c| planned_request(&first, PlanKind::Decode, c, input.max_tokens, input.max_model_len))
            .collect();
        assert_eq!(requested, input.contexts);
        let at_max = planned_request(&first, PlanKind::Prefill, 262_079, Tokens(1), input.max_model_len);
        assert_eq!(at_max, Tokens(262_144));
        // a decode row's prefill point was asked for with max_tokens, not 1: it is not re-requested
        assert_eq!(
            planned_request(&first, PlanKind::Prefill, 257_984, Tokens(1), input.max_model_len),
            Tokens(257_984)
        );
        assert_eq!(planned_label(&first, PlanKind::Decode, 257_984), "256K");
        assert_eq!(planned_label(&first, PlanKind::Prefill, 262_079), "256K");
        assert_eq!(planned_label(&[], PlanKind::Decode, 257_984), "251K");
    }

    #[test]
    fn measurement_order() {
        let got = order(&[Tokens(1), Tokens(2), Tokens(3)], &[1, 2]);
        let want = [(1, 1), (2, 1), (3, 1), (1, 2), (2, 2), (3, 2)];
        assert_eq!(got, want.map(|(t, c)| (Tokens(t), c)));
    }

    #[test]
    fn record_lists_every_cell_and_skipped_row() {
        let mut input = seed_input();
        input.max_model_len = Some(Tokens(65_536));
        let plan = Plan::build(&input);
        let rec = plan.to_record();
        assert!(rec.iter().any(|p| p.kind == PlanKind::Decode && p.status == PlanStatus::Skipped && p.label == "128K"));
        assert_eq!(rec.iter().filter(|p| p.kind == PlanKind::Decode && p.concurrency > 0).count(), 4 * 8);
    }

    /// One summary of a plan for every view: what will be measured, what is over capacity, what is
    /// not run, and the matrix's rows (skipped contexts are not rows).
    #[test]
    fn summary_counts_each_kind_and_status_once() {
        let mut input = seed_input();
        input.max_model_len = Some(Tokens(65_536));
        input.limits.kv_budget = Some(Tokens(200_000));
        let rec = Plan::build(&input).to_record();
        let s = PlanSummary::of(&rec);
        let count = |k, st| rec.iter().filter(|p| p.kind == k && p.status == st).count();
        assert_eq!(s.decode_planned, count(PlanKind::Decode, PlanStatus::Planned));
        assert_eq!(s.over_capacity.len(), count(PlanKind::Decode, PlanStatus::OverCapacity));
        assert!(!s.over_capacity.is_empty(), "the small KV budget puts some cells over capacity");
        assert_eq!(s.prefill_planned.len(), count(PlanKind::Prefill, PlanStatus::Planned));
        assert_eq!(s.skipped.len(), rec.iter().filter(|p| p.status == PlanStatus::Skipped).count());
        assert!(s.skipped.iter().any(|p| p.label == "128K"));
        assert!(s.decode_rows.iter().all(|(_, l)| l != "128K"), "a skipped context is no row: {:?}", s.decode_rows);
        let mut rows: Vec<u64> = s.decode_rows.iter().map(|(c, _)| *c).collect();
        rows.dedup();
        assert_eq!(rows.len(), s.decode_rows.len(), "each context is one row");
    }
}
