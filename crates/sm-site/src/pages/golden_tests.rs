//! What each of the site's own pages says, pinned: every page rendered from fixed runs (hostile
//! labels, models and notices among them) and reduced to its elements, attribute values and text,
//! compared with the golden files in `crates/sm-site/tests/data/pages-golden/`. Whitespace between
//! tags and the markup's spelling (`&#39;` or `'`) may change; what a reader, the stylesheet, the
//! script and the browser test see may not. `SM_UPDATE_GOLDEN=1` rewrites the files.

use std::collections::HashMap;

use sm_core::record::RunRecord;

use super::compare::{self, Compared};
use super::runs::{self, ListParams};
use super::{COMPARE_ORDER_JS, Nav, REPORT_CSS, SITE_CSS, upload};
use crate::db::{CapacityRow, StoredRun};
use crate::rejudge::Rejudged;

const HOSTILE: &str = "<script>alert(1)</script>\"'&";
/// A control character and an attribute breakout: shown as text, never as markup.
const HOSTILE_ATTR: &str = "\"><img src=x onerror=alert(1)> \u{1b}[31m";

/// `&amp;`, `&lt;`, `&gt;`, `&quot;`, `&#39;` and numeric references decoded; anything else kept.
fn decode(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find('&') {
        out.push_str(&rest[..at]);
        rest = &rest[at..];
        let end = rest.find(';').filter(|&e| e <= 10);
        let decoded = end.and_then(|e| match &rest[1..e] {
            "amp" => Some('&'),
            "lt" => Some('<'),
            "gt" => Some('>'),
            "quot" => Some('"'),
            "apos" => Some('\''),
            n if n.starts_with("#x") || n.starts_with("#X") => u32::from_str_radix(&n[2..], 16).ok()?.try_into().ok(),
            n if n.starts_with('#') => n[1..].parse::<u32>().ok()?.try_into().ok(),
            _ => None,
        });
        match (decoded, end) {
            (Some(c), Some(e)) => {
                out.push(c);
                rest = &rest[e + 1..];
            }
            _ => {
                out.push('&');
                rest = &rest[1..];
            }
        }
    }
    out.push_str(rest);
    out
}

/// Runs of whitespace as one space (kept at the ends, so a lost space between words shows).
fn squash(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        if c.is_whitespace() {
            if !out.ends_with(' ') {
                out.push(' ');
            }
        } else {
            out.push(c);
        }
    }
    out
}

/// A start tag's name and attributes from just after its `<` to its `>`, and what follows it.
fn start_tag(s: &str) -> (String, Vec<(String, Option<String>)>, &str) {
    let name_end = s.find(|c: char| c.is_whitespace() || c == '>' || c == '/').unwrap_or(s.len());
    let name = s[..name_end].to_ascii_lowercase();
    let mut attrs = Vec::new();
    let mut rest = &s[name_end..];
    loop {
        rest = rest.trim_start_matches(|c: char| c.is_whitespace() || c == '/');
        if rest.is_empty() {
            return (name, attrs, rest);
        }
        if let Some(after) = rest.strip_prefix('>') {
            return (name, attrs, after);
        }
        let n = rest.find(|c: char| c.is_whitespace() || c == '=' || c == '>' || c == '/').unwrap_or(rest.len());
        let key = rest[..n].to_ascii_lowercase();
        rest = rest[n..].trim_start();
        let Some(after_eq) = rest.strip_prefix('=') else {
            attrs.push((key, None));
            continue;
        };
        let after_eq = after_eq.trim_start();
        let (value, after) = match after_eq.chars().next() {
            Some(q @ ('"' | '\'')) => {
                let close = after_eq[1..].find(q).map_or(after_eq.len(), |i| i + 1);
                (&after_eq[1..close], after_eq.get(close + 1..).unwrap_or(""))
            }
            _ => {
                let e = after_eq.find(|c: char| c.is_whitespace() || c == '>').unwrap_or(after_eq.len());
                (&after_eq[..e], &after_eq[e..])
            }
        };
        attrs.push((key, Some(squash(&decode(value)))));
        rest = after;
    }
}

/// The raw text of a `<script>` or `<style>`: the one script exactly (its hash is in the policy),
/// the stylesheets by name.
fn raw_text(tag: &str, text: &str) -> String {
    if tag == "script" && text == COMPARE_ORDER_JS {
        return "[COMPARE_ORDER_JS]".into();
    }
    if tag == "style" && squash(text).trim() == squash(&format!("{REPORT_CSS}{SITE_CSS}")).trim() {
        return "[REPORT_CSS SITE_CSS]".into();
    }
    format!("{:?}", squash(text))
}

/// A page as lines: `<tag name="value" …>` per start tag (attributes in their order, values
/// decoded, whitespace squashed), `</tag>` per end tag, a quoted line per text that is not only
/// whitespace, and the contents of scripts and stylesheets by name where they are the site's own.
/// Inside an `<svg>` (XML rules) `<line/>` and `<line></line>` are one element: both are the start
/// tag's line alone, so the charts read the same whichever way they are written.
fn reduce(html: &str) -> String {
    let mut out = String::new();
    let mut rest = html;
    let mut svg_depth = 0usize;
    // the element whose start tag is the last line, while nothing has followed it
    let mut empty: Option<String> = None;
    while !rest.is_empty() {
        let before = out.len();
        if let Some(comment) = rest.strip_prefix("<!--") {
            let end = comment.find("-->").unwrap_or(comment.len());
            out.push_str(&format!("<!--{}-->\n", squash(&comment[..end])));
            rest = comment.get(end + 3..).unwrap_or("");
        } else if let Some(decl) = rest.strip_prefix("<!") {
            let end = decl.find('>').unwrap_or(decl.len());
            out.push_str(&format!("<!{}>\n", squash(&decl[..end])));
            rest = decl.get(end + 1..).unwrap_or("");
        } else if let Some(end_tag) = rest.strip_prefix("</") {
            let end = end_tag.find('>').unwrap_or(end_tag.len());
            let name = end_tag[..end].trim().to_ascii_lowercase();
            if !(svg_depth > 0 && empty.as_deref() == Some(name.as_str())) {
                out.push_str(&format!("</{name}>\n"));
            }
            svg_depth -= usize::from(name == "svg" && svg_depth > 0);
            rest = end_tag.get(end + 1..).unwrap_or("");
        } else if rest.starts_with('<') && rest[1..].starts_with(|c: char| c.is_ascii_alphabetic()) {
            let self_closing = rest[..rest.find('>').unwrap_or(rest.len())].ends_with('/');
            let (name, attrs, after) = start_tag(&rest[1..]);
            svg_depth += usize::from(name == "svg");
            out.push('<');
            out.push_str(&name);
            for (k, v) in &attrs {
                match v {
                    Some(v) => out.push_str(&format!(" {k}={v:?}")),
                    None => out.push_str(&format!(" {k}")),
                }
            }
            out.push_str(">\n");
            rest = after;
            if name == "script" || name == "style" {
                let end = rest.find(&format!("</{name}")).unwrap_or(rest.len());
                out.push_str(&raw_text(&name, &rest[..end]));
                out.push('\n');
                rest = &rest[end..];
            } else if !self_closing {
                empty = Some(name);
                continue;
            }
        } else {
            // a `<` that starts no tag is text: look for the next one after it
            let first = rest.chars().next().map_or(1, char::len_utf8);
            let end = rest[first..].find('<').map_or(rest.len(), |i| i + first);
            let text = squash(&decode(&rest[..end]));
            if !text.trim().is_empty() {
                out.push_str(&format!("{text:?}\n"));
            }
            rest = &rest[end..];
        }
        if out.len() != before {
            empty = None;
        }
    }
    out
}

fn golden_dir() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/pages-golden")
}

/// The page reduced must be the golden file `name`; no hostile text may come through as markup.
fn check(name: &str, html: &str) {
    for markup in ["<script>alert", "<img", "<b>mallory", "<i>", "\u{1b}"] {
        assert!(!html.contains(markup), "{name}: {markup:?} came through as it was sent");
    }
    let reduced = reduce(html);
    let path = golden_dir().join(format!("{name}.txt"));
    if std::env::var_os("SM_UPDATE_GOLDEN").is_some() {
        std::fs::create_dir_all(golden_dir()).unwrap();
        std::fs::write(&path, &reduced).unwrap();
        return;
    }
    let golden = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("{}: {e} (SM_UPDATE_GOLDEN=1 writes it)", path.display()));
    if reduced != golden {
        let at = reduced.lines().zip(golden.lines()).position(|(a, b)| a != b).unwrap_or(0);
        let now: Vec<&str> = reduced.lines().skip(at.saturating_sub(3)).take(8).collect();
        let was: Vec<&str> = golden.lines().skip(at.saturating_sub(3)).take(8).collect();
        let (now, was) = (now.join("\n"), was.join("\n"));
        panic!("{name}: differs from {} at line {}:\nnow:\n{now}\nwas:\n{was}", path.display(), at + 1);
    }
}

fn stored(id: &str, model: &str, label: &str, uploader: &str) -> StoredRun {
    StoredRun {
        id: id.into(),
        uploaded_at: "2026-09-04T08:01:02Z".into(),
        uploader: uploader.into(),
        model: model.into(),
        gpu: "H200 NVL".into(),
        gpu_count: 2,
        engine: "vllm".into(),
        engine_version: "0.27.2".into(),
        measured_at: "2026-09-03T16:52:41Z".into(),
        label: label.into(),
        status: "complete".into(),
        peak_tok_s: 1234.56,
        record: String::new(),
        content_hash: None,
        slo: "tok_s_p10>=20".into(),
        judged_from: "requests".into(),
        capacity: Vec::new(),
        replay_capacity: None,
    }
}

fn answer(context: i64, label: &str, max_users: i64, bounded_by: &str) -> CapacityRow {
    CapacityRow { context, label: label.into(), max_users, bounded_by: bounded_by.parse().unwrap() }
}

/// Three runs as the list shows them: hostile texts everywhere a user writes one, every kind of
/// bound, a run without a GPU, a peak, a time or a complete status.
fn listed() -> Vec<StoredRun> {
    let mut a = stored("a1b2c3d4e5f6", HOSTILE, HOSTILE_ATTR, "alice");
    a.capacity = vec![
        answer(8192, "8K", 46, "slo:tbt_p99"),
        answer(257_984, "256K", 4, "kv_cache"),
        answer(32768, HOSTILE, 12, "matrix_top"),
    ];
    let mut b = stored("0badc0ffee00", "Ling-3.0-flash", "", "<b>mallory</b>");
    (b.gpu, b.gpu_count, b.engine_version, b.peak_tok_s) = (String::new(), 0, String::new(), 0.0);
    (b.status, b.measured_at, b.slo) = ("partial <i>".into(), String::new(), String::new());
    b.capacity = vec![answer(8192, "8K", 0, "unmeasured"), answer(16384, "16K", 0, "none")];
    let mut c = stored("c0c0c0c0c0c0", "m", "plain", "carol");
    c.capacity = vec![answer(8192, "8K", 1, "unmeasured"), answer(4096, "4K", 3, "max_num_seqs")];
    c.capacity.push(answer(2048, "2K", 2, "slo:<i>odd"));
    vec![a, b, c]
}

#[test]
fn the_runs_list_says_what_it_said() {
    let p = ListParams {
        model: Some(HOSTILE_ATTR.into()),
        label: Some(HOSTILE.into()),
        sort: Some("peak".into()),
        page: Some("2".into()),
        per_page: Some("3".into()),
        ..Default::default()
    };
    let q = p.to_query().unwrap();
    let notice = format!("Stored run {HOSTILE}");
    check("runs", &runs::page(&p, &q, &listed(), &HashMap::new(), 9, Some(&notice)));
    let first = ListParams { page: None, sort: Some("model".into()), dir: Some("asc".into()), ..p };
    check("runs-first-page", &runs::page(&first, &first.to_query().unwrap(), &listed(), &HashMap::new(), 3, None));
    let none = ListParams { gpu: Some(HOSTILE.into()), from: Some("2026-09-01".into()), ..Default::default() };
    check("runs-empty", &runs::page(&none, &none.to_query().unwrap(), &[], &HashMap::new(), 0, None));
}

#[test]
fn the_runs_list_at_a_context_under_the_viewers_slo_says_what_it_said() {
    let p = ListParams { context: Some("8K".into()), slo: Some("ttft_p90<=2s".into()), ..Default::default() };
    let q = p.to_query().unwrap();
    let mut runs = listed();
    runs[0].judged_from = "summaries".into();
    (runs[1].slo, runs[1].judged_from) = ("tok_s_p10>=20".into(), String::new());
    (runs[2].slo, runs[2].judged_from) = ("ttft_p90<=2s".into(), "requests".into());
    for r in &mut runs {
        r.capacity.retain(|a| a.context == 8192);
    }
    let again = HashMap::from([
        (runs[0].id.clone(), Rejudged::Answer(vec![answer(8192, "8K", 7, "slo:ttft_p90")])),
        (runs[1].id.clone(), Rejudged::Cannot(format!("cannot answer ttft_p90 ({HOSTILE})"))),
        (runs[2].id.clone(), Rejudged::Answer(Vec::new())),
    ]);
    check("runs-at-context", &runs::page(&p, &q, &runs, &again, 3, None));
    let no_slo = ListParams { slo: None, ..p };
    check("runs-at-context-own-slo", &runs::page(&no_slo, &no_slo.to_query().unwrap(), &runs, &again, 3, None));
}

fn sample() -> RunRecord {
    serde_json::from_str(include_str!("../../../../tests/data/run-sample.json")).unwrap()
}

/// The sample run, judged: under the default SLO from its summaries, or under `slo`.
fn judged(slo: Option<&str>) -> RunRecord {
    let mut r = sample();
    match slo {
        None => {
            crate::answer::ensure(&mut r).unwrap();
        }
        Some(slo) => sm_core::answer::judge_from_summaries(&mut r, &slo.parse().unwrap()).unwrap(),
    }
    r
}

/// Three runs of the sample: A as it is, B with hostile texts and another SLO, C as A.
fn compared() -> Vec<Compared> {
    let a = judged(None);
    let mut b = judged(Some("ttft_p50<=2s"));
    b.label = Some(HOSTILE.into());
    b.server.model = HOSTILE_ATTR.into();
    b.launch_command = Some(format!("vllm serve {HOSTILE}"));
    let c = judged(None);
    let side = |id: &str, record: RunRecord, label: &str, uploader: &str| {
        let mut s = stored(id, &record.server.model, label, uploader);
        s.judged_from = "summaries".into();
        Compared { stored: s, record }
    };
    vec![
        side("aaaaaaaaaaaa", a, "", "alice"),
        side("bbbbbbbbbbbb", b, HOSTILE, HOSTILE_ATTR),
        side("cccccccccccc", c, "plain", "carol"),
    ]
}

#[test]
fn the_comparison_says_what_it_said() {
    let runs = compared();
    check("compare", &compare::page(&runs));
    let two: Vec<Compared> = compared().into_iter().filter(|r| r.stored.id != "bbbbbbbbbbbb").collect();
    check("compare-same-slo", &compare::page(&two));
    // B first: A's SLO is another, and B's answers cannot be re-judged under it or can
    let mut swapped = compared();
    swapped.swap(0, 1);
    check("compare-baseline-b", &compare::page(&swapped));
}

#[test]
fn the_comparison_without_decode_or_prefill_says_what_it_said() {
    let mut runs = compared();
    runs.truncate(2);
    for r in &mut runs {
        (r.record.decode, r.record.prefill, r.record.capacity) = (Vec::new(), Vec::new(), Vec::new());
    }
    check("compare-unmeasured", &compare::page(&runs));
}

#[test]
fn the_comparisons_picker_says_what_it_said() {
    let recent = listed();
    let chosen = vec![recent[1].id.clone()];
    check("compare-picker", &compare::picker(&recent, &chosen, Some(&format!("Choose 2 to 4 runs, not {HOSTILE}"))));
    check("compare-picker-empty", &compare::picker(&[], &[], None));
}

#[test]
fn the_upload_form_and_the_message_page_say_what_they_said() {
    check("upload", &upload::page(None));
    check("upload-refused", &upload::page(Some(&format!("Not uploaded: {HOSTILE_ATTR}"))));
    check("message", &super::message(Nav::Compare, HOSTILE, &format!("No run {HOSTILE_ATTR}")));
}

#[test]
fn the_reduction_keeps_text_attributes_and_structure() {
    let html =
        "<!DOCTYPE html>\n<p class=\"a b\" hidden title='x &amp; &#39;y&#x27;'>one  <b>two</b>\n</p><script>s</script>";
    let want = "<!DOCTYPE html>\n<p class=\"a b\" hidden title=\"x & 'y'\">\n\"one \"\n<b>\n\"two\"\n</b>\n</p>\n<script>\n\"s\"\n</script>\n";
    assert_eq!(reduce(html), want);
    assert_eq!(reduce("a &lt;b&gt; &unknown; &#1;"), "\"a <b> &unknown; \\u{1}\"\n");
    // in a chart an empty element reads the same self-closed or closed; elsewhere its end tag stays
    let chart = "<svg><line x1=\"1\"></line><text>t</text></svg><span></span>";
    assert_eq!(reduce(chart), reduce("<svg><line x1=\"1\"/><text>t</text></svg><span></span>"));
    assert_eq!(reduce(chart), "<svg>\n<line x1=\"1\">\n<text>\n\"t\"\n</text>\n</svg>\n<span>\n</span>\n");
}
