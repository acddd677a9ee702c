//! A whole run, in the order of methodology §1: plan, warm up, prefill rows,
//! the decode matrix; the record is written after every step.

use std::sync::Arc;
use std::time::{Duration, Instant};

use sm_client::Client;
use sm_client::discover::ServerFacts;
use sm_client::openai::{Prompt, RequestSpec};
use sm_core::Tokens;
use sm_core::answer;
use sm_core::capacity::Limits;
use sm_core::context::shown;
use sm_core::plan::{Cell, Plan, PlanInput};
use sm_core::record::{CellStatus, DecodeCell, Event, PromptSource, RunRecord, RunStatus, SCHEMA, Tool, now_rfc3339};
use sm_core::requests::{RequestLine, RequestPhase};

use crate::cell::server::Target;
use crate::cell::verdict::CellOutcome;
use crate::cell::{CellSpec, CellTiming, run_cell};
use crate::runner::journal::Journal;
use crate::runner::progress::{Controls, Reporter, RunEvent, Scrubbed, Step};
use crate::runner::requests::{LineCell, RequestsFile};
use crate::stream::scout::scout;

mod cell_record;
pub(crate) mod journal;
pub(crate) mod phases;
mod prefill;
pub(crate) mod progress;
mod prompts;
mod repeats;
pub(crate) mod requests;
pub(crate) mod resume;
mod runnable;
mod search;
mod server_lost;
pub(crate) mod settings;
mod warmup;

use cell_record::{decode_cell, precision_verdict, round1, round3};
pub use phases::{
    BurstConfig, MAX_REPLAY_REQUESTS, MixedLevelSpec, MixedPrefillConfig, PhaseConfig, RateConfig, ReplayConfig,
    SessionsConfig, Trace, TraceError,
};
use prompts::Prompts;
use server_lost::{Seen, lost_reason};
pub use settings::{
    DEFAULT_MAX_TOKENS, DEFAULT_MIN_DURATION, DEFAULT_SERVER_WAIT, DEFAULT_WARMUP, RecordedSettingsError, RunSettings,
    RunStart, ToolSet,
};

#[derive(Debug, thiserror::Error)]
pub enum RunError {
    #[error("cannot write the results: {0}")]
    Io(#[from] std::io::Error),
    #[error(
        "cannot resume: this run differs from the one in the directory:\n  - {}\nTo start fresh, run without --resume (or with another --out).",
        .0.join("\n  - ")
    )]
    Mismatch(Vec<String>),
    #[error("refused before sending anything: nothing asked for could be measured in\n  - {}", .0.join("\n  - "))]
    NothingToRun(Vec<String>),
    #[error(transparent)]
    Secret(#[from] sm_core::secrets::ScrubError),
}

struct Runner<'a> {
    client: Client,
    facts: ServerFacts,
    settings: RunSettings,
    start: RunStart,
    journal: Journal,
    reporter: &'a dyn Reporter,
    record: RunRecord,
    t0: Instant,
    run_id: String,
    controls: Controls,
    /// Why the warm-up failed, until the first measured cell carries it as a warning.
    warmup_warning: Option<String>,
    /// `requests.jsonl`, with `--save-requests`.
    requests: Option<RequestsFile>,
}

/// Runs the matrix. Returns the final record (also written to the journal), secrets scrubbed.
pub async fn run(
    client: Client,
    facts: ServerFacts,
    settings: RunSettings,
    mut start: RunStart,
    journal: Journal,
    reporter: &dyn Reporter,
    controls: Controls,
) -> Result<RunRecord, RunError> {
    for secret in &start.secrets {
        sm_core::secrets::register(secret);
    }
    let scrubbed = Scrubbed(reporter);
    let reporter: &dyn Reporter = &scrubbed;
    // one client for every stream of the run, cell or load phase, and so one way to cancel
    let client = client.with_abort_on_cancel(facts.abort_request);
    let plan = Plan::build(&plan_input(&settings, &facts));
    if !start.dry_run {
        let asked = runnable::Asked {
            phases: &settings.phases,
            api: settings.api,
            max_model_len: facts.max_model_len,
            max_tokens: settings.max_tokens,
        };
        let why = runnable::nothing_to_run(&plan, &asked);
        if !why.is_empty() {
            return Err(RunError::NothingToRun(why));
        }
    }
    let fresh = skeleton(&client, &facts, &settings, &start, &plan);
    let mut retried = None;
    let (mut record, run_id, mut diffs) = match start.resume.take() {
        Some(mut old) => {
            let diffs = resume::differences(&old, &fresh);
            // another model makes other prompts: sizing them would only repeat that line
            if old.server.model != fresh.server.model {
                return Err(RunError::Mismatch(diffs));
            }
            let id = old.run_id.clone().unwrap_or_else(run_id);
            if start.retry_failed {
                retried = Some(resume::forget_failed(&mut old));
            }
            (resume::continue_from(old, fresh), id, diffs)
        }
        None => (fresh, run_id(), Vec::new()),
    };
    record.run_id = Some(run_id.clone());
    let t0 = Instant::now() - Duration::from_secs_f64(record.events.last().map_or(0.0, |e| e.t));
    let mut r = Runner {
        client,
        facts,
        settings,
        start,
        journal,
        reporter,
        record,
        t0,
        run_id,
        controls,
        warmup_warning: None,
        requests: None,
    };
    r.declare_phases();
    r.reporter.start(&r.record);
    if r.start.dry_run {
        r.journal.write(&r.record)?;
        return Ok(sm_core::secrets::scrubbed(&r.record)?);
    }
    // Nothing is written and no request is measured before the prompts are compared: a refused
    // resume leaves the directory as it was.
    let prompts = r.prepare_prompts(&plan).await;
    if let Ok((_, changed)) = &prompts {
        diffs.extend(changed.iter().cloned());
    }
    if !diffs.is_empty() {
        return Err(RunError::Mismatch(diffs));
    }
    if r.settings.save_requests {
        // a new run starts the file afresh; a resumed one adds to it
        r.requests = Some(RequestsFile::open(r.journal.dir(), r.record.events.is_empty())?);
    }
    r.record.status = RunStatus::Running;
    if r.record.events.is_empty() {
        r.event(RunEvent::RunStarted);
    } else {
        r.event(RunEvent::RunResumed);
        if let Some((cells, rows)) = retried {
            r.event(RunEvent::Retrying { cells, rows });
        }
    }
    r.journal.write(&r.record)?;
    let status = r.measure(&plan, prompts.map(|(p, _)| p)).await?;
    r.record.status = status;
    r.record.finished = Some(now_rfc3339());
    r.event(RunEvent::RunEnded(status));
    r.journal.write(&r.record)?;
    r.reporter.finish(&r.record);
    Ok(sm_core::secrets::scrubbed(&r.record)?)
}

fn plan_input(settings: &RunSettings, facts: &ServerFacts) -> PlanInput {
    PlanInput {
        contexts: settings.contexts.clone(),
        concurrency: settings.concurrency.clone(),
        max_tokens: settings.max_tokens,
        prefill_contexts: settings.prefill_contexts.clone(),
        prefill_at_max: settings.prefill_at_max,
        max_model_len: facts.max_model_len.map(Tokens),
        limits: Limits {
            kv_budget: facts.kv_budget.map(Tokens),
            block_size: facts.block_size,
            max_num_seqs: facts.max_num_seqs,
        },
        rule: settings.rule,
    }
}

fn skeleton(client: &Client, facts: &ServerFacts, settings: &RunSettings, start: &RunStart, plan: &Plan) -> RunRecord {
    let decode = plan
        .cells
        .iter()
        .filter(|_| settings.phases.matrix)
        .filter_map(|c| c.over_capacity.as_ref().map(|reason| over_capacity_cell(c, reason)))
        .collect();
    RunRecord {
        schema: SCHEMA.to_string(),
        tool: Tool {
            name: "speedmatrix".into(),
            version: start.tool_version.clone(),
            commit: option_env!("SPEEDMATRIX_COMMIT").map(str::to_string),
            client_threads: crate::cell::health::client_threads(),
        },
        status: RunStatus::Planned,
        started: now_rfc3339(),
        finished: None,
        label: settings.label.clone(),
        // one builder for the server facts, so what methodology says is kept (block size,
        // where max_num_seqs came from) is kept
        server: facts.server_info(client.base()),
        // what sizing will use; confirmed (or corrected) once prompts are sized
        settings: settings.recorded(
            plan,
            match (&facts.tokenize, &start.tokenizer) {
                (sm_client::discover::TokenizeApi::None, None) => PromptSource::UsageCalibration,
                (sm_client::discover::TokenizeApi::None, Some(_)) => PromptSource::TokenizerFile,
                _ => PromptSource::ServerTokenize,
            },
        ),
        hardware: start.hardware.clone(),
        launch_command: start.launch_command.clone(),
        server_gpus: start.server_gpus,
        plan: plan.to_record(),
        prefill: Vec::new(),
        decode,
        events: Vec::new(),
        run_id: None,
        prompts: Vec::new(),
        capacity: Vec::new(),
        phases: Default::default(),
    }
}

fn over_capacity_cell(c: &Cell, reason: &str) -> DecodeCell {
    DecodeCell {
        context: c.context.0,
        label: c.label.clone(),
        concurrency: c.concurrency,
        status: Some(CellStatus::OverCapacity),
        reason: Some(reason.to_string()),
        kv_need_tokens: Some(c.kv_need.0),
        ..DecodeCell::default()
    }
}

/// Eight lowercase letters, different for every run, so prompts of two runs
/// never share a cached prefix.
fn run_id() -> String {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u128(std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos()));
    let mut v = h.finish();
    (0..8)
        .map(|_| {
            let c = (b'a' + (v % 26) as u8) as char;
            v /= 26;
            c
        })
        .collect()
}

impl Runner<'_> {
    /// Tells the listener (scrubbed by [`Scrubbed`]) and keeps the event's line in the record.
    fn event(&mut self, event: RunEvent) {
        let text = sm_core::secrets::scrub(&event.to_string()).into_owned();
        tracing::info!("{text}");
        self.reporter.event(&event);
        let t = self.t0.elapsed().as_secs_f64();
        self.record.events.push(Event { t: (t * 1000.0).round() / 1000.0, text });
    }

    fn stopped(&self) -> bool {
        self.controls.stopped()
    }

    fn spec(&self, max_tokens: u64, continuous_usage: bool) -> RequestSpec {
        RequestSpec {
            api: self.settings.api,
            model: self.facts.model.clone(),
            max_tokens,
            stream: true,
            ignore_eos: self.settings.ignore_eos,
            continuous_usage,
            temperature: self.settings.temperature,
            reasoning: self.settings.reasoning,
            tools: self.settings.tools.as_ref().map(|t| t.definitions.clone()),
        }
    }

    fn target(&self) -> Target {
        Target { client: self.client.clone(), engine: self.facts.engine, metrics: self.facts.metrics_available }
    }

    /// What a prefill row or a load phase samples through its span (methodology §14).
    fn sources<'t>(&'t self, target: &'t Target) -> crate::telemetry::Sources<'t> {
        crate::telemetry::Sources {
            target,
            interval: self.settings.timing.metrics_interval,
            gpu: self.start.gpu.as_ref(),
        }
    }

    /// Ctrl-C (`stop_now`) or `q` (`finish_after_cell`): no new row, warm-up or cell starts.
    fn halted(&self) -> bool {
        self.controls.stopped() || self.controls.finishing()
    }

    async fn measure(&mut self, plan: &Plan, prompts: Result<Prompts, String>) -> Result<RunStatus, RunError> {
        let prompts = match prompts {
            Ok(p) => p,
            Err(e) => {
                self.event(RunEvent::SizingFailed { reason: e });
                return Ok(RunStatus::Failed);
            }
        };
        let source = prompts.sizer.method.source();
        self.record.settings.prompt_source = source;
        self.event(RunEvent::PromptsSizedBy(source));
        for note in &prompts.sizer.notes {
            self.event(RunEvent::SizingNote(note.clone()));
        }
        self.reporter.step(&Step::Warmup);
        self.warm_up().await;
        // the prefill rows belong to the matrix's page; a phase measures the idle references it needs
        if self.settings.phases.matrix {
            self.prefill_rows(plan, &prompts).await?;
        }
        if self.halted() {
            return Ok(RunStatus::Interrupted);
        }
        if self.settings.phases.matrix
            && let Some(status) = self.matrix(plan, &prompts).await?
        {
            return Ok(status);
        }
        Ok(self.phases(plan, &prompts).await?.unwrap_or(RunStatus::Complete))
    }

    /// The hidden warm-up, the decode matrix and the capacity search. `Some(status)` when the run
    /// cannot go on to the phases.
    async fn matrix(&mut self, plan: &Plan, prompts: &Prompts) -> Result<Option<RunStatus>, RunError> {
        if let Some(window) = self.settings.warmup {
            self.reporter.step(&Step::Warmup);
            self.hidden_warmup(plan, &prompts.sizer, window).await?;
        }
        let status = self.decode_cells(plan, prompts).await?;
        if status != RunStatus::Complete {
            return Ok(Some(status));
        }
        if !self.settings.find_capacity {
            return Ok(None);
        }
        match self.find_capacity(plan, prompts).await? {
            RunStatus::Complete => Ok(None),
            status => Ok(Some(status)),
        }
    }

    /// The matrix, once per `--repeats` pass: interleaved, so that a drift shows between repeats.
    async fn decode_cells(&mut self, plan: &Plan, prompts: &Prompts) -> Result<RunStatus, RunError> {
        for pass in 1..=self.settings.repeats.max(1) {
            for cell in plan.runnable() {
                if self.halted() {
                    return Ok(RunStatus::Interrupted);
                }
                if !repeats::wanted(self.record.decode_cell(cell.context.0, cell.concurrency), pass) {
                    continue;
                }
                if let Some(status) = self.measure_cell(cell, prompts, false).await? {
                    return Ok(status);
                }
            }
        }
        Ok(RunStatus::Complete)
    }

    /// Measures one decode cell and writes it. `Some(status)` when the run cannot go on: the user
    /// stopped it, or the server went away and did not come back.
    async fn measure_cell(
        &mut self,
        cell: &Cell,
        prompts: &Prompts,
        searched: bool,
    ) -> Result<Option<RunStatus>, RunError> {
        // which measurement of the cell this is, under --repeats (a searched level is measured once)
        let repeat = (self.settings.repeats > 1 && !searched)
            .then(|| self.record.decode_cell(cell.context.0, cell.concurrency).map_or(1, |c| repeats::measured(c) + 1));
        let mut outcome = match prompts.get(cell.context) {
            Ok(prompt) => self.decode_cell(cell, &prompt, self.settings.timing, true).await,
            Err(e) => CellOutcome::failed(CellStatus::Error, e),
        };
        if self.stopped() {
            // the cell in progress was dropped: it is measured again on resume
            return Ok(Some(RunStatus::Interrupted));
        }
        // the cell's own check after a broken stream has already found the server gone
        let seen = match outcome.status {
            _ if outcome.server_lost => Seen::Gone,
            CellStatus::Error => Seen::Failures,
            _ => Seen::Fine,
        };
        let lines = LineCell {
            phase: RequestPhase::Decode,
            context: cell.context.0,
            concurrency: cell.concurrency,
            repeat,
            searched,
        };
        let write = |r: &mut Self, lost: bool| {
            if lost && !outcome.server_lost {
                outcome.reason = Some(lost_reason(outcome.reason.as_deref().unwrap_or_default()));
                outcome.server_lost = true;
            }
            Ok(r.finish_cell(cell, outcome, lines)?)
        };
        if let Some(status) = self.unit_done(seen, write).await? {
            return Ok(Some(status));
        }
        // with metrics the drain barrier has proved the server idle: a fixed gap would add nothing
        if !self.facts.metrics_available {
            tokio::time::sleep(self.settings.idle_gap).await;
        }
        Ok(None)
    }

    async fn decode_cell(&mut self, cell: &Cell, prompt: &Prompt, timing: CellTiming, ranked: bool) -> CellOutcome {
        // read before the scout: an `s` pressed during the scout or the drain skips this cell
        let skip_seen = *self.controls.skip_cell.borrow();
        self.reporter.step(&Step::Scout {
            context: cell.context.0,
            label: cell.label.clone(),
            concurrency: cell.concurrency,
        });
        let scout_spec = self.spec(1, false);
        let scouted = match scout(&self.client, scout_spec.path(), &scout_spec.body(prompt), timing.ready_timeout).await
        {
            Ok(s) => s,
            Err(e) => return CellOutcome::failed(CellStatus::Error, format!("the cache-warming scout failed: {e}")),
        };
        let spec = self.spec(self.settings.max_tokens.0, true);
        let body = Arc::new(spec.body(prompt));
        self.event(RunEvent::CellStarted { cell: shown(&cell.label, cell.context.0), concurrency: cell.concurrency });
        let target = self.target();
        let cell_spec = CellSpec {
            target: &target,
            path: spec.path(),
            body,
            context: cell.context.0,
            label: cell.label.clone(),
            concurrency: cell.concurrency,
            timing,
            usage_at_end: scouted.reports_usage,
            skip_seen,
            gpu: self.start.gpu.clone(),
            ranks: self.start.ranks.as_deref().filter(|_| ranked),
        };
        run_cell(cell_spec, self.reporter, &self.controls).await
    }

    fn finish_cell(&mut self, cell: &Cell, mut outcome: CellOutcome, lines: LineCell) -> std::io::Result<()> {
        let searched = lines.searched;
        let requests = outcome.requests.take();
        let mut dc = decode_cell(cell, outcome, &self.settings.slo, self.settings.cost_per_hour);
        if let Some(p) = self.settings.timing.precision {
            precision_verdict(&mut dc, p.pct, self.settings.timing.duration);
        }
        dc.searched = searched;
        dc.warnings.extend(self.take_warmup_warning());
        self.event(match dc.status() {
            CellStatus::Valid => RunEvent::CellDone {
                label: dc.label.clone(),
                concurrency: dc.concurrency,
                total_tok_s: dc.total_tok_s.unwrap_or(0.0),
                per_request_tok_s: dc.per_request_tok_s.unwrap_or(0.0),
                ttft_ms: dc.ttft_ms.p50.unwrap_or(0.0),
            },
            status => RunEvent::CellEnded {
                label: dc.label.clone(),
                concurrency: dc.concurrency,
                status,
                reason: dc.reason.clone().unwrap_or_default(),
            },
        });
        let existing = self
            .record
            .decode
            .iter_mut()
            .find(|c| c.context == dc.context && c.concurrency == dc.concurrency && !searched);
        match existing {
            Some(cell) => {
                repeats::merge(cell, &dc, &self.settings.slo, self.settings.cost_per_hour);
                self.reporter.cell_done(cell);
            }
            None => {
                self.reporter.cell_done(&dc);
                self.record.decode.push(dc);
            }
        }
        self.record.capacity = answer::capacities(&self.record);
        self.journal.write(&self.record)?;
        // after run.json: a crash between the two loses the cell's lines, never repeats them
        match requests {
            Some(r) => self.save_requests(&requests::cell_lines(lines, &r, self.t0)),
            None => Ok(()),
        }
    }

    /// Appends lines to `requests.jsonl` (with `--save-requests`; else nothing).
    fn save_requests(&mut self, lines: &[RequestLine]) -> std::io::Result<()> {
        match &mut self.requests {
            Some(file) if !lines.is_empty() => file.append(lines),
            _ => Ok(()),
        }
    }
}
