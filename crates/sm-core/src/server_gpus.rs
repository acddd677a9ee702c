//! How many GPUs the server runs on (issue 34): what per-GPU figures divide by. The server's own
//! count, from its launch command's parallelism or from the user — never the GPUs of the machine
//! the client runs on, which may be a laptop in front of a GPU box or a box that serves two models.

use serde::{Deserialize, Serialize};

/// The server's GPU count and where it came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ServerGpus {
    #[schemars(range(min = 1))]
    pub count: u32,
    pub from: GpusFrom,
}

/// Where a server's GPU count came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum GpusFrom {
    /// `--gpu-count N`.
    GpuCountFlag,
    /// The launch command's tensor × pipeline × data parallel sizes (1 each where not given).
    LaunchCommand,
    /// An imported file's own statement of its parallelism (the reference tool's
    /// `tensor_parallel_size`).
    Imported,
}

impl ServerGpus {
    /// The user's count first, else the launch command's; `None` when neither says.
    pub fn resolve(flag: Option<u32>, launch_command: Option<&str>) -> Option<ServerGpus> {
        match flag.filter(|&n| n > 0) {
            Some(count) => Some(ServerGpus { count, from: GpusFrom::GpuCountFlag }),
            None => {
                gpus_in_launch_command(launch_command?).map(|count| ServerGpus { count, from: GpusFrom::LaunchCommand })
            }
        }
    }
}

/// One parallelism a serving engine's command line names, with every spelling engines accept.
struct Axis {
    long: &'static [&'static str],
}

const TENSOR: Axis = Axis { long: &["--tensor-parallel-size", "-tp", "--tp-size", "--tp", "--num-shard"] };
const PIPELINE: Axis = Axis { long: &["--pipeline-parallel-size", "-pp", "--pp-size", "--pp"] };
const DATA: Axis = Axis { long: &["--data-parallel-size", "-dp", "--dp-size", "--dp"] };

/// The engines whose command lines say their parallelism (vLLM, SGLang, TGI); a command of
/// another program (llama.cpp, a script, the simulated engine) says nothing about GPUs.
fn is_gpu_server(words: &[&str]) -> bool {
    // a program named by its path, quoted or not: `"$HOME/venv/bin/vllm" serve`
    let names: Vec<&str> = words
        .iter()
        .map(|w| w.trim_matches(|c| c == '"' || c == '\''))
        .map(|w| w.rsplit('/').next().unwrap_or(w))
        .collect();
    let joined = names.join(" ");
    ["vllm serve", "vllm.entrypoints", "sglang.launch_server", "sglang serve", "text-generation-launcher"]
        .iter()
        .any(|p| joined.contains(p))
}

/// tensor × pipeline × data parallel in a vLLM, SGLang or TGI command line, each 1 where the
/// command does not set it; `None` for another program's command or a size that is not a
/// positive integer.
pub fn gpus_in_launch_command(cmd: &str) -> Option<u32> {
    let words: Vec<&str> = cmd.split_whitespace().collect();
    if !is_gpu_server(&words) {
        return None;
    }
    let mut product: u32 = 1;
    for axis in [TENSOR, PIPELINE, DATA] {
        product = product.checked_mul(size(&words, &axis)?)?;
    }
    Some(product)
}

/// The axis' size: the last time the command sets it (as argparse reads it), `--flag N` or
/// `--flag=N`; 1 when never set; `None` when set to something that is not a positive integer.
fn size(words: &[&str], axis: &Axis) -> Option<u32> {
    let mut value: Option<&str> = None;
    for (i, w) in words.iter().enumerate() {
        for flag in axis.long {
            if w == flag {
                value = Some(words.get(i + 1).copied().unwrap_or(""));
            } else if let Some(v) = w.strip_prefix(flag).and_then(|rest| rest.strip_prefix('=')) {
                value = Some(v);
            }
        }
    }
    match value {
        None => Some(1),
        Some(v) => v.parse::<u32>().ok().filter(|&n| n > 0),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parallel_sizes_multiply_in_every_engines_spelling() {
        let cases = [
            ("vllm serve inclusionAI/Ling --tensor-parallel-size 2 --port 8000", Some(2)),
            ("vllm serve M -tp 4 -pp 2", Some(8)),
            ("vllm serve M --tensor-parallel-size=2 --data-parallel-size=2", Some(4)),
            ("python -m vllm.entrypoints.openai.api_server --model M", Some(1)),
            ("python3 -m sglang.launch_server --model-path M --tp 2 --dp 2", Some(4)),
            ("python3 -m sglang.launch_server --model-path M --tp-size 8", Some(8)),
            ("text-generation-launcher --model-id M --num-shard 4", Some(4)),
            // argparse keeps the last
            ("vllm serve M -tp 1 --tensor-parallel-size 2", Some(2)),
            ("vllm serve M --max-num-seqs 256", Some(1)),
            ("\"$HOME/env/bin/vllm\" serve M --tensor-parallel-size 2", Some(2)),
            ("/opt/venv/bin/vllm serve M -tp 8", Some(8)),
        ];
        for (cmd, want) in cases {
            assert_eq!(gpus_in_launch_command(cmd), want, "{cmd}");
        }
    }

    #[test]
    fn other_programs_and_bad_sizes_say_nothing() {
        for cmd in [
            "llama-server -m model.gguf --port 8080",
            "speedmatrix sim --profile seed",
            "vllm serve M --tensor-parallel-size",
            "vllm serve M --tensor-parallel-size 0",
            "vllm serve M --tensor-parallel-size two",
            "vllm serve M -tp 65536 -pp 65536 -dp 2",
        ] {
            assert_eq!(gpus_in_launch_command(cmd), None, "{cmd}");
        }
        // --tp is not --tpx: a flag only matches whole or with `=`
        assert_eq!(gpus_in_launch_command("vllm serve M --tpx 4"), Some(1));
    }

    #[test]
    fn the_users_count_comes_first() {
        let cmd = Some("vllm serve M -tp 2");
        assert_eq!(ServerGpus::resolve(Some(8), cmd), Some(ServerGpus { count: 8, from: GpusFrom::GpuCountFlag }));
        assert_eq!(ServerGpus::resolve(None, cmd), Some(ServerGpus { count: 2, from: GpusFrom::LaunchCommand }));
        assert_eq!(ServerGpus::resolve(Some(0), None), None);
        assert_eq!(ServerGpus::resolve(None, Some("speedmatrix sim --profile seed")), None);
    }
}
