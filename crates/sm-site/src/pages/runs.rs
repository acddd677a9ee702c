//! The runs list (`/`): filters, sortable columns, pages, and checkboxes that
//! send the chosen runs to the comparison. Each run's capacity answer shows
//! per context; `context` keeps the runs that measured one and shows (and
//! sorts by) their answer there.

use std::collections::HashMap;

use maud::{Markup, html};
use serde::Deserialize;

use sm_core::context::ContextQuery;
use sm_core::phases::replay::ReplayCapacity;
use sm_core::slo::Slo;
use sm_report::format::NONE;

use super::{Nav, banner, capacity, compare_order_script, gpu_text, shell, short_time, url_encode};
use crate::db::{CapacityRow, Filter, ListQuery, Sort, StoredRun};
use crate::rejudge::Rejudged;

/// The list's query string, shared by the page and `GET /api/runs`.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct ListParams {
    pub model: Option<String>,
    pub gpu: Option<String>,
    pub gpu_count: Option<String>,
    pub engine: Option<String>,
    pub engine_version: Option<String>,
    pub uploader: Option<String>,
    pub label: Option<String>,
    pub from: Option<String>,
    pub to: Option<String>,
    pub context: Option<String>,
    pub slo: Option<String>,
    pub sort: Option<String>,
    pub dir: Option<String>,
    pub page: Option<String>,
    pub per_page: Option<String>,
}

/// The parameters every link of the list carries, so that sorting and paging
/// keep the filters and the page size (`sort`, `dir` and `page` are set per link).
const CARRIED: [&str; 12] = [
    "model",
    "gpu",
    "gpu_count",
    "engine",
    "engine_version",
    "uploader",
    "label",
    "from",
    "to",
    "context",
    "slo",
    "per_page",
];

fn clean(v: &Option<String>) -> Option<String> {
    v.as_deref().map(str::trim).filter(|s| !s.is_empty()).map(str::to_string)
}

/// A `YYYY-MM-DD` date, or why not.
fn date(v: &Option<String>, what: &str) -> Result<Option<time::Date>, String> {
    let Some(d) = clean(v) else { return Ok(None) };
    parse_day(&d).map(Some).ok_or_else(|| format!("{what} must be a date like 2026-09-03, not \"{d}\""))
}

/// A decode context by the name it was asked as (`256K`, `256k`), its exact tokens (`257984`,
/// `257,984`) or both as the pages show it (`256K (257,984)`), or why not.
fn context(v: &Option<String>) -> Result<Option<ContextQuery>, String> {
    let Some(text) = clean(v) else { return Ok(None) };
    if text.chars().count() > 64 {
        return Err("context must be a context's name or its tokens, e.g. 32K or 262144, not a long text".into());
    }
    let query = ContextQuery::parse(&text)?;
    let named = query.label.as_deref().and_then(|l| sm_core::units::parse_tokens(l).ok()).map(|t| t.0);
    if named.into_iter().chain(query.tokens).any(|t| t as f64 > crate::validate::MAX_CONTEXT_TOKENS) {
        return Err(format!("context \"{text}\" is longer than any context the site stores"));
    }
    Ok(Some(query))
}

/// An SLO as the runs were judged under it, in the one spelling the site stores, or why not.
fn slo(v: &Option<String>) -> Result<Option<String>, String> {
    let Some(text) = clean(v) else { return Ok(None) };
    if text.len() > 256 {
        return Err("slo must be an SLO expression such as tok_s_p10>=20,ttft_p90<=2s, not a long text".into());
    }
    text.parse::<sm_core::slo::Slo>()
        .map(|s| Some(s.to_string()))
        .map_err(|e| format!("slo must be an SLO expression such as {}: {e}", sm_core::slo::DEFAULT_SLO))
}

/// `YYYY-MM-DD`, a day of the calendar (so not 2026-02-30).
fn parse_day(d: &str) -> Option<time::Date> {
    let bytes = d.as_bytes();
    if d.len() != 10 || bytes[4] != b'-' || bytes[7] != b'-' {
        return None;
    }
    let number = |range: std::ops::Range<usize>| {
        d.get(range).filter(|p| p.bytes().all(|b| b.is_ascii_digit())).and_then(|p| p.parse::<u16>().ok())
    };
    let month = time::Month::try_from(u8::try_from(number(5..7)?).ok()?).ok()?;
    time::Date::from_calendar_date(i32::from(number(0..4)?), month, u8::try_from(number(8..10)?).ok()?).ok()
}

impl ListParams {
    fn get(&self, key: &str) -> Option<String> {
        let v = match key {
            "model" => &self.model,
            "gpu" => &self.gpu,
            "gpu_count" => &self.gpu_count,
            "engine" => &self.engine,
            "engine_version" => &self.engine_version,
            "uploader" => &self.uploader,
            "label" => &self.label,
            "from" => &self.from,
            "to" => &self.to,
            "context" => &self.context,
            "slo" => &self.slo,
            "sort" => &self.sort,
            "dir" => &self.dir,
            "per_page" => &self.per_page,
            _ => return None,
        };
        clean(v)
    }

    /// The database query these parameters ask for, or what is wrong with them.
    pub fn to_query(&self) -> Result<ListQuery, String> {
        let int = |v: &Option<String>, what: &str| -> Result<Option<i64>, String> {
            clean(v)
                .map(|s| s.parse::<i64>().map_err(|_| format!("{what} must be a whole number, not \"{s}\"")))
                .transpose()
        };
        let context = context(&self.context)?;
        let sort = match clean(&self.sort) {
            // a chosen context lists its runs by the users they serve there
            None if context.is_some() => Sort::Users,
            None => Sort::default(),
            Some(s) => Sort::parse(&s).ok_or_else(|| {
                let names: Vec<&str> = Sort::ALL.iter().map(|(_, n)| *n).collect();
                format!("sort must be one of {}, not \"{s}\"", names.join(", "))
            })?,
        };
        if sort == Sort::Users && context.is_none() {
            return Err("sort=users sorts by the users at one context: add context, e.g. context=32K".into());
        }
        let descending = match clean(&self.dir).as_deref() {
            None => !matches!(sort, Sort::Model | Sort::Gpu | Sort::Engine),
            Some("asc") => false,
            Some("desc") => true,
            Some(d) => return Err(format!("dir must be asc or desc, not \"{d}\"")),
        };
        Ok(ListQuery {
            filter: Filter {
                model: clean(&self.model),
                gpu: clean(&self.gpu),
                gpu_count: int(&self.gpu_count, "gpu_count")?,
                engine: clean(&self.engine),
                engine_version: clean(&self.engine_version),
                uploader: clean(&self.uploader).map(|u| u.trim_start_matches('@').to_string()),
                label: clean(&self.label),
                from: date(&self.from, "from")?,
                to: date(&self.to, "to")?,
                context,
                slo: slo(&self.slo)?,
            },
            sort,
            descending,
            page: int(&self.page, "page")?.unwrap_or(1).max(1),
            per_page: int(&self.per_page, "per_page")?.unwrap_or(25).clamp(1, 200),
        })
    }

    /// The query string of these filters with `extra` pairs after them.
    fn href(&self, extra: &[(&str, String)]) -> String {
        let mut pairs: Vec<(String, String)> =
            CARRIED.iter().filter_map(|k| self.get(k).map(|v| (k.to_string(), v))).collect();
        for (k, v) in extra {
            pairs.retain(|(key, _)| key != k);
            pairs.push((k.to_string(), v.clone()));
        }
        let q: Vec<String> = pairs.iter().map(|(k, v)| format!("{k}={}", url_encode(v))).collect();
        if q.is_empty() { "/".into() } else { format!("/?{}", q.join("&")) }
    }
}

/// The filter form's search fields: `(parameter, label, input type, placeholder)`.
const FILTERS: [(&str, &str, &str, &str); 9] = [
    ("model", "Model", "search", "e.g. Ling"),
    ("gpu", "GPU", "search", "e.g. H200"),
    ("engine", "Engine", "search", "vllm, llamacpp…"),
    ("engine_version", "Engine version", "search", "exact, e.g. 0.27.2"),
    ("uploader", "Uploader", "search", "@name"),
    ("from", "Measured from", "date", ""),
    ("to", "Measured to", "date", ""),
    ("context", "Context", "search", "e.g. 256K or 257984: its capacity"),
    ("slo", "SLO", "search", "e.g. tok_s_p10>=20,ttft_p90<=2s"),
];

fn direction(q: &ListQuery) -> &'static str {
    if q.descending { "desc" } else { "asc" }
}

fn filter_form(p: &ListParams, q: &ListQuery) -> Markup {
    html! {
        form.panel.filters method="get" action="/" role="search" {
            @for (key, text, kind, hint) in FILTERS {
                label { (text) input type=(kind) name=(key) value=(p.get(key).unwrap_or_default()) placeholder=(hint); }
            }
            @if p.get("per_page").is_some() {
                input type="hidden" name="per_page" value=(q.per_page);
            }
            input type="hidden" name="sort" value=(q.sort.name());
            input type="hidden" name="dir" value=(direction(q));
            div.actions { button type="submit" { "Filter" } a href="/" { "Clear" } }
        }
    }
}

fn header_cell(p: &ListParams, q: &ListQuery, sort: Sort, text: &str) -> Markup {
    let active = q.sort == sort;
    let dir = if active && q.descending {
        "asc"
    } else if active {
        "desc"
    } else if matches!(sort, Sort::Model | Sort::Gpu | Sort::Engine) {
        "asc"
    } else {
        "desc"
    };
    let (arrow, aria) = match (active, q.descending) {
        (false, _) => ("", None),
        (true, true) => (" ↓", Some("descending")),
        (true, false) => (" ↑", Some("ascending")),
    };
    let href = p.href(&[("sort", sort.name().to_string()), ("dir", dir.to_string())]);
    html! {
        th scope="col" class=[(sort == Sort::Peak).then_some("r")] {
            a href=(href) aria-sort=[aria] { (text) (arrow) }
        }
    }
}

/// The capacity column's header: sortable once a context is chosen.
fn capacity_header(p: &ListParams, q: &ListQuery) -> Markup {
    match &q.filter.context {
        Some(ctx) => header_cell(p, q, Sort::Users, &format!("Users at {}", ctx.shown())),
        None => html! {
            th scope="col" title="most simultaneous users per context that meet the run's SLO; choose a context to \
                filter and sort by it" { "Capacity (users)" }
        },
    }
}

/// The list at the context of answer `a` (the other filters kept), ranked by its users: the runs
/// whose context was asked by the same name; a name that is not one, by its tokens.
fn context_href(p: &ListParams, a: &CapacityRow) -> String {
    let name = if ContextQuery::parse(&a.label).is_ok_and(|q| q.label.is_some()) {
        a.label.clone()
    } else {
        a.context.to_string()
    };
    p.href(&[("context", name), ("sort", "users".into()), ("dir", "desc".into())])
}

/// A run's answers, each linking to the list at that context (the other filters kept), and its
/// answer under the viewer's SLO where it was judged under another.
fn capacity_cell(p: &ListParams, r: &StoredRun, rejudged: Option<&Rejudged>) -> Markup {
    html! {
        td.cap {
            @if r.capacity.is_empty() && r.replay_capacity.is_none() { (NONE) }
            @for a in &r.capacity { (capacity::compact(a, Some(&context_href(p, a)))) }
            @if let Some(cap) = &r.replay_capacity { (replay_answer(cap, &r.slo)) }
            @if !r.slo.is_empty() { div.sub title="the SLO of this answer" { (r.slo) } }
            @if let (Some(answer), Some(viewer)) = (rejudged, p.get("slo")) { (rejudged_answer(answer, &viewer)) }
        }
    }
}

/// The answer on the run's replayed trace: the largest time scale that met the SLO, its sentence
/// in the title. From the run's row alone, so the list reads no record.
fn replay_answer(cap: &ReplayCapacity, slo: &str) -> Markup {
    let slo: Option<Slo> = slo.parse().ok();
    let sentence = sm_report::phases::replay::answer::sentence(cap, slo.as_ref());
    html! { div.sub.replay title=(sentence) { "your traffic: " (sm_report::phases::replay::answer::short(cap)) } }
}

/// The answer under the viewer's SLO, labelled re-judged, or why the run cannot give it.
fn rejudged_answer(answer: &Rejudged, viewer: &str) -> Markup {
    let viewer = viewer.parse::<sm_core::slo::Slo>().map(|v| v.to_string()).unwrap_or_default();
    match answer {
        Rejudged::Answer(rows) => html! {
            div.rejudged title="worked out from the figures this run stored, each exactly the figure a bound of \
                your SLO names" {
                "re-judged under " code { (viewer) } ": "
                @if rows.is_empty() { (NONE) }
                @for row in rows { (capacity::compact(row, None)) }
            }
        },
        Rejudged::Cannot(why) => html! { div.rejudged.sub { "under " code { (viewer) } ": " (why) } },
    }
}

fn row(p: &ListParams, r: &StoredRun, rejudged: Option<&Rejudged>) -> Markup {
    let peak = if r.peak_tok_s > 0.0 { sm_report::format::fixed1(r.peak_tok_s) } else { NONE.into() };
    html! {
        tr {
            td.pick {
                input type="checkbox" form="compare" name="ids" value=(r.id) aria-label={ "compare " (r.model) };
            }
            td.model {
                a href={ "/runs/" (r.id) } { (r.model) }
                @if !r.label.is_empty() { div.sub { (r.label) } }
            }
            td { (gpu_text(&r.gpu, r.gpu_count)) }
            td { (r.engine) @if !r.engine_version.is_empty() { " " span.sub { (r.engine_version) } } }
            td.num { (peak) }
            (capacity_cell(p, r, rejudged))
            td { (short_time(&r.measured_at)) @if r.status != "complete" { " " span.sub { "(" (r.status) ")" } } }
            td { "@" (r.uploader) }
            td.sub { (short_time(&r.uploaded_at)) }
        }
    }
}

/// The head of the runs judged under one SLO: ranked by users, runs are ranked within the SLO
/// they were judged under (methodology §11.3), never across two, which answer different questions.
fn slo_group(p: &ListParams, r: &StoredRun) -> Markup {
    let how = match r.judged_from.as_str() {
        "summaries" => "judged after the fact from the cells' summary figures",
        "requests" => "judged from every request's figures",
        _ => "not judged",
    };
    let slo = if r.slo.is_empty() { "no SLO" } else { r.slo.as_str() };
    let viewer = p.get("slo").and_then(|v| v.parse::<sm_core::slo::Slo>().ok()).map(|v| v.to_string());
    let first = (!r.slo.is_empty() && viewer.as_deref() != Some(r.slo.as_str()))
        .then(|| p.href(&[("slo", r.slo.clone()), ("sort", "users".into())]));
    let other = viewer.filter(|v| *v != r.slo);
    html! {
        tr.group { th colspan="9" scope="rowgroup" {
            "Ranked within the SLO " code { (slo) } " (" (how) ")"
            @if let Some(href) = first { " · " a href=(href) { "rank this SLO's runs first" } }
            ": "
            @if let Some(v) = other {
                "judged under another SLO than yours: each row gives its answer under " code { (v) }
                ", re-judged where the figures it stored answer every bound exactly, not ranked with yours"
            } @else {
                "runs judged under another SLO answer another question and are ranked apart"
            }
        } }
    }
}

fn table(p: &ListParams, q: &ListQuery, runs: &[StoredRun], rejudged: &HashMap<String, Rejudged>) -> Markup {
    let sorts =
        [(Sort::Model, "Model"), (Sort::Gpu, "GPU"), (Sort::Engine, "Engine"), (Sort::Peak, "Peak total tok/s")];
    html! {
        div.scroll { table.runs {
            thead { tr {
                th.pick scope="col" title="compare" { "⇆" }
                @for (sort, text) in sorts { (header_cell(p, q, sort, text)) }
                (capacity_header(p, q))
                (header_cell(p, q, Sort::Measured, "Measured"))
                th scope="col" { "Uploader" }
                (header_cell(p, q, Sort::Uploaded, "Uploaded"))
            } }
            tbody {
                @for (i, r) in runs.iter().enumerate() {
                    @if q.sort == Sort::Users && (i == 0 || runs[i - 1].slo != r.slo) { (slo_group(p, r)) }
                    (row(p, r, rejudged.get(&r.id)))
                }
            }
        } }
    }
}

/// "Compare selected" and the pager: where this page is in the list, and links to its neighbours.
fn toolbar(p: &ListParams, q: &ListQuery, shown: usize, total: i64) -> Markup {
    let pages = ((total + q.per_page - 1) / q.per_page).max(1);
    let first = (q.page - 1) * q.per_page + 1;
    let last = (first + shown as i64 - 1).max(first);
    let page_link =
        |n: i64| p.href(&[("sort", q.sort.name().into()), ("dir", direction(q).into()), ("page", n.to_string())]);
    html! {
        div.toolbar {
            button type="submit" form="compare" { "Compare selected (2–4)" }
            span.caption { "the first run you tick is the baseline (A)" }
            div.pager {
                span { (first) "–" (last) " of " (total) }
                @if q.page > 1 { a rel="prev" href=(page_link(q.page - 1)) { "← Previous page" } }
                span { "page " (q.page) " of " (pages) }
                @if q.page < pages { a rel="next" href=(page_link(q.page + 1)) { "Next page →" } }
            }
        }
    }
}

/// The runs list page.
pub fn page(
    p: &ListParams,
    q: &ListQuery,
    runs: &[StoredRun],
    rejudged: &HashMap<String, Rejudged>,
    total: i64,
    notice: Option<&str>,
) -> String {
    let body = html! {
        @if let Some(n) = notice { (banner(n)) }
        (filter_form(p, q))
        form #compare method="get" action="/compare" {}
        @if runs.is_empty() {
            p.empty { "No runs match. " a href="/upload" { "Upload one" } " or clear the filters." }
        } @else {
            (table(p, q, runs, rejudged))
            (toolbar(p, q, runs.len(), total))
            (compare_order_script())
        }
    };
    shell(Nav::Runs, "speedmatrix results", "Runs", body)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parameters() {
        let p = ListParams {
            model: Some(" ling ".into()),
            sort: Some("peak".into()),
            page: Some("3".into()),
            ..Default::default()
        };
        let q = p.to_query().unwrap();
        assert_eq!(q.filter.model.as_deref(), Some("ling"));
        assert_eq!((q.sort, q.descending, q.page), (Sort::Peak, true, 3));
        assert!(ListParams { sort: Some("id; DROP TABLE runs".into()), ..Default::default() }.to_query().is_err());
        assert!(ListParams { from: Some("2026-13".into()), ..Default::default() }.to_query().is_err());
        assert_eq!(p.href(&[("page", "4".into())]), "/?model=ling&page=4");
        let days = ListParams { from: Some("2026-09-01".into()), to: Some("2026-09-30".into()), ..Default::default() };
        let f = days.to_query().unwrap().filter;
        assert_eq!(
            (f.from.unwrap().to_string(), f.to.unwrap().to_string()),
            ("2026-09-01".into(), "2026-09-30".into())
        );
        for bad in ["2026-02-30", "2026-9-01", "2026-09-01x"] {
            assert!(ListParams { to: Some(bad.into()), ..Default::default() }.to_query().is_err(), "{bad}");
        }
    }

    fn run(id: &str) -> StoredRun {
        StoredRun {
            id: id.into(),
            uploaded_at: "2026-09-03T16:52:41Z".into(),
            uploader: "alice".into(),
            model: "m".into(),
            gpu: "H200".into(),
            gpu_count: 1,
            engine: "vllm".into(),
            engine_version: "0.27.2".into(),
            measured_at: "2026-09-03T16:52:41Z".into(),
            label: String::new(),
            status: "complete".into(),
            peak_tok_s: 1.0,
            record: String::new(),
            content_hash: None,
            slo: String::new(),
            judged_from: String::new(),
            capacity: Vec::new(),
            replay_capacity: None,
        }
    }

    /// The `href` of the pager link `rel`, unescaped.
    fn pager_link(html: &str, rel: &str) -> Option<String> {
        let start = html.find(&format!("rel=\"{rel}\" href=\""))? + rel.len() + 13;
        Some(html[start..start + html[start..].find('"')?].replace("&amp;", "&"))
    }

    #[test]
    fn pager_links_keep_filters_sort_and_page_size() {
        let p = ListParams {
            engine_version: Some("0.27.2".into()),
            sort: Some("model".into()),
            page: Some("2".into()),
            per_page: Some("1".into()),
            ..Default::default()
        };
        let q = p.to_query().unwrap();
        let html = page(&p, &q, &[run("b")], &HashMap::new(), 3, None);
        let next = "/?engine_version=0.27.2&per_page=1&sort=model&dir=asc&page=3";
        assert_eq!(pager_link(&html, "next").as_deref(), Some(next), "{html}");
        let prev = "/?engine_version=0.27.2&per_page=1&sort=model&dir=asc&page=1";
        assert_eq!(pager_link(&html, "prev").as_deref(), Some(prev), "{html}");
        assert!(html.contains("← Previous page") && !html.contains("Newer"), "{html}");
        // sorting starts again at page 1 with the same page size
        assert!(html.contains("href=\"/?engine_version=0.27.2&amp;per_page=1&amp;sort=peak&amp;dir=desc\""), "{html}");
        assert!(html.contains("name=\"per_page\" value=\"1\""), "the filter form keeps the page size");
    }

    /// A run's answer on its replayed trace stands with its matrix answers, its sentence (the
    /// record's text, escaped) in the title.
    #[test]
    fn a_run_with_a_replay_shows_its_answer_on_the_trace() {
        let text = include_str!("../../../../tests/data/run-replay.json");
        let (_, stored) = crate::ingest::prepare(text, "alice").unwrap();
        let p = ListParams::default();
        let html = page(&p, &p.to_query().unwrap(), &[stored], &HashMap::new(), 1, None);
        assert!(html.contains("your traffic: up to 2× (8.00 req/s), not converged"), "{html}");
        assert!(html.contains("title=\"Serves this traffic at up to 2× its recorded rate"), "{html}");
        assert!(html.contains("limited by TTFT p90 &lt;b&gt;&amp;amp; at 3×") && !html.contains("<b>"), "{html}");
    }

    #[test]
    fn an_answer_under_the_viewers_slo_is_labelled_re_judged_or_says_why_not() {
        let p = ListParams { slo: Some("ttft_p90<=2s".into()), context: Some("8K".into()), ..Default::default() };
        let q = p.to_query().unwrap();
        let (mut a, mut b) = (run("a"), run("b"));
        (a.slo, a.judged_from, b.slo, b.judged_from) =
            ("tok_s_p50>=20".into(), "summaries".into(), "tok_s_p10>=20".into(), "requests".into());
        let row = crate::db::CapacityRow {
            context: 8192,
            label: "8K".into(),
            max_users: 12,
            bounded_by: "slo:ttft_p90".parse().unwrap(),
        };
        let again = HashMap::from([
            ("a".to_string(), Rejudged::Cannot("cannot answer ttft_p90 (the run stored <p50> only)".into())),
            ("b".to_string(), Rejudged::Answer(vec![row])),
        ]);
        let html = page(&p, &q, &[a, b], &again, 2, None);
        assert!(
            html.contains(
                "under <code>ttft_p90&lt;=2s</code>: cannot answer ttft_p90 (the run stored &lt;p50&gt; only)"
            ),
            "{html}"
        );
        assert!(html.contains("re-judged under <code>ttft_p90&lt;=2s</code>: ") && html.contains("8K: 12"), "{html}");
        assert!(html.contains("each row gives its answer under <code>ttft_p90&lt;=2s</code>"), "{html}");
        // without the viewer's SLO nothing is re-judged, whatever is passed
        let plain = ListParams { context: Some("8K".into()), ..Default::default() };
        let html = page(&plain, &plain.to_query().unwrap(), &[run("b")], &again, 1, None);
        assert!(!html.contains("re-judged"), "{html}");
    }
}
