//! The repetition guard: a stream whose text repeats exactly is degenerate output
//! (often forced by `ignore_eos`), and a cell containing one is marked `loop`
//! instead of reporting a speed for garbage.
//!
//! Confirmed loop: the tail of the text is exactly periodic with a period that is
//! not whitespace-only, over at least 4 complete cycles and 4,096 characters.

use memchr::memmem;

const MIN_REPEATED: usize = 4096;
const MIN_CYCLES: usize = 4;
const ANCHOR: usize = 64;
const MAX_PERIOD: usize = 8192;
/// Text kept per stream; enough for the longest loop we look for.
const KEEP: usize = 4 * MAX_PERIOD + MIN_REPEATED;
/// How much new text arrives between two checks.
const CHECK_EVERY: usize = 512;

#[derive(Debug, Default)]
pub struct LoopGuard {
    tail: Vec<u8>,
    since_check: usize,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LoopFinding {
    pub period_chars: usize,
    pub repeated_chars: usize,
}

impl LoopGuard {
    /// Feeds generated text; returns a finding once the tail is a confirmed loop.
    pub fn push(&mut self, text: &str) -> Option<LoopFinding> {
        self.tail.extend_from_slice(text.as_bytes());
        if self.tail.len() > 2 * KEEP {
            self.tail.drain(..self.tail.len() - KEEP);
        }
        self.since_check += text.len();
        if self.since_check < CHECK_EVERY {
            return None;
        }
        self.since_check = 0;
        periodic_tail(&self.tail)
    }
}

/// Finds the shortest period of the text's tail that repeats at least
/// `MIN_CYCLES` times over at least `MIN_REPEATED` bytes.
pub fn periodic_tail(s: &[u8]) -> Option<LoopFinding> {
    if s.len() < MIN_REPEATED || s.len() < ANCHOR * 2 {
        return None;
    }
    let anchor = &s[s.len() - ANCHOR..];
    let search_from = s.len().saturating_sub(MAX_PERIOD + ANCHOR);
    // candidate periods: distances back to earlier occurrences of the anchor, shortest first.
    // `memmem` finds them (a byte-by-byte scan of 8 KiB took about 30 µs, every 512 bytes of
    // text: a few % of the client's CPU per token on long answers); occurrences may overlap,
    // so each search ends just before the last one found.
    let finder = memmem::FinderRev::new(anchor);
    let mut end = s.len() - 1;
    while end > search_from + ANCHOR {
        let Some(at) = finder.rfind(&s[search_from + 1..end]) else { break };
        end = search_from + 1 + at + ANCHOR;
        if let Some(f) = check_period(s, s.len() - end) {
            return Some(f);
        }
        end -= 1;
    }
    None
}

fn check_period(s: &[u8], period: usize) -> Option<LoopFinding> {
    if period == 0 || s[s.len() - period..].iter().all(u8::is_ascii_whitespace) {
        return None;
    }
    // length of the longest suffix that is period-periodic
    let mut n = period;
    while n < s.len() && s[s.len() - 1 - n] == s[s.len() - 1 - n + period] {
        n += 1;
    }
    (n >= MIN_REPEATED && n / period >= MIN_CYCLES).then_some(LoopFinding { period_chars: period, repeated_chars: n })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exact_repetition_is_confirmed() {
        let period = "the same eight words come back again and again ";
        let text = period.repeat(200);
        let f = periodic_tail(text.as_bytes()).expect("a loop");
        assert_eq!(f.period_chars, period.len());
        assert!(f.repeated_chars >= 4096);
    }

    #[test]
    fn threshold_like_the_reference() {
        // "duct" × 1023 = 4,092 chars: suspected at most; × 1024 = 4,096: confirmed
        assert!(periodic_tail("duct".repeat(1023).as_bytes()).is_none());
        assert!(periodic_tail("duct".repeat(1024).as_bytes()).is_some());
    }

    #[test]
    fn varied_text_and_whitespace_are_not_loops() {
        let mut text = String::new();
        for i in 0..2000 {
            text.push_str(&format!("line {i} says something\n"));
        }
        assert!(periodic_tail(text.as_bytes()).is_none());
        assert!(periodic_tail(" ".repeat(10_000).as_bytes()).is_none());
    }

    /// The byte-by-byte search `periodic_tail` replaced: the same candidates in the same order.
    fn periodic_tail_by_bytes(s: &[u8]) -> Option<LoopFinding> {
        if s.len() < MIN_REPEATED || s.len() < ANCHOR * 2 {
            return None;
        }
        let anchor = &s[s.len() - ANCHOR..];
        let search_from = s.len().saturating_sub(MAX_PERIOD + ANCHOR);
        let mut end = s.len() - 1;
        while end > search_from + ANCHOR {
            let start = end - ANCHOR;
            if &s[start..end] == anchor
                && let Some(f) = check_period(s, s.len() - end)
            {
                return Some(f);
            }
            end -= 1;
        }
        None
    }

    /// Texts with loops of every kind of period (shorter than the anchor, so that its occurrences
    /// overlap; longer; whitespace), near the thresholds, behind varied text, and none.
    #[test]
    fn the_search_finds_what_the_byte_scan_found() {
        let mut x: u64 = 7;
        let mut rand = move |n: u64| {
            x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            (x >> 33) % n
        };
        let mut checked = 0;
        for _ in 0..300 {
            let mut text = Vec::new();
            for _ in 0..rand(800) {
                text.extend_from_slice(format!("w{} ", rand(50)).as_bytes());
            }
            let period: Vec<u8> = (0..1 + rand(300)).map(|_| b"ab \n"[rand(4) as usize]).collect();
            let repeats = rand(2 * (MIN_REPEATED as u64) / period.len() as u64 + 2) as usize;
            for _ in 0..repeats {
                text.extend_from_slice(&period);
            }
            text.extend_from_slice(&period[..rand(period.len() as u64) as usize]);
            let tail = &text[text.len().saturating_sub(KEEP)..];
            assert_eq!(
                periodic_tail(tail),
                periodic_tail_by_bytes(tail),
                "period {:?}",
                String::from_utf8_lossy(&period)
            );
            checked += usize::from(periodic_tail(tail).is_some());
        }
        assert!(checked > 50, "too few loops among the cases: {checked}");
    }

    #[test]
    fn guard_checks_incrementally() {
        let mut g = LoopGuard::default();
        let piece = "abc def ghi ";
        let found = (0..2000).find_map(|_| g.push(piece));
        assert!(found.is_some());
    }
}
