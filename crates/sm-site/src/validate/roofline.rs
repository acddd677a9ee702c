//! The memory-bandwidth roofline's fields (methodology §14.4), checked like the rest: the bound
//! and the fraction are in the decode cell's figure table (finite, in range, only a valid cell
//! carries them), and the model shape in the settings made of finite, non-negative numbers with a positive size of weight.

use sm_core::record::RunRecord;

use super::{Refusal, figure};

pub(super) fn settings(record: &RunRecord) -> Result<(), Refusal> {
    let Some(s) = &record.settings.model_shape else { return Ok(()) };
    let at = "settings.model_shape";
    figure(at, "active_params", Some(s.shape.active_params), f64::MAX)?;
    figure(at, "bytes_per_weight", Some(s.shape.bytes_per_weight), f64::MAX)?;
    figure(at, "kv_bytes_per_token", Some(s.shape.kv_bytes_per_token), f64::MAX)?;
    if s.shape.bytes_per_weight <= 0.0 {
        return Err(Refusal::Incoherent { at: at.into(), why: "bytes_per_weight must be above 0".into() });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::super::check;
    use sm_core::record::RunRecord;
    use sm_core::roofline::ModelShape;
    use sm_core::roofline_record::{RecordedShape, ShapeSource};

    fn sample() -> RunRecord {
        serde_json::from_str(include_str!("../../../../tests/data/run-sample.json")).unwrap()
    }

    #[test]
    fn roofline_figures_are_finite_non_negative_and_of_valid_cells() {
        let mut r = sample();
        let valid = r.decode.iter().position(|c| c.total_tok_s.is_some()).unwrap();
        r.decode[valid].roofline_tok_s = Some(1000.0);
        r.decode[valid].roofline_fraction = Some(0.61);
        let shape = ModelShape { active_params: 8e9, bytes_per_weight: 2.0, kv_bytes_per_token: 131072.0 };
        r.settings.model_shape = Some(RecordedShape { shape, source: ShapeSource::Flags, config_file: None });
        assert_eq!(check(&r), Ok(()));
        for bad in [f64::NAN, f64::INFINITY, -0.5] {
            let mut b = r.clone();
            b.decode[valid].roofline_fraction = Some(bad);
            let e = check(&b).unwrap_err().to_string();
            assert!(e.contains("roofline_fraction"), "{bad}: {e}");
        }
        let mut b = r.clone();
        b.settings.model_shape.as_mut().unwrap().shape.bytes_per_weight = 0.0;
        assert!(check(&b).unwrap_err().to_string().contains("bytes_per_weight"));
        if let Some(invalid) = r.decode.iter().position(|c| c.total_tok_s.is_none()) {
            let mut b = r.clone();
            b.decode[invalid].roofline_tok_s = Some(1.0);
            assert!(check(&b).unwrap_err().to_string().contains("roofline_tok_s"));
        }
    }
}
