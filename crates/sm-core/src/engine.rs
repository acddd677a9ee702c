//! Which engine a server is.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

/// The key of `server.extra` under which a run of speedmatrix's built-in simulated engine records
/// the engine's profile: what says a record measured the simulated engine, and which one to
/// restart on `--resume`.
pub const SIM_PROFILE_KEY: &str = "sim_profile";

/// The engine behind a server, as discovery recognised it and as `server.engine` records it;
/// anything it does not recognise (a proxy, a hosted API) is `generic`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Engine {
    Vllm,
    Sglang,
    Llamacpp,
    Tgi,
    Generic,
}

impl Engine {
    pub const ALL: [Engine; 5] = [Engine::Vllm, Engine::Sglang, Engine::Llamacpp, Engine::Tgi, Engine::Generic];

    pub fn as_str(self) -> &'static str {
        match self {
            Engine::Vllm => "vllm",
            Engine::Sglang => "sglang",
            Engine::Llamacpp => "llamacpp",
            Engine::Tgi => "tgi",
            Engine::Generic => "generic",
        }
    }
}

impl fmt::Display for Engine {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for Engine {
    type Err = String;

    fn from_str(s: &str) -> Result<Engine, String> {
        Engine::ALL
            .into_iter()
            .find(|e| e.as_str() == s)
            .ok_or_else(|| format!("unknown engine '{s}' (expected vllm, sglang, llamacpp, tgi or generic)"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn serialised_as_the_schema_names_it() {
        for e in Engine::ALL {
            assert_eq!(serde_json::to_value(e).unwrap(), e.as_str());
            assert_eq!(e.as_str().parse::<Engine>(), Ok(e));
        }
        assert!(serde_json::from_str::<Engine>("\"ollama\"").is_err());
    }
}
