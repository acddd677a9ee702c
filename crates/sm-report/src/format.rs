//! The number formats of the published page, so a figure reads the same on
//! every page: `26.1K`, `173.9`, `1,156 ms`, `5.7 ms`, `30.0 s`, `—`.

/// What the page prints where there is no figure.
pub const NONE: &str = "—";

/// An integer with thousands separators: `5,216`.
pub fn count(n: u64) -> String {
    group(&n.to_string())
}

/// One decimal with thousands separators: `6,337.6`, `173.9`.
pub fn fixed1(x: f64) -> String {
    with_decimals(x, 1)
}

/// A whole number with thousands separators, never `-0`: `5,216`, a share `90`.
pub fn whole(x: f64) -> String {
    with_decimals(x, 0)
}

/// A change with its sign and one decimal: `+0.4`, `-1.2`; a change that rounds to nothing is
/// `0.0`, never `-0.0` or `+0.0`, which would read as a direction.
pub fn signed1(x: f64) -> String {
    let s = with_decimals(x, 1);
    if x > 0.0 && s.chars().any(|c| c.is_ascii_digit() && c != '0') { format!("+{s}") } else { s }
}

/// Prompt tok/s as the page prints it: thousands with one decimal and the
/// decimal dropped when it is 0 (`26.1K`, `26K`); plain below 1,000.
pub fn kilo(x: f64) -> String {
    if !x.is_finite() {
        return NONE.into();
    }
    if x.abs() < 1000.0 {
        return fixed1(x);
    }
    let s = with_decimals(x / 1000.0, 1);
    format!("{}K", s.strip_suffix(".0").unwrap_or(&s))
}

/// A TTFT: whole milliseconds with separators (`1,156 ms`); one decimal under
/// 10 ms, where a whole number would round a fast server to `0 ms`.
pub fn ms(x: f64) -> String {
    if !x.is_finite() {
        return NONE.into();
    }
    if x.abs() < 10.0 { format!("{} ms", with_decimals(x, 1)) } else { format!("{} ms", with_decimals(x, 0)) }
}

/// A latency of a figure table's column: three significant figures for the tens of ms a time
/// between tokens takes (`15.0 ms`, the TBT column's style), whole ms from 100 (`702 ms`, the
/// TTFT column's).
pub fn latency(x: f64) -> String {
    if x.is_finite() && x.abs() < 100.0 { ms1(x) } else { ms(x) }
}

/// A time between tokens: one decimal (`5.7 ms`).
pub fn ms1(x: f64) -> String {
    if !x.is_finite() {
        return NONE.into();
    }
    format!("{} ms", fixed1(x))
}

/// A measurement window: `30.0 s`.
pub fn secs1(x: f64) -> String {
    if !x.is_finite() {
        return NONE.into();
    }
    format!("{} s", fixed1(x))
}

/// A setting in seconds without noise: `30 s`, `2.5 s`.
pub fn secs_setting(x: f64) -> String {
    if x.fract() == 0.0 { format!("{} s", count(x as u64)) } else { format!("{x} s") }
}

/// A figure of a section's table as the page's tables print its unit: a latency as [`ms`], a
/// speed with one decimal, a count whole, a share or a ratio with one decimal, a time in seconds
/// as [`secs1`]. `—` where the section has none.
pub fn figure(unit: sm_core::figures::Unit, v: Option<f64>) -> String {
    use sm_core::figures::Unit;
    opt(v, |x| match unit {
        Unit::Ms => latency(x),
        Unit::Count | Unit::Tokens | Unit::Streams => whole(x),
        Unit::Seconds => secs1(x),
        // a rate of requests is often below one a second: two decimals keep 0.25 from reading 0.3
        Unit::ReqPerS => with_decimals(x, 2),
        // one figure over another: a slowdown of 1.53× reads as such
        Unit::Ratio => format!("{}×", with_decimals(x, 2)),
        Unit::Share => format!("{} %", fixed1(x * 100.0)),
        Unit::Percent => format!("{} %", fixed1(x)),
        Unit::TokPerS | Unit::CorePercent | Unit::Usd => fixed1(x),
    })
}

/// The figure named `name` of `section`, printed by its unit (`—` where it has none).
pub fn figure_named<T: sm_core::figures::Figures>(section: &T, name: &str) -> String {
    T::figure(name).map_or_else(|| NONE.to_string(), |f| figure(f.unit, f.of(section)))
}

/// Applies `f` to a present figure, `—` otherwise.
pub fn opt<T>(v: Option<T>, f: impl Fn(T) -> String) -> String {
    v.map(f).unwrap_or_else(|| NONE.into())
}

fn with_decimals(x: f64, decimals: usize) -> String {
    if !x.is_finite() {
        return NONE.into();
    }
    let s = format!("{:.*}", decimals, x.abs());
    let (int, frac) = match s.split_once('.') {
        Some((i, f)) => (i, Some(f)),
        None => (s.as_str(), None),
    };
    // "-0.0" would read as a negative figure
    let negative = x < 0.0 && s.chars().any(|c| c.is_ascii_digit() && c != '0');
    let mut out = String::new();
    if negative {
        out.push('-');
    }
    out.push_str(&group(int));
    if let Some(f) = frac {
        out.push('.');
        out.push_str(f);
    }
    out
}

fn group(digits: &str) -> String {
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, ch) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(ch);
    }
    out
}

const MONTHS: [&str; 12] = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"];

/// `2026-09-03T17:22:00Z` → `Sep 3, 2026, 17:22 UTC`. A timestamp without a
/// zone (the reference tool's local time) is printed without one; anything
/// unparsable is printed as given.
pub fn date(ts: &str) -> String {
    let parsed = (|| {
        let (d, t) = ts.split_once('T')?;
        let mut dp = d.split('-');
        let (y, m, day) = (dp.next()?, dp.next()?.parse::<usize>().ok()?, dp.next()?.parse::<u32>().ok()?);
        let month = MONTHS.get(m.checked_sub(1)?)?;
        let hm = t.get(0..5)?;
        let zone = if t.ends_with('Z') || t.ends_with("+00:00") { " UTC" } else { "" };
        Some(format!("{month} {day}, {y}, {hm}{zone}"))
    })();
    parsed.unwrap_or_else(|| ts.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn published_formats() {
        assert_eq!(kilo(26100.0), "26.1K");
        assert_eq!(kilo(26000.0), "26K");
        assert_eq!(kilo(21650.0), "21.6K"); // 21.65 is stored as 21.6499…
        assert_eq!(fixed1(173.9), "173.9");
        assert_eq!(fixed1(6337.6), "6,337.6");
        assert_eq!(fixed1(1_234_567.25), "1,234,567.2");
        assert_eq!(ms(1156.0), "1,156 ms");
        assert_eq!(ms(0.06 * 1000.0), "60 ms");
        assert_eq!(ms(9.19), "9.2 ms");
        assert_eq!(ms1(5.7), "5.7 ms");
        assert_eq!(secs1(30.0), "30.0 s");
        assert_eq!(count(190_086), "190,086");
        assert_eq!(count(1), "1");
        assert_eq!(opt(None::<f64>, fixed1), "—");
        assert_eq!(fixed1(-1.0), "-1.0");
        assert_eq!(fixed1(-0.01), "0.0");
        assert_eq!(
            (signed1(0.4), signed1(-1.25), signed1(-0.04), signed1(0.04)),
            ("+0.4".into(), "-1.2".into(), "0.0".into(), "0.0".into())
        );
        assert_eq!((whole(-0.4), whole(89.6)), ("0".to_string(), "90".to_string()));
        assert_eq!(secs_setting(30.0), "30 s");
        assert_eq!(secs_setting(2.5), "2.5 s");
    }

    #[test]
    fn dates() {
        assert_eq!(date("2026-09-03T17:22:00Z"), "Sep 3, 2026, 17:22 UTC");
        assert_eq!(date("2026-12-02T13:06:07.174928"), "Dec 2, 2026, 13:06");
        assert_eq!(date("yesterday"), "yesterday");
    }
}
