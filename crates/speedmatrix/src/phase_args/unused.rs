//! The run's flags that nothing asked for uses: `--concurrency` beside `--sessions` alone, say. A
//! flag dropped in silence lets a user believe it shaped the run; each such flag is named with what
//! to do, before anything is sent.

use sm_bench::PhaseConfig;

/// Which of the decode matrix's flags the user gave (values do not matter, only that they were given).
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct MatrixFlags {
    /// How many `--contexts` were given; `None` when the flag was not.
    pub contexts: Option<usize>,
    pub concurrency: bool,
    pub duration: bool,
    pub prefill_contexts: bool,
    pub warmup: bool,
    pub find_capacity: bool,
    pub precision: bool,
    pub repeats: bool,
}

/// A warning for each flag given that nothing of this run uses, saying what to do. Empty when the
/// decode matrix runs: it uses them all.
pub(crate) fn unused(flags: MatrixFlags, phases: &PhaseConfig) -> Vec<String> {
    if phases.matrix {
        return Vec::new();
    }
    let file = phases.prompts_file.is_some();
    let rate = phases.rate.as_ref();
    let (burst, mixed) = (phases.burst.is_some(), phases.mixed_prefill.is_some());
    let uses_contexts = (!file && (rate.is_some() || burst)) || mixed;
    let uses_concurrency = burst;
    let uses_duration = rate.is_some_and(|r| r.requests.is_none());
    let mut out = Vec::new();
    let mut note = |flag: &str, what: &str| {
        out.push(format!(
            "{flag} is not used by {}: {what}; add --matrix to measure the decode matrix with it, or leave it out",
            phase_names(phases)
        ));
    };
    if let Some(n) = flags.contexts {
        let from_file = file && (rate.is_some() || burst);
        if !uses_contexts {
            let what = if from_file {
                "its prompts come from --prompts, each with its own length"
            } else {
                "it sizes its own prompts"
            };
            note("--contexts", what);
        } else if n > 1 && mixed && (file || !(rate.is_some() || burst)) {
            note("--contexts beyond the first", "the background of --mixed-prefill decodes at the first context only");
        }
    }
    if flags.concurrency && !uses_concurrency {
        let what = if rate.is_some() {
            "the rate phase's load is its --request-rate (cap requests in flight with --max-concurrency)"
        } else {
            "its load is set by its own flags"
        };
        note("--concurrency", what);
    }
    if flags.duration && !uses_duration {
        let what = if rate.is_some() {
            "each rate level sends --requests N requests instead of a window"
        } else {
            "it has no measurement window"
        };
        note("--duration", what);
    }
    let matrix_only = [
        ("--prefill-contexts", flags.prefill_contexts, "prefill rows belong to the decode matrix"),
        ("--warmup", flags.warmup, "the hidden warm-up cell runs before the decode matrix"),
        (
            "--find-capacity",
            flags.find_capacity && phases.replay.is_none(),
            "it searches the decode matrix's concurrency",
        ),
        ("--precision", flags.precision, "it sizes the decode cells' windows"),
        ("--repeats", flags.repeats, "it measures each decode cell again"),
    ];
    for (flag, given, what) in matrix_only {
        if given {
            note(flag, what);
        }
    }
    out
}

/// `--sessions` or `--burst and --sessions`: the phases of the run, as the user named them.
fn phase_names(phases: &PhaseConfig) -> String {
    let mut names = Vec::new();
    if phases.rate.is_some() {
        names.push("--request-rate");
    }
    if phases.burst.is_some() {
        names.push("--burst");
    }
    if phases.mixed_prefill.is_some() {
        names.push("--mixed-prefill");
    }
    if phases.sessions.is_some() {
        names.push("--sessions");
    }
    if phases.replay.is_some() {
        names.push("--replay");
    }
    match names.split_last() {
        Some((last, [])) => last.to_string(),
        Some((last, rest)) => format!("{} and {last}", rest.join(", ")),
        None => "this run".to_string(),
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use sm_bench::{BurstConfig, RateConfig, SessionsConfig};
    use sm_core::phases::rate::Arrival;

    use super::*;

    fn sessions() -> Option<SessionsConfig> {
        Some(SessionsConfig { users: 2, turns: 2, think_time: Duration::ZERO, turn_tokens: 64, shared_prefix: None })
    }

    fn rate(requests: Option<u64>) -> Option<RateConfig> {
        Some(RateConfig {
            rates: vec!["2".parse().unwrap()],
            arrival: Arrival::Poisson,
            max_concurrency: None,
            requests,
            seed: RateConfig::DEFAULT_SEED,
            drain_max: RateConfig::DEFAULT_DRAIN_MAX,
        })
    }

    const ALL: MatrixFlags = MatrixFlags {
        contexts: Some(2),
        concurrency: true,
        duration: true,
        prefill_contexts: false,
        warmup: false,
        find_capacity: false,
        precision: false,
        repeats: false,
    };

    fn flags_named(warnings: &[String]) -> Vec<&str> {
        warnings.iter().map(|w| w.split(" is not used").next().unwrap()).collect()
    }

    #[test]
    fn sessions_use_none_of_the_matrix_flags() {
        let phases = PhaseConfig { matrix: false, sessions: sessions(), ..PhaseConfig::default() };
        let w = unused(ALL, &phases);
        assert_eq!(flags_named(&w), ["--contexts", "--concurrency", "--duration"], "{w:?}");
        assert!(w[0].contains("not used by --sessions") && w[0].contains("add --matrix"), "{w:?}");
        // with the matrix, every flag is used
        assert!(unused(ALL, &PhaseConfig { matrix: true, ..phases }).is_empty());
    }

    #[test]
    fn each_phase_uses_its_own_flags() {
        let burst = PhaseConfig {
            matrix: false,
            burst: Some(BurstConfig { rounds: 1, ignore_eos: true }),
            ..PhaseConfig::default()
        };
        assert_eq!(flags_named(&unused(ALL, &burst)), ["--duration"]);
        let by_window = PhaseConfig { matrix: false, rate: rate(None), ..PhaseConfig::default() };
        assert_eq!(flags_named(&unused(ALL, &by_window)), ["--concurrency"]);
        let by_count = PhaseConfig { matrix: false, rate: rate(Some(10)), ..PhaseConfig::default() };
        let w = unused(ALL, &by_count);
        assert_eq!(flags_named(&w), ["--concurrency", "--duration"]);
        assert!(w[1].contains("--requests N"), "{w:?}");
        let both = PhaseConfig { matrix: false, rate: rate(None), sessions: sessions(), ..PhaseConfig::default() };
        assert!(unused(ALL, &both)[0].contains("not used by --request-rate and --sessions"));
        let matrix_only = MatrixFlags { repeats: true, warmup: true, ..MatrixFlags::default() };
        assert_eq!(flags_named(&unused(matrix_only, &by_window)), ["--warmup", "--repeats"]);
    }
}
