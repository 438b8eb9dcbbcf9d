//! Aged SPTF: DiskSim ASPTF_OPT (queue policy 14) as in `ioqueue_get_request_from_opt_sptf_queue`
//! (DiskSim src/disksim_ioqueue.c). The effective cost of a command is
//! its positioning time lowered by its age, so long-waiting commands eventually win.

use super::{sptf_cost, Candidate, OrderingPolicy};
use drive::{Drive, Ns};

/// How age lowers the cost.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Aging {
    /// `eff = pos − rate · age`: `rate` ns of cost per ns waited (DiskSim's `to_time`·0.001;
    /// calibration tried 0.02–0.03).
    Additive { rate: f64 },
    /// `eff = pos · (W − age) / W` with the window `W` in ns (DiskSim multiplicative aging).
    Multiplicative { window: Ns },
}

/// Aged shortest positioning time first.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct AgedSptf {
    pub aging: Aging,
}

impl AgedSptf {
    pub fn new(aging: Aging) -> Self {
        Self { aging }
    }

    /// The effective cost of `c` at `now` (lower goes first).
    pub fn cost(&self, now: Ns, c: &Candidate, drive: &dyn Drive) -> f64 {
        self.cost_at(now, c, sptf_cost(now, c, drive))
    }

    /// [`Self::cost`] given the candidate's positioning time.
    fn cost_at(&self, now: Ns, c: &Candidate, positioning: Ns) -> f64 {
        let pos = positioning as f64;
        let age = now.saturating_sub(c.arrived) as f64;
        match self.aging {
            Aging::Additive { rate } => pos - rate * age,
            Aging::Multiplicative { window } => pos * (1.0 - age / (window.max(1) as f64)),
        }
    }
}

impl OrderingPolicy for AgedSptf {
    fn pick(&mut self, now: Ns, queue: &[Candidate], drive: &dyn Drive) -> usize {
        super::argmin_f64(queue.iter().map(|c| (self.cost(now, c, drive), c)))
    }

    /// Ties by (arrived, id).
    fn order_free(&self) -> bool {
        true
    }

    fn pick_timed(&mut self, now: Ns, queue: &[Candidate], times: &[Ns]) -> Option<usize> {
        if times.len() != queue.len() {
            return None;
        }
        let costs = queue
            .iter()
            .zip(times)
            .map(|(c, &t)| (self.cost_at(now, c, t), c));
        Some(super::argmin_f64(costs))
    }
}
