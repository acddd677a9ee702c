//! The fields speedmatrix.run/1.1 added, checked like the rest: the SLO, the
//! price, each valid cell's judgement, goodput and cost, and `capacity[]`,
//! whose every answer must name a context of the run and, when it claims
//! users, the measured cell that met the SLO with that many.

use std::collections::BTreeSet;

use sm_core::answer::{BoundedBy, capacities};
use sm_core::record::{CellStatus, DecodeCell, RunRecord};
use sm_core::slo::{BoundCheck, BoundName, Figure};

use super::sections::{self, MAX_USD};
use super::{MAX_MS, MAX_TOK_S, Refusal, figure};

/// Bounds of one SLO (a figure at a percentile each: `tok_s_p10`, `ttft_p90`, …).
pub const MAX_SLO_BOUNDS: usize = 16;

/// The largest figure a bound on `figure` takes: tok/s for a speed, ms for a time.
fn bound_limit(figure: Option<Figure>) -> f64 {
    if figure == Some(Figure::TokS) { MAX_TOK_S } else { MAX_MS }
}

/// The SLO and the price of the run.
pub fn settings(record: &RunRecord) -> Result<(), Refusal> {
    let s = &record.settings;
    if let Some(slo) = &s.slo {
        if slo.bounds.len() > MAX_SLO_BOUNDS {
            return Err(Refusal::TooMany {
                what: "bounds in settings.slo",
                name: "MAX_SLO_BOUNDS",
                found: slo.bounds.len(),
                limit: MAX_SLO_BOUNDS,
            });
        }
        for b in &slo.bounds {
            figure("settings.slo", "a limit", Some(b.limit), bound_limit(Some(b.figure)))?;
        }
    }
    figure("settings", "cost_per_hour_usd", s.cost_per_hour_usd, MAX_USD)
}

/// A decode cell's judgement: only a valid cell carries it (its goodput and cost are in the
/// cell's figure table, checked with the rest).
pub fn cell(at: &str, c: &DecodeCell, priced: bool) -> Result<(), Refusal> {
    let status = c.status();
    let carried = [("slo_met", c.slo_met.is_some()), ("slo_bounds", !c.slo_bounds.is_empty())];
    if let Some((field, _)) = carried.iter().find(|(_, has)| *has).filter(|_| status != CellStatus::Valid) {
        return Err(Refusal::FigureOfInvalid { at: at.to_string(), status: status.name(), field });
    }
    if c.usd_per_million_tokens.is_some() && !priced {
        return Err(Refusal::Incoherent {
            at: at.to_string(),
            why: "usd_per_million_tokens without settings.cost_per_hour_usd".into(),
        });
    }
    bounds(at, "bounds in one cell's slo_bounds", &c.slo_bounds)
}

/// A judgement's bounds (a decode cell's, a replay level's): as many as an SLO holds, each a
/// bound this version knows, its limit and value in the figure's range.
pub fn bounds(at: &str, what: &'static str, bounds: &[BoundCheck]) -> Result<(), Refusal> {
    if bounds.len() > MAX_SLO_BOUNDS {
        return Err(Refusal::TooMany { what, name: "MAX_SLO_BOUNDS", found: bounds.len(), limit: MAX_SLO_BOUNDS });
    }
    for b in bounds {
        if let BoundName::Unknown(text) = &b.bound {
            return Err(Refusal::Incoherent {
                at: at.to_string(),
                why: format!("slo_bounds names an unknown bound \"{text}\""),
            });
        }
        figure(at, "an slo_bounds limit", Some(b.limit), bound_limit(b.bound.figure()))?;
        figure(at, "an slo_bounds value", b.value, bound_limit(b.bound.figure()))?;
    }
    Ok(())
}

/// `capacity[]`: one answer per decode context of the run, each backed by its cells.
pub fn capacity(record: &RunRecord) -> Result<(), Refusal> {
    let decode: BTreeSet<u64> = record.decode.iter().map(|c| c.context).collect();
    let mut seen = BTreeSet::new();
    let priced = record.settings.cost_per_hour_usd.is_some();
    for a in &record.capacity {
        let at = format!("capacity at {}", a.label);
        let wrong = |why: String| Err(Refusal::Incoherent { at: at.clone(), why });
        if !decode.contains(&a.context) {
            return wrong(format!("context {} is not a decode context of the run", a.context));
        }
        if !seen.insert(a.context) {
            return wrong(format!("context {} has two answers", a.context));
        }
        if let BoundedBy::Slo(BoundName::Unknown(text)) = &a.bounded_by {
            return wrong(format!("bounded_by names an unknown bound \"slo:{text}\""));
        }
        // the users claimed must be a measured cell of that context that met the SLO
        let proving = record.decode_cell(a.context, a.max_users);
        let proven = proving.is_some_and(|c| c.status() == CellStatus::Valid && c.slo_met == Some(true));
        match (a.max_users, a.cell) {
            (0, None) => {}
            (n, Some(c)) if n == c && proven => {}
            (n, _) => return wrong(format!("max_users {n} is not a measured cell of this context that met the SLO")),
        }
        if let Some(f) = a.failed_cell.filter(|&f| record.decode_cell(a.context, f).is_none()) {
            return wrong(format!("failed_cell {f} is not a measured cell of this context"));
        }
        if !priced && (a.usd_per_user_hour.is_some() || a.usd_per_million_tokens.is_some()) {
            return wrong("a cost without settings.cost_per_hour_usd".into());
        }
        sections::check(&at, a)?;
    }
    judgements_follow(record)?;
    follows_from_the_cells(record)
}

/// Every valid cell's judgement is the SLO's: its bounds are the SLO's, in its order, with the
/// same limits; each `holds` is what its value says; `slo_met` is that every bound holds.
fn judgements_follow(record: &RunRecord) -> Result<(), Refusal> {
    let Some(slo) = &record.settings.slo else { return Ok(()) };
    for c in record.decode.iter().filter(|c| c.status() == CellStatus::Valid && c.slo_met.is_some()) {
        let wrong =
            |why: String| Err(Refusal::Incoherent { at: format!("decode cell {} × {}", c.label, c.concurrency), why });
        let same = c.slo_bounds.len() == slo.bounds.len()
            && c.slo_bounds.iter().zip(&slo.bounds).all(|(got, b)| got.bound == b.key().into() && got.limit == b.limit);
        if !same {
            return wrong(format!("slo_bounds are not the bounds of settings.slo ({slo})"));
        }
        if let Some((got, b)) =
            c.slo_bounds.iter().zip(&slo.bounds).find(|(got, b)| got.holds != got.value.is_some_and(|v| b.holds(v)))
        {
            return wrong(format!(
                "slo_bounds says {} {} at {:?}",
                got.bound,
                if got.holds { "holds" } else { "fails" },
                b.limit
            ));
        }
        if c.slo_met != Some(c.slo_bounds.iter().all(|b| b.holds)) {
            return wrong("slo_met is not whether every bound holds".into());
        }
    }
    Ok(())
}

/// The answer is a pure function of the judged cells (methodology §11.3): the site works it out
/// again and refuses an upload whose `capacity[]` says anything else (a bound, a limit, a price).
fn follows_from_the_cells(record: &RunRecord) -> Result<(), Refusal> {
    if record.capacity.is_empty() {
        return Ok(());
    }
    let computed = capacities(record);
    let differs = record.capacity.iter().find(|a| !computed.contains(a));
    match differs {
        None if computed.len() == record.capacity.len() => Ok(()),
        None => Err(Refusal::Incoherent {
            at: "capacity".into(),
            why: format!("the cells give {} answers, the file {}", computed.len(), record.capacity.len()),
        }),
        Some(a) => {
            let ours = computed.iter().find(|c| c.context == a.context);
            let said =
                ours.map_or_else(|| "no answer".to_string(), |c| format!("{} users ({})", c.max_users, c.bounded_by));
            Err(Refusal::Incoherent {
                at: format!("capacity at {}", a.label),
                why: format!(
                    "does not follow from the cells: they give {said}, the file says {} users ({})",
                    a.max_users, a.bounded_by
                ),
            })
        }
    }
}
