//! The plane of a file store: asynchronous, so that a host's queue depth reaches the file.
//! Reads and writes go through io_uring where the kernel runs it (probed when the plane is
//! made), everything else, and everything where io_uring is missing or refused, through the
//! thread pool of positional I/O.

use crate::inline::geometry;
use crate::plane::{Buffers, Complete, Done, Engine, Geometry, Op, Options};
use crate::pool_plane::Core;
use crate::ring::Ring;
use crate::{FileStore, Plane, RangeLock};
use std::io;
use std::sync::Arc;

pub struct FilePlane {
    core: Arc<Core>,
    ring: Option<Arc<Ring>>,
    /// The file, for reads the page cache answers at once; `None` where none may (direct
    /// I/O, or a delay that every operation must take).
    cached: Option<Arc<FileStore>>,
}

impl FilePlane {
    /// A plane over `store` that answers through `complete`, with the engine `options` asks
    /// for (io_uring where it runs, by default). Says which engine runs, in the log.
    pub fn new(store: Arc<FileStore>, options: &Options, complete: Complete) -> io::Result<Self> {
        let core = Core::new(store.clone(), options, complete)?;
        let path = store.path().display().to_string();
        let ring = match options.engine {
            Engine::Pool => None,
            Engine::Uring => Some(Ring::new(store.clone(), core.clone()).map_err(|e| {
                io::Error::new(e.kind(), format!("{path}: io_uring does not run here: {e}"))
            })?),
            Engine::Auto => match Ring::new(store.clone(), core.clone()) {
                Ok(ring) => Some(ring),
                Err(e) => {
                    tracing::info!(file = %path, error = %e, "io_uring does not run here");
                    None
                }
            },
        };
        tracing::info!(
            file = %path,
            engine = if ring.is_some() { "io_uring" } else { "thread pool" },
            direct = store.direct_block().is_some(),
            threads = options.threads,
            "data plane"
        );
        let cached = (options.delay.is_none() && store.direct_block().is_none()).then_some(store);
        Ok(FilePlane { core, ring, cached })
    }

    /// The engine that runs reads and writes: [`Engine::Uring`] or [`Engine::Pool`].
    pub fn engine(&self) -> Engine {
        match self.ring {
            Some(_) => Engine::Uring,
            None => Engine::Pool,
        }
    }

    /// The plane's range lock (its waiting operations, for tests and metrics).
    pub fn range_lock(&self) -> &RangeLock {
        &self.core.ranges
    }
}

impl Plane for FilePlane {
    fn is_inline(&self) -> bool {
        false
    }

    fn submit(&self, id: u64, op: Op, buffers: Buffers<'_>) -> Option<Done> {
        self.core
            .submit(id, op, buffers, |op, owned| match (&self.ring, &op) {
                (Some(ring), Op::Read { .. } | Op::Write { .. }) => ring.start(op, owned),
                _ => self.core.start(op, owned),
            })
    }

    /// A read whose pages are all cached, copied now (no hop to io_uring's reaper and back):
    /// as the range lock's reads do, it stands only if no atomic write began meanwhile.
    fn try_now(&self, op: &Op, data_in: &mut Vec<u8>) -> Option<Done> {
        let (Some(file), &Op::Read { offset, len }) = (&self.cached, op) else {
            return None;
        };
        let noted = self.core.ranges.read_start()?;
        let start = data_in.len();
        if !file.read_cached(offset, len as usize, data_in) {
            return None;
        }
        if !self.core.ranges.read_stands(noted) {
            data_in.truncate(start);
            return None;
        }
        Some(Done::Ok)
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

impl Drop for FilePlane {
    fn drop(&mut self) {
        if let Some(ring) = &self.ring {
            ring.stop();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Failure, Plane};
    use std::sync::mpsc;

    /// Once syncing has failed, every durable write fails, on either engine, as the store's
    /// own durable writes do (the crash tests rely on it); plain writes go on.
    #[test]
    fn durable_writes_fail_for_good_once_syncing_has_failed() {
        let dir = tempfile::tempdir().unwrap();
        for engine in [Engine::Uring, Engine::Pool] {
            let path = dir.path().join(format!("{engine:?}.img"));
            let store = Arc::new(FileStore::open(&path, Some(1 << 20)).unwrap());
            let (tx, rx) = mpsc::channel();
            let tx = parking_lot::Mutex::new(tx);
            let complete: Complete = Arc::new(move |id, done, _, _| {
                let _ = tx.lock().send((id, done));
            });
            let options = Options {
                engine,
                ..Options::default()
            };
            let plane = match FilePlane::new(store.clone(), &options, complete) {
                Ok(plane) => plane,
                Err(e) => {
                    eprintln!("SKIPPED {engine:?}: {e}");
                    continue;
                }
            };
            store.durable_failed(&io::Error::other("writeback lost"));
            let write = |id, durable| {
                let op = Op::Write {
                    offset: 0,
                    len: 512,
                    durable,
                    atomic: false,
                };
                let buffers = Buffers::Owned {
                    data_in: Vec::new(),
                    data_out: vec![1; 512],
                };
                assert!(plane.submit(id, op, buffers).is_none());
                rx.recv().unwrap()
            };
            match write(1, true) {
                (1, Done::Failed(Failure::Write { error, .. })) => {
                    assert!(error.to_string().contains("an earlier fdatasync failed"))
                }
                other => panic!("{engine:?}: {other:?}"),
            }
            assert!(matches!(write(2, false), (2, Done::Ok)), "{engine:?}");
            let buffers = Buffers::Owned {
                data_in: Vec::new(),
                data_out: Vec::new(),
            };
            assert!(plane.submit(3, Op::Flush, buffers).is_none());
            assert!(matches!(rx.recv().unwrap(), (3, Done::Failed(_))));
        }
    }
}
