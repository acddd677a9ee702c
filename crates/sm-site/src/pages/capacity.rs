//! How the site shows a capacity answer (methodology §11.3): the users at one
//! context, a short tag for what bounds them and a sentence that says it.

use std::fmt::Write;

use super::esc;
use crate::db::CapacityRow;

/// A short tag for `bounded_by` and a phrase that says it.
pub fn bound_tag(bounded_by: &str) -> (String, String) {
    let (tag, why) = match bounded_by {
        "kv_cache" => ("KV", "one more user would not fit the KV cache".to_string()),
        "max_num_seqs" => ("seqs", "one more user would be above the server's max_num_seqs".into()),
        "matrix_top" => ("top", "every level measured passed: the capacity may be higher".into()),
        "unmeasured" => ("?", "the next level could not be measured or judged: the capacity may be higher".into()),
        "none" => ("none", "no level meets the SLO".into()),
        other => match other.strip_prefix("slo:") {
            Some(bound) => {
                let tag = match bound.split('_').next() {
                    Some("tok") => "tok/s",
                    Some("ttft") => "TTFT",
                    Some("tbt") => "TBT",
                    _ => "SLO",
                };
                (tag, format!("the next level failed the SLO's {bound} bound"))
            }
            None => ("?", format!("bounded by {other}")),
        },
    };
    (tag.to_string(), why)
}

/// The users as the list and the comparison print them: `≥ 46` where the true capacity may be
/// higher (every measured level passed, or the next could not be measured), `—` where not even
/// the lowest level could be measured or judged.
pub fn users_text(max_users: i64, bounded_by: &str) -> String {
    match bounded_by {
        "unmeasured" if max_users == 0 => "—".into(),
        "matrix_top" | "unmeasured" => format!("≥ {max_users}"),
        _ => max_users.to_string(),
    }
}

/// `46 users`, `≥ 1 user`, `not judged`.
pub fn users_phrase(max_users: i64, bounded_by: &str) -> String {
    match users_text(max_users, bounded_by) {
        dash if dash == "—" => "not judged".into(),
        one if max_users == 1 => format!("{one} user"),
        many => format!("{many} users"),
    }
}

/// One answer as a compact, escaped HTML fragment: `8K: 46 [TBT]`, the sentence in its title;
/// a link when `href` is given.
pub fn compact(row: &CapacityRow, href: Option<&str>) -> String {
    let (tag, why) = bound_tag(&row.bounded_by);
    let users = users_text(row.max_users, &row.bounded_by);
    let title = format!("{} context: {} meet the SLO — {why}", row.label, users_phrase(row.max_users, &row.bounded_by));
    let text = format!("{}: {users}", esc(&row.label));
    let body = match href {
        Some(h) => format!("<a href=\"{}\">{text}</a>", esc(h)),
        None => text,
    };
    let mut s = String::new();
    let _ = write!(
        s,
        "<span class=\"ans\" title=\"{}\">{body}<abbr class=\"bound\" title=\"{}\">{}</abbr></span>",
        esc(&title),
        esc(&why),
        esc(&tag)
    );
    s
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
pub fn compare_section(s: &mut String, sides: &[Side<'_>]) {
    s.push_str(
        "<h2 id=\"capacity\">Capacity</h2>\n<p class=\"caption\">the most simultaneous users per context whose cell \
         meets the run's SLO: continuously generating streams, a conservative bound on chat users (who also read and \
         type) · ≥ where every measured level passed or the next could not be measured · see methodology §11</p>\n",
    );
    let slos: Vec<String> =
        sides.iter().map(|r| r.record.settings.slo.as_ref().map(ToString::to_string).unwrap_or_default()).collect();
    if slos.iter().any(|x| *x != slos[0]) {
        let list: Vec<String> = sides.iter().zip(&slos).map(|(r, slo)| format!("{}: {slo}", r.letter)).collect();
        let _ = writeln!(
            s,
            "<p class=\"banner slo-warning\" role=\"note\">These runs used different SLOs ({}): their capacities \
             answer different questions and are not comparable.</p>",
            esc(&list.join("; "))
        );
    }
    let mut contexts: std::collections::BTreeMap<u64, String> = std::collections::BTreeMap::new();
    for r in sides {
        for a in &r.record.capacity {
            contexts.entry(a.context).or_insert_with(|| a.label.clone());
        }
    }
    s.push_str("<div class=\"scroll\"><table class=\"diff answers\">\n<colgroup><col class=\"name\"></colgroup>\n<thead><tr><th scope=\"col\"></th>");
    for (i, r) in sides.iter().enumerate() {
        let _ = write!(s, "<th scope=\"col\"><span class=\"swatch s{i}\">{}</span></th>", esc(r.letter));
    }
    s.push_str("</tr></thead>\n<tbody>\n");
    let differs = if slos.iter().any(|x| *x != slos[0]) { " class=\"differs\"" } else { "" };
    let _ = write!(s, "<tr{differs}><th scope=\"row\">SLO</th>");
    for (r, slo) in sides.iter().zip(&slos) {
        let slo = if slo.is_empty() { sm_report::format::NONE } else { slo };
        let _ = write!(s, "<td><code>{}</code><div class=\"sub\">{}</div></td>", esc(slo), judged_text(r.judged_from));
    }
    s.push_str("</tr>\n");
    for (ctx, label) in &contexts {
        let _ = write!(s, "<tr><th scope=\"row\">{} context</th>", esc(label));
        for r in sides {
            match r.record.capacity.iter().find(|a| a.context == *ctx) {
                Some(a) => answer_cell(s, r.record, a),
                None => s.push_str("<td class=\"sub\">not measured</td>"),
            }
        }
        s.push_str("</tr>\n");
    }
    s.push_str("</tbody></table></div>\n");
    if contexts.is_empty() {
        s.push_str("<p class=\"caption\">None of these runs has a capacity answer (no decode cells).</p>\n");
    }
}

fn answer_cell(s: &mut String, record: &sm_core::record::RunRecord, a: &sm_core::answer::Capacity) {
    let bounded = a.bounded_by.to_string();
    let (tag, mut why) = bound_tag(&bounded);
    if bounded == "kv_cache" {
        why = match record.settings.capacity_rule {
            sm_core::capacity::CapacityRule::PrefixShared => "the KV cache holds no more users sharing one prompt",
            _ => "the KV cache holds no more distinct users, each with a prompt of its own",
        }
        .into();
    }
    let users = match (a.max_users, &a.bounded_by, a.failed_cell) {
        (0, sm_core::answer::BoundedBy::Slo(_), Some(f)) => format!("fewer than {f} users"),
        (n, _, _) => users_phrase(i64::from(n), &bounded),
    };
    let _ = write!(
        s,
        "<td title=\"{}\"><span class=\"users\">{}</span><abbr class=\"bound\" title=\"{}\">{}</abbr>",
        esc(&format!("{} context: {users} — {why}", a.label)),
        esc(&users),
        esc(&why),
        esc(&tag)
    );
    let costs = sm_report::capacity::cost_parts(a);
    if !costs.is_empty() {
        let _ = write!(s, "<div class=\"sub\">{}</div>", esc(&costs.join(" · ")));
    }
    s.push_str("</td>");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tags_and_escaping() {
        assert_eq!(bound_tag("slo:tbt_p99").0, "TBT");
        assert_eq!(bound_tag("slo:tok_s_p10").0, "tok/s");
        assert_eq!(bound_tag("kv_cache").0, "KV");
        assert_eq!(users_text(46, "matrix_top"), "≥ 46");
        assert_eq!(users_text(0, "unmeasured"), "—");
        assert_eq!(users_phrase(1, "unmeasured"), "≥ 1 user");
        assert_eq!(users_phrase(0, "unmeasured"), "not judged");
        assert_eq!(users_phrase(12, "kv_cache"), "12 users");
        let row = CapacityRow { context: 8192, label: "<b>8K".into(), max_users: 3, bounded_by: "slo:<i>".into() };
        let html = compact(&row, Some("/?context=8192&sort=users"));
        assert!(!html.contains("<b>") && !html.contains("<i>") && html.contains("&lt;b&gt;8K: 3"), "{html}");
        assert!(html.contains("href=\"/?context=8192&amp;sort=users\""), "{html}");
    }
}
