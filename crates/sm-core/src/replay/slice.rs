//! The replay's clock: each line's timestamp becomes trace time (from the trace's first request),
//! is kept or not by the slice, and becomes a due time (from the first kept request, scaled).
//!
//! The slice is cut before the scale: `--replay-start 10m --replay-duration 5m` names minutes of
//! the recorded trace whatever the speed, so changing `--replay-time-scale` replays the same
//! requests, faster or slower. Timestamps must not go back: the slice's end is only an end, and a
//! due time only an offset, in a sorted trace.

use std::time::Duration;

use super::error::LineError;
use super::options::ReplayOptions;

/// Where a line falls.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Place {
    /// Before the slice's start: skipped.
    Before,
    /// Kept: `trace_at` from the trace's first request, `due` from the first kept one, scaled.
    Kept { trace_at: Duration, due: Duration },
    /// At or past the slice's end: this line and, the trace being sorted, every later one.
    After,
}

/// The clock over one pass through a trace.
#[derive(Debug, Clone)]
pub(super) struct Clock {
    options: ReplayOptions,
    /// The trace's first timestamp, as written.
    first: Option<Duration>,
    /// The latest timestamp as written, and its line.
    previous: Option<(Duration, usize)>,
    /// The trace time of the first kept request: due 0.
    kept_from: Option<Duration>,
}

impl Clock {
    pub(super) fn new(options: ReplayOptions) -> Clock {
        Clock { options, first: None, previous: None, kept_from: None }
    }

    /// Places the line `line` whose timestamp, as written, is `at`.
    pub(super) fn place(&mut self, line: usize, at: Duration) -> Result<Place, LineError> {
        self.check_sorted(line, at)?;
        let first = *self.first.get_or_insert(at);
        let trace_at = at - first;
        if trace_at < self.options.start() {
            return Ok(Place::Before);
        }
        if self.options.end().is_some_and(|end| trace_at >= end) {
            return Ok(Place::After);
        }
        let from = *self.kept_from.get_or_insert(trace_at);
        Ok(Place::Kept { trace_at, due: self.scaled(trace_at - from)? })
    }

    /// Whether a line was placed.
    pub(super) fn started(&self) -> bool {
        self.first.is_some()
    }

    /// Whether a request was kept.
    pub(super) fn kept_any(&self) -> bool {
        self.kept_from.is_some()
    }

    /// The trace time of the last line placed, zero before any.
    pub(super) fn last(&self) -> Duration {
        match (self.previous, self.first) {
            (Some((at, _)), Some(first)) => at - first,
            _ => Duration::ZERO,
        }
    }

    fn check_sorted(&mut self, line: usize, at: Duration) -> Result<(), LineError> {
        if let Some((previous, previous_line)) = self.previous
            && at < previous
        {
            return Err(LineError::Unsorted { at, previous, previous_line });
        }
        self.previous = Some((at, line));
        Ok(())
    }

    fn scaled(&self, since_kept: Duration) -> Result<Duration, LineError> {
        let scale = self.options.time_scale();
        // at speed 1 the offset is exact; a float division would round it to its 53 bits
        if scale == 1.0 {
            return Ok(since_kept);
        }
        Duration::try_from_secs_f64(since_kept.as_secs_f64() / scale).map_err(|_| {
            let why = format!("is too far after the first kept request to replay at --replay-time-scale {scale}");
            LineError::field("timestamp", why)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::replay::options::ReplaySpec;

    fn clock(start: Option<u64>, duration: Option<u64>, time_scale: f64) -> Clock {
        let spec = ReplaySpec {
            start: start.map(Duration::from_secs),
            duration: duration.map(Duration::from_secs),
            time_scale,
            ..Default::default()
        };
        Clock::new(ReplayOptions::resolve(spec).unwrap())
    }

    /// Places timestamps (s, as written) in order, the lines numbered from 1.
    fn places(c: &mut Clock, secs: &[u64]) -> Vec<Place> {
        secs.iter().enumerate().map(|(i, s)| c.place(i + 1, Duration::from_secs(*s)).unwrap()).collect()
    }

    fn kept(trace_at: u64, due_ms: u64) -> Place {
        Place::Kept { trace_at: Duration::from_secs(trace_at), due: Duration::from_millis(due_ms) }
    }

    #[test]
    fn the_whole_trace_is_due_from_its_first_request() {
        let mut c = clock(None, None, 1.0);
        assert_eq!(places(&mut c, &[100, 100, 103]), vec![kept(0, 0), kept(0, 0), kept(3, 3000)]);
        assert_eq!(c.last(), Duration::from_secs(3));
    }

    #[test]
    fn the_slice_is_of_trace_time_and_due_starts_at_its_first_kept_request() {
        // the trace starts at 100: keep trace time [10, 15), the first kept at 12 is due at 0
        let mut c = clock(Some(10), Some(5), 1.0);
        let got = places(&mut c, &[100, 105, 112, 114, 115, 130]);
        let want = vec![Place::Before, Place::Before, kept(12, 0), kept(14, 2000), Place::After, Place::After];
        assert_eq!(got, want);
    }

    #[test]
    fn the_scale_divides_due_times_not_the_slice() {
        // twice as fast: the same requests as at speed 1, due at half the offsets
        let mut c = clock(Some(2), Some(6), 2.0);
        assert_eq!(
            places(&mut c, &[0, 1, 2, 5, 7, 8]),
            vec![Place::Before, Place::Before, kept(2, 0), kept(5, 1500), kept(7, 2500), Place::After]
        );
        let mut c = clock(None, None, 0.5);
        assert_eq!(places(&mut c, &[0, 3]), vec![kept(0, 0), kept(3, 6000)]);
    }

    #[test]
    fn a_timestamp_going_back_names_the_line_before() {
        let mut c = clock(None, None, 1.0);
        places(&mut c, &[5, 7]);
        let e = c.place(3, Duration::from_secs(6)).unwrap_err();
        assert_eq!(
            e,
            LineError::Unsorted { at: Duration::from_secs(6), previous: Duration::from_secs(7), previous_line: 2 }
        );
        assert!(e.to_string().contains("sort the file by timestamp"), "{e}");
        // even before the slice's start: the slice is only right on a sorted trace
        let mut c = clock(Some(100), None, 1.0);
        places(&mut c, &[5]);
        assert!(matches!(c.place(2, Duration::from_secs(4)), Err(LineError::Unsorted { .. })));
    }

    #[test]
    fn a_due_time_past_what_a_duration_holds_is_refused() {
        let mut c = clock(None, None, 1e-300);
        places(&mut c, &[0]);
        let e = c.place(2, Duration::from_secs(10)).unwrap_err().to_string();
        assert!(e.starts_with("\"timestamp\" is too far"), "{e}");
    }
}
