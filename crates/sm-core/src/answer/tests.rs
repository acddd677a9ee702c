use super::*;
use crate::capacity::CapacityRule;

fn pass(c: u32) -> (u32, Level) {
    (c, Level::Pass)
}
fn fail(c: u32) -> (u32, Level) {
    (c, Level::Fail("tok_s_p10".into()))
}

const KV64: Option<FitLimit> = Some(FitLimit { max: 64, by: ServerLimit::KvCache });

#[test]
fn the_answer_is_the_last_pass_below_the_first_failure() {
    let slo = BoundedBy::Slo("tok_s_p10".into());
    assert_eq!(answer(&[pass(1), pass(4), fail(16), pass(32)], KV64), (4, slo.clone(), Some(16)));
    assert_eq!(answer(&[fail(1), pass(2)], KV64), (0, BoundedBy::None, Some(1)));
    assert_eq!(answer(&[fail(4)], None), (0, slo, Some(4)), "C=1 was not measured: not 'none'");
    assert_eq!(answer(&[pass(1), (2, Level::Unmeasured)], None), (1, BoundedBy::Unmeasured, Some(2)));
    assert_eq!(answer(&[pass(1), pass(8)], None), (8, BoundedBy::MatrixTop, None));
    assert_eq!(answer(&[pass(1), pass(8)], KV64), (8, BoundedBy::MatrixTop, None));
    assert_eq!(answer(&[pass(1), pass(32), (128, Level::Unfit)], KV64), (32, BoundedBy::KvCache, None));
    assert_eq!(answer(&[pass(1), pass(64)], KV64), (64, BoundedBy::KvCache, None));
    let seqs = Some(FitLimit { max: 8, by: ServerLimit::MaxNumSeqs });
    assert_eq!(answer(&[pass(8), (16, Level::Unfit)], seqs), (8, BoundedBy::MaxNumSeqs, None));
}

#[test]
fn bounded_by_reads_back() {
    for b in [BoundedBy::Slo("ttft_p90".into()), BoundedBy::KvCache, BoundedBy::MaxNumSeqs, BoundedBy::MatrixTop]
        .into_iter()
        .chain([BoundedBy::Unmeasured, BoundedBy::None])
    {
        let json = serde_json::to_string(&b).unwrap();
        assert_eq!(serde_json::from_str::<BoundedBy>(&json).unwrap(), b, "{json}");
    }
    assert_eq!(serde_json::to_string(&BoundedBy::Slo("tbt_p99".into())).unwrap(), "\"slo:tbt_p99\"");
    assert!("slo:".parse::<BoundedBy>().is_err() && "kv".parse::<BoundedBy>().is_err());
}

/// Drives [`next_level`] against a server whose true capacity is `truth` (and that fits up to
/// `fit`), as the runner does, and returns the answer it settles on and the levels it measured.
fn search(matrix: &[u32], truth: u32, fit: Option<FitLimit>) -> (u32, BoundedBy, Vec<u32>) {
    let judge = |c: u32| match fit {
        Some(f) if c > f.max => (c, Level::Unfit),
        _ if c <= truth => pass(c),
        _ => fail(c),
    };
    let mut levels: Vec<(u32, Level)> = matrix.iter().map(|&c| judge(c)).collect();
    let top = *matrix.iter().max().unwrap();
    let mut searched = Vec::new();
    while let Some(c) = next_level(&levels, fit, top) {
        assert!(!levels.iter().any(|(l, _)| *l == c), "{c} measured twice");
        assert!(fit.is_none_or(|f| c <= f.max), "{c} does not fit");
        levels.push(judge(c));
        searched.push(c);
        assert!(searched.len() < 40, "the search ends");
    }
    let (max, by, _) = answer(&levels, fit);
    (max, by, searched)
}

#[test]
fn the_search_finds_the_capacity_to_within_five_percent() {
    for truth in [1, 2, 3, 5, 7, 13, 31, 45, 63, 100, 200, 777] {
        let (max, by, _) = search(&[1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024], truth, None);
        assert!(max <= truth && truth - max <= tolerance(max), "truth {truth}: found {max}");
        assert_eq!(by, BoundedBy::Slo("tok_s_p10".into()));
        if truth < 40 {
            assert_eq!(max, truth, "below 40 streams the answer is exact");
        }
    }
}

#[test]
fn the_search_stops_at_what_fits_and_probes_upward() {
    // every level passes up to the KV limit of 97: the limit itself is measured
    let fit = Some(FitLimit { max: 97, by: ServerLimit::KvCache });
    let (max, by, searched) = search(&[1, 16, 64, 128], 1000, fit);
    assert_eq!((max, by), (97, BoundedBy::KvCache));
    assert_eq!(searched, [97], "doubling from 64 is clamped to the limit");
    // the whole matrix passes, no limit known: doubling, up to 8× the top
    let (max, by, searched) = search(&[1, 4], 1000, None);
    assert_eq!((max, by), (32, BoundedBy::MatrixTop));
    assert_eq!(searched, [8, 16, 32]);
    // doubling overshoots, then bisection
    let (max, by, searched) = search(&[1, 4], 11, None);
    assert_eq!((max, by), (11, BoundedBy::Slo("tok_s_p10".into())));
    assert_eq!(searched[..2], [8, 16]);
    // a level that could not be measured stops the search there
    let levels = [pass(1), (8, Level::Unmeasured)];
    assert_eq!(next_level(&levels, None, 8), None);
    // C=1 fails: nothing to search below
    assert_eq!(next_level(&[fail(1), fail(2)], None, 2), None);
    // the lowest level fails: the search goes down to 1
    let (max, by, _) = search(&[8], 0, None);
    assert_eq!((max, by), (0, BoundedBy::None));
}

#[test]
fn what_fits_follows_the_plan_rule() {
    let limits = Limits { kv_budget: Some(Tokens(12_582_912)), block_size: Some(256), max_num_seqs: Some(256) };
    let fit = fit_limit(CapacityRule::Reference, &limits, Tokens(131_072), Tokens(4096)).unwrap();
    // 12,582,912 / 135,168 = 93.09
    assert_eq!(fit, FitLimit { max: 93, by: ServerLimit::KvCache });
    let fit = fit_limit(CapacityRule::Reference, &limits, Tokens(1024), Tokens(4096)).unwrap();
    assert_eq!(fit, FitLimit { max: 256, by: ServerLimit::MaxNumSeqs });
    let shared = fit_limit(CapacityRule::PrefixShared, &limits, Tokens(131_072), Tokens(4096)).unwrap();
    assert_eq!(shared.max, 256, "sharing one prompt, max_num_seqs binds first");
    assert_eq!(fit_limit(CapacityRule::Reference, &Limits::default(), Tokens(1024), Tokens(1)), None);
    let tiny = Limits { kv_budget: Some(Tokens(100)), block_size: None, max_num_seqs: None };
    assert_eq!(fit_limit(CapacityRule::Reference, &tiny, Tokens(1024), Tokens(1)).unwrap().max, 0);
}

#[test]
fn costs() {
    // $10/h at 1000 tok/s = 3.6 M tokens per hour
    assert_eq!(usd_per_million_tokens(10.0, 1000.0), Some(2.7778), "10 / 3.6, to 1/100 of a cent");
    assert_eq!(usd_per_million_tokens(10.0, 0.0), None);
}
