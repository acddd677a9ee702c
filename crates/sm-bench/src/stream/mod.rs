//! One streamed request and what it saw: the request loop (`request`), its chunk-by-chunk log
//! (`request_log`), which tokens each chunk carried (`tokens`), the exact-repetition guard
//! (`loopguard`), the cancel a stream polls (`cancel`), what a cell's streams share while they run
//! (`live`), a cell's streams (`streams`) and the prefill scout (`scout`).

pub(crate) mod cancel;
pub(crate) mod live;
pub(crate) mod loopguard;
pub(crate) mod request;
pub(crate) mod request_log;
pub(crate) mod scout;
pub(crate) mod streams;
pub(crate) mod tokens;
