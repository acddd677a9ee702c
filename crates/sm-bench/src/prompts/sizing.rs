//! Making each prompt exactly as long as its context (methodology §4.3): count with
//! the server's `/tokenize` and search the document length; where the server cannot
//! count, search with a local tokenizer file (`--tokenizer`), else calibrate a linear
//! model from `usage.prompt_tokens`.

use std::sync::Arc;
use std::time::Duration;

use serde_json::json;
use sm_client::Client;
use sm_client::discover::{self, ServerFacts};
use sm_client::openai::{Prompt, Reasoning, RequestSpec};
use sm_core::record::{Api, PromptSource};

use crate::prompts::prompt::{self, CALIBRATION};
use crate::prompts::tokenizer::LocalTokenizer;

const TIMEOUT: Duration = Duration::from_secs(120);
const MAX_PROBES: usize = 48;

#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Method {
    /// The server counted every candidate prompt.
    ServerTokenize,
    /// A local tokenizer counted the messages; `overhead` is what the server adds around them
    /// (chat template, BOS), measured by a usage probe unless `overhead_measured` is false.
    LocalTokenizer { overhead: u64, overhead_measured: bool },
    /// `prompt_tokens ≈ a + b · document chars`, fitted from two probes.
    Calibrated { a: f64, b: f64 },
}

impl Method {
    /// The prompt source run.json records for this method.
    pub fn source(&self) -> PromptSource {
        match self {
            Method::ServerTokenize => PromptSource::ServerTokenize,
            Method::LocalTokenizer { .. } => PromptSource::TokenizerFile,
            Method::Calibrated { .. } => PromptSource::UsageCalibration,
        }
    }
}

pub struct Sizer {
    client: Client,
    facts: ServerFacts,
    api: Api,
    /// What the chat template is rendered with: its prompts are counted as they will be sent.
    reasoning: Reasoning,
    local: Option<Arc<LocalTokenizer>>,
    pub method: Method,
    /// What a person should know about how lengths were fixed (e.g. an unused `--tokenizer`).
    pub notes: Vec<String>,
    /// With `--tools`: the sentence after every sized prompt's question that asks for a call.
    pub invite: Option<String>,
}

/// Makes a prompt whose length grows with its argument (filler characters).
pub type Build<'a> = dyn Fn(usize) -> Prompt + Sync + 'a;

/// A prompt and what it was sized to.
#[derive(Debug, Clone)]
pub struct Sized {
    pub prompt: Prompt,
    /// Prompt tokens as counted by the server, or by the local tokenizer plus the server's
    /// measured overhead; `None` when calibrated.
    pub counted: Option<u64>,
    /// The filler characters it holds.
    pub chars: usize,
}

impl Sizer {
    /// Chooses the method: the server's tokenizer if it counts this prompt form, else the local
    /// tokenizer if one was given, else a calibration with two short probes (tagged so they share
    /// no prefix with measured prompts).
    pub async fn new(
        client: &Client,
        facts: &ServerFacts,
        (api, reasoning): (Api, Reasoning),
        run_id: &str,
        smallest: u64,
        local: Option<Arc<LocalTokenizer>>,
    ) -> Result<Sizer, String> {
        let mut sizer = Sizer {
            client: client.clone(),
            facts: facts.clone(),
            api,
            reasoning,
            local: None,
            method: Method::ServerTokenize,
            notes: Vec::new(),
            invite: None,
        };
        let probe = prompt::build(&prompt::tag(run_id, CALIBRATION, 0), 16);
        if let Ok(Some(_)) = discover::count_tokens(client, facts, (api, &reasoning), &probe).await {
            if let Some(t) = &local {
                sizer.notes.push(format!(
                    "the server counts tokens itself (/tokenize), so --tokenizer {} was not needed",
                    t.path().display()
                ));
            }
            return Ok(sizer);
        }
        let (small, large) = (64, (smallest as usize * 2).clamp(1024, 32_768));
        let probes = [
            prompt::build(&prompt::tag(run_id, CALIBRATION, 0), small),
            prompt::build(&prompt::tag(run_id, CALIBRATION, 1), large),
        ];
        if let Some(t) = local {
            sizer.method = sizer.local_overhead(&t, &probes).await?;
            sizer.local = Some(t);
            return Ok(sizer);
        }
        let c_small = sizer.usage_count(&probes[0]).await?;
        let c_large = sizer.usage_count(&probes[1]).await?;
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

    /// The server's fixed cost around the messages: `usage.prompt_tokens` minus the local count,
    /// the same for a short and a long probe, or the tokenizer file is not the server's.
    async fn local_overhead(&mut self, t: &LocalTokenizer, probes: &[Prompt; 2]) -> Result<Method, String> {
        let local = |p: &Prompt| t.count_prompt(p, self.api).map_err(|e| e.to_string());
        let (l_small, l_large) = (local(&probes[0])?, local(&probes[1])?);
        let s_small = match self.usage_count(&probes[0]).await {
            Ok(n) => n,
            Err(why) => {
                let overhead = t.added_special_tokens();
                self.notes.push(format!(
                    "{why}; the local tokenizer's counts are used with {overhead} added token(s), and any chat template tokens are not counted"
                ));
                return Ok(Method::LocalTokenizer { overhead, overhead_measured: false });
            }
        };
        let s_large = self.usage_count(&probes[1]).await?;
        let (o_small, o_large) = (s_small as i64 - l_small as i64, s_large as i64 - l_large as i64);
        if o_small < 0 || o_small != o_large {
            return Err(format!(
                "--tokenizer {} does not count like the server: two probes counted {l_small} and {l_large} tokens locally, \
                 {s_small} and {s_large} by the server (pass the tokenizer of the served model, or drop --tokenizer to calibrate from usage)",
                t.path().display()
            ));
        }
        Ok(Method::LocalTokenizer { overhead: o_small as u64, overhead_measured: true })
    }

    /// The chat for `tag` whose prompt is `target` tokens long.
    pub async fn size(&self, tag: &str, target: u64) -> Result<Sized, String> {
        self.size_with(&|chars| prompt::build_inviting(tag, chars, self.invite.as_deref()), target).await
    }

    /// The prompt `build(chars)` whose token count is `target`, searching `chars` (filler text
    /// characters): any prompt form whose length grows with `chars`, like a session's messages.
    /// Calibrated, the decode form's fit is used, so the length is close rather than exact.
    pub async fn size_with(&self, build: &Build<'_>, target: u64) -> Result<Sized, String> {
        match self.method {
            Method::Calibrated { a, b } => {
                let chars = ((target as f64 - a) / b).round().max(0.0) as usize;
                Ok(Sized { prompt: build(chars), counted: None, chars })
            }
            Method::ServerTokenize | Method::LocalTokenizer { .. } => self.search(build, target).await,
        }
    }

    /// Like [`Sizer::size_with`], trying `guess` characters first: many prompts of one form (a
    /// session's messages, whose tags differ only in their digits) take the same length, so one
    /// count confirms it where a search would take several.
    pub async fn size_near(&self, build: &Build<'_>, target: u64, guess: Option<usize>) -> Result<Sized, String> {
        if let (Some(n), Method::ServerTokenize | Method::LocalTokenizer { .. }) = (guess, self.method) {
            let c = self.count(build, n).await?;
            if c == target {
                return Ok(Sized { prompt: build(n), counted: Some(c), chars: n });
            }
        }
        self.size_with(build, target).await
    }

    /// The server's tokens of `prompt` (its chat template included), where this method counts:
    /// `None` when lengths are calibrated rather than counted.
    pub async fn count_prompt(&self, prompt: &Prompt) -> Result<Option<u64>, String> {
        match self.method {
            Method::Calibrated { .. } => Ok(None),
            _ => self.count(&|_| prompt.clone(), 0).await.map(Some),
        }
    }

    /// The server's token ids of `prompt`, where its `/tokenize` lists them (not with a local
    /// tokenizer, whose ids lack the template).
    pub async fn token_ids(&self, prompt: &Prompt) -> Option<Vec<u64>> {
        match self.method {
            Method::ServerTokenize => {
                discover::token_ids(&self.client, &self.facts, (self.api, &self.reasoning), prompt).await.ok().flatten()
            }
            _ => None,
        }
    }

    async fn count(&self, build: &Build<'_>, chars: usize) -> Result<u64, String> {
        let p = build(chars);
        if let (Method::LocalTokenizer { overhead, .. }, Some(t)) = (self.method, &self.local) {
            return Ok(t.count_prompt(&p, self.api).map_err(|e| e.to_string())? + overhead);
        }
        match discover::count_tokens(&self.client, &self.facts, (self.api, &self.reasoning), &p).await {
            Ok(Some(n)) => Ok(n),
            Ok(None) => Err("the server stopped counting tokens".into()),
            Err(e) => Err(format!("counting prompt tokens failed: {e}")),
        }
    }

    /// Interpolation search on the document length, with bisection as a safeguard.
    async fn search(&self, build: &Build<'_>, target: u64) -> Result<Sized, String> {
        let mut lo = (0usize, self.count(build, 0).await?);
        if lo.1 >= target {
            return Ok(Sized { prompt: build(0), counted: Some(lo.1), chars: 0 });
        }
        let mut n = ((target - lo.1) as usize).saturating_mul(4).max(16);
        let mut hi = loop {
            let c = self.count(build, n).await?;
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
            let c = self.count(build, n).await?;
            if c == target {
                return Ok(Sized { prompt: build(n), counted: Some(c), chars: n });
            }
            if c < target { lo = (n, c) } else { hi = (n, c) }
        }
        let best = if target - lo.1 <= hi.1 - target { lo } else { hi };
        Ok(Sized { prompt: build(best.0), counted: Some(best.1), chars: best.0 })
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
            reasoning: self.reasoning,
            tools: None,
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
