//! Issue 32 — a recorded trace replayed (`--replay FILE`, methodology §13.5): open loop, at each
//! time scale asked for, as a rate level is sent (latency from each request's due time, send lag
//! recorded); a Mooncake trace's prompts keep its blocks, so the server's prefix cache sees the
//! trace's sharing. With `--find-capacity`, a search on the time scale after the scales asked.

use std::sync::Arc;
use std::time::{Duration, Instant};

use sm_client::openai::Prompt;
use sm_core::phases::PhaseKind;
use sm_core::phases::rate::{LevelStatus, RateLevel, RequestRate};
use sm_core::phases::replay::{Next, ReplayLevel, ReplayPhase, ReplaySettings, ScaleVerdict, same_scale};
use sm_core::record::{RunStatus, fnv1a64};
use sm_core::replay::{ReplayFormat, ReplayInput};
use sm_core::requests::{RequestLine, RequestPhase};

use super::bodies::Bodies;
use super::rate::{figures, lines};
use super::send::{Schedule, SentSchedule};
use crate::prompts::blocks::{LEAD, Vocabulary};
use crate::prompts::sizing::{Method, Sizer};
use crate::runner::progress::{RunEvent, Step};
use crate::runner::prompts::Prompts;
use crate::runner::server_lost::Seen;
use crate::runner::{RunError, Runner};

mod prefix;
mod source;
mod trace;

pub use trace::{MAX_REQUESTS, Trace, TraceError};

use source::{Blocks, TraceBodies};

/// The phase's resolved settings.
#[derive(Debug, Clone)]
pub struct ReplayConfig {
    pub trace: Arc<Trace>,
    /// `--time-scale`: the scales to replay at, in the order given, each once.
    pub time_scales: Vec<f64>,
    /// `--find-capacity`: after them, search the largest scale that meets the SLO.
    pub find_capacity: bool,
    pub max_concurrency: Option<u32>,
    pub drain_max: Duration,
}

/// A level measured: its record, its request lines, whether a request lost its connection.
type Measured = (ReplayLevel, Vec<RequestLine>, bool);

impl Runner<'_> {
    /// Replays the trace at every scale not measured yet, then searches (with
    /// `--find-capacity`); writes the record after each level.
    pub(in crate::runner) async fn replay_phase(&mut self, prompts: &Prompts) -> Result<Option<RunStatus>, RunError> {
        let Some(config) = self.settings.phases.replay.clone() else { return Ok(None) };
        self.declare_replay(&config);
        if self.start.retry_failed
            && let Some(phase) = self.record.phases.replay.as_mut()
        {
            phase.levels.retain(|l| l.level.status != LevelStatus::Error);
        }
        let bodies = self.trace_bodies(&config, prompts).await;
        for &scale in &config.time_scales {
            if let Some(status) = self.replay_scale(&config, &bodies, scale, false).await? {
                return Ok(Some(status));
            }
        }
        if !config.find_capacity {
            return Ok(None);
        }
        let first = config.time_scales.first().copied().unwrap_or(1.0);
        while let Some(phase) = &self.record.phases.replay {
            let Next::Measure(scale) = phase.search().next(first) else { break };
            // a scale already run that has no verdict (an error) would be proposed forever
            if phase.levels.iter().any(|l| same_scale(l.time_scale, scale)) {
                break;
            }
            if let Some(status) = self.replay_scale(&config, &bodies, scale, true).await? {
                return Ok(Some(status));
            }
        }
        Ok(None)
    }

    /// Measures one scale unless it was; `Some(status)` when the run cannot go on.
    async fn replay_scale(
        &mut self,
        config: &ReplayConfig,
        bodies: &Result<TraceBodies, String>,
        scale: f64,
        searched: bool,
    ) -> Result<Option<RunStatus>, RunError> {
        if self.halted() {
            return Ok(Some(RunStatus::Interrupted));
        }
        let done = self
            .record
            .phases
            .replay
            .as_ref()
            .is_some_and(|p| p.levels.iter().any(|l| same_scale(l.time_scale, scale)));
        if done {
            return Ok(None);
        }
        let (level, lines, lost) = match bodies {
            Err(why) => (unmeasured(config, scale, searched, LevelStatus::Error, why.clone()), Vec::new(), false),
            Ok(bodies) => match self.replay_level(config, self.level_bodies(bodies, scale), scale, searched).await {
                Some(measured) => measured,
                None => return Ok(Some(RunStatus::Interrupted)),
            },
        };
        let write = |r: &mut Self, lost: bool| {
            r.record_replay_level(if lost { server_lost(level) } else { level })?;
            Ok(r.save_requests(&lines)?)
        };
        self.unit_done(Seen::failures_if(lost), write).await
    }

    /// The phase's section with this run's settings (a resumed run's levels kept).
    pub(in crate::runner) fn declare_replay(&mut self, config: &ReplayConfig) {
        let t = &config.trace;
        let settings = ReplaySettings {
            file: t.info.clone(),
            format: t.format,
            block_tokens: (t.format == ReplayFormat::Mooncake).then(|| t.options.block_tokens()),
            time_scales: config.time_scales.clone(),
            find_capacity: config.find_capacity,
            start_s: t.options.start().as_secs_f64().max(0.0).into(),
            duration_s: t.options.duration().map(|d| d.as_secs_f64()),
            requests: t.requests.len() as u64,
            recorded_span_s: t.span_s(),
            recorded_rps: t.recorded_rps(),
            max_concurrency: config.max_concurrency,
            drain_max_s: config.drain_max.as_secs_f64(),
            max_tokens: self.settings.max_tokens.0,
            kv_block_tokens: self.facts.block_size,
        };
        let settings = ReplaySettings { start_s: settings.start_s.filter(|&s| s > 0.0), ..settings };
        let phase = self.record.phases.replay.get_or_insert_with(|| ReplayPhase {
            settings: settings.clone(),
            levels: Vec::new(),
            capacity: None,
        });
        phase.settings = settings;
    }

    /// Each request's body, made as it comes due; `Err` when a Mooncake trace's prompts cannot be
    /// written on this server (every level then is an error with why).
    async fn trace_bodies(&mut self, config: &ReplayConfig, prompts: &Prompts) -> Result<TraceBodies, String> {
        let blocks = match config.trace.format {
            ReplayFormat::Mooncake => Some(self.blocks(&prompts.sizer).await?),
            ReplayFormat::Messages => None,
        };
        let spec = self.spec(self.settings.max_tokens.0, true);
        Ok(TraceBodies::new(config.trace.clone(), spec, blocks, self.settings.max_tokens.0))
    }

    /// The bodies of the level at `scale`: the trace's, salted by the run and the scale.
    fn level_bodies(&self, bodies: &TraceBodies, scale: f64) -> Bodies {
        let salt = fnv1a64(&[&self.run_id, &scale.to_string()]);
        let salt = u64::from_str_radix(&salt, 16).unwrap_or(1).max(1);
        Bodies::Each(Arc::new(bodies.salted(salt)))
    }

    /// How a Mooncake prompt is written on this server: the words that are one token each, and
    /// the tokens before them (the chat template, the lead). Where lengths are calibrated rather
    /// than counted, every word is taken as one token and the lead from the calibration's fit.
    async fn blocks(&mut self, sizer: &Sizer) -> Result<Blocks, String> {
        let user = |content: &str| Prompt { messages: vec![("user".to_string(), content.to_string())] };
        let why = |e: String| format!("the trace's prompts cannot be written exactly: {e}");
        match sizer.count_prompt(&user(LEAD)).await.map_err(why)? {
            Some(lead_tokens) => {
                let count = async |text: &str| -> Result<u64, String> {
                    sizer.count_prompt(&user(text)).await?.ok_or_else(|| "the server stopped counting".to_string())
                };
                let vocabulary = Vocabulary::calibrate(count).await.map_err(|e| e.to_string())?;
                let tail_tokens = tail_tokens(sizer, &vocabulary, lead_tokens).await;
                Ok(Blocks { vocabulary, lead_tokens, tail_tokens })
            }
            None => {
                let lead_tokens = match sizer.method {
                    Method::Calibrated { a, b } => (a + b * LEAD.len() as f64).round().max(1.0) as u64,
                    _ => 1,
                };
                self.event(RunEvent::Notice(
                    "the server does not count tokens (/tokenize): the replay's prompt lengths are close to the \
                     trace's, not exact (pass --tokenizer for exact lengths)"
                        .into(),
                ));
                Ok(Blocks { vocabulary: Vocabulary::all(), lead_tokens, tail_tokens: 0 })
            }
        }
    }

    /// Sends the trace at `scale` and measures it; `None` when the user stopped it.
    async fn replay_level(
        &mut self,
        config: &ReplayConfig,
        bodies: Bodies,
        scale: f64,
        searched: bool,
    ) -> Option<Measured> {
        let trace = &config.trace;
        let due = trace.due(scale);
        let what = format!("{} at {}×", trace.info.name, scale);
        let length = due.last().map(|&d| Duration::from_secs_f64(d));
        self.reporter.step(&Step::Phase { kind: PhaseKind::Replay, what, started: Instant::now(), length });
        let schedule = Schedule { bodies, due: &due, cap: config.max_concurrency, drain_max: Some(config.drain_max) };
        let sent = match self.send_schedule(schedule).await {
            Ok(Some(sent)) => sent,
            Ok(None) => return None,
            Err(why) => return Some((unmeasured(config, scale, searched, LevelStatus::Error, why), Vec::new(), false)),
        };
        let SentSchedule { start, requests, ranks, reads, cut_after } = sent;
        let key = figures::LevelKey { context: 0, label: trace.info.name.clone(), rate: offered(config, scale) };
        let mut level = figures::level(key, start, &requests, &self.settings.slo);
        level.ranks = ranks;
        level.drain_s = cut_after.map(|d| (d.as_secs_f64() * 1000.0).round() / 1000.0);
        self.level_telemetry(&mut level, reads, &format!("replay at {scale}×"));
        let measured = level.status == LevelStatus::Measured;
        let prefix = measured.then(|| prefix::reuse(&requests, trace, self.facts.block_size));
        let verdict = measured.then(|| {
            let span = level.span_s.unwrap_or(0.0);
            let bounds = self.settings.slo.judge(&figures::request_figures(&requests), span).bounds;
            ScaleVerdict::of(&level, bounds)
        });
        let lost = figures::connection_lost(&requests);
        let mut lines = lines::level_lines(RequestPhase::Replay, 0, &requests, self.t0);
        // a request's context is its own prompt: the trace's input length, or what the server counted
        for (line, request) in lines.iter_mut().zip(&trace.requests) {
            let input = match &request.input {
                ReplayInput::Mooncake(m) => Some(m.input_tokens),
                ReplayInput::Messages(_) => line.prompt_tokens,
            };
            line.context = input.unwrap_or(1).max(1);
        }
        Some((ReplayLevel { time_scale: scale, searched, level, prefix, verdict }, lines, lost))
    }

    fn record_replay_level(&mut self, level: ReplayLevel) -> std::io::Result<()> {
        self.event(RunEvent::ReplayLevelDone { time_scale: level.time_scale, level: Box::new(level.level.clone()) });
        if let Some(phase) = &mut self.record.phases.replay {
            phase.levels.push(level);
            phase.capacity = phase.settings.find_capacity.then(|| phase.capacity_answer());
        }
        self.journal.write(&self.record)
    }
}

/// The tokens a chat template puts after a message's content: a prompt of one word and one of two
/// share their ids up to the first word, then differ; what follows the words is the rest. 0 where
/// the server does not list ids (the ideal then may be a KV block above what a cache can reach).
async fn tail_tokens(sizer: &Sizer, vocabulary: &Vocabulary, lead_tokens: u64) -> u64 {
    let user = |content: String| Prompt { messages: vec![("user".to_string(), content)] };
    let word = vocabulary.first_word();
    let (one, two) = (user(format!("{LEAD} {word}")), user(format!("{LEAD} {word} {word}")));
    let (Some(a), Some(b)) = (sizer.token_ids(&one).await, sizer.token_ids(&two).await) else { return 0 };
    let common = a.iter().zip(&b).take_while(|(x, y)| x == y).count() as u64;
    // the head and the lead, then the one word both have
    let head = common.saturating_sub(1);
    if b.len() as u64 != lead_tokens + 2 || head > lead_tokens {
        return 0;
    }
    lead_tokens - head
}

/// The recorded rate × the scale: what the level offered.
fn offered(config: &ReplayConfig, scale: f64) -> RequestRate {
    let rps = config.trace.recorded_rps().map(|r| r * scale);
    match rps {
        Some(r) if r > 0.0 && r <= sm_core::phases::rate::MAX_RATE => RequestRate::PerSecond(r),
        _ => RequestRate::Inf,
    }
}

fn unmeasured(config: &ReplayConfig, scale: f64, searched: bool, status: LevelStatus, why: String) -> ReplayLevel {
    let level = RateLevel::unmeasured(0, config.trace.info.name.clone(), offered(config, scale), status, why);
    ReplayLevel { time_scale: scale, searched, level, prefix: None, verdict: None }
}

/// A level during which the server went away: an error, as a rate level's is, with no verdict.
fn server_lost(level: ReplayLevel) -> ReplayLevel {
    ReplayLevel { level: super::rate::server_lost(level.level), verdict: None, ..level }
}
