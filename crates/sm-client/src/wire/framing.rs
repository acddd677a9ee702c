//! HTTP/1.1 response body framing, decoded in place from the connection's read buffer:
//! `Transfer-Encoding: chunked`, `Content-Length`, or read-to-close.
//!
//! Body data leaves as `Bytes` split off the read buffer (no copy); chunk-size lines, the CRLF
//! after each chunk and the trailers are skipped. Lines are bounded, so a malformed or hostile
//! answer is an error, never a buffer that grows without end.

use bytes::{Buf, Bytes, BytesMut};

/// The longest chunk-size line accepted (hex size, extensions, CRLF).
const MAX_SIZE_LINE: usize = 4096;
/// The most trailer bytes accepted after the last chunk.
const MAX_TRAILERS: usize = 64 * 1024;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FramingError {
    #[error("a chunk-size line longer than {MAX_SIZE_LINE} bytes")]
    SizeLineTooLong,
    #[error("a chunk-size line that is not a hexadecimal size: '{0}'")]
    BadChunkSize(String),
    #[error("chunk data not followed by CRLF")]
    NoCrlfAfterChunk,
    #[error("trailers longer than {MAX_TRAILERS} bytes")]
    TrailersTooLong,
    #[error("the connection closed in the middle of a chunked body")]
    ClosedMidChunk,
    #[error("the connection closed {0} bytes before the end of the body (Content-Length)")]
    ClosedShort(u64),
}

/// How the body ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Framing {
    Chunked,
    /// `Content-Length`: this many bytes.
    Length(u64),
    /// Neither: the body ends when the server closes the connection.
    Close,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// Expecting a chunk-size line.
    Size,
    /// Inside a chunk: bytes left.
    Data(u64),
    /// The CRLF after a chunk's data.
    DataEnd,
    /// After the last (zero-size) chunk: trailer lines until an empty one; bytes seen so far.
    Trailers(usize),
    /// `Content-Length` bytes left.
    Length(u64),
    /// Everything until the connection closes.
    Close,
    Done,
}

#[derive(Debug, Clone)]
pub struct Decoder {
    state: State,
}

impl Decoder {
    pub fn new(framing: Framing) -> Decoder {
        let state = match framing {
            Framing::Chunked => State::Size,
            Framing::Length(0) => State::Done,
            Framing::Length(n) => State::Length(n),
            Framing::Close => State::Close,
        };
        Decoder { state }
    }

    /// The body was read to its end.
    pub fn is_done(&self) -> bool {
        self.state == State::Done
    }

    /// Consumes what `buf` holds of the body; each piece of body data goes to `out`. Stops when
    /// the body ends (bytes after it stay in `buf`) or when `buf` holds no complete unit.
    pub fn decode(&mut self, buf: &mut BytesMut, out: &mut impl FnMut(Bytes)) -> Result<(), FramingError> {
        loop {
            let progressed = match self.state {
                State::Size => self.size_line(buf)?,
                State::Data(left) => take_data(buf, left, out).map(|rest| {
                    self.state = if rest == 0 { State::DataEnd } else { State::Data(rest) };
                }),
                State::DataEnd => self.data_end(buf)?,
                State::Trailers(seen) => self.trailer_line(buf, seen)?,
                State::Length(left) => take_data(buf, left, out).map(|rest| {
                    self.state = if rest == 0 { State::Done } else { State::Length(rest) };
                }),
                State::Close => take_data(buf, u64::MAX, out).map(|_| ()),
                State::Done => None,
            };
            if progressed.is_none() {
                return Ok(());
            }
        }
    }

    /// The connection closed: the end of a read-to-close body, an error for the others.
    pub fn at_eof(&mut self) -> Result<(), FramingError> {
        match self.state {
            State::Close | State::Done => {
                self.state = State::Done;
                Ok(())
            }
            State::Length(left) => Err(FramingError::ClosedShort(left)),
            _ => Err(FramingError::ClosedMidChunk),
        }
    }

    fn size_line(&mut self, buf: &mut BytesMut) -> Result<Option<()>, FramingError> {
        let Some(end) = line_end(buf, MAX_SIZE_LINE).ok_or(FramingError::SizeLineTooLong)? else {
            return Ok(None);
        };
        let size = parse_chunk_size(end.line(buf));
        buf.advance(end.consumed);
        let size = size?;
        self.state = if size == 0 { State::Trailers(0) } else { State::Data(size) };
        Ok(Some(()))
    }

    fn data_end(&mut self, buf: &mut BytesMut) -> Result<Option<()>, FramingError> {
        let n = match buf.first() {
            None => return Ok(None),
            Some(b'\n') => 1,
            Some(b'\r') => match buf.get(1) {
                None => return Ok(None),
                Some(b'\n') => 2,
                Some(_) => return Err(FramingError::NoCrlfAfterChunk),
            },
            Some(_) => return Err(FramingError::NoCrlfAfterChunk),
        };
        buf.advance(n);
        self.state = State::Size;
        Ok(Some(()))
    }

    fn trailer_line(&mut self, buf: &mut BytesMut, seen: usize) -> Result<Option<()>, FramingError> {
        let room = MAX_TRAILERS - seen;
        let Some(end) = line_end(buf, room).ok_or(FramingError::TrailersTooLong)? else {
            return Ok(None);
        };
        let empty = end.line(buf).is_empty();
        let seen = seen + end.line(buf).len() + 1;
        buf.advance(end.consumed);
        self.state = if empty {
            State::Done
        } else if seen >= MAX_TRAILERS {
            return Err(FramingError::TrailersTooLong);
        } else {
            State::Trailers(seen)
        };
        Ok(Some(()))
    }
}

/// Up to `left` bytes of body data from `buf`; `None` when `buf` is empty, else the bytes left.
fn take_data(buf: &mut BytesMut, left: u64, out: &mut impl FnMut(Bytes)) -> Option<u64> {
    if buf.is_empty() || left == 0 {
        return None;
    }
    let n = usize::try_from(left).unwrap_or(usize::MAX).min(buf.len());
    out(buf.split_to(n).freeze());
    Some(left - n as u64)
}

/// Where the next line of `buf` ends. Read in place and then advanced over: splitting it off
/// would count a reference to the read buffer up and down again for every chunk.
struct LineEnd {
    /// The line's length without CR LF.
    len: usize,
    /// The line's length with its line end.
    consumed: usize,
}

impl LineEnd {
    fn line<'a>(&self, buf: &'a [u8]) -> &'a [u8] {
        &buf[..self.len]
    }
}

/// The next line's end. `Some(None)`: no complete line yet; `None`: no line end within `max`
/// bytes.
fn line_end(buf: &[u8], max: usize) -> Option<Option<LineEnd>> {
    match buf.iter().take(max).position(|&b| b == b'\n') {
        Some(pos) => {
            let len = if pos > 0 && buf[pos - 1] == b'\r' { pos - 1 } else { pos };
            Some(Some(LineEnd { len, consumed: pos + 1 }))
        }
        None if buf.len() >= max => None,
        None => Some(None),
    }
}

/// `1a`, `1A ; name=value`: the hexadecimal size before any extension.
fn parse_chunk_size(line: &[u8]) -> Result<u64, FramingError> {
    let bad = || FramingError::BadChunkSize(String::from_utf8_lossy(&line[..line.len().min(40)]).into_owned());
    let size = line.split(|&b| b == b';').next().unwrap_or_default();
    let size = size.trim_ascii();
    if size.is_empty() || size.len() > 15 {
        return Err(bad());
    }
    let text = std::str::from_utf8(size).map_err(|_| bad())?;
    u64::from_str_radix(text, 16).map_err(|_| bad())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Decodes `wire` fed in pieces cut at `cuts`; the body and whether it ended.
    fn decode_cut(framing: Framing, wire: &[u8], cuts: &[usize]) -> Result<(Vec<u8>, bool, Vec<u8>), FramingError> {
        let mut d = Decoder::new(framing);
        let mut buf = BytesMut::new();
        let mut body = Vec::new();
        let mut from = 0;
        for &to in cuts.iter().chain(std::iter::once(&wire.len())) {
            buf.extend_from_slice(&wire[from..to]);
            from = to;
            d.decode(&mut buf, &mut |b| body.extend_from_slice(&b))?;
        }
        Ok((body, d.is_done(), buf.to_vec()))
    }

    const CHUNKED: &[u8] = b"1b;ext=1\r\ndata: {\"a\":1}\n\ndata: [DONE]\r\n3\r\nxyz\r\n0\r\nX-T: 1\r\n\r\nNEXT";

    #[test]
    fn chunked_at_every_split() {
        let want = b"data: {\"a\":1}\n\ndata: [DONE]xyz";
        for cut in 0..=CHUNKED.len() {
            let (body, done, rest) = decode_cut(Framing::Chunked, CHUNKED, &[cut]).unwrap();
            assert_eq!(body, want, "cut at {cut}");
            assert!(done, "cut at {cut}");
            assert_eq!(rest, b"NEXT", "the bytes after the body stay: cut at {cut}");
        }
        // every byte alone
        let cuts: Vec<usize> = (1..CHUNKED.len()).collect();
        assert_eq!(decode_cut(Framing::Chunked, CHUNKED, &cuts).unwrap().0, want);
    }

    #[test]
    fn content_length_and_close() {
        let (body, done, rest) = decode_cut(Framing::Length(5), b"hello world", &[2]).unwrap();
        assert_eq!((body.as_slice(), done, rest.as_slice()), (&b"hello"[..], true, &b" world"[..]));
        let mut d = Decoder::new(Framing::Length(5));
        d.decode(&mut BytesMut::from(&b"hel"[..]), &mut |_| {}).unwrap();
        assert_eq!(d.at_eof(), Err(FramingError::ClosedShort(2)));
        let mut d = Decoder::new(Framing::Close);
        d.decode(&mut BytesMut::from(&b"all of it"[..]), &mut |_| {}).unwrap();
        assert!(!d.is_done());
        d.at_eof().unwrap();
        assert!(d.is_done());
        assert!(Decoder::new(Framing::Length(0)).is_done());
    }

    #[test]
    fn malformed_chunking_is_an_error() {
        let err = |wire: &[u8]| decode_cut(Framing::Chunked, wire, &[]).unwrap_err();
        assert!(matches!(err(b"zz\r\n"), FramingError::BadChunkSize(_)));
        assert!(matches!(err(b"\r\n"), FramingError::BadChunkSize(_)));
        assert!(matches!(err(b"ffffffffffffffff\r\n"), FramingError::BadChunkSize(_)));
        assert_eq!(err(b"2\r\nabXY"), FramingError::NoCrlfAfterChunk);
        assert_eq!(err(&[b'1'; 5000]), FramingError::SizeLineTooLong);
        let mut long_trailers = b"0\r\n".to_vec();
        long_trailers.extend(std::iter::repeat_n(b"X-A: 1\r\n".as_slice(), 10_000).flatten());
        assert_eq!(err(&long_trailers), FramingError::TrailersTooLong);
        let mut d = Decoder::new(Framing::Chunked);
        d.decode(&mut BytesMut::from(&b"5\r\nab"[..]), &mut |_| {}).unwrap();
        assert_eq!(d.at_eof(), Err(FramingError::ClosedMidChunk));
    }
}
