//! The replay section (methodology §13.5) as the site accepts it: scales and levels bounded by
//! what `--time-scale` and the capacity search make, each level a rate level's figures plus its
//! prefix cache and SLO verdict, the capacity answer a bracket of scales the run measured. Its
//! texts (the trace's name, the verdicts' reasons) are bounded here and escaped where shown.

use sm_core::figures::Unit;
use sm_core::phases::rate::LevelStatus;
use sm_core::phases::replay::{PrefixReuse, ReplayCapacity, ReplayLevel, ReplayPhase, ReplaySettings};
use sm_core::record::RunRecord;

use super::super::{MAX_CONTEXT_TOKENS, MAX_S, Refusal, at_most, bound, figure};

/// Scales one `--time-scale` list may hold (as every list flag of `run`).
pub(super) const MAX_TIME_SCALES: usize = 32;
/// Scales the capacity search adds: doubling from 1/64 to 64 and bisecting to ±5 % takes under
/// 30; this leaves room for a resumed run's repeats.
pub(super) const MAX_SEARCHED_SCALES: usize = 64;
/// Levels of a replay: the scales asked for and the searched ones.
pub const MAX_REPLAY_LEVELS: usize = MAX_TIME_SCALES + MAX_SEARCHED_SCALES;
/// The largest time scale taken: a trace sent a million times as fast is a typo.
const MAX_TIME_SCALE: f64 = 1e6;
/// The largest share of the ideal prefix reuse taken, %: above 100 where the cache kept prefixes
/// from an earlier level of the same trace, never by orders of magnitude.
const MAX_REACHED_PCT: f64 = 1e6;
/// Bytes of the trace's file name (without its directories) and of its hash (FNV-1a 64, hex).
const MAX_FILE_NAME_BYTES: usize = 255;
const MAX_HASH_BYTES: usize = 64;
/// Bytes of what limited a scale: the tool words it in a few ("TTFT p90", "saturated (a queue
/// grew)"), and the runs list shows the answer's in each row's title, so it costs little there.
pub const MAX_LIMITED_BY_BYTES: usize = 256;

pub(super) fn limits(record: &RunRecord) -> Result<(), Refusal> {
    let Some(p) = &record.phases.replay else { return Ok(()) };
    at_most("replay levels", "MAX_REPLAY_LEVELS", p.levels.len(), MAX_REPLAY_LEVELS)?;
    at_most("time scales", "MAX_TIME_SCALES", p.settings.time_scales.len(), MAX_TIME_SCALES)?;
    let file = &p.settings.file;
    let long = |path: &str, found: usize| Refusal::Incoherent {
        at: "phases.replay.settings.file".into(),
        why: format!("{path} is {found} bytes long, more than a file's"),
    };
    if file.name.len() > MAX_FILE_NAME_BYTES {
        return Err(long("name", file.name.len()));
    }
    if file.hash.len() > MAX_HASH_BYTES || !file.hash.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err(long("hash (hex digits)", file.hash.len()));
    }
    let verdicts = p.levels.iter().filter_map(|l| l.verdict.as_ref()?.limited_by.as_deref());
    let answer = p.capacity.as_ref().and_then(|c| c.limited_by.as_deref());
    match verdicts.chain(answer).map(str::len).max() {
        Some(n) if n > MAX_LIMITED_BY_BYTES => Err(Refusal::Incoherent {
            at: "phases.replay".into(),
            why: format!(
                "a limited_by of {n} bytes; the site takes at most {MAX_LIMITED_BY_BYTES} (MAX_LIMITED_BY_BYTES)"
            ),
        }),
        _ => Ok(()),
    }
}

pub(super) fn figures(record: &RunRecord) -> Result<(), Refusal> {
    let Some(p) = &record.phases.replay else { return Ok(()) };
    settings(&p.settings)?;
    for l in &p.levels {
        level(l)?;
    }
    p.capacity.as_ref().map_or(Ok(()), |c| capacity(p, c))
}

/// A time scale: above 0 (0 would send the whole trace at once, a rate phase's `inf`).
fn time_scale(at: &str, v: f64) -> Result<(), Refusal> {
    figure(at, "time_scale", Some(v), MAX_TIME_SCALE)?;
    if v > 0.0 { Ok(()) } else { incoherent(at, "a time scale must be above 0") }
}

fn incoherent(at: &str, why: &str) -> Result<(), Refusal> {
    Err(Refusal::Incoherent { at: at.to_string(), why: why.to_string() })
}

fn settings(s: &ReplaySettings) -> Result<(), Refusal> {
    let at = "phases.replay.settings";
    s.time_scales.iter().try_for_each(|&v| time_scale(at, v))?;
    for (field, v) in
        [("start_s", s.start_s), ("duration_s", s.duration_s), ("recorded_span_s", Some(s.recorded_span_s))]
    {
        figure(at, field, v, MAX_S)?;
    }
    figure(at, "drain_max_s", Some(s.drain_max_s), MAX_S)?;
    figure(at, "recorded_rps", s.recorded_rps, bound(Unit::ReqPerS))?;
    let tokens = [("block_tokens", s.block_tokens.map(u64::from)), ("kv_block_tokens", s.kv_block_tokens)];
    for (field, v) in tokens.into_iter().chain([("max_tokens", Some(s.max_tokens))]) {
        figure(at, field, v.map(|n| n as f64), MAX_CONTEXT_TOKENS)?;
        if v == Some(0) {
            return incoherent(at, &format!("{field} must be at least 1"));
        }
    }
    if s.requests == 0 || s.max_concurrency == Some(0) {
        return incoherent(at, "requests and max_concurrency must be at least 1");
    }
    Ok(())
}

fn level(l: &ReplayLevel) -> Result<(), Refusal> {
    let at = format!("phases.replay level {}×", l.time_scale);
    time_scale(&at, l.time_scale)?;
    super::rate_level(&at, &l.level)?;
    let status = l.level.status;
    let carried = [("prefix", l.prefix.is_some()), ("verdict", l.verdict.is_some())];
    if let Some((field, _)) = carried.iter().find(|(_, has)| *has).filter(|_| status != LevelStatus::Measured) {
        let status = if status == LevelStatus::Skipped { "skipped" } else { "an error" };
        return Err(Refusal::FigureOfInvalid { at, status, field });
    }
    if let Some(p) = &l.prefix {
        prefix(&at, p, l.level.counts.completed)?;
    }
    let Some(v) = &l.verdict else { return Ok(()) };
    if v.met == v.limited_by.is_some() {
        return incoherent(&at, "a verdict names what limited it exactly when it is not met");
    }
    super::super::answer::bounds(&at, "bounds in one replay level's verdict", &v.bounds)
}

/// The cache's counts are of the completed requests: none above the prompt, nor the requests.
fn prefix(at: &str, p: &PrefixReuse, completed: u64) -> Result<(), Refusal> {
    figure(at, "reached_pct", p.reached_pct, MAX_REACHED_PCT)?;
    figure(at, "prompt_tokens", Some(p.prompt_tokens as f64), MAX_CONTEXT_TOKENS)?;
    if p.cached_tokens > p.prompt_tokens || p.ideal_tokens.is_some_and(|i| i > p.prompt_tokens) {
        return incoherent(at, "more cached or ideal tokens than the prompts held");
    }
    if p.reported > p.requests || p.requests > completed {
        return incoherent(at, "the prefix counts more requests than completed");
    }
    Ok(())
}

/// The answer is a bracket of scales the run judged: the largest met below the smallest failed.
fn capacity(p: &ReplayPhase, c: &ReplayCapacity) -> Result<(), Refusal> {
    let at = "phases.replay.capacity";
    let judged = |s: f64, met: bool| {
        p.levels.iter().any(|l| l.time_scale == s && l.verdict.as_ref().is_some_and(|v| v.met == met))
    };
    if let Some(s) = c.max_scale {
        time_scale(at, s)?;
        if !judged(s, true) {
            return incoherent(at, "max_scale is not a scale of the replay that met the SLO");
        }
    }
    if let Some(f) = c.failed_scale {
        time_scale(at, f)?;
        if !judged(f, false) {
            return incoherent(at, "failed_scale is not a scale of the replay that missed the SLO");
        }
    }
    if c.max_scale.zip(c.failed_scale).is_some_and(|(s, f)| s >= f) {
        return incoherent(at, "max_scale must be below failed_scale");
    }
    figure(at, "max_rps", c.max_rps, bound(Unit::ReqPerS))
}

#[cfg(test)]
mod tests;
