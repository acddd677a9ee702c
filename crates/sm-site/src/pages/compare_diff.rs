//! The comparison's per-figure differences with their significance: the same data
//! (`sm_report::compare`) and the same marks as `speedmatrix compare`, so the site and the command
//! line cannot disagree about which difference is beyond the noise.

use std::fmt::Write;

use sm_core::record::RunRecord;
use sm_report::compare::render::{diff_text, outcome_text};
use sm_report::compare::{Comparison, Figure, Outcome, Significance, compare};

use super::esc;

fn class(s: Significance) -> &'static str {
    match s {
        Significance::Significant => "sig",
        Significance::WithinNoise => "noise",
        Significance::NoInterval => "noint",
    }
}

fn table(s: &mut String, c: &Comparison, bi: usize, letter: &str) {
    let _ = write!(
        s,
        "<h3 class=\"ratio-title\"><span class=\"swatch s{bi}\">{letter}</span> − <span class=\"swatch s0\">A</span></h3>\n\
         <div class=\"scroll\"><table class=\"runs sigdiff\">\n<thead><tr><th>Context</th><th class=\"r\">Users</th>"
    );
    for f in Figure::ALL {
        let _ = write!(s, "<th class=\"r\">{}</th>", esc(f.title()));
    }
    s.push_str("</tr></thead>\n<tbody>\n");
    for cell in &c.cells {
        let _ = write!(s, "<tr><td>{}</td><td class=\"num\">{}</td>", esc(&cell.label), cell.concurrency);
        match &cell.outcome {
            Outcome::Compared(diffs) => {
                for f in Figure::ALL {
                    match diffs.iter().find(|d| d.figure == f) {
                        Some(d) => {
                            let _ = write!(
                                s,
                                "<td class=\"num {}\" title=\"{}\">{}</td>",
                                class(d.significance),
                                esc(d.significance.meaning()),
                                esc(&diff_text(d))
                            );
                        }
                        None => s.push_str("<td class=\"num\">—</td>"),
                    }
                }
            }
            other => {
                let _ = write!(s, "<td colspan=\"6\" class=\"caption\">{}</td>", esc(&outcome_text(other, letter)));
            }
        }
        s.push_str("</tr>\n");
    }
    s.push_str("</tbody></table></div>\n");
}

/// Each run after the first against the first, per cell and figure, with the legend of the marks.
pub fn section(s: &mut String, records: &[&RunRecord], letters: &[&str]) {
    s.push_str(
        "<h2 id=\"decode-differences\">Differences from A, with their significance</h2>\n<p class=\"caption\">each \
         figure's difference in % of A's, per cell both runs measured (the same as <code>speedmatrix compare</code>)</p>\n",
    );
    let comparisons: Vec<Comparison> = records.iter().skip(1).map(|b| compare(records[0], b)).collect();
    for (i, c) in comparisons.iter().enumerate() {
        table(s, c, i + 1, letters[i + 1]);
    }
    let _ = write!(s, "<p class=\"caption sigkey\"><b>*</b> {}", esc(Significance::Significant.meaning()));
    if comparisons.iter().any(|c| c.any(Significance::NoInterval)) {
        let _ = write!(s, " · <b>?</b> {}", esc(Significance::NoInterval.meaning()));
    }
    s.push_str("</p>\n");
}
