//! `--verify`: every block a write sends is stamped with its LBA, a generation unique to the
//! write and a CRC32C; every block a read returns is checked. A block whose last completed write
//! is known and that no write touched while the read was in flight must carry exactly that
//! generation; any block with the stamp must be whole (its LBA and checksum right). Writes that
//! failed (a CDL abort, say) must not have changed anything.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

use super::stamp::{self, Found};

/// What is known of one block.
#[derive(Clone, Default)]
struct Block {
    /// Generations the block may hold: those of the last writes that completed GOOD while
    /// overlapping each other (the target may apply concurrent writes in either order); empty
    /// when this run never wrote it.
    possible: Vec<u64>,
    /// GOOD completions of the writes in flight together now.
    overlapping: Vec<u64>,
    /// Bumped when a write to the block starts and when it ends: a read that saw it change
    /// cannot tell which data it got.
    version: u64,
    /// Writes in flight: a read that starts meanwhile may see their data (their sessions
    /// learn of completions later than the target applies them).
    writing: u32,
}

/// The version a read records for a block that a write is changing: never equal to a real one.
const UNSETTLED: u64 = u64::MAX;

/// One mismatch, for the report.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Mismatch {
    pub lba: u64,
    pub what: String,
}

pub struct Verifier {
    block: usize,
    next_generation: AtomicU64,
    blocks: Mutex<BTreeMap<u64, Block>>,
    checked: AtomicU64,
    mismatches: Mutex<Vec<Mismatch>>,
}

impl Verifier {
    pub fn new(block: u64) -> Verifier {
        Verifier {
            block: usize::try_from(block).unwrap_or(512).max(stamp::HEADER),
            next_generation: AtomicU64::new(1),
            blocks: Mutex::new(BTreeMap::new()),
            checked: AtomicU64::new(0),
            mismatches: Mutex::new(Vec::new()),
        }
    }

    fn with_blocks<R>(&self, f: impl FnOnce(&mut BTreeMap<u64, Block>) -> R) -> R {
        // A poisoned lock means a session panicked; its state is still the best we know.
        let mut blocks = self.blocks.lock().unwrap_or_else(|e| e.into_inner());
        f(&mut blocks)
    }

    /// The data of a write of `count` blocks at `lba`, and its generation.
    pub fn write_data(&self, lba: u64, count: u64) -> (Vec<u8>, u64) {
        let generation = self.next_generation.fetch_add(1, Ordering::Relaxed);
        let mut data = vec![0u8; self.block * count as usize];
        for (i, b) in data.chunks_mut(self.block).enumerate() {
            stamp::stamp(b, lba + i as u64, generation);
        }
        self.with_blocks(|blocks| {
            for at in lba..lba + count {
                let b = blocks.entry(at).or_default();
                if b.writing == 0 {
                    b.overlapping.clear();
                }
                b.version += 1;
                b.writing += 1;
            }
        });
        (data, generation)
    }

    /// A write ended; `good`: it completed GOOD, so its data is now what the blocks hold.
    pub fn write_done(&self, lba: u64, count: u64, generation: u64, good: bool) {
        self.with_blocks(|blocks| {
            for at in lba..lba + count {
                let b = blocks.entry(at).or_default();
                b.version += 1;
                b.writing = b.writing.saturating_sub(1);
                if good {
                    b.overlapping.push(generation);
                }
                // When the last of overlapping writes ends, the block holds one of those that
                // completed; if all failed, what it held before.
                if b.writing == 0 && !b.overlapping.is_empty() {
                    b.possible = std::mem::take(&mut b.overlapping);
                }
            }
        });
    }

    /// Versions of the blocks a read is about to read.
    pub fn read_started(&self, lba: u64, count: u64) -> Vec<u64> {
        self.with_blocks(|blocks| {
            (lba..lba + count)
                .map(|at| match blocks.get(&at) {
                    Some(b) if b.writing > 0 => UNSETTLED,
                    Some(b) => b.version,
                    None => 0,
                })
                .collect()
        })
    }

    /// Checks the data a read returned against what was known when it started.
    pub fn read_done(&self, lba: u64, data: &[u8], started: &[u64]) {
        let states: Vec<(u64, Vec<u64>)> = self.with_blocks(|blocks| {
            (lba..lba + started.len() as u64)
                .map(|at| {
                    blocks
                        .get(&at)
                        .map_or((0, Vec::new()), |b| (b.version, b.possible.clone()))
                })
                .collect()
        });
        let mut found = Vec::new();
        for (i, (b, (state, version))) in data
            .chunks(self.block)
            .zip(states.iter().zip(started))
            .enumerate()
        {
            let at = lba + i as u64;
            let stable = state.0 == *version;
            if let Some(problem) = Self::check(at, b, &state.1, stable) {
                found.push(Mismatch {
                    lba: at,
                    what: problem,
                });
            }
        }
        self.checked
            .fetch_add(started.len() as u64, Ordering::Relaxed);
        if !found.is_empty() {
            let mut m = self.mismatches.lock().unwrap_or_else(|e| e.into_inner());
            m.extend(found);
        }
    }

    /// What is wrong with block `at`, if anything; `possible`: the generations it may hold
    /// (empty: unknown), `stable`: no write touched it while the read was in flight.
    fn check(at: u64, b: &[u8], possible: &[u64], stable: bool) -> Option<String> {
        let expected = stable && !possible.is_empty();
        let generation = match stamp::read(b) {
            Found::Unstamped => {
                return expected
                    .then(|| format!("generation {possible:?} written, the block is not stamped"))
            }
            Found::Whole { lba, generation } | Found::Torn { lba, generation } if lba != at => {
                return Some(format!(
                    "holds the block of LBA {lba} (generation {generation})"
                ))
            }
            Found::Torn { generation, .. } => {
                return Some(format!(
                    "generation {generation}: checksum mismatch (torn or corrupt)"
                ))
            }
            Found::Whole { generation, .. } => generation,
        };
        if expected && !possible.contains(&generation) {
            return Some(format!(
                "generation {generation}, but the last completed write was {possible:?}"
            ));
        }
        None
    }

    /// Blocks checked, and the mismatches found.
    pub fn summary(&self) -> (u64, Vec<Mismatch>) {
        let m = self.mismatches.lock().unwrap_or_else(|e| e.into_inner());
        (self.checked.load(Ordering::Relaxed), m.clone())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_last_completed_write_is_what_a_read_must_see() {
        let v = Verifier::new(512);
        let (first, g1) = v.write_data(10, 2);
        v.write_done(10, 2, g1, true);
        let (second, g2) = v.write_data(10, 2);
        // Aborted: nothing changed.
        v.write_done(10, 2, g2, false);
        let s = v.read_started(10, 2);
        v.read_done(10, &first, &s);
        assert_eq!(v.summary(), (2, Vec::new()));
        // The aborted write's data showing up is a mismatch, reported with its LBA.
        v.read_done(10, &second, &s);
        let (_, m) = v.summary();
        assert_eq!(m.len(), 2);
        assert_eq!(m[0].lba, 10);
        assert!(m[0].what.contains(&format!("generation {g2},")), "{m:?}");
    }

    #[test]
    fn misplaced_torn_and_unstamped_blocks_are_caught() {
        let v = Verifier::new(512);
        let (data, g) = v.write_data(0, 3);
        v.write_done(0, 3, g, true);
        let s = v.read_started(0, 3);
        let mut bad = data.clone();
        bad[512 + 100] ^= 1; // block 1 torn
        bad[1024..1536].copy_from_slice(&data[..512]); // block 2 holds block 0
        v.read_done(0, &bad, &s);
        let (_, m) = v.summary();
        assert_eq!(m.iter().map(|x| x.lba).collect::<Vec<_>>(), [1, 2], "{m:?}");
        v.read_done(0, &[0u8; 512], &s[..1]);
        assert_eq!(v.summary().1.len(), 3, "zeros where a write completed");
    }

    #[test]
    fn a_read_started_while_another_session_writes_accepts_the_new_data() {
        let v = Verifier::new(512);
        let (_, g1) = v.write_data(7, 1);
        v.write_done(7, 1, g1, true);
        let (new, _g2) = v.write_data(7, 1);
        // The target applied the write; its session has not seen the response yet.
        let s = v.read_started(7, 1);
        v.read_done(7, &new, &s);
        assert_eq!(v.summary(), (1, Vec::new()));
    }

    #[test]
    fn concurrent_writes_may_land_in_either_order() {
        let v = Verifier::new(512);
        let (a, ga) = v.write_data(3, 1);
        let (b, gb) = v.write_data(3, 1);
        v.write_done(3, 1, gb, true);
        v.write_done(3, 1, ga, true);
        let s = v.read_started(3, 1);
        v.read_done(3, &a, &s);
        v.read_done(3, &b, &s);
        assert_eq!(v.summary(), (2, Vec::new()));
        // A later write alone settles it.
        let (c, gc) = v.write_data(3, 1);
        v.write_done(3, 1, gc, true);
        let s = v.read_started(3, 1);
        v.read_done(3, &a, &s);
        assert_eq!(v.summary().1.len(), 1);
        v.read_done(3, &c, &s);
        assert_eq!(v.summary().1.len(), 1);
    }

    #[test]
    fn a_read_that_overlapped_a_write_accepts_either_data() {
        let v = Verifier::new(512);
        let (old, g1) = v.write_data(5, 1);
        v.write_done(5, 1, g1, true);
        let s = v.read_started(5, 1);
        let (new, g2) = v.write_data(5, 1);
        v.write_done(5, 1, g2, true);
        v.read_done(5, &old, &s);
        v.read_done(5, &new, &s);
        assert_eq!(v.summary(), (2, Vec::new()));
    }
}
