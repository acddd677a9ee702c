//! measurements.csv's raw columns: every field of a prefill row and a decode cell, unformatted,
//! nested ones flattened (`ci.total_tok_s.lo` is `ci_total_tok_s_lo`), then the capacity answer.
//! A row is a tuple of the structs below, each a run of columns in the header's order; their field
//! names are the header. A field added to the record needs a column here:
//! tests/report/csv_columns.rs fails until it has one.
//!
//! A row that is not `valid` exports the figures only a valid one carries (the record's schema nulls
//! them otherwise) empty, whatever the record holds, so that a spreadsheet cannot sum a failed cell's
//! partial numbers.

use std::sync::LazyLock;

use serde::{Serialize, Serializer};
use sm_core::answer::Capacity;
use sm_core::figures::{Figure, Figures as Table};
use sm_core::gpu_telemetry::{EnergyFrom, GpuCell, GpuSource, Throttle};
use sm_core::record::{CellIntervals, DecodeCell, PrefillRow, TokenSource};
use sm_core::server_metrics::ServerMetrics;
use sm_core::spec_decode::SpecDecode;

use super::table::{Guarded, Num, finite, header};

/// The raw columns of a row, in the header's order.
pub(super) type Raw<'a> = (Keys<'a>, Prefill, Figures, Notes, Intervals, Extras, Gpu, Server, Ranks, CapacityColumns);

/// `v` where the row is valid, else nothing.
fn keep<T>(valid: bool, v: Option<T>) -> Option<T> {
    v.filter(|_| valid)
}

/// Which measurement a row is.
#[derive(Serialize, Default)]
pub(super) struct Keys<'a> {
    pub context_tokens: u64,
    pub concurrency: u32,
    pub status: &'static str,
    pub reason: Guarded<&'a str>,
}

/// A prefill row's figures, its table's in order ([`sm_core::figures`]).
pub(super) struct Prefill(Vec<Option<Num>>);

impl Prefill {
    pub(super) fn of(p: &PrefillRow) -> Prefill {
        Prefill(carried(PrefillRow::FIGURES, p))
    }
}

impl Default for Prefill {
    /// A decode row: every column empty.
    fn default() -> Prefill {
        Prefill(vec![None; PrefillRow::FIGURES.len()])
    }
}

impl Serialize for Prefill {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_seq(&self.0)
    }
}

/// The figures of `section`, each empty where the section's status may not carry it (the
/// record's schema nulls them there, and a spreadsheet must not sum a failed cell's numbers).
fn carried<'a, T: Table + 'a>(figures: impl IntoIterator<Item = &'a Figure<T>>, section: &T) -> Vec<Option<Num>> {
    let status = section.status();
    figures.into_iter().map(|f| finite(f.of(section)).filter(|_| f.carried.allows(status))).collect()
}

/// A decode cell's figures from its table ([`sm_core::figures`]) that no other run of columns
/// here writes (client health, goodput, the roofline have theirs), in the table's order: a
/// decode figure added to the table is a column of measurements.csv without naming it here.
/// Each is empty on a row whose status may not carry it.
pub(super) struct Figures(Vec<Option<Num>>);

/// The entries of the decode table that [`Figures`] writes.
fn main_figures() -> &'static [&'static Figure<DecodeCell>] {
    static MAIN: LazyLock<Vec<&'static Figure<DecodeCell>>> = LazyLock::new(|| {
        let elsewhere = header::<(Notes, Intervals, Extras, Gpu, Server, Ranks, CapacityColumns)>();
        DecodeCell::FIGURES.iter().filter(|f| !elsewhere.iter().any(|h| h == f.name)).collect()
    });
    &MAIN
}

impl Figures {
    pub(super) fn of(c: &DecodeCell) -> Figures {
        Figures(carried(main_figures().iter().copied(), c))
    }
}

impl Default for Figures {
    /// A row without a decode cell (a prefill row, a cell not measured): every column empty.
    fn default() -> Figures {
        Figures(vec![None; main_figures().len()])
    }
}

impl Serialize for Figures {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_seq(&self.0)
    }
}

/// The raw columns' header: each run's field names, the tables' figure names in their places.
pub(super) fn raw_header() -> Vec<String> {
    let prefill = PrefillRow::FIGURES.iter().map(|f| f.name.to_string());
    let figures = main_figures().iter().map(|f| f.name.to_string());
    let after = header::<(Notes, Intervals, Extras, Gpu, Server, Ranks, CapacityColumns)>();
    header::<Keys>().into_iter().chain(prefill).chain(figures).chain(after).collect()
}

/// What else a decode cell says: how it was counted and measured, and its SLO verdict.
#[derive(Serialize, Default)]
pub(super) struct Notes {
    kv_need_tokens: Option<u64>,
    token_source: Option<TokenSource>,
    client_lag_ms_p99: Option<Num>,
    client_cpu_pct: Option<Num>,
    prompt_cache_hit_pct: Option<Num>,
    client_retries: Option<u64>,
    /// Joined with "; ".
    warnings: Guarded<String>,
    slo_met: Option<bool>,
    goodput_pct: Option<Num>,
    goodput_tok_s: Option<Num>,
    usd_per_million_tokens: Option<Num>,
    searched: Option<bool>,
}

impl Notes {
    pub(super) fn of(c: &DecodeCell, valid: bool) -> Notes {
        Notes {
            kv_need_tokens: c.kv_need_tokens,
            token_source: keep(valid, c.token_source),
            client_lag_ms_p99: finite(c.client_lag_ms_p99),
            client_cpu_pct: finite(c.client_cpu_pct),
            prompt_cache_hit_pct: finite(c.prompt_cache_hit_pct),
            client_retries: c.client_retries,
            warnings: Guarded(c.warnings.join("; ")),
            slo_met: keep(valid, c.slo_met),
            goodput_pct: keep(valid, finite(c.goodput_pct)),
            goodput_tok_s: keep(valid, finite(c.goodput_tok_s)),
            usd_per_million_tokens: keep(valid, finite(c.usd_per_million_tokens)),
            // run.json leaves `searched: false` out; a decode row says it
            searched: Some(c.searched),
        }
    }
}

/// The 95 % intervals, two columns each: only a valid cell has them.
#[derive(Serialize, Default)]
pub(super) struct Intervals {
    ci_total_tok_s_lo: Option<Num>,
    ci_total_tok_s_hi: Option<Num>,
    ci_per_request_tok_s_lo: Option<Num>,
    ci_per_request_tok_s_hi: Option<Num>,
    ci_ttft_ms_p50_lo: Option<Num>,
    ci_ttft_ms_p50_hi: Option<Num>,
    ci_ttft_ms_p90_lo: Option<Num>,
    ci_ttft_ms_p90_hi: Option<Num>,
    ci_tbt_ms_p50_lo: Option<Num>,
    ci_tbt_ms_p50_hi: Option<Num>,
    ci_tbt_ms_p99_lo: Option<Num>,
    ci_tbt_ms_p99_hi: Option<Num>,
}

impl Intervals {
    pub(super) fn of(ci: Option<&CellIntervals>, valid: bool) -> Intervals {
        let Some(ci) = ci.filter(|_| valid) else {
            return Intervals::default();
        };
        let ends = |i: Option<sm_core::precision::Interval>| match i {
            Some(i) => (finite(Some(i.lo)), finite(Some(i.hi))),
            None => (None, None),
        };
        let (ci_total_tok_s_lo, ci_total_tok_s_hi) = ends(ci.total_tok_s);
        let (ci_per_request_tok_s_lo, ci_per_request_tok_s_hi) = ends(ci.per_request_tok_s);
        let (ci_ttft_ms_p50_lo, ci_ttft_ms_p50_hi) = ends(ci.ttft_ms_p50);
        let (ci_ttft_ms_p90_lo, ci_ttft_ms_p90_hi) = ends(ci.ttft_ms_p90);
        let (ci_tbt_ms_p50_lo, ci_tbt_ms_p50_hi) = ends(ci.tbt_ms_p50);
        let (ci_tbt_ms_p99_lo, ci_tbt_ms_p99_hi) = ends(ci.tbt_ms_p99);
        Intervals {
            ci_total_tok_s_lo,
            ci_total_tok_s_hi,
            ci_per_request_tok_s_lo,
            ci_per_request_tok_s_hi,
            ci_ttft_ms_p50_lo,
            ci_ttft_ms_p50_hi,
            ci_ttft_ms_p90_lo,
            ci_ttft_ms_p90_hi,
            ci_tbt_ms_p50_lo,
            ci_tbt_ms_p50_hi,
            ci_tbt_ms_p99_lo,
            ci_tbt_ms_p99_hi,
        }
    }
}

/// Precision and repeats, where the cell's time went, its roofline and speculative decoding.
#[derive(Serialize, Default)]
pub(super) struct Extras {
    precision_met: Option<bool>,
    /// How many; each repeat's figures stay in run.json (a row per measurement).
    repeats: Option<usize>,
    repeats_agree: Option<bool>,
    phases_before_s: Option<Num>,
    phases_ramp_s: Option<Num>,
    phases_window_s: Option<Num>,
    phases_after_s: Option<Num>,
    roofline_tok_s: Option<Num>,
    roofline_fraction: Option<Num>,
    spec_decode_acceptance_length: Option<Num>,
    spec_decode_acceptance_rate: Option<Num>,
    spec_decode_drafts: Option<u64>,
    spec_decode_accepted: Option<u64>,
}

impl Extras {
    pub(super) fn of(c: &DecodeCell, valid: bool) -> Extras {
        let phase = |f: fn(&sm_core::record::CellPhases) -> f64| finite(c.phases.as_ref().map(f));
        let spec = |f: fn(&SpecDecode) -> f64| finite(c.spec_decode.as_ref().map(f));
        Extras {
            precision_met: keep(valid, c.precision_met),
            repeats: (!c.repeats.is_empty()).then_some(c.repeats.len()),
            repeats_agree: keep(valid, c.repeats_agree),
            phases_before_s: phase(|p| p.before_s),
            phases_ramp_s: phase(|p| p.ramp_s),
            phases_window_s: phase(|p| p.window_s),
            phases_after_s: phase(|p| p.after_s),
            roofline_tok_s: keep(valid, finite(c.roofline_tok_s)),
            roofline_fraction: keep(valid, finite(c.roofline_fraction)),
            spec_decode_acceptance_length: spec(|s| s.acceptance_length),
            spec_decode_acceptance_rate: spec(|s| s.acceptance_rate),
            spec_decode_drafts: c.spec_decode.map(|s| s.drafts),
            spec_decode_accepted: c.spec_decode.map(|s| s.accepted),
        }
    }
}

/// GPU power and energy (methodology §14.3): the scalar figures and how many GPUs; each GPU's
/// figures stay in run.json. Power and energy are a valid row's only.
#[derive(Serialize, Default)]
pub(super) struct Gpu {
    gpu_source: Option<GpuSource>,
    gpu_samples: Option<u32>,
    gpu_power_w: Option<Num>,
    gpu_energy_j: Option<Num>,
    gpu_energy_from: Option<EnergyFrom>,
    gpu_joules_per_token: Option<Num>,
    gpu_wh_per_million_tokens: Option<Num>,
    gpu_throttle: Option<Throttle>,
    gpu_count: Option<usize>,
}

impl Gpu {
    pub(super) fn of(g: Option<&GpuCell>, valid: bool) -> Gpu {
        let Some(g) = g else {
            return Gpu::default();
        };
        Gpu {
            gpu_source: Some(g.source),
            gpu_samples: Some(g.samples),
            gpu_power_w: keep(valid, finite(g.power_w)),
            gpu_energy_j: keep(valid, finite(g.energy_j)),
            gpu_energy_from: g.energy_from,
            gpu_joules_per_token: keep(valid, finite(g.joules_per_token)),
            gpu_wh_per_million_tokens: keep(valid, finite(g.wh_per_million_tokens)),
            gpu_throttle: g.throttle,
            gpu_count: Some(g.gpus.len()),
        }
    }
}

/// The summary of the server's gauges (methodology §14.1); the series stays in run.json.
#[derive(Serialize, Default)]
pub(super) struct Server {
    server_metrics_interval_s: Option<Num>,
    server_metrics_scrapes: Option<u64>,
    server_metrics_span_s: Option<Num>,
    server_metrics_running_mean: Option<Num>,
    server_metrics_waiting_max: Option<Num>,
    server_metrics_kv_usage_mean: Option<Num>,
    server_metrics_kv_usage_max: Option<Num>,
    server_metrics_preemptions: Option<u64>,
    server_metrics_prefix_hit_pct: Option<Num>,
    server_metrics_prompt_tokens: Option<u64>,
    server_metrics_generation_tokens: Option<u64>,
    server_metrics_server_tok_s: Option<Num>,
    server_metrics_measured_tokens: Option<u64>,
    server_metrics_tok_s_diff_pct: Option<Num>,
    server_metrics_tok_s_timing_pct: Option<Num>,
    server_metrics_queue_time_ms_p50: Option<Num>,
    server_metrics_queue_time_ms_mean: Option<Num>,
}

impl Server {
    pub(super) fn of(m: Option<&ServerMetrics>) -> Server {
        let Some(m) = m else {
            return Server::default();
        };
        Server {
            server_metrics_interval_s: finite(Some(m.interval_s)),
            server_metrics_scrapes: Some(m.scrapes),
            server_metrics_span_s: finite(Some(m.span_s)),
            server_metrics_running_mean: finite(Some(m.running_mean)),
            server_metrics_waiting_max: finite(Some(m.waiting_max)),
            server_metrics_kv_usage_mean: finite(m.kv_usage_mean),
            server_metrics_kv_usage_max: finite(m.kv_usage_max),
            server_metrics_preemptions: m.preemptions,
            server_metrics_prefix_hit_pct: finite(m.prefix_hit_pct),
            server_metrics_prompt_tokens: m.prompt_tokens,
            server_metrics_generation_tokens: m.generation_tokens,
            server_metrics_server_tok_s: finite(m.server_tok_s),
            server_metrics_measured_tokens: m.measured_tokens,
            server_metrics_tok_s_diff_pct: finite(m.tok_s_diff_pct),
            server_metrics_tok_s_timing_pct: finite(m.tok_s_timing_pct),
            server_metrics_queue_time_ms_p50: finite(m.queue_time_ms_p50),
            server_metrics_queue_time_ms_mean: finite(m.queue_time_ms_mean),
        }
    }
}

/// How many client processes measured the cell (`--ranks`); each one's figures stay in run.json.
#[derive(Serialize, Default)]
pub(super) struct Ranks {
    rank_count: Option<usize>,
}

impl Ranks {
    pub(super) fn of(c: &DecodeCell) -> Ranks {
        Ranks { rank_count: (!c.ranks.is_empty()).then_some(c.ranks.len()) }
    }
}

/// The capacity answer (run.json's `capacity[]`) on every decode row of its context, so that a
/// spreadsheet filtered to one context still has it: `capacity` is `true` on the cell that proves
/// the answer, the others repeat the context's entry. Empty where the context has no answer (no
/// SLO, no valid cell) and on prefill rows.
#[derive(Serialize, Default)]
pub(super) struct CapacityColumns {
    capacity: Option<bool>,
    capacity_max_users: Option<u32>,
    capacity_bounded_by: Option<Guarded<String>>,
    capacity_failed_cell: Option<u32>,
    capacity_fit_limit: Option<u32>,
    capacity_usd_per_user_hour: Option<Num>,
}

impl CapacityColumns {
    pub(super) fn of(answer: Option<&Capacity>, concurrency: u32) -> CapacityColumns {
        let Some(cap) = answer else {
            return CapacityColumns::default();
        };
        CapacityColumns {
            capacity: Some(cap.cell == Some(concurrency)),
            capacity_max_users: Some(cap.max_users),
            capacity_bounded_by: Some(Guarded(cap.bounded_by.to_string())),
            capacity_failed_cell: cap.failed_cell,
            capacity_fit_limit: cap.fit_limit,
            // as the record has it, even where not finite: this column was never nulled
            capacity_usd_per_user_hour: cap.usd_per_user_hour.map(Num),
        }
    }
}
