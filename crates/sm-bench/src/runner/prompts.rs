//! Every prompt of a run, sized and hashed before anything is written or sent to be measured: a
//! resume whose prompts differ from the recorded ones is refused with its directory untouched.

use std::sync::Arc;

use sm_client::openai::Prompt;
use sm_core::Tokens;
use sm_core::context::label;
use sm_core::plan::Plan;
use sm_core::record::{Api, PromptInfo, fnv1a64};

use super::Runner;
use crate::prompts::prompt::{self, MEASURED};
use crate::prompts::sizing::Sizer;
use crate::runner::progress::Step;

/// The sizer and the prompt of each context, or why that context has none.
pub(super) struct Prompts {
    pub sizer: Sizer,
    by_context: Vec<(Tokens, Result<Arc<Prompt>, String>)>,
    /// Contexts whose prompt an earlier session of this run recorded, and so may have sent.
    recorded_before: Vec<Tokens>,
}

impl Prompts {
    pub(super) fn get(&self, ctx: Tokens) -> Result<Arc<Prompt>, String> {
        match self.by_context.iter().find(|(c, _)| *c == ctx) {
            Some((_, p)) => p.clone(),
            None => Err(format!("no prompt was made for context {}", label(ctx))),
        }
    }

    /// Whether the server may have seen this context's prompt before (an earlier session of a
    /// resumed run recorded it): then its prefix cache may hold it.
    pub(super) fn maybe_sent(&self, ctx: Tokens) -> bool {
        self.recorded_before.contains(&ctx)
    }
}

impl Runner<'_> {
    /// Sizes the prompt of every context the plan measures and records its hash. Also returns one
    /// line per context whose prompt differs from the one recorded by the run being resumed: a
    /// resumed run must send the same prompts, or its cells would not compare. `Err` when no
    /// prompt can be sized at all.
    pub(super) async fn prepare_prompts(&mut self, plan: &Plan) -> Result<(Prompts, Vec<String>), String> {
        let contexts = contexts(plan);
        self.reporter.step(&Step::Sizing);
        let smallest = contexts.first().map_or(1024, |c| c.0);
        let local = self.start.tokenizer.clone();
        let mut sizer = Sizer::new(
            &self.client,
            &self.facts,
            (self.settings.api, self.settings.reasoning),
            &self.run_id,
            smallest,
            local,
        )
        .await?;
        // with --tools the question asks for a call; sized with it, so the length stays exact
        sizer.invite =
            self.settings.tools.as_ref().filter(|_| self.settings.api == Api::Chat).map(|t| t.info.invitation());
        let mut by_context = Vec::new();
        let mut diffs = Vec::new();
        let mut recorded_before = Vec::new();
        for ctx in contexts {
            let sized = match sizer.size(&prompt::tag(&self.run_id, MEASURED, ctx.0), ctx.0).await {
                Ok(sized) => sized,
                Err(e) => {
                    by_context.push((ctx, Err(e)));
                    continue;
                }
            };
            let texts: Vec<&str> = sized.prompt.messages.iter().flat_map(|(r, c)| [r.as_str(), c.as_str()]).collect();
            let info = PromptInfo { context: ctx.0, tokens: sized.counted, hash: fnv1a64(&texts) };
            match self.record.prompts.iter().find(|p| p.context == ctx.0) {
                Some(old) if old.hash != info.hash => diffs.push(format!(
                    "the prompt of context {} is different now (the server's tokenizer or chat template changed)",
                    label(ctx)
                )),
                Some(_) => recorded_before.push(ctx),
                None => self.record.prompts.push(info),
            }
            by_context.push((ctx, Ok(Arc::new(sized.prompt))));
        }
        Ok((Prompts { sizer, by_context, recorded_before }, diffs))
    }
}

/// Every context that needs a prompt: the prefill rows' and the runnable cells', smallest first.
fn contexts(plan: &Plan) -> Vec<Tokens> {
    let mut all: Vec<Tokens> =
        plan.prefill.iter().map(|p| p.context).chain(plan.runnable().map(|c| c.context)).collect();
    all.sort();
    all.dedup();
    all
}
