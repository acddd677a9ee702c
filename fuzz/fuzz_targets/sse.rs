//! `SseParser::push` over arbitrary bytes cut at arbitrary points.
//!
//! Checks: no panic; the events do not depend on where the transport cut the
//! bytes (whole, byte by byte, at every CR/LF, and pseudo-random cuts derived from
//! the input); nothing is held back once a blank line ends the stream; every data
//! event goes through `parse_chunk` as the client does, which must keep
//! `has_text` equal to "some text arrived".
#![no_main]

use libfuzzer_sys::fuzz_target;
use sm_client::openai::parse_chunk;
use sm_client::sse::{SseEvent, SseParser};

fn parse<'a>(pieces: impl IntoIterator<Item = &'a [u8]>) -> (Vec<SseEvent>, usize) {
    let mut p = SseParser::new();
    let mut out = Vec::new();
    let mut fed = 0;
    for piece in pieces {
        fed += piece.len();
        p.push(piece, &mut out);
        assert!(p.pending() <= fed, "pending {} of {fed} bytes fed", p.pending());
    }
    (out, p.pending())
}

/// Cut lengths 1..=32 from an xorshift generator seeded by the input's FNV hash,
/// so the fuzzer explores cuts by changing the input and a crash replays exactly.
fn random_cuts(data: &[u8]) -> Vec<&[u8]> {
    let mut state =
        data.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, &b| (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3)) | 1;
    let mut pieces = Vec::new();
    let mut rest = data;
    while !rest.is_empty() {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        let n = ((state % 32) as usize + 1).min(rest.len());
        let (head, tail) = rest.split_at(n);
        pieces.push(head);
        rest = tail;
    }
    pieces
}

/// Cuts just before and just after every CR and LF: where a CRLF or a blank line
/// straddles two reads.
fn line_end_cuts(data: &[u8]) -> Vec<&[u8]> {
    let mut pieces = Vec::new();
    let mut start = 0;
    for (i, &b) in data.iter().enumerate() {
        if b == b'\r' || b == b'\n' {
            pieces.push(&data[start..i]);
            pieces.push(&data[i..=i]);
            start = i + 1;
        }
    }
    pieces.push(&data[start..]);
    pieces
}

fuzz_target!(|data: &[u8]| {
    let (whole, pending) = parse([data]);
    let cuts: [Vec<&[u8]>; 3] = [data.chunks(1).collect(), line_end_cuts(data), random_cuts(data)];
    for pieces in cuts {
        let (events, p) = parse(pieces);
        assert_eq!(events, whole, "events depend on the cut points");
        assert_eq!(p, pending, "pending bytes depend on the cut points");
    }
    // A blank line ends any event: after it the parser holds nothing.
    let (mut ended, held) = parse([data, &b"\n\n"[..]]);
    assert_eq!(held, 0, "bytes held after a blank line");
    // the blank line can only add the event that was being assembled
    ended.truncate(whole.len());
    assert_eq!(ended, whole);

    for event in &whole {
        if let SseEvent::Data(d) = event
            && let Ok(chunk) = parse_chunk(d)
        {
            assert_eq!(chunk.has_text, !chunk.text.is_empty());
        }
    }
});
