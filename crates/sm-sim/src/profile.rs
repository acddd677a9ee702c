//! Performance profiles: the TOML description of an engine's speed and capacity that drives the sim.

use std::path::Path;

use toml::{Table, Value};

use crate::grid;
use crate::noise::Noise;

const BUILTINS: &[(&str, &str)] = &[
    ("seed-ling-3.0-flash-h200nvl-x2", include_str!("../profiles/seed-ling-3.0-flash-h200nvl-x2.toml")),
    ("tiny", include_str!("../profiles/tiny.toml")),
];
const BUILTIN_NAMES: &[&str] = &["seed-ling-3.0-flash-h200nvl-x2", "tiny"];

/// Output length used when `ignore_eos` is false and the profile does not set `natural_output_tokens`.
const DEFAULT_NATURAL_OUTPUT_TOKENS: u64 = 512;

#[derive(Debug, thiserror::Error)]
pub enum ProfileError {
    #[error("unknown profile `{name}`: not a built-in profile ({}) and not a readable file", BUILTIN_NAMES.join(", "))]
    Unknown { name: String },
    #[error("cannot read profile file {path}: {source}")]
    Io {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("profile is not valid TOML: {0}")]
    Toml(String),
    #[error("profile key `{key}`: {reason}")]
    Invalid { key: String, reason: String },
    /// A profile file that was read but is not valid; `error` says why. Not a `#[source]`: the
    /// message already includes it, and error chains would print it twice.
    #[error("profile file {path}: {error}")]
    File { path: String, error: Box<ProfileError> },
}

fn invalid(key: &str, reason: impl Into<String>) -> ProfileError {
    ProfileError::Invalid { key: key.to_string(), reason: reason.into() }
}

/// Prompt throughput by context length.
#[derive(Debug, Clone, PartialEq)]
pub struct PrefillTable {
    pub contexts: Vec<f64>,
    pub tokens_per_s: Vec<f64>,
}

/// A `values[batch][context]` grid (decode step times, cached TTFTs).
#[derive(Debug, Clone, PartialEq)]
pub struct BatchContextTable {
    pub batch: Vec<f64>,
    pub contexts: Vec<f64>,
    pub values: Vec<Vec<f64>>,
}

impl BatchContextTable {
    pub fn at(&self, batch: f64, context: f64) -> f64 {
        grid::batch_context(&self.batch, &self.contexts, &self.values, batch, context)
    }
}

/// The largest `max_num_seqs` an override accepts.
pub const MAX_NUM_SEQS_LIMIT: u64 = 65_536;
/// The largest `kv_cache_tokens` an override accepts (2^36, far past any GPU's KV cache).
pub const KV_CACHE_TOKENS_LIMIT: u64 = 1 << 36;
/// The factors a step-scale override accepts.
pub const STEP_SCALE_RANGE: (f64, f64) = (0.1, 10.0);

/// Why an override of a profile's value (`Profile::with_*`) was refused; the message says the range.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{0}")]
pub struct OverrideError(pub String);

#[derive(Debug, Clone, PartialEq)]
pub struct Profile {
    pub name: String,
    pub model: String,
    pub max_model_len: u64,
    pub kv_cache_tokens: u64,
    pub block_size: u64,
    pub max_num_seqs: u64,
    pub max_num_batched_tokens: u64,
    pub prefill: PrefillTable,
    /// `[decode] step_ms`: time between tokens by running batch × context.
    pub decode: BatchContextTable,
    /// `[overhead] cached_prefill_ms`: time to first token of a fully cached prompt.
    pub cached_prefill_ms: f64,
    /// Optional `[ttft] cached_ms`: replaces `cached_prefill_ms` by a running batch × context grid.
    pub ttft: Option<BatchContextTable>,
    /// Mean output length when a request does not set `ignore_eos` (and `natural_output` is absent).
    pub natural_output_tokens: u64,
    /// Optional `[natural_output]`: a lognormal natural length per request, in place of the
    /// per-prompt length around `natural_output_tokens`.
    pub natural_output: Option<crate::natural::NaturalOutput>,
    /// Optional `[noise]`: random variation and drift of the decode step times.
    pub noise: Noise,
    /// Optional `[speculative]`: speculative decoding (draft tokens, acceptance probability).
    pub speculative: Option<crate::speculative::Speculative>,
    /// Optional `[gpu]`: a simulated GPU whose power follows the running batch (`/dcgm/metrics`).
    pub gpu: Option<crate::gpu::SimGpu>,
    /// Optional `[reasoning]`: a reasoning model, whose chat answers start with thinking tokens.
    pub reasoning: Option<crate::reasoning::Reasoning>,
    /// `[tools]`: how the tool calls of chat requests with `tools` come out (every profile calls;
    /// the table only shapes the calls, and its defaults make every call's arguments valid JSON).
    pub tools: crate::tools::Tools,
}

impl Profile {
    pub fn builtin_names() -> &'static [&'static str] {
        BUILTIN_NAMES
    }

    pub fn builtin(name: &str) -> Option<Profile> {
        let (_, text) = BUILTINS.iter().find(|(n, _)| *n == name)?;
        Some(Self::from_toml_str(text).expect("built-in profiles are valid"))
    }

    pub fn from_file(path: &Path) -> Result<Profile, ProfileError> {
        let text = std::fs::read_to_string(path)
            .map_err(|source| ProfileError::Io { path: path.display().to_string(), source })?;
        Self::from_toml_str(&text)
            .map_err(|e| ProfileError::File { path: path.display().to_string(), error: Box::new(e) })
    }

    /// A built-in name, else a file path.
    pub fn resolve(name_or_path: &str) -> Result<Profile, ProfileError> {
        if let Some(p) = Self::builtin(name_or_path) {
            return Ok(p);
        }
        let path = Path::new(name_or_path);
        if path.is_file() {
            return Self::from_file(path);
        }
        Err(ProfileError::Unknown { name: name_or_path.to_string() })
    }

    pub fn from_toml_str(text: &str) -> Result<Profile, ProfileError> {
        let t: Table = toml::from_str(text).map_err(|e| ProfileError::Toml(e.to_string()))?;
        let name = req_str(&t, "name")?;
        let model = req_str(&t, "model")?;
        let max_model_len = req_u64(&t, "max_model_len")?;
        let kv_cache_tokens = req_u64(&t, "kv_cache_tokens")?;
        let block_size = req_u64(&t, "block_size")?;
        let max_num_seqs = req_u64(&t, "max_num_seqs")?;
        let max_num_batched_tokens = req_u64(&t, "max_num_batched_tokens")?;
        if kv_cache_tokens < max_model_len {
            return Err(invalid(
                "kv_cache_tokens",
                format!(
                    "{kv_cache_tokens} is less than max_model_len {max_model_len}: one full-length request must fit"
                ),
            ));
        }
        if kv_cache_tokens < block_size {
            return Err(invalid("kv_cache_tokens", "smaller than one block"));
        }
        let natural_output_tokens = match t.get("natural_output_tokens") {
            None => DEFAULT_NATURAL_OUTPUT_TOKENS,
            Some(_) => req_u64(&t, "natural_output_tokens")?,
        };

        let prefill_t = req_table(&t, "prefill")?;
        let contexts = req_axis(prefill_t, "prefill.contexts")?;
        let tokens_per_s = req_values(prefill_t, "prefill.tokens_per_s", contexts.len())?;
        let prefill = PrefillTable { contexts, tokens_per_s };

        let decode = req_grid(req_table(&t, "decode")?, "decode", "step_ms")?;

        let overhead = req_table(&t, "overhead")?;
        let cached_prefill_ms = req_f64(overhead, "overhead.cached_prefill_ms", true)?;

        let ttft = match t.get("ttft") {
            None => None,
            Some(_) => Some(req_grid(req_table(&t, "ttft")?, "ttft", "cached_ms")?),
        };

        let natural_output = match t.get("natural_output") {
            None => None,
            Some(_) => Some(
                crate::natural::NaturalOutput::from_table(req_table(&t, "natural_output")?)
                    .map_err(|e| invalid("natural_output", e))?,
            ),
        };

        let noise = match t.get("noise") {
            None => Noise::default(),
            Some(_) => noise_table(req_table(&t, "noise")?)?,
        };

        let speculative = match t.get("speculative") {
            None => None,
            Some(_) => Some(
                crate::speculative::Speculative::from_table(req_table(&t, "speculative")?)
                    .map_err(|e| invalid("speculative", e))?,
            ),
        };

        let gpu = match t.get("gpu") {
            None => None,
            Some(_) => Some(crate::gpu::SimGpu::from_table(req_table(&t, "gpu")?).map_err(|e| invalid("gpu", e))?),
        };

        let reasoning = match t.get("reasoning") {
            None => None,
            Some(_) => Some(
                crate::reasoning::Reasoning::from_table(req_table(&t, "reasoning")?)
                    .map_err(|e| invalid("reasoning", e))?,
            ),
        };

        let tools = match t.get("tools") {
            None => crate::tools::Tools::default(),
            Some(_) => crate::tools::Tools::from_table(req_table(&t, "tools")?).map_err(|e| invalid("tools", e))?,
        };

        Ok(Profile {
            name,
            model,
            max_model_len,
            kv_cache_tokens,
            block_size,
            max_num_seqs,
            max_num_batched_tokens,
            prefill,
            decode,
            cached_prefill_ms,
            ttft,
            natural_output_tokens,
            natural_output,
            noise,
            speculative,
            gpu,
            reasoning,
            tools,
        })
    }

    /// Where request `id`, whose prompt hashes to `prompt_seed`, stops on its own when it does not
    /// set `ignore_eos`: drawn from `[natural_output]` per request, else ½× to 1½× the profile's
    /// `natural_output_tokens`, per prompt.
    pub fn natural_length(&self, id: u64, prompt_seed: u64) -> u64 {
        match &self.natural_output {
            Some(d) => d.length(id),
            None => {
                let mean = self.natural_output_tokens.max(1);
                (mean / 2 + prompt_seed % (mean + 1)).max(1)
            }
        }
    }

    /// Overrides `max_num_seqs`, the scheduler's running-sequence limit (vLLM's `--max-num-seqs`):
    /// 1 to [`MAX_NUM_SEQS_LIMIT`].
    pub fn with_max_num_seqs(mut self, n: u64) -> Result<Profile, OverrideError> {
        if !(1..=MAX_NUM_SEQS_LIMIT).contains(&n) {
            return Err(OverrideError(format!("must be from 1 to {MAX_NUM_SEQS_LIMIT}, got {n}")));
        }
        self.max_num_seqs = n;
        Ok(self)
    }

    /// Overrides `kv_cache_tokens`, the KV cache budget, rounded down to whole blocks of
    /// `block_size` tokens (what `/metrics` reports as `num_gpu_blocks` × `block_size`). It must
    /// still hold one full-length request (`max_model_len`), and be at most [`KV_CACHE_TOKENS_LIMIT`].
    pub fn with_kv_cache_tokens(mut self, tokens: u64) -> Result<Profile, OverrideError> {
        if tokens > KV_CACHE_TOKENS_LIMIT {
            return Err(OverrideError(format!("must be at most {KV_CACHE_TOKENS_LIMIT}, got {tokens}")));
        }
        let whole = tokens / self.block_size * self.block_size;
        if whole < self.max_model_len || whole == 0 {
            return Err(OverrideError(format!(
                "{tokens} (in whole blocks of {}: {whole}) is less than the profile's max_model_len {}: one \
                 full-length request must fit",
                self.block_size, self.max_model_len
            )));
        }
        self.kv_cache_tokens = whole;
        Ok(self)
    }

    /// Multiplies every decode step's and prefill's duration by `scale` (from
    /// [`STEP_SCALE_RANGE`]): a slower (above 1) or faster (below 1) GPU. Scales `[decode] step_ms`,
    /// divides `[prefill] tokens_per_s`, and scales the cached-prompt TTFT (`[overhead]
    /// cached_prefill_ms`, `[ttft] cached_ms`).
    pub fn with_step_scale(mut self, scale: f64) -> Result<Profile, OverrideError> {
        let (lo, hi) = STEP_SCALE_RANGE;
        if !scale.is_finite() || !(lo..=hi).contains(&scale) {
            return Err(OverrideError(format!("must be a number from {lo} to {hi}, got {scale}")));
        }
        self.decode.values.iter_mut().flatten().for_each(|v| *v *= scale);
        self.prefill.tokens_per_s.iter_mut().for_each(|v| *v /= scale);
        self.cached_prefill_ms *= scale;
        if let Some(t) = &mut self.ttft {
            t.values.iter_mut().flatten().for_each(|v| *v *= scale);
        }
        Ok(self)
    }

    pub fn num_gpu_blocks(&self) -> u64 {
        self.kv_cache_tokens / self.block_size
    }

    /// Decode step duration in ms for `batch` running sequences whose mean length is `context`.
    pub fn step_ms(&self, batch: f64, context: f64) -> f64 {
        self.decode.at(batch, context)
    }

    /// Prompt tokens per second for a prompt of `context` tokens.
    pub fn prefill_tokens_per_s(&self, context: f64) -> f64 {
        grid::linear(&self.prefill.contexts, &self.prefill.tokens_per_s, context)
    }

    /// Time to first token, from arrival, of a fully cached prompt of `context` tokens that runs in a
    /// batch of `batch` requests (itself included).
    pub fn cached_ttft_ms(&self, batch: f64, context: f64) -> f64 {
        match &self.ttft {
            Some(t) => t.at(batch, context),
            None => self.cached_prefill_ms,
        }
    }
}

fn key_of(path: &str) -> &str {
    path.rsplit('.').next().unwrap_or(path)
}

fn req_str(t: &Table, key: &str) -> Result<String, ProfileError> {
    match t.get(key) {
        None => Err(invalid(key, "missing (a string is required)")),
        Some(Value::String(s)) if !s.trim().is_empty() => Ok(s.clone()),
        Some(Value::String(_)) => Err(invalid(key, "must not be empty")),
        Some(v) => Err(invalid(key, format!("expected a string, found {}", v.type_str()))),
    }
}

fn req_u64(t: &Table, key: &str) -> Result<u64, ProfileError> {
    match t.get(key) {
        None => Err(invalid(key, "missing (a positive integer is required)")),
        Some(Value::Integer(i)) if *i > 0 => Ok(*i as u64),
        Some(Value::Integer(i)) => Err(invalid(key, format!("must be a positive integer, got {i}"))),
        Some(v) => Err(invalid(key, format!("expected an integer, found {}", v.type_str()))),
    }
}

fn num(v: &Value) -> Option<f64> {
    match v {
        Value::Integer(i) => Some(*i as f64),
        Value::Float(f) => Some(*f),
        _ => None,
    }
}

fn req_f64(t: &Table, path: &str, allow_zero: bool) -> Result<f64, ProfileError> {
    let v = t.get(key_of(path)).ok_or_else(|| invalid(path, "missing (a number is required)"))?;
    let x = num(v).ok_or_else(|| invalid(path, format!("expected a number, found {}", v.type_str())))?;
    check_value(path, x, allow_zero)
}

fn check_value(path: &str, x: f64, allow_zero: bool) -> Result<f64, ProfileError> {
    if !x.is_finite() || x < 0.0 || (!allow_zero && x == 0.0) {
        let want = if allow_zero { "a finite number ≥ 0" } else { "a finite number > 0" };
        return Err(invalid(path, format!("must be {want}, got {x}")));
    }
    Ok(x)
}

const NOISE_KEYS: &[&str] = &["step_cv", "drift_pct_per_min", "seed"];

/// `[noise]`: unlike the rest of a profile, an unknown key here is an error, because a misspelt
/// key would silently leave the engine quiet.
fn noise_table(t: &Table) -> Result<Noise, ProfileError> {
    if let Some(k) = t.keys().find(|k| !NOISE_KEYS.contains(&k.as_str())) {
        return Err(invalid(&format!("noise.{k}"), format!("unknown key (known: {})", NOISE_KEYS.join(", "))));
    }
    let mut noise = Noise::default();
    if t.contains_key("step_cv") {
        let x = req_f64(t, "noise.step_cv", true)?;
        noise = noise.with_step_cv(x).map_err(|e| invalid("noise.step_cv", e.to_string()))?;
    }
    if t.contains_key("drift_pct_per_min") {
        let x = req_f64(t, "noise.drift_pct_per_min", true)?;
        noise = noise.with_drift(x).map_err(|e| invalid("noise.drift_pct_per_min", e.to_string()))?;
    }
    match t.get("seed") {
        None => {}
        Some(Value::Integer(i)) if *i >= 0 => noise.seed = *i as u64,
        Some(Value::Integer(i)) => return Err(invalid("noise.seed", format!("must be an integer ≥ 0, got {i}"))),
        Some(v) => return Err(invalid("noise.seed", format!("expected an integer, found {}", v.type_str()))),
    }
    Ok(noise)
}

fn req_table<'a>(t: &'a Table, key: &str) -> Result<&'a Table, ProfileError> {
    match t.get(key) {
        None => Err(invalid(key, "missing table")),
        Some(Value::Table(tt)) => Ok(tt),
        Some(v) => Err(invalid(key, format!("expected a table, found {}", v.type_str()))),
    }
}

fn req_array<'a>(t: &'a Table, path: &str) -> Result<&'a Vec<Value>, ProfileError> {
    match t.get(key_of(path)) {
        None => Err(invalid(path, "missing (an array is required)")),
        Some(Value::Array(a)) if a.is_empty() => Err(invalid(path, "must not be empty")),
        Some(Value::Array(a)) => Ok(a),
        Some(v) => Err(invalid(path, format!("expected an array, found {}", v.type_str()))),
    }
}

fn numbers(path: &str, a: &[Value]) -> Result<Vec<f64>, ProfileError> {
    a.iter()
        .enumerate()
        .map(|(i, v)| {
            let x = num(v)
                .ok_or_else(|| invalid(path, format!("element {i}: expected a number, found {}", v.type_str())))?;
            check_value(&format!("{path}[{i}]"), x, false)
        })
        .collect()
}

/// A strictly increasing, positive axis.
fn req_axis(t: &Table, path: &str) -> Result<Vec<f64>, ProfileError> {
    let xs = numbers(path, req_array(t, path)?)?;
    if let Some(i) = xs.windows(2).position(|w| w[1] <= w[0]) {
        return Err(invalid(path, format!("must be strictly increasing ({} then {})", xs[i], xs[i + 1])));
    }
    Ok(xs)
}

fn req_values(t: &Table, path: &str, len: usize) -> Result<Vec<f64>, ProfileError> {
    let ys = numbers(path, req_array(t, path)?)?;
    if ys.len() != len {
        return Err(invalid(path, format!("has {} values but the contexts axis has {len}", ys.len())));
    }
    Ok(ys)
}

fn req_grid(t: &Table, table: &str, values_key: &str) -> Result<BatchContextTable, ProfileError> {
    let batch = req_axis(t, &format!("{table}.batch"))?;
    let contexts = req_axis(t, &format!("{table}.contexts"))?;
    let path = format!("{table}.{values_key}");
    let rows = req_array(t, &path)?;
    if rows.len() != batch.len() {
        return Err(invalid(&path, format!("has {} rows but the batch axis has {}", rows.len(), batch.len())));
    }
    let mut values = Vec::with_capacity(rows.len());
    for (i, row) in rows.iter().enumerate() {
        let row_path = format!("{path}[{i}]");
        let Value::Array(cells) = row else {
            return Err(invalid(
                &row_path,
                format!("expected an array (one row per batch size), found {}", row.type_str()),
            ));
        };
        let ys = numbers(&row_path, cells)?;
        if ys.len() != contexts.len() {
            return Err(invalid(
                &row_path,
                format!("has {} values but the contexts axis has {}", ys.len(), contexts.len()),
            ));
        }
        values.push(ys);
    }
    Ok(BatchContextTable { batch, contexts, values })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builtins_parse() {
        for name in Profile::builtin_names() {
            let p = Profile::builtin(name).unwrap();
            assert_eq!(&p.name, name);
        }
        let seed = Profile::builtin("seed-ling-3.0-flash-h200nvl-x2").unwrap();
        assert_eq!(seed.kv_cache_tokens, 12_582_912);
        assert_eq!(seed.num_gpu_blocks(), 49_152);
        assert!((seed.step_ms(1.0, 8192.0) - 5.7).abs() < 1e-9);
        assert!((seed.step_ms(128.0, 8192.0) - 20.2).abs() < 1e-9);
        assert!((seed.prefill_tokens_per_s(8192.0) - 26100.0).abs() < 1e-9);
        assert!((seed.cached_ttft_ms(1.0, 8192.0) - 60.0).abs() < 1e-9);
        let tiny = Profile::builtin("tiny").unwrap();
        assert_eq!(tiny.max_model_len, 16384);
        assert_eq!(tiny.cached_ttft_ms(5.0, 100.0), tiny.cached_prefill_ms);
    }

    #[test]
    fn errors_name_the_key() {
        let base = include_str!("../profiles/tiny.toml");
        let bad = base.replace("block_size = 16", "block_size = \"x\"");
        let e = Profile::from_toml_str(&bad).unwrap_err().to_string();
        assert!(e.contains("`block_size`") && e.contains("expected an integer"), "{e}");
        let bad = base.replace("max_num_seqs = 64\n", "");
        let e = Profile::from_toml_str(&bad).unwrap_err().to_string();
        assert!(e.contains("`max_num_seqs`") && e.contains("missing"), "{e}");
        let bad = base.replace("contexts = [1024, 16384]\ntokens_per_s", "contexts = [16384, 1024]\ntokens_per_s");
        let e = Profile::from_toml_str(&bad).unwrap_err().to_string();
        assert!(e.contains("`prefill.contexts`") && e.contains("increasing"), "{e}");
        let e = Profile::from_toml_str("name = ").unwrap_err();
        assert!(matches!(e, ProfileError::Toml(_)));
        let e = Profile::resolve("nope").unwrap_err().to_string();
        assert!(e.contains("tiny") && e.contains("seed-ling"), "{e}");
    }

    #[test]
    fn noise_table_is_optional_and_validated() {
        let base = include_str!("../profiles/tiny.toml");
        assert_eq!(Profile::from_toml_str(base).unwrap().noise, Noise::default());
        let with = |table: &str| Profile::from_toml_str(&format!("{base}\n[noise]\n{table}\n"));
        let p = with("step_cv = 0.2\ndrift_pct_per_min = 5\nseed = 42").unwrap();
        assert_eq!(p.noise, Noise { step_cv: 0.2, drift_pct_per_min: 5.0, seed: 42 });
        let p = with("step_cv = 0.1").unwrap();
        assert_eq!((p.noise.drift_pct_per_min, p.noise.seed), (0.0, crate::noise::DEFAULT_SEED));
        for (table, key, reason) in [
            ("step_cv = -0.1", "noise.step_cv", "≥ 0"),
            ("step_cv = 2.5", "noise.step_cv", "from 0 to 2, got 2.5"),
            ("step_cv = \"x\"", "noise.step_cv", "expected a number"),
            ("drift_pct_per_min = 1000", "noise.drift_pct_per_min", "from 0 to 600"),
            ("drift_pct_per_min = -3", "noise.drift_pct_per_min", "≥ 0"),
            ("seed = -1", "noise.seed", "≥ 0"),
            ("seed = 1.5", "noise.seed", "expected an integer"),
            ("cv = 0.2", "noise.cv", "unknown key (known: step_cv, drift_pct_per_min, seed)"),
        ] {
            let e = with(table).unwrap_err();
            assert!(matches!(&e, ProfileError::Invalid { key: k, .. } if k == key), "{table}: {e}");
            assert!(e.to_string().contains(reason), "{table}: {e}");
        }
        let e = Profile::from_toml_str(&format!("noise = 0.2\n{base}")).unwrap_err().to_string();
        assert!(e.contains("`noise`") && e.contains("expected a table"), "{e}");
    }

    #[test]
    fn overrides_change_the_profile_and_refuse_bad_values() {
        let tiny = Profile::builtin("tiny").unwrap();
        let p = tiny.clone().with_max_num_seqs(3).unwrap();
        assert_eq!(p, Profile { max_num_seqs: 3, ..tiny.clone() }, "only max_num_seqs changes");
        // KV rounds down to whole blocks of 16 tokens: 20,000 is 1,250 blocks; 19,999 is 1,249 (19,984)
        let p = tiny.clone().with_kv_cache_tokens(20_000).unwrap();
        assert_eq!((p.kv_cache_tokens, p.num_gpu_blocks()), (20_000, 1_250));
        let p = tiny.clone().with_kv_cache_tokens(19_999).unwrap();
        assert_eq!((p.kv_cache_tokens, p.num_gpu_blocks()), (19_984, 1_249));
        assert_eq!(p, Profile { kv_cache_tokens: 19_984, ..tiny.clone() }, "only the KV budget changes");
        let p = tiny.clone().with_step_scale(2.5).unwrap();
        assert!((p.step_ms(1.0, 1024.0) - 5.0).abs() < 1e-9 && (p.step_ms(64.0, 16384.0) - 10.0).abs() < 1e-9);
        assert!((p.prefill_tokens_per_s(4096.0) - 160_000.0).abs() < 1e-6, "prefill takes 2.5× as long");
        assert!((p.cached_ttft_ms(1.0, 1024.0) - 5.0).abs() < 1e-9);
        assert_eq!((p.max_num_seqs, p.kv_cache_tokens), (tiny.max_num_seqs, tiny.kv_cache_tokens));
        let seed = Profile::builtin("seed-ling-3.0-flash-h200nvl-x2").unwrap();
        let fast = seed.clone().with_step_scale(0.5).unwrap();
        assert!((fast.cached_ttft_ms(1.0, 8192.0) - 30.0).abs() < 1e-9, "the [ttft] grid scales too");
        for (e, want) in [
            (tiny.clone().with_max_num_seqs(0).unwrap_err(), "must be from 1 to 65536, got 0"),
            (tiny.clone().with_max_num_seqs(70_000).unwrap_err(), "must be from 1 to 65536, got 70000"),
            (tiny.clone().with_kv_cache_tokens(0).unwrap_err(), "0 (in whole blocks of 16: 0) is less than"),
            (tiny.clone().with_kv_cache_tokens(16_380).unwrap_err(), "16380 (in whole blocks of 16: 16368)"),
            (tiny.clone().with_kv_cache_tokens(1_000).unwrap_err(), "max_model_len 16384"),
            (tiny.clone().with_kv_cache_tokens(1 << 40).unwrap_err(), "must be at most 68719476736"),
            (tiny.clone().with_step_scale(0.0).unwrap_err(), "must be a number from 0.1 to 10, got 0"),
            (tiny.clone().with_step_scale(-2.0).unwrap_err(), "from 0.1 to 10, got -2"),
            (tiny.clone().with_step_scale(11.0).unwrap_err(), "from 0.1 to 10, got 11"),
            (tiny.clone().with_step_scale(f64::NAN).unwrap_err(), "from 0.1 to 10, got NaN"),
        ] {
            assert!(e.to_string().starts_with(want) || e.to_string().contains(want), "{e}");
        }
    }

    #[test]
    fn reasoning_table_is_optional_and_validated() {
        use crate::reasoning::{Reasoning, ReasoningField};
        let base = include_str!("../profiles/tiny.toml");
        assert_eq!(Profile::from_toml_str(base).unwrap().reasoning, None);
        let with = |table: &str| Profile::from_toml_str(&format!("{base}\n[reasoning]\n{table}\n"));
        let p = with("tokens = [8, 32]\nfield = \"reasoning\"").unwrap();
        assert_eq!(p.reasoning, Some(Reasoning { min: 8, max: 32, field: ReasoningField::Reasoning, seed: 0 }));
        let e = with("tokens = [32, 8]").unwrap_err();
        assert!(matches!(&e, ProfileError::Invalid { key, .. } if key == "reasoning"), "{e}");
        assert!(e.to_string().contains("reasoning.tokens: the range's MIN 32 is above its MAX 8"), "{e}");
        let e = with("tokens = 4\nfield = \"think\"").unwrap_err().to_string();
        assert!(e.contains("reasoning.field") && e.contains("reasoning_content or reasoning"), "{e}");
    }
}
