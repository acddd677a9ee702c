//! One CSV row per measurement: the All-measurements columns as the page
//! prints them, then every numeric field of the record unformatted, so a
//! spreadsheet can both show the page and compute with it. The SLO's figures
//! come last: fixed columns, then the context's capacity answer, then two per bound of the SLO
//! (docs/report.md).

use serde_json::Value;
use sm_core::record::{CellStatus, DecodeCell, RunRecord};
use sm_core::slo::BoundName;

use crate::view::{self, CellKind};

/// The raw columns that say which measurement a row is.
const KEYS: [&str; 4] = ["context_tokens", "concurrency", "status", "reason"];
/// A prefill row's raw figures: `PrefillRow` field names, unformatted.
const PREFILL_FIELDS: [&str; 4] = ["prompt_tokens", "prompt_tok_s", "ttft_ms", "cached_tokens"];
/// A decode cell's raw figures: `DecodeCell` field names, unformatted
/// (`warnings` joined with "; "), its nested fields flattened by [`flat`]. A
/// field added to the record must be added here: tests/csv_columns.rs fails
/// until it is.
const DECODE_FIELDS: [&str; 79] = [
    "total_tok_s",
    "per_request_tok_s",
    "ttft_ms_p50",
    "ttft_ms_p90",
    "ttft_ms_p99",
    "tbt_ms_p50",
    "tbt_ms_p90",
    "tbt_ms_p99",
    "chunk_gap_ms_p50",
    "chunk_gap_ms_p99",
    "avg_active",
    "completed",
    "output_tokens",
    "measured_s",
    "requests",
    "kv_need_tokens",
    "token_source",
    "client_lag_ms_p99",
    "client_cpu_pct",
    "prompt_cache_hit_pct",
    "client_retries",
    "warnings",
    "slo_met",
    "goodput_pct",
    "goodput_tok_s",
    "usd_per_million_tokens",
    "searched",
    "ci_total_tok_s_lo",
    "ci_total_tok_s_hi",
    "ci_per_request_tok_s_lo",
    "ci_per_request_tok_s_hi",
    "ci_ttft_ms_p50_lo",
    "ci_ttft_ms_p50_hi",
    "ci_ttft_ms_p90_lo",
    "ci_ttft_ms_p90_hi",
    "ci_tbt_ms_p50_lo",
    "ci_tbt_ms_p50_hi",
    "ci_tbt_ms_p99_lo",
    "ci_tbt_ms_p99_hi",
    "precision_met",
    "repeats",
    "repeats_agree",
    "phases_before_s",
    "phases_ramp_s",
    "phases_window_s",
    "phases_after_s",
    "roofline_tok_s",
    "roofline_fraction",
    "spec_decode_acceptance_length",
    "spec_decode_acceptance_rate",
    "spec_decode_drafts",
    "spec_decode_accepted",
    "gpu_source",
    "gpu_samples",
    "gpu_power_w",
    "gpu_energy_j",
    "gpu_energy_from",
    "gpu_joules_per_token",
    "gpu_wh_per_million_tokens",
    "gpu_throttle",
    "gpu_count",
    "server_metrics_interval_s",
    "server_metrics_scrapes",
    "server_metrics_span_s",
    "server_metrics_running_mean",
    "server_metrics_waiting_max",
    "server_metrics_kv_usage_mean",
    "server_metrics_kv_usage_max",
    "server_metrics_preemptions",
    "server_metrics_prefix_hit_pct",
    "server_metrics_prompt_tokens",
    "server_metrics_generation_tokens",
    "server_metrics_server_tok_s",
    "server_metrics_measured_tokens",
    "server_metrics_tok_s_diff_pct",
    "server_metrics_tok_s_timing_pct",
    "server_metrics_queue_time_ms_p50",
    "server_metrics_queue_time_ms_mean",
    "rank_count",
];

/// A prefill row's exported columns: its own, and the telemetry columns it shares with the decode
/// cells (methodology §14), from its `gpu` and `server_metrics` flattened by [`flat`].
static PREFILL_ROW_FIELDS: std::sync::LazyLock<Vec<&'static str>> = std::sync::LazyLock::new(|| {
    let telemetry = DECODE_FIELDS.iter().filter(|f| f.starts_with("gpu_") || f.starts_with("server_metrics_"));
    PREFILL_FIELDS.iter().chain(telemetry).copied().collect()
});

/// The capacity answer (run.json's `capacity[]`) on every decode row of its context, so that a
/// spreadsheet filtered to one context still has it: `capacity` is `true` on the cell that proves
/// the answer, the others are the context's entry (`max_users`, `bounded_by`, …) repeated.
const CAPACITY_COLUMNS: [&str; 6] = [
    "capacity",
    "capacity_max_users",
    "capacity_bounded_by",
    "capacity_failed_cell",
    "capacity_fit_limit",
    "capacity_usd_per_user_hour",
];

/// The capacity columns of the decode row `ctx` × `c`; empty where the record has no answer for
/// `ctx` (no SLO, no valid cell).
fn capacity_cells(record: &RunRecord, ctx: u64, c: u32) -> Vec<String> {
    let Some(cap) = record.capacity.iter().find(|k| k.context == ctx) else {
        return vec![String::new(); CAPACITY_COLUMNS.len()];
    };
    let count = |v: Option<u32>| v.map(|x| x.to_string()).unwrap_or_default();
    vec![
        (cap.cell == Some(c)).to_string(),
        cap.max_users.to_string(),
        cap.bounded_by.to_string(),
        count(cap.failed_cell),
        count(cap.fit_limit),
        cap.usd_per_user_hour.map(|v| v.to_string()).unwrap_or_default(),
    ]
}

/// The fields only a `valid` row carries (the record's schema nulls them
/// otherwise): a row that is not valid exports them empty, whatever the record
/// holds, so a spreadsheet cannot sum a failed cell's partial numbers.
const VALID_ONLY: [&str; 30] = [
    "prompt_tok_s",
    "ttft_ms",
    "total_tok_s",
    "per_request_tok_s",
    "ttft_ms_p50",
    "ttft_ms_p90",
    "ttft_ms_p99",
    "tbt_ms_p50",
    "tbt_ms_p90",
    "tbt_ms_p99",
    "chunk_gap_ms_p50",
    "chunk_gap_ms_p99",
    "avg_active",
    "completed",
    "output_tokens",
    "measured_s",
    "requests",
    "token_source",
    "slo_met",
    "goodput_pct",
    "goodput_tok_s",
    "usd_per_million_tokens",
    "precision_met",
    "repeats_agree",
    "roofline_tok_s",
    "roofline_fraction",
    "gpu_power_w",
    "gpu_energy_j",
    "gpu_joules_per_token",
    "gpu_wh_per_million_tokens",
];

/// Whether only a valid row exports `field`: the listed ones and every interval (`ci_*`), whose
/// columns are not listed twice.
fn valid_only(field: &str) -> bool {
    field.starts_with("ci_") || VALID_ONLY.contains(&field)
}

/// The raw fields of `all` a row with `status` exports.
fn exported(status: CellStatus, all: &'static [&'static str]) -> Vec<&'static str> {
    all.iter().filter(|f| status == CellStatus::Valid || !valid_only(f)).copied().collect()
}

/// The CSV's header: the page's All-measurements columns, then the raw ones, the capacity
/// answer's, then two per bound of the SLO: `slo_<bound>` (the cell's value at the bound's
/// percentile) and `slo_<bound>_holds`.
fn columns(bounds: &[BoundName]) -> Vec<String> {
    let fixed = view::COLUMNS.iter().chain(&KEYS).chain(&PREFILL_FIELDS).chain(&DECODE_FIELDS).chain(&CAPACITY_COLUMNS);
    fixed
        .map(|c| c.to_string())
        .chain(bounds.iter().flat_map(|b| [format!("slo_{b}"), format!("slo_{b}_holds")]))
        .collect()
}

/// The bounds with columns: the record's SLO's, in its order, then any other a cell was judged
/// against (a record edited by hand), so that no judged figure is left out.
fn bound_keys(record: &RunRecord) -> Vec<BoundName> {
    let mut keys: Vec<BoundName> =
        record.settings.slo.iter().flat_map(|s| s.bounds.iter().map(|b| b.key().into())).collect();
    for check in record.decode.iter().flat_map(|c| &c.slo_bounds) {
        if !keys.contains(&check.bound) {
            keys.push(check.bound.clone());
        }
    }
    keys
}

/// A valid cell's value and verdict for each bound in `keys`; empty where it has none.
fn bound_cells(cell: &DecodeCell, keys: &[BoundName]) -> Vec<String> {
    let valid = cell.status() == CellStatus::Valid;
    keys.iter()
        .flat_map(|k| match cell.slo_bounds.iter().find(|b| &b.bound == k).filter(|_| valid) {
            Some(b) => [b.value.map(|v| v.to_string()).unwrap_or_default(), b.holds.to_string()],
            None => [String::new(), String::new()],
        })
        .collect()
}

pub(crate) fn field(s: &str) -> String {
    // a leading = + - @ makes spreadsheets evaluate text as a formula
    let s =
        if s.starts_with(['=', '+', '@', '-']) && s.parse::<f64>().is_err() { format!("'{s}") } else { s.to_string() };
    if s.contains([',', '"', '\n', '\r']) { format!("\"{}\"", s.replace('"', "\"\"")) } else { s }
}

/// A record value as a CSV cell: numbers unformatted (integers without a
/// decimal point), text as is, lists joined.
fn raw(value: &Value, key: &str) -> String {
    match value.get(key) {
        Some(Value::Number(n)) => match n.as_u64() {
            Some(i) => i.to_string(),
            None => n.as_f64().map(|x| x.to_string()).unwrap_or_default(),
        },
        Some(Value::String(s)) => s.clone(),
        Some(Value::Bool(b)) => b.to_string(),
        Some(Value::Array(a)) => {
            a.iter().map(|v| v.as_str().map_or_else(|| v.to_string(), str::to_string)).collect::<Vec<_>>().join("; ")
        }
        _ => String::new(),
    }
}

/// A decode cell's record with its nested fields as flat columns: `ci.total_tok_s.lo` becomes
/// `ci_total_tok_s_lo`, `phases.ramp_s` becomes `phases_ramp_s`, and `repeats` their count (each
/// repeat's figures stay in run.json: a row per cell keeps the CSV one row per measurement).
fn flat(mut v: Value) -> Value {
    let Some(obj) = v.as_object_mut() else {
        return v;
    };
    if let Some(Value::Object(ci)) = obj.remove("ci") {
        for (figure, interval) in ci {
            for end in ["lo", "hi"] {
                if let Some(x) = interval.get(end) {
                    obj.insert(format!("ci_{figure}_{end}"), x.clone());
                }
            }
        }
    }
    if let Some(Value::Object(phases)) = obj.remove("phases") {
        for (k, x) in phases {
            obj.insert(format!("phases_{k}"), x);
        }
    }
    if let Some(Value::Object(spec)) = obj.remove("spec_decode") {
        for (k, x) in spec {
            obj.insert(format!("spec_decode_{k}"), x);
        }
    }
    if let Some(Value::Object(gpu)) = obj.remove("gpu") {
        obj.extend(crate::gpu::csv_fields(gpu));
    }
    // the summary as columns; the series stays in run.json (a row per measurement)
    if let Some(Value::Object(server)) = obj.remove("server_metrics") {
        for (k, x) in server.into_iter().filter(|(k, _)| k != "series") {
            obj.insert(format!("server_metrics_{k}"), x);
        }
    }
    if let Some(Value::Array(repeats)) = obj.remove("repeats") {
        obj.insert("repeats".into(), repeats.len().into());
    }
    // how many client processes measured the cell (`--ranks`); each one's figures stay in run.json
    if let Some(Value::Array(ranks)) = obj.remove("ranks") {
        obj.insert("rank_count".into(), ranks.len().into());
    }
    v
}

/// The raw columns of a row: keys, then `fields` read from `value`, every
/// other raw column empty.
fn raw_row(keys: [String; 4], value: &Value, fields: &[&str]) -> Vec<String> {
    let mut row: Vec<String> = keys.into();
    for col in PREFILL_FIELDS.iter().chain(&DECODE_FIELDS) {
        let cell = match raw(value, col) {
            // the record leaves `searched: false` out; a decode row says it
            s if s.is_empty() && *col == "searched" && fields.contains(col) => "false".to_string(),
            s if fields.contains(col) => s,
            _ => String::new(),
        };
        row.push(cell);
    }
    row
}

pub fn csv(record: &RunRecord) -> String {
    let page = view::build(record);
    let bounds = bound_keys(record);
    // a prefill row has no capacity answer and no SLO judgement
    let no_answer = || vec![String::new(); CAPACITY_COLUMNS.len() + bounds.len() * 2];
    let mut out = String::new();
    out.push_str(&columns(&bounds).iter().map(|h| field(h)).collect::<Vec<_>>().join(","));
    out.push_str("\r\n");
    // the same order as the page's rows: prefill by context, then the matrix row by row
    let mut prefill: Vec<_> = record.prefill.iter().collect();
    prefill.sort_by_key(|p| p.context);
    let mut raws: Vec<Vec<String>> = prefill
        .into_iter()
        .map(|p| {
            let keys =
                [p.context.to_string(), "1".into(), p.status.name().to_string(), p.reason.clone().unwrap_or_default()];
            let value = flat(serde_json::to_value(p).unwrap_or_default());
            let mut row = raw_row(keys, &value, &exported(p.status, PREFILL_ROW_FIELDS.as_slice()));
            row.extend(no_answer());
            row
        })
        .collect();
    let decode = view::DecodeIndex::new(record);
    for at in page.matrix.shown() {
        let (ctx_s, c_s) = (at.context.to_string(), at.concurrency.to_string());
        raws.push(match (at.cell.kind, decode.get(at.context, at.concurrency)) {
            (CellKind::NotMeasured, _) => continue,
            (_, Some(cell)) => {
                let keys = [ctx_s, c_s, cell.status().name().to_string(), cell.reason.clone().unwrap_or_default()];
                let fields = exported(cell.status(), &DECODE_FIELDS);
                let mut row = raw_row(keys, &flat(serde_json::to_value(cell).unwrap_or_default()), &fields);
                row.extend(capacity_cells(record, at.context, at.concurrency));
                row.extend(bound_cells(cell, &bounds));
                row
            }
            // not run by the plan (over capacity, skipped): no decode entry to read
            (kind, None) => {
                let status = if kind == CellKind::Skipped { CellStatus::Skipped } else { CellStatus::OverCapacity };
                let keys = [ctx_s, c_s, status.name().into(), at.cell.reason.clone().unwrap_or_default()];
                let mut row = raw_row(keys, &Value::Null, &[]);
                row.extend(capacity_cells(record, at.context, at.concurrency));
                row.extend(vec![String::new(); bounds.len() * 2]);
                row
            }
        });
    }
    for (shown, raw) in page.measurements.iter().zip(raws) {
        let line: Vec<String> = shown.iter().chain(raw.iter()).map(|v| field(v)).collect();
        out.push_str(&line.join(","));
        out.push_str("\r\n");
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quoting() {
        assert_eq!(field("1,156 ms"), "\"1,156 ms\"");
        assert_eq!(field("say \"hi\""), "\"say \"\"hi\"\"\"");
        assert_eq!(field("=cmd()"), "'=cmd()");
        assert_eq!(field("-1.5"), "-1.5");
        assert_eq!(field("plain"), "plain");
    }

    /// A cell or row that is not valid exports no figures, even when the record holds some.
    #[test]
    fn rows_that_are_not_valid_export_no_figures() {
        let text = include_str!("../../../tests/data/run-sample.json");
        let mut record: RunRecord = serde_json::from_str(text).unwrap();
        let cell = record.decode.iter_mut().find(|c| c.status() == CellStatus::Valid).unwrap();
        cell.status = Some(CellStatus::Error);
        cell.total_tok_s = Some(4242.5);
        cell.kv_need_tokens = Some(77);
        let (ctx, c) = (cell.context.to_string(), cell.concurrency.to_string());
        record.prefill[0].status = CellStatus::Error;
        record.prefill[0].prompt_tok_s = Some(9191.5);
        let out = csv(&record);
        assert!(!out.contains("4242.5") && !out.contains("9191.5"), "{out}");
        let header: Vec<&str> = out.lines().next().unwrap().split(',').collect();
        let at = |name: &str| header.iter().position(|h| *h == name).unwrap();
        let row = out.lines().find(|l| {
            let f: Vec<&str> = l.split(',').collect();
            f[0] == "Sustained decode"
                && f.get(at("context_tokens")) == Some(&ctx.as_str())
                && f.get(at("concurrency")) == Some(&c.as_str())
        });
        let row: Vec<&str> = row.expect("the error cell has a row").split(',').collect();
        assert_eq!(
            (row[at("status")], row[at("kv_need_tokens")], row[at("total_tok_s")]),
            ("error", "77", ""),
            "{row:?}"
        );
    }
}
