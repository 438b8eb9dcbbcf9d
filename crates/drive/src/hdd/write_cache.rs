//! Write-back cache (WCE=1, SBC-4 §4.15): a write is acknowledged once in the buffer and
//! destaged later. The buffer holds up to its capacity; past the high watermark destage is
//! forced until the dirty data is back at the low watermark (the hysteresis keeps it from
//! flapping). The drive picks what to destage (`Hdd`); this type keeps the dirty set indexed
//! by LBA (destage by position, read hits) and by age (the starvation bound). A write being
//! destaged holds its room in the buffer until its media write ends.

use std::collections::BTreeMap;

use crate::Ns;

/// One cached write waiting for destage.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Dirty {
    pub lba: u64,
    pub blocks: u64,
    /// When it was acknowledged.
    pub since: Ns,
}

impl Dirty {
    fn end(&self) -> u64 {
        self.lba.saturating_add(self.blocks)
    }
}

/// A dirty write's place in the cache: `(lba, arrival number)`, unique.
pub type Slot = (u64, u64);

/// Capacity and watermarks, in sectors.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    pub capacity: u64,
    /// Destage is forced once the dirty data exceeds this...
    pub high: u64,
    /// ...until it is at most this.
    pub low: u64,
}

#[derive(Clone, Debug)]
pub struct WriteCache {
    by_lba: BTreeMap<Slot, Dirty>,
    /// Arrival number → LBA: the oldest first.
    by_age: BTreeMap<u64, u64>,
    arrivals: u64,
    /// Dirty sectors not yet handed to destage.
    sectors: u64,
    /// Writes handed to destage: when each media write ends, and its sectors.
    destaging: Vec<(Ns, u64)>,
    limits: Limits,
    /// Above the high watermark since, and not yet back at the low one.
    forced: bool,
    /// The longest write ever held: a read hit starts at most this far into a write.
    longest: u64,
}

impl WriteCache {
    pub fn new(limits: Limits) -> Self {
        Self {
            by_lba: BTreeMap::new(),
            by_age: BTreeMap::new(),
            arrivals: 0,
            sectors: 0,
            destaging: Vec::new(),
            limits,
            forced: false,
            longest: 0,
        }
    }

    pub fn is_empty(&self) -> bool {
        self.by_lba.is_empty()
    }

    pub fn len(&self) -> usize {
        self.by_lba.len()
    }

    pub fn dirty_sectors(&self) -> u64 {
        self.sectors
    }

    /// Whether destage is forced (past the high watermark, not yet down to the low one).
    pub fn forced(&self) -> bool {
        self.forced
    }

    /// Whether a write of `blocks` fits at all (larger ones are written through).
    pub fn can_hold(&self, blocks: u64) -> bool {
        blocks <= self.limits.capacity
    }

    /// Whether a write of `blocks` fits at `now`, beside the dirty data and the writes whose
    /// destage has not ended.
    pub fn has_room(&self, blocks: u64, now: Ns) -> bool {
        let destaging: u64 = self
            .destaging
            .iter()
            .filter(|&&(done, _)| done > now)
            .map(|&(_, n)| n)
            .sum();
        self.sectors
            .saturating_add(destaging)
            .saturating_add(blocks)
            <= self.limits.capacity
    }

    /// The first end of a destage after `now` (when room is next freed).
    pub fn next_release(&self, now: Ns) -> Option<Ns> {
        self.destaging
            .iter()
            .map(|&(done, _)| done)
            .filter(|&done| done > now)
            .min()
    }

    /// `blocks` taken out by [`Self::remove`] are on their way to the medium until `done`.
    pub fn destaging(&mut self, blocks: u64, done: Ns) {
        self.destaging.push((done, blocks));
    }

    /// Forgets the destages that ended by `now`.
    pub fn retire(&mut self, now: Ns) {
        self.destaging.retain(|&(done, _)| done > now);
    }

    /// Caches a write acknowledged at `now`; the dirty writes it wholly overwrites are
    /// dropped (their data never needs to reach the medium).
    pub fn push(&mut self, lba: u64, blocks: u64, now: Ns) {
        self.supersede(lba, lba.saturating_add(blocks));
        let arrival = self.arrivals;
        self.arrivals += 1;
        self.by_lba.insert(
            (lba, arrival),
            Dirty {
                lba,
                blocks,
                since: now,
            },
        );
        self.by_age.insert(arrival, lba);
        self.sectors += blocks;
        self.longest = self.longest.max(blocks);
        if self.sectors > self.limits.high {
            self.forced = true;
        }
    }

    /// Drops the dirty writes that lie wholly in `[lba, end)`: newer data (a cached write or a
    /// FUA write already on the medium) replaces them.
    pub fn supersede(&mut self, lba: u64, end: u64) {
        let gone: Vec<Slot> = self
            .by_lba
            .range((lba, 0)..(end, 0))
            .filter(|(_, d)| d.end() <= end)
            .map(|(&slot, _)| slot)
            .collect();
        for slot in gone {
            self.remove(slot);
        }
    }

    /// Whether `[lba, end)` is entirely inside one dirty write (a read hit).
    pub fn covers(&self, lba: u64, end: u64) -> bool {
        // A write that holds the read starts at or before it, at most `longest` blocks before.
        let from = lba.saturating_sub(self.longest);
        self.by_lba
            .range((from, 0)..=(lba, u64::MAX))
            .any(|(_, d)| end <= d.end())
    }

    /// The oldest dirty write.
    pub fn oldest(&self) -> Option<(Slot, &Dirty)> {
        let (&arrival, &lba) = self.by_age.first_key_value()?;
        let slot = (lba, arrival);
        self.by_lba.get(&slot).map(|d| (slot, d))
    }

    /// Up to `n` dirty writes on either side of `lba` in LBA order (the nearest cylinders),
    /// the candidates of a destage by position.
    pub fn near(&self, lba: u64, n: usize) -> impl Iterator<Item = (Slot, &Dirty)> {
        let below = self.by_lba.range(..(lba, 0)).rev().take(n);
        let above = self.by_lba.range((lba, 0)..).take(n);
        below.chain(above).map(|(&slot, d)| (slot, d))
    }

    pub fn remove(&mut self, slot: Slot) -> Option<Dirty> {
        let d = self.by_lba.remove(&slot)?;
        self.by_age.remove(&slot.1);
        self.sectors -= d.blocks;
        if self.sectors <= self.limits.low {
            self.forced = false;
        }
        Some(d)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cache(capacity: u64, high: u64, low: u64) -> WriteCache {
        WriteCache::new(Limits {
            capacity,
            high,
            low,
        })
    }

    #[test]
    fn covers_finds_what_a_scan_of_every_dirty_write_finds() {
        let mut cache = cache(1 << 40, 1 << 40, 0);
        let mut x: u64 = 3;
        let mut next = move |n: u64| {
            x = x
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407);
            (x >> 33) % n
        };
        for step in 0..5_000 {
            match next(4) {
                0 if !cache.is_empty() => {
                    let i = next(cache.len() as u64) as usize;
                    let slot = cache.by_lba.keys().nth(i).copied();
                    assert!(slot.and_then(|s| cache.remove(s)).is_some());
                }
                _ => cache.push(next(4_000), 1 + next(300), step),
            }
            let lba = next(4_400);
            let end = lba + next(200);
            let scan = cache
                .by_lba
                .values()
                .any(|d| d.lba <= lba && end <= d.end());
            assert_eq!(cache.covers(lba, end), scan, "[{lba}, {end})");
            assert_eq!(cache.by_age.len(), cache.by_lba.len());
            let sum: u64 = cache.by_lba.values().map(|d| d.blocks).sum();
            assert_eq!(cache.dirty_sectors(), sum);
        }
        cache.push(u64::MAX - 5, 100, 0);
        assert!(cache.covers(u64::MAX - 3, u64::MAX));
    }

    #[test]
    fn forced_from_past_the_high_watermark_down_to_the_low_one() {
        let mut cache = cache(100, 60, 30);
        for i in 0..6 {
            cache.push(i * 1000, 10, i);
        }
        assert!(
            !cache.forced(),
            "60 sectors is at the high watermark, not past it"
        );
        cache.push(9000, 10, 6);
        assert!(cache.forced());
        let mut left = 70;
        while left > 30 {
            let Some((slot, _)) = cache.oldest() else {
                unreachable!("dirty data left")
            };
            assert!(cache.forced(), "still forced at {left} sectors");
            cache.remove(slot);
            left -= 10;
        }
        assert!(!cache.forced(), "back at the low watermark");
        assert_eq!(cache.dirty_sectors(), 30);
    }

    #[test]
    fn a_destaging_write_holds_its_room_until_its_media_write_ends() {
        let mut cache = cache(20, 20, 0);
        cache.push(0, 10, 0);
        cache.push(100, 10, 0);
        assert!(!cache.has_room(1, 0));
        let Some((slot, _)) = cache.oldest() else {
            unreachable!("two dirty writes")
        };
        assert!(cache.remove(slot).is_some());
        cache.destaging(10, 500);
        assert_eq!(cache.dirty_sectors(), 10);
        assert!(!cache.has_room(1, 499));
        assert_eq!(cache.next_release(0), Some(500));
        assert!(cache.has_room(10, 500));
        cache.retire(500);
        assert_eq!(cache.next_release(0), None);
        assert!(cache.has_room(10, 0));
    }

    #[test]
    fn an_overwrite_supersedes_the_dirty_writes_it_covers() {
        let mut cache = cache(1000, 1000, 0);
        cache.push(100, 8, 0);
        cache.push(108, 8, 1);
        cache.push(112, 8, 2);
        cache.push(100, 16, 3);
        // [100, 108) and [108, 116) are rewritten; [112, 120) only in part, so it stays.
        assert_eq!(cache.len(), 2);
        assert_eq!(cache.dirty_sectors(), 24);
        assert_eq!(cache.oldest().map(|(_, d)| d.lba), Some(112));
        cache.supersede(0, 1000);
        assert!(cache.is_empty());
        assert_eq!(cache.dirty_sectors(), 0);
    }

    #[test]
    fn near_takes_neighbours_on_both_sides_in_lba_order() {
        let mut cache = cache(1000, 1000, 0);
        for lba in [10, 20, 30, 40, 50, 60] {
            cache.push(lba, 1, 0);
        }
        let lbas: Vec<u64> = cache.near(35, 2).map(|(_, d)| d.lba).collect();
        assert_eq!(lbas, [30, 20, 40, 50]);
        let lbas: Vec<u64> = cache.near(0, 2).map(|(_, d)| d.lba).collect();
        assert_eq!(lbas, [10, 20]);
    }
}
