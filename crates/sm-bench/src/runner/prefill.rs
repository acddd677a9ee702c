//! Prefill rows (methodology §5): one cold scout per context.

use std::sync::Arc;
use std::time::Instant;

use sm_client::openai::Prompt;
use sm_core::Tokens;
use sm_core::context::{label, shown};
use sm_core::plan::Plan;
use sm_core::record::{CellStatus, PrefillRow};

use super::{Prompts, Runner, round1, round3};
use crate::prompts::prompt;
use crate::runner::progress::{RunEvent, Step};
use crate::runner::requests::{self, PrefillRequest};
use crate::stream::scout::{ScoutResult, scout};

impl Runner<'_> {
    /// The rows not measured yet, in order. Ctrl-C or `q` lets the row in progress finish (its
    /// request cannot be taken back) and starts no other.
    pub(super) async fn prefill_rows(&mut self, plan: &Plan, prompts: &Prompts) -> std::io::Result<()> {
        let total = plan.prefill.len();
        // new in every session: a row measured again must not meet the prompt of an earlier try
        let salt = super::run_id();
        for (i, p) in plan.prefill.iter().enumerate() {
            if self.halted() {
                break;
            }
            if self.record.prefill.iter().any(|r| r.context == p.context.0) {
                continue;
            }
            match self.cold_prompt(p.context, prompts, &salt).await {
                Ok((prompt, counted)) => {
                    let label = shown(&p.label, p.context.0);
                    let step =
                        Step::Prefill { context: p.context.0, label, index: i + 1, total, started: Instant::now() };
                    self.reporter.step(&step);
                    self.prefill_row(p.context, &prompt, counted).await?;
                }
                Err(e) => self.prefill_error(p.context, e)?,
            }
        }
        Ok(())
    }

    /// A prompt the server cannot have cached, and its token count where sizing counted it: the
    /// context's measured prompt in the session that sized it, before anything else sent it;
    /// in a later session (`--resume`) a prompt of its own, because the measured prompt may have
    /// been sent (a failed row, its decode cells, a process killed mid-row).
    async fn cold_prompt(
        &self,
        ctx: Tokens,
        prompts: &Prompts,
        salt: &str,
    ) -> Result<(Arc<Prompt>, Option<u64>), String> {
        if !prompts.maybe_sent(ctx) {
            let counted = self.record.prompts.iter().find(|p| p.context == ctx.0).and_then(|p| p.tokens);
            return Ok((prompts.get(ctx)?, counted));
        }
        let sized = prompts.sizer.size(&prompt::remeasure_tag(&self.run_id, salt, ctx.0), ctx.0).await?;
        Ok((Arc::new(sized.prompt), sized.counted))
    }

    pub(super) async fn prefill_row(
        &mut self,
        ctx: Tokens,
        prompt: &Prompt,
        counted: Option<u64>,
    ) -> std::io::Result<()> {
        let spec = self.spec(1, false);
        let body = spec.body(prompt);
        self.event(RunEvent::PrefillStarted { row: shown(&self.prefill_label(ctx), ctx.0) });
        let limit = cold_limit(self.facts.block_size);
        let target = self.target();
        let mut sampling = self.sources(&target).start(Instant::now());
        sampling.first_taken().await;
        let asked = Instant::now();
        let scouted = scout(&self.client, spec.path(), &body, self.settings.timing.ready_timeout).await;
        let span = asked.elapsed();
        let reads = sampling.stop().await;
        let request = match &scouted {
            Ok(s) => PrefillRequest::Answered {
                times: s.times,
                id: s.id.as_deref(),
                output_tokens: s.completion_tokens.unwrap_or(s.chunks),
                prompt_tokens: s.prompt_tokens,
                cached_tokens: s.cached_tokens,
            },
            Err(reason) => PrefillRequest::Failed { asked, reason },
        };
        let line = requests::prefill_line(ctx.0, request, self.t0);
        let (mut row, note) = match scouted {
            Ok(s) => scouted_row(ctx, &s, counted, limit),
            Err(e) => (error_row(ctx, e), None),
        };
        row.label = self.prefill_label(ctx);
        // no J/token: the row's energy is a prefill's, not an answer's (methodology §14.3)
        if row.status == CellStatus::Valid {
            let (mut telemetry, warnings) = reads.figures(span, None, 0);
            // to the decimals a decode cell's are kept to
            telemetry.gpu = telemetry.gpu.map(super::cell_record::rounded_gpu);
            row.telemetry = telemetry;
            for warning in warnings {
                tracing::warn!("prefill row {}: {warning}", shown(&row.label, row.context));
            }
        }
        self.reporter.prefill_done(&row);
        let named = shown(&row.label, row.context);
        self.event(match (&row.status, row.prompt_tok_s) {
            (CellStatus::Valid, Some(prompt_tok_s)) => {
                RunEvent::PrefillDone { row: named, prompt_tok_s, ttft_ms: row.ttft_ms.unwrap_or(0.0), note }
            }
            _ => RunEvent::PrefillFailed { row: named, reason: row.reason.clone().unwrap_or_default() },
        });
        self.record.prefill.push(row);
        self.journal.write(&self.record)?;
        self.save_requests(&[line])
    }

    /// The plan's label of a prefill context: what the user asked for (methodology §3.1).
    fn prefill_label(&self, ctx: Tokens) -> String {
        let planned =
            self.record.plan.iter().find(|p| p.kind == sm_core::record::PlanKind::Prefill && p.context == ctx.0);
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
fn scouted_row(ctx: Tokens, s: &ScoutResult, counted: Option<u64>, cold_limit: u64) -> (PrefillRow, Option<String>) {
    if let Some(cached) = s.cached_tokens.filter(|&c| c > cold_limit) {
        let of = s.prompt_tokens.map(|p| format!(" of the prompt's {p}")).unwrap_or_default();
        let why = format!(
            "not a cold prefill: the server answered {cached}{of} tokens from its prefix cache (more than {cold_limit}); `run --resume DIR --retry-failed` measures the row again with a new prompt"
        );
        return (error_row(ctx, why), None);
    }
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
        telemetry: Default::default(),
    };
    (row, note.map(str::to_string))
}

/// Every prompt of a run starts with the same chat-template opening and `[sm RUNID `, which a
/// server that caches in small blocks (or single tokens) may answer from its cache even for a
/// prompt it never saw. Up to this many cached tokens, or one KV block where blocks are larger,
/// a row is still cold (methodology §5).
pub const COLD_SLACK_TOKENS: u64 = 64;

/// The most cached tokens a cold prefill row may report.
pub fn cold_limit(block_size: Option<u64>) -> u64 {
    block_size.unwrap_or(0).max(COLD_SLACK_TOKENS)
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
        telemetry: Default::default(),
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    fn scouted(prompt_tokens: Option<u64>) -> ScoutResult {
        ScoutResult {
            ttft: Duration::from_millis(100),
            prompt_tokens,
            cached_tokens: None,
            reports_usage: false,
            chunks: 1,
            completion_tokens: None,
            id: None,
            times: crate::stream::scout::ScoutTimes {
                sent: std::time::Instant::now(),
                first_token: std::time::Instant::now(),
                last_token: std::time::Instant::now(),
                ended: None,
            },
        }
    }

    #[test]
    fn a_scout_without_usage_uses_the_sized_count_or_says_why_not() {
        let (row, note) = scouted_row(Tokens(1024), &scouted(Some(1000)), Some(1024), 64);
        assert_eq!((row.prompt_tokens, row.prompt_tok_s, note), (Some(1000), Some(10_000.0), None));
        let (row, note) = scouted_row(Tokens(1024), &scouted(None), Some(1024), 64);
        assert_eq!((row.status, row.prompt_tok_s), (CellStatus::Valid, Some(10_240.0)));
        assert!(note.unwrap().contains("no usage"));
        let (row, _) = scouted_row(Tokens(1024), &scouted(None), None, 64);
        assert_eq!((row.status, row.prompt_tok_s), (CellStatus::Error, None));
        assert!(row.reason.unwrap().contains("no prompt token count"));
    }

    #[test]
    fn a_row_served_from_the_prefix_cache_is_not_valid() {
        let with_cached = |cached| ScoutResult { cached_tokens: Some(cached), ..scouted(Some(1024)) };
        let (row, _) = scouted_row(Tokens(1024), &with_cached(0), None, cold_limit(Some(16)));
        assert_eq!((row.status, row.cached_tokens), (CellStatus::Valid, Some(0)));
        // the run's shared opening, cached in small blocks, is not a warm prompt
        let (row, _) = scouted_row(Tokens(1024), &with_cached(32), None, cold_limit(Some(16)));
        assert_eq!(row.status, CellStatus::Valid);
        let (row, _) = scouted_row(Tokens(1024), &with_cached(1008), None, cold_limit(Some(16)));
        assert_eq!((row.status, row.prompt_tok_s), (CellStatus::Error, None));
        assert!(row.reason.unwrap().contains("answered 1008 of the prompt's 1024 tokens from its prefix cache"));
        // one block of 256 is allowed; a token more is not
        assert_eq!(
            scouted_row(Tokens(1024), &with_cached(256), None, cold_limit(Some(256))).0.status,
            CellStatus::Valid
        );
        assert_eq!(
            scouted_row(Tokens(1024), &with_cached(257), None, cold_limit(Some(256))).0.status,
            CellStatus::Error
        );
    }
}
