//! Issue 17 §1 open-loop arrivals at a rate (methodology §13.1): for each context (or the
//! `--prompts` file), one level per `--request-rate`, each a schedule of due times drawn up front
//! and sent whatever the server does. A sweep stops after two saturated levels in a row.

use std::sync::Arc;
use std::time::{Duration, Instant};

use sm_client::http::JsonBody;
use sm_core::context::shown;
use sm_core::phases::PhaseKind;
use sm_core::phases::rate::{Arrival, LevelStatus, RateLevel, RatePhase, RateSettings, RequestRate};
use sm_core::plan::Plan;
use sm_core::record::RunStatus;
use sm_core::requests::{RequestLine, RequestPhase};

use super::super::prompts::Prompts;
use super::super::server_lost::{Seen, lost_reason};
use super::super::{RunError, Runner};
use super::send::{Schedule, SentSchedule};
use crate::runner::progress::{RunEvent, Step};
use crate::telemetry::{Reads, Received};

pub(super) mod figures;
pub(super) mod lines;
mod saturation;
mod schedule;

use schedule::{LevelSize, schedule};

/// A level during which the server went away is an error (`--resume --retry-failed` measures it
/// again), its figures kept as measured; it is not judged saturated, since the server's loss, not
/// its load, left requests unanswered, and it has no telemetry.
pub(super) fn server_lost(mut level: RateLevel) -> RateLevel {
    let why = level.reason.take().unwrap_or_else(|| {
        let c = &level.counts;
        format!("{} of {} requests failed", c.failed, c.scheduled)
    });
    level.reason = Some(lost_reason(&why));
    level.status = LevelStatus::Error;
    level.saturated = false;
    level.saturation = None;
    level.telemetry = Default::default();
    level
}

/// The phase's resolved settings.
#[derive(Debug, Clone, PartialEq)]
pub struct RateConfig {
    /// Ascending, `inf` last, without repeats.
    pub rates: Vec<RequestRate>,
    pub arrival: Arrival,
    pub max_concurrency: Option<u32>,
    /// `--requests`: a fixed count per level; `None` makes each level a window of `--duration`.
    pub requests: Option<u64>,
    pub seed: u64,
    /// `--drain-max`: the longest a level waits after its last due time (methodology §13.1).
    pub drain_max: Duration,
}

impl RateConfig {
    /// The seed when `--seed` is not given: fixed, so two runs send the same schedule.
    pub const DEFAULT_SEED: u64 = 17;
    /// `--drain-max` when not given.
    pub const DEFAULT_DRAIN_MAX: Duration = Duration::from_secs(sm_core::phases::rate::DEFAULT_DRAIN_MAX_S as u64);
    /// The most requests one level may schedule.
    pub const MAX_LEVEL_REQUESTS: u64 = schedule::MAX_LEVEL_REQUESTS;

    /// The rates in the order they run: ascending, `inf` last, each once.
    pub fn ordered(mut rates: Vec<RequestRate>) -> Vec<RequestRate> {
        rates.sort_by(|a, b| a.order().total_cmp(&b.order()));
        rates.dedup();
        rates
    }
}

/// One row of the phase: a context's synthetic prompt, or the prompts file.
struct Row {
    context: u64,
    label: String,
    bodies: Result<Arc<[JsonBody]>, String>,
}

impl Runner<'_> {
    /// Runs every level not recorded yet, row by row, rates ascending; writes the record after
    /// each. `Some(status)` when the run cannot go on (stopped, or the server went away).
    pub(in crate::runner) async fn rate_phase(
        &mut self,
        plan: &Plan,
        prompts: &Prompts,
    ) -> Result<Option<RunStatus>, RunError> {
        let Some(config) = self.settings.phases.rate.clone() else { return Ok(None) };
        self.declare_rate(&config);
        // `--resume --retry-failed`: a level that failed is measured again, as a failed cell is
        if self.start.retry_failed
            && let Some(phase) = self.record.phases.rate.as_mut()
        {
            phase.levels.retain(|l| l.status != LevelStatus::Error);
        }
        let size = match config.requests {
            Some(n) => LevelSize::Requests(n),
            None => LevelSize::Window(self.settings.timing.duration.as_secs_f64()),
        };
        for row in self.rate_rows(plan, prompts) {
            for &rate in &config.rates {
                if self.halted() {
                    return Ok(Some(RunStatus::Interrupted));
                }
                if self.rate_levels().iter().any(|l| l.context == row.context && l.rate == rate) {
                    continue;
                }
                let skipped = |why: String| {
                    RateLevel::unmeasured(row.context, row.label.clone(), rate, LevelStatus::Skipped, why)
                };
                let (level, lines, lost) = match (&row.bodies, self.saturated_below(row.context, rate)) {
                    (_, Some(why)) => (skipped(why), Vec::new(), false),
                    (Err(e), None) => (skipped(e.clone()), Vec::new(), false),
                    (Ok(bodies), None) => {
                        let seed = schedule::level_seed(config.seed, row.context, rate);
                        let due = schedule(rate, config.arrival, seed, size);
                        if due.len() as u64 == RateConfig::MAX_LEVEL_REQUESTS && config.requests.is_none() {
                            self.event(RunEvent::RateWindowCut {
                                rate: rate.to_string(),
                                label: row.label.clone(),
                                max: RateConfig::MAX_LEVEL_REQUESTS,
                            });
                        }
                        match self.rate_level(&row, rate, bodies.clone(), &due, &config).await {
                            Some(measured) => measured,
                            None => return Ok(Some(RunStatus::Interrupted)),
                        }
                    }
                };
                // as after a decode cell: a server that went away is waited for (bounded), else the run fails
                let write = |r: &mut Self, lost: bool| {
                    r.record_level(if lost { server_lost(level) } else { level })?;
                    // after run.json: a crash between the two loses the level's lines, never repeats them
                    Ok(r.save_requests(&lines)?)
                };
                if let Some(status) = self.unit_done(Seen::failures_if(lost), write).await? {
                    return Ok(Some(status));
                }
            }
        }
        Ok(None)
    }

    /// The phase's section with this run's settings (a resumed run's levels kept).
    pub(in crate::runner) fn declare_rate(&mut self, config: &RateConfig) -> &RateSettings {
        let settings = self.rate_settings(config);
        let phase =
            self.record.phases.rate.get_or_insert_with(|| RatePhase { settings: settings.clone(), levels: Vec::new() });
        phase.settings = settings;
        &phase.settings
    }

    fn rate_settings(&self, config: &RateConfig) -> RateSettings {
        let window = self.settings.timing.duration;
        RateSettings {
            drain_max_s: config.drain_max.as_secs_f64(),
            rates: config.rates.clone(),
            arrival: config.arrival,
            max_concurrency: config.max_concurrency,
            requests: config.requests,
            window_s: config.requests.is_none().then_some(window.as_secs_f64()),
            seed: config.seed,
            grace_s: None,
            max_tokens: self.settings.max_tokens.0,
        }
    }

    fn rate_levels(&self) -> &[RateLevel] {
        self.record.phases.rate.as_ref().map_or(&[], |p| &p.levels)
    }

    /// Why `rate` is not run: the two levels below it, of this row, were both saturated.
    fn saturated_below(&self, context: u64, rate: RequestRate) -> Option<String> {
        let mut below: Vec<&RateLevel> =
            self.rate_levels().iter().filter(|l| l.context == context && l.rate.order() < rate.order()).collect();
        below.sort_by(|a, b| a.rate.order().total_cmp(&b.rate.order()));
        match below.as_slice() {
            [.., a, b] if a.saturated && b.saturated => Some(format!(
                "not run: the server was already saturated at {} and {} req/s (a sweep stops after two saturated levels)",
                a.rate, b.rate
            )),
            [.., _, b]
                if b.status == LevelStatus::Skipped && b.reason.as_deref().is_some_and(|r| r.contains("saturated")) =>
            {
                b.reason.clone()
            }
            _ => None,
        }
    }

    /// The rows: each runnable context's exact-length prompt, or the `--prompts` file's lines.
    fn rate_rows(&self, plan: &Plan, prompts: &Prompts) -> Vec<Row> {
        if let Some(file) = &self.settings.phases.prompts_file {
            let bodies: Vec<JsonBody> = file
                .prompts
                .iter()
                .map(|p| {
                    let spec = self.spec(p.max_tokens.unwrap_or(self.settings.max_tokens.0), true);
                    JsonBody::new(&spec.body(&p.prompt))
                })
                .collect();
            return vec![Row { context: 0, label: format!("prompts {}", file.info.name), bodies: Ok(bodies.into()) }];
        }
        let mut rows: Vec<Row> = Vec::new();
        for cell in plan.runnable() {
            if rows.iter().any(|r| r.context == cell.context.0) {
                continue;
            }
            let spec = self.spec(self.settings.max_tokens.0, true);
            let bodies =
                prompts.get(cell.context).map(|p| -> Arc<[JsonBody]> { Arc::new([JsonBody::new(&spec.body(&p))]) });
            rows.push(Row { context: cell.context.0, label: shown(&cell.label, cell.context.0), bodies });
        }
        rows
    }

    /// Runs and measures one level: its record, its request lines and whether a request lost its
    /// connection; `None` when the user stopped it.
    async fn rate_level(
        &mut self,
        row: &Row,
        rate: RequestRate,
        bodies: Arc<[JsonBody]>,
        due: &[f64],
        config: &RateConfig,
    ) -> Option<(RateLevel, Vec<RequestLine>, bool)> {
        let what = format!("{} req/s at {}", rate, row.label);
        let length = due.last().map(|&d| Duration::from_secs_f64(d));
        self.reporter.step(&Step::Phase { kind: PhaseKind::Rate, what, started: Instant::now(), length });
        let schedule =
            Schedule { bodies: bodies.into(), due, cap: config.max_concurrency, drain_max: Some(config.drain_max) };
        let sent = match self.send_schedule(schedule).await {
            Ok(Some(sent)) => sent,
            Ok(None) => return None,
            Err(why) => {
                let level = RateLevel::unmeasured(row.context, row.label.clone(), rate, LevelStatus::Error, why);
                return Some((level, Vec::new(), false));
            }
        };
        let SentSchedule { start, requests, ranks, reads, cut_after } = sent;
        let key = figures::LevelKey { context: row.context, label: row.label.clone(), rate };
        let mut measured = figures::level(key, start, &requests, &self.settings.slo);
        measured.ranks = ranks;
        measured.drain_s = cut_after.map(|d| (d.as_secs_f64() * 1000.0).round() / 1000.0);
        self.level_telemetry(&mut measured, reads, &format!("{} req/s at {}", rate, row.label));
        let lost = figures::connection_lost(&requests);
        Some((measured, lines::level_lines(RequestPhase::Rate, row.context, &requests, self.t0), lost))
    }

    /// The server's gauges and the GPUs over a measured level's span (methodology §14).
    pub(super) fn level_telemetry(&self, level: &mut RateLevel, reads: Reads, what: &str) {
        let Some(span) = level.span_s.filter(|_| level.status == LevelStatus::Measured) else { return };
        let tokens = level.output_tok_s.map_or(0, |r| (r * span).round() as u64);
        // as for sessions (methodology §13.4): where a request failed or the client cut one,
        // the server counted and spent energy on tokens the completed requests did not get,
        // so neither the comparison (it would call a fault "another client") nor J/token
        let clean = level.counts.failed == 0 && level.cut() == 0;
        let ours = clean.then_some(Received::All(tokens));
        let (mut telemetry, warnings) =
            reads.figures(Duration::from_secs_f64(span), ours, if clean { tokens } else { 0 });
        // to the decimals a decode cell's are kept to
        telemetry.gpu = telemetry.gpu.map(crate::runner::cell_record::rounded_gpu);
        level.telemetry = telemetry;
        for warning in warnings {
            tracing::warn!("{what}: {warning}");
        }
    }

    fn record_level(&mut self, level: RateLevel) -> std::io::Result<()> {
        self.event(RunEvent::RateLevelDone(Box::new(level.clone())));
        if let Some(phase) = &mut self.record.phases.rate {
            phase.levels.push(level);
        }
        self.journal.write(&self.record)
    }
}
