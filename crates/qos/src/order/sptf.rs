//! Shortest positioning time first: DiskSim SPTF_OPT (queue policy 8, [DS]
//! src/disksim_ioqueue.h). Greedy over the whole queue.

use super::{sptf_cost, Candidate, OrderingPolicy};
use drive::{Drive, Ns};

/// Starts the command whose media transfer could begin soonest (ties: oldest).
#[derive(Clone, Copy, Debug, Default)]
pub struct Sptf;

impl OrderingPolicy for Sptf {
    fn pick(&mut self, now: Ns, queue: &[Candidate], drive: &dyn Drive) -> usize {
        super::argmin(queue, |c| (sptf_cost(now, c, drive), c.arrived, c.id))
    }

    /// Ties by (arrived, id).
    fn order_free(&self) -> bool {
        true
    }

    fn pick_timed(&mut self, _now: Ns, queue: &[Candidate], times: &[Ns]) -> Option<usize> {
        if times.len() != queue.len() {
            return None;
        }
        let mut times = times.iter();
        Some(super::argmin(queue, |c| {
            (times.next().copied().unwrap_or(Ns::MAX), c.arrived, c.id)
        }))
    }
}
