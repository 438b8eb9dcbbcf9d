//! Write-back cache (WCE=1): writes are acknowledged once in the
//! buffer; dirty data is destaged by the actuator when idle or when the buffer is full.

use std::collections::VecDeque;

/// One cached write waiting for destage.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Dirty {
    pub lba: u64,
    pub blocks: u64,
}

impl Dirty {
    /// `(lba, end)`, the end saturating as `covers` takes it.
    fn range(&self) -> (u64, u64) {
        (self.lba, self.lba.saturating_add(self.blocks))
    }
}

#[derive(Clone, Debug)]
pub struct WriteCache {
    /// Oldest first.
    dirty: VecDeque<Dirty>,
    sectors: u64,
    capacity_sectors: u64,
    /// `(lba, end)` of every dirty write, sorted: a read is looked up among the few that
    /// start at most `longest` blocks before it (ordering policies ask about every queued
    /// read at every pick, and the cache holds a thousand writes).
    by_lba: Vec<(u64, u64)>,
    /// The longest write ever held.
    longest: u64,
}

impl WriteCache {
    pub fn new(capacity_sectors: u64) -> Self {
        Self {
            dirty: VecDeque::new(),
            sectors: 0,
            capacity_sectors,
            by_lba: Vec::new(),
            longest: 0,
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
        let key = d.range();
        let at = self.by_lba.partition_point(|r| *r <= key);
        self.by_lba.insert(at, key);
        self.longest = self.longest.max(d.blocks);
    }

    /// Whether `[lba, end)` is entirely inside one dirty write (a read hit).
    pub fn covers(&self, lba: u64, end: u64) -> bool {
        // A write that holds the read starts at or before it, and at most `longest` blocks
        // before it (it ends at or after `lba`).
        let from = lba.saturating_sub(self.longest);
        let upto = self.by_lba.partition_point(|&(start, _)| start <= lba);
        self.by_lba
            .get(..upto)
            .unwrap_or_default()
            .iter()
            .rev()
            .take_while(|&&(start, _)| start >= from)
            .any(|&(_, write_end)| end <= write_end)
    }

    /// The oldest `n` dirty writes, candidates for the next destage.
    pub fn oldest(&self, n: usize) -> impl Iterator<Item = &Dirty> {
        self.dirty.iter().take(n)
    }

    pub fn remove(&mut self, index: usize) -> Option<Dirty> {
        let d = self.dirty.remove(index)?;
        self.sectors -= d.blocks;
        let key = d.range();
        let at = self.by_lba.partition_point(|r| *r < key);
        if self.by_lba.get(at) == Some(&key) {
            self.by_lba.remove(at);
        }
        Some(d)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn covers_finds_what_a_scan_of_every_dirty_write_finds() {
        let mut cache = WriteCache::new(1 << 20);
        let mut x: u64 = 3;
        let mut next = move |n: u64| {
            x = x
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407);
            (x >> 33) % n
        };
        for _ in 0..5_000 {
            match next(4) {
                0 if !cache.is_empty() => {
                    let i = next(cache.dirty.len() as u64) as usize;
                    assert!(cache.remove(i).is_some());
                }
                _ => cache.push(Dirty {
                    lba: next(4_000),
                    blocks: 1 + next(300),
                }),
            }
            let lba = next(4_400);
            let end = lba + next(200);
            let scan = cache
                .dirty
                .iter()
                .any(|d| d.lba <= lba && end <= d.lba.saturating_add(d.blocks));
            assert_eq!(cache.covers(lba, end), scan, "[{lba}, {end})");
        }
        let near_max = Dirty {
            lba: u64::MAX - 5,
            blocks: 100,
        };
        cache.push(near_max);
        assert!(cache.covers(u64::MAX - 3, u64::MAX));
        assert_eq!(cache.by_lba.len(), cache.dirty.len());
    }
}
