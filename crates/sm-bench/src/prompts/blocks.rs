//! Prompts that keep a recorded trace's prefix structure (methodology §13.5): a Mooncake trace
//! names each 512-token block of a prompt by a hash id, and two requests that share an id share
//! that block. Each id becomes a block of text of its own, the same wherever the id appears, so the
//! server's prefix cache sees the trace's sharing, and every block is exactly its tokens long.
//!
//! Exact lengths without counting every prompt: a block is a sequence of short words, each one
//! token after a space on the server's tokenizer (the BPE tokenizers split text at spaces before
//! merging, so such words count one each wherever they stand). Which words qualify is asked of the
//! server's tokenizer once ([`Vocabulary::calibrate`]); the prompt then is a fixed lead and as many
//! words as its tokens, and a sample of whole prompts is counted to confirm it.

/// Short, common words: one token after a space in the tokenizers of the usual open models (the
/// calibration keeps only those that are on the server's). At most three letters, so that the
/// simulated engine's tokenizer (a space and up to three letters is one piece) agrees.
const CANDIDATES: &[&str] = &[
    "the", "and", "for", "you", "not", "are", "but", "can", "all", "one", "has", "was", "had", "his", "her", "its",
    "out", "new", "now", "day", "way", "may", "use", "man", "see", "two", "how", "who", "get", "say", "she", "any",
    "our", "old", "big", "off", "own", "why", "let", "put", "end", "far", "few", "top", "yes", "red", "run", "sun",
    "sea", "air", "car", "cat", "dog", "eye", "boy", "ask", "set", "try", "act", "age", "art", "bad", "bed", "box",
    "cut", "low", "law", "job", "key", "lot", "map", "oil", "pay", "per", "sit", "tax", "win", "war", "of", "to", "in",
    "is", "it", "on", "at", "as", "by", "we", "he", "be", "or", "an", "if", "so", "no", "do", "my", "up", "go", "me",
    "us",
];

/// How many words a vocabulary needs: fewer would make two ids' blocks likely to begin alike.
pub const MIN_WORDS: usize = 32;

/// Words counted as a calibration: enough that one word that merges with its neighbour shows.
const PROBE_WORDS: u64 = 8;

/// What every prompt's content begins with: ends in a letter, so that a template that trims the
/// content does not touch the first word's space.
pub const LEAD: &str = "Document:";

/// The words of the server's tokenizer that are one token each after a space.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Vocabulary {
    words: Vec<&'static str>,
}

/// Why a vocabulary could not be made.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum VocabularyError {
    #[error("counting tokens failed: {0}")]
    Count(String),
    #[error(
        "only {found} of {} short words are one token each on this server's tokenizer ({MIN_WORDS} needed), so \
         blocks of exact length cannot be built: replay with --replay-format messages and the prompts' own text",
        CANDIDATES.len()
    )]
    TooFew { found: usize },
}

impl Vocabulary {
    /// Keeps the candidates that `count` (the server's tokens of a user message's content, the
    /// template around it included) finds one token each, [`PROBE_WORDS`] in a row after
    /// [`LEAD`].
    pub async fn calibrate(count: impl AsyncFn(&str) -> Result<u64, String>) -> Result<Vocabulary, VocabularyError> {
        let base = count(LEAD).await.map_err(VocabularyError::Count)?;
        let mut words = Vec::new();
        for &w in CANDIDATES {
            let text = format!("{LEAD}{}", format!(" {w}").repeat(PROBE_WORDS as usize));
            let n = count(&text).await.map_err(VocabularyError::Count)?;
            if n.checked_sub(base) == Some(PROBE_WORDS) {
                words.push(w);
            }
        }
        Vocabulary::of(words)
    }

    /// A vocabulary of `words`, each already known to be one token after a space.
    pub fn of(words: Vec<&'static str>) -> Result<Vocabulary, VocabularyError> {
        if words.len() < MIN_WORDS {
            return Err(VocabularyError::TooFew { found: words.len() });
        }
        Ok(Vocabulary { words })
    }

    /// Every candidate, for a tokenizer known to count each as one token (the simulated
    /// engine's).
    pub fn all() -> Vocabulary {
        Vocabulary { words: CANDIDATES.to_vec() }
    }

    /// A word of the vocabulary.
    pub fn first_word(&self) -> &'static str {
        self.words[0]
    }

    /// Appends the first `tokens` words of block `hash_id`: the same words for the same id, in
    /// any prompt.
    pub fn push_block(&self, hash_id: u64, tokens: u64, out: &mut String) {
        let mut state = hash_id ^ 0x5DEE_CE66_D1CE_4E5B;
        for _ in 0..tokens {
            let word = self.words[(splitmix64(&mut state) % self.words.len() as u64) as usize];
            out.push(' ');
            out.push_str(word);
        }
    }

    /// The content of a prompt of `tokens` words made of the blocks `hash_ids` in order (each
    /// `block_tokens` words, the last cut where `tokens` ends), after [`LEAD`]; `None` when the
    /// ids do not cover `tokens`.
    pub fn content(&self, hash_ids: &[u64], block_tokens: u64, tokens: u64) -> Option<String> {
        self.content_at(hash_ids, block_tokens, 0, tokens)
    }

    /// The words of a prompt's token positions `from..to`, after [`LEAD`]: block `j` of
    /// `hash_ids` covers positions `j × block_tokens` onwards, and its words are those of the
    /// block's positions in the range. With `from` the tokens the server puts before the words
    /// (its chat template and the lead), a prompt of `to` tokens keeps the trace's blocks where
    /// the trace has them, so a shared block is a shared prefix of the same length in tokens.
    /// `None` when the ids do not cover `to`.
    pub fn content_at(&self, hash_ids: &[u64], block_tokens: u64, from: u64, to: u64) -> Option<String> {
        if (hash_ids.len() as u64).saturating_mul(block_tokens) < to || block_tokens == 0 {
            return None;
        }
        // a word is at most four bytes with its space
        let mut out = String::with_capacity(LEAD.len() + 4 * to.saturating_sub(from) as usize);
        out.push_str(LEAD);
        for (j, &id) in hash_ids.iter().enumerate() {
            let start = j as u64 * block_tokens;
            if start >= to {
                break;
            }
            let words = (start + block_tokens).min(to).saturating_sub(start.max(from));
            self.push_block(id, words, &mut out);
        }
        Some(out)
    }
}

/// SplitMix64: a small, well-mixed generator, so that neighbouring ids give unrelated blocks.
fn splitmix64(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

#[cfg(test)]
mod tests;
