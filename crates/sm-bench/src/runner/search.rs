//! `--find-capacity` (methodology §11.4): after the matrix, each context's capacity is pinned down
//! by measuring the levels [`sm_core::answer::next_level`] picks, each a normal decode cell.
//! The levels are chosen from the cells already in the record, so a resumed search continues
//! where it stopped and measures nothing twice.

use sm_core::Tokens;
use sm_core::answer::{Level, bracket, fit_limit, level, next_level};
use sm_core::capacity::kv_need;
use sm_core::plan::{Cell, Plan};
use sm_core::record::RunStatus;

use super::{Prompts, RunError, Runner};
use crate::runner::progress::RunEvent;

impl Runner<'_> {
    pub(super) async fn find_capacity(&mut self, plan: &Plan, prompts: &Prompts) -> Result<RunStatus, RunError> {
        let top = self.settings.concurrency.iter().copied().max().unwrap_or(1);
        let limits = self.record.limits();
        for row in &plan.rows {
            let Some(ctx) = row.fit.context() else { continue };
            let label = sm_core::context::label(row.requested);
            let fit = fit_limit(self.settings.rule, &limits, ctx, self.settings.max_tokens);
            loop {
                if self.halted() {
                    return Ok(RunStatus::Interrupted);
                }
                let levels = self.levels(ctx);
                let Some(concurrency) = next_level(&levels, fit, top) else { break };
                let b = bracket(&levels);
                let stop = b.stop.filter(|(_, l)| matches!(l, Level::Fail(_))).map(|(c, _)| c);
                self.event(RunEvent::CapacitySearch { label: label.clone(), concurrency, pass: b.pass, stop });
                let cell = Cell {
                    context: ctx,
                    label: label.clone(),
                    concurrency,
                    over_capacity: None,
                    kv_need: kv_need(self.settings.rule, ctx, self.settings.max_tokens, concurrency, limits.block_size),
                };
                if let Some(status) = self.measure_cell(&cell, prompts, true).await? {
                    return Ok(status);
                }
            }
        }
        Ok(RunStatus::Complete)
    }

    fn levels(&self, ctx: Tokens) -> Vec<(u32, Level)> {
        self.record.decode.iter().filter(|c| c.context == ctx.0).map(|c| (c.concurrency, level(c))).collect()
    }
}
