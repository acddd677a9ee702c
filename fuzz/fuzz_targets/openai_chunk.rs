//! `parse_chunk` over arbitrary bytes (one SSE `data:` payload).
//!
//! Checks: no panic; `has_text` is true exactly when some text arrived, so an
//! empty delta (`"content":""`, the role-only first chunk) is never counted as a
//! token; the error names where the payload starts without copying all of it.
#![no_main]

use libfuzzer_sys::fuzz_target;
use sm_client::openai::parse_chunk;

fuzz_target!(|data: &[u8]| {
    match parse_chunk(data) {
        Ok(chunk) => {
            assert_eq!(chunk.has_text, !chunk.text.is_empty(), "has_text disagrees with the text: {chunk:?}");
            assert!(!chunk.has_text || data.trim_ascii_start().starts_with(b"{"), "text from a non-object");
            // Not checked: that an accepted payload is valid JSON. serde_json skips
            // fields it does not read without checking their UTF-8 or number range
            // (fuzzing found `"object":"t\xdfxt"` and `"created":179622e6206`
            // accepted); what the chunk returns is still well-formed.
        }
        Err(e) => {
            // at most 80 bytes, each at most one U+FFFD (3 bytes) when lossy
            assert!(e.start.len() <= 3 * 80, "error copies {} bytes of the payload", e.start.len());
            let _ = e.to_string();
        }
    }
});
