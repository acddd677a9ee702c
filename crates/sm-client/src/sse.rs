//! Incremental Server-Sent Events parsing.
//!
//! Bytes arrive in arbitrary pieces; an event ends at a blank line. Only `data:`
//! fields matter to an OpenAI-compatible stream; `event:`, `id:`, comments and
//! `retry:` are skipped. There is no line-length limit: a 64 KB limit broke a
//! Python peer at 50K context (methodology §5).

/// One complete event's data (the `data:` lines joined by `\n`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SseEvent {
    Data(Vec<u8>),
    /// `data: [DONE]`, the OpenAI end-of-stream marker.
    Done,
}

#[derive(Debug, Default)]
pub struct SseParser {
    /// Bytes of an incomplete line.
    line: Vec<u8>,
    /// Data of the event being assembled.
    data: Vec<u8>,
    has_data: bool,
}

impl SseParser {
    pub fn new() -> SseParser {
        SseParser::default()
    }

    /// Feeds bytes; every event they complete is appended to `out`.
    pub fn push(&mut self, mut bytes: &[u8], out: &mut Vec<SseEvent>) {
        while let Some(pos) = bytes.iter().position(|&b| b == b'\n') {
            let (head, rest) = bytes.split_at(pos);
            bytes = &rest[1..];
            if self.line.is_empty() {
                self.line_done(strip_cr(head), out);
            } else {
                self.line.extend_from_slice(head);
                let line = std::mem::take(&mut self.line);
                self.line_done(strip_cr(&line), out);
                self.line = line;
                self.line.clear();
            }
        }
        self.line.extend_from_slice(bytes);
    }

    /// Bytes held back because no event ended yet (a stream that ends here was cut).
    pub fn pending(&self) -> usize {
        self.line.len() + self.data.len()
    }

    fn line_done(&mut self, line: &[u8], out: &mut Vec<SseEvent>) {
        if line.is_empty() {
            self.dispatch(out);
            return;
        }
        let Some(value) = field_value(line, b"data") else {
            return;
        };
        if self.has_data {
            self.data.push(b'\n');
        }
        self.data.extend_from_slice(value);
        self.has_data = true;
    }

    fn dispatch(&mut self, out: &mut Vec<SseEvent>) {
        if !self.has_data {
            return;
        }
        self.has_data = false;
        if self.data.as_slice() == b"[DONE]" {
            self.data.clear();
            out.push(SseEvent::Done);
        } else {
            out.push(SseEvent::Data(std::mem::take(&mut self.data)));
        }
    }
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
        assert_eq!(
            whole,
            vec![SseEvent::Data(b"{\"a\":1}".to_vec()), SseEvent::Data(b"{\"b\":2}".to_vec()), SseEvent::Done]
        );
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
        assert_eq!(out, vec![SseEvent::Data(b"a\nb".to_vec())]);
    }

    #[test]
    fn no_line_limit() {
        let big = vec![b'x'; 1 << 20];
        let mut stream = b"data: ".to_vec();
        stream.extend_from_slice(&big);
        stream.extend_from_slice(b"\n\n");
        let pieces: Vec<&[u8]> = stream.chunks(1000).collect();
        assert_eq!(parse_all(&pieces), vec![SseEvent::Data(big)]);
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
