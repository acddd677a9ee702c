//! Whether the server kept up with a level (methodology §13.1, *saturated*): a pure function over
//! what each request waited for its first token. A server that keeps up starts each request about
//! as soon as it is due, however long its answer; one that does not makes the requests queue — at
//! the server, or at the client's cap — so that later requests wait longer and longer. Only
//! requests that got a first token are evidence: a request the client cut before it started, or
//! one that failed (a fault, not load), says nothing about the queue.

use sm_core::phases::rate::Saturation;
use sm_core::stats::median;

/// A backlog (requests behind) above this share of the requests judged, and of at least
/// [`BACKLOG_MIN`] requests, makes the level saturated.
pub const BACKLOG_PCT: f64 = 10.0;
pub const BACKLOG_MIN: usize = 2;
/// Fewer requests with a first token than this cannot show a trend: the verdict is unknown.
pub const MIN_JUDGED: usize = 4;

/// One request as the test reads it, seconds after the level's start.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Waited {
    pub due: f64,
    /// Its first token; `None` when it never got one.
    pub first_token: Option<f64>,
    /// Its end, when it completed.
    pub end: Option<f64>,
    /// It failed (a fault): never evidence of a queue.
    pub failed: bool,
}

/// The verdict and the share of the judged requests that were behind (`None` with too few).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Judged {
    pub saturation: Saturation,
    pub backlog_pct: Option<f64>,
}

/// The verdict over a level's requests (in due order) of which `cut` the client cut or never sent.
///
/// Of the requests that got a first token and did not fail (in due order), the first quarter
/// (rounded up) gives the base wait w₀ (the median of first token − due) and the service time s₀
/// (the median of end − first token of those that completed). A request is **behind** when it
/// waited longer than w₀ + max(w₀, s₀): it queued for more than a typical request takes. The level
/// is saturated when more than [`BACKLOG_PCT`] % and at least [`BACKLOG_MIN`] of them are behind;
/// otherwise it kept up, unless the client cut requests (then unknown: they might have shown a
/// queue) or fewer than [`MIN_JUDGED`] requests could be judged.
pub fn judge(requests: &[Waited], cut: u64) -> Judged {
    let started: Vec<&Waited> = requests.iter().filter(|r| !r.failed && r.first_token.is_some()).collect();
    let wait = |r: &Waited| r.first_token.map_or(0.0, |f| (f - r.due).max(0.0));
    if started.len() < MIN_JUDGED {
        return Judged { saturation: Saturation::Unknown, backlog_pct: None };
    }
    let early = &started[..started.len().div_ceil(4)];
    let w0 = median(&early.iter().map(|r| wait(r)).collect::<Vec<_>>()).unwrap_or(0.0);
    let service: Vec<f64> = early.iter().filter_map(|r| Some(r.end? - r.first_token?)).collect();
    // no early request completed and the client cut requests: how long a request takes is unknown,
    // so a longer wait cannot be told from a queue (the cut requests' own leftovers may hold the
    // server), and the cut ones say nothing
    let Some(s0) = median(&service).or((cut == 0).then_some(0.0)) else {
        return Judged { saturation: Saturation::Unknown, backlog_pct: None };
    };
    let limit = w0 + w0.max(s0);
    let behind = started.iter().filter(|r| wait(r) > limit).count();
    let pct = behind as f64 * 100.0 / started.len() as f64;
    let saturation = if pct > BACKLOG_PCT && behind >= BACKLOG_MIN {
        Saturation::Saturated
    } else if cut > 0 {
        Saturation::Unknown
    } else {
        Saturation::KeptUp
    };
    Judged { saturation, backlog_pct: Some(pct) }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn done(due: f64, first: f64, end: f64) -> Waited {
        Waited { due, first_token: Some(first), end: Some(end), failed: false }
    }

    fn verdict(requests: &[Waited], cut: u64) -> Saturation {
        judge(requests, cut).saturation
    }

    #[test]
    fn a_server_that_keeps_up_is_not_saturated_however_long_the_answers() {
        // one request every 0.1 s, first token at once, answers from 0.1 s to 40 s long
        let r: Vec<Waited> =
            (0..40).map(|i| i as f64 * 0.1).map(|d| done(d, d + 0.01, d + 0.1 + (d * 10.0) % 40.0)).collect();
        assert_eq!(judge(&r, 0), Judged { saturation: Saturation::KeptUp, backlog_pct: Some(0.0) });
        // one straggler of 40 is noise, not a backlog
        let mut one = r.clone();
        one[39].first_token = Some(one[39].due + 30.0);
        assert_eq!(judge(&one, 0).backlog_pct, Some(2.5));
        assert_eq!(verdict(&one, 0), Saturation::KeptUp);
    }

    #[test]
    fn a_growing_queue_is_saturated() {
        // one started every 0.2 s while due every 0.1 s, each 0.3 s long
        let r: Vec<Waited> = (0..40)
            .map(|i| {
                let start = 0.2 * i as f64;
                done(0.1 * i as f64, start + 0.01, start + 0.3)
            })
            .collect();
        let j = judge(&r, 0);
        assert_eq!(j.saturation, Saturation::Saturated);
        assert!(j.backlog_pct.unwrap() > 30.0, "{j:?}");
        // cut requests do not hide a queue the others show
        assert_eq!(verdict(&r[..30], 10), Saturation::Saturated);
    }

    #[test]
    fn requests_the_client_cut_are_never_behind_and_make_a_calm_level_unknown() {
        // ten started at once and streamed; ten more cut before their first token
        let mut r: Vec<Waited> = (0..10).map(|i| i as f64 * 0.5).map(|d| done(d, d + 0.01, d + 9.0)).collect();
        r.extend((10..20).map(|i| Waited { due: i as f64 * 0.5, first_token: None, end: None, failed: false }));
        let j = judge(&r, 10);
        assert_eq!(j, Judged { saturation: Saturation::Unknown, backlog_pct: Some(0.0) });
        // the same ten without a cut: kept up
        assert_eq!(verdict(&r[..10], 0), Saturation::KeptUp);
    }

    #[test]
    fn cut_requests_of_unknown_length_cannot_show_a_queue() {
        // four long answers, every one cut at the level's end: the later ones waited 60 ms
        // against the first one's 20 ms (CI: the previous level's cut requests still held the server)
        let r: Vec<Waited> = [(0.0, 0.02), (0.02, 0.08), (0.04, 0.10), (0.06, 0.12)]
            .iter()
            .map(|&(due, first)| Waited { due, first_token: Some(first), end: None, failed: false })
            .collect();
        assert_eq!(judge(&r, 4), Judged { saturation: Saturation::Unknown, backlog_pct: None });
        // the same waits with the answers' length known: a queue
        let known: Vec<Waited> = r.iter().map(|w| Waited { end: w.first_token.map(|f| f + 0.01), ..*w }).collect();
        assert_eq!(verdict(&known, 4), Saturation::Saturated);
    }

    #[test]
    fn failures_are_a_fault_not_a_queue() {
        // three of twenty stalled (never ended); the rest started at once
        let r: Vec<Waited> = (0..20)
            .map(|i| {
                let d = i as f64 * 0.25;
                if i % 7 == 3 {
                    Waited { failed: true, end: None, ..done(d, d + 0.01, 0.0) }
                } else {
                    done(d, d + 0.01, d + 1.0)
                }
            })
            .collect();
        assert_eq!(judge(&r, 0), Judged { saturation: Saturation::KeptUp, backlog_pct: Some(0.0) });
        // a failure before any token says nothing either
        let mut r2 = r.clone();
        r2.push(Waited { due: 6.0, first_token: None, end: None, failed: true });
        assert_eq!(verdict(&r2, 0), Saturation::KeptUp);
    }

    #[test]
    fn too_few_requests_to_judge_are_unknown() {
        let r = [done(0.0, 0.01, 1.0), done(0.5, 0.51, 1.5), done(1.0, 5.0, 6.0)];
        assert_eq!(judge(&r, 0), Judged { saturation: Saturation::Unknown, backlog_pct: None });
        assert_eq!(verdict(&[], 0), Saturation::Unknown);
    }
}
