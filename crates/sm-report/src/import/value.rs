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
    f64_at(v, key).map(|s| (s * 1e9).round() / 1e6)
}

pub fn u64_list(v: &Value, key: &str) -> Vec<u64> {
    v.get(key).and_then(Value::as_array).map(|a| a.iter().filter_map(Value::as_u64).collect()).unwrap_or_default()
}
