//! The throughput–interactivity frontier (methodology §11.7, issue 34): per context, one point per
//! measured concurrency — what each user gets (tok/s at the SLO's percentile) against what the
//! server makes per GPU. Moving right serves each user faster; moving up makes more tokens per
//! GPU-hour; the points trace what a configuration can trade between the two.

use crate::record::{CellStatus, DecodeCell, RunRecord};
use crate::server_gpus::ServerGpus;
use crate::slo::{BoundName, Figure};

/// Which per-user speed the points use.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PerUser {
    /// The SLO's own `tok_s_pNN` bound: the figure the capacity answer judges users by.
    Percentile(u8),
    /// The median per-request tok/s, where the SLO bounds no speed.
    Median,
}

/// One valid decode cell as a point of the frontier.
#[derive(Debug, Clone, PartialEq)]
pub struct FrontierPoint {
    pub concurrency: u32,
    /// Tok/s one user gets, as [`PerUser`] says.
    pub per_user_tok_s: f64,
    /// The cell's total tok/s divided by the server's GPUs (by 1 where their count is unknown).
    pub tok_s_per_gpu: f64,
    /// From `--cost-per-hour`, as the cell has it.
    pub usd_per_million_tokens: Option<f64>,
    /// From the GPU telemetry, as the cell has it.
    pub joules_per_token: Option<f64>,
    /// Whether the cell met the SLO.
    pub meets_slo: Option<bool>,
}

/// One context's points, in ascending concurrency.
#[derive(Debug, Clone, PartialEq)]
pub struct FrontierLine {
    pub context: u64,
    pub label: String,
    pub points: Vec<FrontierPoint>,
}

/// A run's frontier.
#[derive(Debug, Clone, PartialEq)]
pub struct Frontier {
    /// The count the per-GPU figures divide by; `None`: they are per server.
    pub gpus: Option<ServerGpus>,
    pub per_user: PerUser,
    /// The SLO's floor on per-user tok/s, where it has one.
    pub slo_tok_s: Option<f64>,
    /// Contexts with at least one point, in ascending context.
    pub lines: Vec<FrontierLine>,
}

impl Frontier {
    pub fn is_empty(&self) -> bool {
        self.lines.is_empty()
    }
}

/// The frontier of `record`'s valid decode cells.
pub fn frontier(record: &RunRecord) -> Frontier {
    let tok_s_bound = record.settings.slo.as_ref().and_then(|s| s.bounds.iter().find(|b| b.figure == Figure::TokS));
    let per_user = tok_s_bound.map_or(PerUser::Median, |b| PerUser::Percentile(b.percentile));
    // a record from before the count was kept (or imported) still names its launch command
    let gpus = record.server_gpus.or_else(|| ServerGpus::resolve(None, record.launch_command.as_deref()));
    let divisor = f64::from(gpus.map_or(1, |g| g.count));
    let mut lines: Vec<FrontierLine> = Vec::new();
    for cell in record.decode.iter().filter(|c| c.status == Some(CellStatus::Valid)) {
        let Some(point) = point(cell, per_user, divisor) else { continue };
        match lines.iter_mut().find(|l| l.context == cell.context) {
            Some(line) => line.points.push(point),
            None => lines.push(FrontierLine { context: cell.context, label: cell.label.clone(), points: vec![point] }),
        }
    }
    lines.sort_by_key(|l| l.context);
    for line in &mut lines {
        line.points.sort_by_key(|p| p.concurrency);
        // a repeated cell is one point: its last measurement, as the matrix shows it
        line.points.dedup_by(|later, earlier| {
            let same = later.concurrency == earlier.concurrency;
            if same {
                std::mem::swap(later, earlier);
            }
            same
        });
    }
    Frontier { gpus, per_user, slo_tok_s: tok_s_bound.map(|b| b.limit), lines }
}

/// A cell's point; `None` without the figures it needs.
fn point(cell: &DecodeCell, per_user: PerUser, divisor: f64) -> Option<FrontierPoint> {
    let per_user_tok_s = match per_user {
        PerUser::Percentile(p) => cell.slo_bounds.iter().find_map(|b| match &b.bound {
            BoundName::Key(k) if k.figure == Figure::TokS && k.percentile == p => b.value,
            _ => None,
        })?,
        PerUser::Median => cell.per_request_tok_s?,
    };
    let total = cell.total_tok_s?;
    (per_user_tok_s.is_finite() && total.is_finite()).then(|| FrontierPoint {
        concurrency: cell.concurrency,
        per_user_tok_s,
        tok_s_per_gpu: total / divisor,
        usd_per_million_tokens: cell.usd_per_million_tokens,
        joules_per_token: cell.gpu.as_ref().and_then(|g| g.joules_per_token),
        meets_slo: cell.slo_met,
    })
}

#[cfg(test)]
mod tests;
