//! `replay.csv`: one row per time scale, in the order the levels ran. A level's columns are
//! rate.csv's (a replay level is a rate level), between the scale and what only a replay has: the
//! prefix cache against the trace's ideal and the SLO verdict of the capacity search.

use serde::Serialize;
use sm_core::phases::replay::ReplayLevel;
use sm_core::record::RunRecord;

use super::super::rate::{Column, CsvKeys, csv_level, csv_level_header};
use crate::csv::table::{self, Ending, Guarded, Num, Table, finite, guarded};
use crate::telemetry::CsvColumns;

/// The columns before the rate level's.
#[derive(Serialize, Default)]
struct Scale {
    time_scale: Num,
    searched: bool,
}

/// The columns after the rate level's figures; empty for a level not measured.
#[derive(Serialize, Default)]
struct Replayed<'a> {
    prompt_tokens: Option<u64>,
    cached_tokens: Option<u64>,
    cached_reported: Option<u64>,
    ideal_tokens: Option<u64>,
    reached_pct: Option<Num>,
    slo_met: Option<bool>,
    limited_by: Guarded<&'a str>,
}

type CsvRow<'a> = (Scale, CsvKeys<'a>, Vec<Column>, Replayed<'a>, Guarded<String>, CsvColumns);

fn csv_row(r: &ReplayLevel) -> CsvRow<'_> {
    let (keys, columns) = csv_level(&r.level);
    let p = r.prefix.as_ref();
    let v = r.verdict.as_ref();
    let replayed = Replayed {
        prompt_tokens: p.map(|p| p.prompt_tokens),
        cached_tokens: p.filter(|p| p.reported > 0).map(|p| p.cached_tokens),
        cached_reported: p.map(|p| p.reported),
        ideal_tokens: p.and_then(|p| p.ideal_tokens),
        reached_pct: finite(p.and_then(|p| p.reached_pct)),
        slo_met: v.map(|v| v.met),
        limited_by: guarded(v.map_or(&None, |v| &v.limited_by)),
    };
    let scale = Scale { time_scale: Num(r.time_scale), searched: r.searched };
    (scale, keys, columns, replayed, Guarded(r.level.note().to_string()), CsvColumns::of(&r.level.telemetry))
}

fn csv_header() -> Vec<String> {
    let mut header = table::header::<Scale>();
    header.extend(csv_level_header());
    header.extend(table::header::<Replayed>());
    header.push("note".into());
    header.extend(table::header::<CsvColumns>());
    header
}

/// The phase's CSV file, `None` when the phase did not run.
pub(in crate::phases) fn csv(record: &RunRecord) -> Option<String> {
    let phase = record.phases.replay.as_ref()?;
    let mut file = Table::new(csv_header(), Ending::Lf);
    phase.levels.iter().for_each(|r| file.row(csv_row(r)));
    Some(file.finish())
}
