use super::*;
use crate::server_gpus::GpusFrom;

const SAMPLE: &str = include_str!("../../../../tests/data/run-sample.json");

fn sample() -> RunRecord {
    serde_json::from_str(SAMPLE).unwrap()
}

#[test]
fn a_record_without_an_slo_uses_the_median_and_its_launch_commands_gpus() {
    let f = frontier(&sample());
    // the reference run: vllm serve … --tensor-parallel-size 2
    assert_eq!(f.gpus, Some(ServerGpus { count: 2, from: GpusFrom::LaunchCommand }));
    assert_eq!((f.per_user, f.slo_tok_s), (PerUser::Median, None));
    let contexts: Vec<u64> = f.lines.iter().map(|l| l.context).collect();
    assert_eq!(contexts, [8192, 131072], "the 128K × 64 error and the over-capacity cell are no points");
    let eight_k: Vec<(u32, f64, f64)> =
        f.lines[0].points.iter().map(|p| (p.concurrency, p.per_user_tok_s, p.tok_s_per_gpu)).collect();
    assert_eq!(eight_k, [(1, 174.5, 173.9 / 2.0), (64, 66.6, 4229.4 / 2.0), (128, 49.5, 6336.2 / 2.0)]);
    assert_eq!(f.lines[1].points.len(), 1);
}

#[test]
fn the_slos_percentile_is_the_per_user_speed() {
    let mut r = sample();
    r.settings.slo = Some("tok_s_p10>=60,ttft_p90<=2s".parse().unwrap());
    r.server_gpus = Some(ServerGpus { count: 4, from: GpusFrom::GpuCountFlag });
    for (i, c) in r.decode.iter_mut().enumerate() {
        let value = 100.0 - i as f64;
        c.slo_bounds = vec![crate::slo::BoundCheck {
            bound: "tok_s_p10".into(),
            limit: 60.0,
            value: Some(value),
            holds: value >= 60.0,
        }];
        c.slo_met = Some(true);
        c.usd_per_million_tokens = Some(1.5);
    }
    let f = frontier(&r);
    assert_eq!((f.per_user, f.slo_tok_s), (PerUser::Percentile(10), Some(60.0)));
    assert_eq!(f.gpus.unwrap().count, 4, "the user's count wins over the launch command's 2");
    let p = &f.lines[0].points[1];
    assert_eq!((p.concurrency, p.per_user_tok_s, p.tok_s_per_gpu), (64, 98.0, 4229.4 / 4.0));
    assert_eq!((p.usd_per_million_tokens, p.meets_slo), (Some(1.5), Some(true)));
    // a cell whose bound has no value (no request measured it) is no point
    r.decode[0].slo_bounds[0].value = None;
    assert_eq!(frontier(&r).lines[0].points.len(), 2);
}

#[test]
fn without_a_gpu_count_the_figures_are_per_server() {
    let mut r = sample();
    r.launch_command = Some("speedmatrix sim --profile seed".into());
    let f = frontier(&r);
    assert_eq!(f.gpus, None);
    assert_eq!(f.lines[0].points[2].tok_s_per_gpu, 6336.2);
    r.decode.clear();
    assert!(frontier(&r).is_empty());
}
