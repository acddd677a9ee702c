//! Whether each part of a run the user asked for (the decode matrix, each load phase) has anything
//! it can send, decided from the plan before anything is measured. A part in which nothing can run
//! would end "complete" having measured nothing asked for: the run is refused instead, saying why
//! and what to give (a dry run, which only shows the plan, is not refused).

use sm_core::Tokens;
use sm_core::context::{Fit, label};
use sm_core::plan::Plan;
use sm_core::record::Api;

use super::PhaseConfig;

/// What the check needs besides the plan: the phases asked for, the API form and the model's limit.
pub(super) struct Asked<'a> {
    pub phases: &'a PhaseConfig,
    pub api: Api,
    pub max_model_len: Option<u64>,
    pub max_tokens: Tokens,
}

/// Why each part asked for cannot send anything; empty when every part can.
pub(super) fn nothing_to_run(plan: &Plan, asked: &Asked) -> Vec<String> {
    let mut out = Vec::new();
    let from_file = asked.phases.prompts_file.is_some();
    let cells = || cells_problem(plan, asked);
    if asked.phases.matrix
        && let Some(why) = cells()
    {
        out.push(format!("the decode matrix: {why}"));
    }
    if asked.phases.rate.is_some()
        && !from_file
        && let Some(why) = cells()
    {
        out.push(format!("the rate phase (--request-rate), which runs at the matrix's contexts: {why}"));
    }
    if asked.phases.burst.is_some()
        && !from_file
        && let Some(why) = cells()
    {
        out.push(format!("the bursts (--burst), one per cell of the matrix: {why}"));
    }
    if asked.phases.mixed_prefill.is_some()
        && let Some(why) = mixed_problem(plan, asked)
    {
        out.push(format!("the mixed-prefill phase (--mixed-prefill): {why}"));
    }
    if asked.phases.sessions.is_some() && asked.api != Api::Chat {
        out.push(
            "the sessions phase (--sessions): a conversation needs the chat API; run it with --api chat".to_string(),
        );
    }
    out
}

/// Why no decode cell of the plan can run: every context beyond the model, or every cell over capacity.
fn cells_problem(plan: &Plan, asked: &Asked) -> Option<String> {
    if plan.runnable().next().is_some() {
        return None;
    }
    if plan.cells.is_empty() {
        let requested: Vec<String> = plan.rows.iter().map(|r| label(r.requested)).collect();
        let room = asked.max_model_len.map_or(String::new(), |mml| {
            let room = mml.saturating_sub(asked.max_tokens.0 + sm_core::context::MODEL_LEN_MARGIN);
            format!(
                " (the model takes {} tokens; with --max-tokens {} a context may hold up to {})",
                Tokens(mml),
                asked.max_tokens,
                Tokens(room)
            )
        });
        return Some(format!(
            "no context of --contexts {} fits the model{room}: give smaller --contexts or a smaller --max-tokens",
            requested.join(",")
        ));
    }
    let first = plan.cells.iter().find_map(|c| c.over_capacity.as_deref()).unwrap_or("over capacity");
    Some(format!(
        "every cell is over the server's capacity (e.g. {} at concurrency {}: {first}): give a lower --concurrency, smaller --contexts or a smaller --max-tokens",
        plan.cells[0].label, plan.cells[0].concurrency
    ))
}

/// Why no mixed-prefill level can run: its background needs the first context to fit, and a fresh
/// prompt must fit the model.
fn mixed_problem(plan: &Plan, asked: &Asked) -> Option<String> {
    let config = asked.phases.mixed_prefill.as_ref()?;
    if let Some(Fit::Skipped { requested, .. }) = plan.rows.first().map(|r| &r.fit) {
        return Some(format!(
            "its background decodes at the first context of --contexts, {}, which does not fit the model: put a context that fits first",
            label(*requested)
        ));
    }
    let mml = asked.max_model_len?;
    let fits = config.levels.iter().any(|l| l.prompt_context.0 < mml);
    (!fits).then(|| {
        format!(
            "no fresh prompt of --mixed-prefill fits the model's {} tokens: give a CTX below it (e.g. {}@4)",
            Tokens(mml),
            label(Tokens(mml / 2))
        )
    })
}

#[cfg(test)]
mod tests {
    use sm_core::capacity::{CapacityRule, Limits};
    use sm_core::phases::rate::Arrival;
    use sm_core::plan::PlanInput;

    use super::*;
    use crate::{BurstConfig, MixedLevelSpec, MixedPrefillConfig, RateConfig, SessionsConfig};

    fn plan(contexts: &[u64], concurrency: &[u32], max_num_seqs: Option<u32>) -> Plan {
        Plan::build(&PlanInput {
            contexts: contexts.iter().map(|&c| Tokens(c)).collect(),
            concurrency: concurrency.to_vec(),
            max_tokens: Tokens(256),
            prefill_contexts: Vec::new(),
            prefill_at_max: true,
            max_model_len: Some(Tokens(8192)),
            limits: Limits { kv_budget: None, block_size: None, max_num_seqs },
            rule: CapacityRule::Reference,
        })
    }

    fn asked(phases: &PhaseConfig, api: Api) -> Asked<'_> {
        Asked { phases, api, max_model_len: Some(8192), max_tokens: Tokens(256) }
    }

    #[test]
    fn a_matrix_whose_every_context_is_beyond_the_model_cannot_run() {
        let phases = PhaseConfig::default();
        let why = nothing_to_run(&plan(&[9999 * 1024], &[1], None), &asked(&phases, Api::Chat));
        assert_eq!(why.len(), 1, "{why:?}");
        assert!(why[0].contains("no context of --contexts 9999K fits the model"), "{why:?}");
        assert!(why[0].contains("up to 7,872"), "{why:?}");
        // one context that fits is enough: the others are skipped with a reason, as before
        assert!(nothing_to_run(&plan(&[9999 * 1024, 1024], &[1], None), &asked(&phases, Api::Chat)).is_empty());
    }

    #[test]
    fn every_cell_over_capacity_cannot_run_and_neither_can_the_phases_on_it() {
        let phases = PhaseConfig {
            matrix: false,
            rate: Some(RateConfig {
                rates: vec!["2".parse().unwrap()],
                arrival: Arrival::Poisson,
                max_concurrency: None,
                requests: None,
                seed: RateConfig::DEFAULT_SEED,
                drain_max: RateConfig::DEFAULT_DRAIN_MAX,
            }),
            burst: Some(BurstConfig { rounds: 1, ignore_eos: true }),
            ..PhaseConfig::default()
        };
        let why = nothing_to_run(&plan(&[1024], &[8, 16], Some(4)), &asked(&phases, Api::Chat));
        assert_eq!(why.len(), 2, "{why:?}");
        assert!(why.iter().all(|w| w.contains("every cell is over the server's capacity")), "{why:?}");
        assert!(why[0].contains("concurrency 8 is above max-num-seqs 4"), "{why:?}");
        assert!(nothing_to_run(&plan(&[1024], &[2, 16], Some(4)), &asked(&phases, Api::Chat)).is_empty());
    }

    #[test]
    fn mixed_prefill_and_sessions_that_cannot_run() {
        let level = |k: u64| MixedLevelSpec { prompt_context: Tokens(k * 1024), background: 4 };
        let mixed = |levels| PhaseConfig {
            matrix: false,
            mixed_prefill: Some(MixedPrefillConfig { levels, probes: 1, window: std::time::Duration::from_secs(1) }),
            ..PhaseConfig::default()
        };
        let too_big = mixed(vec![level(16), level(32)]);
        let why = nothing_to_run(&plan(&[1024], &[1], None), &asked(&too_big, Api::Chat));
        assert!(why[0].contains("no fresh prompt of --mixed-prefill fits"), "{why:?}");
        let one_fits = mixed(vec![level(4), level(32)]);
        assert!(nothing_to_run(&plan(&[1024], &[1], None), &asked(&one_fits, Api::Chat)).is_empty());
        let why = nothing_to_run(&plan(&[64 * 1024, 1024], &[1], None), &asked(&one_fits, Api::Chat));
        assert!(why[0].contains("background decodes at the first context"), "{why:?}");

        let sessions = PhaseConfig {
            matrix: false,
            sessions: Some(SessionsConfig {
                users: 2,
                turns: 2,
                think_time: std::time::Duration::ZERO,
                turn_tokens: 64,
                shared_prefix: None,
            }),
            ..PhaseConfig::default()
        };
        let why = nothing_to_run(&plan(&[1024], &[1], None), &asked(&sessions, Api::Completions));
        assert!(why[0].contains("--api chat"), "{why:?}");
        assert!(nothing_to_run(&plan(&[1024], &[1], None), &asked(&sessions, Api::Chat)).is_empty());
    }
}
