//! Resuming an interrupted run: the old record must describe the same server,
//! model and settings, or its cells would not belong in one matrix.

use sm_core::record::{RunRecord, RunStatus};

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
    cmp("engine", o.engine.clone(), n.engine.clone());
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
    if new.launch_command.is_some() {
        old.launch_command = new.launch_command;
    }
    // over-capacity cells are decided by the plan, which is the same; keep what was written
    for cell in new.decode {
        if old.decode_cell(cell.context, cell.concurrency).is_none() {
            old.decode.push(cell);
        }
    }
    old
}
