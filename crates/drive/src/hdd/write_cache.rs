//! Write-back cache (WCE=1, spec/drive-model.md §1.5): writes are acknowledged once in the
//! buffer; dirty data is destaged by the actuator when idle or when the buffer is full.

use std::collections::VecDeque;

/// One cached write waiting for destage.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Dirty {
    pub lba: u64,
    pub blocks: u64,
}

#[derive(Clone, Debug)]
pub struct WriteCache {
    /// Oldest first.
    dirty: VecDeque<Dirty>,
    sectors: u64,
    capacity_sectors: u64,
}

impl WriteCache {
    pub fn new(capacity_sectors: u64) -> Self {
        Self {
            dirty: VecDeque::new(),
            sectors: 0,
            capacity_sectors,
        }
    }

    pub fn is_empty(&self) -> bool {
        self.dirty.is_empty()
    }

    pub fn dirty_sectors(&self) -> u64 {
        self.sectors
    }

    /// Whether a write of `blocks` fits at all (larger ones are written through).
    pub fn can_hold(&self, blocks: u64) -> bool {
        blocks <= self.capacity_sectors
    }

    pub fn has_room(&self, blocks: u64) -> bool {
        self.sectors.saturating_add(blocks) <= self.capacity_sectors
    }

    pub fn push(&mut self, d: Dirty) {
        self.sectors += d.blocks;
        self.dirty.push_back(d);
    }

    /// Whether `[lba, end)` is entirely inside one dirty write (a read hit).
    pub fn covers(&self, lba: u64, end: u64) -> bool {
        self.dirty
            .iter()
            .any(|d| d.lba <= lba && end <= d.lba.saturating_add(d.blocks))
    }

    /// The oldest `n` dirty writes, candidates for the next destage.
    pub fn oldest(&self, n: usize) -> impl Iterator<Item = &Dirty> {
        self.dirty.iter().take(n)
    }

    pub fn remove(&mut self, index: usize) -> Option<Dirty> {
        let d = self.dirty.remove(index)?;
        self.sectors -= d.blocks;
        Some(d)
    }
}
