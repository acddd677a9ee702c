//! The replay's options in two shapes, as the run's settings are: what was asked ([`ReplaySpec`],
//! the flags' values) and what the reader works from ([`ReplayOptions`]), checked once and not
//! changed afterwards, so the reader never meets a scale of 0 or a block of 0 tokens.

use std::time::Duration;

use super::format::ReplayFormat;

/// Tokens a Mooncake hash id stands for when the trace does not say (the published traces' size).
pub const DEFAULT_BLOCK_TOKENS: u32 = 512;

/// The options as given (`--replay-format`, `--replay-block-tokens`, `--replay-time-scale`,
/// `--replay-start`, `--replay-duration`), before they are checked.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ReplaySpec {
    /// `None`: told from the trace's first line.
    pub format: Option<ReplayFormat>,
    pub block_tokens: u32,
    /// 2.0 replays twice as fast: a request due `t` into the trace is sent at `t / 2`.
    pub time_scale: f64,
    /// Keep the requests from this far after the trace's first one (trace time, before the scale).
    pub start: Option<Duration>,
    /// Keep the requests before `start` + this (trace time, before the scale).
    pub duration: Option<Duration>,
}

impl Default for ReplaySpec {
    fn default() -> Self {
        ReplaySpec { format: None, block_tokens: DEFAULT_BLOCK_TOKENS, time_scale: 1.0, start: None, duration: None }
    }
}

/// Why the options were refused; each says what to give instead.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum OptionsError {
    #[error(
        "--replay-time-scale {0} is not a speed: give a number above 0 (2 replays twice as fast, 0.5 at half speed)"
    )]
    TimeScale(f64),
    #[error("--replay-block-tokens must be at least 1: the tokens each Mooncake hash id stands for (512 by default)")]
    BlockTokens,
    #[error("--replay-duration must be above 0: the length of trace to replay from --replay-start (e.g. 10m)")]
    Duration,
}

/// The checked options the reader works from.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ReplayOptions {
    format: Option<ReplayFormat>,
    block_tokens: u32,
    time_scale: f64,
    start: Option<Duration>,
    duration: Option<Duration>,
}

impl ReplayOptions {
    /// Checks the options as given.
    pub fn resolve(spec: ReplaySpec) -> Result<ReplayOptions, OptionsError> {
        if !(spec.time_scale.is_finite() && spec.time_scale > 0.0) {
            return Err(OptionsError::TimeScale(spec.time_scale));
        }
        if spec.block_tokens == 0 {
            return Err(OptionsError::BlockTokens);
        }
        if spec.duration == Some(Duration::ZERO) {
            return Err(OptionsError::Duration);
        }
        let ReplaySpec { format, block_tokens, time_scale, start, duration } = spec;
        Ok(ReplayOptions { format, block_tokens, time_scale, start, duration })
    }

    /// The format given, `None` when it is told from the first line.
    pub fn format(&self) -> Option<ReplayFormat> {
        self.format
    }

    pub fn block_tokens(&self) -> u32 {
        self.block_tokens
    }

    pub fn time_scale(&self) -> f64 {
        self.time_scale
    }

    /// Where the slice starts, after the trace's first request (trace time); zero when not given.
    pub fn start(&self) -> Duration {
        self.start.unwrap_or_default()
    }

    /// Where the slice ends, after the trace's first request (trace time); `None`: at its end.
    pub fn end(&self) -> Option<Duration> {
        self.duration.map(|d| self.start().saturating_add(d))
    }

    pub fn duration(&self) -> Option<Duration> {
        self.duration
    }
}

impl Default for ReplayOptions {
    fn default() -> Self {
        ReplayOptions::resolve(ReplaySpec::default()).expect("the defaults are valid")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_defaults_replay_the_whole_trace_at_its_speed() {
        let o = ReplayOptions::default();
        assert_eq!((o.format(), o.block_tokens(), o.time_scale()), (None, 512, 1.0));
        assert_eq!((o.start(), o.end()), (Duration::ZERO, None));
    }

    #[test]
    fn the_slice_ends_at_start_plus_duration() {
        let spec = ReplaySpec {
            start: Some(Duration::from_secs(60)),
            duration: Some(Duration::from_secs(30)),
            ..Default::default()
        };
        let o = ReplayOptions::resolve(spec).unwrap();
        assert_eq!((o.start(), o.end()), (Duration::from_secs(60), Some(Duration::from_secs(90))));
        let o = ReplayOptions::resolve(ReplaySpec { duration: Some(Duration::from_secs(5)), ..Default::default() })
            .unwrap();
        assert_eq!(o.end(), Some(Duration::from_secs(5)));
    }

    #[test]
    fn bad_options_are_refused_with_what_to_give() {
        for scale in [0.0, -1.0, f64::NAN, f64::INFINITY] {
            let e = ReplayOptions::resolve(ReplaySpec { time_scale: scale, ..Default::default() }).unwrap_err();
            assert!(matches!(e, OptionsError::TimeScale(_)), "{scale}");
            assert!(e.to_string().contains("above 0"), "{e}");
        }
        let e = ReplayOptions::resolve(ReplaySpec { block_tokens: 0, ..Default::default() }).unwrap_err();
        assert_eq!(e, OptionsError::BlockTokens);
        assert!(e.to_string().contains("at least 1"));
        let e =
            ReplayOptions::resolve(ReplaySpec { duration: Some(Duration::ZERO), ..Default::default() }).unwrap_err();
        assert_eq!(e, OptionsError::Duration);
        assert!(ReplayOptions::resolve(ReplaySpec { time_scale: 0.001, ..Default::default() }).is_ok());
    }
}
