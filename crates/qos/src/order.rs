//! Ordering policies inside the device queue: which queued command the drive starts next.
//!
//! FIFO, SPTF and aged SPTF follow DiskSim's queue policies (spec/drive-model.md §2.1); the
//! default, [`Rpo`], is aged SPTF with a queue-scaled window, calibrated against WD's 22 TB
//! measurements (spec §2.2–2.3; crates/qos/tests/calibration.rs).

pub mod aged;
pub mod config;
pub mod fifo;
pub mod rpo;
pub mod sptf;

pub use aged::{AgedSptf, Aging};
pub use config::{OrderConfig, OrderConfigError, ORDER_NAMES};
pub use fifo::Fifo;
pub use rpo::{Rpo, DEFAULT_RPO_FACTOR};
pub use sptf::Sptf;

use drive::{Drive, MediaOp, Ns};

/// A command waiting in the device queue, as an ordering policy sees it.
#[derive(Clone, Copy, Debug)]
pub struct Candidate {
    pub id: u64,
    pub op: MediaOp,
    /// When the command entered the device (start of its inactive time).
    pub arrived: Ns,
    /// The earliest absolute time at which one of its duration limits expires, if any.
    pub deadline: Option<Ns>,
    /// Priority class index (0 = most urgent).
    pub class: usize,
}

/// Picks the next command to start.
pub trait OrderingPolicy {
    /// Index into `queue` (never empty) of the command to start at `now`.
    fn pick(&mut self, now: Ns, queue: &[Candidate], drive: &dyn Drive) -> usize;
}

/// SPTF cost of a candidate: the drive's estimate of the time from `now` until its media
/// transfer could begin (overhead + seek + settle + rotational wait; spec §1.1).
#[inline]
pub fn sptf_cost(now: Ns, c: &Candidate, drive: &dyn Drive) -> Ns {
    drive.positioning_time(now, &c.op)
}

/// Scratch space for asking the drive about a whole queue at once
/// ([`Drive::positioning_times`]), kept by a policy between picks.
#[derive(Clone, Debug, Default)]
pub struct Positions {
    ops: Vec<MediaOp>,
    times: Vec<Ns>,
}

impl Positions {
    /// The SPTF cost ([`sptf_cost`]) of each candidate of `queue` at `now`, in queue order.
    pub fn measure(&mut self, now: Ns, queue: &[Candidate], drive: &dyn Drive) -> &[Ns] {
        self.ops.clear();
        self.ops.extend(queue.iter().map(|c| c.op));
        drive.positioning_times(now, &self.ops, &mut self.times);
        &self.times
    }
}

/// Index of the smallest key (first on ties); 0 for an empty queue.
pub(crate) fn argmin<K: Ord>(queue: &[Candidate], mut key: impl FnMut(&Candidate) -> K) -> usize {
    let mut best: Option<(K, usize)> = None;
    for (i, c) in queue.iter().enumerate() {
        let k = key(c);
        let better = match &best {
            None => true,
            Some((b, _)) => k < *b,
        };
        if better {
            best = Some((k, i));
        }
    }
    best.map_or(0, |(_, i)| i)
}

/// Index of the smallest float cost among `(cost, candidate)` in queue order; ties go to the
/// oldest (then lowest id).
pub(crate) fn argmin_f64<'a>(costs: impl Iterator<Item = (f64, &'a Candidate)>) -> usize {
    let mut best: Option<(f64, Ns, u64, usize)> = None;
    for (i, (k, c)) in costs.enumerate() {
        let better = match &best {
            None => true,
            Some((b, arrived, id, _)) => k
                .total_cmp(b)
                .then((c.arrived, c.id).cmp(&(*arrived, *id)))
                .is_lt(),
        };
        if better {
            best = Some((k, c.arrived, c.id, i));
        }
    }
    best.map_or(0, |(.., i)| i)
}

#[cfg(test)]
mod tests;
