//! An asynchronous plane over any store: operations run on a thread pool of positional I/O,
//! so as many run at once as the pool has threads, and the submitting thread never waits.
//! The file plane's engine where io_uring is missing, and its engine for every operation
//! io_uring does not run.
//!
//! How operations wait for ranges without blocking a thread: an operation that changes bytes
//! asks the range lock for its range with [`RangeLock::lock_then`] and is sent to the pool
//! once it holds it, keeping it until the store has finished (rule 3 of the design: a write
//! in flight keeps its range until the store is done, so nothing later overtakes it). A read
//! runs at once, and if an atomic write may have overlapped it, is sent again holding its
//! range. Pool threads thus never wait for a range, so a job in the pool's channel cannot be
//! stuck behind one waiting for it. A Copy, which holds one chunk of its destination at a time
//! and waits for each, runs on a thread of its own.

use crate::copy::copy;
use crate::delay::Completer;
use crate::inline::geometry;
use crate::plane::{Buffers, Complete, Done, Failure, Geometry, Op, Options};
use crate::pool::Pool;
use crate::run::{changes, check, exec, run};
use crate::{KeptFiles, Plane, RangeLock, Store};
use std::io;
use std::sync::Arc;
use std::time::Instant;

/// Copies that run at once on one logical unit; more wait their turn.
const COPY_THREADS: usize = 2;

/// What an asynchronous plane's operations share.
pub(crate) struct Core {
    pub(crate) store: Arc<dyn Store>,
    /// The logical unit's kept state files.
    pub(crate) kept: KeptFiles,
    pub(crate) ranges: RangeLock,
    pub(crate) pool: Pool,
    /// Copies wait for their destination's ranges chunk by chunk, so they run here, never
    /// on `pool`.
    copies: Pool,
    pub(crate) completer: Completer,
}

/// An operation's owned buffers and submission time, on its way through a plane.
pub(crate) struct Owned {
    pub(crate) id: u64,
    pub(crate) data_in: Vec<u8>,
    pub(crate) data_out: Vec<u8>,
    pub(crate) submitted: Option<Instant>,
}

impl Core {
    pub(crate) fn new(
        store: Arc<dyn Store>,
        options: &Options,
        complete: Complete,
    ) -> io::Result<Arc<Self>> {
        Ok(Arc::new(Core {
            store,
            kept: options.kept.clone(),
            ranges: RangeLock::default(),
            pool: Pool::new(options.threads, "stint-plane")?,
            copies: Pool::new(COPY_THREADS, "stint-copy")?,
            completer: Completer::new(complete, options.delay)?,
        }))
    }

    /// Hand `done` back with the buffers.
    pub(crate) fn complete(&self, op: Owned, done: Done) {
        self.completer
            .complete(op.id, done, op.data_in, op.data_out, op.submitted);
    }

    /// Answer `done` from a pool thread: never inside `submit`, whose caller may hold locks
    /// its handler takes.
    pub(crate) fn answer(self: &Arc<Self>, op: Owned, done: Done) {
        let core = self.clone();
        self.pool.spawn(move || core.complete(op, done));
    }

    /// The part of `submit` every asynchronous plane shares: borrowed buffers run now, on the
    /// caller's thread; owned ones are checked, then `start`ed.
    pub(crate) fn submit(
        self: &Arc<Self>,
        id: u64,
        op: Op,
        buffers: Buffers<'_>,
        start: impl FnOnce(Op, Owned),
    ) -> Option<Done> {
        let (data_in, data_out) = match buffers {
            Buffers::Borrowed { data_in, data_out } => {
                return Some(run(&*self.store, &self.ranges, &op, data_in, data_out));
            }
            Buffers::Owned { data_in, data_out } => (data_in, data_out),
        };
        let owned = Owned {
            id,
            data_in,
            data_out,
            submitted: self.completer.stamp(),
        };
        match check(self.store.len(), &op, owned.data_out.len()) {
            Ok(()) => start(op, owned),
            Err(failed) => self.answer(owned, Done::Failed(failed)),
        }
        None
    }

    /// Run a checked `op` on the pool (a Copy on the copy threads).
    pub(crate) fn start(self: &Arc<Self>, op: Op, owned: Owned) {
        match op {
            Op::Read { offset, len } => self.read(offset, len, owned),
            Op::Copy {
                source,
                destination,
                from,
                to,
                len,
                durable,
            } => {
                let core = self.clone();
                self.copies.spawn(move || {
                    let done = copy(
                        &*core.store,
                        &core.ranges,
                        &source,
                        &destination,
                        from,
                        to,
                        len,
                        durable,
                    );
                    core.complete(owned, done);
                });
            }
            Op::Keep { file, contents } => {
                let core = self.clone();
                self.pool.spawn(move || {
                    let done = core.kept.keep(file, contents.as_deref());
                    core.complete(owned, done);
                });
            }
            _ => {
                let core = self.clone();
                let Some((start, len, atomic)) = changes(&op) else {
                    return self.pool.spawn(move || {
                        let done = exec(&*core.store, &op, &owned.data_out);
                        core.complete(owned, done);
                    });
                };
                self.ranges.lock_then(start, len, atomic, move |held| {
                    let pool = core.clone();
                    pool.pool.spawn(move || {
                        let done = exec(&*core.store, &op, &owned.data_out);
                        // The store has finished: the range goes before the answer.
                        drop(held);
                        core.complete(owned, done);
                    });
                });
            }
        }
    }

    /// A read on the pool, seeing atomic writes whole: copied at once, and if an atomic write
    /// may have overlapped the copy, copied again once it holds its range.
    fn read(self: &Arc<Self>, offset: u64, len: u32, mut owned: Owned) {
        let core = self.clone();
        self.pool.spawn(move || {
            let start = owned.data_in.len();
            owned.data_in.resize(start + len as usize, 0);
            if let Some(noted) = core.ranges.read_start() {
                let read = core.store.read_at(offset, &mut owned.data_in[start..]);
                if core.ranges.read_stands(noted) {
                    return core.end_read(owned, start, offset, read);
                }
            }
            let again = core.clone();
            core.ranges
                .lock_then(offset, len.into(), false, move |held| {
                    let pool = again.clone();
                    pool.pool.spawn(move || {
                        let read = again.store.read_at(offset, &mut owned.data_in[start..]);
                        drop(held);
                        again.end_read(owned, start, offset, read);
                    });
                });
        });
    }

    /// Answer a read of `data_in[start..]` at `offset`; a failed one leaves `data_in` as it was.
    pub(crate) fn end_read(
        &self,
        mut owned: Owned,
        start: usize,
        offset: u64,
        read: io::Result<()>,
    ) {
        let done = match read {
            Ok(()) => Done::Ok,
            Err(error) => {
                owned.data_in.truncate(start);
                Done::Failed(Failure::Read {
                    at: Some(offset),
                    error,
                })
            }
        };
        self.complete(owned, done);
    }

    /// [`Plane::write_now`] of an asynchronous plane.
    pub(crate) fn write_now(&self, offset: u64, buf: &[u8], durable: bool) -> io::Result<()> {
        crate::inline::write_now(&*self.store, &self.ranges, offset, buf, durable)
    }

    /// [`Plane::read_now`] of an asynchronous plane.
    pub(crate) fn read_now(&self, offset: u64, buf: &mut [u8]) -> io::Result<()> {
        self.ranges
            .read(offset, buf.len() as u64, || self.store.read_at(offset, buf))
    }
}

/// An asynchronous plane over any store, its operations on a thread pool.
pub struct PoolPlane {
    core: Arc<Core>,
}

impl PoolPlane {
    /// A plane over `store` that answers through `complete` (`options.engine` is the file
    /// plane's choice; this plane is the pool).
    pub fn new(store: Arc<dyn Store>, options: &Options, complete: Complete) -> io::Result<Self> {
        Ok(PoolPlane {
            core: Core::new(store, options, complete)?,
        })
    }

    /// The plane's range lock (its waiting operations, for tests and metrics).
    pub fn range_lock(&self) -> &RangeLock {
        &self.core.ranges
    }
}

impl Plane for PoolPlane {
    fn is_inline(&self) -> bool {
        false
    }

    fn submit(&self, id: u64, op: Op, buffers: Buffers<'_>) -> Option<Done> {
        self.core
            .submit(id, op, buffers, |op, owned| self.core.start(op, owned))
    }

    fn geometry(&self) -> Geometry {
        geometry(&*self.core.store)
    }

    fn resize(&self, bytes: Option<u64>) -> io::Result<u64> {
        crate::resize::resize(&*self.core.store, &self.core.ranges, bytes)
    }

    fn read_now(&self, offset: u64, buf: &mut [u8]) -> io::Result<()> {
        self.core.read_now(offset, buf)
    }

    fn write_now(&self, offset: u64, buf: &[u8], durable: bool) -> io::Result<()> {
        self.core.write_now(offset, buf, durable)
    }

    fn load(&self, file: crate::KeptFile) -> io::Result<Option<Vec<u8>>> {
        self.core.kept.load(file)
    }
}
