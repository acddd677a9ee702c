//! Prefill rows (methodology §5): one cold scout per context.

use std::time::Instant;

use sm_client::openai::Prompt;
use sm_core::Tokens;
use sm_core::context::{label, shown};
use sm_core::plan::Plan;
use sm_core::record::{CellStatus, PrefillRow};

use super::{Prompts, Runner, round1, round3};
use crate::progress::Step;
use crate::scout::{ScoutResult, scout};

impl Runner<'_> {
    /// The rows not measured yet, in order. Ctrl-C or `q` lets the row in progress finish (its
    /// request cannot be taken back) and starts no other.
    pub(super) async fn prefill_rows(&mut self, plan: &Plan, prompts: &Prompts) -> std::io::Result<()> {
        let total = plan.prefill.len();
        for (i, p) in plan.prefill.iter().enumerate() {
            if self.halted() {
                break;
            }
            if self.record.prefill.iter().any(|r| r.context == p.context.0) {
                continue;
            }
            match prompts.get(p.context) {
                Ok(prompt) => {
                    let label = shown(&p.label, p.context.0);
                    let step = Step::Prefill { label, index: i + 1, total, started: Instant::now() };
                    self.reporter.step(&step);
                    self.prefill_row(p.context, &prompt).await?;
                }
                Err(e) => self.prefill_error(p.context, e)?,
            }
        }
        Ok(())
    }

    pub(super) async fn prefill_row(&mut self, ctx: Tokens, prompt: &Prompt) -> std::io::Result<()> {
        let spec = self.spec(1, false);
        let body = spec.body(prompt);
        self.event(format!("prefill {} started", shown(&self.prefill_label(ctx), ctx.0)));
        let counted = self.record.prompts.iter().find(|p| p.context == ctx.0).and_then(|p| p.tokens);
        let (mut row, note) = match scout(&self.client, spec.path(), &body, self.config.timing.ready_timeout).await {
            Ok(s) => scouted_row(ctx, &s, counted),
            Err(e) => (error_row(ctx, e), None),
        };
        row.label = self.prefill_label(ctx);
        self.reporter.prefill_done(&row);
        let named = shown(&row.label, row.context);
        self.event(match (&row.status, row.prompt_tok_s) {
            (CellStatus::Valid, Some(tps)) => format!(
                "prefill {named} done: {tps:.0} prompt tok/s, TTFT {:.0} ms{}",
                row.ttft_ms.unwrap_or(0.0),
                note.map(|n| format!(" ({n})")).unwrap_or_default()
            ),
            _ => format!("prefill {named} failed: {}", row.reason.clone().unwrap_or_default()),
        });
        self.record.prefill.push(row);
        self.journal.write(&self.record)
    }

    /// The plan's label of a prefill context: what the user asked for (methodology §3.1).
    fn prefill_label(&self, ctx: Tokens) -> String {
        let planned = self.record.plan.iter().find(|p| p.kind == "prefill" && p.context == ctx.0);
        planned.map_or_else(|| label(ctx), |p| p.label.clone())
    }

    pub(super) fn prefill_error(&mut self, ctx: Tokens, reason: String) -> std::io::Result<()> {
        let mut row = error_row(ctx, reason);
        row.label = self.prefill_label(ctx);
        self.reporter.prefill_done(&row);
        self.record.prefill.push(row);
        self.journal.write(&self.record)
    }
}

/// The row of a scout that answered, and a note on where its prompt tokens came from. A server that
/// sends no usage still gets an exact row when sizing counted the prompt (`counted`); without either
/// count there is no rate to report, and the row says why instead of showing a blank.
fn scouted_row(ctx: Tokens, s: &ScoutResult, counted: Option<u64>) -> (PrefillRow, Option<String>) {
    let (prompt_tokens, note) = match (s.prompt_tokens, counted) {
        (Some(t), _) => (t, None),
        (None, Some(t)) => (t, Some("the server sent no usage: prompt tokens as counted when sizing the prompt")),
        (None, None) => {
            let why =
                "the server reported no prompt token count (no usage in the stream), so the prompt rate is unknown";
            return (error_row(ctx, why.into()), None);
        }
    };
    let secs = s.ttft.as_secs_f64();
    if secs <= 0.0 {
        return (error_row(ctx, "the first token arrived with no measurable delay".into()), None);
    }
    let row = PrefillRow {
        context: ctx.0,
        label: label(ctx),
        prompt_tokens: Some(prompt_tokens),
        ttft_ms: Some(round3(s.ttft_ms())),
        prompt_tok_s: Some(round1(prompt_tokens as f64 / secs)),
        cached_tokens: s.cached_tokens,
        status: CellStatus::Valid,
        reason: None,
    };
    (row, note.map(str::to_string))
}

pub(super) fn error_row(ctx: Tokens, reason: String) -> PrefillRow {
    PrefillRow {
        context: ctx.0,
        label: label(ctx),
        prompt_tokens: None,
        ttft_ms: None,
        prompt_tok_s: None,
        cached_tokens: None,
        status: CellStatus::Error,
        reason: Some(reason),
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    fn scouted(prompt_tokens: Option<u64>) -> ScoutResult {
        ScoutResult { ttft: Duration::from_millis(100), prompt_tokens, cached_tokens: None, reports_usage: false }
    }

    #[test]
    fn a_scout_without_usage_uses_the_sized_count_or_says_why_not() {
        let (row, note) = scouted_row(Tokens(1024), &scouted(Some(1000)), Some(1024));
        assert_eq!((row.prompt_tokens, row.prompt_tok_s, note), (Some(1000), Some(10_000.0), None));
        let (row, note) = scouted_row(Tokens(1024), &scouted(None), Some(1024));
        assert_eq!((row.status, row.prompt_tok_s), (CellStatus::Valid, Some(10_240.0)));
        assert!(note.unwrap().contains("no usage"));
        let (row, _) = scouted_row(Tokens(1024), &scouted(None), None);
        assert_eq!((row.status, row.prompt_tok_s), (CellStatus::Error, None));
        assert!(row.reason.unwrap().contains("no prompt token count"));
    }
}
