//! A Hugging Face `tokenizer.json` that counts exactly like [`crate::tokenizer`], so that load
//! generators which need a local tokenizer (AIPerf, guidellm, `vllm bench serve`) can be pointed at
//! the sim without any hub download (`speedmatrix sim --write-tokenizer DIR`).
//!
//! The sim's pieces cannot be a vocabulary (every run of 1–4 ASCII letters or digits is one token:
//! millions of them), so the HF tokenizer reproduces the *cutting*, not the ids:
//! - a `ByteLevel` pre-tokenizer (no regex) maps every byte to one character, which makes each byte
//!   of a non-ASCII character its own unit, as in the sim;
//! - a `Split` pre-tokenizer with the sim's three rules isolates the pieces;
//! - a `WordLevel` model turns every piece into exactly one id: a vocabulary piece, else `<|unk|>`.
//!
//! So counts agree for any text; ids differ from the sim's. Decoding a vocabulary id gives its text,
//! which is what `vllm bench serve --dataset-name random` needs to build prompts.

use std::io;
use std::path::Path;

use serde_json::{Map, Value, json};

/// The sim's piece rules on GPT-2 byte-level text, where a space is `Ġ` and ASCII letters and digits
/// are themselves; `.` is one byte (no byte maps to a line break character).
pub const PIECE_REGEX: &str = "\u{0120}[A-Za-z0-9]{1,3}|[A-Za-z0-9]{1,4}|.";
const UNK: &str = "<|unk|>";
const SPECIALS: &[&str] = &["<|im_start|>", "<|im_end|>", UNK];
const CHAT_TEMPLATE: &str = "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n\
{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant{% endif %}";

/// GPT-2's byte-to-character table, which `ByteLevel` uses: printable Latin-1 bytes are themselves,
/// the others are shifted to U+0100 and up in byte order.
fn byte_chars() -> [char; 256] {
    let mut out = ['\0'; 256];
    let mut shifted = 0u32;
    for b in 0..=255u8 {
        let printable = matches!(b, b'!'..=b'~' | 0xA1..=0xAC | 0xAE..=0xFF);
        out[usize::from(b)] = if printable {
            char::from(b)
        } else {
            shifted += 1;
            char::from_u32(255 + shifted).unwrap_or('\u{FFFD}')
        };
    }
    out
}

/// The vocabulary: every single byte, then the sim's common piece shapes of one and two characters
/// (`"a"`, `"ab"`, `" a"`, `" ab"`), then the chat template's special tokens. 8,002 ids; the size
/// only matters to tools that sample random ids.
fn vocab() -> Vec<String> {
    let chars = byte_chars();
    let space = chars[usize::from(b' ')];
    let alnum: Vec<char> = ('0'..='9').chain('A'..='Z').chain('a'..='z').collect();
    let mut v: Vec<String> = chars.iter().map(|c| c.to_string()).collect();
    for &a in &alnum {
        for &b in &alnum {
            v.push(format!("{a}{b}"));
        }
    }
    for &a in &alnum {
        v.push(format!("{space}{a}"));
        for &b in &alnum {
            v.push(format!("{space}{a}{b}"));
        }
    }
    v.extend(SPECIALS.iter().map(|s| s.to_string()));
    v
}

fn byte_level() -> Value {
    json!({"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": false, "use_regex": false})
}

/// The `tokenizer.json` document.
pub fn tokenizer_json() -> Value {
    let words = vocab();
    let vocab: Map<String, Value> = words.iter().enumerate().map(|(i, w)| (w.clone(), json!(i))).collect();
    // The template tokens are vocabulary words, not added tokens: the sim cuts a literal
    // "<|im_start|>" in a prompt's text into pieces like any other text, and so must this tokenizer.
    json!({
        "version": "1.0",
        "truncation": null,
        "padding": null,
        "added_tokens": [],
        "normalizer": null,
        "pre_tokenizer": {"type": "Sequence", "pretokenizers": [
            byte_level(),
            {"type": "Split", "pattern": {"Regex": PIECE_REGEX}, "behavior": "Isolated", "invert": false}
        ]},
        "post_processor": null,
        "decoder": byte_level(),
        "model": {"type": "WordLevel", "vocab": vocab, "unk_token": UNK}
    })
}

/// Writes `tokenizer.json`, `tokenizer_config.json` (a fast tokenizer with the sim's chat template)
/// and a minimal `config.json` (some tools read the model type and context length) into `dir`.
pub fn write(dir: &Path, max_model_len: u64) -> io::Result<()> {
    std::fs::create_dir_all(dir)?;
    let vocab_size = vocab().len();
    let config = json!({
        "tokenizer_class": "PreTrainedTokenizerFast",
        "model_max_length": max_model_len,
        "bos_token": null,
        "eos_token": null,
        "unk_token": UNK,
        "pad_token": UNK,
        "add_bos_token": false,
        "add_eos_token": false,
        "clean_up_tokenization_spaces": false,
        "chat_template": CHAT_TEMPLATE,
    });
    let model = json!({
        "model_type": "llama",
        "architectures": ["LlamaForCausalLM"],
        "vocab_size": vocab_size,
        "max_position_embeddings": max_model_len,
    });
    for (name, doc) in [("tokenizer.json", tokenizer_json()), ("tokenizer_config.json", config), ("config.json", model)]
    {
        let text = serde_json::to_string_pretty(&doc).map_err(io::Error::other)?;
        std::fs::write(dir.join(name), text)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn byte_table_is_gpt2s() {
        let t = byte_chars();
        assert_eq!(t[usize::from(b' ')], '\u{0120}');
        assert_eq!(t[usize::from(b'\n')], '\u{010A}');
        assert_eq!(t[usize::from(b'a')], 'a');
        assert_eq!(t[0xC3], '\u{00C3}');
        assert_eq!(t[0xAD], '\u{0143}');
        let distinct: std::collections::HashSet<char> = t.iter().copied().collect();
        assert_eq!(distinct.len(), 256);
    }

    #[test]
    fn vocabulary_has_unique_words_and_writes() {
        let v = vocab();
        let distinct: std::collections::HashSet<&String> = v.iter().collect();
        assert_eq!(distinct.len(), v.len());
        assert_eq!(v.len(), 256 + 62 * 62 + 62 + 62 * 62 + SPECIALS.len());
        let dir = tempfile::tempdir().unwrap();
        write(dir.path(), 8192).unwrap();
        let doc: Value = serde_json::from_slice(&std::fs::read(dir.path().join("tokenizer.json")).unwrap()).unwrap();
        assert_eq!(doc["model"]["vocab"]["<|unk|>"], json!(v.len() - 1));
        assert_eq!(doc["pre_tokenizer"]["pretokenizers"][1]["pattern"]["Regex"], PIECE_REGEX);
    }
}
