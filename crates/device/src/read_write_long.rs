//! The blocks WRITE LONG with WR_UNCOR marked uncorrectable (SBC-4): READ and VERIFY of them
//! fail with MEDIUM ERROR, UNRECOVERED READ ERROR until a write changes the block. Shared
//! between a logical unit and the copy manager, since a copy from another logical unit that
//! writes a marked block makes it readable again.

use crate::Completion;
use parking_lot::Mutex;
use scsi::{Asc, Sense, SenseKey};
use std::collections::BTreeSet;
use std::sync::atomic::{AtomicBool, Ordering};

/// The blocks WRITE LONG marked uncorrectable. `any` keeps reads of a unit with none (the
/// usual case) to one relaxed load.
#[derive(Default)]
pub(crate) struct Uncorrectable {
    any: AtomicBool,
    blocks: Mutex<BTreeSet<u64>>,
}

impl Uncorrectable {
    pub(crate) fn mark(&self, lba: u64) {
        self.blocks.lock().insert(lba);
        self.any.store(true, Ordering::Relaxed);
    }

    /// `blocks` from `lba` were written: they read back again.
    pub(crate) fn clear(&self, lba: u64, blocks: u64) {
        if !self.any.load(Ordering::Relaxed) {
            return;
        }
        let mut marked = self.blocks.lock();
        let end = lba.saturating_add(blocks);
        let gone: Vec<u64> = marked.range(lba..end).copied().collect();
        gone.iter().for_each(|b| {
            marked.remove(b);
        });
        self.any.store(!marked.is_empty(), Ordering::Relaxed);
    }

    /// The first block marked uncorrectable among `blocks` from `lba`. Inlined: every read
    /// asks, and almost always nothing is marked.
    #[inline]
    pub(crate) fn first(&self, lba: u64, blocks: u64) -> Option<u64> {
        if !self.any.load(Ordering::Relaxed) {
            return None;
        }
        let end = lba.saturating_add(blocks);
        self.blocks.lock().range(lba..end).next().copied()
    }
}

/// MEDIUM ERROR, UNRECOVERED READ ERROR at the marked block.
pub(crate) fn unrecovered(lba: u64) -> Completion {
    let mut sense = Sense::new(SenseKey::MediumError, Asc::UNRECOVERED_READ_ERROR);
    sense.information = Some(lba);
    Completion::check_condition(sense)
}
