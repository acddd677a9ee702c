//! Injected misbehaviour, per server (`--fault`, optionally scoped to some requests) or per request
//! (header `x-sim-fault`).

use std::fmt;
use std::str::FromStr;
use std::sync::atomic::{AtomicU64, Ordering};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    /// Close the TCP connection abruptly after N tokens.
    DisconnectAfter(u32),
    /// Answer with this HTTP status and an OpenAI-shaped error body.
    Status(u16),
    /// One event mid-stream whose data is broken JSON.
    MalformedSse,
    /// Send nothing after N tokens, keep the connection open.
    StallAfter(u32),
    /// Never send a usage field.
    NoUsage,
    /// Send usage only in the final usage chunk, ignoring `continuous_usage_stats` (llama.cpp,
    /// SGLang without continuous usage stats).
    UsageAtEnd,
    /// K tokens per emission, like speculative decoding.
    MultiToken(u32),
    /// The generated text repeats exactly.
    Loop,
    /// Delay the first token by this many ms.
    SlowFirstToken(u32),
    /// `/metrics` reports this percentage of the generation tokens made (a server whose own count
    /// disagrees with what it streamed); a server fault, unscoped.
    CounterSkew(u32),
}

pub const FAULT_SPECS: &str = "disconnect-after=N, status=CODE, malformed-sse, stall-after=N, no-usage, usage-at-end, multi-token=K, loop, slow-first-token=MS, counter-skew=PCT";

pub const SCOPE_KEYS: &str = "prompt=TEXT, max-tokens=N, from=N, to=N";

#[derive(Debug, thiserror::Error)]
pub enum FaultError {
    #[error("invalid fault `{spec}`: {reason} (accepted: {FAULT_SPECS})")]
    Spec { spec: String, reason: String },
    #[error("invalid fault scope `{scope}`: {reason} (accepted keys: {SCOPE_KEYS})")]
    Scope { scope: String, reason: String },
}

impl FromStr for Fault {
    type Err = FaultError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let spec = s.trim();
        let err = |reason: &str| FaultError::Spec { spec: spec.to_string(), reason: reason.to_string() };
        let (name, arg) = match spec.split_once('=') {
            Some((n, a)) => (n.trim(), Some(a.trim())),
            None => (spec, None),
        };
        let number = |min: u64, max: u64| -> Result<u64, FaultError> {
            let a = arg.ok_or_else(|| err("needs a value"))?;
            let v: u64 = a.parse().map_err(|_| err("the value must be an integer"))?;
            if v < min || v > max {
                return Err(err(&format!("the value must be in {min}..={max}")));
            }
            Ok(v)
        };
        let flag = |f: Fault| match arg {
            None => Ok(f),
            Some(_) => Err(err("takes no value")),
        };
        match name {
            "disconnect-after" => Ok(Fault::DisconnectAfter(number(0, u32::MAX as u64)? as u32)),
            "status" => Ok(Fault::Status(number(400, 599)? as u16)),
            "malformed-sse" => flag(Fault::MalformedSse),
            "stall-after" => Ok(Fault::StallAfter(number(0, u32::MAX as u64)? as u32)),
            "no-usage" => flag(Fault::NoUsage),
            "usage-at-end" => flag(Fault::UsageAtEnd),
            "multi-token" => Ok(Fault::MultiToken(number(1, 64)? as u32)),
            "loop" => flag(Fault::Loop),
            "slow-first-token" => Ok(Fault::SlowFirstToken(number(0, 3_600_000)? as u32)),
            "counter-skew" => Ok(Fault::CounterSkew(number(1, 1000)? as u32)),
            _ => Err(err("unknown fault")),
        }
    }
}

impl fmt::Display for Fault {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Fault::DisconnectAfter(n) => write!(f, "disconnect-after={n}"),
            Fault::Status(c) => write!(f, "status={c}"),
            Fault::MalformedSse => f.write_str("malformed-sse"),
            Fault::StallAfter(n) => write!(f, "stall-after={n}"),
            Fault::NoUsage => f.write_str("no-usage"),
            Fault::UsageAtEnd => f.write_str("usage-at-end"),
            Fault::MultiToken(k) => write!(f, "multi-token={k}"),
            Fault::Loop => f.write_str("loop"),
            Fault::SlowFirstToken(ms) => write!(f, "slow-first-token={ms}"),
            Fault::CounterSkew(pct) => write!(f, "counter-skew={pct}"),
        }
    }
}

/// The faults in force for one request: the server's, overridden kind by kind by the request header's.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct FaultSet {
    pub disconnect_after: Option<u32>,
    pub status: Option<u16>,
    pub malformed_sse: bool,
    pub stall_after: Option<u32>,
    pub no_usage: bool,
    pub usage_at_end: bool,
    pub multi_token: u32,
    pub looping: bool,
    pub slow_first_token_ms: u32,
}

impl FaultSet {
    pub(crate) fn new(server: &[Fault], request: &[Fault]) -> Self {
        let mut s = FaultSet { multi_token: 1, ..Default::default() };
        for f in server.iter().chain(request) {
            match *f {
                Fault::DisconnectAfter(n) => s.disconnect_after = Some(n),
                Fault::Status(c) => s.status = Some(c),
                Fault::MalformedSse => s.malformed_sse = true,
                Fault::StallAfter(n) => s.stall_after = Some(n),
                Fault::NoUsage => s.no_usage = true,
                Fault::UsageAtEnd => s.usage_at_end = true,
                Fault::MultiToken(k) => s.multi_token = k,
                Fault::Loop => s.looping = true,
                Fault::SlowFirstToken(ms) => s.slow_first_token_ms = ms,
                // read by /metrics, not by a request
                Fault::CounterSkew(_) => {}
            }
        }
        s
    }
}

/// Parses a comma-separated list of specs (the `x-sim-fault` header). A header already targets one
/// request, so scopes are refused rather than silently split at their commas.
pub(crate) fn parse_list(s: &str) -> Result<Vec<Fault>, FaultError> {
    if s.contains('@') {
        return Err(FaultError::Scope {
            scope: s.trim().to_string(),
            reason: "scopes (`SPEC@KEY=VALUE`) apply to server faults (--fault) only".into(),
        });
    }
    s.split(',').filter(|p| !p.trim().is_empty()).map(str::parse).collect()
}

/// Which requests a server fault hits. Every key that is set must match; `from` and `to` count the
/// requests that match the other keys, from 1, over the server's life.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Scope {
    /// The prompt's text contains this (chat: any message's content).
    pub prompt: Option<String>,
    /// The request asks for exactly this many output tokens.
    pub max_tokens: Option<u64>,
    pub from: Option<u64>,
    pub to: Option<u64>,
}

impl Scope {
    fn is_all(&self) -> bool {
        *self == Scope::default()
    }

    fn matches(&self, req: &RequestView<'_>) -> bool {
        self.prompt.as_deref().is_none_or(|p| req.text.contains(p))
            && self.max_tokens.is_none_or(|m| req.max_tokens == Some(m))
    }

    fn in_range(&self, n: u64) -> bool {
        self.from.is_none_or(|f| n >= f) && self.to.is_none_or(|t| n <= t)
    }
}

impl FromStr for Scope {
    type Err = FaultError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let err = |reason: String| FaultError::Scope { scope: s.trim().to_string(), reason };
        let mut scope = Scope::default();
        for part in s.split(',') {
            let (key, value) = part.split_once('=').ok_or_else(|| err(format!("`{}` needs KEY=VALUE", part.trim())))?;
            // the prompt's text is taken as written: a leading space can be what tells tags apart
            let key = key.trim();
            let value = if key == "prompt" { value } else { value.trim() };
            let number = || -> Result<u64, FaultError> {
                value
                    .parse::<u64>()
                    .ok()
                    .filter(|&n| n >= 1)
                    .ok_or_else(|| err(format!("`{key}` must be an integer ≥ 1")))
            };
            match key {
                "prompt" if value.is_empty() => return Err(err("`prompt` needs a text to look for".into())),
                "prompt" => scope.prompt = Some(value.to_string()),
                "max-tokens" => scope.max_tokens = Some(number()?),
                "from" => scope.from = Some(number()?),
                "to" => scope.to = Some(number()?),
                _ => return Err(err(format!("unknown key `{key}`"))),
            }
        }
        if let (Some(f), Some(t)) = (scope.from, scope.to)
            && t < f
        {
            return Err(err(format!("`to` ({t}) is before `from` ({f})")));
        }
        Ok(scope)
    }
}

impl fmt::Display for Scope {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut parts = Vec::new();
        if let Some(p) = &self.prompt {
            parts.push(format!("prompt={p}"));
        }
        for (key, v) in [("max-tokens", self.max_tokens), ("from", self.from), ("to", self.to)] {
            if let Some(v) = v {
                parts.push(format!("{key}={v}"));
            }
        }
        f.write_str(&parts.join(","))
    }
}

/// A server fault: `SPEC` for every request, `SPEC@KEY=VALUE[,KEY=VALUE…]` for some.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerFault {
    pub fault: Fault,
    pub scope: Scope,
}

impl From<Fault> for ServerFault {
    fn from(fault: Fault) -> Self {
        ServerFault { fault, scope: Scope::default() }
    }
}

impl FromStr for ServerFault {
    type Err = FaultError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.split_once('@') {
            None => Ok(s.parse::<Fault>()?.into()),
            Some((spec, scope)) => Ok(ServerFault { fault: spec.parse()?, scope: scope.parse()? }),
        }
    }
}

impl fmt::Display for ServerFault {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.scope.is_all() { write!(f, "{}", self.fault) } else { write!(f, "{}@{}", self.fault, self.scope) }
    }
}

/// What a scope looks at in a request.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct RequestView<'a> {
    pub text: &'a str,
    pub max_tokens: Option<u64>,
}

/// The server's faults, each with its count of matching requests.
#[derive(Debug, Default)]
pub(crate) struct ServerFaults(Vec<(ServerFault, AtomicU64)>);

impl ServerFaults {
    pub(crate) fn new(faults: Vec<ServerFault>) -> Self {
        ServerFaults(faults.into_iter().map(|f| (f, AtomicU64::new(0))).collect())
    }

    /// `counter-skew`'s factor on the generation counter `/metrics` reports (1 without it).
    pub(crate) fn counter_scale(&self) -> f64 {
        self.0
            .iter()
            .rev()
            .find_map(|(f, _)| match f.fault {
                Fault::CounterSkew(pct) => Some(f64::from(pct) / 100.0),
                _ => None,
            })
            .unwrap_or(1.0)
    }

    /// Whether any fault looks at requests (the others hit every one).
    pub(crate) fn scoped(&self) -> bool {
        self.0.iter().any(|(f, _)| !f.scope.is_all())
    }

    /// The faults that hit this request, in the order given. Counts the request for every scope
    /// it matches, so call it once per request.
    pub(crate) fn select(&self, req: &RequestView<'_>) -> Vec<Fault> {
        self.0
            .iter()
            .filter(|(f, count)| f.scope.matches(req) && f.scope.in_range(count.fetch_add(1, Ordering::Relaxed) + 1))
            .map(|(f, _)| f.fault)
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn specs_round_trip() {
        for spec in [
            "disconnect-after=5",
            "status=429",
            "malformed-sse",
            "stall-after=3",
            "no-usage",
            "usage-at-end",
            "multi-token=4",
            "loop",
            "slow-first-token=250",
            "counter-skew=90",
        ] {
            let f: Fault = spec.parse().unwrap();
            assert_eq!(f.to_string(), spec);
        }
        assert!("status=200".parse::<Fault>().is_err());
        assert!("loop=3".parse::<Fault>().is_err());
        assert!("multi-token".parse::<Fault>().is_err());
        let e = "bogus".parse::<Fault>().unwrap_err().to_string();
        assert!(e.contains("unknown fault") && e.contains("stall-after=N"), "{e}");
        assert_eq!(parse_list("loop, no-usage").unwrap().len(), 2);
        assert!(parse_list("loop@from=2").unwrap_err().to_string().contains("--fault"));
    }

    #[test]
    fn scoped_specs_round_trip_and_errors_name_the_key() {
        for spec in ["status=503", "loop@prompt= m0000001024]", "stall-after=0@prompt=x,max-tokens=1,from=2,to=3"] {
            let f: ServerFault = spec.parse().unwrap();
            assert_eq!(f.to_string(), spec);
        }
        let f: ServerFault = "no-usage@max-tokens=1".parse().unwrap();
        assert_eq!(f.fault, Fault::NoUsage);
        assert_eq!(f.scope.max_tokens, Some(1));
        for (bad, names) in [
            ("loop@colour=red", "unknown key `colour`"),
            ("loop@from=0", "`from` must be an integer ≥ 1"),
            ("loop@max-tokens=many", "`max-tokens` must be an integer ≥ 1"),
            ("loop@prompt=", "`prompt` needs a text"),
            ("loop@from=3,to=2", "`to` (2) is before `from` (3)"),
            ("loop@prompt", "needs KEY=VALUE"),
        ] {
            let e = bad.parse::<ServerFault>().unwrap_err().to_string();
            assert!(e.contains(names) && e.contains(SCOPE_KEYS), "{bad}: {e}");
        }
        let e = "bogus@from=1".parse::<ServerFault>().unwrap_err().to_string();
        assert!(e.contains("unknown fault"), "{e}");
    }

    #[test]
    fn scopes_select_matching_requests_and_count_them() {
        let faults = ServerFaults::new(vec![
            Fault::NoUsage.into(),
            "status=503@prompt=[w],max-tokens=1,from=2,to=3".parse().unwrap(),
        ]);
        let scout = RequestView { text: "[w] hello", max_tokens: Some(1) };
        let other = RequestView { text: "[m] hello", max_tokens: Some(1) };
        let long = RequestView { text: "[w] hello", max_tokens: Some(512) };
        let hits: Vec<usize> =
            [scout, other, long, scout, scout, scout].iter().map(|r| faults.select(r).len()).collect();
        // only scouts of [w] count: the 1st is spared, the 2nd and 3rd hit, the 4th is past `to`
        assert_eq!(hits, [1, 1, 1, 2, 2, 1]);
        assert!(Scope::default().matches(&RequestView::default()));
    }
}
