use super::*;
use crate::ranks::wire::WireLog;
use crate::stream::request_log::Point;

/// A request sent at `sent` ms from `base`, first token at `first`, one token every `step` ms.
fn steady(base: Instant, sent: u64, first: u64, step: u64, n: u64) -> RequestLog {
    let ms = |m: u64| base + Duration::from_millis(m);
    let mut log = RequestLog::new(ms(sent));
    log.first_token = Some(ms(first));
    log.points = (0..n).map(|i| Point { at: ms(first + i * step), chunks: i + 1, usage: Some(i + 1) }).collect();
    log
}

/// A worker's report of `logs`, timed on a clock whose window opened at `opened`.
fn report(rank: u32, logs: &[RequestLog], opened: Instant) -> PeerOutcome {
    let logs = logs.iter().map(|l| WireLog::from_log(l, opened)).collect();
    let report = RankReport { opened: true, window_s: 1.0, logs, lag_ms_p99: Some(0.5), cpu_pct: Some(7.0) };
    PeerOutcome { rank, streams: 2, report, rtt: Some(Duration::from_micros(300)) }
}

#[test]
fn merging_the_ranks_is_measuring_all_their_requests_on_one_clock() {
    let b = Instant::now();
    let window = Window { start: b + Duration::from_millis(500), end: b + Duration::from_millis(1500) };
    // six streams of different speeds and TTFTs: two on each rank
    let all: Vec<RequestLog> = (0..6).map(|i| steady(b, 0, 40 + 10 * i, 8 + i, 220)).collect();
    let one_process = figures(&all, window, &[], ChunkRatio::of_logs(&all));
    // the workers' clocks are elsewhere: each times its requests from its own window's open
    let there = b + Duration::from_secs(1000);
    let moved = |logs: &[RequestLog]| -> Vec<RequestLog> {
        logs.iter().map(|l| WireLog::from_log(l, window.start).to_log(there)).collect()
    };
    let workers = vec![report(1, &moved(&all[2..4]), there), report(2, &moved(&all[4..6]), there)];
    let (merged, ranks) = merge(all[..2].to_vec(), 2, workers, window);
    let f = figures(&merged, window, &[], ChunkRatio::of_logs(&merged));
    assert_eq!(f.output_tokens, one_process.output_tokens);
    assert_eq!(f.ttft_ms, one_process.ttft_ms);
    assert_eq!(f.tbt_ms, one_process.tbt_ms);
    assert_eq!(f.per_request_tok_s, one_process.per_request_tok_s);
    assert_eq!(f.chunk_gap_ms, one_process.chunk_gap_ms);
    assert_eq!(ranks.iter().map(|r| r.rank).collect::<Vec<_>>(), [0, 1, 2]);
    assert_eq!(ranks.iter().map(|r| r.output_tokens.unwrap()).sum::<u64>(), f.output_tokens);
    assert!(ranks.iter().all(|r| r.output_tokens.unwrap() > 0 && r.requests == Some(2)), "{ranks:?}");
    assert_eq!(ranks[0].open_rtt_ms, None);
    assert_eq!(ranks[1].open_rtt_ms, Some(0.3));
    assert_eq!(ranks[2].client_cpu_pct, Some(7.0));
}
