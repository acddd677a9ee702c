//! The page's Methodology section: one line per figure.

/// One line per figure, condensed from docs/methodology.md (§5, §7).
pub const METHODOLOGY: [(&str, &str); 12] = [
    (
        "Prompt tok/s (prefill)",
        "prompt tokens ÷ TTFT of one cold streamed request with max_tokens 1 and the context's exact prompt; client-observed, so it includes HTTP, tokenisation and any queueing.",
    ),
    (
        "TTFT (prefill)",
        "from the instant the request is sent to the arrival of the first chunk carrying content, reasoning or a finish reason.",
    ),
    (
        "Total tok/s",
        "output tokens that arrived inside the measurement window ÷ the window's length: the output of all simultaneous requests together.",
    ),
    (
        "Per request tok/s",
        "median over requests of 1000 ÷ the request's time between tokens: the decode speed one user sees, measured per stream (not total ÷ requests).",
    ),
    (
        "TTFT (decode)",
        "median over the cell's requests whose first token arrived before the window closed, first wave included; the prompt cache is warm, so it measures admission, queueing and the first decode step under load.",
    ),
    (
        "Time between tokens",
        "median over requests of (last − first token-bearing chunk inside the window) ÷ the tokens that arrived after the first of them.",
    ),
    (
        "Average active requests",
        "time-weighted mean over the window of the server's running-requests gauge (sampled every 250 ms); the client's count of streaming requests when the server has no metrics. Well under the requests at once means the server queued some.",
    ),
    (
        "Completed requests",
        "requests whose end arrived inside the window; often 0 at long contexts or many requests, where one request outlasts the window.",
    ),
    (
        "Output tokens",
        "tokens that arrived inside the window, from each stream's running usage.completion_tokens (one per chunk when the server sends no usage).",
    ),
    ("Measured for", "the window's length, fixed by the settings: the denominator of Total tok/s."),
    (
        "Over capacity",
        "requests at once × (context + max output) exceeds the server's KV cache, or the requests exceed its maximum number of sequences; the cell is not run.",
    ),
    (
        "Context",
        "prompt length in binary thousands: 1K = 1,024 tokens; a context trimmed to fit the model is labelled by its fitted size.",
    ),
];
