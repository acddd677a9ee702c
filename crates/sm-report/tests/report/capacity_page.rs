//! The capacity answer on every view, from records built here: a context bounded by the KV cache
//! with searched levels, one where every level passed (matrix_top), one where none did; with
//! and without a price; escaping of what came from a file; and the real reference files, which
//! get their answer from their summary figures.

use crate::common::*;
use sm_core::answer::{BoundedBy, capacities, price};
use sm_core::capacity::CapacityRule;
use sm_core::record::{CellStatus, DecodeCell, RunRecord};
use sm_core::slo::{BoundCheck, Slo};
use sm_report::capacity::{USERS_NOTE, headline};
use sm_report::view::{NOT_MEASURED_NOTE, SEARCHED_NOTE};

const SLO: &str = "tok_s_p10>=30,ttft_p90<=2s";
/// 3 users at 128K, 11 at 32K, 33 at 8K under the reference rule (max_tokens 4096, blocks of 256).
const KV: u64 = 3 * (131_072 + 4096);

#[derive(Clone, Copy)]
enum L {
    Pass,
    Fail,
    Over,
}

fn cell(context: u64, label: &str, concurrency: u32, l: L, searched: bool) -> DecodeCell {
    let mut c = DecodeCell { context, label: label.into(), concurrency, searched, ..DecodeCell::default() };
    if let L::Over = l {
        c.status = Some(CellStatus::OverCapacity);
        c.reason = Some(format!("needs {} KV tokens, the server has {KV}", u64::from(concurrency) * (context + 4096)));
        return c;
    }
    let (tok_s, holds) = if let L::Pass = l { (40.0 - f64::from(concurrency), true) } else { (12.0, false) };
    c.status = Some(CellStatus::Valid);
    c.total_tok_s = Some(50.0 * f64::from(concurrency));
    c.per_request_tok_s = Some(50.0);
    c.ttft_ms.p50 = Some(300.0);
    c.tbt_ms.p50 = Some(20.0);
    c.measured_s = Some(30.0);
    c.slo_met = Some(holds);
    c.slo_bounds = vec![
        BoundCheck { bound: "tok_s_p10".into(), limit: 30.0, value: Some(tok_s), holds },
        BoundCheck { bound: "ttft_p90".into(), limit: 2000.0, value: Some(500.0), holds: true },
    ];
    c.goodput_pct = Some(if holds { 100.0 } else { 25.0 });
    c.goodput_tok_s = Some(if holds { 50.0 * f64::from(concurrency) } else { 10.0 });
    c
}

/// 8K passes every level (matrix_top); 32K passes up to the KV limit, found by two searched
/// levels (kv_cache); 128K fails even one user (none).
fn measured(cost: Option<f64>, rule: CapacityRule) -> RunRecord {
    let mut r: RunRecord = serde_json::from_str(&std::fs::read_to_string(data("run-sample.json")).unwrap()).unwrap();
    r.settings.contexts = vec![8192, 32_768, 131_072];
    r.settings.concurrency = vec![1, 4, 16];
    r.settings.slo = Some(SLO.parse().unwrap());
    r.settings.cost_per_hour_usd = cost;
    r.settings.capacity_rule = rule;
    r.settings.find_capacity = true;
    r.server.kv_budget_tokens = Some(KV);
    r.plan.clear();
    r.decode = vec![
        cell(8192, "8K", 1, L::Pass, false),
        cell(8192, "8K", 4, L::Pass, false),
        cell(8192, "8K", 16, L::Pass, false),
        cell(32_768, "32K", 1, L::Pass, false),
        cell(32_768, "32K", 4, L::Pass, false),
        cell(32_768, "32K", 16, L::Over, false),
        cell(32_768, "32K", 8, L::Pass, true),
        cell(32_768, "32K", 11, L::Pass, true),
        cell(131_072, "128K", 1, L::Fail, false),
        cell(131_072, "128K", 4, L::Over, false),
        cell(131_072, "128K", 16, L::Over, false),
    ];
    price(&mut r);
    r
}

#[test]
fn the_record_built_here_has_the_answers_it_is_meant_to() {
    let r = measured(Some(10.0), CapacityRule::Reference);
    let got: Vec<(u32, BoundedBy)> = r.capacity.iter().map(|c| (c.max_users, c.bounded_by.clone())).collect();
    assert_eq!(got, [(16, BoundedBy::MatrixTop), (11, BoundedBy::KvCache), (0, BoundedBy::None)]);
    assert_eq!(r.capacity, capacities(&r));
}

/// The text of the page's capacity section.
fn answer_section(html: &str) -> String {
    let start = html.find("<section class=\"answer\"").expect("an answer section");
    strip_tags(&html[start..start + html[start..].find("</section>").unwrap()])
}

#[test]
fn the_page_opens_with_a_sentence_per_context_and_says_which_slo() {
    let r = measured(Some(10.0), CapacityRule::Reference);
    let html = sm_report::html_page(&r, &[]);
    let at = |needle: &str| html.find(needle).unwrap_or_else(|| panic!("no {needle}"));
    assert!(at("<section class=\"answer\"") < at("<div class=\"facts\">"), "the answer comes first");
    assert!(at("<section class=\"answer\"") < at("<table class=\"matrix\""));
    let text = answer_section(&html);
    let h = headline(&r).unwrap();
    for line in &h.sentences {
        assert_eq!(text.matches(line.as_str()).count(), 1, "{line}\n{text}");
    }
    assert!(h.sentences[0].starts_with("At 8K context: at least 16 users at ≥ 30 tok/s each (p10), TTFT p90 ≤ 2 s"));
    assert!(h.sentences[1].starts_with("At 32K context: 11 users at "), "{}", h.sentences[1]);
    assert!(h.sentences[1].contains("the KV cache holds no more distinct users, each with a prompt of its own; $"));
    assert!(h.sentences[1].ends_with(" per user-hour."), "{}", h.sentences[1]);
    assert!(h.sentences[2].starts_with("At 128K context: no level meets the SLO"), "{}", h.sentences[2]);
    assert!(text.contains(USERS_NOTE));
    assert!(text.contains(&format!("Service level (SLO): {SLO} — ")), "{text}");
    assert!(text.contains("judged from its own requests"), "{text}");
}

#[test]
fn the_matrix_marks_cells_that_meet_the_slo_the_capacity_cell_and_searched_levels() {
    let r = measured(None, CapacityRule::Reference);
    let html = sm_report::html_page(&r, &[]);
    let m = table(&html, "matrix");
    let head = &m[..m.find("</thead>").unwrap()];
    let searched: Vec<String> = head
        .split("<th scope=\"col\" class=\"searched\">")
        .skip(1)
        .map(|h| h[..h.find('<').unwrap()].to_string())
        .collect();
    assert_eq!(searched, ["8", "11"], "the searched levels are columns, marked as searched");
    let rows = body_rows(m);
    let passes = r.decode.iter().filter(|c| c.slo_met == Some(true)).count();
    assert_eq!(m.matches("aria-label=\"meets the SLO\"").count(), passes);
    // the capacity cells, one per context that has an answer: 8K × 16 and 32K × 11
    let caps: Vec<(String, usize)> = rows
        .iter()
        .flat_map(|row| {
            let label = strip_tags(&row[0]);
            row[1..]
                .iter()
                .enumerate()
                .filter(|(_, c)| c.contains("aria-label=\"capacity\""))
                .map(move |(i, _)| (label.clone(), i))
        })
        .collect();
    // columns 1, 4, 8, 11, 16
    assert_eq!(caps, [("8K".to_string(), 4), ("32K".to_string(), 3)]);
    assert_eq!(m.matches("class=\"cell v").count(), 8, "the valid cells");
    assert_eq!(m.matches(" cap\"").count() + m.matches(" cap ").count(), 2, "the capacity cells are outlined");
    assert_eq!(m.matches("aria-label=\"searched\"").count(), 2);
    // the legend says what the marks mean; the gaps in searched columns are not "the run stopped"
    let key = strip_tags(&html[html.find("<p class=\"matrixkey\">").expect("a legend")..]);
    assert!(key.starts_with("✓ meets the SLO") && key.contains("★ outlined the capacity"), "{key}");
    let text = strip_tags(&html);
    assert!(text.contains(SEARCHED_NOTE) && !text.contains(NOT_MEASURED_NOTE));
}

#[test]
fn the_slo_chart_draws_what_one_user_got_with_the_slo_line() {
    let r = measured(None, CapacityRule::Reference);
    let html = sm_report::html_page(&r, &[]);
    let start = html.find(">Per-user tok/s against the SLO</title>").expect("the SLO chart");
    let svg = &html[html[..start].rfind("<svg").unwrap()..start + html[start..].find("</svg>").unwrap()];
    assert_eq!(svg.matches("<line class=\"limit\"").count(), 1);
    assert!(svg.contains("SLO: per-user tok/s p10 ≥ 30 tok/s"), "{svg}");
    // the tok_s bound's value at its percentile, not the median per request (50)
    assert!(svg.contains("32K · 11: 29.0") && svg.contains("8K · 4: 36.0"), "{svg}");
    assert!(!svg.contains(": 50.0<"), "{svg}");
    assert_eq!(svg.matches("<path class=\"line").count(), 3, "a line per context");
}

#[test]
fn tables_markdown_csv_and_terminal_carry_the_same_figures() {
    let r = measured(Some(10.0), CapacityRule::Reference);
    let h = headline(&r).unwrap();
    let html = sm_report::html_page(&r, &[]);
    let all = table(&html, "all");
    for col in ["SLO met", "Goodput", "Goodput tok/s", "$ per million tokens", "Searched"] {
        assert!(all.contains(&format!(">{col}</th>")), "{col}");
    }
    let md = sm_report::markdown(&r);
    assert!(md.find("## Capacity").unwrap() < md.find("## Hardware").unwrap());
    let text = md_text(&md);
    for line in &h.sentences {
        assert!(text.contains(line.as_str()), "{line}");
    }
    assert!(md.contains("| 32K | 11 | kv\\_cache | 11 at once | — | 11 | $"), "{md}");
    assert!(md.contains("| 128K | 0 | none | — | 1 at once | 3 | — | — |"), "{md}");

    let rows = csv_records(&sm_report::csv(&r));
    let row = |ctx: &str, c: &str| {
        let decode = |r: &&std::collections::BTreeMap<String, String>| r["Phase"] == "Sustained decode";
        rows.iter().filter(decode).find(|r| r["context_tokens"] == ctx && r["concurrency"] == c).unwrap()
    };
    let searched = row("32768", "11");
    assert_eq!(
        (searched["searched"].as_str(), searched["slo_met"].as_str(), searched["slo_tok_s_p10"].as_str()),
        ("true", "true", "29")
    );
    assert_eq!(searched["slo_tok_s_p10_holds"], "true");
    assert_eq!(searched["goodput_pct"], "100");
    assert!(searched["usd_per_million_tokens"].parse::<f64>().unwrap() > 0.0);
    let failed = row("131072", "1");
    assert_eq!((failed["slo_met"].as_str(), failed["slo_tok_s_p10_holds"].as_str()), ("false", "false"));
    assert_eq!((failed["searched"].as_str(), failed["slo_ttft_p90"].as_str()), ("false", "500"));
    let over = row("131072", "4");
    assert_eq!((over["slo_met"].as_str(), over["slo_tok_s_p10"].as_str()), ("", ""));
    // the answer: on every decode row of its context, `capacity` true on the cell that proves it
    let answer = |r: &std::collections::BTreeMap<String, String>| {
        ["capacity", "capacity_max_users", "capacity_bounded_by", "capacity_failed_cell", "capacity_fit_limit"]
            .map(|k| r[k].clone())
    };
    assert_eq!(answer(searched), ["true", "11", "kv_cache", "", "11"]);
    assert_eq!(answer(row("32768", "8")), ["false", "11", "kv_cache", "", "11"]);
    assert_eq!(answer(row("32768", "16")), ["false", "11", "kv_cache", "", "11"], "over capacity, too");
    assert_eq!(answer(row("8192", "16")), ["true", "16", "matrix_top", "", "33"]);
    assert_eq!(answer(failed), ["false", "0", "none", "1", "3"]);
    let user_hour: f64 = searched["capacity_usd_per_user_hour"].parse().unwrap();
    assert!((user_hour - 10.0 / 11.0).abs() < 1e-9, "{user_hour}");
    assert!(rows.iter().filter(|r| r["Phase"] == "Prefill").all(|r| r["capacity"].is_empty()));
    assert_eq!(rows.iter().filter(|r| r["capacity"] == "true").count(), 2, "one per context with an answer");

    let t = sm_report::terminal(&r, 100);
    let mut lines = t.lines();
    assert_eq!(
        (lines.nth(2), lines.next().map(|l| l.starts_with("At 8K context: at least 16 users"))),
        (Some("Capacity"), Some(true)),
        "{t}"
    );
    assert!(t.find("Capacity").unwrap() < t.find("Sustained decode").unwrap());
}

#[test]
fn without_a_price_nothing_about_cost_is_shown() {
    let r = measured(None, CapacityRule::Reference);
    let html = sm_report::html_page(&r, &[]);
    assert!(!answer_section(&html).contains('$'));
    assert!(!html.contains("$ per million tokens") && !html.contains("per user-hour"));
    let md = sm_report::markdown(&r);
    assert!(!md.contains("$ per") && !md.contains("user-hour"), "{md}");
    assert!(!sm_report::terminal(&r, 100).contains('$'));
    let rows = csv_records(&sm_report::csv(&r));
    assert!(rows.iter().all(|r| r["usd_per_million_tokens"].is_empty() && r["capacity_usd_per_user_hour"].is_empty()));
}

#[test]
fn under_prefix_shared_the_kv_bound_is_for_users_sharing_one_prompt() {
    let r = measured(None, CapacityRule::PrefixShared);
    let h = headline(&r).unwrap();
    // the shared prompt fits more users: the answer at 32K is not the reference rule's
    let kv = h.sentences.iter().find(|s| s.contains("KV cache")).expect("a KV-bound context");
    assert!(kv.contains("users sharing one prompt") && !kv.contains("distinct"), "{kv}");
}

#[test]
fn text_from_the_file_is_escaped() {
    let mut r = measured(Some(10.0), CapacityRule::Reference);
    for c in r.decode.iter_mut().filter(|c| c.context == 8192) {
        c.label = "<script>alert(1)</script>".into();
    }
    for c in r.decode.iter_mut().filter(|c| c.context == 131_072) {
        for b in &mut c.slo_bounds {
            b.bound = format!("<img src=x onerror=alert(2)>{}", b.bound).as_str().into();
        }
    }
    r.capacity = capacities(&r);
    assert!(r.capacity.iter().any(|c| c.label.contains("<script>")));
    r.capacity[2].bounded_by = BoundedBy::Slo("<img src=x onerror=alert(3)>".into());
    r.capacity[2].max_users = 1;
    let html = sm_report::html_page(&r, &[]);
    assert!(!html.contains("<script>") && !html.contains("<img"), "nothing from the file is markup");
    assert!(html.contains("At &lt;script&gt;alert(1)&lt;/script&gt; (8,192) context: at least 16 users"));
    assert!(html.contains("&lt;img src=x onerror=alert(3)&gt;"));
    let md = sm_report::markdown(&r);
    assert!(!md.contains("<script>") && !md.contains("<img"), "{md}");
}

#[test]
fn imported_reference_files_get_an_answer_from_their_summaries() {
    let files = [
        reference(LIL),
        reference(BENCH_0418),
        bench("bench-0.5.3.json"),
        bench("bench-0.7.0.json"),
        bench("sentinels-0.6.2.json"),
    ];
    for path in files {
        let r = sm_report::load_any(&path).unwrap();
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        let slo = r.settings.slo.clone().unwrap_or_else(|| panic!("{name}: judged"));
        assert_eq!(r.capacity, capacities(&r), "{name}");
        let contexts: std::collections::BTreeSet<u64> = r.decode.iter().map(|c| c.context).collect();
        assert_eq!(r.capacity.len(), contexts.len(), "{name}: an answer per decode context");
        assert!(r.decode.iter().all(|c| c.goodput_pct.is_none() && !c.searched), "{name}: no goodput, no search");
        let html = sm_report::html_page(&r, &[]);
        let text = answer_section(&html);
        assert!(text.contains(&format!("Service level (SLO): {slo}")), "{name}: {text}");
        assert!(text.contains("computed from the file's summary figures"), "{name}: {text}");
        // the record written by `import` reads back as it is, judgement included
        let again = sm_report::import_str(&serde_json::to_string(&r).unwrap()).unwrap();
        assert_eq!((&again.settings.slo, &again.capacity), (&r.settings.slo, &r.capacity), "{name}: round trip");
        assert_eq!(again.server.extra, r.server.extra, "{name}: round trip");
    }
    // the 0.4.18 file has p90s: the default SLO as it is
    let r = sm_report::load_any(&reference(BENCH_0418)).unwrap();
    assert_eq!(r.settings.slo, Some(Slo::default()));
    // the published page's file has medians only: the default's bounds at the median, said so
    let r = sm_report::load_any(&reference(LIL)).unwrap();
    assert_eq!(r.settings.slo.as_ref().map(ToString::to_string).as_deref(), Some("tok_s_p50>=20,ttft_p50<=2s"));
    assert!(answer_section(&sm_report::html_page(&r, &[])).contains("taken at the median"));
    assert!(r.capacity.iter().all(|c| c.max_users > 0), "{:?}", r.capacity);
}

#[test]
fn a_run_recorded_before_slos_is_judged_against_the_default() {
    let r = sm_report::load_any(&data("run-sample.json")).unwrap();
    assert_eq!(r.settings.slo, Some(Slo::default()));
    let h = headline(&r).unwrap();
    assert_eq!(h.sentences.len(), 2);
    assert!(h.slo_note.contains("(speedmatrix's default)") && h.slo_note.contains("summary figures"), "{}", h.slo_note);
    let judged = r.decode.iter().filter(|c| c.slo_met.is_some()).count();
    assert_eq!(judged, r.decode.iter().filter(|c| c.status() == CellStatus::Valid).count());
}

/// Goodput says how many requests it is a share of: a window of long answers completes none, and
/// "Completed 0" beside a bare "100 %" read as a share of nothing.
#[test]
fn goodput_says_how_many_requests_it_rests_on() {
    let mut r = measured(None, CapacityRule::Reference);
    let cell = r.decode.iter_mut().find(|c| c.goodput_pct == Some(100.0)).expect("a cell that met the SLO");
    (cell.completed, cell.requests) = (Some(0), Some(4));
    let (label, concurrency) = (cell.label.clone(), cell.concurrency);
    let one = r.decode.iter_mut().find(|c| c.goodput_pct == Some(25.0)).expect("a cell that did not");
    one.requests = Some(1);
    let md = md_text(&sm_report::markdown(&r));
    let row = md
        .lines()
        .find(|l| l.starts_with(&format!("| Sustained decode | {label} | {concurrency} |")))
        .unwrap_or_else(|| panic!("{md}"));
    assert!(row.contains("| 100.0 % of 4 requests |"), "{row}");
    assert!(md.contains("| 25.0 % of 1 request |"), "{md}");
}
