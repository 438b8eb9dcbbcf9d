//! The admission stage: the order in which each class's submission queue releases commands into
//! the device queue.

use drive::Ns;
use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};

/// Admission order inside one class's submission queue.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Admission {
    /// Arrival order, as a host that knows nothing of CDL would send them.
    #[default]
    Fifo,
    /// Duration-limited commands first, nearest deadline first; then the others in arrival
    /// order.
    DeadlineAware,
}

/// A reference to a command slot, valid while the slot's generation matches.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct SlotRef {
    pub(crate) slot: u32,
    pub(crate) gen: u32,
}

/// One class's submission queue. Entries may go stale (the command expired or was re-keyed);
/// the queue's owner tells which are live when popping.
#[derive(Debug)]
pub(crate) struct SubmissionQueue {
    fifo: VecDeque<SlotRef>,
    /// Deadline-aware only: limited commands keyed by (deadline, arrival sequence).
    by_deadline: BinaryHeap<Reverse<(Ns, u64, SlotRef)>>,
    seq: u64,
}

impl SubmissionQueue {
    pub(crate) fn new() -> Self {
        Self {
            fifo: VecDeque::new(),
            by_deadline: BinaryHeap::new(),
            seq: 0,
        }
    }

    /// Queues a command; `deadline` is `Some` only under deadline-aware admission for a
    /// limited command.
    pub(crate) fn push(&mut self, r: SlotRef, deadline: Option<Ns>) {
        match deadline {
            Some(d) => {
                self.seq += 1;
                self.by_deadline.push(Reverse((d, self.seq, r)));
            }
            None => self.fifo.push_back(r),
        }
    }

    /// Pops the next live command; `live(r, key)` says whether an entry still stands (key is
    /// the deadline it was queued with, `None` for the FIFO part).
    pub(crate) fn pop(
        &mut self,
        mut live: impl FnMut(SlotRef, Option<Ns>) -> bool,
    ) -> Option<SlotRef> {
        while let Some(Reverse((d, _, r))) = self.by_deadline.pop() {
            if live(r, Some(d)) {
                return Some(r);
            }
        }
        while let Some(r) = self.fifo.pop_front() {
            if live(r, None) {
                return Some(r);
            }
        }
        None
    }
}
