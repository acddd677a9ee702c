//! `Metrics::parse` over arbitrary text (a `/metrics` scrape).
//!
//! Checks: no panic; `sum(name)` is the sum of `series(name)` and `mean` their
//! mean; every kept series is found under a name that starts one of the input's
//! lines, so `len()` adds up; no series is kept with a `tp_rank` other than 0;
//! `bad_lines` never exceeds the number of lines.
#![no_main]

use std::collections::BTreeSet;

use libfuzzer_sys::fuzz_target;
use sm_client::metrics::Metrics;

fn same(a: f64, b: f64) -> bool {
    a == b || (a.is_nan() && b.is_nan())
}

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let m = Metrics::parse(&text);
    assert!(m.bad_lines() <= text.lines().count());
    assert_eq!(m.is_empty(), m.len() == 0);
    // A series name is the start of a line up to `{` or white space.
    let names: BTreeSet<&str> = text
        .lines()
        .map(|l| {
            let l = l.trim();
            &l[..l.find(|c: char| c == '{' || c.is_whitespace()).unwrap_or(l.len())]
        })
        .collect();
    let mut kept = 0;
    for name in names {
        let values: Vec<f64> = m.series(name).map(|(_, v)| v).collect();
        kept += values.len();
        assert_eq!(m.contains(name), !values.is_empty());
        match m.sum(name) {
            None => assert!(values.is_empty()),
            Some(s) => assert!(same(s, values.iter().sum()), "sum({name}) = {s}, series {values:?}"),
        }
        match m.mean(name) {
            None => assert!(values.is_empty()),
            Some(x) => assert!(same(x, values.iter().sum::<f64>() / values.len() as f64)),
        }
        for (labels, _) in m.series(name) {
            assert!(labels.get("tp_rank").is_none_or(|r| r == "0"), "kept tp_rank {:?}", labels.get("tp_rank"));
        }
    }
    assert_eq!(kept, m.len(), "series kept under a name that starts no line");
});
