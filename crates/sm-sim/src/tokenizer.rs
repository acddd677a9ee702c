//! The sim's deterministic tokenizer and chat template (documented in docs/sim.md).
//!
//! Text is cut left to right into pieces: a space followed by 1–3 ASCII letters/digits (" the"),
//! else a run of 1–4 ASCII letters/digits ("toke", "n"), else one single byte (punctuation, newline,
//! a lone space, each byte of a non-ASCII character). A piece's id is its bytes read as a big-endian
//! integer, so ids decode back to the exact text without a vocabulary. Chat-template tokens use ids at
//! or above `SPECIAL_BASE`, which no text piece can reach (text pieces start with an ASCII byte).

/// First id of the chat template's special tokens.
pub const SPECIAL_BASE: u32 = 0xFFFF_FF00;
const IM_START: u32 = SPECIAL_BASE;
const IM_END: u32 = SPECIAL_BASE + 1;
const SEP: u32 = SPECIAL_BASE + 2;
const ROLES: &[&str] = &["system", "user", "assistant", "tool", "developer"];
const ROLE_BASE: u32 = SPECIAL_BASE + 16;
const ROLE_OTHER: u32 = ROLE_BASE + 15;

/// What the template writes between the generation prompt and an assistant message's content: a
/// conversation that sends an answer back has it after `<|im_start|> assistant SEP`, where the
/// request that generated it had only `<|im_start|> assistant` before its first token.
pub const ANSWER_PREFIX: &[u32] = &[SEP];

/// Template tokens added around every message: `<|im_start|>`, role, separator, `<|im_end|>`.
pub const TOKENS_PER_MESSAGE: usize = 4;
/// Tokens of the generation prompt appended after the last message: `<|im_start|>`, `assistant`.
pub const GENERATION_PROMPT_TOKENS: usize = 2;

fn is_word(b: u8) -> bool {
    b.is_ascii_alphanumeric()
}

/// Length in bytes of the piece starting at `i`.
fn piece_len(bytes: &[u8], i: usize) -> usize {
    let b = bytes[i];
    let (start, max) = if b == b' ' && bytes.get(i + 1).is_some_and(|&n| is_word(n)) {
        (i + 1, 3)
    } else if is_word(b) {
        (i, 4)
    } else {
        return 1;
    };
    let run = bytes[start..].iter().take(max).take_while(|&&c| is_word(c)).count();
    start - i + run
}

/// Number of tokens of `text`; equals `encode(text).len()` without allocating.
pub fn count(text: &str) -> usize {
    let bytes = text.as_bytes();
    let (mut i, mut n) = (0, 0);
    while i < bytes.len() {
        i += piece_len(bytes, i);
        n += 1;
    }
    n
}

pub fn encode(text: &str) -> Vec<u32> {
    let mut out = Vec::with_capacity(text.len() / 3 + 1);
    encode_into(text, &mut out);
    out
}

fn encode_into(text: &str, out: &mut Vec<u32>) {
    let bytes = text.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        let len = piece_len(bytes, i);
        let id = bytes[i..i + len].iter().fold(0u32, |acc, &b| (acc << 8) | u32::from(b));
        out.push(id);
        i += len;
    }
}

/// Text of `ids`; invalid UTF-8 (ids that split a character) is replaced like a lossy decoder does.
pub fn decode(ids: &[u32]) -> String {
    let mut bytes = Vec::with_capacity(ids.len() * 4);
    for &id in ids {
        if id >= SPECIAL_BASE {
            bytes.extend_from_slice(special_text(id).as_bytes());
        } else if id < 256 {
            bytes.push(id as u8);
        } else {
            let be = id.to_be_bytes();
            let skip = be.iter().take_while(|&&b| b == 0).count();
            bytes.extend_from_slice(&be[skip..]);
        }
    }
    String::from_utf8_lossy(&bytes).into_owned()
}

fn special_text(id: u32) -> &'static str {
    match id {
        IM_START => "<|im_start|>",
        IM_END => "<|im_end|>\n",
        SEP => "\n",
        ROLE_OTHER => "other",
        _ => {
            let i = id.wrapping_sub(ROLE_BASE) as usize;
            ROLES.get(i).copied().unwrap_or("<|unk|>")
        }
    }
}

fn role_id(role: &str) -> u32 {
    ROLES.iter().position(|r| *r == role).map_or(ROLE_OTHER, |i| ROLE_BASE + i as u32)
}

/// Token ids of a chat prompt: every message is `<|im_start|> ROLE SEP content <|im_end|>`, followed by
/// the generation prompt `<|im_start|> assistant`.
pub fn chat_encode(messages: &[(&str, &str)]) -> Vec<u32> {
    let mut out = Vec::new();
    for (role, content) in messages {
        out.push(IM_START);
        out.push(role_id(role));
        out.push(SEP);
        encode_into(content, &mut out);
        out.push(IM_END);
    }
    out.push(IM_START);
    out.push(role_id("assistant"));
    out
}

/// `chat_encode(messages).len()` without allocating.
pub fn chat_prompt_tokens(messages: &[(&str, &str)]) -> usize {
    messages.iter().map(|(_, c)| TOKENS_PER_MESSAGE + count(c)).sum::<usize>() + GENERATION_PROMPT_TOKENS
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pieces_follow_the_documented_rules() {
        assert_eq!(count("hello world"), 4); // "hell" "o" " wor" "ld"
        assert_eq!(count(" a b c"), 3);
        assert_eq!(count("a,  b!\n"), 6); // "a" "," " " " b" "!" "\n"
        assert_eq!(count(""), 0);
        assert_eq!(count("é"), 2);
        for text in ["hello world", "a,  b!\n", "naïve café — ok", " x12345678 y"] {
            let ids = encode(text);
            assert_eq!(ids.len(), count(text));
            assert_eq!(decode(&ids), text);
        }
    }

    #[test]
    fn chat_template_adds_fixed_tokens() {
        let msgs = [("system", "be brief"), ("user", "hello world")];
        let ids = chat_encode(&msgs);
        assert_eq!(ids.len(), chat_prompt_tokens(&msgs));
        assert_eq!(ids.len(), 2 * TOKENS_PER_MESSAGE + GENERATION_PROMPT_TOKENS + 3 + 4);
        let text = decode(&ids);
        assert!(text.starts_with("<|im_start|>system\nbe brief<|im_end|>\n"), "{text}");
        assert!(text.ends_with("<|im_start|>assistant"));
    }
}
