//! Medium tasks that a CDL policy ended (Dh, Eh, Fh: SPC-6 command duration limits) while
//! their store operation was still running: the host has its answer, the store finishes the
//! operation in the background. Until it has, the blocks of an ended write hold old or new
//! data (SBC-4 leaves each block of a write that ended with CHECK CONDITION old or new), so a later
//! medium task on any of them waits: no later read sees the blocks change under it and no
//! later write is overtaken by the ended one (docs/cdl.md, "Limits in real time").

use crate::event::TaskId;
use crate::Completion;
use drive::MediaOp;

/// One ended task whose store operation has not come back.
struct Ended {
    id: TaskId,
    nexus: u64,
    /// The blocks an ended write changes: `[lba, lba + blocks)`; `None` for a read.
    writes: Option<(u64, u64)>,
    /// What the host was answered, repeated to a transport that runs the operation after it.
    completion: Completion,
}

/// The ended tasks of one logical unit (almost always none).
#[derive(Default)]
pub(crate) struct EndedInFlight {
    ended: Vec<Ended>,
}

impl EndedInFlight {
    /// Task `id` of `nexus`, running `op`, was answered with `completion`.
    pub(crate) fn add(&mut self, id: TaskId, nexus: u64, op: &MediaOp, completion: Completion) {
        let writes = (op.write && op.blocks > 0).then_some((op.lba, u64::from(op.blocks)));
        self.ended.push(Ended {
            id,
            nexus,
            writes,
            completion,
        });
    }

    /// Whether `op` touches a block an ended write may still change.
    pub(crate) fn blocks(&self, op: &MediaOp) -> bool {
        let (lba, end) = (op.lba, op.lba.saturating_add(u64::from(op.blocks)));
        self.ended.iter().any(|e| {
            e.writes
                .is_some_and(|(from, n)| lba < from.saturating_add(n) && from < end)
        })
    }

    /// The store operation of `id` came back (or will not run): what its host was told.
    pub(crate) fn done(&mut self, id: TaskId) -> Option<Completion> {
        if self.ended.is_empty() {
            return None;
        }
        let i = self.ended.iter().position(|e| e.id == id)?;
        Some(self.ended.swap_remove(i).completion)
    }

    /// The nexus is gone, and with it any operation of its still to be handed to the
    /// store: its ended tasks no longer hold their blocks (the data plane's range lock still
    /// orders a write already in flight against later writes).
    pub(crate) fn nexus_lost(&mut self, nexus: u64) {
        self.ended.retain(|e| e.nexus != nexus);
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.ended.is_empty()
    }
}
