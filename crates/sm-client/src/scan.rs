//! The measuring fast path for one streamed chunk: a scanner that reads only the fields the
//! figures need, borrowing the text from the event's bytes, without building a JSON tree.
//!
//! [`parse_chunk`] stays the reference. The scanner answers only for shapes it knows with
//! certainty (one object, at most one choice, the known fields with their expected types, no
//! escaped keys, no `error`); anything else — and anything the reference would reject — makes it
//! answer `None`, and [`read_chunk`] then runs the reference, so results never differ. Property
//! tests and a fuzz target (`fuzz/fuzz_targets/chunk_fast.rs`) hold the two equal.

use std::borrow::Cow;

use crate::openai::{Chunk, ChunkError, parse_chunk};

/// What one `data:` event says, as [`Chunk`], with its text borrowed from the event where it can be.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ChunkRef<'a> {
    pub id: Option<Cow<'a, str>>,
    /// Generated text: reasoning and content deltas (or completions `text`), as [`Chunk::text`].
    pub text: Cow<'a, str>,
    /// The answer's own text, as [`Chunk::content`].
    pub content: Cow<'a, str>,
    pub has_text: bool,
    /// As [`Chunk::tool_call`].
    pub tool_call: bool,
    /// As [`Chunk::tool_args`].
    pub tool_args: Cow<'a, str>,
    pub finish_reason: Option<Cow<'a, str>>,
    pub completion_tokens: Option<u64>,
    pub prompt_tokens: Option<u64>,
    pub cached_tokens: Option<u64>,
    pub reasoning_tokens: Option<u64>,
    pub error: Option<Cow<'a, str>>,
}

impl ChunkRef<'_> {
    pub fn into_owned(self) -> Chunk {
        Chunk {
            id: self.id.map(Cow::into_owned),
            text: self.text.into_owned(),
            content: self.content.into_owned(),
            has_text: self.has_text,
            tool_call: self.tool_call,
            tool_args: self.tool_args.into_owned(),
            finish_reason: self.finish_reason.map(Cow::into_owned),
            completion_tokens: self.completion_tokens,
            prompt_tokens: self.prompt_tokens,
            cached_tokens: self.cached_tokens,
            reasoning_tokens: self.reasoning_tokens,
            error: self.error.map(Cow::into_owned),
        }
    }
}

impl From<Chunk> for ChunkRef<'static> {
    fn from(c: Chunk) -> Self {
        ChunkRef {
            id: c.id.map(Cow::Owned),
            text: Cow::Owned(c.text),
            content: Cow::Owned(c.content),
            has_text: c.has_text,
            tool_call: c.tool_call,
            tool_args: Cow::Owned(c.tool_args),
            finish_reason: c.finish_reason.map(Cow::Owned),
            completion_tokens: c.completion_tokens,
            prompt_tokens: c.prompt_tokens,
            cached_tokens: c.cached_tokens,
            reasoning_tokens: c.reasoning_tokens,
            error: c.error.map(Cow::Owned),
        }
    }
}

/// The chunk an event carries: the fast path where it is sure, else the reference parser.
pub fn read_chunk(data: &[u8]) -> Result<ChunkRef<'_>, ChunkError> {
    match scan_chunk(data) {
        Some(c) => Ok(c),
        None => parse_chunk(data).map(ChunkRef::from),
    }
}

/// The fast path alone: `Some` only where the result is certainly what [`parse_chunk`] gives.
pub fn scan_chunk(data: &[u8]) -> Option<ChunkRef<'_>> {
    // Valid UTF-8 up front: every string slice below is then a `str` without further checks,
    // and bytes the reference might skip unchecked never reach an answer.
    let s = std::str::from_utf8(data).ok()?;
    let mut cur = Cursor { s, b: data, i: 0 };
    let mut raw = RawRef::default();
    cur.ws();
    cur.expect(b'{')?;
    let mut seen = Seen::default();
    cur.object_body(|cur, key| match key {
        "id" => {
            seen.once(0)?;
            raw.id = cur.str_or_null()?;
            Some(true)
        }
        "choices" => {
            seen.once(1)?;
            cur.choices(&mut raw)?;
            Some(true)
        }
        "usage" => {
            seen.once(2)?;
            cur.usage(&mut raw)?;
            Some(true)
        }
        // rare, and its message may be any JSON value: the reference describes it
        "error" => None,
        _ => Some(false),
    })?;
    cur.ws();
    (cur.i == data.len()).then(|| raw.finish())
}

/// The fields of one chunk as they appear, before the text parts are joined.
#[derive(Default)]
struct RawRef<'a> {
    id: Option<Cow<'a, str>>,
    reasoning_content: Option<Cow<'a, str>>,
    reasoning: Option<Cow<'a, str>>,
    content: Option<Cow<'a, str>>,
    text: Option<Cow<'a, str>>,
    finish_reason: Option<Cow<'a, str>>,
    completion_tokens: Option<u64>,
    prompt_tokens: Option<u64>,
    cached_tokens: Option<u64>,
    reasoning_tokens: Option<u64>,
}

impl<'a> RawRef<'a> {
    /// Joins the parts in the reference's order: reasoning_content, reasoning, content, text.
    fn finish(self) -> ChunkRef<'a> {
        let text = join([&self.reasoning_content, &self.reasoning, &self.content, &self.text]);
        let content = join([&self.content, &self.text]);
        ChunkRef {
            id: self.id,
            has_text: !text.is_empty(),
            // a chunk with a tool call is left to the reference (see `Cursor::delta`)
            tool_call: false,
            tool_args: Cow::Borrowed(""),
            text,
            content,
            finish_reason: self.finish_reason,
            completion_tokens: self.completion_tokens,
            prompt_tokens: self.prompt_tokens,
            cached_tokens: self.cached_tokens,
            reasoning_tokens: self.reasoning_tokens,
            error: None,
        }
    }
}

/// The non-empty parts concatenated; borrowed when at most one is not empty (the usual token).
fn join<'a, const N: usize>(parts: [&Option<Cow<'a, str>>; N]) -> Cow<'a, str> {
    let mut non_empty = parts.into_iter().flatten().filter(|p| !p.is_empty());
    let Some(first) = non_empty.next() else { return Cow::Borrowed("") };
    let mut joined = first.clone();
    for p in non_empty {
        joined.to_mut().push_str(p);
    }
    joined
}

/// Known keys seen in one object: a repeated one is an error to the reference (serde's duplicate
/// field), so the scanner leaves it to the reference.
#[derive(Default)]
struct Seen(u8);

impl Seen {
    fn once(&mut self, bit: u8) -> Option<()> {
        let mask = 1 << bit;
        if self.0 & mask != 0 {
            return None;
        }
        self.0 |= mask;
        Some(())
    }
}

/// How deep a skipped value may nest before the scanner gives up (the reference allows 128).
const MAX_DEPTH: u32 = 32;

struct Cursor<'a> {
    s: &'a str,
    b: &'a [u8],
    i: usize,
}

impl<'a> Cursor<'a> {
    fn ws(&mut self) {
        while matches!(self.b.get(self.i), Some(b' ' | b'\t' | b'\n' | b'\r')) {
            self.i += 1;
        }
    }

    fn peek(&mut self) -> Option<u8> {
        self.ws();
        self.b.get(self.i).copied()
    }

    fn expect(&mut self, byte: u8) -> Option<()> {
        (self.peek()? == byte).then(|| self.i += 1)
    }

    fn literal(&mut self, word: &[u8]) -> Option<()> {
        let end = self.i + word.len();
        (self.b.get(self.i..end)? == word).then(|| self.i = end)
    }

    /// The members of an object whose `{` was read: `field` reads the value of a key it knows
    /// (`Some(true)`), declines an unknown one (`Some(false)`: skipped) or gives up (`None`).
    fn object_body(&mut self, field: impl FnMut(&mut Self, &'a str) -> Option<bool>) -> Option<()> {
        self.object_body_at(0, field)
    }

    /// [`Self::object_body`] of an object nested `depth` deep.
    fn object_body_at(&mut self, depth: u32, mut field: impl FnMut(&mut Self, &'a str) -> Option<bool>) -> Option<()> {
        if self.peek()? == b'}' {
            self.i += 1;
            return Some(());
        }
        loop {
            let Cow::Borrowed(key) = self.string()? else {
                return None; // an escaped key may spell a known one
            };
            self.expect(b':')?;
            if !field(self, key)? {
                self.skip_value(depth + 1)?;
            }
            match self.peek()? {
                b',' => self.i += 1,
                b'}' => {
                    self.i += 1;
                    return Some(());
                }
                _ => return None,
            }
        }
    }

    /// `null` or `[]`, else `None`.
    fn null_or_empty_array(&mut self) -> Option<()> {
        match self.peek()? {
            b'n' => self.literal(b"null"),
            b'[' => {
                self.i += 1;
                self.expect(b']')
            }
            _ => None,
        }
    }

    /// `null` or an object; `false` for null.
    fn object_or_null(&mut self) -> Option<bool> {
        match self.peek()? {
            b'{' => {
                self.i += 1;
                Some(true)
            }
            b'n' => self.literal(b"null").map(|()| false),
            _ => None,
        }
    }

    fn choices(&mut self, raw: &mut RawRef<'a>) -> Option<()> {
        self.expect(b'[')?;
        if self.peek()? == b']' {
            self.i += 1;
            return Some(());
        }
        self.expect(b'{')?;
        let mut seen = Seen::default();
        self.object_body(|cur, key| match key {
            "delta" => {
                seen.once(0)?;
                if cur.object_or_null()? {
                    cur.delta(raw)?;
                }
                Some(true)
            }
            "text" => {
                seen.once(1)?;
                raw.text = cur.str_or_null()?;
                Some(true)
            }
            "finish_reason" => {
                seen.once(2)?;
                raw.finish_reason = cur.str_or_null()?;
                Some(true)
            }
            _ => Some(false),
        })?;
        // a second choice: the reference joins them; rare enough to leave to it
        self.expect(b']')
    }

    fn delta(&mut self, raw: &mut RawRef<'a>) -> Option<()> {
        let mut seen = Seen::default();
        self.object_body(|cur, key| {
            let slot = match key {
                "content" => (0, &mut raw.content),
                "reasoning_content" => (1, &mut raw.reasoning_content),
                "reasoning" => (2, &mut raw.reasoning),
                // vLLM's deltas may carry an empty list; a call itself, rare beside the tokens of
                // text, goes to the reference, which reads any shape of it
                "tool_calls" => {
                    seen.once(3)?;
                    cur.null_or_empty_array()?;
                    return Some(true);
                }
                _ => return Some(false),
            };
            seen.once(slot.0)?;
            *slot.1 = cur.str_or_null()?;
            Some(true)
        })
    }

    fn usage(&mut self, raw: &mut RawRef<'a>) -> Option<()> {
        if !self.object_or_null()? {
            return Some(());
        }
        let mut seen = Seen::default();
        self.object_body(|cur, key| match key {
            "prompt_tokens" => {
                seen.once(0)?;
                raw.prompt_tokens = cur.u64_or_null()?;
                Some(true)
            }
            "completion_tokens" => {
                seen.once(1)?;
                raw.completion_tokens = cur.u64_or_null()?;
                Some(true)
            }
            "prompt_tokens_details" => {
                seen.once(2)?;
                if cur.object_or_null()? {
                    cur.details(raw)?;
                }
                Some(true)
            }
            "completion_tokens_details" => {
                seen.once(3)?;
                if cur.object_or_null()? {
                    cur.completion_details(raw)?;
                }
                Some(true)
            }
            _ => Some(false),
        })
    }

    fn completion_details(&mut self, raw: &mut RawRef<'a>) -> Option<()> {
        let mut seen = Seen::default();
        self.object_body(|cur, key| match key {
            "reasoning_tokens" => {
                seen.once(0)?;
                raw.reasoning_tokens = cur.u64_or_null()?;
                Some(true)
            }
            _ => Some(false),
        })
    }

    fn details(&mut self, raw: &mut RawRef<'a>) -> Option<()> {
        let mut seen = Seen::default();
        self.object_body(|cur, key| match key {
            "cached_tokens" => {
                seen.once(0)?;
                raw.cached_tokens = cur.u64_or_null()?;
                Some(true)
            }
            _ => Some(false),
        })
    }

    fn str_or_null(&mut self) -> Option<Option<Cow<'a, str>>> {
        match self.peek()? {
            b'"' => self.string().map(Some),
            b'n' => self.literal(b"null").map(|()| None),
            _ => None,
        }
    }

    /// A non-negative integer that fits in u64, or null; anything else (a sign, a fraction, an
    /// exponent, a leading zero, an overflow) is left to the reference.
    fn u64_or_null(&mut self) -> Option<Option<u64>> {
        match self.peek()? {
            b'n' => self.literal(b"null").map(|()| None),
            b'0' => {
                self.i += 1;
                (!matches!(self.b.get(self.i), Some(b'0'..=b'9' | b'.' | b'e' | b'E'))).then_some(Some(0))
            }
            b'1'..=b'9' => {
                let mut n: u64 = 0;
                while let Some(&d @ b'0'..=b'9') = self.b.get(self.i) {
                    n = n.checked_mul(10)?.checked_add(u64::from(d - b'0'))?;
                    self.i += 1;
                }
                (!matches!(self.b.get(self.i), Some(b'.' | b'e' | b'E'))).then_some(Some(n))
            }
            _ => None,
        }
    }

    /// A string at the cursor: borrowed when it has no escape.
    fn string(&mut self) -> Option<Cow<'a, str>> {
        self.expect(b'"')?;
        let start = self.i;
        loop {
            match *self.b.get(self.i)? {
                b'"' => {
                    self.i += 1;
                    return Some(Cow::Borrowed(&self.s[start..self.i - 1]));
                }
                b'\\' => return self.escaped_string(start).map(Cow::Owned),
                0..=0x1f => return None, // a raw control character: the reference rejects it
                _ => self.i += 1,
            }
        }
    }

    /// The rest of a string that has an escape at the cursor, unescaped.
    fn escaped_string(&mut self, start: usize) -> Option<String> {
        let mut out = String::with_capacity(self.i - start + 16);
        let mut run = start;
        loop {
            match *self.b.get(self.i)? {
                b'"' => {
                    out.push_str(&self.s[run..self.i]);
                    self.i += 1;
                    return Some(out);
                }
                b'\\' => {
                    out.push_str(&self.s[run..self.i]);
                    self.i += 1;
                    out.push(self.escape()?);
                    run = self.i;
                }
                0..=0x1f => return None,
                _ => self.i += 1,
            }
        }
    }

    /// One escape after its backslash.
    fn escape(&mut self) -> Option<char> {
        let c = *self.b.get(self.i)?;
        self.i += 1;
        Some(match c {
            b'"' => '"',
            b'\\' => '\\',
            b'/' => '/',
            b'b' => '\u{8}',
            b'f' => '\u{c}',
            b'n' => '\n',
            b'r' => '\r',
            b't' => '\t',
            b'u' => return self.unicode_escape(),
            _ => return None,
        })
    }

    /// `\uXXXX`, or a surrogate pair `\uD83D\uDE00`; a lone surrogate is left to the reference.
    fn unicode_escape(&mut self) -> Option<char> {
        let hi = self.hex4()?;
        match hi {
            0xD800..=0xDBFF => {
                self.literal(b"\\u")?;
                let lo = self.hex4()?;
                if !(0xDC00..=0xDFFF).contains(&lo) {
                    return None;
                }
                char::from_u32(0x10000 + ((u32::from(hi) - 0xD800) << 10) + (u32::from(lo) - 0xDC00))
            }
            0xDC00..=0xDFFF => None,
            _ => char::from_u32(u32::from(hi)),
        }
    }

    fn hex4(&mut self) -> Option<u16> {
        let digits = self.s.get(self.i..self.i + 4)?;
        if !digits.bytes().all(|b| b.is_ascii_hexdigit()) {
            return None;
        }
        self.i += 4;
        u16::from_str_radix(digits, 16).ok()
    }

    /// Skips any value, checking it is well-formed JSON (stricter than the reference, never looser).
    fn skip_value(&mut self, depth: u32) -> Option<()> {
        if depth > MAX_DEPTH {
            return None;
        }
        match self.peek()? {
            b'"' => self.string().map(drop),
            b'{' => {
                self.i += 1;
                self.object_body_at(depth + 1, |_, _| Some(false))
            }
            b'[' => self.skip_array(depth),
            b't' => self.literal(b"true"),
            b'f' => self.literal(b"false"),
            b'n' => self.literal(b"null"),
            b'-' | b'0'..=b'9' => self.skip_number(),
            _ => None,
        }
    }

    fn skip_array(&mut self, depth: u32) -> Option<()> {
        self.i += 1;
        if self.peek()? == b']' {
            self.i += 1;
            return Some(());
        }
        loop {
            self.skip_value(depth + 1)?;
            match self.peek()? {
                b',' => self.i += 1,
                b']' => {
                    self.i += 1;
                    return Some(());
                }
                _ => return None,
            }
        }
    }

    /// `-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?`
    fn skip_number(&mut self) -> Option<()> {
        if self.b.get(self.i) == Some(&b'-') {
            self.i += 1;
        }
        match self.b.get(self.i)? {
            b'0' => self.i += 1,
            b'1'..=b'9' => self.digits(),
            _ => return None,
        }
        if self.b.get(self.i) == Some(&b'.') {
            self.i += 1;
            self.some_digits()?;
        }
        if matches!(self.b.get(self.i), Some(b'e' | b'E')) {
            self.i += 1;
            if matches!(self.b.get(self.i), Some(b'+' | b'-')) {
                self.i += 1;
            }
            self.some_digits()?;
        }
        Some(())
    }

    fn digits(&mut self) {
        while matches!(self.b.get(self.i), Some(b'0'..=b'9')) {
            self.i += 1;
        }
    }

    fn some_digits(&mut self) -> Option<()> {
        let start = self.i;
        self.digits();
        (self.i > start).then_some(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_fast_path_reads_the_servers_count_of_thinking_tokens() {
        let data =
            br#"{"choices":[],"usage":{"completion_tokens":9,"completion_tokens_details":{"reasoning_tokens":7}}}"#;
        let fast = read_chunk(data).unwrap();
        assert_eq!((fast.completion_tokens, fast.reasoning_tokens), (Some(9), Some(7)));
        assert_eq!(fast.into_owned(), parse_chunk(data).unwrap());
    }
}
