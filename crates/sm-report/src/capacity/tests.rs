use super::*;

fn slo() -> Slo {
    "tok_s_p10>=30,ttft_p90<=2s,tbt_p99<=100ms".parse().unwrap()
}

fn cap(max_users: u32, bounded_by: BoundedBy, failed_cell: Option<u32>) -> Capacity {
    Capacity {
        context: 32_768,
        label: "32K".into(),
        max_users,
        bounded_by,
        cell: (max_users > 0).then_some(max_users),
        failed_cell,
        fit_limit: None,
        usd_per_user_hour: (max_users > 0).then(|| 10.0 / f64::from(max_users)),
        usd_per_million_tokens: (max_users > 0).then_some(0.4123),
    }
}

fn said(c: &Capacity, rule: CapacityRule, cost: Option<f64>) -> String {
    sentence(c, &Terms { slo: &slo(), rule, cost_per_hour_usd: cost })
}

const Q: &str = "≥ 30 tok/s each (p10), TTFT p90 ≤ 2 s, TBT p99 ≤ 100 ms";

#[test]
fn every_bound_reads_as_a_sentence_without_cost() {
    let r = CapacityRule::Reference;
    let cases = [
        (
            cap(46, BoundedBy::Slo("tbt_p99".into()), Some(48)),
            format!("At 32K context: 46 users at {Q} — limited by TBT p99 (48 users miss it)."),
        ),
        (
            cap(0, BoundedBy::Slo("tok_s_p10".into()), Some(4)),
            format!(
                "At 32K context: fewer than 4 users at {Q} — 4 users already miss per-user tok/s p10 (no smaller \
                 level was measured)."
            ),
        ),
        (
            cap(64, BoundedBy::KvCache, None),
            format!(
                "At 32K context: 64 users at {Q} — the KV cache holds no more distinct users, each with a prompt of \
                 its own."
            ),
        ),
        (
            cap(0, BoundedBy::KvCache, None),
            "At 32K context: no user fits the KV cache (distinct users, each with a prompt of its own).".into(),
        ),
        (
            cap(8, BoundedBy::MaxNumSeqs, None),
            format!("At 32K context: 8 users at {Q} — the server runs no more sequences at once (max_num_seqs)."),
        ),
        (
            cap(16, BoundedBy::MatrixTop, None),
            format!("At 32K context: at least 16 users at {Q} (every level measured passed)."),
        ),
        (
            cap(2, BoundedBy::Unmeasured, Some(4)),
            format!("At 32K context: at least 2 users at {Q} (the next level, 4 users, could not be measured)."),
        ),
        (
            cap(0, BoundedBy::Unmeasured, Some(1)),
            "At 32K context: no answer — the first level (1 user) could not be measured.".into(),
        ),
        (
            cap(0, BoundedBy::None, Some(1)),
            format!("At 32K context: no level meets the SLO ({Q}): even 1 user misses it."),
        ),
    ];
    for (c, want) in cases {
        assert_eq!(said(&c, r, None), want, "{}", c.bounded_by);
        assert!(!said(&c, r, None).contains('$'), "no cost without --cost-per-hour");
    }
}

/// The next matrix level did not fit, but levels between would: the answer is a lower bound and
/// says how far the cache goes.
#[test]
fn an_unsearched_kv_bound_says_how_many_would_fit() {
    let c = Capacity { fit_limit: Some(93), ..cap(64, BoundedBy::KvCache, None) };
    assert_eq!(
        said(&c, CapacityRule::Reference, None),
        format!(
            "At 32K context: at least 64 users at {Q} — the next level does not fit the KV cache, which holds up to \
             93 distinct users, each with a prompt of its own (--find-capacity measures the levels between)."
        )
    );
    let searched = Capacity { fit_limit: Some(64), ..cap(64, BoundedBy::KvCache, None) };
    assert!(said(&searched, CapacityRule::Reference, None).contains("— the KV cache holds no more distinct users"));
}

#[test]
fn the_kv_bound_says_whose_prompts_it_counts() {
    let c = cap(64, BoundedBy::KvCache, None);
    assert!(
        said(&c, CapacityRule::PrefixShared, None).ends_with("the KV cache holds no more users sharing one prompt.")
    );
    assert!(said(&c, CapacityRule::Reference, None).contains("distinct users, each with a prompt of its own"));
}

#[test]
fn cost_is_said_only_with_a_price_and_an_answer() {
    let c = cap(40, BoundedBy::Slo("ttft_p90".into()), Some(48));
    assert_eq!(
        said(&c, CapacityRule::Reference, Some(10.0)),
        format!(
            "At 32K context: 40 users at {Q} — limited by TTFT p90 (48 users miss it); $0.41 per million tokens, $0.25 per user-hour."
        )
    );
    let top = cap(16, BoundedBy::MatrixTop, None);
    assert!(
        said(&top, CapacityRule::Reference, Some(10.0))
            .ends_with("(every level measured passed); $0.41 per million tokens, $0.62 per user-hour.")
    );
    // no user, no price per user
    let none = cap(0, BoundedBy::None, Some(1));
    assert!(!said(&none, CapacityRule::Reference, Some(10.0)).contains('$'));
}

#[test]
fn a_label_that_does_not_say_its_count_shows_it() {
    let mut c = cap(4, BoundedBy::MatrixTop, None);
    c.context = 257_984;
    c.label = "256K".into();
    assert!(said(&c, CapacityRule::Reference, None).starts_with("At 256K (257,984) context: at least 4 users"));
}

#[test]
fn words_for_bounds_and_money() {
    assert_eq!(slo_words(&"tok_s>=20".parse().unwrap()), "≥ 20 tok/s each (p50)");
    assert_eq!(slo_words(&"ttft_p99<=1.5s,tbt_p90<=75ms".parse().unwrap()), "TTFT p99 ≤ 1.5 s, TBT p90 ≤ 75 ms");
    assert_eq!(bound_name(&"tok_s_p10".into()), "per-user tok/s p10");
    assert_eq!(bound_name(&"something_else".into()), "something_else");
    assert_eq!(bound_name(&"slo".into()), "slo");
    // the unit follows the bound's figure, read once from its name
    assert_eq!(limit_words(&"tok_s_p10".into(), 30.0), "30 tok/s");
    assert_eq!(limit_words(&"ttft_p90".into(), 2000.0), "2 s");
    assert_eq!(usd(0.4123), "$0.41");
    assert_eq!(usd(1234.5), "$1,234.50");
    assert_eq!(usd(0.0041), "$0.0041");
    assert_eq!(usd(0.05), "$0.050");
}

#[test]
fn a_cell_says_which_bound_it_missed_and_by_how_much() {
    let mut cell = sm_core::record::DecodeCell { status: Some(CellStatus::Valid), ..Default::default() };
    assert_eq!(verdict(&cell), None, "not judged");
    cell.slo_met = Some(false);
    cell.slo_bounds = vec![
        sm_core::slo::BoundCheck { bound: "tok_s_p10".into(), limit: 30.0, value: Some(31.0), holds: true },
        sm_core::slo::BoundCheck { bound: "ttft_p90".into(), limit: 2000.0, value: Some(2345.0), holds: false },
    ];
    assert_eq!(verdict(&cell).unwrap(), "misses the SLO: TTFT p90 2,345 ms (limit 2 s)");
    cell.slo_met = Some(true);
    assert_eq!(verdict(&cell).unwrap(), "meets the SLO");
    cell.status = Some(CellStatus::Error);
    assert_eq!(verdict(&cell), None, "only a valid cell is judged");
}

#[test]
fn the_note_names_the_slo_and_how_it_was_judged() {
    let d = Slo::default();
    let measured = slo_note(&d, SloSource::Measured);
    assert!(measured.starts_with(&format!("Service level (SLO): {d} (speedmatrix's default) — ")), "{measured}");
    assert!(measured.contains("own requests"));
    let summaries = slo_note(&slo(), SloSource::Summaries);
    assert!(!summaries.contains("default") && summaries.contains("summary figures"), "{summaries}");
}
