//! llm-inference-bench result JSON (0.4.x–0.7.x) → `speedmatrix.run/1`
//! (reference-tool study §5.1 and §6.3; the mapping of the issue).

use serde_json::{Map, Value, json};
use sm_core::Tokens;
use sm_core::capacity::{self, CapacityRule, Limits};
use sm_core::context::label;
use sm_core::record::{
    Api, CellStatus, DecodeCell, Engine, Event, Hardware, PlanKind, PlanStatus, PlannedCell, PrefillRow, RunRecord,
    RunStatus, SCHEMA, ServerInfo, Settings, TokenSource, Tool,
};

use super::value::{bool_at, f64_at, ms_at, str_at, u64_at, u64_list};
use super::{ImportError, Source};
use crate::meta;

pub const TOOL: &str = "llm-inference-bench";

/// The largest decode grid an imported file may describe: 64 × 64, where real
/// grids have tens of cells. The page's views look cells up by linear search, so
/// a 10,000-cell grid took seconds to render (found by the `import` fuzz target).
const MAX_GRID_CELLS: usize = 4_096;

/// The reference tool's throughput sentinels (`aggregate_tps`).
fn sentinel(tps: f64) -> Option<(CellStatus, &'static str)> {
    match tps {
        -1.0 => Some((CellStatus::OverCapacity, "over capacity (KV cache)")),
        -2.0 => Some((CellStatus::Skipped, "skipped by the user")),
        -3.0 => Some((CellStatus::Loop, "loop: a stream repeated its text")),
        t if t < 0.0 => Some((CellStatus::Error, "error")),
        _ => None,
    }
}

/// A URL without `user:password@`.
fn strip_credentials(url: &str) -> String {
    match url.split_once("://") {
        Some((scheme, rest)) => {
            let (authority, path) = rest.split_at(rest.find('/').unwrap_or(rest.len()));
            let host = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
            format!("{scheme}://{host}{path}")
        }
        None => url.rsplit_once('@').map_or(url, |(_, h)| h).to_string(),
    }
}

/// The placeholder `started` of a file without a usable timestamp (the schema
/// requires one); `server.extra.unknown_fields` then lists `started`.
pub const UNKNOWN_TIME: &str = "1970-01-01T00:00:00Z";

/// The reference tool's local, zone-less timestamp, to whole seconds in the
/// record's RFC 3339 shape, or `None` when `ts` is not an ISO date and time.
/// The zone is unknown: `imported_from.local_time` says so and the page
/// prints the time without "UTC".
pub fn parse_timestamp(ts: &str) -> Option<String> {
    let ts = ts.trim();
    let base = ts.get(..19).unwrap_or(ts);
    let digits_at = |r: std::ops::Range<usize>| base.get(r).is_some_and(|d| d.bytes().all(|b| b.is_ascii_digit()));
    let shaped = base.len() == 19 && base.as_bytes().get(10) == Some(&b'T') && digits_at(0..4) && digits_at(11..13);
    shaped.then(|| format!("{base}Z"))
}

fn prefill_rows(bench: &Value) -> Vec<PrefillRow> {
    let Some(obj) = bench.get("prefill").and_then(Value::as_object) else {
        return Vec::new();
    };
    let mut rows: Vec<PrefillRow> = obj
        .iter()
        .filter_map(|(k, p)| {
            let context: u64 = k.trim().parse().ok()?;
            let tok_s = f64_at(p, "tok_per_sec").or_else(|| f64_at(p, "client_tok_per_sec"));
            let ttft = ms_at(p, "ttft_seconds").or_else(|| ms_at(p, "client_ttft_seconds"));
            let valid = matches!((tok_s, ttft), (Some(t), Some(f)) if t > 0.0 && f > 0.0);
            let reason = p
                .get("server_validation")
                .and_then(|v| str_at(v, "invalid_reason"))
                .map(str::to_string)
                .unwrap_or_else(|| "no prefill figure in the file".into());
            Some(PrefillRow {
                context,
                label: label(Tokens(context)),
                prompt_tokens: u64_at(p, "prompt_tokens"),
                ttft_ms: ttft.filter(|_| valid),
                prompt_tok_s: tok_s.filter(|_| valid),
                cached_tokens: None,
                status: if valid { CellStatus::Valid } else { CellStatus::Error },
                reason: (!valid).then_some(reason),
                telemetry: Default::default(),
            })
        })
        .collect();
    rows.sort_by_key(|r| r.context);
    rows
}

fn decode_cell(r: &Value) -> Option<DecodeCell> {
    let context = u64_at(r, "context_tokens")?;
    let concurrency = u64_at(r, "concurrency")? as u32;
    let mut cell = DecodeCell { context, label: label(Tokens(context)), concurrency, ..DecodeCell::default() };
    let tps = f64_at(r, "aggregate_tps");
    let failure = str_at(r, "failure_reason");
    let loop_found = bool_at(r, "loop_detected") == Some(true);
    let bad = match (tps.and_then(sentinel), failure) {
        (Some((status, text)), f) => Some((status, f.unwrap_or(text).to_string())),
        (None, Some(f)) => Some((if loop_found { CellStatus::Loop } else { CellStatus::Error }, f.to_string())),
        (None, None) if tps.is_none_or(|t| t <= 0.0) || u64_at(r, "client_output_tokens") == Some(0) => {
            Some((CellStatus::Error, "no output tokens in the window".into()))
        }
        _ => None,
    };
    if let Some((status, reason)) = bad {
        cell.status = Some(status);
        cell.reason = Some(
            str_at(r, "timeout_reason").filter(|_| status == CellStatus::OverCapacity).unwrap_or(&reason).to_string(),
        );
        return Some(cell);
    }
    let source = str_at(r, "aggregate_source").unwrap_or("");
    cell.status = Some(CellStatus::Valid);
    cell.total_tok_s = tps;
    cell.per_request_tok_s = f64_at(r, "output_tps_per_user_p50");
    cell.ttft_ms.p50 = ms_at(r, "ttft_p50");
    cell.ttft_ms.p90 = ms_at(r, "ttft_p90");
    cell.ttft_ms.p99 = ms_at(r, "ttft_p99");
    cell.tbt_ms.p50 = ms_at(r, "inter_token_latency_p50");
    cell.tbt_ms.p90 = ms_at(r, "inter_token_latency_p90");
    cell.tbt_ms.p99 = ms_at(r, "inter_token_latency_p99");
    cell.chunk_gap_ms.p50 = ms_at(r, "chunk_inter_token_latency_p50");
    cell.chunk_gap_ms.p99 = ms_at(r, "chunk_inter_token_latency_p99");
    cell.avg_active = f64_at(r, "avg_running_reqs");
    cell.completed = u64_at(r, "completed_request_count");
    cell.output_tokens = u64_at(r, "client_output_tokens").or_else(|| u64_at(r, "total_tokens"));
    cell.measured_s = f64_at(r, "measurement_wall_seconds").or_else(|| f64_at(r, "measurement_seconds"));
    cell.requests = u64_at(r, "request_count").filter(|n| *n > 0).or(Some(u64::from(concurrency)));
    cell.token_source = Some(if source.contains("chunk") { TokenSource::Chunks } else { TokenSource::Usage });
    if !source.is_empty() && source != "openai_continuous_usage" {
        cell.warnings.push(format!("throughput source: {source}"));
    }
    if bool_at(r, "capacity_limited") == Some(true) {
        let eff = f64_at(r, "effective_concurrency").map(crate::format::fixed1).unwrap_or_else(|| "fewer".into());
        cell.warnings.push(format!("capacity limited: the server ran {eff} of {concurrency} requests at once"));
    }
    if bool_at(r, "warmup_timed_out") == Some(true) {
        let why = str_at(r, "timeout_reason").unwrap_or("readiness timed out");
        cell.warnings.push(format!("readiness timed out: {why}"));
    }
    Some(cell)
}

/// Builds a record from the bench JSON. `plan` is a lil-bench plan when the
/// file came wrapped in one; otherwise over-capacity cells (which the bench
/// JSON leaves out) are recovered from the grid with the reference rule.
pub fn import(bench: &Value, source: &Source, plan: Option<&[Value]>) -> Result<RunRecord, ImportError> {
    let format = if plan.is_some() { "lil-bench-result/1" } else { TOOL };
    let md = bench.get("metadata").ok_or(ImportError::Incomplete { format, missing: "metadata" })?;
    let max_tokens = u64_at(md, "max_tokens").unwrap_or(0);
    let kv = u64_at(md, "max_total_tokens").filter(|k| *k > 0);
    let mut decode: Vec<DecodeCell> = bench
        .get("results")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter(|r| str_at(r, "benchmark_mode") != Some("burst-e2e"))
        .filter_map(decode_cell)
        .collect();
    let (contexts, levels) = grid(md, &decode)?;

    let planned = match plan {
        Some(entries) => super::plan::plan(entries, max_tokens),
        None => grid_plan(&contexts, &levels, &prefill_rows(bench), max_tokens, kv),
    };
    add_over_capacity(&mut decode, &planned, max_tokens);
    add_summary_errors(&mut decode, bench);
    let order = sm_core::plan::order(&contexts.iter().map(|&c| Tokens(c)).collect::<Vec<_>>(), &levels);
    let position =
        |c: &DecodeCell| order.iter().position(|&(t, l)| t.0 == c.context && l == c.concurrency).unwrap_or(usize::MAX);
    decode.sort_by_key(position);

    let engine_reported = str_at(md, "engine").unwrap_or("generic");
    let started = str_at(md, "timestamp").and_then(parse_timestamp);
    let extra = extra(md, source, engine_reported, started.is_none());
    // the bench JSON has one timestamp, for the whole run
    let finished = started.clone();
    let started = started.unwrap_or_else(|| UNKNOWN_TIME.into());
    Ok(RunRecord {
        schema: SCHEMA.into(),
        tool: Tool {
            name: TOOL.into(),
            version: str_at(md, "version").unwrap_or("unknown").into(),
            commit: None,
            client_threads: None,
        },
        status: RunStatus::Complete,
        finished,
        started,
        label: None,
        server: ServerInfo {
            url: strip_credentials(str_at(md, "server").unwrap_or("unknown")),
            engine: super::engine_name(engine_reported),
            engine_version: None,
            model: str_at(md, "model").unwrap_or("unknown").into(),
            max_model_len: None,
            kv_budget_tokens: kv,
            kv_budget_source: if kv.is_some() {
                "llm-inference-bench metadata.max_total_tokens".into()
            } else {
                "unknown".into()
            },
            max_num_seqs: None,
            metrics_available: bool_at(md, "metrics_available").unwrap_or(false),
            tokenize_available: false,
            extra,
        },
        settings: Settings {
            contexts: contexts.clone(),
            concurrency: levels,
            duration_s: f64_at(md, "duration_per_test").unwrap_or(0.0),
            max_tokens,
            prefill_contexts: prefill_rows(bench).iter().map(|p| p.context).collect(),
            capacity_rule: CapacityRule::Reference,
            api: Api::Chat,
            // the reference tool sizes prompts from a characters-per-token probe
            prompt_source: sm_core::record::PromptSource::UsageCalibration,
            ignore_eos: bool_at(md, "ignore_eos").unwrap_or(true),
            temperature: f64_at(md, "temperature"),
            thinking: None,
            reasoning_effort: None,
            timing: Default::default(),
            slo: None,
            cost_per_hour_usd: None,
            find_capacity: false,
            precision_pct: None,
            min_duration_s: None,
            repeats: None,
            save_requests: false,
            prompts_file: None,
            tools: None,
            matrix: true,
            model_shape: None,
            gpu_metrics: None,
        },
        hardware: Hardware { os: String::new(), ..Hardware::default() },
        launch_command: None,
        server_gpus: None,
        plan: planned,
        prefill: prefill_rows(bench),
        decode,
        events: events(bench),
        run_id: None,
        prompts: Vec::new(),
        capacity: Vec::new(),
        phases: sm_core::phases::Phases { burst: super::burst::phase(bench, md, TOOL), ..Default::default() },
    })
}

/// The run's contexts and concurrency levels: the metadata's lists with every measured cell's
/// added, refused when the grid is absurdly large.
fn grid(md: &Value, decode: &[DecodeCell]) -> Result<(Vec<u64>, Vec<u32>), ImportError> {
    let mut contexts = u64_list(md, "context_lengths");
    let mut levels: Vec<u32> = u64_list(md, "concurrency_levels").into_iter().map(|c| c as u32).collect();
    for c in decode {
        if !contexts.contains(&c.context) {
            contexts.push(c.context);
        }
        if !levels.contains(&c.concurrency) {
            levels.push(c.concurrency);
        }
    }
    contexts.sort_unstable();
    levels.sort_unstable();
    contexts.dedup();
    levels.dedup();
    // The plan is contexts × levels: 20,000 of each fit in a 250 KB file and
    // asked for 400 million cells (tens of GB). Real grids have tens of cells.
    if contexts.len().saturating_mul(levels.len()) > MAX_GRID_CELLS {
        return Err(ImportError::UnknownFormat {
            what: format!(
                "a grid of {} contexts × {} concurrency levels (at most {MAX_GRID_CELLS} cells)",
                contexts.len(),
                levels.len()
            ),
        });
    }
    Ok((contexts, levels))
}

/// The plan's over-capacity cells that the results do not list, as over-capacity cells with the
/// reference rule's KV need; and the need for those that are listed without it.
fn add_over_capacity(decode: &mut Vec<DecodeCell>, planned: &[PlannedCell], max_tokens: u64) {
    for p in planned.iter().filter(|p| p.kind == PlanKind::Decode && p.status == PlanStatus::OverCapacity) {
        if decode.iter().any(|c| c.context == p.context && c.concurrency == p.concurrency) {
            continue;
        }
        decode.push(DecodeCell {
            context: p.context,
            label: p.label.clone(),
            concurrency: p.concurrency,
            status: Some(CellStatus::OverCapacity),
            reason: p.reason.clone(),
            kv_need_tokens: Some(kv_need(p.context, max_tokens, p.concurrency).unwrap_or(u64::MAX)),
            ..DecodeCell::default()
        });
    }
    for c in decode.iter_mut().filter(|c| c.status == Some(CellStatus::OverCapacity) && c.kv_need_tokens.is_none()) {
        c.kv_need_tokens = Some(kv_need(c.context, max_tokens, c.concurrency).unwrap_or(u64::MAX));
    }
}

/// Cells the summary table marks as failed but whose details the file did not keep.
fn add_summary_errors(decode: &mut Vec<DecodeCell>, bench: &Value) {
    if let Some(table) = bench.get("summary_table").and_then(Value::as_object) {
        for (ctx, row) in table {
            let Ok(ctx) = ctx.parse::<u64>() else { continue };
            for (c, v) in row.as_object().into_iter().flatten() {
                let Ok(c) = c.parse::<u32>() else { continue };
                if v.is_null() && !decode.iter().any(|d| d.context == ctx && d.concurrency == c) {
                    decode.push(DecodeCell {
                        context: ctx,
                        label: label(Tokens(ctx)),
                        concurrency: c,
                        status: Some(CellStatus::Error),
                        reason: Some("ERROR in the summary table; no details in the file".into()),
                        ..DecodeCell::default()
                    });
                }
            }
        }
    }
}

/// `server.extra` of an imported bench JSON: the engine as reported where it is not one we know,
/// the modes, the request count, which fields the file did not have, and where it came from.
fn extra(md: &Value, source: &Source, engine_reported: &str, no_start: bool) -> Map<String, Value> {
    let mut extra = Map::new();
    if super::engine_name(engine_reported) == Engine::Generic {
        extra.insert("engine_reported".into(), json!(engine_reported));
    }
    for key in [meta::PREFILL_MODE, meta::DECODE_MODE] {
        if let Some(mode) = str_at(md, key) {
            extra.insert(key.into(), json!(mode));
        }
    }
    if let Some(n) = u64_at(md, "request_count").filter(|n| *n > 0) {
        extra.insert(meta::REQUEST_COUNT.into(), json!(n));
    }
    let unknown: Vec<&str> = [
        (meta::STARTED, no_start),
        (meta::TOOL_VERSION, str_at(md, "version").is_none()),
        (meta::DURATION, f64_at(md, "duration_per_test").is_none()),
        (meta::MAX_TOKENS, u64_at(md, "max_tokens").is_none()),
        (meta::ENGINE, str_at(md, "engine").is_none()),
    ]
    .into_iter()
    .filter_map(|(field, missing)| missing.then_some(field))
    .collect();
    if !unknown.is_empty() {
        extra.insert(meta::UNKNOWN.into(), json!(unknown));
    }
    extra.insert(
        meta::IMPORTED_FROM.into(),
        json!({
            "format": TOOL,
            "version": str_at(md, "version"),
            "file": source.file,
            "local_time": true,
            "importer": format!("speedmatrix {}", env!("CARGO_PKG_VERSION")),
        }),
    );
    extra
}

/// The reference rule's `C × (ctx + max_tokens)`, or `None` past `u64`: a file's
/// token counts are not trusted, and `u64::MAX` in one once overflowed
/// sm-core's unchecked arithmetic (found by tests/import_prop.rs).
fn kv_need(context: u64, max_tokens: u64, concurrency: u32) -> Option<u64> {
    context.checked_add(max_tokens)?.checked_mul(u64::from(concurrency))
}

fn grid_plan(
    contexts: &[u64],
    levels: &[u32],
    prefill: &[PrefillRow],
    max_tokens: u64,
    kv: Option<u64>,
) -> Vec<PlannedCell> {
    let limits = Limits { kv_budget: kv.map(Tokens), block_size: None, max_num_seqs: None };
    let mut plan: Vec<PlannedCell> = prefill
        .iter()
        .map(|p| PlannedCell {
            kind: PlanKind::Prefill,
            requested_context: p.context,
            context: p.context,
            label: p.label.clone(),
            concurrency: 1,
            status: PlanStatus::Planned,
            reason: None,
        })
        .collect();
    let ctx_tokens: Vec<Tokens> = contexts.iter().map(|&c| Tokens(c)).collect();
    for (ctx, c) in sm_core::plan::order(&ctx_tokens, levels) {
        let reason = match (kv, kv_need(ctx.0, max_tokens, c)) {
            (Some(budget), None) => Some(format!("needs more KV tokens than a u64 counts, the server has {budget}")),
            _ => capacity::over_capacity_reason(CapacityRule::Reference, &limits, ctx, Tokens(max_tokens), c),
        };
        plan.push(PlannedCell {
            kind: PlanKind::Decode,
            requested_context: ctx.0,
            context: ctx.0,
            label: label(ctx),
            concurrency: c,
            status: if reason.is_some() { PlanStatus::OverCapacity } else { PlanStatus::Planned },
            reason,
        });
    }
    plan
}

/// `event_log` lines are `HH:MM:SS message` in local time; `t` becomes
/// seconds since the first line.
fn events(bench: &Value) -> Vec<Event> {
    let lines = bench.get("event_log").and_then(Value::as_array).into_iter().flatten().filter_map(Value::as_str);
    let secs = |l: &str| -> Option<f64> {
        let hms = l.get(..8)?;
        // Only a clock time counts: `99999999 x` once overflowed `h * 3600` and
        // panicked in debug builds (found by tests/import_prop.rs).
        let mut it = hms.split(':').map(|p| p.parse::<u32>().ok().filter(|&n| n < 60));
        let (h, m, s) = (it.next()??, it.next()??, it.next()??);
        (h < 24).then(|| f64::from(h * 3600 + m * 60 + s))
    };
    let mut first: Option<f64> = None;
    lines
        .map(|l| {
            let t = secs(l);
            let base = *first.get_or_insert(t.unwrap_or(0.0));
            let text = if t.is_some() { l.get(8..).unwrap_or("").trim() } else { l.trim() };
            // a run that passes midnight wraps the clock
            let t = t.map(|t| if t < base { t + 86_400.0 - base } else { t - base }).unwrap_or(0.0);
            Event { t, text: text.to_string() }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn credentials_and_timestamps() {
        assert_eq!(strip_credentials("http://u:p@h:8000/v1"), "http://h:8000/v1");
        assert_eq!(strip_credentials("http://127.0.0.1:8000"), "http://127.0.0.1:8000");
        assert_eq!(parse_timestamp("2026-12-02T13:06:07.174928").as_deref(), Some("2026-12-02T13:06:07Z"));
        assert_eq!(parse_timestamp("garbage"), None);
        assert_eq!(parse_timestamp("yesterday at 10:00:00 or so"), None);
    }

    #[test]
    fn event_log_times_that_are_not_clock_times() {
        let bench =
            json!({"event_log": ["23:59:59 late", "99999999 overflowed once", "00:00:01 past midnight", "24:00:00 x"]});
        let ev = events(&bench);
        let got: Vec<(f64, &str)> = ev.iter().map(|e| (e.t, e.text.as_str())).collect();
        assert_eq!(
            got,
            vec![(0.0, "late"), (0.0, "99999999 overflowed once"), (2.0, "past midnight"), (0.0, "24:00:00 x")]
        );
    }

    #[test]
    fn a_grid_too_large_to_plan_is_refused() {
        let many: Vec<u64> = (1..=200).collect();
        let doc = json!({"metadata": {"context_lengths": many, "concurrency_levels": many}, "results": []});
        let err = import(&doc, &Source::default(), None).unwrap_err().to_string();
        assert!(err.contains("200 contexts × 200 concurrency levels"), "{err}");
        let dup = json!({"metadata": {"context_lengths": [8, 8, 4], "concurrency_levels": [1, 1]}, "results": []});
        let rec = import(&dup, &Source::default(), None).unwrap();
        assert_eq!(rec.settings.contexts, vec![4, 8]);
        assert_eq!(rec.plan.len(), 2);
    }

    #[test]
    fn sentinels() {
        assert_eq!(sentinel(-1.0).map(|s| s.0), Some(CellStatus::OverCapacity));
        assert_eq!(sentinel(-2.0).map(|s| s.0), Some(CellStatus::Skipped));
        assert_eq!(sentinel(-3.0).map(|s| s.0), Some(CellStatus::Loop));
        assert_eq!(sentinel(-4.0).map(|s| s.0), Some(CellStatus::Error));
        assert_eq!(sentinel(12.5), None);
    }
}
