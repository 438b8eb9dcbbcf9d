//! Block ranges held by commands that change the medium, so that each such command is one
//! uninterrupted change with respect to every other one on the same blocks: WRITE ATOMIC is
//! all-or-nothing (SBC-4 §4.29), COMPARE AND WRITE and ORWRITE are read-modify-write sequences
//! (SBC-4 §5.3, §5.8), and a plain WRITE never lands in the middle of one of them. Commands on
//! disjoint ranges never wait for each other.

use parking_lot::{Condvar, Mutex};

#[derive(Default)]
pub(crate) struct RangeLock {
    /// The held ranges, `[start, end)` in logical blocks; a handful at most (one per command
    /// running on the logical unit).
    held: Mutex<Vec<(u64, u64)>>,
    released: Condvar,
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
}
