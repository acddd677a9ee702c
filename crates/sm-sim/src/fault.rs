//! Injected misbehaviour, per server (`--fault`) or per request (header `x-sim-fault`).

use std::fmt;
use std::str::FromStr;

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
    /// K tokens per emission, like speculative decoding.
    MultiToken(u32),
    /// The generated text repeats exactly.
    Loop,
    /// Delay the first token by this many ms.
    SlowFirstToken(u32),
}

pub const FAULT_SPECS: &str =
    "disconnect-after=N, status=CODE, malformed-sse, stall-after=N, no-usage, multi-token=K, loop, slow-first-token=MS";

#[derive(Debug, thiserror::Error)]
#[error("invalid fault `{spec}`: {reason} (accepted: {FAULT_SPECS})")]
pub struct FaultError {
    pub spec: String,
    pub reason: String,
}

impl FromStr for Fault {
    type Err = FaultError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let spec = s.trim();
        let err = |reason: &str| FaultError { spec: spec.to_string(), reason: reason.to_string() };
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
            "multi-token" => Ok(Fault::MultiToken(number(1, 64)? as u32)),
            "loop" => flag(Fault::Loop),
            "slow-first-token" => Ok(Fault::SlowFirstToken(number(0, 3_600_000)? as u32)),
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
            Fault::MultiToken(k) => write!(f, "multi-token={k}"),
            Fault::Loop => f.write_str("loop"),
            Fault::SlowFirstToken(ms) => write!(f, "slow-first-token={ms}"),
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
                Fault::MultiToken(k) => s.multi_token = k,
                Fault::Loop => s.looping = true,
                Fault::SlowFirstToken(ms) => s.slow_first_token_ms = ms,
            }
        }
        s
    }
}

/// Parses a comma-separated list of specs (the `x-sim-fault` header).
pub(crate) fn parse_list(s: &str) -> Result<Vec<Fault>, FaultError> {
    s.split(',').filter(|p| !p.trim().is_empty()).map(str::parse).collect()
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
            "multi-token=4",
            "loop",
            "slow-first-token=250",
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
    }
}
