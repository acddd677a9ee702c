//! `sm_report::import_str` over arbitrary text (a reference-tool file or a run.json).
//!
//! Checks: no panic; an accepted file becomes a record that is itself a valid
//! `run.json` (serialise, import again, same cells); every view of the imported
//! record renders (HTML, Markdown, CSV, terminal), since `speedmatrix import`
//! renders what it imports.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let Ok(record) = sm_report::import_str(&text) else {
        return;
    };
    let json = serde_json::to_string(&record).expect("a record serialises");
    let again = sm_report::import_str(&json).expect("an imported record is a valid run.json");
    assert_eq!(again.decode.len(), record.decode.len());
    assert_eq!(again.prefill.len(), record.prefill.len());
    assert_eq!(again.plan.len(), record.plan.len());
    let _ = sm_report::html_page(&record, &[]);
    let _ = sm_report::markdown(&record);
    let _ = sm_report::csv(&record);
    let _ = sm_report::terminal(&record, 100);
});
