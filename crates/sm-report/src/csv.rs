//! One CSV row per measurement: the All-measurements columns as the page
//! prints them, then every numeric field of the record unformatted, so a
//! spreadsheet can both show the page and compute with it.

use sm_core::record::{CellStatus, DecodeCell, PrefillRow, RunRecord, TokenSource};

use crate::view;

const RAW: [&str; 24] = [
    "context_tokens",
    "concurrency",
    "status",
    "reason",
    "prompt_tokens",
    "prompt_tok_s",
    "ttft_ms",
    "cached_tokens",
    "total_tok_s",
    "per_request_tok_s",
    "ttft_ms_p50",
    "ttft_ms_p90",
    "ttft_ms_p99",
    "tbt_ms_p50",
    "tbt_ms_p90",
    "tbt_ms_p99",
    "chunk_gap_ms_p50",
    "chunk_gap_ms_p99",
    "avg_active",
    "completed",
    "output_tokens",
    "measured_s",
    "requests",
    "kv_need_tokens",
];

fn field(s: &str) -> String {
    // a leading = + - @ makes spreadsheets evaluate text as a formula
    let s =
        if s.starts_with(['=', '+', '@', '-']) && s.parse::<f64>().is_err() { format!("'{s}") } else { s.to_string() };
    if s.contains([',', '"', '\n', '\r']) { format!("\"{}\"", s.replace('"', "\"\"")) } else { s }
}

fn f(v: Option<f64>) -> String {
    v.map(|x| x.to_string()).unwrap_or_default()
}

fn n(v: Option<u64>) -> String {
    v.map(|x| x.to_string()).unwrap_or_default()
}

fn status_code(s: CellStatus) -> &'static str {
    match s {
        CellStatus::Valid => "valid",
        CellStatus::OverCapacity => "over_capacity",
        CellStatus::Error => "error",
        CellStatus::Loop => "loop",
        CellStatus::Skipped => "skipped",
    }
}

fn prefill_raw(p: &PrefillRow) -> Vec<String> {
    let mut v = vec![
        p.context.to_string(),
        "1".into(),
        status_code(p.status).into(),
        p.reason.clone().unwrap_or_default(),
        n(p.prompt_tokens),
        f(p.prompt_tok_s),
        f(p.ttft_ms),
        n(p.cached_tokens),
    ];
    v.resize(RAW.len() + 1, String::new());
    v
}

fn decode_raw(c: &DecodeCell) -> Vec<String> {
    let token_source = match c.token_source {
        Some(TokenSource::Usage) => "usage",
        Some(TokenSource::UsageAtEnd) => "usage_at_end",
        Some(TokenSource::Chunks) => "chunks",
        None => "",
    };
    vec![
        c.context.to_string(),
        c.concurrency.to_string(),
        status_code(c.status()).into(),
        c.reason.clone().unwrap_or_default(),
        String::new(),
        String::new(),
        String::new(),
        String::new(),
        f(c.total_tok_s),
        f(c.per_request_tok_s),
        f(c.ttft_ms_p50),
        f(c.ttft_ms_p90),
        f(c.ttft_ms_p99),
        f(c.tbt_ms_p50),
        f(c.tbt_ms_p90),
        f(c.tbt_ms_p99),
        f(c.chunk_gap_ms_p50),
        f(c.chunk_gap_ms_p99),
        f(c.avg_active),
        n(c.completed),
        n(c.output_tokens),
        f(c.measured_s),
        n(c.requests),
        n(c.kv_need_tokens),
        token_source.into(),
    ]
}

pub fn csv(record: &RunRecord) -> String {
    let page = view::build(record);
    let mut out = String::new();
    let header: Vec<&str> = view::COLUMNS.iter().chain(RAW.iter()).copied().chain(["token_source"]).collect();
    out.push_str(&header.iter().map(|h| field(h)).collect::<Vec<_>>().join(","));
    out.push_str("\r\n");
    let mut prefill: Vec<&PrefillRow> = record.prefill.iter().collect();
    prefill.sort_by_key(|p| p.context);
    let raws =
        prefill.into_iter().map(prefill_raw).chain(page.matrix.rows.iter().enumerate().flat_map(|(ri, (ctx, _))| {
            let page = &page;
            page.matrix.cols.iter().enumerate().filter_map(move |(ci, &c)| {
                if page.matrix.cells[ri][ci].kind == view::CellKind::NotMeasured {
                    return None;
                }
                record.decode_cell(*ctx, c).map(decode_raw).or_else(|| {
                    // over capacity by plan only: no decode entry to read
                    let mut v = vec![ctx.to_string(), c.to_string(), "over_capacity".into()];
                    v.push(page.matrix.cells[ri][ci].reason.clone().unwrap_or_default());
                    v.resize(RAW.len() + 1, String::new());
                    Some(v)
                })
            })
        }));
    for (shown, raw) in page.measurements.iter().zip(raws) {
        let line: Vec<String> = shown.iter().chain(raw.iter()).map(|v| field(v)).collect();
        out.push_str(&line.join(","));
        out.push_str("\r\n");
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quoting() {
        assert_eq!(field("1,156 ms"), "\"1,156 ms\"");
        assert_eq!(field("say \"hi\""), "\"say \"\"hi\"\"\"");
        assert_eq!(field("=cmd()"), "'=cmd()");
        assert_eq!(field("-1.5"), "-1.5");
        assert_eq!(field("plain"), "plain");
    }
}
