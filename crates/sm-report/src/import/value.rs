//! Tolerant readers over `serde_json::Value`: the reference tool's files vary
//! by version, and a missing or oddly typed field is shown as unknown rather
//! than failing the import.

use serde_json::Value;

pub fn f64_at(v: &Value, key: &str) -> Option<f64> {
    match v.get(key)? {
        Value::Number(n) => n.as_f64(),
        Value::String(s) => s.trim().parse().ok(),
        _ => None,
    }
    .filter(|x: &f64| x.is_finite())
}

pub fn u64_at(v: &Value, key: &str) -> Option<u64> {
    let x = f64_at(v, key)?;
    (x >= 0.0).then(|| x.round() as u64)
}

pub fn str_at<'a>(v: &'a Value, key: &str) -> Option<&'a str> {
    v.get(key).and_then(Value::as_str).map(str::trim).filter(|s| !s.is_empty())
}

pub fn bool_at(v: &Value, key: &str) -> Option<bool> {
    v.get(key).and_then(Value::as_bool)
}

/// Seconds → milliseconds, for the reference tool's `*_seconds` and `*_p50`
/// latencies; rounded to the nanosecond so 1.001 s reads 1001 ms, not
/// 1000.9999999999999.
pub fn ms_at(v: &Value, key: &str) -> Option<f64> {
    // 1e300 s is finite but overflows to ∞ ms, and an infinite latency sent the
    // page's chart gridline loop into a hang (found by tests/import_prop.rs).
    f64_at(v, key).map(|s| (s * 1e9).round() / 1e6).filter(|ms| ms.is_finite())
}

pub fn u64_list(v: &Value, key: &str) -> Vec<u64> {
    v.get(key).and_then(Value::as_array).map(|a| a.iter().filter_map(Value::as_u64).collect()).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    #[test]
    fn latencies_that_overflow_in_ms_are_unknown() {
        let v = json!({"huge": 1e300, "ok": 1.001});
        assert_eq!(super::ms_at(&v, "huge"), None);
        assert_eq!(super::ms_at(&v, "ok"), Some(1001.0));
    }
}
