//! First come, first served: DiskSim FCFS (queue policy 1, [DS] src/disksim_ioqueue.h).

use super::{Candidate, OrderingPolicy};
use drive::{Drive, Ns};

/// Starts commands in arrival order (ties by id).
#[derive(Clone, Copy, Debug, Default)]
pub struct Fifo;

impl OrderingPolicy for Fifo {
    fn pick(&mut self, _now: Ns, queue: &[Candidate], _drive: &dyn Drive) -> usize {
        super::argmin(queue, |c| (c.arrived, c.id))
    }

    /// Ties by id.
    fn order_free(&self) -> bool {
        true
    }

    fn pick_timed(&mut self, _now: Ns, queue: &[Candidate], _times: &[Ns]) -> Option<usize> {
        Some(super::argmin(queue, |c| (c.arrived, c.id)))
    }
}
