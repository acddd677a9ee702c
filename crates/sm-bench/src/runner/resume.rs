//! Resuming an interrupted run: the old record must describe the same server,
//! model and settings, or its cells would not belong in one matrix.

use sm_core::record::{CellStatus, RunRecord, RunStatus};

/// Every way `old` (the run in the directory) differs from `new` (the run that
/// would be measured now), one line each.
pub fn differences(old: &RunRecord, new: &RunRecord) -> Vec<String> {
    let mut diffs = Vec::new();
    let mut cmp = |what: &str, a: String, b: String| {
        if a != b {
            diffs.push(format!("{what}: was {a}, now {b}"));
        }
    };
    let (o, n) = (&old.server, &new.server);
    cmp("server URL", o.url.clone(), n.url.clone());
    cmp("engine", o.engine.to_string(), n.engine.to_string());
    cmp("engine version", show(&o.engine_version), show(&n.engine_version));
    cmp("model", o.model.clone(), n.model.clone());
    cmp("max_model_len", show(&o.max_model_len), show(&n.max_model_len));
    cmp("KV budget", show(&o.kv_budget_tokens), show(&n.kv_budget_tokens));
    cmp("max sequences", show(&o.max_num_seqs), show(&n.max_num_seqs));
    let (o, n) = (&old.settings, &new.settings);
    cmp("contexts", format!("{:?}", o.contexts), format!("{:?}", n.contexts));
    cmp("concurrency", format!("{:?}", o.concurrency), format!("{:?}", n.concurrency));
    cmp("duration", format!("{} s", o.duration_s), format!("{} s", n.duration_s));
    cmp("max tokens", o.max_tokens.to_string(), n.max_tokens.to_string());
    cmp("prefill contexts", format!("{:?}", o.prefill_contexts), format!("{:?}", n.prefill_contexts));
    cmp("capacity rule", o.capacity_rule.to_string(), n.capacity_rule.to_string());
    cmp("API", format!("{:?}", o.api), format!("{:?}", n.api));
    cmp("ignore_eos", o.ignore_eos.to_string(), n.ignore_eos.to_string());
    cmp("temperature", show(&o.temperature), show(&n.temperature));
    // thinking on or off changes the prompt (the template) and what each request generates
    let sent = |v: Option<String>| v.unwrap_or_else(|| "not sent".into());
    cmp("--thinking", sent(o.thinking.map(|t| t.to_string())), sent(n.thinking.map(|t| t.to_string())));
    let (a, b) = (o.reasoning_effort.map(|e| e.to_string()), n.reasoning_effort.map(|e| e.to_string()));
    cmp("--reasoning-effort", sent(a), sent(b));
    // the finished cells were judged against the old SLO; a record written before SLOs has none
    if let (Some(a), Some(b)) = (&o.slo, &n.slo) {
        cmp("SLO (--slo)", a.to_string(), b.to_string());
    }
    // the waits that decide when a window opens and what counts as a stall change the figures;
    // --server-wait does not. A record written before they were kept cannot be compared.
    let (o, n) = (&o.timing, &n.timing);
    for (what, a, b) in [
        ("warm-up", o.warmup_s, n.warmup_s),
        ("ready-stable", o.ready_stable_s, n.ready_stable_s),
        ("ready-timeout", o.ready_timeout_s, n.ready_timeout_s),
        ("stall-timeout", o.stall_timeout_s, n.stall_timeout_s),
        // what the server's gauges and the GPUs were sampled at (§14): a record before 1.4 has none
        ("metrics-interval", o.metrics_interval_s, n.metrics_interval_s),
    ] {
        if let (Some(a), Some(b)) = (a, b) {
            cmp(what, format!("{a} s"), format!("{b} s"));
        }
    }
    if let (Some(a), Some(b)) = (&old.settings.gpu_metrics, &new.settings.gpu_metrics) {
        cmp("GPU metrics (--gpu-metrics)", a.clone(), b.clone());
    }
    if old.status == RunStatus::Planned {
        diffs.push("the run in this directory is a dry run: nothing was measured to resume".into());
    }
    if old.run_id.is_none() {
        diffs.push("the run in this directory has no run id (it was not written by a resumable speedmatrix)".into());
    }
    diffs
}

fn show<T: std::fmt::Display>(v: &Option<T>) -> String {
    v.as_ref().map_or_else(|| "unknown".to_string(), T::to_string)
}

/// The record to continue: the old one with its measured rows and cells, the
/// new plan, and status `running`.
pub fn continue_from(mut old: RunRecord, new: RunRecord) -> RunRecord {
    old.status = RunStatus::Running;
    old.finished = None;
    old.plan = new.plan;
    old.tool = new.tool;
    old.hardware = new.hardware;
    // equal where they count (see `differences`); a record without them gets them now
    old.settings.timing = new.settings.timing;
    old.settings.gpu_metrics = new.settings.gpu_metrics;
    // a price is not a measurement: the new one (or none) prices every cell; a search may be
    // added to a finished matrix
    old.settings.cost_per_hour_usd = new.settings.cost_per_hour_usd;
    old.settings.find_capacity = new.settings.find_capacity;
    // how precisely and how often cells are measured may change on resume: each cell records its own
    old.settings.precision_pct = new.settings.precision_pct;
    old.settings.min_duration_s = new.settings.min_duration_s;
    old.settings.repeats = new.settings.repeats;
    // the run.json a resume wrote says whether the lines go on (a resume may add the flag)
    old.settings.save_requests = new.settings.save_requests;
    if let Some(slo) = new.settings.slo.filter(|_| old.settings.slo.is_none()) {
        // cells measured before SLOs were recorded are judged from their summaries
        if sm_core::answer::judge_from_summaries(&mut old, &slo).is_err() {
            old.settings.slo = Some(slo);
        }
    }
    sm_core::answer::price(&mut old);
    if new.launch_command.is_some() {
        old.launch_command = new.launch_command;
    }
    // a count the user gives now (or a launch command that says it) divides every cell's figures
    if new.server_gpus.is_some() {
        old.server_gpus = new.server_gpus;
    }
    // over-capacity cells are decided by the plan, which is the same; keep what was written
    for cell in new.decode {
        if old.decode_cell(cell.context, cell.concurrency).is_none() {
            old.decode.push(cell);
        }
    }
    old
}

/// For `--retry-failed`: forgets the cells that ended `error`, `loop` or `skipped`, and the prefill
/// rows that did not end valid, so that the resume measures them again. Over-capacity cells stay:
/// the plan decides them. Returns how many cells and rows were dropped.
pub fn forget_failed(record: &mut RunRecord) -> (usize, usize) {
    let to_retry =
        |s: Option<CellStatus>| matches!(s, Some(CellStatus::Error | CellStatus::Loop | CellStatus::Skipped));
    let (cells, rows) = (record.decode.len(), record.prefill.len());
    record.decode.retain(|c| !to_retry(c.status));
    record.prefill.retain(|r| r.status == CellStatus::Valid);
    (cells - record.decode.len(), rows - record.prefill.len())
}

#[cfg(test)]
mod tests {
    use sm_core::record::{Percentiles, TimingSettings};

    use super::*;

    fn record() -> RunRecord {
        let json = serde_json::json!({
            "schema": "speedmatrix.run/1",
            "tool": {"name": "speedmatrix", "version": "0.1.0", "commit": null},
            "status": "interrupted", "started": "2026-01-01T00:00:00Z", "finished": null, "label": null,
            "server": {"url": "http://127.0.0.1:8000", "engine": "vllm", "engine_version": "0.8.5",
                "model": "m", "max_model_len": 131072, "kv_budget_tokens": 500000, "kv_budget_source": "x",
                "max_num_seqs": 64, "metrics_available": true, "tokenize_available": true},
            "settings": {"contexts": [1024], "concurrency": [1, 2], "duration_s": 30.0, "max_tokens": 4096,
                "prefill_contexts": [], "capacity_rule": "reference", "api": "chat",
                "prompt_source": "server_tokenize", "ignore_eos": true, "temperature": null,
                "warmup_s": 3.0, "ready_stable_s": 3.0, "ready_timeout_s": 180.0, "stall_timeout_s": 15.0,
                "server_wait_s": 300.0},
            "hardware": {"os": "linux", "kernel": null, "cpu": null, "gpus": [], "gpu_count": 0},
            "launch_command": null, "prefill": [], "decode": [], "events": [], "run_id": "abcdefgh"
        });
        serde_json::from_value(json).unwrap()
    }

    #[test]
    fn the_same_run_has_no_differences() {
        assert_eq!(differences(&record(), &record()), Vec::<String>::new());
    }

    #[test]
    fn each_difference_is_one_line_naming_both_values() {
        let old = record();
        let mut new = record();
        new.server.url = "http://127.0.0.1:9000".into();
        new.server.engine_version = None;
        new.server.model = "other".into();
        new.server.max_num_seqs = Some(128);
        new.settings.max_tokens = 512;
        new.settings.timing.ready_stable_s = Some(1.0);
        new.settings.timing.stall_timeout_s = Some(60.0);
        assert_eq!(
            differences(&old, &new),
            [
                "server URL: was http://127.0.0.1:8000, now http://127.0.0.1:9000",
                "engine version: was 0.8.5, now unknown",
                "model: was m, now other",
                "max sequences: was 64, now 128",
                "max tokens: was 4096, now 512",
                "ready-stable: was 3 s, now 1 s",
                "stall-timeout: was 15 s, now 60 s",
            ]
        );
    }

    #[test]
    fn server_wait_and_unrecorded_timings_are_not_differences() {
        let mut old = record();
        let mut new = record();
        new.settings.timing.server_wait_s = Some(600.0);
        assert!(differences(&old, &new).is_empty());
        // a record written before the timings were kept
        old.settings.timing = TimingSettings::default();
        new.settings.timing.warmup_s = Some(0.0);
        assert!(differences(&old, &new).is_empty());
        let resumed = continue_from(old, new.clone());
        assert_eq!(resumed.settings.timing, new.settings.timing, "the record gets the timings now used");
    }

    #[test]
    fn forget_failed_drops_error_loop_and_skipped_cells_and_failed_rows_only() {
        let mut r = record();
        let cell = |status: CellStatus, concurrency: u32| sm_core::record::DecodeCell {
            context: 1024,
            label: "1K".into(),
            concurrency,
            status: Some(status),
            ..Default::default()
        };
        use CellStatus::*;
        r.decode = [Valid, OverCapacity, Error, Loop, Skipped].into_iter().zip(1..).map(|(s, c)| cell(s, c)).collect();
        let row = |status: CellStatus, context: u64| sm_core::record::PrefillRow {
            context,
            label: "x".into(),
            prompt_tokens: None,
            ttft_ms: None,
            prompt_tok_s: None,
            cached_tokens: None,
            status,
            reason: None,
            telemetry: Default::default(),
        };
        r.prefill = vec![row(Valid, 1024), row(Error, 2048)];
        assert_eq!(forget_failed(&mut r), (3, 1));
        let kept: Vec<_> = r.decode.iter().map(|c| (c.concurrency, c.status)).collect();
        assert_eq!(kept, [(1, Some(Valid)), (2, Some(OverCapacity))]);
        assert_eq!(r.prefill.iter().map(|p| p.context).collect::<Vec<_>>(), [1024]);
        assert_eq!(forget_failed(&mut r), (0, 0), "nothing left to forget");
    }

    #[test]
    fn a_dry_run_or_a_record_without_id_cannot_be_resumed() {
        let mut old = record();
        old.status = RunStatus::Planned;
        old.run_id = None;
        let diffs = differences(&old, &record());
        assert_eq!(diffs.len(), 2, "{diffs:?}");
        assert!(diffs[0].contains("dry run") && diffs[1].contains("no run id"), "{diffs:?}");
    }

    /// Kept cells were judged against the recorded SLO: another one is a difference. A record
    /// written before SLOs gets the new one, its cells judged from their summaries, and every
    /// cell is priced at the price now given.
    #[test]
    fn the_slo_must_match_and_a_record_before_slos_is_judged_from_its_summaries() {
        let slo = |s: &str| Some(s.parse::<sm_core::slo::Slo>().unwrap());
        let (mut old, mut new) = (record(), record());
        old.settings.slo = slo("tok_s_p10>=20");
        new.settings.slo = slo("tok_s_p10>=30");
        assert_eq!(differences(&old, &new), ["SLO (--slo): was tok_s_p10>=20, now tok_s_p10>=30"]);

        let mut old = record();
        old.decode.push(sm_core::record::DecodeCell {
            context: 1024,
            label: "1K".into(),
            concurrency: 2,
            status: Some(CellStatus::Valid),
            total_tok_s: Some(100.0),
            per_request_tok_s: Some(50.0),
            tbt_ms: Percentiles { p90: Some(25.0), ..Percentiles::default() },
            ttft_ms: Percentiles { p90: Some(300.0), ..Percentiles::default() },
            ..Default::default()
        });
        new.settings.cost_per_hour_usd = Some(3.6);
        let resumed = continue_from(old, new.clone());
        assert_eq!(resumed.settings.slo, new.settings.slo);
        let cell = &resumed.decode[0];
        // tok_s_p10 from the summary: 1000 / tbt_p90 = 40 tok/s, over the 30 asked
        assert_eq!((cell.slo_met, cell.slo_bounds[0].value), (Some(true), Some(40.0)));
        assert_eq!(cell.usd_per_million_tokens, Some(10.0), "3.6 $/h at 100 tok/s");
        assert_eq!(resumed.capacity[0].max_users, 2);
    }
}
