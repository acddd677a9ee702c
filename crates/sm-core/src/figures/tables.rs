//! The figure table of each record section. A figure's entry sits here, its field in the record
//! type, its pure function where the runner measures it, its paragraph in docs/methodology.md.
//! Each table is in the order its CSV file writes the figures (where the file has them).

use super::{Carried, Figure, Figures, Unit, count};
use crate::capacity_answer::Capacity;
use crate::phases::burst::Burst;
use crate::phases::mixed::{MixedLevel, MixedProbe};
use crate::phases::rate::RateLevel;
use crate::phases::sessions::{SessionTurn, SessionsSummary, TurnFigures};
use crate::record::{CellStatus, DecodeCell, Percentiles, PrefillRow};

/// A column heading, or none: the figure is not in the page's table.
macro_rules! label {
    () => {
        None
    };
    ($label:literal) => {
        Some($label)
    };
}

/// A figure read straight from the section's field of the same name (an `Option<f64>`), with
/// the page's heading of its column if the page shows it.
macro_rules! field {
    ($name:ident, $unit:ident, $carried:ident $(, $label:literal)?) => {
        Figure {
            name: stringify!($name),
            label: label!($($label)?),
            unit: Unit::$unit,
            carried: Carried::$carried,
            value: |s| s.$name,
        }
    };
}

/// A figure every section holds: read from its plain `f64` field of the same name.
macro_rules! held {
    ($name:ident, $unit:ident) => {
        Figure {
            name: stringify!($name),
            label: None,
            unit: Unit::$unit,
            carried: Carried::Always,
            value: |s| Some(s.$name),
        }
    };
}

/// A count read from the section's `Option<u64>` field of the same name.
macro_rules! counted {
    ($name:ident, $unit:ident, $carried:ident $(, $label:literal)?) => {
        Figure {
            name: stringify!($name),
            label: label!($($label)?),
            unit: Unit::$unit,
            carried: Carried::$carried,
            value: |s| count(s.$name),
        }
    };
}

/// A percentile of one of the section's distributions: `quantile!(ttft_ms.p90, …)` reads p90 of
/// the field `ttft_ms` (a [`Percentiles`], or an `Option` of one), and is named like the key the
/// flat sections write, `ttft_ms_p90`.
macro_rules! quantile {
    ($field:ident . $q:ident, $unit:ident, $carried:ident $(, $label:literal)?) => {
        Figure {
            name: concat!(stringify!($field), "_", stringify!($q)),
            label: label!($($label)?),
            unit: Unit::$unit,
            carried: Carried::$carried,
            value: |s| Option::<Percentiles>::from(s.$field).and_then(|p| p.$q),
        }
    };
}

/// A figure of one of the section's flattened parts (`thinking`, `tool_calls`: the keys sit in the
/// section's own object, so the figure is named as a field of the section is):
/// `within!(thinking: ttfa_ms.p50, …)` reads p50 of `thinking.ttfa_ms`, named `ttfa_ms_p50`;
/// `within!(thinking: reasoning_tokens_mean, …)` reads that `Option<f64>`; `within!(thinking:
/// count no_answer, …)` that `Option<u64>`.
macro_rules! within {
    ($part:ident : $field:ident . $q:ident, $unit:ident, $carried:ident $(, $label:literal)?) => {
        Figure {
            name: concat!(stringify!($field), "_", stringify!($q)),
            label: label!($($label)?),
            unit: Unit::$unit,
            carried: Carried::$carried,
            value: |s| s.$part.$field.and_then(|p| p.$q),
        }
    };
    ($part:ident : count $name:ident, $unit:ident, $carried:ident $(, $label:literal)?) => {
        Figure {
            name: stringify!($name),
            label: label!($($label)?),
            unit: Unit::$unit,
            carried: Carried::$carried,
            value: |s| count(s.$part.$name),
        }
    };
    ($part:ident : $name:ident, $unit:ident, $carried:ident $(, $label:literal)?) => {
        Figure {
            name: stringify!($name),
            label: label!($($label)?),
            unit: Unit::$unit,
            carried: Carried::$carried,
            value: |s| s.$part.$name,
        }
    };
}

/// A phase's figure table: its own figures, then its thinking and tool-call figures
/// (`ThinkingFigures`, `ToolCallFigures`), the same in every phase and named as a decode cell's,
/// each headed as the cell's is (a column only where some row carries it).
macro_rules! with_answers {
    ($carried:ident; $($figure:expr),+ $(,)?) => {
        &[
            $($figure,)+
            // a reasoning model's only (issue 33)
            within!(thinking: ttfa_ms.p50, Ms, $carried, "TTFA p50"),
            within!(thinking: ttfa_ms.p90, Ms, $carried),
            within!(thinking: ttfa_ms.p99, Ms, $carried),
            within!(thinking: reasoning_tokens_mean, Tokens, $carried, "Thinking tokens"),
            within!(thinking: count no_answer, Count, $carried, "No answer"),
            // a run with --tools only (issue 33 §2)
            within!(tool_calls: ttftc_ms.p50, Ms, $carried, "TTFTC p50"),
            within!(tool_calls: ttftc_ms.p90, Ms, $carried),
            within!(tool_calls: ttftc_ms.p99, Ms, $carried),
            within!(tool_calls: tool_call_tokens_mean, Tokens, $carried),
            within!(tool_calls: tool_args_valid, Share, $carried, "Tool args valid"),
            within!(tool_calls: count no_tool_call, Count, $carried, "No tool call"),
        ]
    };
}

/// The names of the figures [`with_answers!`] adds: a view shows their columns only where some
/// row carries the figure.
pub const WHERE_CARRIED: [&str; 7] = [
    "ttfa_ms_p50",
    "reasoning_tokens_mean",
    "no_answer",
    "ttftc_ms_p50",
    "tool_args_valid",
    "no_tool_call",
    "tool_call_tokens_mean",
];

impl Figures for DecodeCell {
    const FIGURES: &'static [Figure<Self>] = &[
        field!(total_tok_s, TokPerS, WhenValid),
        field!(per_request_tok_s, TokPerS, WhenValid),
        quantile!(ttft_ms.p50, Ms, WhenValid),
        quantile!(ttft_ms.p90, Ms, WhenValid, "TTFT p90"),
        quantile!(ttft_ms.p99, Ms, WhenValid, "TTFT p99"),
        quantile!(tbt_ms.p50, Ms, WhenValid),
        quantile!(tbt_ms.p90, Ms, WhenValid, "Time between tokens p90"),
        quantile!(tbt_ms.p99, Ms, WhenValid, "Time between tokens p99"),
        quantile!(chunk_gap_ms.p50, Ms, WhenValid),
        quantile!(chunk_gap_ms.p99, Ms, WhenValid),
        field!(avg_active, Streams, WhenValid),
        counted!(completed, Count, WhenValid),
        counted!(output_tokens, Count, WhenValid),
        field!(measured_s, Seconds, WhenValid),
        counted!(requests, Count, WhenValid),
        field!(goodput_pct, Percent, WhenValid),
        field!(goodput_tok_s, TokPerS, WhenValid),
        field!(usd_per_million_tokens, Usd, WhenValid),
        field!(roofline_tok_s, TokPerS, WhenValid),
        field!(roofline_fraction, Ratio, WhenValid),
        // client health and the cache: measured on any cell, and what explains a failed one
        field!(client_lag_ms_p99, Ms, Always),
        field!(client_cpu_pct, CorePercent, Always),
        field!(prompt_cache_hit_pct, Percent, Always),
        counted!(client_retries, Count, Always),
        // a reasoning model's cell only (issue 33): the wait a user feels, and the thinking
        quantile!(ttfa_ms.p50, Ms, WhenValid, "TTFA p50"),
        quantile!(ttfa_ms.p90, Ms, WhenValid, "TTFA p90"),
        quantile!(ttfa_ms.p99, Ms, WhenValid),
        field!(reasoning_tokens_mean, Tokens, WhenValid, "Thinking tokens"),
        counted!(no_answer, Count, WhenValid, "No answer"),
        field!(answer_tokens_mean, Tokens, WhenValid),
        field!(answer_tok_s, TokPerS, WhenValid, "Answer tok/s"),
        field!(usage_reasoning_tokens_mean, Tokens, WhenValid),
        counted!(reasoning_disagree, Count, WhenValid),
        // a cell sent with tools only (issue 33 §2): the wait for the call, and the calls
        quantile!(ttftc_ms.p50, Ms, WhenValid, "TTFTC p50"),
        quantile!(ttftc_ms.p90, Ms, WhenValid, "TTFTC p90"),
        quantile!(ttftc_ms.p99, Ms, WhenValid),
        field!(tool_call_tokens_mean, Tokens, WhenValid, "Tool-call tokens"),
        field!(tool_args_valid, Share, WhenValid, "Tool args valid"),
        counted!(no_tool_call, Count, WhenValid, "No tool call"),
    ];

    fn status(&self) -> CellStatus {
        DecodeCell::status(self)
    }
}

impl Figures for PrefillRow {
    const FIGURES: &'static [Figure<Self>] = &[
        // what the server reported of the prompt: known even when its answer failed
        counted!(prompt_tokens, Tokens, Always),
        field!(prompt_tok_s, TokPerS, WhenValid),
        field!(ttft_ms, Ms, WhenValid),
        counted!(cached_tokens, Tokens, Always),
    ];

    fn status(&self) -> CellStatus {
        self.status
    }
}

/// A rate level's figures: a level that did not run has none to carry, so each is `Always`
/// (its status is not a cell's).
impl Figures for RateLevel {
    const FIGURES: &'static [Figure<Self>] = with_answers![Always;
        field!(span_s, Seconds, Always),
        field!(achieved_rps, ReqPerS, Always, "Achieved req/s"),
        field!(output_tok_s, TokPerS, Always, "Output tok/s"),
        field!(input_tok_s, TokPerS, Always),
        quantile!(ttft_ms.p50, Ms, Always, "TTFT p50"),
        quantile!(ttft_ms.p90, Ms, Always),
        quantile!(ttft_ms.p99, Ms, Always, "TTFT p99"),
        quantile!(tbt_ms.p50, Ms, Always),
        quantile!(tbt_ms.p90, Ms, Always),
        quantile!(tbt_ms.p99, Ms, Always),
        quantile!(e2e_ms.p50, Ms, Always, "E2E p50"),
        quantile!(e2e_ms.p90, Ms, Always),
        quantile!(e2e_ms.p99, Ms, Always),
        quantile!(send_lag_ms.p50, Ms, Always),
        quantile!(send_lag_ms.p99, Ms, Always),
        quantile!(send_lag_ms.max, Ms, Always),
        field!(in_flight_mean, Streams, Always),
        counted!(in_flight_max, Streams, Always),
        field!(goodput_pct, Percent, Always),
        field!(goodput_rps, ReqPerS, Always),
        field!(backlog_pct, Percent, Always),
        field!(drain_s, Seconds, Always),
    ];
}

impl Figures for Burst {
    const FIGURES: &'static [Figure<Self>] = with_answers![WhenSent;
        field!(scheduled_s, Seconds, WhenSent),
        quantile!(e2e_ms.p50, Ms, WhenSent, "E2E p50"),
        quantile!(e2e_ms.p90, Ms, WhenSent, "E2E p90"),
        quantile!(e2e_ms.max, Ms, WhenSent, "E2E max"),
        field!(last_completion_ms, Ms, WhenSent, "Last completion"),
        quantile!(ttft_ms.p50, Ms, WhenSent, "TTFT p50"),
        quantile!(ttft_ms.p90, Ms, WhenSent, "TTFT p90"),
        quantile!(ttft_ms.max, Ms, WhenSent, "TTFT max"),
        counted!(output_tokens, Count, WhenSent, "Output tokens"),
        field!(total_tok_s, TokPerS, WhenSent, "Tok/s"),
        field!(send_spread_ms, Ms, WhenSent, "Send spread"),
    ];

    fn status(&self) -> CellStatus {
        self.status
    }
}

impl Figures for MixedLevel {
    const FIGURES: &'static [Figure<Self>] = &[
        held!(window_s, Seconds),
        Figure {
            name: "idle_ttft_ms",
            label: None,
            unit: Unit::Ms,
            carried: Carried::Always,
            value: |l| l.idle.as_ref().map(|i| i.ttft_ms),
        },
        field!(ttft_ms_median, Ms, Always),
        field!(slowdown, Ratio, Always),
    ];
}

impl Figures for MixedProbe {
    const FIGURES: &'static [Figure<Self>] = &[
        held!(sent_s, Seconds),
        field!(ttft_ms, Ms, Always, "TTFT"),
        field!(slowdown, Ratio, Always, "Slowdown"),
        field!(before_tok_s, TokPerS, Always, "Background tok/s before"),
        field!(during_tok_s, TokPerS, Always, "during"),
        field!(after_tok_s, TokPerS, Always, "after"),
        field!(longest_stall_ms, Ms, Always, "Longest stall"),
        counted!(prompt_tokens, Tokens, Always),
        counted!(cached_tokens, Tokens, Always),
    ];
}

/// One turn of one user: times on the run's clock and token counts, whatever became of it.
impl Figures for SessionTurn {
    const FIGURES: &'static [Figure<Self>] = &[
        held!(scheduled_s, Seconds),
        field!(sent_s, Seconds, Always),
        field!(first_token_s, Seconds, Always),
        field!(last_token_s, Seconds, Always),
        field!(ended_s, Seconds, Always),
        counted!(prompt_tokens, Tokens, Always),
        counted!(cached_tokens, Tokens, Always),
        // a reasoning model's turn, a turn sent with tools (methodology §13.4)
        Figure {
            name: "first_answer_s",
            label: None,
            unit: Unit::Seconds,
            carried: Carried::Always,
            value: |t| t.answer.first_answer_s.flatten(),
        },
        Figure {
            name: "reasoning_tokens",
            label: None,
            unit: Unit::Tokens,
            carried: Carried::Always,
            value: |t| t.answer.reasoning_tokens,
        },
        Figure {
            name: "first_tool_call_s",
            label: None,
            unit: Unit::Seconds,
            carried: Carried::Always,
            value: |t| t.answer.tool_call.as_ref().and_then(|c| c.first_tool_call_s),
        },
        Figure {
            name: "tool_call_tokens",
            label: None,
            unit: Unit::Tokens,
            carried: Carried::Always,
            value: |t| t.answer.tool_call.as_ref().map(|c| c.tool_call_tokens),
        },
        Figure {
            name: "output_tokens",
            label: None,
            unit: Unit::Tokens,
            carried: Carried::Always,
            value: |t| Some(t.output_tokens as f64),
        },
    ];
}

/// The turn-N figures over every user.
impl Figures for TurnFigures {
    const FIGURES: &'static [Figure<Self>] = &[
        // in the order of the page's per-turn table (no CSV file has these rows)
        field!(prompt_tokens_mean, Tokens, Always, "Prompt tokens (mean)"),
        field!(cached_tokens_mean, Tokens, Always),
        field!(cache_hit_pct, Percent, Always, "Cached"),
        quantile!(ttft_ms.p50, Ms, Always, "TTFT p50"),
        quantile!(ttft_ms.p90, Ms, Always, "TTFT p90"),
        field!(output_tok_s, TokPerS, Always, "tok/s per request"),
    ];
}

impl Figures for SessionsSummary {
    const FIGURES: &'static [Figure<Self>] = with_answers![Always;
        held!(span_s, Seconds),
        field!(output_tok_s, TokPerS, Always),
        quantile!(ttft_ms.p50, Ms, Always),
        quantile!(ttft_ms.p90, Ms, Always),
        quantile!(ttft_ms.p99, Ms, Always),
        quantile!(latency_ms.p50, Ms, Always),
        quantile!(latency_ms.p90, Ms, Always),
        quantile!(latency_ms.p99, Ms, Always),
        field!(cache_hit_pct, Percent, Always),
        field!(send_lag_ms_max, Ms, Always),
    ];
}

/// The capacity answer of one context: what it costs to serve its users.
impl Figures for Capacity {
    const FIGURES: &'static [Figure<Self>] =
        &[field!(usd_per_user_hour, Usd, Always), field!(usd_per_million_tokens, Usd, Always)];
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names<T: Figures>() -> Vec<&'static str> {
        T::FIGURES.iter().map(|f| f.name).collect()
    }

    /// A name is a CSV column and a refusal's word: two figures of a section never share one.
    #[test]
    fn each_section_names_its_figures_once() {
        for names in [
            names::<DecodeCell>(),
            names::<PrefillRow>(),
            names::<RateLevel>(),
            names::<Burst>(),
            names::<MixedLevel>(),
            names::<MixedProbe>(),
            names::<SessionTurn>(),
            names::<TurnFigures>(),
            names::<SessionsSummary>(),
            names::<Capacity>(),
        ] {
            let mut sorted = names.clone();
            sorted.sort_unstable();
            sorted.dedup();
            assert_eq!(sorted.len(), names.len(), "{names:?}");
        }
    }

    /// Where the name is the field's, the table reads that field: the record's JSON key holds
    /// the table's value, so run.json and the table cannot drift apart.
    #[test]
    fn a_figure_named_like_a_field_reads_that_field() {
        let burst = Burst {
            send_spread_ms: Some(1.5),
            total_tok_s: Some(2.5),
            e2e_ms: Percentiles::p50_p90_max(1.0, 2.0, 3.0),
            ttft_ms: Percentiles::median(0.5),
            ..Burst::default()
        };
        let json = serde_json::to_value(&burst).unwrap();
        for f in Burst::FIGURES {
            assert_eq!(f.of(&burst), json.get(f.name).and_then(|v| v.as_f64()), "{}", f.name);
        }
    }
}
