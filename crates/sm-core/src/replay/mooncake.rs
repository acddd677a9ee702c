//! A Mooncake line: `{"timestamp": ms, "input_length": n, "output_length": m, "hash_ids": [ids]}`.
//! Keys beyond these are ignored: published traces carry extra columns the replay has no use for.

use std::time::Duration;

use serde_json::Value;

use super::MooncakeInput;
use super::error::LineError;
use super::fields::{self, Object, Unit};

/// The line's timestamp and input, its block ids checked against `block_tokens`.
pub(super) fn parse(mut object: Object, block_tokens: u32) -> Result<(Duration, MooncakeInput), LineError> {
    let at = fields::timestamp(&mut object, Unit::Millis)?;
    let input_tokens = count(&mut object, "input_length")?;
    let output_tokens = count(&mut object, "output_length")?;
    let hash_ids = hash_ids(fields::take(&mut object, "hash_ids")?)?;
    check_blocks(hash_ids.len(), input_tokens, block_tokens)?;
    Ok((at, MooncakeInput { input_tokens, hash_ids, output_tokens }))
}

/// A token count: a request of 0 prompt tokens cannot be sent, nor one asking for 0 tokens back.
fn count(object: &mut Object, field: &'static str) -> Result<u64, LineError> {
    fields::whole(&fields::take(object, field)?, field, 1, "a whole number of tokens, 1 or more")
}

/// The block ids: whole numbers ≥ 0 (the ids published traces use), in the prompt's order.
fn hash_ids(value: Value) -> Result<Vec<u64>, LineError> {
    let Value::Array(items) = value else {
        let why = format!("must be a list of block ids, not {}", fields::shown(&value));
        return Err(LineError::field("hash_ids", why));
    };
    let id = |(i, v): (usize, &Value)| fields::whole(v, &format!("hash_ids[{i}]"), 0, "a whole number, 0 or more");
    items.iter().enumerate().map(id).collect()
}

/// One id per block of `block_tokens`, the last one partial: `ceil(input / block_tokens)` ids.
fn check_blocks(ids: usize, input: u64, block_tokens: u32) -> Result<(), LineError> {
    let needed = input.div_ceil(u64::from(block_tokens));
    if ids as u64 == needed {
        return Ok(());
    }
    Err(LineError::Blocks { ids, input, needed, block_tokens })
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn line(v: Value, block_tokens: u32) -> Result<(Duration, MooncakeInput), LineError> {
        parse(v.as_object().unwrap().clone(), block_tokens)
    }

    #[test]
    fn a_line_reads_into_its_input_and_time() {
        let (at, input) = line(
            json!({"timestamp": 27482, "input_length": 1100, "output_length": 52, "hash_ids": [0, 1, 7], "extra": 1}),
            512,
        )
        .unwrap();
        assert_eq!(at, Duration::from_millis(27482));
        assert_eq!(input, MooncakeInput { input_tokens: 1100, hash_ids: vec![0, 1, 7], output_tokens: 52 });
    }

    #[test]
    fn the_block_count_is_the_ceiling_of_the_input() {
        let ok = |input: u64, ids: usize, bt: u32| {
            let ids: Vec<u64> = (0..ids as u64).collect();
            line(json!({"timestamp": 0, "input_length": input, "output_length": 1, "hash_ids": ids}), bt)
        };
        assert!(ok(512, 1, 512).is_ok(), "exactly one full block");
        assert!(ok(513, 2, 512).is_ok(), "a partial last block");
        assert!(ok(1, 1, 512).is_ok());
        assert!(ok(100, 10, 10).is_ok());
        for (input, ids, bt) in [(512, 2, 512), (513, 1, 512), (1, 0, 512), (2000, 4, 16)] {
            let e = ok(input, ids, bt).unwrap_err().to_string();
            assert!(e.contains(&format!("holds {ids} block ids")) && e.contains("--replay-block-tokens"), "{e}");
        }
    }

    #[test]
    fn each_field_is_named_when_missing_or_wrong() {
        let base = json!({"timestamp": 5, "input_length": 10, "output_length": 2, "hash_ids": [1]});
        for field in ["timestamp", "input_length", "output_length", "hash_ids"] {
            let mut v = base.clone();
            v.as_object_mut().unwrap().remove(field);
            assert_eq!(line(v, 512).unwrap_err().to_string(), format!("\"{field}\" is missing"));
        }
        for (field, bad, says) in [
            ("input_length", json!(-3), "\"input_length\" must be a whole number of tokens, 1 or more, not -3"),
            ("input_length", json!(10.5), "\"input_length\" must be a whole number of tokens"),
            ("input_length", json!(0), "not 0"),
            ("output_length", json!("2"), "\"output_length\" must be a whole number of tokens, 1 or more, not \"2\""),
            ("output_length", json!(0), "\"output_length\" must be"),
            ("timestamp", json!(-1), "\"timestamp\" must be a number of milliseconds, 0 or more, not -1"),
            ("hash_ids", json!("1"), "\"hash_ids\" must be a list of block ids"),
            ("hash_ids", json!([-1]), "\"hash_ids[0]\" must be a whole number, 0 or more, not -1"),
            ("hash_ids", json!([1.5]), "\"hash_ids[0]\" must be a whole number"),
        ] {
            let mut v = base.clone();
            v[field] = bad;
            let e = line(v, 512).unwrap_err().to_string();
            assert!(e.contains(says), "{field}: {e}");
        }
    }
}
