//! What a level leaves beside its figures: a line per request for `--save-requests`, and the
//! one-line summary of the event log and the console.

use std::time::Instant;

use sm_core::requests::{RequestLine, RequestPhase, RequestStatus, round_s, round_tokens};

use crate::runner::phases::open_loop::{End, Sent};
use crate::stream::tokens::{answer_fields, attribute};

fn secs(t0: Instant, at: Instant) -> f64 {
    round_s(at.saturating_duration_since(t0).as_secs_f64())
}

/// The level's lines, in due order. `concurrency` is the requests in flight when each was sent,
/// itself included (an open-loop level has no fixed concurrency); a request never sent has 1.
pub fn level_lines(phase: RequestPhase, context: u64, requests: &[Sent], t0: Instant) -> Vec<RequestLine> {
    let mut sends: Vec<Instant> = requests.iter().filter_map(|r| Some(r.log.as_ref()?.sent)).collect();
    let mut overs: Vec<Instant> = requests.iter().filter(|r| r.log.is_some()).filter_map(|r| r.over).collect();
    sends.sort();
    overs.sort();
    requests
        .iter()
        .map(|r| {
            let in_flight = r.log.as_ref().map_or(1, |l| {
                let started = sends.partition_point(|&s| s <= l.sent);
                let ended = overs.partition_point(|&o| o <= l.sent);
                started.saturating_sub(ended).max(1)
            });
            line(phase, context, in_flight as u32, r, t0)
        })
        .collect()
}

fn line(phase: RequestPhase, context: u64, concurrency: u32, r: &Sent, t0: Instant) -> RequestLine {
    let status = match r.end {
        End::Completed => RequestStatus::Completed,
        End::Failed(_) | End::Lost(_) => RequestStatus::Failed,
        End::Cancelled | End::Unsent => RequestStatus::Cancelled,
    };
    let reason = match &r.end {
        End::Failed(why) | End::Lost(why) => Some(sm_core::secrets::scrub(why).into_owned()),
        End::Cancelled => Some("cut by the client: still running when the level's wait ran out".to_string()),
        End::Unsent => Some("never sent: the level's wait ran out while it waited for a slot".to_string()),
        _ => None,
    };
    let log = r.log.as_ref();
    let answer = log.map(|l| answer_fields(l, None, |t| secs(t0, t)));
    RequestLine {
        phase,
        context,
        concurrency,
        repeat: None,
        searched: false,
        request_id: log.and_then(|l| l.id.as_deref()).map(|id| sm_core::secrets::scrub(id).into_owned()),
        scheduled_s: secs(t0, r.due),
        // a request never sent has no send time: its due time stands in, and `status` says so
        sent_s: secs(t0, log.map_or(r.due, |l| l.sent)),
        first_token_s: log.and_then(|l| l.first_token).map(|t| secs(t0, t)),
        last_token_s: log.and_then(|l| l.points.last()).map(|p| secs(t0, p.at)),
        ended_s: log.and_then(|l| l.ended).filter(|_| status == RequestStatus::Completed).map(|t| secs(t0, t)),
        output_tokens: round_tokens(
            log.and_then(|l| attribute(&l.points, None).last().map(|&(t, _)| t)).unwrap_or(0.0),
        ),
        window_output_tokens: None,
        in_window: None,
        prompt_tokens: log.and_then(|l| l.prompt_tokens),
        cached_tokens: log.and_then(|l| l.cached_tokens),
        first_answer_s: answer.and_then(|a| a.first_answer_s),
        reasoning_tokens: answer.and_then(|a| a.reasoning_tokens),
        usage_reasoning_tokens: answer.and_then(|a| a.usage_reasoning_tokens),
        tool_call: answer.and_then(|a| a.tool_call),
        status,
        reason,
        retried: log.is_some_and(|l| l.retried),
    }
}
