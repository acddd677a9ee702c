use super::*;

fn gpu(id: &str, power: f64, energy: Option<f64>, bits: u64) -> GpuSample {
    GpuSample {
        gpu: id.into(),
        power_w: Some(power),
        energy_j: energy,
        sm_clock_mhz: Some(1980.0),
        mem_clock_mhz: Some(2619.0),
        temp_c: Some(60.0 + power / 100.0),
        throttle_reasons: Some(bits),
        ..GpuSample::default()
    }
}

fn read(t: f64, gpus: Vec<GpuSample>) -> GpuRead {
    GpuRead { t, gpus }
}

#[test]
fn energy_comes_from_the_counter_scaled_to_the_window() {
    // GPU 0 draws 300 W then 500 W; its counter says 400 W on average over the 2 s sampled
    let reads = vec![
        read(0.0, vec![gpu("0", 300.0, Some(1000.0), 0), gpu("1", 100.0, Some(50.0), 0)]),
        read(1.0, vec![gpu("0", 400.0, Some(1400.0), 0), gpu("1", 100.0, Some(150.0), 0)]),
        read(2.0, vec![gpu("0", 500.0, Some(1800.0), reasons::SW_POWER_CAP), gpu("1", 100.0, Some(250.0), 0)]),
    ];
    let c = GpuCell::summarize(GpuSource::Dcgm, &reads, 2.5, 1000).unwrap();
    assert_eq!((c.samples, c.energy_from), (3, Some(EnergyFrom::Counter)));
    // (400 + 100) W × 2.5 s
    assert_eq!(c.energy_j, Some(1250.0));
    assert_eq!(c.joules_per_token, Some(1.25));
    assert!((c.wh_per_million_tokens.unwrap() - 1.25e6 / 3600.0).abs() < 1e-9);
    assert_eq!(c.power_w, Some(500.0), "trapezoid means 400 + 100");
    assert_eq!(c.throttle, Some(Throttle::Power));
    assert_eq!(c.gpus[0].throttle, Some(Throttle::Power));
    assert_eq!(c.gpus[1].throttle, Some(Throttle::None));
    assert_eq!(c.gpus[0].temp_c_max, Some(65.0));
    assert_eq!(c.gpus[0].sm_clock_mhz, Some(1980.0));
    assert_eq!(c.to_string(), "500 W · 1.2 J/token · power throttled");
}

#[test]
fn without_a_counter_on_every_gpu_power_is_integrated() {
    let reads = vec![
        read(0.0, vec![gpu("0", 200.0, Some(0.0), 0), gpu("1", 100.0, None, 0)]),
        read(2.0, vec![gpu("0", 400.0, Some(600.0), 0), gpu("1", 300.0, None, reasons::HW_THERMAL_SLOWDOWN)]),
    ];
    let c = GpuCell::summarize(GpuSource::Nvml, &reads, 2.0, 0).unwrap();
    assert_eq!(c.energy_from, Some(EnergyFrom::PowerIntegral));
    assert_eq!(c.energy_j, Some((300.0 + 200.0) * 2.0));
    assert_eq!((c.joules_per_token, c.wh_per_million_tokens), (None, None), "no tokens: no per-token figure");
    assert_eq!(c.throttle, Some(Throttle::Thermal));
}

#[test]
fn one_read_gives_power_but_no_energy_and_no_gpu_gives_nothing() {
    let c = GpuCell::summarize(GpuSource::Dcgm, &[read(0.5, vec![gpu("0", 250.0, Some(9.0), 0)])], 3.0, 10).unwrap();
    assert_eq!((c.power_w, c.energy_j, c.energy_from), (Some(250.0), None, None));
    assert_eq!(c.to_string(), "250 W");
    assert_eq!(GpuCell::summarize(GpuSource::Dcgm, &[read(0.0, vec![])], 3.0, 10), None);
    assert_eq!(GpuCell::summarize(GpuSource::Dcgm, &[], 3.0, 10), None);
    // a counter that went backwards (a driver reload) is not a negative energy
    let reads = vec![read(0.0, vec![gpu("0", 100.0, Some(500.0), 0)]), read(1.0, vec![gpu("0", 100.0, Some(5.0), 0)])];
    let c = GpuCell::summarize(GpuSource::Dcgm, &reads, 1.0, 10).unwrap();
    assert_eq!((c.energy_j, c.energy_from), (Some(100.0), Some(EnergyFrom::PowerIntegral)));
    // nor is a counter that never moved (an exporter collecting less often than the window)
    let reads =
        vec![read(0.0, vec![gpu("0", 100.0, Some(500.0), 0)]), read(1.0, vec![gpu("0", 100.0, Some(500.0), 0)])];
    let c = GpuCell::summarize(GpuSource::Dcgm, &reads, 1.0, 10).unwrap();
    assert_eq!((c.energy_j, c.energy_from), (Some(100.0), Some(EnergyFrom::PowerIntegral)));
}

#[test]
fn throttle_bits_are_classified_as_documented() {
    assert_eq!(Throttle::of_bits(0), Throttle::None);
    assert_eq!(Throttle::of_bits(0x1), Throttle::None, "idle is not throttling");
    assert_eq!(Throttle::of_bits(0x4), Throttle::Power);
    assert_eq!(Throttle::of_bits(0x8), Throttle::Power);
    assert_eq!(Throttle::of_bits(0x80), Throttle::Power);
    assert_eq!(Throttle::of_bits(0x20), Throttle::Thermal);
    assert_eq!(Throttle::of_bits(0x40 | 0x4), Throttle::PowerAndThermal);
    let json = serde_json::to_string(&[Throttle::None, Throttle::PowerAndThermal]).unwrap();
    assert_eq!(json, r#"["none","power_and_thermal"]"#);
}

#[test]
fn xid_and_ecc_count_what_happened_in_the_window() {
    let s = |xid, ecc| GpuSample { gpu: "0".into(), xid: Some(xid), ecc_errors: Some(ecc), ..GpuSample::default() };
    let old = GpuCell::summarize(GpuSource::Dcgm, &[read(0.0, vec![s(79, 3.0)]), read(1.0, vec![s(79, 3.0)])], 1.0, 1);
    let g = &old.unwrap().gpus[0];
    assert_eq!((g.xid, g.ecc_errors), (None, Some(0)), "an XID from before the window is not the cell's");
    let new = GpuCell::summarize(GpuSource::Dcgm, &[read(0.0, vec![s(0, 3.0)]), read(1.0, vec![s(48, 5.0)])], 1.0, 1);
    let g = &new.unwrap().gpus[0];
    assert_eq!((g.xid, g.ecc_errors), (Some(48), Some(2)));
}

#[test]
fn nvml_values_map_to_the_record_units() {
    let v = NvmlValues {
        index: 3,
        name: Some("NVIDIA H200".into()),
        power_mw: Some(312_500),
        energy_mj: Some(7_250_000),
        sm_clock_mhz: Some(1980),
        mem_clock_mhz: Some(3201),
        temp_c: Some(71),
        util_pct: Some(98),
        mem_used_bytes: Some(3 * 1024 * 1024 * 1024),
        throttle_reasons: Some(reasons::SW_POWER_CAP),
        ecc_errors: Some(0),
    };
    let s = GpuSample::from(v);
    assert_eq!((s.gpu.as_str(), s.name.as_deref()), ("3", Some("NVIDIA H200")));
    assert_eq!((s.power_w, s.energy_j), (Some(312.5), Some(7250.0)));
    assert_eq!(
        (s.sm_clock_mhz, s.mem_clock_mhz, s.temp_c, s.util_pct),
        (Some(1980.0), Some(3201.0), Some(71.0), Some(98.0))
    );
    assert_eq!(s.mem_used_mib, Some(3072.0));
    assert_eq!((s.throttle_reasons, s.xid, s.ecc_errors), (Some(4), None, Some(0.0)));
    let none = GpuSample::from(NvmlValues { index: 0, ..NvmlValues::default() });
    assert_eq!((none.power_w, none.energy_j), (None, None), "what NVML does not give stays absent");
}

#[test]
fn small_per_token_figures_keep_two_digits() {
    assert_eq!(sig2(0.042), "0.042");
    assert_eq!(sig2(0.5), "0.50");
    assert_eq!(sig2(1.94), "1.9");
    assert_eq!(sig2(12.4), "12");
}
