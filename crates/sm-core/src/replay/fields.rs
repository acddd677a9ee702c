//! Reading one line's fields by hand rather than through a derived `Deserialize`: each refusal
//! names the field (and the element) and says what it must be, which serde's messages do not.

use std::time::Duration;

use serde_json::{Map, Value};

use super::error::LineError;

/// A line as parsed: its keys and values.
pub(super) type Object = Map<String, Value>;

/// Parses one line (its bytes, newline included) into an object.
pub(super) fn object(bytes: &[u8]) -> Result<Object, LineError> {
    match serde_json::from_slice::<Value>(bytes) {
        Ok(Value::Object(object)) => Ok(object),
        Ok(_) => Err(LineError::NotObject),
        Err(e) => Err(LineError::NotJson(e.to_string())),
    }
}

/// The unit a format's `timestamp` is written in.
#[derive(Debug, Clone, Copy)]
pub(super) enum Unit {
    Millis,
    Seconds,
}

/// Takes `field` out of the line: an absent key and a `null` are both missing.
pub(super) fn take(object: &mut Object, field: &'static str) -> Result<Value, LineError> {
    optional(object, field).ok_or(LineError::Missing(field))
}

/// Takes `field` out of the line, `None` when absent or `null`.
pub(super) fn optional(object: &mut Object, field: &str) -> Option<Value> {
    object.remove(field).filter(|v| !v.is_null())
}

/// The `timestamp` field as time from the trace's zero: a number ≥ 0 in `unit`.
pub(super) fn timestamp(object: &mut Object, unit: Unit) -> Result<Duration, LineError> {
    let value = take(object, "timestamp")?;
    let what = match unit {
        Unit::Millis => "must be a number of milliseconds, 0 or more",
        Unit::Seconds => "must be a number of seconds, 0 or more",
    };
    let bad = || LineError::field("timestamp", format!("{what}, not {}", shown(&value)));
    // an integer of milliseconds is exact; only a fraction goes through a float
    if let (Some(ms), Unit::Millis) = (value.as_u64(), unit) {
        return Ok(Duration::from_millis(ms));
    }
    let n = value.as_f64().filter(|n| *n >= 0.0).ok_or_else(bad)?;
    let secs = match unit {
        Unit::Millis => n / 1e3,
        Unit::Seconds => n,
    };
    Duration::try_from_secs_f64(secs).map_err(|_| bad())
}

/// A whole number ≥ `min`; a float with no fraction (`512.0`, as some tools write counts) is one.
pub(super) fn whole(value: &Value, field: &str, min: u64, what: &str) -> Result<u64, LineError> {
    let n = value.as_u64().or_else(|| {
        let f = value.as_f64()?;
        // 2^64 itself and above do not fit; below it every integral f64 does
        ((0.0..18_446_744_073_709_551_616.0).contains(&f) && f.fract() == 0.0).then_some(f as u64)
    });
    match n {
        Some(n) if n >= min => Ok(n),
        _ => Err(LineError::field(field, format!("must be {what}, not {}", shown(value)))),
    }
}

/// Text: a JSON string.
pub(super) fn text(value: Value, field: &str) -> Result<String, LineError> {
    match value {
        Value::String(s) => Ok(s),
        other => Err(LineError::field(field, format!("must be text, not {}", shown(&other)))),
    }
}

/// A value as the message shows it: short, so a huge array does not flood the terminal.
pub(super) fn shown(value: &Value) -> String {
    const MAX: usize = 40;
    let s = match value {
        Value::Array(a) => format!("a list of {}", a.len()),
        Value::Object(_) => "an object".to_string(),
        other => other.to_string(),
    };
    match s.char_indices().nth(MAX) {
        Some((cut, _)) => format!("{}…", &s[..cut]),
        None => s,
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn obj(v: Value) -> Object {
        v.as_object().unwrap().clone()
    }

    #[test]
    fn timestamps_in_either_unit_and_refusals() {
        let ts = |v: Value, unit| timestamp(&mut obj(json!({ "timestamp": v })), unit);
        assert_eq!(ts(json!(1500), Unit::Millis), Ok(Duration::from_millis(1500)));
        assert_eq!(ts(json!(1.5), Unit::Millis), Ok(Duration::from_micros(1500)));
        assert_eq!(ts(json!(1.5), Unit::Seconds), Ok(Duration::from_millis(1500)));
        assert_eq!(ts(json!(2), Unit::Seconds), Ok(Duration::from_secs(2)));
        for bad in [json!(-1), json!(-0.5), json!("3"), json!(true), json!([1]), json!(1e300)] {
            let e = ts(bad.clone(), Unit::Seconds).unwrap_err().to_string();
            assert!(e.starts_with("\"timestamp\" must be a number of seconds"), "{bad}: {e}");
        }
        let e = timestamp(&mut obj(json!({ "timestamp": null })), Unit::Millis).unwrap_err();
        assert_eq!(e, LineError::Missing("timestamp"));
    }

    #[test]
    fn whole_numbers_refuse_fractions_negatives_and_text() {
        assert_eq!(whole(&json!(3), "n", 1, "x"), Ok(3));
        assert_eq!(whole(&json!(512.0), "n", 1, "x"), Ok(512));
        for bad in [json!(0), json!(2.5), json!(-3), json!("4"), json!(1e20)] {
            let e = whole(&bad, "n", 1, "a whole number, 1 or more").unwrap_err().to_string();
            assert!(e.starts_with("\"n\" must be a whole number, 1 or more, not"), "{bad}: {e}");
        }
    }

    #[test]
    fn shown_values_are_short() {
        assert_eq!(shown(&json!([1, 2, 3])), "a list of 3");
        assert_eq!(shown(&json!("x".repeat(100))).chars().count(), 41);
        assert_eq!(shown(&json!(-2)), "-2");
    }
}
