//! The flags of issue 17 §3 a new user under load (mixed prefill, methodology §13.3).

use std::time::Duration;

use anyhow::Result;
use sm_bench::{MixedLevelSpec, MixedPrefillConfig};
use sm_core::Tokens;
use sm_core::phases::mixed::{MAX_LEVELS, MAX_PROBES};
use sm_core::record::RunRecord;
use sm_core::units::parse_tokens;

use crate::limits::{CountLimit, DurationLimit};

/// CTX of `CTX@BG`.
const PROMPT: CountLimit = CountLimit {
    flag: "--mixed-prefill",
    min: 128,
    max: 16 << 20,
    hint: "the fresh prompt's tokens before @, e.g. 8k@4",
};
/// BG of `CTX@BG`.
const BACKGROUND: CountLimit =
    CountLimit { flag: "--mixed-prefill", min: 1, max: 4096, hint: "background streams after @, e.g. 8k@4" };
const PROBES: CountLimit = CountLimit {
    flag: "--mixed-prefill-probes",
    min: 1,
    max: MAX_PROBES as u64,
    hint: "fresh prompts sent per level; the default is 3",
};
const WINDOW: DurationLimit = DurationLimit {
    flag: "--mixed-prefill-window",
    min: Duration::from_millis(200),
    max: Duration::from_secs(600),
    zero: None,
    hint: "the background's before and after intervals around each probe; the default is 2s",
};
const DEFAULT_PROBES: u32 = 3;
const DEFAULT_WINDOW: Duration = Duration::from_secs(2);

/// `CTX@BG[,CTX@BG…]` as parsed.
#[derive(Debug, Clone, PartialEq)]
pub struct Levels(pub Vec<MixedLevelSpec>);

#[derive(Debug, Default, clap::Args)]
pub struct MixedArgs {
    /// A new user under load: while BG streams decode at the run's first --contexts value, send a
    /// fresh (uncached) prompt of CTX tokens and compare its TTFT with the same prompt's on the
    /// idle server. CTX@BG, e.g. 8k@4; a comma list measures several levels (8k@4,32k@8).
    #[arg(long, value_name = "CTX@BG", value_parser = levels)]
    pub(crate) mixed_prefill: Option<Levels>,
    /// Fresh prompts sent per --mixed-prefill level (at most 20), each once the background decodes
    /// steadily again [default: 3].
    #[arg(long, value_name = "N", value_parser = |s: &str| PROBES.parse_u32(s))]
    pub(crate) mixed_prefill_probes: Option<u32>,
    /// The background's before and after intervals around each --mixed-prefill probe [default: 2s].
    #[arg(long, value_name = "DURATION", value_parser = |s: &str| WINDOW.parse(s))]
    pub(crate) mixed_prefill_window: Option<Duration>,
}

impl MixedArgs {
    /// Whether any of this phase's flags was given.
    pub(crate) fn given(&self) -> bool {
        self.mixed_prefill.is_some() || self.mixed_prefill_probes.is_some() || self.mixed_prefill_window.is_some()
    }

    /// The phase's settings, or `None` when it does not run.
    pub(crate) fn resolve(&self, resumed: Option<&RunRecord>) -> Result<Option<MixedPrefillConfig>> {
        let Some(Levels(levels)) = &self.mixed_prefill else {
            anyhow::ensure!(
                self.mixed_prefill_probes.is_none() && self.mixed_prefill_window.is_none(),
                "--mixed-prefill-probes and --mixed-prefill-window go with --mixed-prefill CTX@BG (e.g. --mixed-prefill 8k@4)"
            );
            return Ok(resumed.and_then(from_record));
        };
        Ok(Some(MixedPrefillConfig {
            levels: levels.clone(),
            probes: self.mixed_prefill_probes.unwrap_or(DEFAULT_PROBES),
            window: self.mixed_prefill_window.unwrap_or(DEFAULT_WINDOW),
        }))
    }
}

/// A resumed run's settings, from its recorded levels.
fn from_record(record: &RunRecord) -> Option<MixedPrefillConfig> {
    let section = record.phases.mixed_prefill.as_ref()?;
    let first = section.levels.first()?;
    let levels = section
        .levels
        .iter()
        .map(|l| MixedLevelSpec { prompt_context: Tokens(l.prompt_context), background: l.background })
        .collect();
    let window = Duration::from_secs_f64(first.window_s).clamp(WINDOW.min, WINDOW.max);
    Some(MixedPrefillConfig { levels, probes: first.probes_planned.clamp(1, MAX_PROBES), window })
}

fn levels(text: &str) -> Result<Levels, String> {
    let mut out: Vec<MixedLevelSpec> = Vec::new();
    for item in text.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        let level = level(item)?;
        if out.contains(&level) {
            return Err(format!("{item} is given twice"));
        }
        out.push(level);
    }
    if out.is_empty() {
        return Err("give at least one CTX@BG, e.g. 8k@4".into());
    }
    if out.len() > MAX_LEVELS {
        return Err(format!("{} levels are too many: give at most {MAX_LEVELS}", out.len()));
    }
    Ok(Levels(out))
}

fn level(item: &str) -> Result<MixedLevelSpec, String> {
    let Some((ctx, bg)) = item.split_once('@') else {
        return Err(format!(
            "{item} has no @: give the fresh prompt's tokens and the background streams as CTX@BG, e.g. {item}@4"
        ));
    };
    let prompt = parse_tokens(ctx.trim())
        .map_err(|e| format!("{item}: the prompt length before @ is not a token count ({e}); e.g. 8k@4"))?;
    PROMPT.check(prompt.0).map_err(|e| format!("{item}: {e}"))?;
    let background = BACKGROUND.parse_u32(bg).map_err(|e| format!("{item}: the background streams after @: {e}"))?;
    Ok(MixedLevelSpec { prompt_context: prompt, background })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn levels_parse_and_bad_ones_say_what_to_give() {
        let ok = levels("8k@4, 64k@8").unwrap();
        assert_eq!(ok.0[0], MixedLevelSpec { prompt_context: Tokens(8192), background: 4 });
        assert_eq!(ok.0[1], MixedLevelSpec { prompt_context: Tokens(65536), background: 8 });
        for (bad, says) in [
            ("64k", "has no @"),
            ("x@8", "not a token count"),
            ("8k@0", "too small"),
            ("8k@x", "background streams after @"),
            ("8k@4,8k@4", "twice"),
            ("16@4", "too small"),
            ("", "at least one"),
        ] {
            let e = levels(bad).unwrap_err();
            assert!(e.contains(says), "{bad}: {e}");
        }
    }
}
