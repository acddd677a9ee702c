//! The runs list (`/`): filters, sortable columns, pages, and checkboxes that
//! send the chosen runs to the comparison. Each run's capacity answer shows
//! per context; `context` keeps the runs that measured one and shows (and
//! sorts by) their answer there.

use std::fmt::Write;

use serde::Deserialize;

use super::{Nav, capacity, esc, gpu_text, shell, short_time, url_encode};
use crate::db::{Filter, ListQuery, Sort, StoredRun};

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
    pub sort: Option<String>,
    pub dir: Option<String>,
    pub page: Option<String>,
    pub per_page: Option<String>,
}

/// The parameters every link of the list carries, so that sorting and paging
/// keep the filters and the page size (`sort`, `dir` and `page` are set per link).
const CARRIED: [&str; 11] =
    ["model", "gpu", "gpu_count", "engine", "engine_version", "uploader", "label", "from", "to", "context", "per_page"];

fn clean(v: &Option<String>) -> Option<String> {
    v.as_deref().map(str::trim).filter(|s| !s.is_empty()).map(str::to_string)
}

/// A `YYYY-MM-DD` date, or why not.
fn date(v: &Option<String>, what: &str) -> Result<Option<time::Date>, String> {
    let Some(d) = clean(v) else { return Ok(None) };
    parse_day(&d).map(Some).ok_or_else(|| format!("{what} must be a date like 2026-09-03, not \"{d}\""))
}

/// A context length in tokens (`32768`, `32K`, `32k`: K is 1,024), or why not.
fn context(v: &Option<String>) -> Result<Option<i64>, String> {
    let Some(text) = clean(v) else { return Ok(None) };
    sm_core::units::parse_tokens(&text)
        .ok()
        .and_then(|t| i64::try_from(t.0).ok())
        .filter(|&t| t >= 1 && (t as f64) <= crate::validate::MAX_CONTEXT_TOKENS)
        .map(Some)
        .ok_or_else(|| format!("context must be a context length in tokens, e.g. 32768 or 32K, not \"{text}\""))
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

fn filter_form(s: &mut String, p: &ListParams, q: &ListQuery) {
    s.push_str("<form class=\"panel filters\" method=\"get\" action=\"/\" role=\"search\">\n");
    for (key, label, kind, hint) in [
        ("model", "Model", "search", "e.g. Ling"),
        ("gpu", "GPU", "search", "e.g. H200"),
        ("engine", "Engine", "search", "vllm, llamacpp…"),
        ("engine_version", "Engine version", "search", "exact, e.g. 0.27.2"),
        ("uploader", "Uploader", "search", "@name"),
        ("from", "Measured from", "date", ""),
        ("to", "Measured to", "date", ""),
        ("context", "Context", "search", "e.g. 32K: its capacity"),
    ] {
        let _ = writeln!(
            s,
            "<label>{label}<input type=\"{kind}\" name=\"{key}\" value=\"{}\" placeholder=\"{hint}\"></label>",
            esc(&p.get(key).unwrap_or_default())
        );
    }
    if p.get("per_page").is_some() {
        let _ = write!(s, "<input type=\"hidden\" name=\"per_page\" value=\"{}\">", q.per_page);
    }
    let _ = write!(s, "<input type=\"hidden\" name=\"sort\" value=\"{}\">", q.sort.name());
    let _ = write!(s, "<input type=\"hidden\" name=\"dir\" value=\"{}\">", if q.descending { "desc" } else { "asc" });
    s.push_str(
        "<div class=\"actions\"><button type=\"submit\">Filter</button><a href=\"/\">Clear</a></div>\n</form>\n",
    );
}

fn header_cell(s: &mut String, p: &ListParams, q: &ListQuery, sort: Sort, text: &str) {
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
        (false, _) => ("", String::new()),
        (true, true) => (" ↓", " aria-sort=\"descending\"".to_string()),
        (true, false) => (" ↑", " aria-sort=\"ascending\"".to_string()),
    };
    let href = p.href(&[("sort", sort.name().to_string()), ("dir", dir.to_string())]);
    let class = if sort == Sort::Peak { " class=\"r\"" } else { "" };
    let _ = write!(s, "<th scope=\"col\"{class}><a href=\"{}\"{aria}>{}{arrow}</a></th>", esc(&href), esc(text));
}

/// The capacity column's header: sortable once a context is chosen.
fn capacity_header(s: &mut String, p: &ListParams, q: &ListQuery) {
    match q.filter.context {
        Some(ctx) => {
            let label = sm_core::context::label(sm_core::Tokens(ctx as u64));
            header_cell(s, p, q, Sort::Users, &format!("Users at {label}"));
        }
        None => s.push_str(
            "<th scope=\"col\" title=\"most simultaneous users per context that meet the run's SLO; \
             choose a context to filter and sort by it\">Capacity (users)</th>",
        ),
    }
}

/// A run's answers, each linking to the list at that context (the other filters kept).
fn capacity_cell(s: &mut String, p: &ListParams, r: &StoredRun) {
    s.push_str("<td class=\"cap\">");
    if r.capacity.is_empty() {
        s.push_str(sm_report::format::NONE);
    }
    for a in &r.capacity {
        let href = p.href(&[("context", a.context.to_string()), ("sort", "users".into()), ("dir", "desc".into())]);
        s.push_str(&capacity::compact(a, Some(&href)));
    }
    if !r.slo.is_empty() {
        let _ = write!(s, "<div class=\"sub\" title=\"the SLO of this answer\">{}</div>", esc(&r.slo));
    }
    s.push_str("</td>");
}

fn row(s: &mut String, p: &ListParams, r: &StoredRun) {
    let id = esc(&r.id);
    let _ = write!(
        s,
        "<tr><td class=\"pick\"><input type=\"checkbox\" form=\"compare\" name=\"ids\" value=\"{id}\" aria-label=\"compare {}\"></td>",
        esc(&r.model)
    );
    let label = if r.label.is_empty() { String::new() } else { format!("<div class=\"sub\">{}</div>", esc(&r.label)) };
    let _ = write!(s, "<td class=\"model\"><a href=\"/runs/{id}\">{}</a>{label}</td>", esc(&r.model));
    let _ = write!(s, "<td>{}</td>", esc(&gpu_text(&r.gpu, r.gpu_count)));
    let version = if r.engine_version.is_empty() {
        String::new()
    } else {
        format!(" <span class=\"sub\">{}</span>", esc(&r.engine_version))
    };
    let _ = write!(s, "<td>{}{version}</td>", esc(&r.engine));
    let peak =
        if r.peak_tok_s > 0.0 { sm_report::format::fixed1(r.peak_tok_s) } else { sm_report::format::NONE.into() };
    let _ = write!(s, "<td class=\"num\">{}</td>", esc(&peak));
    capacity_cell(s, p, r);
    let status = if r.status == "complete" {
        String::new()
    } else {
        format!(" <span class=\"sub\">({})</span>", esc(&r.status))
    };
    let _ = write!(s, "<td>{}{status}</td>", esc(&short_time(&r.measured_at)));
    let _ = write!(s, "<td>@{}</td>", esc(&r.uploader));
    let _ = writeln!(s, "<td class=\"sub\">{}</td></tr>", esc(&short_time(&r.uploaded_at)));
}

/// The runs list page.
pub fn page(p: &ListParams, q: &ListQuery, runs: &[StoredRun], total: i64, notice: Option<&str>) -> String {
    let mut s = String::new();
    if let Some(n) = notice {
        let _ = writeln!(s, "<p class=\"banner\" role=\"alert\">{}</p>", esc(n));
    }
    filter_form(&mut s, p, q);
    let _ = writeln!(s, "<form id=\"compare\" method=\"get\" action=\"/compare\"></form>");
    if runs.is_empty() {
        s.push_str("<p class=\"empty\">No runs match. <a href=\"/upload\">Upload one</a> or clear the filters.</p>\n");
        return shell(Nav::Runs, "speedmatrix results", "Runs", &s);
    }
    s.push_str("<div class=\"scroll\"><table class=\"runs\">\n<thead><tr><th class=\"pick\" scope=\"col\" title=\"compare\">⇆</th>");
    for (sort, text) in
        [(Sort::Model, "Model"), (Sort::Gpu, "GPU"), (Sort::Engine, "Engine"), (Sort::Peak, "Peak total tok/s")]
    {
        header_cell(&mut s, p, q, sort, text);
    }
    capacity_header(&mut s, p, q);
    header_cell(&mut s, p, q, Sort::Measured, "Measured");
    s.push_str("<th scope=\"col\">Uploader</th>");
    header_cell(&mut s, p, q, Sort::Uploaded, "Uploaded");
    s.push_str("</tr></thead>\n<tbody>\n");
    for r in runs {
        row(&mut s, p, r);
    }
    s.push_str("</tbody></table></div>\n<div class=\"toolbar\">");
    s.push_str("<button type=\"submit\" form=\"compare\">Compare selected (2–4)</button>");
    let pages = ((total + q.per_page - 1) / q.per_page).max(1);
    let first = (q.page - 1) * q.per_page + 1;
    let last = (first + runs.len() as i64 - 1).max(first);
    let _ = write!(s, "<div class=\"pager\"><span>{first}–{last} of {total}</span>");
    let page_link = |n: i64| {
        esc(&p.href(&[
            ("sort", q.sort.name().into()),
            ("dir", (if q.descending { "desc" } else { "asc" }).into()),
            ("page", n.to_string()),
        ]))
    };
    if q.page > 1 {
        let _ = write!(s, "<a rel=\"prev\" href=\"{}\">← Previous page</a>", page_link(q.page - 1));
    }
    let _ = write!(s, "<span>page {} of {pages}</span>", q.page);
    if q.page < pages {
        let _ = write!(s, "<a rel=\"next\" href=\"{}\">Next page →</a>", page_link(q.page + 1));
    }
    s.push_str("</div></div>\n");
    shell(Nav::Runs, "speedmatrix results", "Runs", &s)
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
        let html = page(&p, &q, &[run("b")], 3, None);
        let next = "/?engine_version=0.27.2&per_page=1&sort=model&dir=asc&page=3";
        assert_eq!(pager_link(&html, "next").as_deref(), Some(next), "{html}");
        let prev = "/?engine_version=0.27.2&per_page=1&sort=model&dir=asc&page=1";
        assert_eq!(pager_link(&html, "prev").as_deref(), Some(prev), "{html}");
        assert!(html.contains("← Previous page") && !html.contains("Newer"), "{html}");
        // sorting starts again at page 1 with the same page size
        assert!(html.contains("href=\"/?engine_version=0.27.2&amp;per_page=1&amp;sort=peak&amp;dir=desc\""), "{html}");
        assert!(html.contains("name=\"per_page\" value=\"1\""), "the filter form keeps the page size");
    }
}
