//! Where the bytes live, and the data plane that moves them.
//!
//! A [`Store`] is a flat byte array addressed by offset, whose length changes only on request
//! ([`Store::set_len`]): RAM or a sparse file. The device turns LBAs into offsets and checks
//! ranges before calling, but every store checks again and answers a range error
//! ([`BeyondEnd`]) instead of panicking.
//!
//! A [`Plane`] runs the device's data-plane operations ([`Op`]) on a store: inline for RAM,
//! asynchronously for files and Ceph RBD images, not at all for the simulator (see `plane`).

mod aligned;
mod atomic_file;
mod block;
mod copy;
mod delay;
mod file;
mod file_plane;
mod inline;
mod kept;
mod null;
mod plane;
mod pool;
mod pool_plane;
mod ram;
mod range_lock;
mod rbd;
mod resize;
mod ring;
mod run;

pub use block::BlockDevice;
pub use file::FileStore;
pub use file_plane::FilePlane;
pub use inline::InlinePlane;
pub use kept::KeptFiles;
pub use null::NullPlane;
pub use plane::{
    Buffers, Complete, Done, Engine, Failure, Geometry, KeptFile, Op, Options, Plane, SharedState,
    Source,
};
pub use pool_plane::PoolPlane;
pub use ram::RamStore;
pub use range_lock::{Held, RangeLock, ReadStart};
pub use rbd::{RbdGateway, RbdPlane, RbdStore, RbdTarget};
pub use run::run;

use std::io;

/// The backing bytes of one logical unit. Shared by connection threads: every method takes
/// `&self` and implementations lock at a fine grain.
pub trait Store: Send + Sync {
    /// Capacity in bytes.
    fn len(&self) -> u64;

    /// True when the store holds no bytes at all.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Fill `buf` with the bytes at `offset`. Never-written ranges read as zeroes.
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> io::Result<()>;

    /// Append the `len` bytes at `offset` to `out` (on an error, `out` may have grown). A
    /// store that can writes each byte once, not zeroes first and then the data.
    fn read_append(&self, offset: u64, len: usize, out: &mut Vec<u8>) -> io::Result<()> {
        let start = out.len();
        out.resize(start + len, 0);
        self.read_at(offset, &mut out[start..])
    }

    /// Store `buf` at `offset` (in the store's volatile cache, if it has one: the device asks
    /// for [`Store::write_durable`] when the write must be on stable storage).
    fn write_at(&self, offset: u64, buf: &[u8]) -> io::Result<()>;

    /// Put every completed write on stable storage (SYNCHRONIZE CACHE).
    fn flush(&self) -> io::Result<()>;

    /// Store `buf` at `offset` on stable storage before returning: a write with FUA, or any
    /// write with the write cache off (WCE = 0, SBC-4 §4.15), which asks for this write only.
    /// The default flushes everything after the write; a store that can do less overrides it.
    fn write_durable(&self, offset: u64, buf: &[u8]) -> io::Result<()> {
        self.write_at(offset, buf)?;
        self.flush()
    }

    /// Deallocate a range so that it reads back as zeroes (thin provisioning). Stores that
    /// cannot deallocate write zeroes.
    fn punch_hole(&self, offset: u64, len: u64) -> io::Result<()> {
        const ZEROES: [u8; 4096] = [0; 4096];
        let mut done = 0;
        while done < len {
            let n = (len - done).min(ZEROES.len() as u64) as usize;
            self.write_at(offset + done, &ZEROES[..n])?;
            done += n as u64;
        }
        Ok(())
    }

    /// Whether [`Store::extent`] and [`Store::is_mapped`] tell allocated from deallocated
    /// ranges; `false` when they report everything allocated.
    fn tells_allocation(&self) -> bool {
        false
    }

    /// Whether any byte of the range may be allocated; `true` when the store cannot tell.
    fn is_mapped(&self, _offset: u64, _len: u64) -> bool {
        true
    }

    /// The first run of `[offset, offset + len)` that is all allocated or all deallocated:
    /// whether it is allocated, and its length (GET LBA STATUS). A store that cannot tell
    /// reports the whole range allocated.
    fn extent(&self, offset: u64, len: u64) -> io::Result<(bool, u64)> {
        check_span(self.len(), offset, len)?;
        Ok((true, len))
    }

    /// The size, and alignment, of the pieces [`Store::punch_hole`] deallocates (it zeroes
    /// the rest of a range); 0 when it deallocates nothing.
    fn unmap_granularity(&self) -> u64 {
        0
    }

    /// Bytes of backing storage the store holds allocated (the used resources of thin
    /// provisioning); `None` when it cannot tell.
    fn allocated_bytes(&self) -> Option<u64> {
        None
    }

    /// The size its medium has now, which may have changed outside stint (a file grown, a
    /// block device after `lvextend`, an RBD image after `rbd resize`): what a resize without
    /// a size adopts. The default: the store's own length, which nothing outside changes.
    fn medium_len(&self) -> io::Result<u64> {
        Ok(self.len())
    }

    /// Make the store `len` bytes: grown, the new bytes reading as zeros (where the medium
    /// is the store's to zero), or cut, the bytes past the new end gone. The caller holds
    /// the range lock from the lower of the two ends to the end of the address space (see
    /// [`Plane::resize`]), so no change is under way on bytes that come or go. A store whose
    /// size cannot change answers `Unsupported`, saying why.
    fn set_len(&self, _len: u64) -> io::Result<()> {
        Err(io::Error::new(
            io::ErrorKind::Unsupported,
            "this store's size cannot change",
        ))
    }
}

/// The error for an access past the end of a store.
pub(crate) fn check_range(store_len: u64, offset: u64, len: usize) -> io::Result<()> {
    check_span(store_len, offset, len as u64)
}

/// [`check_range`] for a length in `u64` (holes, mapping queries).
pub(crate) fn check_span(store_len: u64, offset: u64, len: u64) -> io::Result<()> {
    match offset.checked_add(len) {
        Some(end) if end <= store_len => Ok(()),
        _ => Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            BeyondEnd {
                offset,
                len,
                store_len,
            },
        )),
    }
}

/// An access past the end of a store, inside the `InvalidInput` error every store answers it
/// with: the device checked it against a capacity that a shrink has cut since
/// ([`Plane::resize`]), so the device can answer it as the range error it is.
#[derive(Debug)]
pub struct BeyondEnd {
    pub offset: u64,
    pub len: u64,
    pub store_len: u64,
}

impl std::fmt::Display for BeyondEnd {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let BeyondEnd {
            offset,
            len,
            store_len,
        } = self;
        write!(
            f,
            "access of {len} bytes at offset {offset} is beyond the store's {store_len} bytes"
        )
    }
}

impl std::error::Error for BeyondEnd {}
