//! Every fault of the simulated engine in every phase of a run: the warm-up, a prefill row, a cell's
//! cache-warming scout, readiness (a cell's first C requests) and the window (the requests after
//! them). Scoped sim faults (`SPEC@prompt=…`) aim each fault at one phase through the prompt's tag;
//! the phased run puts each phase on its own context, so one run per fault covers four phases and
//! a last, clean cell shows that the run goes on.

use crate::common::{RunResult, SimSpec, run, sim};
use serde_json::Value;

/// One fault and what it should do to the phase it hits.
struct Row {
    /// The fault in the streams of decode requests (readiness, window, the warm-up cell).
    stream: &'static str,
    /// The fault in scouts and the warm-up request: one output token (sixteen for the warm-up) ends
    /// before a token fault at N > 0 would fire, so those fire at 0.
    short: &'static str,
    /// A failed scout's reason contains this; `None`: a scout is unharmed.
    scout_fails: Option<&'static str>,
    /// `(status, phrase of the reason)` of a cell whose streams meet the fault; `None`: still valid.
    stream_fails: Option<(&'static str, &'static str)>,
    /// A valid cell hit in its streams carries a warning with this phrase.
    warning: Option<&'static str>,
    /// `--max-tokens` and `--duration`: long enough that the window's requests (the third onwards)
    /// meet the fault, and its failure is seen, before the window closes.
    max_tokens: &'static str,
    duration: &'static str,
    /// A fault for every request of the run besides.
    everywhere: Option<&'static str>,
}

const fn row(stream: &'static str, short: &'static str) -> Row {
    Row {
        stream,
        short,
        scout_fails: None,
        stream_fails: None,
        warning: None,
        max_tokens: "256",
        duration: "1s",
        everywhere: None,
    }
}

fn rows() -> Vec<Row> {
    let fails = |stream, short, phrase| Row {
        scout_fails: Some(phrase),
        stream_fails: Some(("error", phrase)),
        ..row(stream, short)
    };
    vec![
        fails("status=429", "status=429", "HTTP 429 Too Many Requests"),
        fails("status=500", "status=500", "HTTP 500 Internal Server Error"),
        fails("status=503", "status=503", "HTTP 503 Service Unavailable"),
        fails("disconnect-after=5", "disconnect-after=0", "connection broke"),
        fails("malformed-sse", "malformed-sse", "malformed stream event"),
        // the window must outlast the third request's start plus the 1 s stall timeout
        Row { duration: "2s", ..fails("stall-after=5", "stall-after=0", "stalled") },
        Row { warning: Some("counted from chunks"), ..row("no-usage", "no-usage") },
        row("multi-token=4", "multi-token=4"),
        // a loop shows after about 1,200 tokens (4,096 characters), so one request must be longer;
        // four tokens per chunk everywhere make such requests short enough for a short window
        Row {
            stream_fails: Some(("loop", "repeated the same")),
            max_tokens: "2048",
            duration: "2s",
            everywhere: Some("multi-token=4"),
            ..row("loop", "loop")
        },
        row("slow-first-token=400", "slow-first-token=400"),
    ]
}

/// The tag of a context's measured prompt, as the sim sees it (`[sm RUNID m0000001024]`).
fn measured(ctx: u64) -> String {
    format!(" m{ctx:010}]")
}

const BASE: &[&str] = &[
    "--ready-stable",
    "300ms",
    "--no-prefill-at-max",
    // bounds a scout's wait for its first token: a stalled scout gives up after it
    "--ready-timeout",
    "2s",
    "--stall-timeout",
    "1s",
];

async fn run_with(faults: &[String], args: &[&str]) -> RunResult {
    let specs: Vec<&str> = faults.iter().map(String::as_str).filter(|f| !f.is_empty()).collect();
    let sim = sim(SimSpec { faults: &specs, ..SimSpec::default() }).await;
    let url = sim.handle.url();
    let dir = tempfile::tempdir().unwrap();
    let mut all = vec!["--url", url.as_str()];
    all.extend_from_slice(args);
    let r = run(dir.path(), &all).await;
    assert_eq!(crate::common::scheduler(&url).await, (0.0, 0.0), "{faults:?}: the server is idle after the run");
    sim.handle.shutdown().await;
    r
}

/// Contexts: 1K = a cell's scout, 2K = readiness, 3K = the window, 4K = clean; 5K is a prefill row only.
async fn phased_run(row: &Row) -> RunResult {
    let mt = row.max_tokens;
    let faults = [
        row.everywhere.unwrap_or("").to_string(),
        format!("{}@prompt={},max-tokens=1", row.short, measured(5120)),
        // the 1K prompt's first scout is its prefill row; the second warms the cache for 1K × 2
        format!("{}@prompt={},max-tokens=1,from=2", row.short, measured(1024)),
        format!("{}@prompt={},max-tokens={mt},to=2", row.stream, measured(2048)),
        format!("{}@prompt={},max-tokens={mt},from=3", row.stream, measured(3072)),
    ];
    let mut args =
        vec!["--contexts", "1k,2k,3k,4k", "--concurrency", "2", "--prefill-contexts", "5k", "--warmup", "0s"];
    args.extend_from_slice(&["--max-tokens", mt, "--duration", row.duration]);
    args.extend_from_slice(BASE);
    run_with(&faults, &args).await
}

/// The warm-up request and the hidden warm-up cell at 1K × 1 (whose window is `--warmup`), then
/// one clean cell.
async fn warmup_run(row: &Row) -> RunResult {
    let faults = [
        row.everywhere.unwrap_or("").to_string(),
        format!("{}@prompt= w0000000000]", row.short),
        format!("{}@prompt= w0000001024]", row.stream),
    ];
    let (mt, d) = (row.max_tokens, row.duration);
    let mut args = vec!["--contexts", "1k", "--concurrency", "1", "--warmup", d, "--max-tokens", mt, "--duration", d];
    args.extend_from_slice(BASE);
    run_with(&faults, &args).await
}

fn prefill(r: &RunResult, ctx: u64) -> &Value {
    r.record()["prefill"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["context"] == ctx)
        .unwrap_or_else(|| panic!("no prefill row {ctx}; stderr:\n{}", r.stderr))
}

fn reason(v: &Value) -> &str {
    v["reason"].as_str().unwrap_or("")
}

fn assert_valid(what: &str, v: &Value) {
    assert_eq!(v["status"], "valid", "{what}: {v}");
}

fn assert_valid_prefill(what: &str, v: &Value) {
    assert_valid(what, v);
    assert!(v["prompt_tok_s"].as_f64().is_some_and(|t| t > 0.0), "{what}: a valid row has its number: {v}");
    assert!(v["prompt_tokens"].as_u64().is_some_and(|t| t > 0), "{what}: {v}");
}

fn assert_invalid(what: &str, v: &Value, status: &str, phrases: &[&str]) {
    assert_eq!(v["status"], status, "{what}: {v}");
    for p in phrases {
        assert!(reason(v).contains(p), "{what}: the reason {:?} should say {p:?}", reason(v));
    }
    for key in ["total_tok_s", "prompt_tok_s"] {
        assert!(v[key].is_null(), "{what}: an invalid entry carries no number: {v}");
    }
}

fn check_phased(row: &Row, r: &RunResult) {
    let name = row.stream;
    let stream_cell = |ctx: u64, phase: &str| {
        let what = format!("{name} in {phase}");
        let cell = r.cell(ctx, 2);
        match row.stream_fails {
            Some((status, phrase)) => assert_invalid(&what, cell, status, &[phrase]),
            None => {
                assert_valid(&what, cell);
                if let Some(w) = row.warning {
                    assert!(cell["warnings"].to_string().contains(w), "{what}: a warning says {w:?}: {cell}");
                }
            }
        }
    };
    match row.scout_fails {
        Some(phrase) => {
            assert_invalid(&format!("{name} in the prefill row"), prefill(r, 5120), "error", &[phrase]);
            assert_invalid(&format!("{name} in a cell's scout"), r.cell(1024, 2), "error", &["scout", phrase]);
        }
        None => {
            assert_valid_prefill(&format!("{name} in the prefill row"), prefill(r, 5120));
            assert_valid(&format!("{name} in a cell's scout"), r.cell(1024, 2));
        }
    }
    stream_cell(2048, "readiness");
    stream_cell(3072, "the window");
    assert_valid(&format!("{name}: the clean cell after the others"), r.cell(4096, 2));
    for ctx in [1024, 2048, 3072, 4096] {
        assert_valid_prefill(&format!("{name}: prefill {ctx}"), prefill(r, ctx));
    }
    let any_fails = row.scout_fails.is_some() || row.stream_fails.is_some();
    assert_eq!(r.code, if any_fails { 2 } else { 0 }, "{name}: exit code; stderr:\n{}", r.stderr);
    assert_eq!(r.record()["status"], "complete", "{name}");
}

fn check_warmup(row: &Row, r: &RunResult) {
    let name = row.stream;
    assert_eq!(r.code, 0, "{name} in the warm-up: the run measures as usual; stderr:\n{}", r.stderr);
    assert_valid_prefill(&format!("{name} in the warm-up: prefill"), prefill(r, 1024));
    let cell = r.cell(1024, 1);
    assert_valid(&format!("{name} in the warm-up: the first cell"), cell);
    let events: Vec<&str> =
        r.record()["events"].as_array().unwrap().iter().filter_map(|e| e["text"].as_str()).collect();
    let said = |phrase: &str| events.iter().any(|e| e.contains("warm-up") && e.contains(phrase));
    if let Some(phrase) = row.scout_fails {
        assert!(said(phrase), "{name}: an event says the warm-up request failed and why: {events:#?}");
    }
    if let Some((_, phrase)) = row.stream_fails {
        assert!(said(phrase), "{name}: an event says the decode warm-up failed and why: {events:#?}");
        assert!(cell["warnings"].to_string().contains("warm-up"), "{name}: the first cell says so: {cell}");
    }
}

/// Runs `f` over the rows, `at_once` at a time.
async fn each_row<F, Fut>(at_once: usize, f: F)
where
    F: Fn(Row) -> Fut,
    Fut: std::future::Future<Output = ()> + Send + 'static,
{
    let mut rows = rows().into_iter();
    loop {
        let batch: Vec<_> = rows.by_ref().take(at_once).map(|r| tokio::spawn(f(r))).collect();
        if batch.is_empty() {
            break;
        }
        for task in batch {
            if let Err(e) = task.await {
                std::panic::resume_unwind(e.into_panic());
            }
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_fault_in_a_prefill_row_a_scout_readiness_and_the_window() {
    each_row(2, |row| async move {
        let r = phased_run(&row).await;
        check_phased(&row, &r);
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_fault_in_the_warm_up() {
    each_row(2, |row| async move {
        let r = warmup_run(&row).await;
        check_warmup(&row, &r);
    })
    .await;
}
