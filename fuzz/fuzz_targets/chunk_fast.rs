//! The measuring fast path (`scan::scan_chunk`) against the reference `parse_chunk`, over
//! arbitrary bytes (one SSE `data:` payload).
//!
//! Checks: no panic; wherever the fast path answers, the reference accepts the payload and gives
//! exactly the same chunk (the fast path may decline anything, never differ); `read_chunk` is the
//! reference's answer either way.
#![no_main]

use libfuzzer_sys::fuzz_target;
use sm_client::openai::parse_chunk;
use sm_client::scan::{read_chunk, scan_chunk};

fuzz_target!(|data: &[u8]| {
    let reference = parse_chunk(data);
    if let Some(fast) = scan_chunk(data) {
        match &reference {
            Ok(r) => assert_eq!(&fast.into_owned(), r, "the fast path differs from the reference"),
            Err(e) => panic!("the fast path accepted what the reference rejects: {e}"),
        }
    }
    match (read_chunk(data), reference) {
        (Ok(got), Ok(want)) => assert_eq!(got.into_owned(), want),
        (Err(got), Err(want)) => assert_eq!(got.to_string(), want.to_string()),
        (got, want) => panic!("read_chunk {got:?}, the reference {want:?}"),
    }
});
