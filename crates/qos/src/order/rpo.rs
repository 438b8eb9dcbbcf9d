//! The default ordering: SPTF with DiskSim's multiplicative aging
//! ([DS] src/disksim_ioqueue.c `ioqueue_get_request_from_opt_sptf_queue`) whose aging window
//! follows the load: `W = factor × queued commands × mean time between dispatches`, i.e. a
//! multiple of the time the drive needs to work through its queue once.
//!
//! Why: plain SPTF matches the published IOPS but its p99 is ~3× too high at QD32;
//! a fixed window either does nothing at high QD or costs IOPS at low QD. Scaling W with the
//! queue keeps p99 ≈ 1.6–1.7 × mean at every depth, as WD's measurements show, for a
//! few percent of IOPS (calibration table in crates/qos/tests/calibration.rs).

use super::{
    below_2_63, small_ns_to_f64, sptf_cost, Candidate, OrderingPolicy, Positions, QueueMemos,
};
use drive::{Drive, Ns};

/// Default `factor` (calibrated against B1, experiments/README.md).
pub const DEFAULT_RPO_FACTOR: f64 = 2.2;

/// Weight of one new interval in the running mean (about the last 64 dispatches).
const INTERVAL_GAIN: f64 = 1.0 / 64.0;

/// Queue-scaled aged SPTF.
#[derive(Clone, Debug)]
pub struct Rpo {
    factor: f64,
    /// Previous dispatch and whether commands were left waiting after it (the drive then
    /// went straight on, so the gap to the next dispatch is a pure service interval).
    last: Option<(Ns, bool)>,
    /// Running mean time between back-to-back dispatches, once one was seen.
    interval: Option<f64>,
    positions: Positions,
}

impl Rpo {
    pub fn new(factor: f64) -> Self {
        Self {
            factor,
            last: None,
            interval: None,
            positions: Positions::default(),
        }
    }

    pub fn factor(&self) -> f64 {
        self.factor
    }

    /// The aging window for a queue of `queued` commands (None until a service interval was seen).
    pub fn window(&self, queued: usize) -> Option<f64> {
        self.interval.map(|s| self.factor * queued as f64 * s)
    }

    /// Effective cost `pos · (W − age) / W` (lower goes first).
    pub fn cost(now: Ns, c: &Candidate, drive: &dyn Drive, window: Option<f64>) -> f64 {
        let pos = sptf_cost(now, c, drive) as f64;
        match window {
            Some(w) if w > 0.0 => pos * (1.0 - now.saturating_sub(c.arrived) as f64 / w),
            _ => pos,
        }
    }

    fn observe(&mut self, now: Ns, queued: usize) {
        if let Some((prev, busy)) = self.last {
            if busy {
                let gap = now.saturating_sub(prev) as f64;
                self.interval = Some(match self.interval {
                    Some(s) => s + (gap - s) * INTERVAL_GAIN,
                    None => gap,
                });
            }
        }
        self.last = Some((now, queued > 1));
    }
}

impl Default for Rpo {
    fn default() -> Self {
        Self::new(DEFAULT_RPO_FACTOR)
    }
}

impl Rpo {
    /// The pick given each candidate's positioning time.
    fn choose(now: Ns, queue: &[Candidate], times: &[Ns], window: Option<f64>) -> usize {
        // Ages are at most `now`: with it and the times below 2^63, the conversions to f64
        // take one instruction each.
        let small = below_2_63(&[now]) && below_2_63(times);
        match window {
            // pos · (1 − age / W), with one division per pick instead of per candidate.
            Some(w) if w > 0.0 && small => {
                let inv = 1.0 / w;
                super::argmin_f64(queue.iter().zip(times).map(|(c, &pos)| {
                    let age = small_ns_to_f64(now.saturating_sub(c.arrived));
                    (small_ns_to_f64(pos) * (1.0 - age * inv), c)
                }))
            }
            Some(w) if w > 0.0 => {
                let inv = 1.0 / w;
                super::argmin_f64(queue.iter().zip(times).map(|(c, &pos)| {
                    let age = now.saturating_sub(c.arrived) as f64;
                    (pos as f64 * (1.0 - age * inv), c)
                }))
            }
            _ => super::argmin_f64(queue.iter().zip(times).map(|(c, &pos)| (pos as f64, c))),
        }
    }
}

impl OrderingPolicy for Rpo {
    fn pick(&mut self, now: Ns, queue: &[Candidate], drive: &dyn Drive) -> usize {
        self.observe(now, queue.len());
        let window = self.window(queue.len());
        let times = self.positions.measure(now, queue, drive);
        let best = Self::choose(now, queue, times, window);
        self.positions.picked(best);
        best
    }

    /// Ties by (arrived, id); the aging window follows the queue's length only.
    fn order_free(&self) -> bool {
        true
    }

    fn pick_timed(&mut self, now: Ns, queue: &[Candidate], times: &[Ns]) -> Option<usize> {
        if times.len() != queue.len() {
            return None;
        }
        self.observe(now, queue.len());
        Some(Self::choose(now, queue, times, self.window(queue.len())))
    }

    fn pick_memoised(
        &mut self,
        now: Ns,
        queue: &[Candidate],
        memos: &mut QueueMemos,
        drive: &dyn Drive,
    ) -> usize {
        if memos.len() != queue.len() {
            return self.pick(now, queue, drive);
        }
        self.observe(now, queue.len());
        let window = self.window(queue.len());
        let times = self.positions.measure_memoised(now, memos, drive);
        Self::choose(now, queue, times, window)
    }
}
