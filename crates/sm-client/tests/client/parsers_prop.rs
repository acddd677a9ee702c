//! Property tests of the stream and metrics parsers: the checks of the cargo-fuzz
//! targets (`fuzz/fuzz_targets/`, docs/fuzzing.md) on generated inputs and on every
//! file of the committed seed corpus, so `cargo test` covers them where no fuzzer runs.

use std::path::PathBuf;

use proptest::prelude::*;
use proptest::test_runner::{Config, RngSeed};
use serde_json::{Value, json};
use sm_client::metrics::Metrics;
use sm_client::openai::parse_chunk;
use sm_client::sse::{SseEvent, SseParser};

/// Bounded so the file runs in seconds on a loaded 2-core machine; no regression
/// files are written into the source tree (a failure prints the shrunk input).
fn config(cases: u32) -> Config {
    // A fixed seed keeps CI repeatable; PROPTEST_RNG_SEED and PROPTEST_CASES
    // override both for a longer, different search (docs/fuzzing.md).
    Config { cases, failure_persistence: None, rng_seed: RngSeed::Fixed(0x5eed_f00d), ..Config::default() }
}

fn corpus(target: &str) -> Vec<(String, Vec<u8>)> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/corpus").join(target);
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("seed corpus {}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_file())
        .collect();
    files.sort();
    assert!(!files.is_empty(), "no seeds in {}", dir.display());
    files
        .into_iter()
        .map(|p| (p.file_name().unwrap().to_string_lossy().into_owned(), std::fs::read(&p).unwrap()))
        .collect()
}

// ---------------------------------------------------------------- SSE

fn sse_parse<'a>(pieces: impl IntoIterator<Item = &'a [u8]>) -> (Vec<SseEvent>, usize) {
    let mut p = SseParser::new();
    let mut out = Vec::new();
    let mut fed = 0;
    for piece in pieces {
        fed += piece.len();
        p.push(piece, &mut out);
        assert!(p.pending() <= fed);
    }
    (out, p.pending())
}

/// Cuts `data` at the given offsets (taken modulo the length, any order).
fn cut_at<'a>(data: &'a [u8], cuts: &[usize]) -> Vec<&'a [u8]> {
    let mut at: Vec<usize> = cuts.iter().map(|c| if data.is_empty() { 0 } else { c % (data.len() + 1) }).collect();
    at.push(0);
    at.push(data.len());
    at.sort_unstable();
    at.windows(2).map(|w| &data[w[0]..w[1]]).collect()
}

/// The fuzz target's checks: events and pending bytes do not depend on the cut
/// points, a blank line leaves nothing held, chunks keep `has_text` honest.
fn check_sse(data: &[u8], cuts: &[usize]) -> Vec<SseEvent> {
    let (whole, pending) = sse_parse([data]);
    for pieces in [data.chunks(1).collect::<Vec<_>>(), cut_at(data, cuts)] {
        let (events, p) = sse_parse(pieces);
        assert_eq!(events, whole, "events depend on the cut points");
        assert_eq!(p, pending);
    }
    let (mut ended, held) = sse_parse([data, &b"\n\n"[..]]);
    assert_eq!(held, 0, "bytes held after a blank line");
    ended.truncate(whole.len());
    assert_eq!(ended, whole);
    for event in &whole {
        if let SseEvent::Data(d) = event {
            check_chunk(d);
        }
    }
    whole
}

/// One generated event: its `data:` lines, other fields and comments around them.
#[derive(Debug, Clone)]
struct GenEvent {
    data: Vec<String>,
    event_name: Option<String>,
    comment: Option<String>,
    crlf: bool,
    no_space: bool,
}

fn gen_event() -> impl Strategy<Value = GenEvent> {
    // Field values cannot hold CR or LF: those end the line.
    let value = "[^\r\n]{0,40}";
    (
        prop_oneof![
            3 => prop::collection::vec(value, 1..3),
            1 => Just(vec!["[DONE]".to_string()]),
            1 => Just(Vec::new()),
        ],
        prop::option::of("[a-z]{1,8}"),
        prop::option::of(value),
        any::<bool>(),
        any::<bool>(),
    )
        .prop_map(|(data, event_name, comment, crlf, no_space)| GenEvent {
            data,
            event_name,
            comment,
            crlf,
            no_space,
        })
}

fn render(events: &[GenEvent]) -> Vec<u8> {
    let mut s = String::new();
    for e in events {
        let eol = if e.crlf { "\r\n" } else { "\n" };
        if let Some(c) = &e.comment {
            s += &format!(":{c}{eol}");
        }
        if let Some(n) = &e.event_name {
            s += &format!("event: {n}{eol}id: 1{eol}");
        }
        for d in &e.data {
            // `data:x` and `data: x` mean the same; a second space is part of the value
            s += &if e.no_space { format!("data:{d}{eol}") } else { format!("data: {d}{eol}") };
        }
        s += eol;
    }
    s.into_bytes()
}

fn expected(events: &[GenEvent]) -> Vec<SseEvent> {
    events
        .iter()
        .filter(|e| !e.data.is_empty())
        .map(|e| {
            // one space after the colon is not data: `data:  x` is " x", and `data: x` is `data:x`
            let lines: Vec<&str> =
                e.data.iter().map(|d| if e.no_space { d.strip_prefix(' ').unwrap_or(d) } else { d }).collect();
            let data = lines.join("\n");
            if data == "[DONE]" { SseEvent::Done } else { SseEvent::Data(data.into_bytes().into()) }
        })
        .collect()
}

proptest! {
    #![proptest_config(config(256))]

    #[test]
    fn sse_well_formed_streams_give_their_events(
        events in prop::collection::vec(gen_event(), 0..8),
        cuts in prop::collection::vec(any::<usize>(), 0..12),
    ) {
        let stream = render(&events);
        let got = check_sse(&stream, &cuts);
        prop_assert_eq!(got, expected(&events));
    }

    #[test]
    fn sse_any_bytes_any_cuts(
        data in prop::collection::vec(prop_oneof![Just(b'\n'), Just(b'\r'), Just(b':'), any::<u8>(), Just(b'd')], 0..300),
        cuts in prop::collection::vec(any::<usize>(), 0..12),
    ) {
        check_sse(&data, &cuts);
    }
}

#[test]
fn sse_seed_corpus() {
    for (name, data) in corpus("sse") {
        let cuts: Vec<usize> = (0..data.len()).step_by(7).collect();
        let events = check_sse(&data, &cuts);
        // every captured stream that got an answer has at least one event
        if !name.contains("status") {
            assert!(!events.is_empty(), "{name}: no events");
        }
    }
}

// ---------------------------------------------------------------- parse_chunk

fn check_chunk(data: &[u8]) {
    match parse_chunk(data) {
        Ok(c) => {
            // text is output; so is a tool call's name, which is not text (the call's first delta)
            assert!(c.text.is_empty() || c.has_text, "text that is not output: {c:?}");
            assert!(!c.has_text || !c.text.is_empty() || c.tool_call, "output without text or a call: {c:?}");
            // a text chunk is an object with choices: a bare JSON value is not one
            assert!(!c.has_text || data.trim_ascii_start().starts_with(b"{"));
        }
        Err(e) => assert!(e.start.len() <= 3 * 80),
    }
}

/// A delta or text part: absent, null, empty or some text.
fn part() -> impl Strategy<Value = Option<Option<String>>> {
    prop_oneof![Just(None), Just(Some(None)), Just(Some(Some(String::new()))), "\\PC{1,6}".prop_map(|s| Some(Some(s)))]
}

fn put(obj: &mut serde_json::Map<String, Value>, key: &str, p: &Option<Option<String>>) {
    if let Some(v) = p {
        obj.insert(key.into(), v.as_ref().map_or(Value::Null, |s| json!(s)));
    }
}

fn text_of(p: &Option<Option<String>>) -> &str {
    p.as_ref().and_then(Option::as_deref).unwrap_or("")
}

proptest! {
    #![proptest_config(config(256))]

    /// Text is the concatenation of every reasoning, content and text part in
    /// order, and `has_text` is set exactly when it is not empty: an empty
    /// delta (the role-only first chunk, `"content":""`) is never a token.
    #[test]
    fn chunk_text_and_has_text(
        choices in prop::collection::vec((part(), part(), part(), part(), any::<bool>()), 0..3),
        usage in prop::option::of((any::<u32>(), any::<u32>())),
    ) {
        let mut want = String::new();
        let raw: Vec<Value> = choices
            .iter()
            .map(|(rc, r, c, t, role)| {
                let mut delta = serde_json::Map::new();
                if *role {
                    delta.insert("role".into(), json!("assistant"));
                }
                put(&mut delta, "reasoning_content", rc);
                put(&mut delta, "reasoning", r);
                put(&mut delta, "content", c);
                let mut choice = serde_json::Map::new();
                choice.insert("index".into(), json!(0));
                choice.insert("delta".into(), Value::Object(delta));
                put(&mut choice, "text", t);
                for p in [rc, r, c, t] {
                    want += text_of(p);
                }
                Value::Object(choice)
            })
            .collect();
        let mut body = json!({"id": "chatcmpl-1", "choices": raw});
        if let Some((p, c)) = usage {
            body["usage"] = json!({"prompt_tokens": p, "completion_tokens": c});
        }
        let bytes = serde_json::to_vec(&body).unwrap();
        let chunk = parse_chunk(&bytes).unwrap();
        prop_assert_eq!(&chunk.text, &want);
        prop_assert_eq!(chunk.has_text, !want.is_empty());
        prop_assert_eq!(chunk.completion_tokens, usage.map(|u| u64::from(u.1)));
        check_chunk(&bytes);
    }

    #[test]
    fn chunk_any_bytes(data in prop::collection::vec(any::<u8>(), 0..200)) {
        check_chunk(&data);
    }
}

#[test]
fn chunk_seed_corpus() {
    let mut parsed = 0;
    for (_, data) in corpus("openai_chunk") {
        check_chunk(&data);
        parsed += usize::from(parse_chunk(&data).is_ok());
    }
    assert!(parsed > 0, "no seed chunk parses");
}

// ---------------------------------------------------------------- metrics

fn same(a: f64, b: f64) -> bool {
    a == b || (a.is_nan() && b.is_nan())
}

/// The fuzz target's checks: `sum` is the sum of `series`, `mean` their mean,
/// every kept series is under a name that starts a line, no `tp_rank` ≠ 0.
fn check_metrics(text: &str) -> Metrics {
    let m = Metrics::parse(text);
    assert!(m.bad_lines() <= text.lines().count());
    #[allow(clippy::len_zero)] // the property is that the two agree
    let none = m.len() == 0;
    assert_eq!(m.is_empty(), none);
    let mut names: Vec<&str> = text
        .lines()
        .map(|l| {
            let l = l.trim();
            &l[..l.find(|c: char| c == '{' || c.is_whitespace()).unwrap_or(l.len())]
        })
        .collect();
    names.sort_unstable();
    names.dedup();
    let mut kept = 0;
    for name in names {
        let values: Vec<f64> = m.series(name).map(|(_, v)| v).collect();
        kept += values.len();
        match m.sum(name) {
            None => assert!(values.is_empty()),
            Some(s) => assert!(same(s, values.iter().sum()), "sum({name}) = {s}, series {values:?}"),
        }
        if let Some(x) = m.mean(name) {
            assert!(same(x, values.iter().sum::<f64>() / values.len() as f64));
        }
        assert!(m.series(name).all(|(l, _)| l.get("tp_rank").is_none_or(|r| r == "0")));
    }
    assert_eq!(kept, m.len());
    m
}

fn escape_label(v: &str) -> String {
    v.replace('\\', "\\\\").replace('"', "\\\"").replace('\n', "\\n")
}

#[derive(Debug, Clone)]
struct GenSeries {
    name: String,
    labels: Vec<(String, String)>,
    value: f64,
    timestamp: Option<i64>,
    trailing_comma: bool,
}

fn gen_series(names: Vec<String>) -> impl Strategy<Value = GenSeries> {
    (
        prop::sample::select(names),
        prop::collection::btree_map("[a-zA-Z_][a-zA-Z0-9_]{0,8}", "\\PC{0,12}|[\"\\\\\n{}=, ]{0,6}", 0..4),
        prop_oneof![
            any::<f64>().prop_filter("finite", |v| v.is_finite()),
            (-1000i64..1000).prop_map(|v| v as f64),
            (0u32..100).prop_map(|v| f64::from(v) / 4.0),
        ],
        prop::option::of(any::<i64>()),
        any::<bool>(),
    )
        .prop_map(|(name, labels, value, timestamp, trailing_comma)| GenSeries {
            name,
            labels: labels.into_iter().filter(|(k, _)| k != "tp_rank").collect(),
            value,
            timestamp,
            trailing_comma,
        })
}

fn render_series(s: &GenSeries) -> String {
    let mut line = s.name.clone();
    if !s.labels.is_empty() || s.trailing_comma {
        let parts: Vec<String> = s.labels.iter().map(|(k, v)| format!("{k}=\"{}\"", escape_label(v))).collect();
        let comma = if s.trailing_comma && !parts.is_empty() { "," } else { "" };
        line += &format!("{{{}{comma}}}", parts.join(","));
    }
    line += &format!(" {}", s.value);
    if let Some(ts) = s.timestamp {
        line += &format!(" {ts}");
    }
    line
}

fn exposition() -> impl Strategy<Value = (Vec<String>, Vec<GenSeries>, String)> {
    prop::collection::btree_set("[a-zA-Z_:][a-zA-Z0-9_:]{0,16}", 1..5).prop_flat_map(|names| {
        let names: Vec<String> = names.into_iter().collect();
        (Just(names.clone()), prop::collection::vec(gen_series(names), 0..12), "[a-zA-Z0-9 .,\\\\\n]{0,30}")
    })
}

proptest! {
    #![proptest_config(config(256))]

    /// Well-formed exposition text: nothing is a bad line, every value and label
    /// comes back exactly (escapes included), sums are per exact name.
    #[test]
    fn metrics_round_trip((names, series, help) in exposition()) {
        let mut text = String::new();
        for n in &names {
            let escaped = help.replace('\\', "\\\\").replace('\n', "\\n");
            text += &format!("# HELP {n} {escaped}\n# TYPE {n} gauge\n");
        }
        for s in &series {
            text += &render_series(s);
            text += "\n";
        }
        let m = check_metrics(&text);
        prop_assert_eq!(m.bad_lines(), 0, "{}", text);
        prop_assert_eq!(m.len(), series.len());
        for n in &names {
            let mine: Vec<&GenSeries> = series.iter().filter(|s| &s.name == n).collect();
            let want: f64 = mine.iter().map(|s| s.value).sum();
            prop_assert_eq!(m.sum(n), (!mine.is_empty()).then_some(want));
            for ((labels, v), s) in m.series(n).zip(&mine) {
                prop_assert_eq!(v, s.value);
                let got: Vec<(&str, &str)> = labels.iter().collect();
                let want: Vec<(&str, &str)> = s.labels.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
                prop_assert_eq!(got, want);
            }
            prop_assert_eq!(m.help(n), Some(help.trim_matches(' ')));
            prop_assert_eq!(m.metric_type(n), Some("gauge"));
        }
    }

    #[test]
    fn metrics_any_text(text in "(\\PC|[\n{}=\",# ]){0,300}") {
        check_metrics(&text);
    }

    #[test]
    fn metrics_any_bytes(data in prop::collection::vec(any::<u8>(), 0..300)) {
        check_metrics(&String::from_utf8_lossy(&data));
    }
}

#[test]
fn metrics_seed_corpus() {
    for (name, data) in corpus("metrics") {
        let m = check_metrics(&String::from_utf8_lossy(&data));
        if name.starts_with("vllm") {
            assert_eq!(m.bad_lines(), 0, "{name}");
            assert!(m.has_prefix("vllm:"), "{name}");
        }
    }
}
