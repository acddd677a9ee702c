//! Issue 17 §3 a new user under load (mixed prefill, methodology §13.3): for each `CTX@BG` level,
//! the fresh prompt's TTFT on the idle server, then BG background streams of the run's decode
//! prompt and, once they decode steadily, the same-size fresh prompt sent a few times into them.

use std::sync::Arc;
use std::time::{Duration, Instant};

use sm_client::JsonBody;
use sm_client::openai::Prompt;
use sm_core::Tokens;
use sm_core::context::label;
use sm_core::phases::PhaseKind;
use sm_core::phases::mixed::{IdleReference, IdleSource, MixedLevel, MixedPrefillPhase, MixedProbe, slowdown};
use sm_core::plan::Plan;
use sm_core::record::{CellStatus, RunStatus};
use sm_core::requests::{RequestLine, RequestPhase};

use super::super::prefill::cold_limit;
use super::super::prompts::Prompts;
use super::super::server_lost::{Seen, lost_reason};
use super::super::{RunError, Runner, round1, round3};
use crate::cell::server::{IDLE_FOR, drain};
use crate::prompts::prompt;
use crate::runner::progress::{RunEvent, Step};
use crate::runner::requests::CellRequests;
use crate::runner::requests::{self, LineCell, PrefillRequest};
use crate::stream::scout::{ScoutResult, scout};
use crate::telemetry::Reads;

mod background;
pub(crate) mod figures;

use background::Background;
use figures::{ProbeTimes, figures_known, probe_figures, recent_rate};

/// The resolved `--mixed-prefill` settings.
#[derive(Debug, Clone, PartialEq)]
pub struct MixedPrefillConfig {
    /// The `CTX@BG` levels, in the order given.
    pub levels: Vec<MixedLevelSpec>,
    /// Fresh prompts sent per level (`--mixed-prefill-probes`).
    pub probes: u32,
    /// The before and after intervals (`--mixed-prefill-window`).
    pub window: Duration,
}

/// One `CTX@BG` pair.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MixedLevelSpec {
    pub prompt_context: Tokens,
    pub background: u32,
}

/// A probe waits for the background's rate to come back to this share of the level's first
/// before-rate (methodology §13.3)…
const RECOVERED: f64 = 0.9;
/// …for at most this many windows; a probe sent without it says `steady: false`.
const RECOVERY_WINDOWS: u32 = 5;

impl Runner<'_> {
    pub(in crate::runner) async fn mixed_prefill_phase(
        &mut self,
        _plan: &Plan,
        prompts: &Prompts,
    ) -> Result<Option<RunStatus>, RunError> {
        let Some(config) = self.settings.phases.mixed_prefill.clone() else { return Ok(None) };
        // new in every session: a probe measured again must not meet the prompt of an earlier try
        let salt = super::super::run_id();
        if self.start.retry_failed {
            self.mixed_levels().iter_mut().for_each(forget_failed);
        }
        for (i, spec) in config.levels.iter().enumerate() {
            if self.halted() {
                return Ok(Some(RunStatus::Interrupted));
            }
            let index = self.mixed_level_index(spec, &config);
            if self.mixed_levels()[index].finished() {
                continue;
            }
            let end = self.mixed_level(index, i as u32, prompts, &config, &salt).await?;
            let seen = Seen::failures_if(end.failure.is_some());
            if let Some(status) = self.unit_done(seen, |r, lost| r.end_mixed_level(index, end, lost)).await? {
                return Ok(Some(status));
            }
            if self.facts.metrics_available && !self.halted() {
                let _ = drain(&self.target(), self.settings.timing.drain_timeout, IDLE_FOR).await;
            }
        }
        Ok(self.halted().then_some(RunStatus::Interrupted))
    }

    /// Writes the end of a level's session: its error (marked when the server was `lost`, which
    /// ends a level that had none), then its background requests' lines.
    fn end_mixed_level(&mut self, index: usize, end: LevelEnd, lost: bool) -> Result<(), RunError> {
        let error = match (end.error, end.failure) {
            (error, Some(failure)) if lost => Some(lost_reason(error.as_deref().unwrap_or(&failure))),
            (error, _) => error,
        };
        if let Some(reason) = error {
            let level = level_name(&self.mixed_levels()[index]);
            self.event(RunEvent::MixedPrefillFailed { level, what: "the level".into(), reason: reason.clone() });
            let level = &mut self.mixed_levels()[index];
            level.error = Some(reason);
            // a span through the server's loss says nothing of the level
            level.telemetry = Default::default();
        }
        self.journal.write(&self.record)?;
        // after run.json: a crash between the two loses the lines, never repeats them
        Ok(self.save_requests(&end.lines)?)
    }

    /// The phase's section with a level per `CTX@BG` (a resumed run's probes kept).
    pub(in crate::runner) fn declare_mixed_prefill(&mut self, config: &MixedPrefillConfig) {
        for spec in &config.levels {
            self.mixed_level_index(spec, config);
        }
    }

    fn mixed_levels(&mut self) -> &mut Vec<MixedLevel> {
        &mut self.record.phases.mixed_prefill.get_or_insert_with(MixedPrefillPhase::default).levels
    }

    /// The level's place in the record: the one a resumed run recorded, else a new one.
    fn mixed_level_index(&mut self, spec: &MixedLevelSpec, config: &MixedPrefillConfig) -> usize {
        let background_context = self.settings.contexts.first().map_or(0, |c| c.0);
        let background_max_tokens = self.settings.max_tokens.0;
        let levels = self.mixed_levels();
        let same = |l: &MixedLevel| l.prompt_context == spec.prompt_context.0 && l.background == spec.background;
        if let Some(i) = levels.iter().position(same) {
            return i;
        }
        levels.push(MixedLevel {
            prompt_context: spec.prompt_context.0,
            background: spec.background,
            background_context,
            background_max_tokens,
            window_s: config.window.as_secs_f64(),
            probes_planned: config.probes,
            idle: None,
            probes: Vec::new(),
            ttft_ms_median: None,
            slowdown: None,
            error: None,
            telemetry: Default::default(),
        });
        levels.len() - 1
    }

    /// Measures what the level still needs, and says how that ended; the caller writes it.
    async fn mixed_level(
        &mut self,
        index: usize,
        nth: u32,
        prompts: &Prompts,
        config: &MixedPrefillConfig,
        salt: &str,
    ) -> Result<LevelEnd, RunError> {
        let level = self.mixed_levels()[index].clone();
        let ctx = Tokens(level.prompt_context);
        let prepared = match self.mixed_prompts(&level, nth, prompts, salt).await {
            Ok(p) => p,
            Err(e) => return Ok(LevelEnd::failed(e)),
        };
        if level.idle.is_none() {
            let idle = self.idle_reference(ctx, level_name(&level), &prepared.idle).await?;
            let level = &mut self.mixed_levels()[index];
            level.idle = idle;
            level.summarise();
            self.journal.write(&self.record)?;
        }
        if self.halted() {
            return Ok(LevelEnd::default());
        }
        // re-warm the prefix cache with the background prompt, as before a decode cell
        let warm = self.spec(1, false);
        if let Err(e) =
            scout(&self.client, warm.path(), &warm.body(&prepared.background), self.settings.timing.ready_timeout).await
        {
            return Ok(LevelEnd::failed(format!("the cache-warming scout failed: {e}")));
        }
        let spec = self.spec(self.settings.max_tokens.0, true);
        let body = JsonBody::new(&spec.body(&prepared.background));
        let timeouts = self.settings.timing.stream_timeouts();
        // the level's span: the background's start through every probe to its stop (methodology §14)
        let target = self.target();
        let origin = Instant::now();
        let mut sampling = self.sources(&target).start(origin);
        sampling.first_taken().await;
        let bg = Background::start(&self.target(), spec.path(), &body, level.background, timeouts);
        let outcome = self.probes(index, &bg, &prepared.probes, config.window).await;
        let background_failure = bg.recorder.failure();
        let fault_since = bg.recorder.fault_since();
        let logs = bg.stop().await;
        let reads = sampling.stop().await;
        // a level resumed after some probes would have only this session's span: none then
        let whole = level.probes.is_empty() && outcome.as_ref().is_ok_and(|o| o.is_ok());
        if whole && !self.halted() {
            self.mixed_telemetry(index, &reads, origin.elapsed());
        }
        let cell = LineCell {
            phase: RequestPhase::MixedPrefill,
            context: level.background_context,
            concurrency: level.background,
            repeat: None,
            searched: false,
        };
        let lines = requests::cell_lines(cell, &CellRequests { logs, window: None, per_chunk: None }, self.t0);
        // a stream that failed after the last probe's check is the level's error all the same
        let error = outcome?.err().or(background_failure.clone());
        if let Some(since) = fault_since {
            self.fault_in_probes(index, level.probes.len(), since, config.window);
        }
        // what failed first: the level, a background stream, else one of this session's probes
        let probe_failure =
            self.mixed_levels()[index].probes[level.probes.len()..].iter().find_map(|p| p.error.clone());
        let failure = error.clone().or(background_failure).or(probe_failure);
        Ok(LevelEnd { error, failure, lines })
    }

    /// This session's probes whose span (a window before the send to a window after the first
    /// token) reaches the instant a failed background stream fell silent: their figures measured
    /// that fault, not the prefill's cost, so each is an error and the level's median leaves it out.
    fn fault_in_probes(&mut self, index: usize, from: usize, since: Instant, window: Duration) {
        let since_s = since.saturating_duration_since(self.t0).as_secs_f64();
        let level = &mut self.mixed_levels()[index];
        let name = level_name(level);
        let mut faulted = Vec::new();
        for (n, p) in level.probes.iter_mut().enumerate().skip(from) {
            let Some(ttft_ms) = p.ttft_ms.filter(|_| p.error.is_none()) else { continue };
            if p.sent_s + ttft_ms / 1000.0 + window.as_secs_f64() > since_s {
                let reason = format!(
                    "a background stream fell silent {:+.2} s from this probe's send and then failed (the level's \
                     error says why): its figures would count that fault as the prefill's cost",
                    since_s - p.sent_s
                );
                p.error = Some(reason.clone());
                faulted.push((n + 1, reason));
            }
        }
        level.summarise();
        for (n, reason) in faulted {
            self.event(RunEvent::MixedPrefillFailed { level: name.clone(), what: format!("probe {n}"), reason });
        }
    }

    /// The level's telemetry over `span`: no J/token and no tok/s comparison, since its energy and
    /// tokens mix the background's decode with the probes' prefills.
    fn mixed_telemetry(&mut self, index: usize, reads: &Reads, span: Duration) {
        let (mut telemetry, warnings) = reads.figures(span, None, 0);
        // to the decimals a decode cell's are kept to
        telemetry.gpu = telemetry.gpu.map(crate::runner::cell_record::rounded_gpu);
        let level = &mut self.mixed_levels()[index];
        for warning in warnings {
            tracing::warn!("mixed prefill {}: {warning}", level_name(level));
        }
        level.telemetry = telemetry;
    }

    /// The background prompt and one fresh prompt per probe still to measure (plus the idle one),
    /// sized before anything runs: sizing may ask the server, which must not run under load then.
    async fn mixed_prompts(
        &self,
        level: &MixedLevel,
        nth: u32,
        prompts: &Prompts,
        salt: &str,
    ) -> Result<MixedPrompts, String> {
        let ctx = level.prompt_context;
        if let Some(max) = self.facts.max_model_len.filter(|&m| ctx >= m) {
            return Err(format!(
                "a fresh prompt of {} tokens does not fit the server's max_model_len of {max} (with its one output token): ask for a smaller CTX",
                label(Tokens(ctx))
            ));
        }
        let background =
            prompts.get(Tokens(level.background_context)).map_err(|e| format!("no background prompt: {e}"))?;
        let left = level.probes_planned.saturating_sub(level.probes.len() as u32);
        let mut sized = Vec::new();
        for k in 0..=left {
            // levels ≤ 16 and probes ≤ 20 (+ the idle one): four digits hold both
            let tag = prompt::mixed_tag(&self.run_id, salt, nth * 100 + k, ctx);
            let s = prompts
                .sizer
                .size(&tag, ctx)
                .await
                .map_err(|e| format!("cannot make a fresh prompt of {ctx} tokens: {e}"))?;
            sized.push((Arc::new(s.prompt), s.counted));
        }
        let idle = sized.remove(0);
        Ok(MixedPrompts { background, idle, probes: sized })
    }

    /// The fresh prompt's TTFT on the idle server: the run's valid prefill row at CTX where there
    /// is one, else one cold request now.
    async fn idle_reference(
        &mut self,
        ctx: Tokens,
        name: String,
        (prompt, counted): &(Arc<Prompt>, Option<u64>),
    ) -> Result<Option<IdleReference>, RunError> {
        let row = self.record.prefill.iter().find(|r| r.context == ctx.0 && r.status == CellStatus::Valid);
        if let Some(ttft_ms) = row.and_then(|r| r.ttft_ms) {
            let row = row.expect("found above");
            let (prompt_tokens, cached_tokens) = (row.prompt_tokens, row.cached_tokens);
            return Ok(Some(IdleReference { ttft_ms, prompt_tokens, cached_tokens, source: IdleSource::PrefillRow }));
        }
        let what = format!("idle reference: a fresh {} prompt alone", label(ctx));
        let step = Step::Phase { kind: PhaseKind::MixedPrefill, what, started: Instant::now(), length: None };
        self.reporter.step(&step);
        let (scouted, line) = self.fresh_request(ctx, prompt).await;
        self.save_requests(&[line])?;
        Ok(match cold(scouted, *counted, cold_limit(self.facts.block_size)) {
            Ok((s, prompt_tokens)) => Some(IdleReference {
                ttft_ms: round3(s.ttft_ms()),
                prompt_tokens,
                cached_tokens: s.cached_tokens,
                source: IdleSource::Measured,
            }),
            Err(reason) => {
                self.event(RunEvent::MixedPrefillFailed { level: name, what: "the idle reference".into(), reason });
                None
            }
        })
    }

    /// One fresh prompt with `max_tokens: 1`, and its `requests.jsonl` line.
    async fn fresh_request(
        &self,
        ctx: Tokens,
        prompt: &Prompt,
    ) -> (Result<ScoutResult, String>, sm_core::requests::RequestLine) {
        let spec = self.spec(1, false);
        let asked = Instant::now();
        let scouted = scout(&self.client, spec.path(), &spec.body(prompt), self.settings.timing.ready_timeout).await;
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
        let mut line = requests::prefill_line(ctx.0, request, self.t0);
        line.phase = RequestPhase::MixedPrefill;
        (scouted, line)
    }

    /// Waits for steady decode, then sends the probes. `Err` (inside) when the level cannot go on.
    async fn probes(
        &mut self,
        index: usize,
        bg: &Background,
        probes: &[(Arc<Prompt>, Option<u64>)],
        window: Duration,
    ) -> Result<Result<(), String>, RunError> {
        let level = self.mixed_levels()[index].clone();
        if let Err(e) = self.steady(bg, level.background).await {
            return Ok(Err(e));
        }
        let mut baseline = level.probes.iter().find_map(|p| p.before_tok_s);
        for (k, (prompt, counted)) in probes.iter().enumerate() {
            if self.halted() {
                return Ok(Ok(()));
            }
            // the first probe of a session follows the ramp; a later one waits for the rate to recover
            let steady = k == 0 || self.recovered(bg, baseline, window).await;
            tokio::time::sleep(window).await;
            // Ctrl-C meanwhile: no probe after it (nor one called unsteady because the wait was cut)
            if self.stopped() {
                return Ok(Ok(()));
            }
            if let Some(e) = bg.recorder.failure() {
                return Ok(Err(e));
            }
            let n = self.mixed_levels()[index].probes.len() + 1;
            let what = format!(
                "probe {n}/{}: a fresh {} prompt under {} streams",
                level.probes_planned,
                label(Tokens(level.prompt_context)),
                level.background
            );
            let step = Step::Phase { kind: PhaseKind::MixedPrefill, what, started: Instant::now(), length: None };
            self.reporter.step(&step);
            let (scouted, line) = self.fresh_request(Tokens(level.prompt_context), prompt).await;
            if let Ok(s) = &scouted {
                // the after interval and the timeline's last bin must have happened before the figures are taken
                let times = ProbeTimes { sent: s.times.sent, first_token: s.times.first_token };
                tokio::time::sleep_until(figures_known(times, window).into()).await;
            }
            let mut probe = self.probe_record(scouted, *counted, bg, window, steady);
            probe.slowdown = slowdown(probe.ttft_ms, level.idle.as_ref());
            baseline = baseline.or(probe.before_tok_s);
            self.probe_event(&level, n, &probe);
            let level = &mut self.mixed_levels()[index];
            level.probes.push(probe);
            level.summarise();
            self.journal.write(&self.record)?;
            self.save_requests(&[line])?;
        }
        Ok(Ok(()))
    }

    fn probe_event(&mut self, level: &MixedLevel, probe: usize, p: &MixedProbe) {
        let name = level_name(level);
        self.event(match (&p.error, p.ttft_ms) {
            (None, Some(ttft_ms)) => RunEvent::MixedProbeDone {
                level: name,
                probe,
                ttft_ms,
                slowdown: p.slowdown,
                before_tok_s: p.before_tok_s,
                during_tok_s: p.during_tok_s,
                stall_ms: p.longest_stall_ms,
            },
            (error, _) => RunEvent::MixedPrefillFailed {
                level: name,
                what: format!("probe {probe}"),
                reason: error.clone().unwrap_or_else(|| "no first token".into()),
            },
        });
    }

    /// Waits until every background stream has its first token, then `--ready-stable`. Ctrl-C
    /// ends the wait with no error: the client cut the level, the server did not fail it, and the
    /// probes' loop sees the stop (a resume measures the level).
    async fn steady(&self, bg: &Background, streams: u32) -> Result<(), String> {
        let deadline = Instant::now() + self.settings.timing.ready_timeout;
        while bg.recorder.streaming() < streams as usize {
            if let Some(e) = bg.recorder.failure() {
                return Err(e);
            }
            if self.stopped() {
                return Ok(());
            }
            if Instant::now() > deadline {
                return Err(format!(
                    "only {} of {streams} background streams had a first token after {:.0} s",
                    bg.recorder.streaming(),
                    self.settings.timing.ready_timeout.as_secs_f64()
                ));
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        tokio::time::sleep(self.settings.timing.ready_stable).await;
        Ok(())
    }

    /// Polls until the background's rate over the last window is back to [`RECOVERED`] of
    /// `baseline`; `false` when it was not within [`RECOVERY_WINDOWS`] windows.
    async fn recovered(&self, bg: &Background, baseline: Option<f64>, window: Duration) -> bool {
        let Some(baseline) = baseline else { return true };
        let deadline = Instant::now() + window * RECOVERY_WINDOWS;
        loop {
            let rate = recent_rate(&bg.recorder.snapshot(), Instant::now(), window).unwrap_or(0.0);
            if rate >= RECOVERED * baseline {
                return true;
            }
            if Instant::now() > deadline || self.stopped() {
                return false;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    fn probe_record(
        &self,
        scouted: Result<ScoutResult, String>,
        counted: Option<u64>,
        bg: &Background,
        window: Duration,
        steady: bool,
    ) -> MixedProbe {
        let sent = scouted.as_ref().map_or_else(|_| Instant::now(), |s| s.times.sent);
        let mut probe = MixedProbe {
            sent_s: round3(sent.saturating_duration_since(self.t0).as_secs_f64()),
            ttft_ms: None,
            prompt_tokens: None,
            cached_tokens: None,
            slowdown: None,
            before_tok_s: None,
            during_tok_s: None,
            after_tok_s: None,
            longest_stall_ms: None,
            steady,
            timeline: None,
            error: None,
        };
        let (s, prompt_tokens) = match cold(scouted, counted, cold_limit(self.facts.block_size)) {
            Ok(ok) => ok,
            Err(e) => return MixedProbe { error: Some(e), ..probe },
        };
        let f = probe_figures(
            &bg.recorder.snapshot(),
            ProbeTimes { sent: s.times.sent, first_token: s.times.first_token },
            window,
        );
        probe.ttft_ms = Some(round3(s.ttft_ms()));
        probe.prompt_tokens = prompt_tokens;
        probe.cached_tokens = s.cached_tokens;
        probe.before_tok_s = f.before_tok_s.map(round1);
        probe.during_tok_s = f.during_tok_s.map(round1);
        probe.after_tok_s = f.after_tok_s.map(round1);
        probe.longest_stall_ms = f.longest_stall.map(|d| round3(d.as_secs_f64() * 1000.0));
        probe.timeline = Some(f.timeline);
        probe
    }
}

/// How a level's session ended.
#[derive(Default)]
struct LevelEnd {
    /// Why the level could not go on.
    error: Option<String>,
    /// The first failure the session saw (the level's error, a background stream's, a probe's):
    /// the server may have gone away.
    failure: Option<String>,
    /// The background requests' `requests.jsonl` lines.
    lines: Vec<RequestLine>,
}

impl LevelEnd {
    fn failed(reason: String) -> LevelEnd {
        LevelEnd { failure: Some(reason.clone()), error: Some(reason), lines: Vec::new() }
    }
}

/// `--resume --retry-failed`: a level's error and its failed probes are forgotten, so that the
/// level is measured again from its valid probes on (with its own background, as any resumed level).
fn forget_failed(level: &mut MixedLevel) {
    if level.error.take().is_some() || level.probes.iter().any(|p| p.error.is_some()) {
        level.probes.retain(|p| p.error.is_none());
        level.summarise();
        // a level measured in parts has no telemetry (its span would miss the parts before)
        level.telemetry = Default::default();
    }
}

/// `12K@4`, as events name a level.
fn level_name(l: &MixedLevel) -> String {
    format!("{}@{}", label(Tokens(l.prompt_context)), l.background)
}

struct MixedPrompts {
    background: Arc<Prompt>,
    idle: (Arc<Prompt>, Option<u64>),
    probes: Vec<(Arc<Prompt>, Option<u64>)>,
}

/// A fresh request that answered from compute, with its prompt tokens (the server's, else as
/// sized); `Err` says why it is not a cold prefill (methodology §5's limit on cached tokens).
fn cold(
    scouted: Result<ScoutResult, String>,
    counted: Option<u64>,
    limit: u64,
) -> Result<(ScoutResult, Option<u64>), String> {
    let s = scouted?;
    if let Some(cached) = s.cached_tokens.filter(|&c| c > limit) {
        return Err(format!(
            "not a cold prefill: the server answered {cached} tokens from its prefix cache (more than {limit})"
        ));
    }
    let tokens = s.prompt_tokens.or(counted);
    Ok((s, tokens))
}
