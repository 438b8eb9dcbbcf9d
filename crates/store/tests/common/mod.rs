//! Stores and helpers the plane tests share.
#![allow(dead_code)] // each test binary uses its own part

use std::io;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use store::{Done, FileStore, RamStore, Store};

pub const MIB: u64 = 1 << 20;

/// A store that fails reads or writes on demand, around a RAM store.
pub struct Failing {
    pub inner: RamStore,
    pub fail_reads: AtomicBool,
    pub fail_writes: AtomicBool,
}

impl Failing {
    pub fn new(len: u64) -> Self {
        Failing {
            inner: RamStore::new(len).unwrap(),
            fail_reads: AtomicBool::new(false),
            fail_writes: AtomicBool::new(false),
        }
    }
}

fn eio() -> io::Error {
    io::Error::other("injected EIO")
}

impl Store for Failing {
    fn len(&self) -> u64 {
        self.inner.len()
    }
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> io::Result<()> {
        if self.fail_reads.load(Ordering::SeqCst) {
            return Err(eio());
        }
        self.inner.read_at(offset, buf)
    }
    fn write_at(&self, offset: u64, buf: &[u8]) -> io::Result<()> {
        if self.fail_writes.load(Ordering::SeqCst) {
            return Err(eio());
        }
        self.inner.write_at(offset, buf)
    }
    fn flush(&self) -> io::Result<()> {
        if self.fail_writes.load(Ordering::SeqCst) {
            return Err(eio());
        }
        Ok(())
    }
    fn punch_hole(&self, offset: u64, len: u64) -> io::Result<()> {
        if self.fail_writes.load(Ordering::SeqCst) {
            return Err(eio());
        }
        self.inner.punch_hole(offset, len)
    }
}

/// A directory for test files on a real file system (the target directory: tmpfs, where
/// /tmp may be one, refuses O_DIRECT on older kernels).
pub fn scratch() -> tempfile::TempDir {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR"));
    tempfile::tempdir_in(dir).unwrap()
}

/// A RAM store and a file store of `len` bytes, by name, for tests that run on both.
pub fn stores(dir: &tempfile::TempDir, len: u64) -> Vec<(&'static str, Arc<dyn Store>)> {
    vec![
        ("ram", Arc::new(RamStore::new(len).unwrap())),
        (
            "file",
            Arc::new(FileStore::open(&dir.path().join("lun.img"), Some(len)).unwrap()),
        ),
    ]
}

/// Bytes that differ from block to block and from seed to seed.
pub fn pattern(seed: u8, len: usize) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u64 * 7 + u64::from(seed) * 13 + (i as u64 >> 9)) as u8 | 1)
        .collect()
}

pub fn is_ok(done: &Done) -> bool {
    matches!(done, Done::Ok)
}
