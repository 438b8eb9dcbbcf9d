//! A command's state inside the queue: where it is, its snapshotted CDL limits, what it missed.

use crate::cdl::{CdlPages, LimitKind, Policy};
use crate::completion::Misses;
use crate::order::Limits;
use drive::{MediaOp, MediaOutcome, Ns};
use std::sync::Arc;

/// Where a command is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum State {
    Free,
    /// In a class's submission queue.
    Submitted,
    /// In the device queue, not started.
    Queued,
    /// A HEAD OF QUEUE task waiting for a free unit: it starts before any queued command.
    Head,
    /// Being processed by the drive.
    Active,
}

/// One armed limit: absolute expiry time and policy. A fired 0h limit stays as the command's
/// (past) deadline so ordering serves it as soon as possible.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Limit {
    pub(super) at: Ns,
    pub(super) policy: Policy,
    pub(super) fired: bool,
}

/// One entry of the queue's command slab (reused; `gen` tells reuses apart).
#[derive(Clone, Debug)]
pub(super) struct Slot {
    pub(super) id: u64,
    pub(super) class: usize,
    pub(super) dld: u8,
    pub(super) op: MediaOp,
    pub(super) state: State,
    pub(super) gen: u32,
    pub(super) submitted_at: Ns,
    pub(super) started_at: Ns,
    pub(super) done_at: Ns,
    pub(super) media: MediaOutcome,
    /// Active, and the store has not finished its operation yet ([`super::Queue::await_store`]).
    pub(super) store_pending: bool,
    /// Descriptor in force (1..=7; 0 none); differs from `dld` after a 1h chain.
    pub(super) desc: u8,
    /// The pages as they were at submission (only for limited commands; 1h needs n+1).
    pub(super) pages: Option<Arc<CdlPages>>,
    pub(super) inactive: Option<Limit>,
    /// Max active time and policy, armed at start.
    pub(super) active_for: Option<(Ns, Policy)>,
    pub(super) active: Option<Limit>,
    pub(super) guideline: Option<Limit>,
    pub(super) missed: Misses,
    /// Deadline-aware admission key while submitted (`None`: in the FIFO part).
    pub(super) admit_key: Option<Ns>,
}

impl Slot {
    pub(super) fn empty() -> Self {
        Self {
            id: 0,
            class: 0,
            dld: 0,
            op: MediaOp {
                lba: 0,
                blocks: 0,
                write: false,
                fua: false,
            },
            state: State::Free,
            gen: 0,
            submitted_at: 0,
            started_at: 0,
            done_at: 0,
            media: MediaOutcome::Ok,
            store_pending: false,
            desc: 0,
            pages: None,
            inactive: None,
            active_for: None,
            active: None,
            guideline: None,
            missed: Misses::default(),
            admit_key: None,
        }
    }

    /// Earliest limit (armed or fired 0h) that still constrains the command.
    pub(super) fn deadline(&self) -> Option<Ns> {
        let inactive = if self.state == State::Active {
            None
        } else {
            self.inactive
        };
        [inactive, self.active, self.guideline]
            .into_iter()
            .flatten()
            .map(|l| l.at)
            .min()
    }

    /// The limits the ordering policy weighs while the command waits.
    pub(super) fn limits(&self) -> Limits {
        let start_by = if self.state == State::Active {
            None
        } else {
            self.inactive.map(|l| l.at)
        };
        Limits::new(
            start_by,
            self.guideline.map(|l| l.at),
            self.active_for.map(|(ns, _)| ns),
        )
    }

    pub(super) fn limit_mut(&mut self, kind: LimitKind) -> &mut Option<Limit> {
        match kind {
            LimitKind::Inactive => &mut self.inactive,
            LimitKind::Active => &mut self.active,
            LimitKind::Guideline => &mut self.guideline,
        }
    }
}

/// What is left of a command once its slot is freed.
pub(super) struct Released {
    pub(super) id: u64,
    pub(super) class: usize,
    pub(super) dld: u8,
    pub(super) op: MediaOp,
    pub(super) submitted_at: Ns,
    pub(super) started_at: Option<Ns>,
    pub(super) missed: Misses,
}
