//! What a run is asked to do, in one shape. The binary resolves it once (flags over a resumed
//! run's settings over the demo's over [`RunSettings::default`]) and nothing changes it after; the
//! record's `settings` section is this shape written down ([`RunSettings::recorded`]), and a resume
//! reads it back ([`RunSettings::from_record`]) to lay the flags over it. What is not a setting —
//! the server, its facts, the live handles (tokenizer, GPU reader, ranks) — comes beside it in
//! [`RunStart`].

use std::sync::Arc;
use std::time::Duration;

use sm_client::openai::Reasoning;
use sm_core::Tokens;
use sm_core::capacity::CapacityRule;
use sm_core::plan::Plan;
use sm_core::record::{Api, Hardware, PlanKind, PromptSource, RunRecord, Settings, TimingSettings};
use sm_core::slo::Slo;

use crate::cell::{CellTiming, Precision};
use crate::prompts::tokenizer::LocalTokenizer;
use crate::runner::phases::PhaseConfig;

/// The output tokens each request asks for when nobody says otherwise.
pub const DEFAULT_MAX_TOKENS: Tokens = Tokens(4096);
/// The hidden warm-up cell's window.
pub const DEFAULT_WARMUP: Duration = Duration::from_secs(3);
/// How long a server that stopped responding is waited for.
pub const DEFAULT_SERVER_WAIT: Duration = Duration::from_secs(300);
/// The shortest window of `--precision` when `--min-duration` is not given.
pub const DEFAULT_MIN_DURATION: Duration = Duration::from_secs(5);
/// The published matrix's contexts (KiB of tokens) and concurrency levels.
const DEFAULT_CONTEXTS_K: [u64; 6] = [8, 16, 32, 64, 128, 256];
const DEFAULT_CONCURRENCY: [u32; 8] = [1, 2, 4, 8, 16, 32, 64, 128];

/// Everything a run is asked to do. "Off" is `None` (no warm-up, no series of the server's
/// gauges, no adaptive windows), never a zero.
#[derive(Debug, Clone)]
pub struct RunSettings {
    /// The contexts as asked (256K), planned against the server's `max_model_len` when it runs.
    pub contexts: Vec<Tokens>,
    pub concurrency: Vec<u32>,
    pub max_tokens: Tokens,
    /// Extra prefill rows, as asked.
    pub prefill_contexts: Vec<Tokens>,
    /// A prefill row at the model's longest prompt is added (not again on resume: the recorded
    /// rows include it).
    pub prefill_at_max: bool,
    pub api: Api,
    pub rule: CapacityRule,
    /// The window and the waits of a cell, `--precision` and `--metrics-interval` with them.
    pub timing: CellTiming,
    /// Window of the hidden C=1 warm-up cell.
    pub warmup: Option<Duration>,
    /// How long to wait for a server that stopped responding before the run fails.
    pub server_wait: Duration,
    /// The pause between two cells.
    pub idle_gap: Duration,
    pub ignore_eos: bool,
    pub temperature: Option<f64>,
    /// `--thinking`, `--reasoning-effort`: sent on every request, and used to count its prompt.
    pub reasoning: Reasoning,
    /// Free text, already redacted.
    pub label: Option<String>,
    /// The service level every valid decode cell is judged against.
    pub slo: Slo,
    /// `--cost-per-hour`: USD per hour for the whole server.
    pub cost_per_hour: Option<f64>,
    /// `--find-capacity`: after the matrix, measure the levels that pin the capacity down.
    pub find_capacity: bool,
    /// `--repeats`: each cell is measured this many times, in interleaved passes over the matrix.
    pub repeats: u32,
    /// `--save-requests`: a line per measured request in `requests.jsonl` beside `run.json`.
    pub save_requests: bool,
    /// Whether the decode matrix runs, and the load phases asked for (issue 17).
    pub phases: PhaseConfig,
    /// `--gpu-metrics` as run.json records it, for a resume to read the same source.
    pub gpu_metrics: Option<String>,
    /// `--tools FILE.json`: sent with every chat request, and their prompts invite a call.
    pub tools: Option<ToolSet>,
}

/// `--tools FILE.json` (methodology §7.3.1): the definitions every chat request carries, and what
/// the record keeps of the file (a resume reads the file again and checks it is the same).
#[derive(Debug, Clone, PartialEq)]
pub struct ToolSet {
    pub definitions: Arc<serde_json::Value>,
    pub info: sm_core::tools::ToolsInfo,
}

impl Default for RunSettings {
    /// The published matrix: 8K…256K × 1…128, 30 s windows, 4,096 output tokens.
    fn default() -> Self {
        RunSettings {
            contexts: DEFAULT_CONTEXTS_K.iter().map(|k| Tokens(k * 1024)).collect(),
            concurrency: DEFAULT_CONCURRENCY.to_vec(),
            max_tokens: DEFAULT_MAX_TOKENS,
            prefill_contexts: Vec::new(),
            prefill_at_max: true,
            api: Api::Chat,
            rule: CapacityRule::Reference,
            timing: CellTiming::default(),
            warmup: Some(DEFAULT_WARMUP),
            server_wait: DEFAULT_SERVER_WAIT,
            idle_gap: crate::runner::progress::IDLE_GAP,
            ignore_eos: true,
            temperature: None,
            reasoning: Reasoning::default(),
            label: None,
            slo: Slo::default(),
            cost_per_hour: None,
            find_capacity: false,
            repeats: 1,
            save_requests: false,
            phases: PhaseConfig::default(),
            gpu_metrics: None,
            tools: None,
        }
    }
}

/// Why a recorded `settings` section cannot be run again.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum RecordedSettingsError {
    #[error("it has no valid window ({0} s); pass --duration")]
    Window(f64),
}

impl RunSettings {
    /// The record's `settings` section for a run of `plan` whose prompts are sized by
    /// `prompt_source`: the contexts as planned (257,984, not 256K).
    pub fn recorded(&self, plan: &Plan, prompt_source: PromptSource) -> Settings {
        let secs = |d: Duration| Some(d.as_secs_f64());
        let t = &self.timing;
        Settings {
            contexts: plan.rows.iter().filter_map(|r| r.fit.context()).map(|t| t.0).collect(),
            concurrency: self.concurrency.clone(),
            duration_s: t.duration.as_secs_f64(),
            max_tokens: self.max_tokens.0,
            prefill_contexts: plan.prefill.iter().map(|p| p.context.0).collect(),
            capacity_rule: self.rule,
            api: self.api,
            prompt_source,
            ignore_eos: self.ignore_eos,
            temperature: self.temperature,
            thinking: self.reasoning.thinking,
            reasoning_effort: self.reasoning.effort,
            // run.json writes "off" as 0 s, as it always has
            timing: TimingSettings {
                warmup_s: secs(self.warmup.unwrap_or(Duration::ZERO)),
                ready_stable_s: secs(t.ready_stable),
                ready_timeout_s: secs(t.ready_timeout),
                stall_timeout_s: secs(t.idle_timeout),
                server_wait_s: secs(self.server_wait),
                metrics_interval_s: secs(t.metrics_interval.unwrap_or(Duration::ZERO)),
            },
            slo: Some(self.slo.clone()),
            cost_per_hour_usd: self.cost_per_hour,
            find_capacity: self.find_capacity,
            precision_pct: t.precision.map(|p| p.pct),
            min_duration_s: t.precision.map(|p| p.min_duration.as_secs_f64()),
            repeats: (self.repeats > 1).then_some(self.repeats),
            save_requests: self.save_requests,
            prompts_file: self.phases.prompts_file.as_ref().map(|f| f.info.clone()),
            matrix: self.phases.matrix,
            model_shape: None,
            gpu_metrics: self.gpu_metrics.clone(),
            tools: self.tools.as_ref().map(|t| t.info.clone()),
        }
    }

    /// The settings an interrupted run recorded, over `defaults` where it recorded none (a record
    /// written before a setting was kept). Its matrix is planned again from what its user asked
    /// for (256K, not the 257,984 it was fitted to), so rows keep their names; its prefill rows
    /// already include the one at the maximum, so that row is not added again. The load phases
    /// are resolved apart, from the phases' own sections.
    pub fn from_record(old: &RunRecord, defaults: RunSettings) -> Result<RunSettings, RecordedSettingsError> {
        let s = &old.settings;
        let mml = old.server.max_model_len.map(Tokens);
        let asked = |kind, list: &[u64], out| {
            list.iter().map(|&c| sm_core::plan::planned_request(&old.plan, kind, c, out, mml)).collect::<Vec<_>>()
        };
        let duration =
            Duration::try_from_secs_f64(s.duration_s).map_err(|_| RecordedSettingsError::Window(s.duration_s))?;
        let secs = |v: Option<f64>| v.and_then(|s| Duration::try_from_secs_f64(s).ok());
        let on = |d: Duration| Some(d).filter(|d| !d.is_zero());
        let t = &s.timing;
        let d = defaults;
        let timing = CellTiming {
            duration,
            ready_stable: secs(t.ready_stable_s).unwrap_or(d.timing.ready_stable),
            ready_timeout: secs(t.ready_timeout_s).unwrap_or(d.timing.ready_timeout),
            idle_timeout: secs(t.stall_timeout_s).unwrap_or(d.timing.idle_timeout),
            precision: s.precision_pct.map(|pct| Precision {
                pct,
                min_duration: secs(s.min_duration_s).unwrap_or(DEFAULT_MIN_DURATION).min(duration),
            }),
            metrics_interval: secs(t.metrics_interval_s).map_or(d.timing.metrics_interval, on),
            ..d.timing
        };
        Ok(RunSettings {
            contexts: asked(PlanKind::Decode, &s.contexts, Tokens(s.max_tokens)),
            concurrency: s.concurrency.clone(),
            max_tokens: Tokens(s.max_tokens),
            prefill_contexts: asked(PlanKind::Prefill, &s.prefill_contexts, Tokens(1)),
            prefill_at_max: false,
            api: s.api,
            rule: s.capacity_rule,
            timing,
            warmup: secs(t.warmup_s).map_or(d.warmup, on),
            server_wait: secs(t.server_wait_s).unwrap_or(d.server_wait),
            label: old.label.clone(),
            slo: s.slo.clone().unwrap_or(d.slo),
            cost_per_hour: s.cost_per_hour_usd,
            find_capacity: s.find_capacity,
            repeats: s.repeats.unwrap_or(1),
            save_requests: s.save_requests,
            gpu_metrics: s.gpu_metrics.clone(),
            reasoning: Reasoning { thinking: s.thinking, effort: s.reasoning_effort },
            ..d
        })
    }
}

/// What a run starts with besides its settings: where it continues from, what this machine is,
/// and the live handles the settings asked for.
#[derive(Debug, Default)]
pub struct RunStart {
    /// The record of an interrupted run to continue (`--resume`).
    pub resume: Option<RunRecord>,
    /// With `resume`: measure again the cells and prefill rows that failed or were skipped.
    pub retry_failed: bool,
    /// Plan and write the record, send nothing.
    pub dry_run: bool,
    pub hardware: Hardware,
    /// The server's launch command, already redacted.
    pub launch_command: Option<String>,
    /// The server's GPUs (`--gpu-count`, else the launch command's parallelism).
    pub server_gpus: Option<sm_core::server_gpus::ServerGpus>,
    pub tool_version: String,
    /// Values that must never be written or shown (the API key): added to the process-wide set
    /// every output is scrubbed with ([`sm_core::secrets`]).
    pub secrets: Vec<String>,
    /// The local tokenizer (`--tokenizer`), for servers that cannot count tokens.
    pub tokenizer: Option<Arc<LocalTokenizer>>,
    /// GPU telemetry through each decode cell: `--gpu-metrics` (DCGM) or the local NVML.
    pub gpu: Option<Arc<crate::telemetry::gpu_sampler::GpuReader>>,
    /// `--ranks N`: the worker ranks that hold their share of every decode cell's streams
    /// (docs/distributed.md); prefill rows, scouts and the warm-up are rank 0's alone.
    pub ranks: Option<Arc<crate::ranks::RankGroup>>,
}

#[cfg(test)]
mod tests {
    use sm_core::capacity::Limits;
    use sm_core::plan::PlanInput;

    use super::*;

    const SAMPLE: &str = include_str!("../../../../tests/data/run-sample.json");

    /// Settings unlike the defaults in every field a record keeps, "off" included.
    fn asked() -> RunSettings {
        let mut s = RunSettings {
            contexts: vec![Tokens(8192), Tokens(256 * 1024)],
            concurrency: vec![1, 4],
            max_tokens: Tokens(512),
            prefill_contexts: vec![Tokens(16 * 1024)],
            prefill_at_max: false,
            api: Api::Completions,
            rule: CapacityRule::PrefixShared,
            warmup: None,
            server_wait: Duration::from_secs(42),
            label: Some("mine".into()),
            slo: "ttft_p99<=3s".parse().unwrap(),
            cost_per_hour: Some(7.5),
            find_capacity: true,
            repeats: 3,
            save_requests: true,
            gpu_metrics: Some("off".into()),
            ..RunSettings::default()
        };
        s.timing.duration = Duration::from_secs(20);
        s.timing.ready_stable = Duration::from_millis(250);
        s.timing.metrics_interval = None;
        s.timing.precision = Some(Precision { pct: 2.0, min_duration: Duration::from_secs(4) });
        s
    }

    const MAX_MODEL_LEN: Tokens = Tokens(262_144);

    /// `s` planned on a server whose `max_model_len` (256K) fits the 256K context to what it can
    /// hold beside the output.
    fn plan_of(s: &RunSettings) -> Plan {
        Plan::build(&PlanInput {
            contexts: s.contexts.clone(),
            concurrency: s.concurrency.clone(),
            max_tokens: s.max_tokens,
            prefill_contexts: s.prefill_contexts.clone(),
            prefill_at_max: s.prefill_at_max,
            max_model_len: Some(MAX_MODEL_LEN),
            limits: Limits::default(),
            rule: s.rule,
        })
    }

    /// `s` written into the sample record as a run of [`plan_of`].
    fn record_of(s: &RunSettings) -> RunRecord {
        let plan = plan_of(s);
        let mut record: RunRecord = serde_json::from_str(SAMPLE).unwrap();
        record.server.max_model_len = Some(MAX_MODEL_LEN.0);
        record.plan = plan.to_record();
        record.settings = s.recorded(&plan, PromptSource::ServerTokenize);
        record.label = s.label.clone();
        record
    }

    #[test]
    fn a_resume_reads_back_the_settings_its_run_was_asked_for() {
        let record = record_of(&asked());
        assert_eq!(record.settings.contexts[0], 8192);
        assert!(
            record.settings.contexts[1] < MAX_MODEL_LEN.0,
            "256K is planned to fit: {:?}",
            record.settings.contexts
        );
        let (off, warmup) = (record.settings.timing.metrics_interval_s, record.settings.timing.warmup_s);
        assert_eq!((off, warmup), (Some(0.0), Some(0.0)), "run.json writes off as 0 s, as before");
        let mut back = RunSettings::from_record(&record, RunSettings::default()).unwrap();
        // the prefill rows come back as rows (each decode context's one among them): the same plan
        assert_eq!(plan_of(&back).to_record(), plan_of(&asked()).to_record());
        back.prefill_contexts = asked().prefill_contexts;
        // no PartialEq (the phases hold a prompt file): the whole shape, field by field, as text
        assert_eq!(format!("{back:?}"), format!("{:?}", asked()));
    }

    #[test]
    fn a_record_written_before_a_setting_was_kept_takes_the_default_and_a_bad_window_is_refused() {
        let mut record = record_of(&asked());
        record.settings.timing = TimingSettings::default();
        record.settings.precision_pct = None;
        let defaults = RunSettings::default();
        let back = RunSettings::from_record(&record, defaults.clone()).unwrap();
        assert_eq!((back.warmup, back.server_wait), (defaults.warmup, defaults.server_wait));
        assert_eq!(back.timing.metrics_interval, defaults.timing.metrics_interval);
        assert_eq!(back.timing.precision, None);
        record.settings.duration_s = -1.0;
        let err = RunSettings::from_record(&record, defaults).unwrap_err();
        assert_eq!(err, RecordedSettingsError::Window(-1.0));
        assert!(err.to_string().contains("pass --duration"), "{err}");
    }
}
