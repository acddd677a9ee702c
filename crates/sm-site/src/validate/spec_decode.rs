//! A decode cell's speculative-decoding figures (methodology §14.2), checked like the rest: only a
//! valid cell carries them; the acceptance length a finite number of tokens per step from 1 up,
//! the acceptance rate a share from 0 to 1, at least one draft, and the length agreeing with
//! 1 + accepted ÷ drafts as the record's rounding allows.

use sm_core::record::{CellStatus, DecodeCell};

use super::{Refusal, figure};

/// Tokens per verification step: engines draft a handful of tokens, never hundreds.
pub const MAX_ACCEPTANCE_LENGTH: f64 = 1000.0;

pub fn cell(at: &str, c: &DecodeCell) -> Result<(), Refusal> {
    let Some(s) = c.spec_decode else { return Ok(()) };
    let status = c.status();
    if status != CellStatus::Valid {
        return Err(Refusal::FigureOfInvalid { at: at.to_string(), status: status.name(), field: "spec_decode" });
    }
    figure(at, "spec_decode.acceptance_length", Some(s.acceptance_length), MAX_ACCEPTANCE_LENGTH)?;
    figure(at, "spec_decode.acceptance_rate", Some(s.acceptance_rate), 1.0)?;
    let incoherent = |why: String| Err(Refusal::Incoherent { at: at.to_string(), why });
    if s.acceptance_length < 1.0 {
        return incoherent(format!(
            "spec_decode.acceptance_length is {}: a step makes at least 1 token",
            s.acceptance_length
        ));
    }
    if s.drafts == 0 {
        return incoherent("spec_decode without any draft".into());
    }
    let length = 1.0 + s.accepted as f64 / s.drafts as f64;
    if (length - s.acceptance_length).abs() > 0.01 * length {
        return incoherent(format!(
            "spec_decode.acceptance_length is {} but 1 + accepted ÷ drafts is {length:.3}",
            s.acceptance_length
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use sm_core::spec_decode::SpecDecode;

    use super::*;

    #[test]
    fn figures_are_checked_for_range_and_coherence() {
        let ok = SpecDecode { acceptance_length: 2.6, acceptance_rate: 0.4, drafts: 10, accepted: 16 };
        let c = |s: SpecDecode, status| DecodeCell { status: Some(status), spec_decode: Some(s), ..Default::default() };
        assert!(cell("x", &c(ok, CellStatus::Valid)).is_ok());
        assert!(cell("x", &DecodeCell::default()).is_ok());
        assert!(matches!(cell("x", &c(ok, CellStatus::Error)), Err(Refusal::FigureOfInvalid { .. })));
        for bad in [
            SpecDecode { acceptance_rate: 1.5, ..ok },
            SpecDecode { acceptance_rate: f64::NAN, ..ok },
            SpecDecode { acceptance_length: f64::INFINITY, ..ok },
            SpecDecode { acceptance_length: 0.5, accepted: 0, ..ok },
            SpecDecode { drafts: 0, ..ok },
            SpecDecode { acceptance_length: 3.5, ..ok },
        ] {
            assert!(cell("x", &c(bad, CellStatus::Valid)).is_err(), "{bad:?}");
        }
    }
}
