use clap::Parser;

use super::*;
use sm_bench::CellTiming;
use sm_core::capacity::CapacityRule;
use sm_core::record::Api;
use sm_core::slo::DEFAULT_SLO;
use sm_core::slo::Slo;

#[derive(Debug, clap::Parser)]
struct Cli {
    #[command(flatten)]
    run: RunArgs,
}

fn args(flags: &[&str]) -> RunArgs {
    Cli::try_parse_from(std::iter::once("run").chain(flags.iter().copied())).expect("valid flags").run
}

const SAMPLE: &str = include_str!("../../../../tests/data/run-sample.json");

/// A directory holding the sample run, edited by `edit`.
fn resumable(edit: impl FnOnce(&mut serde_json::Value)) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let mut v: serde_json::Value = serde_json::from_str(SAMPLE).unwrap();
    edit(&mut v);
    std::fs::write(dir.path().join(RUN_FILE), v.to_string()).unwrap();
    dir
}

#[test]
fn without_flags_a_server_run_gets_the_defaults() {
    let s = Settings::resolve(args(&["--url", "http://h:1"])).unwrap();
    assert_eq!(s.engine, Engine::Server { url: "http://h:1".into() });
    assert_eq!(s.output, Output::Default);
    assert_eq!(s.run.contexts, RunSettings::default().contexts);
    assert_eq!(s.run.concurrency, RunSettings::default().concurrency);
    assert_eq!((s.run.timing.duration, s.run.max_tokens), (CellTiming::DEFAULT_DURATION, sm_bench::DEFAULT_MAX_TOKENS));
    assert_eq!(
        (s.run.warmup, s.run.timing.ready_stable),
        (Some(sm_bench::DEFAULT_WARMUP), CellTiming::DEFAULT_READY_STABLE)
    );
    assert_eq!((s.run.api, s.run.rule, s.run.prefill_at_max), (Api::Chat, CapacityRule::Reference, true));
    assert_eq!((s.run.label.as_deref(), s.progress), (None, Progress::Auto));
}

#[test]
fn the_built_in_engine_gets_the_demo_matrix_unless_a_matrix_is_chosen() {
    let s = Settings::resolve(args(&[])).unwrap();
    let Engine::Demo { ref profile, port: None, demo_matrix: true } = s.engine else { panic!("{:?}", s.engine) };
    assert_eq!(profile, DEMO_PROFILE);
    assert_eq!(s.run.contexts, vec![Tokens(8 * K), Tokens(64 * K), Tokens(256 * K)]);
    assert_eq!((s.run.concurrency.as_slice(), s.run.timing.duration), (&[1, 16, 64][..], Duration::from_secs(5)));
    assert_eq!((s.run.warmup, s.run.timing.ready_stable), (None, Duration::from_secs(1)));
    assert_eq!(s.run.label.as_deref(), Some(format!("simulated engine, profile {DEMO_PROFILE}").as_str()));

    // one matrix flag and the demo's matrix is off as a whole; the label stays, a flag's wins
    let s = Settings::resolve(args(&["--concurrency", "2", "--sim-profile", "tiny", "--label", "mine"])).unwrap();
    assert!(matches!(s.engine, Engine::Demo { ref profile, demo_matrix: false, .. } if profile == "tiny"));
    assert_eq!((s.run.contexts, s.run.concurrency), (RunSettings::default().contexts, vec![2]));
    assert_eq!((s.run.timing.duration, s.run.warmup), (CellTiming::DEFAULT_DURATION, Some(sm_bench::DEFAULT_WARMUP)));
    assert_eq!(s.run.label.as_deref(), Some("mine"));
}

#[test]
fn a_resume_takes_what_the_run_recorded_and_flags_win_over_it() {
    let dir = resumable(|v| {
        v["settings"]["warmup_s"] = 0.0.into();
        v["settings"]["stall_timeout_s"] = 9.0.into();
    });
    let d = dir.path().to_str().unwrap();
    let s = Settings::resolve(args(&["--resume", d])).unwrap();
    assert_eq!(s.engine, Engine::Server { url: "http://127.0.0.1:8000".into() });
    assert_eq!(s.output, Output::Resume { dir: dir.path().to_path_buf(), retry_failed: false });
    assert_eq!(s.run.concurrency, vec![1, 64, 128]);
    assert_eq!(s.run.contexts, vec![Tokens(8192), Tokens(131_072)]);
    // the recorded extra row (the one at the maximum) is asked for again, not added a second time
    assert_eq!((s.run.prefill_contexts.as_slice(), s.run.prefill_at_max), (&[Tokens(262_144)][..], false));
    assert_eq!(
        (s.run.timing.duration, s.run.warmup, s.run.timing.idle_timeout),
        (Duration::from_secs(30), None, Duration::from_secs(9))
    );
    assert_eq!(s.run.timing.ready_timeout, CellTiming::DEFAULT_READY_TIMEOUT, "not recorded: the default");
    assert_eq!((s.model.as_deref(), s.model_from_user), (Some("ling"), false));
    assert_eq!(s.run.label.as_deref(), Some("Ling-3.0-flash-int4 on 2× H200 NVL (sample)"));
    assert!(s.resumed.is_some());

    let s = Settings::resolve(args(&["--resume", d, "--duration", "5s", "--warmup", "1s", "--retry-failed"])).unwrap();
    assert_eq!(
        (s.run.timing.duration, s.run.warmup, s.run.timing.idle_timeout),
        (Duration::from_secs(5), Some(Duration::from_secs(1)), Duration::from_secs(9))
    );
    assert_eq!(s.output, Output::Resume { dir: dir.path().to_path_buf(), retry_failed: true });
}

#[test]
fn a_resumed_built_in_engine_is_restarted_with_its_recorded_profile_on_its_port() {
    // recorded as data
    let dir = resumable(|v| {
        v["server"]["url"] = "http://127.0.0.1:40123".into();
        v["server"]["extra"][SIM_PROFILE_KEY] = "tiny".into();
    });
    let s = Settings::resolve(args(&["--resume", dir.path().to_str().unwrap()])).unwrap();
    assert_eq!(s.engine, Engine::Demo { profile: "tiny".into(), port: Some(40123), demo_matrix: false });
    // a record from before the profile was kept as data: from its launch command
    let dir = resumable(|v| {
        v["server"]["url"] = "http://127.0.0.1:40124".into();
        v["launch_command"] = format!("{SIM_LAUNCH}seed-x").into();
    });
    let s = Settings::resolve(args(&["--resume", dir.path().to_str().unwrap()])).unwrap();
    assert_eq!(s.engine, Engine::Demo { profile: "seed-x".into(), port: Some(40124), demo_matrix: false });
}

#[test]
fn bad_combinations_and_recorded_values_out_of_range_are_refused_with_what_to_do() {
    let e = Settings::resolve(args(&["--retry-failed"])).unwrap_err();
    assert!(format!("{e:#}").contains("--retry-failed works with --resume DIR"), "{e:#}");
    let dir = resumable(|v| v["settings"]["duration_s"] = 0.0.into());
    let e = Settings::resolve(args(&["--resume", dir.path().to_str().unwrap()])).unwrap_err();
    let msg = format!("{e:#}");
    assert!(msg.contains("cannot resume") && msg.contains("out of range"), "{msg}");
    let dir = resumable(|v| v["settings"]["prompt_source"] = "tokenizer_file".into());
    let e = Settings::resolve(args(&["--resume", dir.path().to_str().unwrap()])).unwrap_err();
    assert!(format!("{e:#}").contains("pass the same --tokenizer PATH again"), "{e:#}");
}

#[test]
fn quiet_is_a_progress_setting() {
    assert_eq!(Settings::resolve(args(&["--url", "http://h:1", "-q"])).unwrap().progress, Progress::Quiet);
    let s = Settings::resolve(args(&["--url", "http://h:1", "--progress", "plain", "--api", "completions"])).unwrap();
    assert_eq!((s.progress, s.run.api), (Progress::Plain, Api::Completions));
}

#[test]
fn the_service_level_price_and_search_resolve_like_the_other_settings() {
    let s = Settings::resolve(args(&["--url", "http://h:1"])).unwrap();
    assert_eq!((s.run.slo.to_string().as_str(), s.run.cost_per_hour, s.run.find_capacity), (DEFAULT_SLO, None, false));
    let given =
        ["--url", "http://h:1", "--slo", "tok_s>=30,tbt_p99<=0.1s", "--cost-per-hour", "$7.5", "--find-capacity"];
    let s = Settings::resolve(args(&given)).unwrap();
    assert_eq!(s.run.slo.to_string(), "tok_s_p50>=30,tbt_p99<=100ms");
    assert_eq!((s.run.cost_per_hour, s.run.find_capacity), (Some(7.5), true));

    // a resume takes them from run.json (a record before 1.1 has none: the defaults); flags win
    let dir = resumable(|v| {
        v["settings"]["slo"] = "ttft_p99<=3s".into();
        v["settings"]["cost_per_hour_usd"] = 4.0.into();
        v["settings"]["find_capacity"] = true.into();
    });
    let d = dir.path().to_str().unwrap();
    let s = Settings::resolve(args(&["--resume", d])).unwrap();
    assert_eq!(
        (s.run.slo.to_string().as_str(), s.run.cost_per_hour, s.run.find_capacity),
        ("ttft_p99<=3s", Some(4.0), true)
    );
    let s = Settings::resolve(args(&["--resume", d, "--cost-per-hour", "5"])).unwrap();
    assert_eq!(s.run.cost_per_hour, Some(5.0));
    let old = resumable(|_| {});
    let s = Settings::resolve(args(&["--resume", old.path().to_str().unwrap()])).unwrap();
    assert_eq!((s.run.slo, s.run.find_capacity), (Slo::default(), false));

    // a run.json whose SLO cannot be read is not a run this version can resume
    let broken = resumable(|v| v["settings"]["slo"] = "ttft<=3".into());
    let err = Settings::resolve(args(&["--resume", broken.path().to_str().unwrap()])).unwrap_err();
    assert!(format!("{err:#}").contains("with a unit"), "{err:#}");
}

#[test]
fn off_is_none_from_a_flag_and_from_a_record_alike() {
    let s = Settings::resolve(args(&["--url", "http://h:1", "--warmup", "0", "--metrics-interval", "0"])).unwrap();
    assert_eq!((s.run.warmup, s.run.timing.metrics_interval), (None, None));
    let dir = resumable(|v| {
        v["settings"]["warmup_s"] = 0.0.into();
        v["settings"]["metrics_interval_s"] = 0.0.into();
    });
    let d = dir.path().to_str().unwrap();
    let s = Settings::resolve(args(&["--resume", d])).unwrap();
    assert_eq!((s.run.warmup, s.run.timing.metrics_interval), (None, None));
    // a flag turns it on again over the record
    let s = Settings::resolve(args(&["--resume", d, "--metrics-interval", "500ms"])).unwrap();
    assert_eq!(s.run.timing.metrics_interval, Some(Duration::from_millis(500)));
}

#[test]
fn the_shortest_window_given_must_fit_the_longest_and_the_default_one_is_cut_to_it() {
    let s = Settings::resolve(args(&["--url", "http://h:1", "--precision", "2%", "--duration", "3s"])).unwrap();
    let p = s.run.timing.precision.unwrap();
    assert_eq!((p.pct, p.min_duration), (2.0, Duration::from_secs(3)));
    let given = ["--url", "http://h:1", "--precision", "2%", "--duration", "3s", "--min-duration", "4s"];
    let e = Settings::resolve(args(&given)).unwrap_err();
    assert!(format!("{e:#}").contains("--min-duration 4s is longer than --duration 3s"), "{e:#}");
    // a resumed run's shortest window is held to a shorter --duration as a flag's would be
    let dir = resumable(|v| {
        v["settings"]["precision_pct"] = 1.0.into();
        v["settings"]["min_duration_s"] = 10.0.into();
    });
    let d = dir.path().to_str().unwrap();
    let s = Settings::resolve(args(&["--resume", d])).unwrap();
    let p = s.run.timing.precision.unwrap();
    assert_eq!((p.pct, p.min_duration), (1.0, Duration::from_secs(10)));
    let e = Settings::resolve(args(&["--resume", d, "--duration", "5s"])).unwrap_err();
    assert!(format!("{e:#}").contains("is longer than --duration 5s"), "{e:#}");
}
