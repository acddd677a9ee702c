//! The over-capacity rule (methodology §1.3): which cells the server's KV cache
//! cannot hold, so they are written as `over_capacity` and never run.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use crate::Tokens;

/// How the KV need of a cell is estimated.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum CapacityRule {
    /// `C × (ctx + max_tokens)`: every request holds its own copy of the prompt.
    /// The reference tool's rule, so pages stay comparable.
    #[default]
    Reference,
    /// All C requests share one cached prompt: full prompt blocks once, and per
    /// request its partial last block plus its output, rounded up to blocks.
    PrefixShared,
}

impl fmt::Display for CapacityRule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            CapacityRule::Reference => "reference",
            CapacityRule::PrefixShared => "prefix-shared",
        })
    }
}

impl FromStr for CapacityRule {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "reference" => Ok(CapacityRule::Reference),
            "prefix-shared" => Ok(CapacityRule::PrefixShared),
            other => Err(format!("unknown capacity rule '{other}': use 'reference' or 'prefix-shared'")),
        }
    }
}

/// What the server can hold, as discovered or given by flags.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Limits {
    pub kv_budget: Option<Tokens>,
    pub block_size: Option<u64>,
    pub max_num_seqs: Option<u32>,
}

/// KV tokens a cell of `concurrency` streams at `ctx` with `max_tokens` output needs.
pub fn kv_need(
    rule: CapacityRule,
    ctx: Tokens,
    max_tokens: Tokens,
    concurrency: u32,
    block_size: Option<u64>,
) -> Tokens {
    let c = u64::from(concurrency);
    match rule {
        CapacityRule::Reference => Tokens(c.saturating_mul(ctx.0.saturating_add(max_tokens.0))),
        CapacityRule::PrefixShared => {
            let bs = block_size.filter(|&b| b > 0).unwrap_or(1);
            let shared = ctx.0 / bs * bs;
            let own = (ctx.0 % bs).saturating_add(max_tokens.0).div_ceil(bs).saturating_mul(bs);
            Tokens(shared.saturating_add(c.saturating_mul(own)))
        }
    }
}

/// Why a cell cannot run, or `None` when it fits.
pub fn over_capacity_reason(
    rule: CapacityRule,
    limits: &Limits,
    ctx: Tokens,
    max_tokens: Tokens,
    concurrency: u32,
) -> Option<String> {
    if let Some(max) = limits.max_num_seqs
        && concurrency > max
    {
        return Some(format!("concurrency {concurrency} is above max-num-seqs {max}"));
    }
    let budget = limits.kv_budget?;
    let need = kv_need(rule, ctx, max_tokens, concurrency, limits.block_size);
    (need > budget).then(|| format!("needs {need} KV tokens, the server has {budget}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    const SEED: Limits = Limits { kv_budget: Some(Tokens(12_582_912)), block_size: Some(256), max_num_seqs: Some(256) };

    #[test]
    fn published_page_cells() {
        let r = CapacityRule::Reference;
        let t = Tokens(4096);
        assert_eq!(
            over_capacity_reason(r, &SEED, Tokens(131_072), t, 128).as_deref(),
            Some("needs 17,301,504 KV tokens, the server has 12,582,912")
        );
        assert!(over_capacity_reason(r, &SEED, Tokens(131_072), t, 64).is_none());
        assert!(over_capacity_reason(r, &SEED, Tokens(257_984), t, 32).is_none());
        assert!(over_capacity_reason(r, &SEED, Tokens(257_984), t, 64).is_some());
        assert!(over_capacity_reason(r, &SEED, Tokens(65_536), t, 128).is_none());
    }

    #[test]
    fn prefix_shared_lets_more_cells_run() {
        let r = CapacityRule::PrefixShared;
        // 131,072 shared + 128 × 4,096 own = 655,360
        assert_eq!(kv_need(r, Tokens(131_072), Tokens(4096), 128, Some(256)), Tokens(655_360));
        // a partial last block is private to each request and rounded up
        assert_eq!(kv_need(r, Tokens(300), Tokens(10), 2, Some(256)), Tokens(256 + 2 * 256));
        assert!(over_capacity_reason(r, &SEED, Tokens(257_984), Tokens(4096), 128).is_none());
    }

    #[test]
    fn max_num_seqs_and_unknown_budget() {
        let limits = Limits { kv_budget: None, block_size: None, max_num_seqs: Some(8) };
        assert_eq!(
            over_capacity_reason(CapacityRule::Reference, &limits, Tokens(10), Tokens(10), 16).as_deref(),
            Some("concurrency 16 is above max-num-seqs 8")
        );
        assert!(over_capacity_reason(CapacityRule::Reference, &limits, Tokens(1 << 40), Tokens(10), 8).is_none());
    }

    #[test]
    fn rule_names_round_trip() {
        for r in [CapacityRule::Reference, CapacityRule::PrefixShared] {
            assert_eq!(r.to_string().parse::<CapacityRule>().unwrap(), r);
        }
        assert!("nope".parse::<CapacityRule>().unwrap_err().contains("prefix-shared"));
    }
}
