//! Which real engine's discovery endpoints and metric names the sim imitates.

use std::fmt;
use std::str::FromStr;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Flavor {
    #[default]
    Vllm,
    Sglang,
    Llamacpp,
    Tgi,
    Generic,
}

impl Flavor {
    pub const ALL: [Flavor; 5] = [Flavor::Vllm, Flavor::Sglang, Flavor::Llamacpp, Flavor::Tgi, Flavor::Generic];

    pub fn as_str(self) -> &'static str {
        match self {
            Flavor::Vllm => "vllm",
            Flavor::Sglang => "sglang",
            Flavor::Llamacpp => "llamacpp",
            Flavor::Tgi => "tgi",
            Flavor::Generic => "generic",
        }
    }
}

impl fmt::Display for Flavor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[derive(Debug, thiserror::Error)]
#[error("unknown flavor `{0}`: expected one of vllm, sglang, llamacpp, tgi, generic")]
pub struct UnknownFlavor(pub String);

impl FromStr for Flavor {
    type Err = UnknownFlavor;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Flavor::ALL
            .into_iter()
            .find(|f| f.as_str().eq_ignore_ascii_case(s.trim()))
            .ok_or_else(|| UnknownFlavor(s.to_string()))
    }
}
