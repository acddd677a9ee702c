//! How the site shows a capacity answer (methodology §11.3): the users at one
//! context, a short tag for what bounds them and a sentence that says it.

use maud::{Markup, html};
use sm_core::answer::BoundedBy;
use sm_core::slo::Figure;

use super::swatch;
use crate::db::CapacityRow;
use crate::rejudge::{self, Rejudged};

/// A short tag for `bounded_by` and a phrase that says it.
pub fn bound_tag(bounded_by: &BoundedBy) -> (String, String) {
    let (tag, why) = match bounded_by {
        BoundedBy::KvCache => ("KV", "one more user would not fit the KV cache".to_string()),
        BoundedBy::MaxNumSeqs => ("seqs", "one more user would be above the server's max_num_seqs".into()),
        BoundedBy::MatrixTop => ("top", "every level measured passed: the capacity may be higher".into()),
        BoundedBy::Unmeasured => {
            ("?", "the next level could not be measured or judged: the capacity may be higher".into())
        }
        BoundedBy::None => ("none", "no level meets the SLO".into()),
        BoundedBy::Slo(bound) => {
            let tag = match bound.figure() {
                Some(Figure::TokS) => "tok/s",
                Some(Figure::Ttft) => "TTFT",
                Some(Figure::Ttfa) => "TTFA",
                Some(Figure::Ttftc) => "TTFTC",
                Some(Figure::Tbt) => "TBT",
                None => "SLO",
            };
            (tag, format!("the next level failed the SLO's {bound} bound"))
        }
    };
    (tag.to_string(), why)
}

/// The users as the list and the comparison print them: `≥ 46` where the true capacity may be
/// higher (every measured level passed, or the next could not be measured), `—` where not even
/// the lowest level could be measured or judged.
pub fn users_text(max_users: i64, bounded_by: &BoundedBy) -> String {
    match bounded_by {
        BoundedBy::Unmeasured if max_users == 0 => "—".into(),
        BoundedBy::MatrixTop | BoundedBy::Unmeasured => format!("≥ {max_users}"),
        _ => max_users.to_string(),
    }
}

/// `46 users`, `≥ 1 user`, `not judged`.
pub fn users_phrase(max_users: i64, bounded_by: &BoundedBy) -> String {
    match users_text(max_users, bounded_by) {
        dash if dash == "—" => "not judged".into(),
        one if max_users == 1 => format!("{one} user"),
        many => format!("{many} users"),
    }
}

/// One answer as a compact fragment: `8K: 46 [TBT]`, the sentence in its title; a link when
/// `href` is given.
pub fn compact(row: &CapacityRow, href: Option<&str>) -> Markup {
    let (tag, why) = bound_tag(&row.bounded_by);
    let users = users_text(row.max_users, &row.bounded_by);
    let name = sm_core::context::shown(&row.label, u64::try_from(row.context).unwrap_or_default());
    let title = format!("{name} context: {} meet the SLO — {why}", users_phrase(row.max_users, &row.bounded_by));
    html! {
        span.ans title=(title) {
            @if let Some(h) = href { a href=(h) { (name) ": " (users) } } @else { (name) ": " (users) }
            abbr.bound title=(why) { (tag) }
        }
    }
}

/// One run of a comparison, as the capacity section needs it.
pub struct Side<'a> {
    pub letter: &'a str,
    pub record: &'a sm_core::record::RunRecord,
    /// [`crate::answer::JudgedFrom`]'s name.
    pub judged_from: &'a str,
}

/// What a run's cells were judged from, as a reader needs to know it.
fn judged_text(judged_from: &str) -> &'static str {
    match judged_from {
        "summaries" => "judged after the fact from the cells' summary figures (no goodput, no search)",
        "requests" => "judged from every request's figures as the run measured them",
        _ => "no answer",
    }
}

/// The comparison's capacity answers side by side: a row per decode context, a column per run,
/// and the SLO each run used — with a warning when they differ, since the numbers then answer
/// different questions.
pub fn compare_section(sides: &[Side<'_>]) -> Markup {
    let slos: Vec<String> =
        sides.iter().map(|r| r.record.settings.slo.as_ref().map(ToString::to_string).unwrap_or_default()).collect();
    let differ = slos.iter().any(|x| *x != slos[0]);
    let list: Vec<String> = sides.iter().zip(&slos).map(|(r, slo)| format!("{}: {slo}", r.letter)).collect();
    // contexts within 1 % of each other are one row, named as every page names them
    let per_run: Vec<Vec<(u64, String)>> =
        sides.iter().map(|r| r.record.capacity.iter().map(|a| (a.context, a.label.clone())).collect()).collect();
    let contexts = sm_report::compare::align(&per_run);
    html! {
        h2 id="capacity" { "Capacity" }
        p.caption {
            "the most simultaneous users per context whose cell meets the run's SLO: continuously generating \
             streams, a conservative bound on chat users (who also read and type) · ≥ where every measured level \
             passed or the next could not be measured · see methodology §11"
        }
        @if differ {
            p class="banner slo-warning" role="note" {
                "These runs used different SLOs (" (list.join("; ")) "): their capacities answer different \
                 questions and are not comparable."
            }
        }
        div.scroll { table class="diff answers" {
            colgroup { col.name; }
            thead { tr {
                th scope="col" {}
                @for (i, r) in sides.iter().enumerate() { th scope="col" { (swatch(i, r.letter)) } }
            } }
            tbody {
                tr class=[differ.then_some("differs")] {
                    th scope="row" { "SLO" }
                    @for (r, slo) in sides.iter().zip(&slos) {
                        td {
                            code { (if slo.is_empty() { sm_report::format::NONE } else { slo }) }
                            div.sub { (judged_text(r.judged_from)) }
                        }
                    }
                }
                @for row in &contexts {
                    tr {
                        th scope="row" { (row.name) " context" }
                        @for (r, at) in sides.iter().zip(&row.at) {
                            @match at.and_then(|ctx| r.record.capacity.iter().find(|a| a.context == ctx)) {
                                Some(a) => { (answer_cell(r.record, a)) }
                                None => { td.sub { "not measured" } }
                            }
                        }
                    }
                }
                (rejudged_row(sides, &slos))
            }
        } }
        @if contexts.is_empty() { p.caption { "None of these runs has a capacity answer (no decode cells)." } }
    }
}

/// Where the runs' SLOs differ: each other run's answer under the baseline's SLO (A's), re-judged
/// where its stored figures answer every bound exactly (methodology §11.3), or why not.
fn rejudged_row(sides: &[Side<'_>], slos: &[String]) -> Markup {
    let Some((base, others)) = sides.split_first() else { return html! {} };
    let Some(slo) = base.record.settings.slo.as_ref().filter(|_| slos.iter().any(|x| *x != slos[0])) else {
        return html! {};
    };
    let under_base = |r: &Side<'_>| match rejudge::measured(r.judged_from) {
        Some(how) => rejudge::of(r.record, slo, how, &crate::answer::rows(r.record)),
        None => Rejudged::Cannot("not judged".into()),
    };
    html! {
        tr.rejudged {
            th scope="row" { "Under " (base.letter) "'s SLO" }
            td.sub { "its own" }
            @for (r, own) in others.iter().zip(&slos[1..]) {
                @if *own == slos[0] {
                    td.sub { "its own" }
                } @else {
                    @match under_base(r) {
                        Rejudged::Answer(rows) => { td { "re-judged: " @for row in &rows { (compact(row, None)) } } }
                        Rejudged::Cannot(why) => { td.sub { (why) } }
                    }
                }
            }
        }
    }
}

fn answer_cell(record: &sm_core::record::RunRecord, a: &sm_core::answer::Capacity) -> Markup {
    let (tag, mut why) = bound_tag(&a.bounded_by);
    if a.bounded_by == BoundedBy::KvCache {
        why = match record.settings.capacity_rule {
            sm_core::capacity::CapacityRule::PrefixShared => "the KV cache holds no more users sharing one prompt",
            _ => "the KV cache holds no more distinct users, each with a prompt of its own",
        }
        .into();
    }
    let users = match (a.max_users, &a.bounded_by, a.failed_cell) {
        (0, BoundedBy::Slo(_), Some(f)) => format!("fewer than {f} users"),
        (n, _, _) => users_phrase(i64::from(n), &a.bounded_by),
    };
    let title = format!("{} context: {users} — {why}", sm_core::context::shown(&a.label, a.context));
    let costs = sm_report::capacity::cost_parts(a);
    html! {
        td title=(title) {
            span.users { (users) }
            abbr.bound title=(why) { (tag) }
            @if !costs.is_empty() { div.sub { (costs.join(" · ")) } }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn by(text: &str) -> BoundedBy {
        text.parse().unwrap()
    }

    #[test]
    fn tags_and_escaping() {
        assert_eq!(bound_tag(&by("slo:tbt_p99")).0, "TBT");
        assert_eq!(bound_tag(&by("slo:tok_s_p10")).0, "tok/s");
        assert_eq!(
            bound_tag(&by("slo:ttft_p90")),
            ("TTFT".into(), "the next level failed the SLO's ttft_p90 bound".into())
        );
        // a bound no figure reads as is the SLO's, named as the record wrote it
        assert_eq!(bound_tag(&by("slo:slo")).0, "SLO");
        assert_eq!(bound_tag(&by("kv_cache")).0, "KV");
        assert_eq!(users_text(46, &by("matrix_top")), "≥ 46");
        assert_eq!(users_text(0, &by("unmeasured")), "—");
        assert_eq!(users_text(0, &by("slo:tok_s_p10")), "0");
        assert_eq!(users_phrase(1, &by("unmeasured")), "≥ 1 user");
        assert_eq!(users_phrase(0, &by("unmeasured")), "not judged");
        assert_eq!(users_phrase(12, &by("kv_cache")), "12 users");
        let row = CapacityRow { context: 8192, label: "<b>8K".into(), max_users: 3, bounded_by: by("slo:<i>") };
        let html = compact(&row, Some("/?context=8192&sort=users")).into_string();
        assert!(!html.contains("<b>") && !html.contains("<i>") && html.contains("&lt;b&gt;8K (8,192): 3"), "{html}");
        // a 256K fitted to the model is named as on every page, with its tokens
        let fitted = CapacityRow { context: 257_984, label: "256K".into(), max_users: 4, bounded_by: by("kv_cache") };
        let fitted = compact(&fitted, None).into_string();
        assert!(fitted.contains("256K (257,984): 4"), "{fitted}");
        assert!(html.contains("href=\"/?context=8192&amp;sort=users\""), "{html}");
    }

    #[test]
    fn a_comparison_of_two_slos_re_judges_the_others_under_the_baselines() {
        let sample = include_str!("../../../../tests/data/run-sample.json");
        let mut a: sm_core::record::RunRecord = serde_json::from_str(sample).unwrap();
        crate::answer::ensure(&mut a).unwrap();
        let mut b: sm_core::record::RunRecord = serde_json::from_str(sample).unwrap();
        sm_core::answer::judge_from_summaries(&mut b, &"ttft_p50<=2s".parse().unwrap()).unwrap();
        let side = |letter, record| Side { letter, record, judged_from: "summaries" };
        let html = compare_section(&[side("A", &a), side("B", &b)]).into_string();
        // the default SLO's tok_s_p10 is no figure a run judged from its summaries stored
        assert!(html.contains("Under A&#39;s SLO") || html.contains("Under A's SLO"), "{html}");
        assert!(html.contains("cannot answer tok_s_p10 (the run stored p50 only)"), "{html}");
        let html = compare_section(&[side("B", &b), side("A", &a)]).into_string();
        assert!(html.contains("<td>re-judged: <span class=\"ans\""), "{html}");
        let same = compare_section(&[side("A", &a), side("B", &a)]).into_string();
        assert!(!same.contains("re-judged"), "{same}");
    }
}
