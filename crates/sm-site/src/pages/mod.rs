//! The site's own pages (runs list, compare, upload), server-rendered and
//! usable without script. They share the report page's stylesheet so a run's
//! page and the pages around it look like one site.

pub mod capacity;
pub mod compare;
mod compare_diff;
pub mod runs;
pub mod upload;

use std::fmt::Write;

pub use sm_report::escape::html as esc;

/// The report page's stylesheet: one look for the report and the site.
const REPORT_CSS: &str = sm_report::CSS;
const SITE_CSS: &str = include_str!("site.css");

/// The policy of every page: nothing but inline styles and data: images, and
/// forms only to this site.
/// (`frame-ancestors` only works as a header, so the page's own copy leaves it out.)
const PAGE_CSP: &str =
    "default-src 'none'; style-src 'unsafe-inline'; img-src data:; form-action 'self'; base-uri 'none'";
pub const CSP: &str = "default-src 'none'; style-src 'unsafe-inline'; img-src data:; form-action 'self'; \
    base-uri 'none'; frame-ancestors 'none'";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Nav {
    Runs,
    Compare,
    Upload,
}

/// A whole page: `kicker` and `title` head it, `body` follows.
pub fn shell(active: Nav, kicker: &str, title: &str, body: &str) -> String {
    let mut s = String::with_capacity(body.len() + REPORT_CSS.len() + 4096);
    let _ = write!(
        s,
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n\
         <meta name=\"generator\" content=\"speedmatrix\">\n\
         <meta http-equiv=\"Content-Security-Policy\" content=\"{PAGE_CSP}\">\n\
         <title>{} — speedmatrix results</title>\n<style>\n{REPORT_CSS}{SITE_CSS}</style>\n</head>\n<body>\n",
        esc(title)
    );
    s.push_str("<nav class=\"site\"><a class=\"brand\" href=\"/\">speedmatrix results</a>");
    for (nav, text, href) in
        [(Nav::Runs, "Runs", "/"), (Nav::Compare, "Compare", "/compare"), (Nav::Upload, "Upload", "/upload")]
    {
        let current = if nav == active { " aria-current=\"page\"" } else { "" };
        let _ = write!(s, "<a href=\"{href}\"{current}>{text}</a>");
    }
    s.push_str("</nav>\n");
    let _ = write!(s, "<header>\n<p class=\"kicker\">{}</p>\n<h1>{}</h1>\n</header>\n", esc(kicker), esc(title));
    s.push_str(body);
    s.push_str(
        "<footer>speedmatrix results site — every run is also available as JSON at <code>/api/runs/&lt;id&gt;</code>; \
         figures are defined in each run's Methodology section.</footer>\n</body>\n</html>\n",
    );
    s
}

/// Percent-encodes a query-string value.
pub fn url_encode(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for b in text.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'~') {
            out.push(b as char);
        } else {
            let _ = write!(out, "%{b:02X}");
        }
    }
    out
}

/// `2026-09-03T16:52:41Z` → `2026-09-03 16:52`; anything else as it is.
pub fn short_time(t: &str) -> String {
    if t.is_empty() {
        "unknown".to_string()
    } else if t.len() >= 16 && t.as_bytes().get(10) == Some(&b'T') {
        format!("{} {}", &t[..10], &t[11..16])
    } else {
        t.to_string()
    }
}

/// `H200 NVL ×2`, or `—` without a GPU.
pub fn gpu_text(gpu: &str, count: i64) -> String {
    match (gpu.is_empty(), count) {
        (true, _) => sm_report::format::NONE.to_string(),
        (false, n) if n > 1 => format!("{gpu} ×{n}"),
        (false, _) => gpu.to_string(),
    }
}

/// A page that says what went wrong, with the status's usual look.
pub fn message(active: Nav, title: &str, text: &str) -> String {
    shell(active, "speedmatrix results", title, &format!("<p class=\"banner\" role=\"alert\">{}</p>\n", esc(text)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn encoding_and_times() {
        assert_eq!(url_encode("a b&c=ü"), "a%20b%26c%3D%C3%BC");
        assert_eq!(short_time("2026-09-03T16:52:41Z"), "2026-09-03 16:52");
        assert_eq!(short_time("yesterday"), "yesterday");
        assert_eq!(gpu_text("H200", 2), "H200 ×2");
        assert_eq!(gpu_text("", 0), "—");
    }

    #[test]
    fn shell_escapes_the_title() {
        let page = shell(Nav::Runs, "k", "<script>x</script>", "");
        assert!(!page.contains("<script>x") && page.contains("&lt;script&gt;x"));
    }
}
