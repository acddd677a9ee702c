//! The replay phase (`--replay`, methodology §13.5) against vLLM serving the tiny model: a short
//! Mooncake trace whose prompts are exactly the trace's input lengths on vLLM's own tokenizer and
//! chat template, and whose shared blocks the server's prefix cache serves, never above the ideal.

use std::io::Write;

use super::support::Vllm;

#[test]
#[ignore = "needs a real engine: scripts/engines/real-engine-tests.sh"]
fn vllm_replay_phase() {
    let Some(vllm) = Vllm::from_env() else { return };
    let trace = tempfile::NamedTempFile::new().unwrap();
    // six requests 300 ms apart, blocks of 128 tokens (the CPU backend's KV block): the second,
    // fourth and sixth share the first's two leading blocks
    let inputs: [(u64, &[u64]); 6] =
        [(300, &[1, 2, 3]), (320, &[1, 2, 4]), (200, &[5, 6]), (380, &[1, 2, 7]), (250, &[8, 9]), (290, &[1, 2, 3])];
    for (i, (input, ids)) in inputs.iter().enumerate() {
        let line =
            serde_json::json!({"timestamp": i * 300, "input_length": input, "output_length": 8, "hash_ids": ids});
        writeln!(trace.as_file(), "{line}").unwrap();
    }
    let path = trace.path().to_str().unwrap();
    let mut args = vec!["--replay", path, "--replay-block-tokens", "128", "--time-scale", "2"];
    args.extend(["--ready-stable", "1s", "--warmup", "0s", "--save-requests"]);
    let (r, dir) = vllm.run(&args);
    assert_eq!(r.code, 0, "{}", r.context());
    let record = r.record();
    let p = &record["phases"]["replay"];
    let level = &p["levels"][0];
    assert_eq!(level["status"], "measured", "{level}");
    assert_eq!(level["counts"]["completed"], 6, "{level}");
    let lines: Vec<serde_json::Value> = std::fs::read_to_string(dir.path().join("requests.jsonl"))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .filter(|l: &serde_json::Value| l["phase"] == "replay")
        .collect();
    assert_eq!(lines.len(), 6);
    for (line, (input, _)) in lines.iter().zip(inputs) {
        assert_eq!(line["prompt_tokens"].as_u64(), Some(input), "exact on vLLM's tokenizer and template: {line}");
        assert_eq!(line["output_tokens"].as_f64(), Some(8.0), "{line}");
    }
    let prefix = &level["prefix"];
    let (cached, ideal) = (prefix["cached_tokens"].as_u64().unwrap(), prefix["ideal_tokens"].as_u64().unwrap());
    assert!(ideal >= 3 * 256 - 3 * 128, "three requests share two blocks with the first: {prefix}");
    assert!(cached > 0 && cached <= ideal, "the cache served shared blocks, never above the ideal: {prefix}");
    assert!(dir.path().join("replay.csv").exists());
}
