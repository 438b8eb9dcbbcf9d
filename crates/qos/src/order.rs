//! Ordering policies inside the device queue: which queued command the drive starts next.
//!
//! FIFO, SPTF and aged SPTF follow DiskSim's queue policies; the
//! default, [`Rpo`], is aged SPTF with a queue-scaled window, calibrated against WD's 22 TB
//! measurements (crates/qos/tests/calibration.rs).

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

use drive::{Drive, MediaOp, Ns, QueuedOp};
use std::num::NonZeroU64;

/// A command waiting in the device queue, as an ordering policy sees it.
#[derive(Clone, Copy, Debug)]
pub struct Candidate {
    pub id: u64,
    pub op: MediaOp,
    /// When the command entered the device (start of its inactive time).
    pub arrived: Ns,
    /// Its place in the order in which commands entered the device (distinct, increasing):
    /// what breaks ties of arrival order among commands that entered at one time.
    pub seq: u64,
    /// Its duration limits, if any.
    pub limits: Limits,
    /// Priority class index (0 = most urgent).
    pub class: usize,
}

/// The duration limits of a queued command (SPC-6 T2 descriptor), as an ordering policy needs
/// them: a start limit says when the command must have started, a completion limit when it
/// must have finished. Kept in 24 bytes (the device queue moves its candidates about).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Limits {
    /// Each time plus one (no limit: `None`), so that `Option` takes no room.
    start_by: Option<NonZeroU64>,
    finish_by: Option<NonZeroU64>,
    active_for: Option<NonZeroU64>,
}

impl Limits {
    /// `start_by`: when the max inactive time expires (the command must be started by then);
    /// `finish_by`: when the command duration guideline expires (it must be finished by
    /// then); a fired 0h limit keeps its time, now past. `active_for`: the max active time
    /// (once started, the command must finish within it).
    pub fn new(start_by: Option<Ns>, finish_by: Option<Ns>, active_for: Option<Ns>) -> Self {
        let pack = |t: Option<Ns>| t.and_then(|t| NonZeroU64::new(t.saturating_add(1)));
        Self {
            start_by: pack(start_by),
            finish_by: pack(finish_by),
            active_for: pack(active_for),
        }
    }

    pub fn start_by(&self) -> Option<Ns> {
        self.start_by.map(|t| t.get() - 1)
    }

    pub fn finish_by(&self) -> Option<Ns> {
        self.finish_by.map(|t| t.get() - 1)
    }

    pub fn active_for(&self) -> Option<Ns> {
        self.active_for.map(|t| t.get() - 1)
    }

    /// Whether a start or completion limit gives the command a deadline.
    #[inline]
    pub fn has_deadline(&self) -> bool {
        // One test of both (the CDL-aware policy asks of every queued command at every pick).
        let time = |t: Option<NonZeroU64>| t.map_or(0, NonZeroU64::get);
        time(self.start_by) | time(self.finish_by) != 0
    }
}

/// Picks the next command to start.
pub trait OrderingPolicy {
    /// Index into `queue` (never empty) of the command to start at `now`.
    fn pick(&mut self, now: Ns, queue: &[Candidate], drive: &dyn Drive) -> usize;

    /// Whether the pick is the same whatever the order of the queue (ties broken by what the
    /// candidates are, e.g. by (arrived, id), not by where they are; ids are distinct). The
    /// device queue then takes a started command out by moving its last one into its place
    /// rather than shifting all behind it, so its queue is not in arrival order. False (the
    /// default) keeps arrival order.
    fn order_free(&self) -> bool {
        false
    }

    /// [`Self::pick`] given the positioning time ([`sptf_cost`]) of every candidate, in queue
    /// order, for a policy whose choice depends on nothing else the drive knows; `None` (the
    /// default) for one that must ask the drive itself. A policy over a base policy (the
    /// CDL-aware one) measures the queue once and lets its base pick from the same times.
    fn pick_timed(&mut self, _now: Ns, _queue: &[Candidate], _times: &[Ns]) -> Option<usize> {
        None
    }

    /// [`Self::pick`] from a queue that keeps the drive's memo of each candidate's op beside
    /// it (`memos` in queue order), as [`crate::Queue`] does: a policy that asks the drive
    /// about the whole queue at every pick passes them on
    /// ([`QueueMemos::positioning_times`]).
    fn pick_memoised(
        &mut self,
        now: Ns,
        queue: &[Candidate],
        _memos: &mut QueueMemos,
        drive: &dyn Drive,
    ) -> usize {
        self.pick(now, queue, drive)
    }
}

/// SPTF cost of a candidate: the drive's estimate of the time from `now` until its media
/// transfer could begin (overhead + seek + settle + rotational wait).
#[inline]
pub fn sptf_cost(now: Ns, c: &Candidate, drive: &dyn Drive) -> Ns {
    drive.positioning_time(now, &c.op)
}

/// The ops of a queue in queue order, each with the drive's memo of it
/// ([`Drive::positioning_times_memo`]): what a policy needs to ask the drive about the whole
/// queue at every pick without working out again what does not change while an op waits.
#[derive(Clone, Debug, Default)]
pub struct QueueMemos {
    queue: Vec<QueuedOp>,
}

impl QueueMemos {
    /// An op joins the end of the queue.
    pub fn push(&mut self, op: MediaOp) {
        self.queue.push(QueuedOp::new(op));
    }

    /// The op at `index` left the queue.
    pub fn remove(&mut self, index: usize) {
        if index < self.queue.len() {
            self.queue.remove(index);
        }
    }

    /// The op at `index` left the queue, and the last op took its place.
    pub fn swap_remove(&mut self, index: usize) {
        if index < self.queue.len() {
            self.queue.swap_remove(index);
        }
    }

    /// The ops with their memos, in queue order.
    pub fn ops(&self) -> &[QueuedOp] {
        &self.queue
    }

    pub fn len(&self) -> usize {
        self.queue.len()
    }

    pub fn is_empty(&self) -> bool {
        self.queue.is_empty()
    }

    /// The SPTF cost ([`sptf_cost`]) of each op at `now`, in queue order, into `out`.
    pub fn positioning_times(&mut self, now: Ns, drive: &dyn Drive, out: &mut Vec<Ns>) {
        drive.positioning_times_memo(now, &mut self.queue, out);
    }

    /// Takes `queue`'s ops, each with its memo from the previous pick. A queue only loses
    /// commands (mostly the one picked) and gains new ones at its end, so the ops still there
    /// are found in order (a memo given to another op is only slower: the drive notices).
    fn follow(&mut self, queue: &[Candidate], picked: Option<usize>) {
        if let Some(k) = picked {
            self.remove(k);
        }
        let kept = self.queue.len().min(queue.len());
        let same = queue
            .iter()
            .zip(&self.queue)
            .take_while(|(c, q)| c.op == q.op)
            .count();
        if same < kept {
            // Something else left: look for the rest in order.
            let mut j = same;
            let mut rest = Vec::with_capacity(queue.len() - same);
            for c in queue.get(same..).unwrap_or_default() {
                while self.queue.get(j).is_some_and(|q| q.op != c.op) {
                    j += 1;
                }
                rest.push(self.queue.get(j).copied().unwrap_or(QueuedOp::new(c.op)));
                j += 1;
            }
            self.queue.truncate(same);
            self.queue.append(&mut rest);
        } else {
            self.queue.truncate(same);
            self.queue
                .extend(queue.iter().skip(same).map(|c| QueuedOp::new(c.op)));
        }
    }
}

/// Scratch space for asking the drive about a whole queue at once, kept by a policy between
/// picks: the estimates, and the drive's memos of a queue that does not keep them itself.
#[derive(Clone, Debug, Default)]
pub struct Positions {
    memos: QueueMemos,
    times: Vec<Ns>,
    /// The index picked last (see [`Self::picked`]).
    picked: Option<usize>,
}

impl Positions {
    /// The SPTF cost ([`sptf_cost`]) of each candidate of `queue` at `now`, in queue order.
    pub fn measure(&mut self, now: Ns, queue: &[Candidate], drive: &dyn Drive) -> &[Ns] {
        self.memos.follow(queue, self.picked.take());
        self.memos.positioning_times(now, drive, &mut self.times);
        &self.times
    }

    /// [`Self::measure`] with the memos `queue` keeps.
    pub fn measure_memoised(
        &mut self,
        now: Ns,
        memos: &mut QueueMemos,
        drive: &dyn Drive,
    ) -> &[Ns] {
        memos.positioning_times(now, drive, &mut self.times);
        &self.times
    }

    /// The estimates of the queue [`Self::measure`] measured, and its ops with their memos.
    pub fn measured(&self) -> (&[Ns], &[QueuedOp]) {
        (&self.times, self.memos.ops())
    }

    /// The candidate at `index` of the queue just measured was picked: it will not be there
    /// at the next pick.
    pub fn picked(&mut self, index: usize) {
        self.picked = Some(index);
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
    let mut costs = costs.enumerate();
    let Some((_, (k, c))) = costs.next() else {
        return 0;
    };
    // The best so far, its cost as a `total_order_key` (compared as an integer).
    let (mut key, mut arrived, mut id, mut best) = (total_order_key(k), c.arrived, c.id, 0);
    for (i, (k, c)) in costs {
        let k = total_order_key(k);
        if k < key || (k == key && (c.arrived, c.id) < (arrived, id)) {
            (key, arrived, id, best) = (k, c.arrived, c.id, i);
        }
    }
    best
}

/// An integer that orders as [`f64::total_cmp`] orders floats (the same bit trick).
#[inline]
fn total_order_key(x: f64) -> i64 {
    let bits = x.to_bits() as i64;
    bits ^ (((bits >> 63) as u64) >> 1) as i64
}

/// `x as f64` for `x` below 2^63 (which any time in ns is), by the signed conversion: a single
/// instruction on x86-64 without AVX-512, where the unsigned one takes several. The caller
/// checks the bound once for many values (see [`below_2_63`]); checked here, LLVM would merge
/// both conversions back into the unsigned one.
#[inline]
pub(crate) fn small_ns_to_f64(x: Ns) -> f64 {
    (x as i64) as f64
}

/// `x.floor()` (but for the sign of a zero) without a call into libm: x86-64's baseline has
/// no rounding instruction, and the CDL-aware policy rounds a few times per limited command
/// at every pick. Below 2^63 in magnitude, truncating to an integer is exact.
#[inline]
pub(crate) fn floor(x: f64) -> f64 {
    if x.abs() < 9_223_372_036_854_775_808.0 {
        let t = (x as i64) as f64;
        if t > x {
            t - 1.0
        } else {
            t
        }
    } else {
        x.floor()
    }
}

/// `x.ceil()` (but for the sign of a zero) without a call into libm, as [`floor`].
#[inline]
pub(crate) fn ceil(x: f64) -> f64 {
    -floor(-x)
}

/// Whether every one of `xs` is below 2^63 ([`small_ns_to_f64`] converts them exactly).
#[inline]
pub(crate) fn below_2_63(xs: &[Ns]) -> bool {
    xs.iter().fold(0, |a, &x| a | x) >> 63 == 0
}

#[cfg(test)]
mod tests;
