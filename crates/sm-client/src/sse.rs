//! Incremental Server-Sent Events parsing.
//!
//! Bytes arrive in arbitrary pieces; an event ends at a blank line. Only `data:`
//! fields matter to an OpenAI-compatible stream; `event:`, `id:`, comments and
//! `retry:` are skipped. There is no line-length limit: a 64 KB limit broke a
//! Python peer at 50K context (methodology §5).

use bytes::Bytes;

/// One complete event's data (the `data:` lines joined by `\n`).
///
/// The data shares the read buffer it came in (`Bytes` is reference-counted): an event that
/// arrived whole in one read is not copied. Only an event whose lines straddle reads, or that
/// has more than one `data:` line, is assembled into its own buffer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SseEvent {
    Data(Bytes),
    /// `data: [DONE]`, the OpenAI end-of-stream marker.
    Done,
}

/// The data of the event being assembled.
#[derive(Debug, Default)]
enum EventData {
    #[default]
    None,
    /// One `data:` line, a slice of the read it arrived in.
    Shared(Bytes),
    /// Lines joined, or a line that straddled reads.
    Owned(Vec<u8>),
}

impl EventData {
    fn len(&self) -> usize {
        match self {
            EventData::None => 0,
            EventData::Shared(b) => b.len(),
            EventData::Owned(v) => v.len(),
        }
    }
}

#[derive(Debug, Default)]
pub struct SseParser {
    /// Bytes of an incomplete line.
    line: Vec<u8>,
    data: EventData,
}

impl SseParser {
    pub fn new() -> SseParser {
        SseParser::default()
    }

    /// Feeds bytes; every event they complete is appended to `out` (copies them: see
    /// [`Self::push_bytes`] for the read loop).
    pub fn push(&mut self, bytes: &[u8], out: &mut Vec<SseEvent>) {
        self.push_bytes(&Bytes::copy_from_slice(bytes), out);
    }

    /// Feeds one read; the events it completes share its buffer where they lie wholly inside it.
    pub fn push_bytes(&mut self, bytes: &Bytes, out: &mut Vec<SseEvent>) {
        let mut rest: &[u8] = bytes;
        while let Some(pos) = rest.iter().position(|&b| b == b'\n') {
            let (head, tail) = rest.split_at(pos);
            rest = &tail[1..];
            if self.line.is_empty() {
                self.line_done(strip_cr(head), Some(bytes), out);
            } else {
                self.line.extend_from_slice(head);
                let line = std::mem::take(&mut self.line);
                self.line_done(strip_cr(&line), None, out);
                self.line = line;
                self.line.clear();
            }
        }
        self.line.extend_from_slice(rest);
    }

    /// Bytes held back because no event ended yet (a stream that ends here was cut).
    pub fn pending(&self) -> usize {
        self.line.len() + self.data.len()
    }

    /// A complete line; `owner` is the read it lies in, when it lies wholly in one.
    fn line_done(&mut self, line: &[u8], owner: Option<&Bytes>, out: &mut Vec<SseEvent>) {
        if line.is_empty() {
            self.dispatch(out);
            return;
        }
        let Some(value) = field_value(line, b"data") else {
            return;
        };
        self.data = match (std::mem::take(&mut self.data), owner) {
            (EventData::None, Some(owner)) => EventData::Shared(owner.slice_ref(value)),
            (EventData::None, None) => EventData::Owned(value.to_vec()),
            (EventData::Shared(first), _) => EventData::Owned(joined(&first, value)),
            (EventData::Owned(mut v), _) => {
                v.push(b'\n');
                v.extend_from_slice(value);
                EventData::Owned(v)
            }
        };
    }

    fn dispatch(&mut self, out: &mut Vec<SseEvent>) {
        let data = match std::mem::take(&mut self.data) {
            EventData::None => return,
            EventData::Shared(b) => b,
            EventData::Owned(v) => Bytes::from(v),
        };
        if data.as_ref() == b"[DONE]" {
            out.push(SseEvent::Done);
        } else {
            out.push(SseEvent::Data(data));
        }
    }
}

fn joined(first: &[u8], next: &[u8]) -> Vec<u8> {
    let mut v = Vec::with_capacity(first.len() + 1 + next.len());
    v.extend_from_slice(first);
    v.push(b'\n');
    v.extend_from_slice(next);
    v
}

fn strip_cr(line: &[u8]) -> &[u8] {
    line.strip_suffix(b"\r").unwrap_or(line)
}

/// `data: x` → `x`, `data:x` → `x`; other fields → None.
fn field_value<'a>(line: &'a [u8], name: &[u8]) -> Option<&'a [u8]> {
    let rest = line.strip_prefix(name)?;
    let rest = rest.strip_prefix(b":")?;
    Some(rest.strip_prefix(b" ").unwrap_or(rest))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn data(d: &[u8]) -> SseEvent {
        SseEvent::Data(Bytes::copy_from_slice(d))
    }

    fn parse_all(pieces: &[&[u8]]) -> Vec<SseEvent> {
        let mut p = SseParser::new();
        let mut out = Vec::new();
        for piece in pieces {
            p.push(piece, &mut out);
        }
        out
    }

    #[test]
    fn events_split_anywhere() {
        let stream = b"data: {\"a\":1}\n\ndata: {\"b\":2}\r\n\r\n: comment\n\ndata: [DONE]\n\n";
        let whole = parse_all(&[stream]);
        assert_eq!(whole, vec![data(b"{\"a\":1}"), data(b"{\"b\":2}"), SseEvent::Done]);
        for split in 0..stream.len() {
            let (a, b) = stream.split_at(split);
            assert_eq!(parse_all(&[a, b]), whole, "split at {split}");
        }
        let bytewise: Vec<&[u8]> = stream.chunks(1).collect();
        assert_eq!(parse_all(&bytewise), whole);
    }

    #[test]
    fn multi_line_data_and_other_fields() {
        let out = parse_all(&[b"event: x\nid: 7\ndata:a\ndata: b\nretry: 5\n\n"]);
        assert_eq!(out, vec![data(b"a\nb")]);
    }

    #[test]
    fn no_line_limit() {
        let big = vec![b'x'; 1 << 20];
        let mut stream = b"data: ".to_vec();
        stream.extend_from_slice(&big);
        stream.extend_from_slice(b"\n\n");
        let pieces: Vec<&[u8]> = stream.chunks(1000).collect();
        assert_eq!(parse_all(&pieces), vec![SseEvent::Data(big.into())]);
    }

    /// The read loop's point: an event wholly inside one read shares that read's buffer; one that
    /// straddles two reads is assembled, with the same bytes.
    #[test]
    fn whole_events_share_the_read() {
        let read = Bytes::from_static(b"data: {\"a\":1}\n\ndata: {\"b\"");
        let mut p = SseParser::new();
        let mut out = Vec::new();
        p.push_bytes(&read, &mut out);
        let [SseEvent::Data(a)] = out.as_slice() else { panic!("{out:?}") };
        assert_eq!(a.as_ref(), b"{\"a\":1}");
        assert!(read.as_ptr_range().contains(&a.as_ptr()), "the event was copied");
        out.clear();
        p.push_bytes(&Bytes::from_static(b":2}\n\n"), &mut out);
        assert_eq!(out, vec![data(b"{\"b\":2}")]);
        assert_eq!(p.pending(), 0);
    }

    #[test]
    fn incomplete_event_is_pending() {
        let mut p = SseParser::new();
        let mut out = Vec::new();
        p.push(b"data: {\"a\"", &mut out);
        assert!(out.is_empty());
        assert!(p.pending() > 0);
    }
}
