//! Steering a run through the Controls API, at the exact steps where a key used to be lost:
//! `q` during a prefill row or before the hidden warm-up, `s` during a cell's scout.

use std::time::Duration;

use sm_bench::CellTiming;
use sm_bench::Journal;
use sm_bench::{ControlHandle, Reporter, RunSettings, RunStart, Step};
use sm_client::Client;
use sm_client::discover::{self, Overrides};
use sm_core::Tokens;
use sm_core::record::{CellStatus, RunRecord, RunStatus};

/// Calls `on_step` with the handle on every step, as a dashboard key press would arrive.
struct Steer<F> {
    handle: ControlHandle,
    on_step: F,
}

impl<F: Fn(&Step, &ControlHandle) + Send + Sync> Reporter for Steer<F> {
    fn step(&self, step: &Step) {
        (self.on_step)(step, &self.handle);
    }
}

fn config(contexts: &[u64], concurrency: &[u32], warmup: Option<Duration>) -> RunSettings {
    RunSettings {
        contexts: contexts.iter().map(|&k| Tokens(k * 1024)).collect(),
        concurrency: concurrency.to_vec(),
        max_tokens: Tokens(512),
        prefill_at_max: false,
        timing: CellTiming {
            duration: Duration::from_secs(1),
            ready_stable: Duration::from_millis(300),
            ..CellTiming::default()
        },
        warmup,
        server_wait: Duration::from_secs(30),
        idle_gap: Duration::from_millis(100),
        ..RunSettings::default()
    }
}

/// Runs `config` against a fresh tiny simulated engine, steered by `on_step`.
async fn steered_run(config: RunSettings, on_step: impl Fn(&Step, &ControlHandle) + Send + Sync) -> RunRecord {
    let sim = sm_sim::start(sm_sim::SimOptions::new(sm_sim::Profile::builtin("tiny").unwrap())).await.unwrap();
    let client = Client::new(&sim.url(), None, 8).unwrap();
    let facts = discover::discover(&client, &Overrides::default()).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let journal = Journal::create(dir.path()).unwrap();
    let (handle, controls) = sm_bench::controls();
    let reporter = Steer { handle, on_step };
    let record = sm_bench::run(client, facts, config, start(), journal, &reporter, controls).await.unwrap();
    sim.shutdown().await;
    let written: RunRecord =
        serde_json::from_str(&std::fs::read_to_string(dir.path().join("run.json")).unwrap()).unwrap();
    assert_eq!(written, record, "run.json holds the final record");
    record
}

fn start() -> RunStart {
    RunStart { tool_version: "test".into(), ..RunStart::default() }
}

fn events(record: &RunRecord) -> String {
    record.events.iter().map(|e| e.text.as_str()).collect::<Vec<_>>().join("\n")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn finish_during_a_prefill_row_stops_after_that_row() {
    let config = config(&[1, 2], &[1], Some(Duration::from_secs(1)));
    let record = steered_run(config, |step, handle| {
        if matches!(step, Step::Prefill { index: 1, .. }) {
            handle.finish_after_cell();
        }
    })
    .await;
    assert_eq!(record.status, RunStatus::Interrupted, "{}", events(&record));
    let rows: Vec<_> = record.prefill.iter().map(|r| (r.context, r.status)).collect();
    assert_eq!(rows, [(1024, CellStatus::Valid)], "the row in progress finishes, no other starts");
    assert!(record.decode.is_empty(), "no cell ran: {:?}", record.decode);
    assert!(!events(&record).contains("decode warm-up"), "{}", events(&record));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn finish_during_the_last_prefill_row_skips_the_hidden_warmup() {
    let config = config(&[1], &[1], Some(Duration::from_secs(1)));
    let record = steered_run(config, |step, handle| {
        if matches!(step, Step::Prefill { index, total, .. } if index == total) {
            handle.finish_after_cell();
        }
    })
    .await;
    assert_eq!(record.status, RunStatus::Interrupted, "{}", events(&record));
    assert_eq!(record.prefill.len(), 1);
    assert!(record.decode.is_empty(), "no cell ran: {:?}", record.decode);
    assert!(!events(&record).contains("decode warm-up"), "the warm-up cell started:\n{}", events(&record));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn skip_during_the_scout_skips_that_cell_only() {
    let config = config(&[1], &[1, 2], None);
    let record = steered_run(config, |step, handle| {
        if matches!(step, Step::Scout { concurrency: 2, .. }) {
            handle.skip_cell();
        }
    })
    .await;
    assert_eq!(record.status, RunStatus::Complete, "{}", events(&record));
    let c1 = record.decode_cell(1024, 1).expect("1K × 1");
    let c2 = record.decode_cell(1024, 2).expect("1K × 2");
    assert_eq!(c1.status(), CellStatus::Valid, "{:?}", c1.reason);
    assert_eq!(c2.status(), CellStatus::Skipped, "the skip pressed during the scout was lost");
    assert_eq!(c2.reason.as_deref(), Some("skipped by the user"));
}
