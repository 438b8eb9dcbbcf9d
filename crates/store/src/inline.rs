//! The plane of a RAM store: every operation runs on the caller's thread, the plain-LUN fast
//! path (a READ or WRITE allocates nothing and copies once, between the store and the
//! caller's buffer).

use crate::plane::{invalid, refused, Buffers, Done, Geometry, KeptFile, Op, Plane};
use crate::{run, KeptFiles, RangeLock, Store};
use std::io;
use std::sync::Arc;

pub struct InlinePlane {
    store: Arc<dyn Store>,
    ranges: RangeLock,
    kept: KeptFiles,
}

impl InlinePlane {
    pub fn new(store: Arc<dyn Store>) -> Self {
        InlinePlane {
            store,
            ranges: RangeLock::default(),
            kept: KeptFiles::default(),
        }
    }

    /// The plane keeping the logical unit's state files at `kept`.
    pub fn keeping(mut self, kept: KeptFiles) -> Self {
        self.kept = kept;
        self
    }
}

impl Plane for InlinePlane {
    fn is_inline(&self) -> bool {
        true
    }

    fn submit(&self, _id: u64, op: Op, buffers: Buffers<'_>) -> Option<Done> {
        if let Op::Keep { file, contents } = &op {
            return Some(self.kept.keep(*file, contents.as_deref()));
        }
        Some(match buffers {
            Buffers::Borrowed { data_in, data_out } => {
                run(&*self.store, &self.ranges, &op, data_in, data_out)
            }
            Buffers::Owned { .. } => Done::Failed(refused(
                &op,
                invalid(
                    "an inline plane borrows its buffers: it cannot hand owned ones back".into(),
                ),
            )),
        })
    }

    fn geometry(&self) -> Geometry {
        geometry(&*self.store)
    }

    fn resize(&self, bytes: Option<u64>) -> io::Result<u64> {
        crate::resize::resize(&*self.store, &self.ranges, bytes)
    }

    fn read_now(&self, offset: u64, buf: &mut [u8]) -> io::Result<()> {
        self.ranges
            .read(offset, buf.len() as u64, || self.store.read_at(offset, buf))
    }

    fn write_now(&self, offset: u64, buf: &[u8], durable: bool) -> io::Result<()> {
        write_now(&*self.store, &self.ranges, offset, buf, durable)
    }

    fn load(&self, file: KeptFile) -> io::Result<Option<Vec<u8>>> {
        self.kept.load(file)
    }
}

/// [`Plane::write_now`] on a store and its range lock.
pub(crate) fn write_now(
    store: &dyn Store,
    ranges: &RangeLock,
    offset: u64,
    buf: &[u8],
    durable: bool,
) -> io::Result<()> {
    let _held = ranges.lock(offset, buf.len() as u64, false);
    if durable {
        store.write_durable(offset, buf)
    } else {
        store.write_at(offset, buf)
    }
}

/// What a store tells the device about itself.
pub(crate) fn geometry(store: &dyn Store) -> Geometry {
    Geometry {
        capacity: store.len(),
        unmap_granularity: store.unmap_granularity(),
        tells_allocation: store.tells_allocation(),
    }
}
