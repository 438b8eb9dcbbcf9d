//! The io_uring engine of a file plane: reads and writes go to the kernel as ring entries,
//! as many at once as the host sends (up to the ring's size; more wait in a backlog), and a
//! reaper thread takes their completions. A write holds its range from before its entry is
//! pushed until its completion is reaped; a read notes the atomic writes begun when it is
//! pushed and, if one began before its completion, is pushed again holding its range.
//!
//! On a direct store the kernel moves the bytes between the file and a page-aligned bounce
//! buffer the ring owns (O_DIRECT needs aligned memory; the callers' `Vec<u8>`s are not), and
//! the ring copies them to or from the caller's buffer.

// io_uring's submission is `unsafe`: the kernel writes into (or reads from) the memory an
// entry names until the entry completes, beyond what the borrow checker can see. Each block
// below says why its use is sound.
#![allow(unsafe_code)]

use crate::aligned::Aligned;
use crate::plane::{Done, Failure, Op};
use crate::pool_plane::{Core, Owned};
use crate::range_lock::{Held, ReadStart};
use crate::{check_span, FileStore, Store};
use io_uring::{opcode, squeue, types, IoUring};
use parking_lot::Mutex;
use slab::Slab;
use std::collections::VecDeque;
use std::io;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Arc;

/// Entries of the submission queue (the completion queue has twice as many).
const ENTRIES: u32 = 256;
/// Operations in the kernel at once: the submission queue keeps room for a stop and a tick,
/// and the completion queue can never overflow.
const IN_KERNEL: usize = ENTRIES as usize - 2;
/// The `user_data` of the entries that are no operation.
const STOP: u64 = u64::MAX;
const TICK: u64 = u64::MAX - 1;
/// How often a stopping reaper looks whether it can go.
const TICK_EVERY: types::Timespec = types::Timespec::new().nsec(50_000_000);
/// Bounce buffers kept for reuse.
const SPARE_BOUNCES: usize = 64;

pub(crate) struct Ring {
    uring: IoUring,
    /// The only way to the submission queue, and the operations in flight.
    state: Mutex<State>,
    store: Arc<FileStore>,
    core: Arc<Core>,
    bounces: Mutex<Vec<Aligned>>,
    tick: types::Timespec,
}

struct State {
    /// Operations in the kernel or in the backlog, by `user_data`.
    ops: Slab<Io>,
    /// Operations waiting for room in the kernel, oldest first.
    backlog: VecDeque<usize>,
    in_kernel: usize,
}

/// A read or a write on its way through the ring.
struct Io {
    dir: Dir,
    offset: u64,
    len: usize,
    /// Bytes the kernel has moved so far (a short transfer is continued).
    done: usize,
    /// Where a read's bytes go in `data_in`.
    start: usize,
    owned: Owned,
    bounce: Option<Aligned>,
    held: Option<Held>,
}

enum Dir {
    /// A read, with the atomic writes begun when it was pushed unless it holds its range.
    Read(Option<ReadStart>),
    Write {
        durable: bool,
    },
}

impl Ring {
    /// A ring for `store`, once the kernel has shown it runs one: set up, the operations it
    /// needs supported, and a no-op through it completed. Fails where io_uring is missing
    /// (ENOSYS), disabled (`kernel.io_uring_disabled`: EPERM) or filtered (seccomp).
    pub(crate) fn new(store: Arc<FileStore>, core: Arc<Core>) -> io::Result<Arc<Self>> {
        let mut uring = IoUring::new(ENTRIES)?;
        let mut probe = io_uring::Probe::new();
        uring.submitter().register_probe(&mut probe)?;
        let codes = [
            opcode::Read::CODE,
            opcode::Write::CODE,
            opcode::Nop::CODE,
            opcode::Timeout::CODE,
        ];
        if let Some(code) = codes.into_iter().find(|&c| !probe.is_supported(c)) {
            return Err(io::Error::new(
                io::ErrorKind::Unsupported,
                format!("the kernel's io_uring lacks operation {code}"),
            ));
        }
        let nop = opcode::Nop::new().build().user_data(STOP);
        // SAFETY: a no-op names no memory; `uring` is borrowed mutably, so no other
        // submission queue exists.
        unsafe { uring.submission().push(&nop) }
            .map_err(|_| io::Error::other("a new io_uring has no room for one entry"))?;
        uring.submit_and_wait(1)?;
        match uring.completion().next() {
            Some(c) if c.result() >= 0 => {}
            Some(c) => return Err(io::Error::from_raw_os_error(-c.result())),
            None => return Err(io::Error::other("io_uring completed nothing")),
        }
        let ring = Arc::new(Ring {
            uring,
            state: Mutex::new(State {
                ops: Slab::new(),
                backlog: VecDeque::new(),
                in_kernel: 0,
            }),
            store,
            core,
            bounces: Mutex::default(),
            tick: TICK_EVERY,
        });
        let reaper = ring.clone();
        std::thread::Builder::new()
            .name("stint-uring".into())
            .spawn(move || reaper.reap())?;
        Ok(ring)
    }

    /// Start a checked Read or Write.
    pub(crate) fn start(self: &Arc<Self>, op: Op, mut owned: Owned) {
        let (offset, len, dir, atomic) = match op {
            Op::Read { offset, len } => (offset, len, Dir::Read(None), false),
            Op::Write {
                offset,
                len,
                durable,
                atomic,
            } => {
                if let Err(error) = durable.then(|| self.store.durable_ok()).transpose() {
                    let failed = Failure::Write {
                        at: Some(offset),
                        error,
                    };
                    return self.core.answer(owned, Done::Failed(failed));
                }
                (offset, len, Dir::Write { durable }, atomic)
            }
            _ => {
                return self.core.start(op, owned);
            }
        };
        if len == 0 {
            return self.core.answer(owned, Done::Ok);
        }
        if let Err(error) = self.store.direct_aligned(offset, len as usize) {
            let failed = match dir {
                Dir::Read(_) => Failure::Read {
                    at: Some(offset),
                    error,
                },
                Dir::Write { .. } => Failure::Write {
                    at: Some(offset),
                    error,
                },
            };
            return self.core.answer(owned, Done::Failed(failed));
        }
        let start = owned.data_in.len();
        if let Dir::Read(_) = dir {
            owned.data_in.resize(start + len as usize, 0);
        }
        let mut io = Io {
            dir,
            offset,
            len: len as usize,
            done: 0,
            start,
            owned,
            bounce: None,
            held: None,
        };
        if let Dir::Read(noted) = &mut io.dir {
            *noted = self.core.ranges.read_start();
            if noted.is_some() {
                return self.push(io);
            }
        }
        // A write, or a read while an atomic write runs: once it holds its range.
        let ring = self.clone();
        self.core
            .ranges
            .lock_then(offset, len.into(), atomic, move |held| {
                if let Dir::Write { .. } = io.dir {
                    // A shrink may have cut the range while the write waited for it: the
                    // kernel would extend the file past its new end.
                    if let Err(error) = check_span(ring.store.len(), offset, len.into()) {
                        drop(held);
                        let failed = Failure::Write {
                            at: Some(offset),
                            error,
                        };
                        return ring.core.answer(io.owned, Done::Failed(failed));
                    }
                    ring.store.written(offset, io.len);
                }
                io.held = Some(held);
                ring.push(io);
            });
    }

    /// Put `io` in the kernel, or in the backlog when the kernel has as many as it may.
    fn push(&self, mut io: Io) {
        if self.store.direct_block().is_some() && io.bounce.is_none() {
            let mut bounce = self.bounces.lock().pop().unwrap_or_default();
            let buf = bounce.get(io.len);
            if let Dir::Write { .. } = io.dir {
                buf.copy_from_slice(&io.owned.data_out[..io.len]);
            }
            io.bounce = Some(bounce);
        }
        let mut state = self.state.lock();
        let key = state.ops.insert(io);
        if state.in_kernel < IN_KERNEL {
            state.in_kernel += 1;
            self.enqueue(&mut state, key);
        } else {
            state.backlog.push_back(key);
        }
        drop(state);
        self.enter();
    }

    /// Push the entry of operation `key`, counted in `in_kernel`, to the submission queue.
    fn enqueue(&self, state: &mut State, key: usize) {
        let Some(io) = state.ops.get_mut(key) else {
            return;
        };
        let durable = matches!(io.dir, Dir::Write { durable: true });
        let fd = types::Fd(self.store.fd(durable));
        let offset = io.offset + io.done as u64;
        let len = io.len;
        let entry = match (&mut io.bounce, &io.dir) {
            (Some(bounce), Dir::Read(_)) => {
                let rest = &mut bounce.get(len)[io.done..];
                opcode::Read::new(fd, rest.as_mut_ptr(), rest.len() as u32)
                    .offset(offset)
                    .build()
            }
            (None, Dir::Read(_)) => {
                let rest = &mut io.owned.data_in[io.start + io.done..io.start + len];
                opcode::Read::new(fd, rest.as_mut_ptr(), rest.len() as u32)
                    .offset(offset)
                    .build()
            }
            (Some(bounce), Dir::Write { .. }) => {
                let rest = &bounce.get(len)[io.done..];
                opcode::Write::new(fd, rest.as_ptr(), rest.len() as u32)
                    .offset(offset)
                    .build()
            }
            (None, Dir::Write { .. }) => {
                let rest = &io.owned.data_out[io.done..len];
                opcode::Write::new(fd, rest.as_ptr(), rest.len() as u32)
                    .offset(offset)
                    .build()
            }
        };
        self.push_entry(entry.user_data(key as u64), state, key);
    }

    /// Push `entry` of operation `key`; should the queue be full (it cannot: `in_kernel`
    /// bounds it), the operation goes back to the front of the backlog.
    fn push_entry(&self, entry: squeue::Entry, state: &mut State, key: usize) {
        // SAFETY: the entry names the buffer of the `Io` stored at `key` in `state.ops` (its
        // data-in or data-out `Vec`, or its bounce buffer: heap memory that moving the `Io`
        // does not move), from the byte the kernel has not yet moved to its end, and nothing
        // else touches that buffer until the `Io` leaves `state.ops`, which it does only in
        // `landed`, once the kernel has posted this entry's completion. The descriptor is
        // the `FileStore`'s, which this ring holds, and the ring is dropped only when the
        // reaper returns, with no operation in the kernel (`reap`); were it dropped with some
        // there, its `Drop` leaks their buffers rather than free them. The submission queue is
        // taken only with `state` locked, as it is here, so no other one exists.
        let pushed = unsafe { self.uring.submission_shared().push(&entry) };
        if pushed.is_err() {
            state.in_kernel -= 1;
            state.backlog.push_front(key);
        }
    }

    /// Tell the kernel about the entries pushed. A failure leaves them queued: the reaper's
    /// next turn submits them.
    fn enter(&self) {
        if let Err(e) = self.uring.submit() {
            if !retryable(&e) {
                tracing::error!(error = %e, "io_uring submission failed");
            }
        }
    }

    /// Push an entry that is no operation: the stop, or a tick of `self.tick`.
    fn push_control(&self, user_data: u64) {
        let entry = match user_data {
            STOP => opcode::Nop::new().build(),
            _ => opcode::Timeout::new(&self.tick).build(),
        };
        let _state = self.state.lock();
        // SAFETY: a no-op names no memory; a timeout names `self.tick`, which the kernel
        // reads while the entry is submitted and which lives as long as the ring. The
        // submission queue is taken with `state` locked, so no other one exists; there is
        // room for these two (`IN_KERNEL`).
        let _room = unsafe {
            self.uring
                .submission_shared()
                .push(&entry.user_data(user_data))
        };
        drop(_state);
        self.enter();
    }

    /// The plane is gone: the reaper returns once no operation is left and none can come.
    pub(crate) fn stop(&self) {
        self.push_control(STOP);
    }

    /// The reaper thread: wait for completions and end their operations. After the stop it
    /// returns once no entry of the ring's is in the kernel and it holds the last reference
    /// to the ring (nobody is left who could push one), looking every tick.
    fn reap(self: Arc<Self>) {
        let mut batch = Vec::with_capacity(2 * ENTRIES as usize);
        let mut ended = Vec::with_capacity(2 * ENTRIES as usize);
        let (mut stopping, mut ticking) = (false, false);
        loop {
            if let Err(e) = self.uring.submit_and_wait(1) {
                if !retryable(&e) {
                    tracing::error!(error = %e, "io_uring wait failed");
                    std::thread::sleep(std::time::Duration::from_millis(10));
                }
            }
            // SAFETY: this thread is the only one that takes the completion queue, and drops
            // it before the next turn.
            let completions = unsafe { self.uring.completion_shared() };
            batch.extend(completions.map(|c| (c.user_data(), c.result())));
            let mut state = self.state.lock();
            for &(user_data, result) in &batch {
                match user_data {
                    STOP => stopping = true,
                    TICK => ticking = false,
                    key => {
                        if let Some(io) = self.landed(&mut state, key as usize, result) {
                            ended.push((io, result));
                        }
                    }
                }
            }
            while state.in_kernel < IN_KERNEL {
                let Some(key) = state.backlog.pop_front() else {
                    break;
                };
                state.in_kernel += 1;
                self.enqueue(&mut state, key);
            }
            drop(state);
            batch.clear();
            for (io, result) in ended.drain(..) {
                // A completion handler that panics loses its own answer, not the reaper.
                if catch_unwind(AssertUnwindSafe(|| self.end(io, result))).is_err() {
                    tracing::error!("an io_uring completion panicked");
                }
            }
            if stopping {
                let idle = self.state.lock().ops.is_empty() && !ticking;
                if idle && Arc::strong_count(&self) == 1 {
                    return;
                }
                if !ticking {
                    self.push_control(TICK);
                    ticking = true;
                }
            }
        }
    }

    /// The kernel completed the entry of operation `key` with `result`: continue a short
    /// transfer, else take the operation out of flight.
    fn landed(&self, state: &mut State, key: usize, result: i32) -> Option<Io> {
        let io = state.ops.get_mut(key)?;
        let left = io.len - io.done;
        if result > 0 && (result as usize) < left {
            io.done += result as usize;
            self.enqueue(state, key);
            return None;
        }
        if result > 0 {
            io.done = io.len;
        }
        state.in_kernel -= 1;
        state.ops.try_remove(key)
    }

    /// Answer an operation out of flight (or, a read an atomic write may have overlapped,
    /// push it again holding its range).
    fn end(self: &Arc<Self>, mut io: Io, result: i32) {
        let error = match result {
            r if r < 0 => Some(io::Error::from_raw_os_error(-r)),
            _ if io.done < io.len => Some(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                format!("the kernel moved {} of {} bytes", io.done, io.len),
            )),
            _ => None,
        };
        // The store has finished with the range.
        drop(io.held.take());
        let done = match (&io.dir, error) {
            (Dir::Write { durable }, Some(error)) => {
                if *durable {
                    self.store.durable_failed(&error);
                }
                Done::Failed(Failure::Write {
                    at: Some(io.offset),
                    error,
                })
            }
            (Dir::Write { .. }, None) => Done::Ok,
            (Dir::Read(_), Some(error)) => {
                io.owned.data_in.truncate(io.start);
                Done::Failed(Failure::Read {
                    at: Some(io.offset),
                    error,
                })
            }
            (Dir::Read(noted), None) => {
                if noted.is_some_and(|n| !self.core.ranges.read_stands(n)) {
                    io.done = 0;
                    io.dir = Dir::Read(None);
                    let ring = self.clone();
                    let (offset, len) = (io.offset, io.len as u64);
                    return self.core.ranges.lock_then(offset, len, false, move |held| {
                        io.held = Some(held);
                        ring.push(io);
                    });
                }
                if let Some(bounce) = &mut io.bounce {
                    let range = io.start..io.start + io.len;
                    io.owned.data_in[range].copy_from_slice(bounce.get(io.len));
                }
                Done::Ok
            }
        };
        if let Some(bounce) = io.bounce.take() {
            let mut spare = self.bounces.lock();
            if spare.len() < SPARE_BOUNCES {
                spare.push(bounce);
            }
        }
        self.core.complete(io.owned, done);
    }
}

impl Drop for Ring {
    /// The reaper drops the ring with nothing in the kernel. Should it ever be dropped with
    /// operations still there (the reaper died), their buffers are leaked, never freed: the
    /// kernel may write into them until it has cancelled them.
    fn drop(&mut self) {
        let ops = std::mem::take(&mut self.state.get_mut().ops);
        if !ops.is_empty() {
            tracing::error!(
                operations = ops.len(),
                "io_uring dropped with operations in flight"
            );
            std::mem::forget(ops);
        }
    }
}

/// Errors after which submitting or waiting again is all there is to do.
fn retryable(e: &io::Error) -> bool {
    matches!(
        e.raw_os_error(),
        Some(code) if code == rustix::io::Errno::INTR.raw_os_error()
            || code == rustix::io::Errno::AGAIN.raw_os_error()
            || code == rustix::io::Errno::BUSY.raw_os_error()
    )
}
