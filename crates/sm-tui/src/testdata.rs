//! A small run for the tests: 8K and 64K × 1, 4, 16, with 64K × 16 over capacity.

use sm_core::capacity::CapacityRule;
use sm_core::record::{
    Api, CellStatus, DecodeCell, Hardware, PlannedCell, RunRecord, RunStatus, ServerInfo, Settings, Tool,
};
use sm_core::record::{PlanKind, PlanStatus};

pub fn record() -> RunRecord {
    let mut plan = vec![
        planned(PlanKind::Prefill, 8192, "8K", 1, PlanStatus::Planned),
        planned(PlanKind::Prefill, 65536, "64K", 1, PlanStatus::Planned),
    ];
    for (ctx, label) in [(8192, "8K"), (65536, "64K")] {
        for c in [1, 4, 16] {
            let over = ctx == 65536 && c == 16;
            plan.push(planned(
                PlanKind::Decode,
                ctx,
                label,
                c,
                if over { PlanStatus::OverCapacity } else { PlanStatus::Planned },
            ));
        }
    }
    RunRecord {
        schema: sm_core::record::SCHEMA.into(),
        tool: Tool { name: "speedmatrix".into(), version: "0.1.0".into(), commit: None, client_threads: None },
        status: RunStatus::Running,
        started: "2026-01-01T00:00:00Z".into(),
        finished: None,
        label: None,
        server: ServerInfo {
            url: "http://127.0.0.1:8000".into(),
            engine: sm_core::record::Engine::Vllm,
            engine_version: Some("0.8.5".into()),
            model: "tiny-model".into(),
            max_model_len: Some(131_072),
            kv_budget_tokens: Some(500_000),
            kv_budget_source: "vllm:cache_config_info".into(),
            max_num_seqs: Some(64),
            metrics_available: true,
            tokenize_available: true,
            extra: Default::default(),
        },
        settings: Settings {
            contexts: vec![8192, 65536],
            concurrency: vec![1, 4, 16],
            duration_s: 10.0,
            max_tokens: 4096,
            prefill_contexts: vec![],
            capacity_rule: CapacityRule::Reference,
            api: Api::Chat,
            prompt_source: sm_core::record::PromptSource::ServerTokenize,
            ignore_eos: true,
            temperature: None,
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
        hardware: Hardware::default(),
        launch_command: None,
        server_gpus: None,
        plan,
        prefill: vec![],
        decode: vec![DecodeCell {
            context: 65536,
            label: "64K".into(),
            concurrency: 16,
            status: Some(CellStatus::OverCapacity),
            reason: Some("needs 1,114,112 KV tokens".into()),
            ..Default::default()
        }],
        events: vec![],
        run_id: None,
        prompts: vec![],
        capacity: vec![],
        phases: Default::default(),
    }
}

fn planned(kind: PlanKind, context: u64, label: &str, concurrency: u32, status: PlanStatus) -> PlannedCell {
    PlannedCell { kind, requested_context: context, context, label: label.into(), concurrency, status, reason: None }
}
