//! The built-in seed profile against the published page it was derived from
//! (tests/data/reference: the published page and its result file): every valid decode cell's time between tokens
//! is the profile's step at that batch and context, every prefill rate is the profile's, and the KV
//! size fits exactly the cells the page measured.

use std::path::Path;

use sm_core::Tokens;
use sm_core::capacity::{CapacityRule, kv_need};
use sm_core::record::CellStatus;
use sm_sim::Profile;

const PAGE: &str = "../../tests/data/reference/ling-3.0-flash-int4-2xh200nvl.lil-bench-result.json";

#[test]
fn seed_profile_reproduces_the_reference_page() {
    let page = sm_report::load_any(&Path::new(env!("CARGO_MANIFEST_DIR")).join(PAGE)).expect("reference page");
    let p = Profile::builtin("seed-ling-3.0-flash-h200nvl-x2").unwrap();
    let max_tokens = Tokens(page.settings.max_tokens);
    assert_eq!(max_tokens, Tokens(4096), "the page's output length");

    let (mut valid, mut over) = (0, 0);
    for c in &page.decode {
        let need = kv_need(CapacityRule::Reference, Tokens(c.context), max_tokens, c.concurrency, Some(p.block_size));
        let cell = format!("{} × {}", c.concurrency, c.context);
        match c.status() {
            CellStatus::Valid => {
                valid += 1;
                let tbt = c.tbt_ms_p50.unwrap_or_else(|| panic!("{cell}: no TBT p50"));
                let step = p.step_ms(f64::from(c.concurrency), c.context as f64);
                assert!((tbt - step).abs() < 1e-6, "{cell}: page TBT p50 {tbt} ms, profile step {step} ms");
                assert!(need.0 <= p.kv_cache_tokens, "{cell} needs {need:?} KV tokens: must fit the profile");
            }
            CellStatus::OverCapacity => {
                over += 1;
                assert!(need.0 > p.kv_cache_tokens, "{cell} needs {need:?} KV tokens: must not fit the profile");
            }
            other => panic!("{cell}: unexpected status {other:?}"),
        }
    }
    assert_eq!((valid, over), (45, 3), "the page's 48 cells");

    assert_eq!(page.prefill.len(), p.prefill.contexts.len());
    for row in &page.prefill {
        let rate = row.prompt_tok_s.unwrap_or_else(|| panic!("prefill {}: no rate", row.context));
        let want = p.prefill_tokens_per_s(row.context as f64);
        assert!((rate - want).abs() < 1e-6, "prefill {}: page {rate} tok/s, profile {want}", row.context);
    }
}
