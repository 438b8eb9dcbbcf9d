//! Byte ranges held by operations that change the medium, so that each such operation is one
//! uninterrupted change with respect to every other one on the same bytes: WRITE ATOMIC is
//! all-or-nothing (SBC-4 §4.29), COMPARE AND WRITE and ORWRITE are read-modify-write sequences
//! (SBC-4 §5.3, §5.8), and a plain WRITE never lands in the middle of one of them. Operations
//! on disjoint ranges never wait for each other; overlapping ones get their range in the order
//! they asked for it (first come, first served), so a later write never overtakes an earlier
//! one it overlaps.
//!
//! A range is taken in one of two ways: [`RangeLock::lock`] blocks the calling thread until the
//! range is free (the synchronous executor, on the caller's thread); [`RangeLock::lock_then`]
//! never blocks: it runs its continuation at once when the range is free, or queues it and runs
//! it on the thread that releases the last conflicting range (the asynchronous planes, whose
//! submitting threads must not wait). Either way the range is held by a [`Held`] value until it
//! is dropped, which an asynchronous plane does when the store has finished the operation, not
//! when it was submitted.
//!
//! Reads see those atomic changes whole (all old or all new data, SBC-4 §4.29.2) without
//! taking the lock on their usual path: atomic writers count themselves in and out around
//! their change, and a read whose copy no atomic writer could have overlapped keeps it; one
//! that might have is done again holding its range (see [`RangeLock::read`]).

use parking_lot::{Condvar, Mutex};
use std::collections::VecDeque;
use std::sync::atomic::{fence, AtomicU64, Ordering};
use std::sync::Arc;

/// The range lock of one logical unit; clones share it.
#[derive(Clone, Default)]
pub struct RangeLock {
    inner: Arc<Inner>,
}

#[derive(Default)]
struct Inner {
    state: Mutex<State>,
    /// Signalled when a blocked [`RangeLock::lock`] caller was granted its range.
    granted: Condvar,
    /// Atomic writes granted and released since the lock was made; equal when none is running.
    begun: AtomicU64,
    finished: AtomicU64,
}

#[derive(Default)]
struct State {
    /// The held ranges, `[start, end)`, non-empty; one per operation running on the unit.
    held: Vec<(u64, u64)>,
    /// Operations waiting for a range, oldest first.
    waiting: VecDeque<Waiter>,
    /// Tickets of blocked threads whose range was granted, until they notice.
    granted: Vec<u64>,
    next_ticket: u64,
}

struct Waiter {
    range: (u64, u64),
    atomic: bool,
    then: Then,
}

/// What happens when a waiter gets its range.
enum Then {
    /// A thread blocked in [`RangeLock::lock`] with this ticket wakes up.
    Wake(u64),
    /// The continuation of [`RangeLock::lock_then`] runs on the releasing thread.
    Run(Box<dyn FnOnce(Held) + Send>),
}

/// A held range; dropping it lets waiting operations in. An atomic write's range also counts
/// the write as finished when dropped.
#[must_use = "the range is released when this is dropped"]
pub struct Held {
    inner: Arc<Inner>,
    range: (u64, u64),
    atomic: bool,
}

/// What a read noted before its copy: the atomic writes begun by then (see [`RangeLock::read`]).
#[derive(Clone, Copy, Debug)]
pub struct ReadStart(u64);

/// Whether two ranges share a byte; an empty range shares none.
fn overlaps(a: (u64, u64), b: (u64, u64)) -> bool {
    a.0 < b.1 && b.0 < a.1 && a.0 < a.1 && b.0 < b.1
}

impl State {
    /// Whether `range` conflicts with a held range or with one an earlier operation waits for.
    fn busy(&self, range: (u64, u64)) -> bool {
        self.held.iter().any(|&h| overlaps(h, range))
            || self.waiting.iter().any(|w| overlaps(w.range, range))
    }
}

impl RangeLock {
    /// `[start, start + len)` (saturating at the end of the address space).
    fn span(start: u64, len: u64) -> (u64, u64) {
        (start, start.saturating_add(len))
    }

    /// Record `range` as held by a new [`Held`].
    fn grant(&self, state: &mut State, range: (u64, u64), atomic: bool) -> Held {
        self.inner.record(state, range, atomic);
        Held {
            inner: self.inner.clone(),
            range,
            atomic,
        }
    }

    /// Hold `len` bytes from `start`, blocking the calling thread while any overlaps a held
    /// range or one that an earlier operation is waiting for. `atomic`: an atomic write (WRITE
    /// ATOMIC, COMPARE AND WRITE, ORWRITE), counted as begun from now until the [`Held`] is
    /// dropped, so that reads overlapping it in time take the slow path. An empty range
    /// conflicts with nothing.
    pub fn lock(&self, start: u64, len: u64, atomic: bool) -> Held {
        let range = Self::span(start, len);
        let mut state = self.inner.state.lock();
        if !state.busy(range) {
            return self.grant(&mut state, range, atomic);
        }
        let ticket = state.next_ticket;
        state.next_ticket += 1;
        state.waiting.push_back(Waiter {
            range,
            atomic,
            then: Then::Wake(ticket),
        });
        loop {
            self.inner.granted.wait(&mut state);
            if let Some(i) = state.granted.iter().position(|&t| t == ticket) {
                state.granted.swap_remove(i);
                // The releaser recorded the range as held and counted an atomic write begun.
                return Held {
                    inner: self.inner.clone(),
                    range,
                    atomic,
                };
            }
        }
    }

    /// Hold `len` bytes from `start` as [`Self::lock`] does, without blocking: `then` runs with
    /// the held range at once, on this thread, when it is free; otherwise it is queued and runs
    /// on the thread that releases the last range in its way. `then` should only start the
    /// operation (push it to a ring, send it to a pool), never wait for another range.
    pub fn lock_then(
        &self,
        start: u64,
        len: u64,
        atomic: bool,
        then: impl FnOnce(Held) + Send + 'static,
    ) {
        let range = Self::span(start, len);
        let mut state = self.inner.state.lock();
        if state.busy(range) {
            state.waiting.push_back(Waiter {
                range,
                atomic,
                then: Then::Run(Box::new(then)),
            });
            return;
        }
        let held = self.grant(&mut state, range, atomic);
        drop(state);
        then(held);
    }

    /// Operations waiting for a range now (tests and metrics).
    pub fn waiting(&self) -> usize {
        self.inner.state.lock().waiting.len()
    }

    /// The first half of [`Self::read`] for a read whose copy happens elsewhere (an
    /// asynchronous plane's ring or pool): what to check once the copy is done, or `None` when
    /// an atomic write is running and the read must be made holding its range.
    pub fn read_start(&self) -> Option<ReadStart> {
        let begun = self.inner.begun.load(Ordering::SeqCst);
        (self.inner.finished.load(Ordering::SeqCst) == begun).then_some(ReadStart(begun))
    }

    /// The second half: whether the copy made since `start` stands (no atomic write began
    /// meanwhile); when it does not, the read is made again holding its range.
    pub fn read_stands(&self, start: ReadStart) -> bool {
        fence(Ordering::SeqCst);
        self.inner.begun.load(Ordering::SeqCst) == start.0
    }

    /// Run `copy` (a read of `len` bytes from `start` through the store) so that it sees
    /// every atomic write whole. First without the lock; the copy stands if no atomic write
    /// was running when it started (`begun == finished`, read in that order) and none began
    /// before it ended (`begun` unchanged). Otherwise `copy` runs again holding the range,
    /// which every atomic write holds while it changes bytes.
    ///
    /// Why that is enough: an atomic write W either began before the first load of `begun`
    /// or after it. If after, its increment precedes its first byte change, and the store's
    /// own synchronisation (a lock per RAM chunk, a system call or an io_uring submission and
    /// completion per file access) orders any byte of W the copy saw before the second load
    /// of `begun`, which then differs. If before, it is counted in `begun = b`; `finished`
    /// counts only writes that began, so `finished == b` (with no write begun since, by the
    /// second check) means W finished before the copy started and the copy saw all of it.
    pub fn read<T>(&self, start: u64, len: u64, mut copy: impl FnMut() -> T) -> T {
        if let Some(noted) = self.read_start() {
            let copied = copy();
            if self.read_stands(noted) {
                return copied;
            }
        }
        let _held = self.lock(start, len, false);
        copy()
    }
}

impl Inner {
    /// Record `range` as held; an atomic write counts as begun before it changes a byte.
    fn record(&self, state: &mut State, range: (u64, u64), atomic: bool) {
        if range.0 < range.1 {
            state.held.push(range);
        }
        if atomic {
            self.begun.fetch_add(1, Ordering::SeqCst);
        }
    }
}

impl Held {
    /// The held range, `[start, end)`.
    pub fn range(&self) -> (u64, u64) {
        self.range
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        if self.atomic {
            self.inner.finished.fetch_add(1, Ordering::SeqCst);
        }
        let mut state = self.inner.state.lock();
        if let Some(i) = state.held.iter().position(|&r| r == self.range) {
            state.held.swap_remove(i);
        }
        // Grant, oldest first, every waiter whose range is now free of held ranges and of
        // the ranges of the waiters still ahead of it.
        let mut woke = false;
        let mut run = Vec::new();
        let mut i = 0;
        while i < state.waiting.len() {
            let range = state.waiting[i].range;
            let free = !state.held.iter().any(|&h| overlaps(h, range))
                && !state
                    .waiting
                    .iter()
                    .take(i)
                    .any(|w| overlaps(w.range, range));
            if !free {
                i += 1;
                continue;
            }
            let Some(w) = state.waiting.remove(i) else {
                break;
            };
            self.inner.record(&mut state, w.range, w.atomic);
            match w.then {
                Then::Wake(ticket) => {
                    // The blocked thread builds its own `Held` when it wakes.
                    state.granted.push(ticket);
                    woke = true;
                }
                Then::Run(then) => {
                    let held = Held {
                        inner: self.inner.clone(),
                        range: w.range,
                        atomic: w.atomic,
                    };
                    run.push((then, held));
                }
            }
        }
        drop(state);
        if woke {
            self.inner.granted.notify_all();
        }
        for (then, held) in run {
            then(held);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicBool;
    use std::sync::mpsc;

    /// Wait until `lock` has `n` waiters (a thread is blocked in `lock`, or a continuation
    /// queued): no sleeping on a guess.
    fn until_waiting(lock: &RangeLock, n: usize) {
        while lock.waiting() != n {
            std::thread::yield_now();
        }
    }

    #[test]
    fn overlapping_ranges_wait_disjoint_ones_do_not() {
        let lock = RangeLock::default();
        let inside = AtomicBool::new(false);
        let first = lock.lock(10, 10, false);
        let _disjoint = lock.lock(20, 5, false);
        std::thread::scope(|s| {
            let waiter = s.spawn(|| {
                let _g = lock.lock(19, 1, false);
                inside.store(true, Ordering::SeqCst);
            });
            until_waiting(&lock, 1);
            assert!(!inside.load(Ordering::SeqCst), "byte 19 is held");
            drop(first);
            waiter.join().unwrap();
        });
        assert!(inside.load(Ordering::SeqCst));
        assert_eq!(
            lock.inner.state.lock().held.len(),
            1,
            "only the disjoint range"
        );
    }

    #[test]
    fn empty_ranges_conflict_with_nothing() {
        let lock = RangeLock::default();
        let _all = lock.lock(0, u64::MAX, false);
        let _empty = lock.lock(100, 0, false);
        let _at_end = lock.lock(u64::MAX, 10, false);
        assert_eq!(lock.waiting(), 0);
    }

    #[test]
    fn reads_wait_only_for_atomic_writes() {
        let lock = RangeLock::default();
        // A plain write's range does not stop a read: the read takes no lock.
        let plain = lock.lock(0, 8, false);
        assert_eq!(lock.read(0, 8, || 1), 1);
        drop(plain);
        let atomic = lock.lock(0, 8, true);
        let done = AtomicBool::new(false);
        std::thread::scope(|s| {
            let reader = s.spawn(|| {
                let copies = std::cell::Cell::new(0);
                lock.read(4, 1, || copies.set(copies.get() + 1));
                done.store(true, Ordering::SeqCst);
                copies.get()
            });
            until_waiting(&lock, 1);
            assert!(!done.load(Ordering::SeqCst), "an atomic write holds byte 4");
            drop(atomic);
            assert_eq!(reader.join().unwrap(), 1, "copied once, holding the range");
        });
        assert_eq!(lock.inner.begun.load(Ordering::SeqCst), 1);
        assert_eq!(lock.inner.finished.load(Ordering::SeqCst), 1);
    }

    #[test]
    fn continuations_run_at_once_or_on_release_in_order() {
        let lock = RangeLock::default();
        let (tx, rx) = mpsc::channel();
        let send = |name: &'static str| {
            let tx = tx.clone();
            move |held: Held| tx.send((name, held)).unwrap()
        };
        lock.lock_then(0, 100, false, send("first"));
        let (name, first) = rx.try_recv().unwrap();
        assert_eq!(name, "first", "a free range runs the continuation at once");
        lock.lock_then(50, 100, false, send("second"));
        lock.lock_then(120, 10, true, send("third"));
        lock.lock_then(500, 10, false, send("disjoint"));
        assert_eq!(rx.try_recv().unwrap().0, "disjoint", "passes the queue");
        assert!(rx.try_recv().is_err());
        assert_eq!(lock.waiting(), 2);
        assert!(lock.read_start().is_some(), "no atomic write granted yet");
        drop(first);
        let (name, second) = rx.try_recv().unwrap();
        assert_eq!(name, "second");
        // The third overlaps the second: it waits, although the first is gone.
        assert!(rx.try_recv().is_err());
        drop(second);
        let (name, third) = rx.try_recv().unwrap();
        assert_eq!((name, third.range()), ("third", (120, 130)));
        assert!(lock.read_start().is_none(), "an atomic write is running");
        drop(third);
        assert!(lock.read_start().is_some());
    }

    #[test]
    fn a_later_range_waits_behind_an_earlier_waiter_it_overlaps() {
        let lock = RangeLock::default();
        let (tx, rx) = mpsc::channel();
        let held = lock.lock(0, 10, false);
        let t = tx.clone();
        lock.lock_then(5, 10, false, move |h| t.send(("a", h)).unwrap());
        // Free of held ranges, but it overlaps the waiting one: first come, first served.
        lock.lock_then(12, 10, false, move |h| tx.send(("b", h)).unwrap());
        assert!(rx.try_recv().is_err());
        drop(held);
        let (a, ha) = rx.try_recv().unwrap();
        assert_eq!(a, "a");
        assert!(rx.try_recv().is_err());
        drop(ha);
        assert_eq!(rx.try_recv().unwrap().0, "b");
    }

    #[test]
    fn blocked_threads_and_continuations_share_one_queue() {
        let lock = RangeLock::default();
        let held = lock.lock(0, 10, false);
        let order = Arc::new(Mutex::new(Vec::new()));
        std::thread::scope(|s| {
            let o = order.clone();
            let l = lock.clone();
            let blocked = s.spawn(move || {
                let _h = l.lock(0, 10, false);
                o.lock().push("thread");
            });
            until_waiting(&lock, 1);
            let o = order.clone();
            lock.lock_then(0, 10, false, move |_h| o.lock().push("continuation"));
            drop(held);
            blocked.join().unwrap();
        });
        assert_eq!(*order.lock(), ["thread", "continuation"]);
    }
}
