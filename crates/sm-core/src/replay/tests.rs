//! The reader end to end: both formats, detection, the slice and the scale on whole traces, every
//! class of error with its line, and streaming.

use std::io::{self, BufRead, BufReader, Read};
use std::time::Duration;

use super::*;

fn options(spec: ReplaySpec) -> ReplayOptions {
    ReplayOptions::resolve(spec).unwrap()
}

fn reader(text: &str, spec: ReplaySpec) -> ReplayReader<&[u8]> {
    ReplayReader::new(text.as_bytes(), options(spec))
}

/// Every request of `text`, or the first error's text.
fn read(text: &str, spec: ReplaySpec) -> Result<Vec<ReplayRequest>, String> {
    reader(text, spec).collect::<Result<Vec<_>, _>>().map_err(|e| e.to_string())
}

fn err(text: &str) -> String {
    read(text, ReplaySpec::default()).unwrap_err()
}

fn mooncake(ms: u64, input: u64, ids: &[u64]) -> String {
    format!("{{\"timestamp\": {ms}, \"input_length\": {input}, \"output_length\": 8, \"hash_ids\": {ids:?}}}\n")
}

fn dues(requests: &[ReplayRequest]) -> Vec<u64> {
    requests.iter().map(|r| r.due.as_millis() as u64).collect()
}

#[test]
fn a_mooncake_trace_reads_in_order_with_due_times_from_its_first_request() {
    let text = mooncake(1000, 600, &[1, 2]) + "\n" + &mooncake(1250, 512, &[1]) + &mooncake(4000, 10, &[3]);
    let got = read(&text, ReplaySpec::default()).unwrap();
    assert_eq!(dues(&got), vec![0, 250, 3000]);
    assert_eq!(got.iter().map(|r| r.line).collect::<Vec<_>>(), vec![1, 3, 4], "blank lines are counted");
    let want = MooncakeInput { input_tokens: 600, hash_ids: vec![1, 2], output_tokens: 8 };
    assert_eq!(got[0].input, ReplayInput::Mooncake(want));
    assert_eq!(got[2].trace_at, Duration::from_secs(3));
}

#[test]
fn a_messages_trace_keeps_sessions_and_their_order() {
    let text = r#"{"timestamp": 0.5, "session_id": "a", "messages": [{"role": "user", "content": "hi"}]}
{"timestamp": 0.5, "session_id": "b", "prompt": "other", "max_tokens": 3}
{"timestamp": 2.0, "session_id": "a", "messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "yo"}, {"role": "user", "content": "more"}]}
"#;
    let got = read(text, ReplaySpec::default()).unwrap();
    assert_eq!(dues(&got), vec![0, 0, 1500]);
    let sessions: Vec<_> = got
        .iter()
        .map(|r| match &r.input {
            ReplayInput::Messages(m) => m.session_id.clone().unwrap(),
            other => panic!("{other:?}"),
        })
        .collect();
    assert_eq!(sessions, ["a", "b", "a"]);
    let ReplayInput::Messages(m) = &got[2].input else { unreachable!() };
    assert!(matches!(&m.prompt, ReplayPrompt::Messages(ms) if ms.len() == 3 && ms[2].content == "more"));
}

#[test]
fn the_format_is_told_from_the_first_line_or_given() {
    let one = mooncake(0, 1, &[1]);
    let mut r = reader(&one, ReplaySpec::default());
    assert_eq!(r.format(), None, "not known before a line is read");
    r.next().unwrap().unwrap();
    assert_eq!(r.format(), Some(ReplayFormat::Mooncake));
    let mut r = reader("{\"timestamp\": 0, \"prompt\": \"x\"}", ReplaySpec::default());
    r.next().unwrap().unwrap();
    assert_eq!(r.format(), Some(ReplayFormat::Messages));
    // given: a line of the other format is refused by the given one's fields
    let spec = ReplaySpec { format: Some(ReplayFormat::Messages), ..Default::default() };
    assert_eq!(read(&mooncake(0, 1, &[1]), spec).unwrap_err(), "line 1: \"messages\" or \"prompt\" is missing");
    assert_eq!("Mooncake".parse::<ReplayFormat>(), Ok(ReplayFormat::Mooncake));
    assert!("csv".parse::<ReplayFormat>().unwrap_err().to_string().contains("--replay-format mooncake|messages"));
}

#[test]
fn a_line_of_both_formats_or_neither_asks_for_the_format() {
    for (text, says) in [
        ("{\"timestamp\": 0, \"hash_ids\": [1], \"prompt\": \"x\"}", "both"),
        ("{\"timestamp\": 0, \"input_length\": 5, \"messages\": []}", "both"),
        ("{\"timestamp\": 0, \"text\": \"x\"}", "none of"),
        ("\n\n{}", "none of"),
    ] {
        let e = err(text);
        assert!(e.contains(says) && e.contains("--replay-format mooncake|messages"), "{text}: {e}");
    }
    assert!(err("\n\n{}").starts_with("line 3: "));
    // only the first line decides: a later line of the other format fails on its fields
    let text = mooncake(0, 1, &[1]) + "{\"timestamp\": 1, \"prompt\": \"x\"}\n";
    assert_eq!(err(&text), "line 2: \"input_length\" is missing");
}

#[test]
fn lines_that_are_not_json_objects_are_named() {
    for (text, says) in [
        ("{\"timestamp\": 0", "line 1: not JSON: "),
        (&(mooncake(0, 1, &[1]) + "\nnot json\n") as &str, "line 3: not JSON: "),
        ("[1, 2]", "line 1: not a JSON object"),
        ("\"text\"", "line 1: not a JSON object"),
        ("{\"timestamp\": NaN, \"prompt\": \"x\"}", "line 1: not JSON: "),
        ("{\"timestamp\": 1e999, \"prompt\": \"x\"}", "line 1: not JSON: "),
    ] {
        let e = err(text);
        assert!(e.starts_with(says), "{text}: {e}");
    }
    // bytes that are not UTF-8 inside a string
    let mut bytes = b"{\"timestamp\": 0, \"prompt\": \"".to_vec();
    bytes.extend_from_slice(&[0xff, 0xfe]);
    bytes.extend_from_slice(b"\"}\n");
    let e = ReplayReader::new(&bytes[..], ReplayOptions::default()).next().unwrap().unwrap_err();
    assert_eq!(e.line(), Some(1));
    assert!(e.to_string().starts_with("line 1: not JSON: "), "{e}");
}

#[test]
fn bad_fields_are_named_with_their_line() {
    let first = mooncake(0, 1, &[1]);
    for (bad, says) in [
        ("{\"timestamp\": 5, \"output_length\": 2, \"hash_ids\": [1]}", "\"input_length\" is missing"),
        ("{\"timestamp\": -5, \"input_length\": 1, \"output_length\": 2, \"hash_ids\": [1]}", "\"timestamp\" must be"),
        (
            "{\"timestamp\": 5, \"input_length\": 1.5, \"output_length\": 2, \"hash_ids\": [1]}",
            "\"input_length\" must be",
        ),
        (
            "{\"timestamp\": 5, \"input_length\": 1, \"output_length\": -2, \"hash_ids\": [1]}",
            "\"output_length\" must be",
        ),
        (
            "{\"timestamp\": 5, \"input_length\": 1, \"output_length\": 2, \"hash_ids\": [\"a\"]}",
            "\"hash_ids[0]\" must be",
        ),
        (
            "{\"timestamp\": 5, \"input_length\": 1, \"output_length\": 2, \"hash_ids\": null}",
            "\"hash_ids\" is missing",
        ),
    ] {
        let e = err(&format!("{first}{bad}\n"));
        assert!(e.starts_with(&format!("line 2: {says}")), "{bad}: {e}");
    }
}

#[test]
fn a_block_count_off_the_block_size_suggests_the_flag() {
    // 2000 tokens in 3 blocks: 667 to 999 tokens a block, not 512
    let e = err(&(mooncake(0, 512, &[1]) + &mooncake(1, 2000, &[1, 2, 3])));
    assert!(e.starts_with("line 2: \"hash_ids\" holds 3 block ids but \"input_length\" 2000 needs 4"), "{e}");
    let e = err(&mooncake(0, 2000, &[1, 2, 3]));
    assert!(e.contains("needs 4 at 512 tokens a block (blocks of 667 to 999 tokens fit this line)"), "{e}");
    assert!(e.contains("--replay-block-tokens"), "{e}");
    // the same trace under its own block size
    let spec = ReplaySpec { block_tokens: 700, ..Default::default() };
    assert_eq!(read(&mooncake(0, 2000, &[1, 2, 3]), spec).unwrap().len(), 1);
}

#[test]
fn timestamps_going_back_are_refused_in_either_format() {
    let text = mooncake(10, 1, &[1]) + &mooncake(20, 1, &[1]) + "\n" + &mooncake(15, 1, &[1]);
    let e = err(&text);
    assert!(e.starts_with("line 4: \"timestamp\" goes back in time: 0.015 s, before line 2's 0.02 s"), "{e}");
    assert!(e.ends_with("sort the file by timestamp"), "{e}");
    let text = "{\"timestamp\": 3, \"prompt\": \"a\"}\n{\"timestamp\": 2.5, \"prompt\": \"b\"}\n";
    assert!(err(text).starts_with("line 2: \"timestamp\" goes back in time: 2.5 s, before line 1's 3 s"));
    // equal timestamps are fine: requests at the same instant
    assert_eq!(read(&(mooncake(5, 1, &[1]) + &mooncake(5, 1, &[1])), ReplaySpec::default()).unwrap().len(), 2);
}

/// A Mooncake trace with one request a second, from 100 s, `n` requests.
fn every_second(n: u64) -> String {
    (0..n).map(|i| mooncake(100_000 + i * 1000, 1, &[i])).collect()
}

#[test]
fn the_slice_keeps_trace_time_from_start_to_start_plus_duration() {
    let spec = ReplaySpec {
        start: Some(Duration::from_secs(3)),
        duration: Some(Duration::from_millis(2500)),
        ..Default::default()
    };
    let got = read(&every_second(10), spec).unwrap();
    // trace time 3, 4, 5 (5 < 5.5), due from 3
    assert_eq!(got.iter().map(|r| r.trace_at.as_secs()).collect::<Vec<_>>(), vec![3, 4, 5]);
    assert_eq!(dues(&got), vec![0, 1000, 2000]);
    assert_eq!(got[0].line, 4);
    let only_start = ReplaySpec { start: Some(Duration::from_secs(8)), ..Default::default() };
    assert_eq!(dues(&read(&every_second(10), only_start).unwrap()), vec![0, 1000]);
}

#[test]
fn the_scale_divides_due_times_of_the_same_slice() {
    let slice = |time_scale| ReplaySpec {
        start: Some(Duration::from_secs(2)),
        duration: Some(Duration::from_secs(4)),
        time_scale,
        ..Default::default()
    };
    let at_1 = read(&every_second(10), slice(1.0)).unwrap();
    let at_2 = read(&every_second(10), slice(2.0)).unwrap();
    let at_half = read(&every_second(10), slice(0.5)).unwrap();
    assert_eq!(dues(&at_1), vec![0, 1000, 2000, 3000]);
    assert_eq!(dues(&at_2), vec![0, 500, 1000, 1500]);
    assert_eq!(dues(&at_half), vec![0, 2000, 4000, 6000]);
    let lines = |rs: &[ReplayRequest]| rs.iter().map(|r| r.line).collect::<Vec<_>>();
    assert_eq!(lines(&at_1), lines(&at_2), "the scale changes when, not which");
}

#[test]
fn a_trace_or_a_slice_with_no_request_says_so() {
    for empty in ["", "\n  \n\r\n"] {
        let e = read(empty, ReplaySpec::default()).unwrap_err();
        assert!(e.contains("holds no request"), "{e}");
    }
    let past_end = ReplaySpec { start: Some(Duration::from_secs(60)), ..Default::default() };
    let e = read(&every_second(10), past_end).unwrap_err();
    assert_eq!(
        e,
        "no request of the trace comes 60 s or more after its first (the last one is at 9 s): \
         give a smaller --replay-start"
    );
    // a gap in the trace: nothing in [2, 2.5), the next request at 5
    let gap = mooncake(0, 1, &[1]) + &mooncake(5000, 1, &[1]);
    let spec = ReplaySpec {
        start: Some(Duration::from_secs(2)),
        duration: Some(Duration::from_millis(500)),
        ..Default::default()
    };
    assert!(read(&gap, spec).unwrap_err().contains("from 2 s to 2.5 s after its first (the last one read is at 5 s)"));
}

#[test]
fn windows_line_ends_and_surrounding_spaces_are_read() {
    let text = "  {\"timestamp\": 0, \"prompt\": \"a\"}  \r\n\r\n{\"timestamp\": 1, \"prompt\": \"b\"}";
    let got = read(text, ReplaySpec::default()).unwrap();
    assert_eq!(got.iter().map(|r| r.line).collect::<Vec<_>>(), vec![1, 3]);
}

#[test]
fn a_line_over_the_limit_is_refused_not_read_whole() {
    let text = mooncake(0, 1, &[1]) + &"x".repeat(200) + "\n";
    let mut r = reader(&text, ReplaySpec::default()).with_max_line(100);
    assert!(r.next().unwrap().is_ok());
    let e = r.next().unwrap().unwrap_err().to_string();
    assert_eq!(e, "line 2: longer than 100 bytes: is this a JSON Lines file, one request a line?");
    assert!(r.next().is_none());
}

/// A reader that fails after its first line, as a disk or a pipe can.
struct Failing(bool);

impl Read for Failing {
    fn read(&mut self, out: &mut [u8]) -> io::Result<usize> {
        if std::mem::replace(&mut self.0, true) {
            return Err(io::Error::other("the disk went away"));
        }
        let line = mooncake(0, 1, &[1]);
        out[..line.len()].copy_from_slice(line.as_bytes());
        Ok(line.len())
    }
}

#[test]
fn a_read_error_names_the_line_it_stopped_at() {
    let mut r = ReplayReader::new(BufReader::new(Failing(false)), ReplayOptions::default());
    assert!(r.next().unwrap().is_ok());
    let e = r.next().unwrap().unwrap_err();
    assert!(matches!(e, ReplayError::Read { line: 2, .. }), "{e:?}");
    assert_eq!(e.to_string(), "cannot read line 2 of the trace: the disk went away");
    assert!(r.next().is_none(), "nothing after an error");
}

/// A Mooncake trace made line by line as it is read, never whole: `total` lines (or without end),
/// one every 10 ms, line `bad` (1-based) not JSON.
struct Generated {
    next: u64,
    total: Option<u64>,
    bad: Option<u64>,
    pending: Vec<u8>,
}

impl Generated {
    fn new(total: Option<u64>, bad: Option<u64>) -> BufReader<Generated> {
        BufReader::new(Generated { next: 0, total, bad, pending: Vec::new() })
    }
}

impl Read for Generated {
    fn read(&mut self, out: &mut [u8]) -> io::Result<usize> {
        if self.pending.is_empty() && self.total.is_none_or(|t| self.next < t) {
            self.next += 1;
            let line = match self.bad {
                Some(b) if b == self.next => "{oops\n".to_string(),
                _ => mooncake(self.next * 10, 1000, &[self.next % 7, self.next]),
            };
            self.pending = line.into_bytes();
        }
        let n = out.len().min(self.pending.len());
        out[..n].copy_from_slice(&self.pending[..n]);
        self.pending.drain(..n);
        Ok(n)
    }
}

#[test]
fn a_hundred_thousand_lines_stream_through() {
    let r = ReplayReader::new(Generated::new(Some(100_000), None), ReplayOptions::default());
    let (mut n, mut last) = (0u64, Duration::ZERO);
    for request in r {
        let request = request.unwrap();
        n += 1;
        assert_eq!(request.line as u64, n);
        last = request.due;
    }
    assert_eq!(n, 100_000);
    assert_eq!(last, Duration::from_millis(999_990));
}

#[test]
fn the_stream_stops_at_the_first_bad_line() {
    let mut r = ReplayReader::new(Generated::new(Some(100_000), Some(54_321)), ReplayOptions::default());
    let good = r.by_ref().take_while(Result::is_ok).count();
    assert_eq!(good, 54_320);
    assert!(r.next().is_none(), "nothing after the error");
    let e = ReplayReader::new(Generated::new(None, Some(3)), ReplayOptions::default()).nth(2).unwrap().unwrap_err();
    assert!(e.to_string().starts_with("line 3: not JSON: "), "{e}");
}

#[test]
fn the_slice_end_stops_reading_an_endless_trace() {
    let spec = ReplaySpec { duration: Some(Duration::from_secs(2)), ..Default::default() };
    let got: Vec<_> = ReplayReader::new(Generated::new(None, None), options(spec)).collect();
    assert_eq!(got.len(), 200, "one every 10 ms for 2 s, and then no further line read");
}

#[test]
fn the_reader_is_generic_over_any_buffered_input() {
    fn count<R: BufRead>(r: R) -> usize {
        ReplayReader::new(r, ReplayOptions::default()).count()
    }
    assert_eq!(count(io::Cursor::new(every_second(3).into_bytes())), 3);
}
