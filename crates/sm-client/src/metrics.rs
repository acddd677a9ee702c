//! The Prometheus text exposition format (and the OpenMetrics subset engines emit).
//!
//! Names match exactly and values are summed over label sets: the reference tool
//! prefix-matched names and read the first label set only, so with vLLM data
//! parallel (`engine="0"`, `engine="1"`) it saw half the running requests and
//! readiness never held (reference-tool §7, weakness 9).

use std::collections::HashMap;

/// The labels of one series, in the order the exporter wrote them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Labels(Vec<(String, String)>);

impl Labels {
    pub fn get(&self, name: &str) -> Option<&str> {
        self.0.iter().find(|(k, _)| k == name).map(|(_, v)| v.as_str())
    }

    pub fn iter(&self) -> impl Iterator<Item = (&str, &str)> {
        self.0.iter().map(|(k, v)| (k.as_str(), v.as_str()))
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

#[derive(Debug, Clone, PartialEq)]
struct Sample {
    labels: Labels,
    value: f64,
}

/// One scrape, parsed.
#[derive(Debug, Clone, Default)]
pub struct Metrics {
    /// Series per metric name, in exposition order.
    series: HashMap<String, Vec<Sample>>,
    help: HashMap<String, String>,
    types: HashMap<String, String>,
    bad_lines: usize,
}

impl Metrics {
    /// Parses leniently: a line that is not valid exposition format is skipped
    /// and counted in [`Metrics::bad_lines`], so one odd exporter line cannot hide
    /// the gauges the benchmark needs.
    pub fn parse(text: &str) -> Metrics {
        let mut m = Metrics::default();
        for raw in text.lines() {
            let line = raw.trim();
            if line.is_empty() {
                continue;
            }
            if let Some(comment) = line.strip_prefix('#') {
                m.comment(comment);
                continue;
            }
            match parse_sample(line) {
                Some((name, labels, value)) => {
                    // SGLang repeats every series per tensor-parallel rank; counting
                    // them all would multiply running requests by the TP size.
                    if labels.get("tp_rank").is_some_and(|r| r != "0") {
                        continue;
                    }
                    m.series.entry(name).or_default().push(Sample { labels, value });
                }
                None => m.bad_lines += 1,
            }
        }
        m
    }

    fn comment(&mut self, comment: &str) {
        let comment = comment.trim_start();
        let (kind, rest) = match comment.split_once(char::is_whitespace) {
            Some(pair) => pair,
            None => return,
        };
        if kind != "HELP" && kind != "TYPE" {
            return;
        }
        let rest = rest.trim_start();
        let (name, text) = rest.split_once(char::is_whitespace).unwrap_or((rest, ""));
        if !is_metric_name(name) {
            self.bad_lines += 1;
            return;
        }
        let map = if kind == "HELP" { &mut self.help } else { &mut self.types };
        let text = if kind == "HELP" { unescape_help(text.trim()) } else { text.trim().to_string() };
        map.insert(name.to_string(), text);
    }

    /// Lines that could not be parsed.
    pub fn bad_lines(&self) -> usize {
        self.bad_lines
    }

    /// The sum over every label set of exactly `name`; `None` when there is no such series.
    pub fn sum(&self, name: &str) -> Option<f64> {
        let samples = self.series.get(name)?;
        if samples.is_empty() {
            return None;
        }
        Some(samples.iter().map(|s| s.value).sum())
    }

    /// The mean over label sets: for ratios (KV usage) where summing data-parallel
    /// engines would exceed 1.
    pub fn mean(&self, name: &str) -> Option<f64> {
        let samples = self.series.get(name)?;
        let n = samples.len();
        (n > 0).then(|| samples.iter().map(|s| s.value).sum::<f64>() / n as f64)
    }

    /// Every series of exactly `name`.
    pub fn series(&self, name: &str) -> impl Iterator<Item = (&Labels, f64)> {
        self.series.get(name).into_iter().flatten().map(|s| (&s.labels, s.value))
    }

    /// The finite series of `names`, in that order, folded into one `T` per value of `key` (the
    /// series without one are skipped), the groups in the order their keys first appear: one GPU
    /// per `gpu` label of an exporter, whatever the exporter calls it.
    pub fn grouped<T: Default>(
        &self,
        names: &[&str],
        key: impl Fn(&Labels) -> Option<&str>,
        mut add: impl FnMut(&mut T, &str, &Labels, f64),
    ) -> Vec<(String, T)> {
        let mut groups: Vec<(String, T)> = Vec::new();
        for &name in names {
            for (labels, value) in self.series(name).filter(|(_, v)| v.is_finite()) {
                let Some(id) = key(labels) else { continue };
                let i = match groups.iter().position(|(g, _)| g == id) {
                    Some(i) => i,
                    None => {
                        groups.push((id.to_string(), T::default()));
                        groups.len() - 1
                    }
                };
                add(&mut groups[i].1, name, labels, value);
            }
        }
        groups
    }

    /// A label of the first series of `name` (info metrics such as `vllm:cache_config_info`).
    pub fn label(&self, name: &str, label: &str) -> Option<&str> {
        self.series.get(name)?.first()?.labels.get(label)
    }

    pub fn contains(&self, name: &str) -> bool {
        self.series.get(name).is_some_and(|s| !s.is_empty())
    }

    /// Whether any series name starts with `prefix` (e.g. `vllm:`): tells an
    /// engine's exporter from a proxy's error page.
    pub fn has_prefix(&self, prefix: &str) -> bool {
        self.series.keys().any(|n| n.starts_with(prefix))
    }

    pub fn help(&self, name: &str) -> Option<&str> {
        self.help.get(name).map(String::as_str)
    }

    /// The `# TYPE` of a metric family (`counter`, `gauge`, …).
    pub fn metric_type(&self, name: &str) -> Option<&str> {
        self.types.get(name).map(String::as_str)
    }

    /// Number of series kept.
    pub fn len(&self) -> usize {
        self.series.values().map(Vec::len).sum()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

fn is_metric_name(name: &str) -> bool {
    let mut chars = name.chars();
    matches!(chars.next(), Some(c) if c.is_ascii_alphabetic() || c == '_' || c == ':')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_' || c == ':')
}

fn is_label_name(name: &str) -> bool {
    let mut chars = name.chars();
    matches!(chars.next(), Some(c) if c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// `name{labels} value [timestamp]`.
fn parse_sample(line: &str) -> Option<(String, Labels, f64)> {
    let name_end = line.find(|c: char| c == '{' || c.is_whitespace()).unwrap_or(line.len());
    let name = &line[..name_end];
    if !is_metric_name(name) {
        return None;
    }
    let mut rest = line[name_end..].trim_start();
    let labels = if let Some(after) = rest.strip_prefix('{') {
        let (labels, after) = parse_labels(after)?;
        rest = after;
        labels
    } else {
        Labels::default()
    };
    let mut fields = rest.split_whitespace();
    let value = parse_value(fields.next()?)?;
    if let Some(ts) = fields.next() {
        // Timestamps are milliseconds (integers); OpenMetrics allows fractional seconds.
        ts.parse::<f64>().ok()?;
    }
    if fields.next().is_some() {
        return None;
    }
    Some((name.to_string(), labels, value))
}

/// Parses after `{` up to and including `}`; returns the labels and the rest of the line.
fn parse_labels(mut s: &str) -> Option<(Labels, &str)> {
    let mut labels = Vec::new();
    loop {
        s = s.trim_start();
        if let Some(rest) = s.strip_prefix('}') {
            return Some((Labels(labels), rest));
        }
        let eq = s.find('=')?;
        let name = s[..eq].trim();
        if !is_label_name(name) {
            return None;
        }
        s = s[eq + 1..].trim_start().strip_prefix('"')?;
        let mut value = String::new();
        let mut chars = s.char_indices();
        let end = loop {
            let (i, c) = chars.next()?;
            match c {
                '"' => break i,
                '\\' => match chars.next()?.1 {
                    'n' => value.push('\n'),
                    '\\' => value.push('\\'),
                    '"' => value.push('"'),
                    other => {
                        value.push('\\');
                        value.push(other);
                    }
                },
                c => value.push(c),
            }
        };
        labels.push((name.to_string(), value));
        s = s[end + 1..].trim_start();
        if let Some(rest) = s.strip_prefix(',') {
            s = rest;
        } else if !s.starts_with('}') {
            return None;
        }
    }
}

fn parse_value(s: &str) -> Option<f64> {
    match s {
        "NaN" | "nan" => Some(f64::NAN),
        "+Inf" | "Inf" | "+inf" | "inf" => Some(f64::INFINITY),
        "-Inf" | "-inf" => Some(f64::NEG_INFINITY),
        _ => {
            // Rust's float parser also takes "infinity" and friends; the format does not.
            if s.chars().any(|c| c.is_ascii_alphabetic() && c != 'e' && c != 'E') {
                return None;
            }
            s.parse().ok()
        }
    }
}

fn unescape_help(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut chars = s.chars();
    while let Some(c) = chars.next() {
        if c == '\\' {
            match chars.next() {
                Some('n') => out.push('\n'),
                Some('\\') => out.push('\\'),
                Some(other) => {
                    out.push('\\');
                    out.push(other);
                }
                None => out.push('\\'),
            }
        } else {
            out.push(c);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Shaped like a vLLM 0.x exporter with two data-parallel engines.
    const VLLM: &str = r#"# HELP vllm:num_requests_running Number of requests in model execution batches.
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{engine="0",model_name="ling"} 3.0
vllm:num_requests_running{engine="1",model_name="ling"} 4.0
# HELP vllm:num_requests_waiting Number of requests waiting to be processed.
# TYPE vllm:num_requests_waiting gauge
vllm:num_requests_waiting{engine="0",model_name="ling"} 0.0
vllm:num_requests_waiting{engine="1",model_name="ling"} 2.0
vllm:num_requests_waiting_by_reason{engine="0",model_name="ling",reason="capacity"} 9.0
# TYPE vllm:kv_cache_usage_perc gauge
vllm:kv_cache_usage_perc{engine="0",model_name="ling"} 0.25
vllm:kv_cache_usage_perc{engine="1",model_name="ling"} 0.75
# TYPE vllm:cache_config_info gauge
vllm:cache_config_info{block_size="128",cache_dtype="auto",enable_prefix_caching="True",engine="0",gpu_memory_utilization="0.92",kv_cache_memory_bytes="2147483648",kv_cache_size_tokens="2097152",num_gpu_blocks="16384"} 1.0
# TYPE vllm:request_success_total counter
vllm:request_success_total{engine="0",finished_reason="length",model_name="ling"} 12.0
vllm:request_success_total{engine="0",finished_reason="stop",model_name="ling"} 1.0
vllm:e2e_request_latency_seconds_bucket{le="+Inf",model_name="ling"} 13.0
vllm:e2e_request_latency_seconds_sum{model_name="ling"} 1.5e+01
"#;

    #[test]
    fn sums_label_sets_of_the_exact_name_only() {
        let m = Metrics::parse(VLLM);
        assert_eq!(m.bad_lines(), 0);
        assert_eq!(m.sum("vllm:num_requests_running"), Some(7.0));
        // `num_requests_waiting_by_reason` starts with the same name and must not be added.
        assert_eq!(m.sum("vllm:num_requests_waiting"), Some(2.0));
        assert_eq!(m.sum("vllm:request_success_total"), Some(13.0));
        assert_eq!(m.sum("vllm:num_requests"), None);
        assert_eq!(m.mean("vllm:kv_cache_usage_perc"), Some(0.5));
        assert_eq!(m.sum("vllm:e2e_request_latency_seconds_sum"), Some(15.0));
        assert_eq!(m.series("vllm:num_requests_running").count(), 2);
        assert_eq!(m.series("nope").count(), 0);
    }

    #[test]
    fn info_labels_help_and_type() {
        let m = Metrics::parse(VLLM);
        assert_eq!(m.label("vllm:cache_config_info", "kv_cache_size_tokens"), Some("2097152"));
        assert_eq!(m.label("vllm:cache_config_info", "block_size"), Some("128"));
        assert_eq!(m.label("vllm:cache_config_info", "missing"), None);
        assert_eq!(m.metric_type("vllm:num_requests_running"), Some("gauge"));
        assert_eq!(m.help("vllm:num_requests_waiting"), Some("Number of requests waiting to be processed."));
        assert!(m.has_prefix("vllm:"));
        assert!(!m.has_prefix("sglang:"));
        let (labels, v) = m.series("vllm:request_success_total").nth(1).unwrap();
        assert_eq!((labels.get("finished_reason"), v), (Some("stop"), 1.0));
    }

    #[test]
    fn escapes_special_values_and_timestamps() {
        let text = concat!(
            "# HELP esc A help with a \\\\ and a \\n newline\n",
            "esc{path=\"C:\\\\dir\",quote=\"say \\\"hi\\\"\",nl=\"a\\nb\",} 1\n",
            "nan_metric NaN\n",
            "inf_metric{a=\"1\"} +Inf\n",
            "neg_inf -Inf\n",
            "sci 1.5e-3 1700000000000\n",
            "spaced { a = \"x\" , b=\"y\" } 2\n",
            "brace_in_value{a=\"}{,=\"} 3\n",
            "# EOF\n",
        );
        let m = Metrics::parse(text);
        assert_eq!(m.bad_lines(), 0);
        let (labels, v) = m.series("esc").next().unwrap();
        assert_eq!(v, 1.0);
        assert_eq!(labels.get("path"), Some("C:\\dir"));
        assert_eq!(labels.get("quote"), Some("say \"hi\""));
        assert_eq!(labels.get("nl"), Some("a\nb"));
        assert_eq!(m.help("esc"), Some("A help with a \\ and a \n newline"));
        assert!(m.sum("nan_metric").unwrap().is_nan());
        assert_eq!(m.sum("inf_metric"), Some(f64::INFINITY));
        assert_eq!(m.sum("neg_inf"), Some(f64::NEG_INFINITY));
        assert_eq!(m.sum("sci"), Some(0.0015));
        assert_eq!(m.label("spaced", "b"), Some("y"));
        assert_eq!(m.label("brace_in_value", "a"), Some("}{,="));
        assert_eq!(m.len(), 7);
    }

    #[test]
    fn bad_lines_are_counted_and_skipped() {
        let text = concat!(
            "good 1\n",
            "<html><body>502 Bad Gateway</body></html>\n",
            "no_value\n",
            "bad_value abc\n",
            "unterminated{a=\"x} 1\n",
            "1starts_with_digit 2\n",
            "too many fields 1 2 3\n",
            "bad_label{1a=\"x\"} 1\n",
            "infinity_word infinity\n",
            "good 2\n",
        );
        let m = Metrics::parse(text);
        assert_eq!(m.bad_lines(), 8);
        assert_eq!(m.sum("good"), Some(3.0));
        assert!(!m.is_empty());
        let html = Metrics::parse("<html>\n<h1>502 Bad Gateway</h1>\n</html>\n");
        assert!(html.is_empty());
        assert_eq!(html.bad_lines(), 3);
        assert!(!html.has_prefix("vllm:"));
    }

    #[test]
    fn tp_ranks_other_than_zero_are_dropped() {
        let text = concat!(
            "sglang:num_running_reqs{model_name=\"m\",tp_rank=\"0\"} 5\n",
            "sglang:num_running_reqs{model_name=\"m\",tp_rank=\"1\"} 5\n",
            "sglang:num_running_reqs{model_name=\"m\",tp_rank=\"2\"} 5\n",
            "sglang:num_queue_reqs{model_name=\"m\"} 1\n",
        );
        let m = Metrics::parse(text);
        assert_eq!(m.sum("sglang:num_running_reqs"), Some(5.0));
        assert_eq!(m.sum("sglang:num_queue_reqs"), Some(1.0));
        assert_eq!(m.bad_lines(), 0);
    }
}
