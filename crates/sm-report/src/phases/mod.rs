//! The load phases' sections of every view (issue 17): the page, Markdown, the end-of-run console
//! and one CSV file per phase (`rate.csv`, `burst.csv`, `mixed_prefill.csv`, `sessions.csv`,
//! `replay.csv`, one row per measurement of the phase). Each phase renders its own section from its part of
//! `record.phases`; a record without phases renders exactly as before.

use sm_core::phases::PhaseKind;
use sm_core::record::RunRecord;

mod burst;
mod mixed;
mod rate;
pub mod replay;
mod sessions;

/// The headed figures of a table of `rows`: a figure only some servers give (a reasoning model's
/// TTFA, a run's tool calls: [`sm_core::figures::WHERE_CARRIED`]) is a column only where some row
/// carries it, so a table of a run without them is as before.
pub(super) fn shown<'a, T: sm_core::figures::Figures>(
    rows: impl Iterator<Item = &'a T> + Clone,
) -> Vec<&'static sm_core::figures::Figure<T>> {
    T::headed()
        .filter(|f| !sm_core::figures::WHERE_CARRIED.contains(&f.name) || rows.clone().any(|r| f.of(r).is_some()))
        .collect()
}

/// A record with a rate phase, for the tests of the whole page.
#[cfg(test)]
pub(crate) use rate::tests::record as sample_with_rate;

/// The phases' sections of the HTML page, after the decode matrix.
pub(crate) fn html(record: &RunRecord) -> maud::Markup {
    maud::html! {
        (rate::html(record))
        (burst::html(record))
        (mixed::html(record))
        (sessions::html(record))
        (replay::html(record))
    }
}

/// The phases' sections of the Markdown report, after the decode matrix.
pub(crate) fn markdown(s: &mut String, record: &RunRecord) {
    rate::markdown(s, record);
    burst::markdown(s, record);
    mixed::markdown(s, record);
    sessions::markdown(s, record);
    replay::markdown(s, record);
}

/// The phases' lines of the end-of-run console summary, `width` columns at most.
pub(crate) fn terminal(s: &mut String, record: &RunRecord, width: usize) {
    rate::terminal(s, record, width);
    burst::terminal(s, record, width);
    mixed::terminal(s, record, width);
    sessions::terminal(s, record, width);
    replay::terminal(s, record, width);
}

/// One CSV file per phase that ran: the file's name and its text.
pub fn csv_files(record: &RunRecord) -> Vec<(String, String)> {
    let files = [
        (PhaseKind::Rate, rate::csv(record)),
        (PhaseKind::Burst, burst::csv(record)),
        (PhaseKind::MixedPrefill, mixed::csv(record)),
        (PhaseKind::Sessions, sessions::csv(record)),
        (PhaseKind::Replay, replay::csv(record)),
    ];
    files.into_iter().filter_map(|(kind, text)| text.map(|t| (csv_file_name(kind), t))).collect()
}

/// `rate.csv`, `burst.csv`, …
pub fn csv_file_name(kind: PhaseKind) -> String {
    format!("{}.csv", kind.name())
}
