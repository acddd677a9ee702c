//! The capacity answer as people read it (methodology §11.3): one sentence per decode context,
//! made from a record's `capacity[]` and the settings it was judged under (SLO, capacity rule,
//! cost). Typed in, text out; every view (page, Markdown, terminal) prints these sentences.

use sm_core::answer::{BoundedBy, Capacity};
use sm_core::capacity::CapacityRule;
use sm_core::context::shown;
use sm_core::record::{CellStatus, RunRecord};
use sm_core::slo::{Bound, BoundName, Figure, Slo};

use crate::format;
use crate::meta;

/// What "users" means in every capacity sentence, said once under them.
pub const USERS_NOTE: &str = "Users are simultaneous, continuously generating streams: a conservative bound on chat \
users, who also spend time reading and typing.";

/// The settings a capacity sentence depends on.
#[derive(Debug, Clone, PartialEq)]
pub struct Terms<'a> {
    pub slo: &'a Slo,
    /// Whose prompts the KV bound counts: distinct users (`reference`) or one shared prompt.
    pub rule: CapacityRule,
    /// `--cost-per-hour`: without it nothing about cost is said.
    pub cost_per_hour_usd: Option<f64>,
}

/// Where the judgement of the cells came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SloSource {
    /// The run judged each cell from its requests' own figures while measuring it.
    Measured,
    /// Judged afterwards from the file's summary figures (an imported file, a run recorded before
    /// speedmatrix.run/1.1): no goodput, no capacity search.
    Summaries,
    /// As `Summaries`, from a file that gives each cell's medians only: the default SLO's bounds
    /// were taken at the median.
    Medians,
}

/// The capacity answer of a record as the page opens with it.
#[derive(Debug, Clone, PartialEq)]
pub struct Headline {
    /// One sentence per decode context, in the record's order.
    pub sentences: Vec<String>,
    /// Which SLO was used and how the cells were judged against it.
    pub slo_note: String,
    /// The SLO's floor on per-user tok/s, for the chart's line: `(limit, bound key)`.
    pub tok_s_limit: Option<(f64, BoundName)>,
}

/// The record's answer, or `None` when it was not judged (no SLO) or has no decode context.
pub fn headline(record: &RunRecord) -> Option<Headline> {
    let slo = record.settings.slo.as_ref()?;
    if record.capacity.is_empty() {
        return None;
    }
    let terms =
        Terms { slo, rule: record.settings.capacity_rule, cost_per_hour_usd: record.settings.cost_per_hour_usd };
    let source = match meta::text(record, meta::SLO_JUDGED_FROM) {
        Some(meta::MEDIANS) => SloSource::Medians,
        _ if meta::slo_from_summaries(record) => SloSource::Summaries,
        _ => SloSource::Measured,
    };
    Some(Headline {
        sentences: record.capacity.iter().map(|c| sentence(c, &terms)).collect(),
        slo_note: slo_note(slo, source),
        tok_s_limit: slo.bounds.iter().find(|b| b.figure == Figure::TokS).map(|b| (b.limit, b.key().into())),
    })
}

/// The SLO used, named as `--slo` takes it, and how the cells were judged against it.
pub fn slo_note(slo: &Slo, source: SloSource) -> String {
    let default = if *slo == Slo::default() { " (speedmatrix's default)" } else { "" };
    let how = match source {
        SloSource::Measured => "each cell judged from its own requests' figures (docs/methodology.md §11)",
        SloSource::Summaries => {
            "computed from the file's summary figures (each cell's p50, p90 and p99), not per request: \
             no goodput and no capacity search"
        }
        SloSource::Medians => {
            "computed from the file's summary figures, not per request (no goodput, no capacity search); the \
             file gives each cell's medians only, so speedmatrix's default SLO is taken at the median"
        }
    };
    format!("Service level (SLO): {slo}{default} — {} — {how}.", slo_words(slo))
}

/// One context's answer, e.g. "At 32K context: 46 users at ≥ 30 tok/s each (p10), TTFT p90 ≤ 2 s
/// — limited by TBT p99 (48 users miss it); $0.41 per million tokens, $0.22 per user-hour."
pub fn sentence(cap: &Capacity, terms: &Terms) -> String {
    let at = format!("At {} context", shown(&cap.label, cap.context));
    let quality = slo_words(terms.slo);
    let n = cap.max_users;
    let failed = cap.failed_cell;
    let body = match (&cap.bounded_by, n) {
        (BoundedBy::Slo(bound), 0) => format!(
            "fewer than {} at {quality} — {} already miss {} (no smaller level was measured)",
            users(failed.unwrap_or(1)),
            failed.map_or_else(|| "the smallest level measured".to_string(), users),
            bound_name(bound)
        ),
        (BoundedBy::Slo(bound), _) => {
            let miss = failed.map(|f| format!(" ({} miss it)", users(f))).unwrap_or_default();
            format!("{} at {quality} — limited by {}{miss}", users(n), bound_name(bound))
        }
        (BoundedBy::KvCache, 0) => format!("no user fits the KV cache ({})", whose_prompts(terms.rule)),
        (BoundedBy::KvCache, _) => match cap.fit_limit.filter(|&fit| fit > n) {
            // the next level measured did not fit, but levels between would: not searched
            Some(fit) => format!(
                "at least {} at {quality} — the next level does not fit the KV cache, which holds up to {} {} \
                 (--find-capacity measures the levels between)",
                users(n),
                format::count(u64::from(fit)),
                whose_prompts(terms.rule)
            ),
            None => format!("{} at {quality} — the KV cache holds no more {}", users(n), whose_prompts(terms.rule)),
        },
        (BoundedBy::MaxNumSeqs, 0) => "the server's max_num_seqs admits no user".to_string(),
        (BoundedBy::MaxNumSeqs, _) => {
            format!("{} at {quality} — the server runs no more sequences at once (max_num_seqs)", users(n))
        }
        (BoundedBy::MatrixTop, _) => format!("at least {} at {quality} (every level measured passed)", users(n)),
        (BoundedBy::Unmeasured, 0) => format!(
            "no answer — the first level{} could not be measured",
            failed.map(|f| format!(" ({})", users(f))).unwrap_or_default()
        ),
        (BoundedBy::Unmeasured, _) => {
            let next = failed.map(|f| format!(", {},", users(f))).unwrap_or_default();
            format!("at least {} at {quality} (the next level{next} could not be measured)", users(n))
        }
        (BoundedBy::None, _) => format!(
            "no level meets the SLO ({quality}): even {} {} it",
            users(failed.unwrap_or(1)),
            if failed.unwrap_or(1) == 1 { "misses" } else { "miss" }
        ),
    };
    format!("{at}: {body}{}.", cost(cap, terms))
}

/// "; $0.41 per million tokens, $0.22 per user-hour", only with `--cost-per-hour` and an answer.
fn cost(cap: &Capacity, terms: &Terms) -> String {
    if terms.cost_per_hour_usd.is_none() || cap.max_users == 0 {
        return String::new();
    }
    let parts = cost_parts(cap);
    if parts.is_empty() { String::new() } else { format!("; {}", parts.join(", ")) }
}

/// "$0.41 per million tokens", "$0.22 per user-hour": the answer's prices that it has, for every
/// view that shows them (the page, the site's runs list and comparison).
pub fn cost_parts(cap: &Capacity) -> Vec<String> {
    [
        cap.usd_per_million_tokens.map(|v| format!("{} per million tokens", usd(v))),
        cap.usd_per_user_hour.map(|v| format!("{} per user-hour", usd(v))),
    ]
    .into_iter()
    .flatten()
    .collect()
}

/// Whose prompts the KV bound is for, by the run's capacity rule.
fn whose_prompts(rule: CapacityRule) -> &'static str {
    match rule {
        CapacityRule::Reference => "distinct users, each with a prompt of its own",
        CapacityRule::PrefixShared => "users sharing one prompt",
    }
}

fn users(n: u32) -> String {
    if n == 1 { "1 user".to_string() } else { format!("{} users", format::count(u64::from(n))) }
}

/// Dollars: cents where they matter, two significant digits below ten cents ($0.0041).
pub fn usd(v: f64) -> String {
    if !v.is_finite() {
        return format::NONE.to_string();
    }
    if v >= 0.1 || v == 0.0 {
        let s = format!("{v:.2}");
        let (int, frac) = s.split_once('.').unwrap_or((&s, "00"));
        let int = int.parse::<u64>().map(format::count).unwrap_or_else(|_| int.to_string());
        return format!("${int}.{frac}");
    }
    let digits = (1.0 - v.log10().floor()).max(2.0) as usize;
    format!("${v:.digits$}")
}

/// The SLO in words: "≥ 30 tok/s each (p10), TTFT p90 ≤ 2 s, TBT p99 ≤ 100 ms".
pub fn slo_words(slo: &Slo) -> String {
    slo.bounds.iter().map(bound_words).collect::<Vec<_>>().join(", ")
}

fn bound_words(b: &Bound) -> String {
    match b.figure {
        Figure::TokS => format!("≥ {} tok/s each (p{})", trim(b.limit), b.percentile),
        Figure::Ttft => format!("TTFT p{} ≤ {}", b.percentile, duration(b.limit)),
        Figure::Ttfa => format!("first answer token p{} ≤ {}", b.percentile, duration(b.limit)),
        Figure::Ttftc => format!("first tool call p{} ≤ {}", b.percentile, duration(b.limit)),
        Figure::Tbt => format!("TBT p{} ≤ {}", b.percentile, duration(b.limit)),
    }
}

/// A bound's key as people name it: `tok_s_p10` → "per-user tok/s p10", `tbt_p99` → "TBT p99";
/// a key this version does not know is shown as it is.
pub fn bound_name(bound: &BoundName) -> String {
    match bound {
        BoundName::Key(k) => format!("{} p{}", figure_name(k.figure), k.percentile),
        // `slo`, or text no bound reads as: shown as the record wrote it
        BoundName::Whole | BoundName::Unknown(_) => bound.to_string(),
    }
}

fn figure_name(figure: Figure) -> &'static str {
    match figure {
        Figure::TokS => "per-user tok/s",
        Figure::Ttft => "TTFT",
        Figure::Ttfa => "TTFA",
        Figure::Ttftc => "TTFTC",
        Figure::Tbt => "TBT",
    }
}

/// A bound's limit or value in its unit: "30 tok/s", "2 s", "150 ms".
pub fn bound_value(bound: &BoundName, v: f64) -> String {
    if bound.figure() == Some(Figure::TokS) { format!("{} tok/s", format::fixed1(v)) } else { format::ms(v) }
}

/// A bound's limit as `--slo` gave it: "30 tok/s", "2 s", "150 ms".
pub fn limit_words(bound: &BoundName, limit: f64) -> String {
    if bound.figure() == Some(Figure::TokS) { format!("{} tok/s", trim(limit)) } else { duration(limit) }
}

/// A limit in ms as `--slo` would say it: whole seconds as seconds.
fn duration(ms: f64) -> String {
    if ms >= 1000.0 { format!("{} s", trim(ms / 1000.0)) } else { format!("{} ms", trim(ms)) }
}

fn trim(v: f64) -> String {
    let s = format!("{v:.3}");
    s.trim_end_matches('0').trim_end_matches('.').to_string()
}

/// Why a decode cell did or did not meet the SLO, for its tooltip: "meets the SLO" or "misses
/// the SLO: TTFT p90 2,345 ms (limit 2,000 ms)".
pub fn verdict(cell: &sm_core::record::DecodeCell) -> Option<String> {
    if cell.status() != CellStatus::Valid {
        return None;
    }
    match cell.slo_met? {
        true => Some("meets the SLO".to_string()),
        false => {
            let missed: Vec<String> = cell
                .slo_bounds
                .iter()
                .filter(|b| !b.holds)
                .map(|b| {
                    let value = b.value.map_or_else(|| "not measured".to_string(), |v| bound_value(&b.bound, v));
                    format!("{} {value} (limit {})", bound_name(&b.bound), limit_words(&b.bound, b.limit))
                })
                .collect();
            Some(format!("misses the SLO: {}", missed.join("; ")))
        }
    }
}

#[cfg(test)]
mod tests;
