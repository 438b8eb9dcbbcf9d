//! Block ranges held by commands that change the medium, so that each such command is one
//! uninterrupted change with respect to every other one on the same blocks: WRITE ATOMIC is
//! all-or-nothing (SBC-4 §4.29), COMPARE AND WRITE and ORWRITE are read-modify-write sequences
//! (SBC-4 §5.3, §5.8), and a plain WRITE never lands in the middle of one of them. Commands on
//! disjoint ranges never wait for each other.
//!
//! Reads see those atomic changes whole (all old or all new data, SBC-4 §4.29.2) without
//! taking the lock on their usual path: atomic writers count themselves in and out around
//! their change, and a read whose copy no atomic writer could have overlapped keeps it; one
//! that might have is done again holding its range (see [`RangeLock::read`]).

use parking_lot::{Condvar, Mutex};
use std::sync::atomic::{fence, AtomicU64, Ordering};

#[derive(Default)]
pub(crate) struct RangeLock {
    /// The held ranges, `[start, end)` in logical blocks; a handful at most (one per command
    /// running on the logical unit).
    held: Mutex<Vec<(u64, u64)>>,
    released: Condvar,
    /// Atomic writes begun and finished since the unit was made; equal when none is running.
    begun: AtomicU64,
    finished: AtomicU64,
}

/// The range of an atomic write (WRITE ATOMIC, COMPARE AND WRITE, ORWRITE): reads that
/// overlap the write in time take the slow path while it is held.
pub(crate) struct AtomicGuard<'a> {
    range: RangeGuard<'a>,
}

/// A held range; dropping it lets waiting commands in.
pub(crate) struct RangeGuard<'a> {
    lock: &'a RangeLock,
    range: (u64, u64),
}

impl RangeLock {
    /// Hold `blocks` blocks from `lba` (at least one), waiting while any overlaps a held range.
    pub(crate) fn lock(&self, lba: u64, blocks: u64) -> RangeGuard<'_> {
        let range = (lba, lba.saturating_add(blocks.max(1)));
        let mut held = self.held.lock();
        while held.iter().any(|&(s, e)| s < range.1 && range.0 < e) {
            self.released.wait(&mut held);
        }
        held.push(range);
        RangeGuard { lock: self, range }
    }

    /// [`Self::lock`] for an atomic write: counted as begun before it changes a byte and as
    /// finished only after its last byte is changed (the guard's drop).
    pub(crate) fn lock_atomic(&self, lba: u64, blocks: u64) -> AtomicGuard<'_> {
        let range = self.lock(lba, blocks);
        self.begun.fetch_add(1, Ordering::SeqCst);
        AtomicGuard { range }
    }

    /// Run `copy` (a read of `blocks` blocks from `lba` through the store) so that it sees
    /// every atomic write whole. First without the lock; the copy stands if no atomic write
    /// was running when it started (`begun == finished`, read in that order) and none began
    /// before it ended (`begun` unchanged). Otherwise `copy` runs again holding the range,
    /// which every atomic write holds while it changes blocks.
    ///
    /// Why that is enough: an atomic write W either began before the first load of `begun`
    /// or after it. If after, its increment precedes its first byte change, and the store's
    /// own synchronisation (a lock per RAM chunk, a system call per file access) orders any
    /// byte of W the copy saw before the second load of `begun`, which then differs. If
    /// before, it is counted in `begun = b`; `finished` counts only writes that began, so
    /// `finished == b` (with no write begun since, by the second check) means W finished
    /// before the copy started and the copy saw all of it.
    pub(crate) fn read<T>(&self, lba: u64, blocks: u64, mut copy: impl FnMut() -> T) -> T {
        let begun = self.begun.load(Ordering::SeqCst);
        if self.finished.load(Ordering::SeqCst) == begun {
            let copied = copy();
            fence(Ordering::SeqCst);
            if self.begun.load(Ordering::SeqCst) == begun {
                return copied;
            }
        }
        let _held = self.lock(lba, blocks);
        copy()
    }
}

impl Drop for AtomicGuard<'_> {
    fn drop(&mut self) {
        self.range.lock.finished.fetch_add(1, Ordering::SeqCst);
    }
}

impl Drop for RangeGuard<'_> {
    fn drop(&mut self) {
        let mut held = self.lock.held.lock();
        if let Some(i) = held.iter().position(|&r| r == self.range) {
            held.swap_remove(i);
        }
        drop(held);
        self.lock.released.notify_all();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::time::Duration;

    #[test]
    fn overlapping_ranges_wait_disjoint_ones_do_not() {
        let lock = RangeLock::default();
        let inside = AtomicBool::new(false);
        let first = lock.lock(10, 10);
        let _disjoint = lock.lock(20, 5);
        std::thread::scope(|s| {
            let waiter = s.spawn(|| {
                let _g = lock.lock(19, 1);
                inside.store(true, Ordering::SeqCst);
            });
            std::thread::sleep(Duration::from_millis(50));
            assert!(!inside.load(Ordering::SeqCst), "block 19 is held");
            drop(first);
            waiter.join().unwrap();
        });
        assert!(inside.load(Ordering::SeqCst));
        assert_eq!(lock.held.lock().len(), 1, "only the disjoint range is left");
    }

    #[test]
    fn reads_wait_only_for_atomic_writes() {
        let lock = RangeLock::default();
        // A plain write's range does not stop a read: the read takes no lock.
        let plain = lock.lock(0, 8);
        assert_eq!(lock.read(0, 8, || 1), 1);
        drop(plain);
        let atomic = lock.lock_atomic(0, 8);
        let done = AtomicBool::new(false);
        std::thread::scope(|s| {
            let reader = s.spawn(|| {
                let copies = std::cell::Cell::new(0);
                lock.read(4, 1, || copies.set(copies.get() + 1));
                done.store(true, Ordering::SeqCst);
                copies.get()
            });
            std::thread::sleep(Duration::from_millis(50));
            assert!(
                !done.load(Ordering::SeqCst),
                "an atomic write holds block 4"
            );
            drop(atomic);
            assert_eq!(reader.join().unwrap(), 1, "copied once, holding the range");
        });
        assert_eq!(lock.begun.load(Ordering::SeqCst), 1);
        assert_eq!(lock.finished.load(Ordering::SeqCst), 1);
    }
}
