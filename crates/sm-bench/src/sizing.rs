//! Making each prompt exactly as long as its context (methodology §4): count with
//! the server's `/tokenize` and search the document length, or — where the server
//! cannot count — calibrate a linear model from `usage.prompt_tokens`.

use std::time::Duration;

use serde_json::json;
use sm_client::Client;
use sm_client::discover::{self, ServerFacts};
use sm_client::openai::{Prompt, RequestSpec};
use sm_core::record::Api;

use crate::prompt::{self, CALIBRATION};

const TIMEOUT: Duration = Duration::from_secs(120);
const MAX_PROBES: usize = 48;

#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Method {
    /// The server counted every candidate prompt.
    ServerTokenize,
    /// `prompt_tokens ≈ a + b · document chars`, fitted from two probes.
    Calibrated { a: f64, b: f64 },
}

impl Method {
    pub fn name(&self) -> &'static str {
        match self {
            Method::ServerTokenize => "server_tokenize",
            Method::Calibrated { .. } => "usage_calibration",
        }
    }
}

pub struct Sizer {
    client: Client,
    facts: ServerFacts,
    api: Api,
    pub method: Method,
}

/// A prompt and what it was sized to.
#[derive(Debug, Clone)]
pub struct Sized {
    pub prompt: Prompt,
    /// Prompt tokens as counted by the server, when it can count.
    pub counted: Option<u64>,
}

impl Sizer {
    /// Chooses the method: the server's tokenizer if it counts this prompt form,
    /// else a calibration with two short probes (tagged so they share no prefix).
    pub async fn new(
        client: &Client,
        facts: &ServerFacts,
        api: Api,
        run_id: &str,
        smallest: u64,
    ) -> Result<Sizer, String> {
        let mut sizer = Sizer { client: client.clone(), facts: facts.clone(), api, method: Method::ServerTokenize };
        let probe = prompt::build(&prompt::tag(run_id, CALIBRATION, 0), 16);
        if let Ok(Some(_)) = discover::count_tokens(client, facts, api, &probe).await {
            return Ok(sizer);
        }
        let tag = prompt::tag(run_id, CALIBRATION, 0);
        let small = 64;
        let large = (smallest as usize * 2).clamp(1024, 32_768);
        let c_small = sizer.usage_count(&prompt::build(&tag, small)).await?;
        let tag = prompt::tag(run_id, CALIBRATION, 1);
        let c_large = sizer.usage_count(&prompt::build(&tag, large)).await?;
        if c_large <= c_small {
            return Err(format!(
                "cannot calibrate prompt length: {small} and {large} characters both counted {c_small} tokens"
            ));
        }
        let b = (c_large - c_small) as f64 / (large - small) as f64;
        let a = c_small as f64 - b * small as f64;
        sizer.method = Method::Calibrated { a, b };
        Ok(sizer)
    }

    /// The chat for `tag` whose prompt is `target` tokens long.
    pub async fn size(&self, tag: &str, target: u64) -> Result<Sized, String> {
        match self.method {
            Method::Calibrated { a, b } => {
                let chars = ((target as f64 - a) / b).round().max(0.0) as usize;
                Ok(Sized { prompt: prompt::build(tag, chars), counted: None })
            }
            Method::ServerTokenize => self.search(tag, target).await,
        }
    }

    async fn count(&self, tag: &str, chars: usize) -> Result<u64, String> {
        let p = prompt::build(tag, chars);
        match discover::count_tokens(&self.client, &self.facts, self.api, &p).await {
            Ok(Some(n)) => Ok(n),
            Ok(None) => Err("the server stopped counting tokens".into()),
            Err(e) => Err(format!("counting prompt tokens failed: {e}")),
        }
    }

    /// Interpolation search on the document length, with bisection as a safeguard.
    async fn search(&self, tag: &str, target: u64) -> Result<Sized, String> {
        let mut lo = (0usize, self.count(tag, 0).await?);
        if lo.1 >= target {
            return Ok(Sized { prompt: prompt::build(tag, 0), counted: Some(lo.1) });
        }
        let mut n = ((target - lo.1) as usize).saturating_mul(4).max(16);
        let mut hi = loop {
            let c = self.count(tag, n).await?;
            if c >= target {
                break (n, c);
            }
            lo = (n, c);
            n = n.saturating_mul(2);
        };
        for _ in 0..MAX_PROBES {
            if hi.1 == target || hi.0 - lo.0 <= 1 {
                break;
            }
            let span = (hi.0 - lo.0) as f64;
            let guess = lo.0 as f64 + (target - lo.1) as f64 * span / (hi.1 - lo.1) as f64;
            let n = (guess.round() as usize).clamp(lo.0 + 1, hi.0 - 1);
            let c = self.count(tag, n).await?;
            if c == target {
                return Ok(Sized { prompt: prompt::build(tag, n), counted: Some(c) });
            }
            if c < target { lo = (n, c) } else { hi = (n, c) }
        }
        let best = if target - lo.1 <= hi.1 - target { lo } else { hi };
        Ok(Sized { prompt: prompt::build(tag, best.0), counted: Some(best.1) })
    }

    async fn usage_count(&self, p: &Prompt) -> Result<u64, String> {
        let spec = RequestSpec {
            api: self.api,
            model: self.facts.model.clone(),
            max_tokens: 1,
            stream: false,
            ignore_eos: false,
            continuous_usage: false,
            temperature: None,
        };
        let body = spec.body(p);
        let resp = self
            .client
            .post_json(spec.path(), &body, TIMEOUT)
            .await
            .map_err(|e| format!("prompt-length calibration request failed: {e}"))?;
        resp.pointer("/usage/prompt_tokens").and_then(|v| v.as_u64()).ok_or_else(|| {
            format!(
                "the server's answer has no usage.prompt_tokens, so prompt lengths cannot be calibrated: {}",
                json!(resp.get("usage"))
            )
        })
    }
}
