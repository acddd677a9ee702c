use super::*;
use crate::model_config::{ConfigError, shape_from_config};

const LLAMA: &str = include_str!("../../../../tests/data/config-llama-3.1-8b.json");
const QWEN_MOE: &str = include_str!("../../../../tests/data/config-qwen3-30b-a3b.json");

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-9 * b.abs().max(1.0)
}

#[test]
fn dense_config_counts_match_the_published_size() {
    let c = shape_from_config(LLAMA).unwrap();
    // Published: 8.03 B parameters. Per layer: attention 4096·128·(2·32+2·8), MLP 3·4096·14336.
    let per_layer = 4096.0 * 128.0 * 80.0 + 3.0 * 4096.0 * 14336.0;
    let head = 128256.0 * 4096.0;
    assert!(close(c.shape.active_params, 32.0 * per_layer + head));
    assert!(close(c.total_params, 32.0 * per_layer + 2.0 * head));
    assert!((c.total_params / 1e9 - 8.03).abs() < 0.01, "{}", c.total_params);
    assert_eq!(c.shape.bytes_per_weight, 2.0);
    // K and V, 32 layers, 8 KV heads of 128, bf16.
    assert_eq!(c.shape.kv_bytes_per_token, 2.0 * 32.0 * 8.0 * 128.0 * 2.0);
}

#[test]
fn moe_config_counts_only_the_routed_experts_as_active() {
    let c = shape_from_config(QWEN_MOE).unwrap();
    // Published: 30.5 B total, 3.3 B activated (the latter counting the input embedding too).
    assert!((c.total_params / 1e9 - 30.5).abs() < 0.05, "{}", c.total_params);
    let with_embedding = c.shape.active_params + 151936.0 * 2048.0;
    assert!((with_embedding / 1e9 - 3.3).abs() < 0.1, "{with_embedding}");
    let attention = 2048.0 * 128.0 * (64.0 + 8.0);
    let active_mlp = 8.0 * 3.0 * 2048.0 * 768.0 + 2048.0 * 128.0;
    assert!(close(c.shape.active_params, 48.0 * (attention + active_mlp) + 151936.0 * 2048.0));
    assert_eq!(c.shape.kv_bytes_per_token, 2.0 * 48.0 * 4.0 * 128.0 * 2.0);
}

#[test]
fn config_errors_say_what_to_give_instead() {
    let e = shape_from_config(r#"{"hidden_size": 8}"#).unwrap_err();
    assert_eq!(e, ConfigError::Missing("num_hidden_layers"));
    assert!(e.to_string().contains("--active-params"));
    let mla = LLAMA.replacen("\"hidden_act\"", "\"kv_lora_rank\": 512, \"hidden_act\"", 1);
    assert_eq!(shape_from_config(&mla).unwrap_err(), ConfigError::LatentAttention);
    let odd = LLAMA.replace("bfloat16", "int3");
    assert!(matches!(shape_from_config(&odd), Err(ConfigError::Dtype(d)) if d == "int3"));
    let awq = LLAMA.replacen('{', r#"{"quantization_config": {"bits": 4, "quant_method": "awq"},"#, 1);
    assert_eq!(shape_from_config(&awq).unwrap().shape.bytes_per_weight, 0.5);
    assert!(matches!(shape_from_config("not json"), Err(ConfigError::Json(_))));
}

#[test]
fn bound_is_concurrency_over_bytes_over_summed_bandwidth() {
    let shape = ModelShape { active_params: 7.5e9, bytes_per_weight: 2.0, kv_bytes_per_token: 131072.0 };
    let bw = Bandwidth { gb_s_per_gpu: 4800.0, gpus: 2 };
    // 15 GB of weights + 8 × 1024 × 128 KiB of KV, at 9.6 TB/s.
    let bytes = 15e9 + 8.0 * 1024.0 * 131072.0;
    assert!(close(bytes_per_step(&shape, 8, 1024), bytes));
    let bound = bound_tok_s(&shape, bw, 8, 1024).unwrap();
    assert!(close(bound, 8.0 / (bytes / 9.6e12)), "{bound}");
    // Weights are shared by the batch: at the same context, 8 sequences get far more than 1.
    let one = bound_tok_s(&shape, bw, 1, 1024).unwrap();
    assert!(bound > 7.0 * one && bound < 8.0 * one);
    // Longer contexts read more KV and lower the bound.
    assert!(bound_tok_s(&shape, bw, 8, 32768).unwrap() < bound);
    assert_eq!(bound_tok_s(&shape, bw, 0, 1024), None);
    assert_eq!(bound_tok_s(&shape, Bandwidth { gb_s_per_gpu: 4800.0, gpus: 0 }, 8, 1024), None);
}

#[test]
fn moe_bound_reads_only_active_weights() {
    let dense = shape_from_config(LLAMA).unwrap().shape;
    let moe = shape_from_config(QWEN_MOE).unwrap().shape;
    let bw = Bandwidth { gb_s_per_gpu: 4800.0, gpus: 1 };
    let m = bound_tok_s(&moe, bw, 1, 1).unwrap();
    // 3.04 B active parameters in bf16, one token of KV: ~789 tok/s on one H200.
    let expect = 4.8e12 / (moe.active_params * 2.0 + moe.kv_bytes_per_token);
    assert!(close(m, expect));
    assert!(m > 2.0 * bound_tok_s(&dense, bw, 1, 1).unwrap());
}

#[test]
fn fraction_and_judgement() {
    assert_eq!(fraction(Some(61.0), Some(100.0)), Some(0.61));
    assert_eq!(fraction(None, Some(100.0)), None);
    assert_eq!(fraction(Some(1.0), Some(0.0)), None);
    assert_eq!(judge(1.04, false), None);
    assert_eq!(judge(1.2, true), Some(AboveBound::SpeculativeDecoding));
    assert_eq!(judge(1.2, false), Some(AboveBound::ModelOrMeasurement));
    assert!(AboveBound::SpeculativeDecoding.to_string().contains("speculative decoding"));
}

#[test]
fn gpu_names_as_nvidia_smi_reports_them() {
    let cases = [
        ("NVIDIA H200 NVL", "H200 NVL", 4800.0),
        ("NVIDIA H200", "H200", 4800.0),
        ("NVIDIA H100 80GB HBM3", "H100 SXM", 3350.0),
        ("NVIDIA H100 PCIe", "H100 PCIe", 2000.0),
        ("NVIDIA H100 NVL", "H100 NVL", 3900.0),
        ("NVIDIA B200", "B200", 8000.0),
        ("NVIDIA A100-SXM4-80GB", "A100 80GB SXM", 2039.0),
        ("NVIDIA A100 80GB PCIe", "A100 80GB PCIe", 1935.0),
        ("NVIDIA A100-PCIE-40GB", "A100 40GB", 1555.0),
        ("NVIDIA L40S", "L40S", 864.0),
        ("NVIDIA L4", "L4", 300.0),
        ("NVIDIA A10", "A10", 600.0),
        ("NVIDIA GeForce RTX 4090", "RTX 4090", 1008.0),
        ("NVIDIA GeForce RTX 5090", "RTX 5090", 1792.0),
        ("NVIDIA RTX 6000 Ada Generation", "RTX 6000 Ada", 960.0),
        ("NVIDIA RTX PRO 6000 Blackwell Workstation Edition", "RTX PRO 6000 Blackwell", 1792.0),
        ("AMD Instinct MI300X", "MI300X", 5300.0),
        ("AMD Instinct MI325X", "MI325X", 6000.0),
    ];
    for (name, label, gb_s) in cases {
        assert_eq!(lookup_gpu(name), Some(KnownGpu { label, gb_s }), "{name}");
    }
    assert_eq!(lookup_gpu("NVIDIA A1000"), None);
    assert_eq!(lookup_gpu("simulated"), None);
}

#[test]
fn parameter_counts_parse_with_suffixes() {
    assert_eq!(parse_count("3B"), Ok(3e9));
    assert_eq!(parse_count("1.5t"), Ok(1.5e12));
    assert_eq!(parse_count("500M"), Ok(5e8));
    assert_eq!(parse_count("42"), Ok(42.0));
    assert!(parse_count("lots").unwrap_err().to_string().contains("8B"));
    assert!(parse_count("-3B").is_err());
}

#[test]
fn apply_names_speculative_decoding_where_chunks_carry_several_tokens() {
    use crate::record::{Gpu, RunRecord};
    use crate::roofline_record::{RecordedShape, RooflineError, ShapeSource, apply};
    let mut r: RunRecord = serde_json::from_str(include_str!("../../../../tests/data/run-sample.json")).unwrap();
    let huge = ModelShape { active_params: 1e14, bytes_per_weight: 2.0, kv_bytes_per_token: 0.0 };
    let shape = RecordedShape { shape: huge, source: ShapeSource::Flags, config_file: None };
    r.hardware.gpus = vec![Gpu { name: "Mystery GPU".into(), memory_mib: None }];
    assert_eq!(apply(&mut r, shape.clone()), Err(RooflineError::UnknownGpu("Mystery GPU".into())));
    r.hardware.gpus = vec![Gpu { name: "NVIDIA H200".into(), memory_mib: None }];
    r.hardware.gpu_count = 1;
    let i = r.decode.iter().position(|c| c.total_tok_s.is_some()).unwrap();
    // 2.6 tokens per chunk: tokens 10 ms apart, chunks 26 ms apart
    r.decode[i].tbt_ms.p50 = Some(10.0);
    r.decode[i].chunk_gap_ms.p50 = Some(26.0);
    apply(&mut r, shape.clone()).unwrap();
    apply(&mut r, shape).unwrap();
    let c = &r.decode[i];
    let bound = 4.8e12 / 2e14 * f64::from(c.concurrency);
    assert!(close(c.roofline_tok_s.unwrap(), bound));
    assert!(close(c.roofline_fraction.unwrap(), c.total_tok_s.unwrap() / bound));
    let flagged: Vec<_> = c.warnings.iter().filter(|w| w.contains("roofline")).collect();
    assert_eq!(flagged.len(), 1, "applied twice, warned once: {flagged:?}");
    assert!(flagged[0].contains("speculative decoding"), "{flagged:?}");
    assert!(r.decode.iter().filter(|c| c.total_tok_s.is_none()).all(|c| c.roofline_tok_s.is_none()));
    // another shape replaces the warning (a new fraction), a shape under the bound removes it, and
    // the cell's other warnings stay whatever they say
    r.decode[i].warnings.push("a note that mentions the roofline".into());
    let bigger = ModelShape { active_params: 2e14, ..huge };
    apply(&mut r, RecordedShape { shape: bigger, source: ShapeSource::Flags, config_file: None }).unwrap();
    let flagged: Vec<_> = r.decode[i].warnings.iter().filter(|w| w.contains("above the")).cloned().collect();
    assert_eq!(flagged.len(), 1, "{flagged:?}");
    let small = ModelShape { active_params: 1e6, ..huge };
    apply(&mut r, RecordedShape { shape: small, source: ShapeSource::Flags, config_file: None }).unwrap();
    assert!(r.decode[i].roofline_fraction.unwrap() < 1.0);
    assert_eq!(r.decode[i].warnings.iter().filter(|w| w.contains("above the")).count(), 0);
    assert!(r.decode[i].warnings.iter().any(|w| w == "a note that mentions the roofline"));
}
