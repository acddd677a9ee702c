//! The comparison's per-figure differences with their significance: the same data
//! (`sm_report::compare`) and the same marks as `speedmatrix compare`, so the site and the command
//! line cannot disagree about which difference is beyond the noise.

use maud::{Markup, html};
use sm_core::record::RunRecord;
use sm_report::compare::render::{TOO_FEW_MEANING, diff_text, outcome_text, requests_text};
use sm_report::compare::{Comparison, Figure, Outcome, Significance, compare};

use super::swatch;

fn class(s: Significance) -> &'static str {
    match s {
        Significance::Significant => "sig",
        Significance::WithinNoise => "noise",
        Significance::NoInterval => "noint",
    }
}

fn table(c: &Comparison, bi: usize, letter: &str) -> Markup {
    let shown = c.figures();
    html! {
        h3.ratio-title { (swatch(bi, letter)) " − " (swatch(0, "A")) }
        div.scroll { table class="runs sigdiff" {
            thead { tr {
                th { "Context" }
                th.r { "Users" }
                th.r title={ "each run's requests in the cell (A/" (letter) ")" } { "Requests" }
                @for f in &shown { th.r { (f.title()) } }
            } }
            tbody {
                @for cell in &c.cells {
                    tr {
                        td { (cell.label) }
                        td.num { (cell.concurrency) }
                        td.num { (requests_text(cell.requests)) }
                        (figures(&shown, &cell.outcome, letter))
                    }
                }
            }
        } }
    }
}

/// A cell's difference per figure, marked by its significance, or why the cell has none.
fn figures(shown: &[Figure], outcome: &Outcome, letter: &str) -> Markup {
    match outcome {
        Outcome::Compared(diffs) => html! {
            @for &f in shown {
                @match diffs.iter().find(|d| d.figure == f) {
                    Some(d) => {
                        @let meaning = if d.too_few { TOO_FEW_MEANING } else { d.significance.meaning() };
                        td class={ "num " (class(d.significance)) } title=(meaning) { (diff_text(d)) }
                    }
                    None => { td.num { "—" } }
                }
            }
        },
        other => html! { td colspan=(shown.len()) class="caption" { (outcome_text(other, letter)) } },
    }
}

/// Each run after the first against the first, per cell and figure, with the legend of the marks.
pub fn section(records: &[&RunRecord], letters: &[&str]) -> Markup {
    let comparisons: Vec<Comparison> = records.iter().skip(1).map(|b| compare(records[0], b)).collect();
    let no_interval = comparisons.iter().any(|c| c.any(Significance::NoInterval));
    let too_few = comparisons.iter().any(|c| c.compared().any(|(_, f)| f.iter().any(|d| d.too_few)));
    html! {
        h2 id="decode-differences" { "Differences from A, with their significance" }
        p.caption {
            "each figure's difference in % of A's, per cell both runs measured (the same as "
            code { "speedmatrix compare" } ")"
        }
        @for (i, c) in comparisons.iter().enumerate() { (table(c, i + 1, letters[i + 1])) }
        p class="caption sigkey" {
            b { "*" } " " (Significance::Significant.meaning())
            @if no_interval { " · " b { "?" } " " (Significance::NoInterval.meaning()) }
            @if too_few { " · " b { "— (n < 6)" } " " (TOO_FEW_MEANING) }
        }
    }
}
