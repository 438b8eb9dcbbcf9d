//! Ordering policies inside the device queue: which queued command the drive starts next.

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
