//! Deterministic pseudo-words for generated output. Every emitted token is exactly one token of the
//! sim's tokenizer (a word's first token is a space and 3 letters, inner tokens are 4 letters, the last
//! 1–4 letters), so re-tokenizing the output gives back the completion token count.

const CONSONANTS: &[u8] = b"bcdfghjklmnprstvz";
const VOWELS: &[u8] = b"aeiou";
/// Words per period when the `loop` fault makes the text repeat.
pub(crate) const LOOP_PERIOD_WORDS: u64 = 8;

fn splitmix(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

pub(crate) struct TextGen {
    seed: u64,
    state: u64,
    looping: bool,
    words: u64,
    /// Tokens still to emit in the current word, the current one included.
    left_in_word: u8,
}

impl TextGen {
    pub(crate) fn new(seed: u64, looping: bool) -> Self {
        Self { seed, state: seed, looping, words: 0, left_in_word: 0 }
    }

    fn letter(&mut self, i: usize) -> char {
        let r = splitmix(&mut self.state);
        let set = if i.is_multiple_of(2) { CONSONANTS } else { VOWELS };
        set[(r % set.len() as u64) as usize] as char
    }

    /// Appends the text of the next token to `out`.
    pub(crate) fn push_token(&mut self, out: &mut String) {
        if self.left_in_word == 0 {
            if self.looping && self.words.is_multiple_of(LOOP_PERIOD_WORDS) {
                self.state = self.seed;
            }
            self.words += 1;
            self.left_in_word = 1 + (splitmix(&mut self.state) % 3) as u8;
            out.push(' ');
            for i in 0..3 {
                let c = self.letter(i);
                out.push(c);
            }
        } else {
            let len = if self.left_in_word == 1 { 1 + (splitmix(&mut self.state) % 4) as usize } else { 4 };
            for i in 0..len {
                let c = self.letter(i + 1);
                out.push(c);
            }
        }
        self.left_in_word -= 1;
    }
}

/// Token ids of the first `n` tokens the generator seeded with `seed` emits: what a request's
/// answer will be, known before it runs (the prefix cache publishes its blocks as they fill).
pub(crate) fn answer_ids(seed: u64, looping: bool, n: usize) -> Vec<u32> {
    let mut g = TextGen::new(seed, looping);
    let mut text = String::with_capacity(n * 4);
    for _ in 0..n {
        g.push_token(&mut text);
    }
    crate::tokenizer::encode(&text)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tokenizer;

    fn generate(seed: u64, looping: bool, n: usize) -> String {
        let mut g = TextGen::new(seed, looping);
        let mut s = String::new();
        for _ in 0..n {
            g.push_token(&mut s);
        }
        s
    }

    #[test]
    fn every_emission_is_one_token() {
        for n in [1, 2, 7, 100, 1000] {
            assert_eq!(tokenizer::count(&generate(42, false, n)), n);
            assert_eq!(tokenizer::count(&generate(7, true, n)), n);
        }
    }

    #[test]
    fn answer_ids_are_the_emitted_tokens() {
        let ids = answer_ids(42, false, 50);
        assert_eq!(ids.len(), 50);
        assert_eq!(tokenizer::decode(&ids), generate(42, false, 50));
        assert_eq!(answer_ids(42, false, 20), ids[..20], "a shorter answer is a prefix of a longer one");
    }

    #[test]
    fn text_does_not_repeat_unless_looping() {
        let words: Vec<String> = generate(1, false, 3000).split(' ').map(str::to_string).collect();
        let windows: std::collections::HashSet<_> = words.windows(8).collect();
        assert!(windows.len() > words.len() - 20);
        let looped = generate(1, true, 400);
        let w: Vec<&str> = looped.split_whitespace().collect();
        assert_eq!(w[0..8], w[8..16]);
        assert_eq!(w[8..16], w[16..24]);
    }
}
