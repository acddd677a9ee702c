//! The site's own pages (runs list, compare, upload), server-rendered and
//! usable without script. They share the report page's stylesheet so a run's
//! page and the pages around it look like one site.
//!
//! The site serves strangers' uploads, so every page is a `maud` template: each interpolated
//! value is escaped by the template itself. Only markup the site builds goes in unescaped
//! (`PreEscaped`), each use saying why it is safe: the compiled-in stylesheets and script. The
//! charts `sm_report::svg` draws are `maud` markup as well, spliced as such.

pub mod capacity;
pub mod compare;
mod compare_diff;
#[cfg(test)]
mod golden_tests;
pub mod runs;
pub mod upload;

use std::fmt::Write;

use maud::{DOCTYPE, Markup, PreEscaped, html};
use sha2::Digest;

/// The report page's stylesheet: one look for the report and the site.
const REPORT_CSS: &str = sm_report::CSS;
const SITE_CSS: &str = include_str!("site.css");

/// The runs list's one script: "Compare selected" sends the runs in the order they were ticked,
/// so the first ticked is the baseline. Without it the list still works (the table's order).
pub const COMPARE_ORDER_JS: &str = include_str!("compare-order.js");

/// The policy of every page: nothing but inline styles, data: images, the one script above (by
/// its hash) and forms only to this site.
/// (`frame-ancestors` only works as a header, so the page's own copy leaves it out.)
static PAGE_CSP: std::sync::LazyLock<String> = std::sync::LazyLock::new(|| {
    format!(
        "default-src 'none'; style-src 'unsafe-inline'; script-src 'sha256-{}'; img-src data:; form-action 'self'; \
         base-uri 'none'",
        base64(&sha2::Sha256::digest(COMPARE_ORDER_JS.as_bytes()))
    )
});

/// The policy as the site's header sends it.
pub fn csp() -> String {
    format!("{}; frame-ancestors 'none'", *PAGE_CSP)
}

/// Standard base64 with padding (RFC 4648 §4), for the script's hash.
fn base64(bytes: &[u8]) -> String {
    const ABC: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for chunk in bytes.chunks(3) {
        let n = chunk.iter().enumerate().fold(0u32, |n, (i, &b)| n | u32::from(b) << (16 - 8 * i));
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(char::from(ABC[(n >> (18 - 6 * i) & 63) as usize]));
            } else {
                out.push('=');
            }
        }
    }
    out
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Nav {
    Runs,
    Compare,
    Upload,
}

/// A whole page: `kicker` and `title` head it, `body` follows.
pub fn shell(active: Nav, kicker: &str, title: &str, body: Markup) -> String {
    let page = html! {
        (DOCTYPE)
        html lang="en" {
            head {
                (sm_report::head_meta(&PAGE_CSP))
                title { (title) " — speedmatrix results" }
                // the stylesheets are the report's and the site's own, compiled in: no upload's text
                style { (PreEscaped(REPORT_CSS)) (PreEscaped(SITE_CSS)) }
            }
            body {
                (nav(active))
                header {
                    p.kicker { (kicker) }
                    h1 { (title) }
                }
                (body)
                footer {
                    "speedmatrix results site — every run is also available as JSON at "
                    code { "/api/runs/<id>" }
                    "; figures are defined in each run's Methodology section."
                }
            }
        }
    };
    without_controls(page.into_string())
}

fn nav(active: Nav) -> Markup {
    let links = [(Nav::Runs, "Runs", "/"), (Nav::Compare, "Compare", "/compare"), (Nav::Upload, "Upload", "/upload")];
    html! {
        nav.site {
            a.brand href="/" { "speedmatrix results" }
            @for (nav, text, href) in links {
                a href=(href) aria-current=[(nav == active).then_some("page")] { (text) }
            }
        }
    }
}

/// A page with the control characters an upload's text may hold (the template escapes markup, not
/// them) shown as U+FFFD, as `sm_report::escape::Text` shows them on a run's page. The pages' own
/// markup, stylesheets and script have none but line breaks and tabs, which stay.
fn without_controls(page: String) -> String {
    if !page.chars().any(is_shown_as_replacement) {
        return page;
    }
    page.chars().map(|c| if is_shown_as_replacement(c) { '\u{FFFD}' } else { c }).collect()
}

fn is_shown_as_replacement(c: char) -> bool {
    c.is_control() && c != '\n' && c != '\t'
}

/// The runs list's and the picker's one script, allowed by its hash (see [`PAGE_CSP`]).
fn compare_order_script() -> Markup {
    // the script is compiled in and must stay byte for byte what the policy's hash is of
    html! { script { (PreEscaped(COMPARE_ORDER_JS)) } }
}

/// A run's letter in its chart colour, as the comparison's key, tables and legends show it.
fn swatch(i: usize, letter: &str) -> Markup {
    html! { span class={ "swatch s" (i) } { (letter) } }
}

/// A notice above a page's content.
fn banner(text: &str) -> Markup {
    html! { p.banner role="alert" { (text) } }
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
    shell(active, "speedmatrix results", title, banner(text))
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
    fn the_policy_allows_the_one_script_by_its_hash() {
        assert_eq!(base64(b""), "");
        assert_eq!(base64(b"f"), "Zg==");
        assert_eq!(base64(b"fo"), "Zm8=");
        assert_eq!(base64(b"foobar"), "Zm9vYmFy");
        let hash = base64(&sha2::Sha256::digest(COMPARE_ORDER_JS.as_bytes()));
        assert!(csp().contains(&format!("script-src 'sha256-{hash}'")) && csp().ends_with("frame-ancestors 'none'"));
        assert!(!csp().contains("script-src 'unsafe") && PAGE_CSP.matches("script-src").count() == 1);
    }

    #[test]
    fn shell_escapes_the_title() {
        let page = shell(Nav::Runs, "k", "<script>x</script>", html! {});
        assert!(!page.contains("<script>x") && page.contains("&lt;script&gt;x"));
    }

    #[test]
    fn control_characters_are_shown_as_replacements() {
        let page = message(Nav::Runs, "t\u{0}", "a\u{1b}[31mb\r");
        assert!(page.contains("t\u{FFFD}") && page.contains("a\u{FFFD}[31mb\u{FFFD}"), "{page}");
        assert!(!page.contains('\u{1b}') && !page.contains('\r') && !page.contains('\u{0}'));
    }
}
