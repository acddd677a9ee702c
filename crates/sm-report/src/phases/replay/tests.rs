use sm_core::phases::rate::{LevelCounts, RequestRate};
use sm_core::phases::replay::{ReplayCapacity, ReplayPhase, TraceFileInfo};
use sm_core::record::Percentiles;
use sm_core::replay::ReplayFormat;

use super::answer::{capacity, headline, sentence};
use super::*;

fn level(scale: f64, searched: bool, met: bool) -> ReplayLevel {
    let rate = RequestRate::PerSecond(4.0 * scale);
    let mut l = RateLevel::unmeasured(0, "trace".into(), rate, LevelStatus::Measured, String::new());
    l.reason = None;
    l.counts = LevelCounts { scheduled: 100, sent: 100, completed: 100, late: 2, ..LevelCounts::default() };
    l.achieved_rps = Some(3.9 * scale);
    l.output_tok_s = Some(250.0);
    l.ttft_ms = Some(Percentiles::p50_p90_p99(80.0, 150.0, 400.0));
    l.e2e_ms = Some(Percentiles::p50_p90_p99(900.0, 1200.0, 1500.0));
    l.send_lag_ms = Some(Percentiles { p50: Some(0.2), p90: None, p99: Some(3.5), max: Some(9.0) });
    l.in_flight_mean = Some(3.25);
    l.in_flight_max = Some(9);
    l.goodput_pct = Some(if met { 99.0 } else { 60.0 });
    l.saturated = !met;
    l.saturation = Some(if met { Saturation::KeptUp } else { Saturation::Saturated });
    let prefix = PrefixReuse {
        prompt_tokens: 40_000,
        cached_tokens: 10_000,
        reported: 100,
        requests: 100,
        ideal_tokens: Some(12_500),
        reached_pct: Some(80.0),
    };
    let limited_by = (!met).then(|| "TTFT p90 <b>".to_string());
    ReplayLevel {
        time_scale: scale,
        searched,
        level: l,
        prefix: Some(prefix),
        verdict: Some(ScaleVerdict { met, limited_by, bounds: Vec::new() }),
    }
}

fn phase() -> ReplayPhase {
    let skipped = ReplayLevel {
        time_scale: 8.0,
        searched: false,
        level: RateLevel::unmeasured(
            0,
            "trace".into(),
            RequestRate::PerSecond(32.0),
            LevelStatus::Skipped,
            "not run: the server was already saturated".into(),
        ),
        prefix: None,
        verdict: None,
    };
    let mut phase = ReplayPhase {
        settings: ReplaySettings {
            file: TraceFileInfo { name: "conv<script>.jsonl".into(), hash: "00ff".into(), bytes: 1234 },
            format: ReplayFormat::Mooncake,
            block_tokens: Some(512),
            time_scales: vec![1.0, 4.0, 8.0],
            find_capacity: true,
            start_s: Some(60.0),
            duration_s: Some(300.0),
            requests: 1200,
            recorded_span_s: 299.5,
            recorded_rps: Some(4.0),
            max_concurrency: None,
            drain_max_s: 600.0,
            max_tokens: 256,
            kv_block_tokens: Some(16),
        },
        // in the order they ran: the search's 2× and 3× after the scales asked for
        levels: vec![level(1.0, false, true), level(4.0, false, false), skipped, level(2.0, true, true)],
        capacity: None,
    };
    phase.levels.push(level(3.0, true, false));
    phase.capacity = Some(phase.capacity_answer());
    phase
}

pub(crate) fn record() -> RunRecord {
    let mut r = crate::import_str(include_str!("../../../../../tests/data/run-sample.json")).unwrap();
    r.settings.slo = Some(sm_core::slo::DEFAULT_SLO.parse().unwrap());
    r.phases.replay = Some(phase());
    r
}

#[test]
fn scales_read_as_multiples() {
    assert_eq!(scale(2.0), "2×");
    assert_eq!(scale(3.0849), "3.08×");
    assert_eq!(scale(64.0), "64×");
    assert_eq!(scale(0.5), "0.5×");
    assert_eq!(scale(1.0 / 64.0), "0.016×");
}

#[test]
fn the_page_has_a_row_per_scale_in_order_with_the_record_escaped() {
    let r = record();
    let h = html(&r).into_string();
    assert!(h.contains("<h2>Your traffic (replay)</h2>"), "{h}");
    assert!(h.contains("conv&lt;script&gt;.jsonl") && !h.contains("conv<script>"), "{h}");
    assert!(h.contains("1,200 requests from 60 s for 300 s, recorded at 4.00 req/s"), "{h}");
    let at = |s: &str| h.find(s).unwrap_or_else(|| panic!("{s}: {h}"));
    assert!(at("<td>1×</td>") < at("<td>2× (searched)</td>"), "ascending");
    assert!(at("<td>2× (searched)</td>") < at("<td>3× (searched)</td>") && at("<td>3× (searched)") < at("<td>4×</td>"));
    assert!(at("<td>4×</td>") < at("<td>8×</td>"));
    assert!(h.contains("<td>25.0 %</td><td>80.0 %</td><td>yes</td><td class=\"verdict\">kept up</td>"), "{h}");
    assert!(h.contains("<td>no: TTFT p90 &lt;b&gt;</td><td class=\"verdict\">saturated</td>"), "{h}");
    assert!(h.contains("class=\"verdict\">not run: the server was already saturated"), "{h}");
    assert!(h.contains("<td>3.5 ms</td><td>3.2</td>"), "send lag p99, in flight mean: {h}");
    assert!(h.contains(SEARCHED_NOTE.split('"').next().unwrap()), "{h}");
    assert!(h.contains("<svg") && h.contains("TTFT p50 from the due time") && h.contains("time scale"), "a chart");
}

#[test]
fn the_markdown_and_the_console_show_the_same_rows() {
    let r = record();
    let mut m = String::new();
    markdown(&mut m, &r);
    assert!(m.contains("## Your traffic (replay)") && m.contains("conv&lt;script&gt;.jsonl"), "{m}");
    let row = "| 2× (searched) | 8.00 | 100 of 100 | 7.80 | 250.0 | 80.0 ms | 400 ms | 900 ms | 3.5 ms | 3.2 | \
               99 % of 100 | 25.0 % | 80.0 % | yes | kept up |";
    assert!(m.contains(row), "{m}");
    assert!(m.contains("| no: TTFT p90 &lt;b&gt; | saturated |"), "{m}");
    let mut t = String::new();
    terminal(&mut t, &r, 200);
    assert!(t.contains("3× (searched) 12.00 req/s SATURATED: achieved 11.70 req/s"), "{t}");
    assert!(t.contains("     8× not run"), "{t}");
}

#[test]
fn a_level_note_stands_beside_its_verdict() {
    let mut r = record();
    let l = &mut r.phases.replay.as_mut().unwrap().levels[0].level;
    (l.counts.failed, l.counts.completed, l.first_failure) = (2, 98, Some("HTTP 503".into()));
    let h = html(&r).into_string();
    assert!(h.contains("kept up: 2 of 100 requests failed (a fault, not load; the first: HTTP 503)"), "{h}");
}

#[test]
fn the_answer_says_the_largest_scale_and_what_limited_it() {
    let r = record();
    let a = headline(&r).expect("an answer");
    assert_eq!(
        a.sentence,
        "Serves this traffic at up to 2× its recorded rate (8.00 req/s) at ≥ 20 tok/s each (p10), TTFT p90 ≤ 2 s \
         — limited by TTFT p90 <b> at 3× (not converged: the answer lies between 2× and 3×, wider than the \
         search's ±5 %)."
    );
    // the decode matrix's answer names the SLO above it; a replay alone says it under its own
    assert!(a.slo_note.is_none());
    let mut alone = r.clone();
    alone.settings.matrix = false;
    assert!(headline(&alone).unwrap().slo_note.unwrap().contains("tok_s_p10>=20,ttft_p90<=2s"));
    let mut asked = r.clone();
    asked.phases.replay.as_mut().unwrap().settings.find_capacity = false;
    assert!(headline(&asked).is_none(), "only with --find-capacity");
    // a run stopped before the search had a bracket answers from its judged levels
    let mut stopped = r.phases.replay.clone().unwrap();
    stopped.capacity = None;
    assert_eq!(capacity(&stopped).unwrap().max_scale, Some(2.0));
}

#[test]
fn each_end_of_the_search_reads_as_such() {
    let slo: sm_core::slo::Slo = "ttft_p90<=2s".parse().unwrap();
    let cap = |max: Option<f64>, failed: Option<f64>, converged| ReplayCapacity {
        max_scale: max,
        max_rps: max.map(|m| m * 4.0),
        failed_scale: failed,
        limited_by: failed.map(|_| "saturated (a queue grew)".into()),
        converged,
    };
    let top = sentence(&cap(Some(64.0), None, true), Some(&slo));
    assert_eq!(
        top,
        "Serves this traffic at least at 64× its recorded rate (256.00 req/s) at TTFT p90 ≤ 2 s (the search's ceiling)."
    );
    let bottom = sentence(&cap(None, Some(1.0 / 64.0), true), Some(&slo));
    assert!(
        bottom.starts_with("Does not serve this traffic at TTFT p90 ≤ 2 s, not even at 1/64 of its recorded rate"),
        "{bottom}"
    );
    let early = sentence(&cap(None, Some(1.0), false), None);
    assert_eq!(
        early,
        "Does not serve this traffic at 1× its recorded rate — limited by saturated (a queue grew) at 1× (not \
         converged: the search stopped before it bracketed the answer)."
    );
    assert_eq!(
        sentence(&cap(Some(3.08), Some(3.22), true), Some(&slo)),
        "Serves this traffic at up to 3.08× its recorded rate (12.32 req/s) at TTFT p90 ≤ 2 s — limited by saturated \
         (a queue grew) at 3.22×."
    );
}

#[test]
fn replay_csv_has_a_row_per_level_with_the_rate_columns() {
    let r = record();
    let c = csv(&r).unwrap();
    let lines: Vec<&str> = c.lines().collect();
    assert_eq!(lines.len(), 6, "{c}");
    let header: Vec<&str> = lines[0].split(',').collect();
    let rate_header = super::super::rate::csv_level_header();
    assert_eq!(&header[..2], ["time_scale", "searched"]);
    assert_eq!(header[2..2 + rate_header.len()], rate_header.iter().map(String::as_str).collect::<Vec<_>>()[..]);
    for name in ["prompt_tokens", "cached_tokens", "ideal_tokens", "reached_pct", "slo_met", "limited_by", "note"] {
        assert!(header.contains(&name), "{name}: {header:?}");
    }
    let field = |row: usize, name: &str| {
        let i = header.iter().position(|h| *h == name).unwrap();
        lines[row].split(',').nth(i).unwrap().to_string()
    };
    assert_eq!(
        (field(1, "time_scale"), field(1, "searched"), field(1, "rate_rps")),
        ("1".into(), "false".into(), "4".into())
    );
    assert_eq!(
        (field(4, "searched"), field(4, "reached_pct"), field(4, "slo_met")),
        ("true".into(), "80".into(), "true".into())
    );
    assert_eq!((field(2, "slo_met"), field(2, "limited_by")), ("false".into(), "TTFT p90 <b>".into()));
    assert_eq!(
        (field(3, "status"), field(3, "ideal_tokens"), field(3, "slo_met")),
        ("skipped".into(), String::new(), String::new())
    );
    assert!(lines.iter().all(|l| l.split(',').count() == header.len()), "{c}");
    assert!(crate::phases::csv_files(&r).iter().any(|(name, _)| name == "replay.csv"));
    let mut none = r.clone();
    none.phases.replay = None;
    assert!(csv(&none).is_none());
}
