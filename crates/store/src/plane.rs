//! The data plane of a logical unit: the device core asks for operations on byte ranges of its
//! store and gets their results back; the plane does the block-level work. A RAM store's plane
//! runs them on the caller's thread ([`crate::InlinePlane`]); a file's runs them
//! asynchronously, on io_uring or a thread pool ([`crate::FilePlane`], [`crate::PoolPlane`]),
//! so a host's queue depth reaches the store; the simulator's touches nothing
//! ([`crate::NullPlane`]). [`crate::run`] executes any operation against any [`crate::Store`].
//!
//! The device has made every SCSI check before an operation gets here (CDB fields, LBA range,
//! limits, reservations): offsets and lengths are valid byte ranges of the store. The plane
//! still refuses, with an error and never a panic, a range past the end or a Data-Out buffer
//! shorter than the operation needs.

use std::io;
use std::sync::Arc;
use std::time::Duration;

/// A data-plane operation on one logical unit's store. Offsets and lengths in bytes, already
/// checked against the capacity by the device.
#[derive(Clone, Debug)]
pub enum Op {
    /// Read `len` bytes at `offset` into the data-in buffer (appended after what it holds).
    /// Sees every atomic write whole (all old or all new bytes).
    Read { offset: u64, len: u32 },
    /// Write the first `len` bytes of the Data-Out buffer at `offset`. `durable`: on stable
    /// storage before it completes (FUA, or the write cache off: SBC-4 §4.15). `atomic`: one
    /// uninterrupted change against every other write and every read (WRITE ATOMIC, SBC-4
    /// §4.29).
    Write {
        offset: u64,
        len: u32,
        durable: bool,
        atomic: bool,
    },
    /// ORWRITE (SBC-4 §5.8): medium |= Data-Out over `len` bytes, atomically.
    OrWrite {
        offset: u64,
        len: u32,
        durable: bool,
    },
    /// COMPARE AND WRITE (SBC-4 §5.3): Data-Out holds the verify instance then the write
    /// instance, `len` bytes each; if the medium equals the first, write the second; atomically.
    CompareAndWrite {
        offset: u64,
        len: u32,
        durable: bool,
    },
    /// VERIFY with BYTCHK (SBC-4 §5.35): compare `len` bytes of medium with the Data-Out
    /// buffer, or, with `block` > 0, every `block`-byte block of the medium with Data-Out's
    /// first block.
    Compare { offset: u64, len: u32, block: u32 },
    /// WRITE SAME (SBC-4): the first `block` bytes of Data-Out (zeros when `zeros`) to
    /// every block of the `len` bytes at `offset`, in writes of up to 128 KiB.
    WriteSame {
        offset: u64,
        len: u64,
        block: u32,
        zeros: bool,
        durable: bool,
    },
    /// Deallocate each (offset, len) range (thin provisioning, SBC-4: what the store can
    /// free is freed, the rest zeroed; reads return zeros); then flush when `durable`.
    Unmap {
        ranges: Vec<(u64, u64)>,
        durable: bool,
    },
    /// One step of a SANITIZE OVERWRITE or FORMAT UNIT: `pattern` (a whole number of blocks)
    /// repeated over the range; an all-zero (or empty) pattern deallocates instead, so a
    /// sparse store is not made to allocate every block.
    Fill {
        offset: u64,
        len: u64,
        pattern: Arc<[u8]>,
        durable: bool,
    },
    /// SYNCHRONIZE CACHE (SBC-4 §5.32): every completed write on stable storage.
    Flush,
    /// GET LBA STATUS (SBC-4): up to `max` runs from `offset` within `len`, each
    /// (allocated, bytes), as the store reports them: contiguous, none empty. A run may end
    /// inside a logical block when the store's granularity is finer than the block.
    Extents { offset: u64, len: u64, max: u32 },
    /// Bytes of backing storage allocated (thin provisioning's used resources).
    Usage,
    /// EXTENDED COPY (SPC-4 §6.4) / WRITE USING TOKEN (SBC-4): copy `len` bytes from
    /// `source` at `from` to `destination` at `to`, in chunks of at most 1 MiB; overlapping
    /// ranges of one store copy from the end. `durable` as for Write.
    Copy {
        source: Source,
        destination: Source,
        from: u64,
        to: u64,
        len: u64,
        durable: bool,
    },
    /// Keep one of the logical unit's small state files (saved mode parameters, persistent
    /// reservations under APTPL) so that a crash leaves the old contents or the new ones;
    /// `None` removes it.
    Keep {
        file: KeptFile,
        contents: Option<Vec<u8>>,
    },
    /// Where several gateways share `file` ([`Plane::load_shared`], docs/gateways.md):
    /// replace its contents with `contents` if they are still at `version` (0: there are none
    /// yet), all or nothing. [`Done::Shared`] with the new version, or [`Done::Stale`] with
    /// the contents another gateway wrote meanwhile.
    Share {
        file: KeptFile,
        contents: Vec<u8>,
        version: u64,
    },
    /// Where several gateways share the store (docs/gateways.md): make the gateway of target
    /// port group `group` the preferred one of every gateway, kept in the cluster, if it has
    /// the store open (SET TARGET PORT GROUPS). [`Done::Ok`] once it is kept and
    /// [`Plane::preferred_gateway`] answers it; [`Done::Failed`] changes nothing (its error
    /// `NotConnected`: that gateway is not alive).
    Prefer { group: u16 },
}

/// A state the gateways of a store share, as read: its contents (`None`: none written yet)
/// and their version.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SharedState {
    pub contents: Option<Vec<u8>>,
    pub version: u64,
    /// No other gateway had the store open when this one opened it (the logical unit's power
    /// on, as the hosts see it), as the plane's first load answers; `false` after.
    pub first: bool,
}

/// The state files a logical unit keeps beside its data (docs/durability.md).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KeptFile {
    /// Saved mode parameters (SPC-5 §7.5.4).
    ModePages,
    /// Persistent reservations under APTPL (SPC-4 §5.13.5.1).
    Reservations,
}

/// Where a [`Op::Copy`] reads or writes.
#[derive(Clone)]
pub enum Source {
    /// This logical unit's store.
    This,
    /// Another logical unit's, through its plane's [`Plane::read_now`] and
    /// [`Plane::write_now`].
    Other(Arc<dyn Plane>),
}

impl std::fmt::Debug for Source {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Source::This => f.write_str("This"),
            Source::Other(p) => write!(f, "Other({} bytes)", p.geometry().capacity),
        }
    }
}

/// How an operation ended.
#[derive(Debug)]
pub enum Done {
    Ok,
    /// Compare or CompareAndWrite found the medium different at this byte of the compared
    /// data (for a Compare with `block`, of Data-Out's first block).
    Miscompare(u64),
    Extents(Vec<(bool, u64)>),
    Usage(Option<u64>),
    /// [`Op::Share`] wrote the state: its version now.
    Shared(u64),
    /// [`Op::Share`] lost a race with another gateway: nothing written; the state as it is.
    Stale(SharedState),
    /// The store failed.
    Failed(Failure),
}

/// Which step of an operation the store failed in: the device answers MEDIUM ERROR with
/// UNRECOVERED READ ERROR for the first, WRITE ERROR for the second, or for a
/// Copy, COPY ABORTED with the one or the other.
#[derive(Debug)]
pub enum Failure {
    /// Reading the medium (for a Copy, its source); `at` is the byte offset of the access
    /// that failed.
    Read { at: Option<u64>, error: io::Error },
    /// Changing the medium: a write, a deallocation or a flush (for a Copy, the
    /// destination's write).
    Write { at: Option<u64>, error: io::Error },
}

impl Failure {
    pub fn error(&self) -> &io::Error {
        match self {
            Failure::Read { error, .. } | Failure::Write { error, .. } => error,
        }
    }
}

/// The operation's buffers: borrowed on an inline plane, owned (and handed back with the
/// completion) on an asynchronous one.
pub enum Buffers<'a> {
    Borrowed {
        data_in: &'a mut Vec<u8>,
        data_out: &'a [u8],
    },
    Owned {
        data_in: Vec<u8>,
        data_out: Vec<u8>,
    },
}

/// What the device asks of its plane once, at start.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Geometry {
    /// Bytes.
    pub capacity: u64,
    /// The size, and alignment, of the pieces an unmap deallocates (it zeroes the rest);
    /// 0 when it deallocates nothing.
    pub unmap_granularity: u64,
    /// Whether [`Op::Extents`] tells allocated from deallocated ranges (else it reports every
    /// range allocated).
    pub tells_allocation: bool,
}

/// The completion handler of an asynchronous plane: `(id, result, data_in, data_out)`, the
/// owned buffers handed back for reuse. Called on the plane's threads, never inside
/// [`Plane::submit`].
pub type Complete = Arc<dyn Fn(u64, Done, Vec<u8>, Vec<u8>) + Send + Sync>;

/// The data plane of one logical unit.
pub trait Plane: Send + Sync {
    /// Runs on the caller's thread (every submit returns Some): a RAM store's plane.
    fn is_inline(&self) -> bool;

    /// Starts `op` for the caller's operation `id`. An inline plane runs it now and returns
    /// its result; an asynchronous one returns None and later calls the completion handler it
    /// was built with, `(id, Done, data_in, data_out)`: the owned buffers come back for reuse.
    ///
    /// Borrowed buffers are always answered before `submit` returns: an asynchronous plane
    /// given them runs the operation on the caller's thread. An inline plane given owned
    /// buffers, which it could not hand back, refuses the operation (`InvalidInput`).
    fn submit(&self, id: u64, op: Op, buffers: Buffers<'_>) -> Option<Done>;

    /// Runs `op` on the caller's thread if it can end without waiting for a device (a read
    /// the page cache holds), appending read data to `data_in`; `None` when it cannot, and
    /// the caller submits it. An inline plane's every operation is such.
    fn try_now(&self, _op: &Op, _data_in: &mut Vec<u8>) -> Option<Done> {
        None
    }

    /// Capacity, unmap granularity, whether it can tell allocation: what the device asks once
    /// at start.
    fn geometry(&self) -> Geometry;

    /// Whether what a logical unit asks its plane before a command ([`Plane::resized`],
    /// [`Plane::announced`], [`Plane::shared_changed`], [`Plane::preferred_gateway`]) may
    /// answer something new since the last call: asked before every command, so one atomic
    /// load, and only when it is true are those asked. Taken: false again until the next
    /// news. A plane that tells none of these (RAM, file, block device) has none.
    fn news(&self) -> bool {
        false
    }

    /// Where several gateways share the store (docs/gateways.md): `Some` with the target
    /// port group of the first gateway, in the configuration's order, that has the store
    /// open, as last seen, or `Some(None)` while none is known; `None` for a store this
    /// server alone serves. Asked when the plane has [`Plane::news`].
    fn preferred_gateway(&self) -> Option<Option<u16>> {
        None
    }

    /// Where several gateways share the store: reads again from the cluster which gateway is
    /// preferred (blocking: after another gateway announced that it set one with
    /// [`Op::Prefer`]), so that [`Plane::preferred_gateway`] answers it at once.
    fn reload_preferred(&self) -> io::Result<()> {
        Ok(())
    }

    /// Where several gateways share the store: sends `message` to the other gateways' planes
    /// of the store, returning once they have it (or after a bounded wait for one that does
    /// not answer). Nothing to do for a store this server alone serves.
    fn announce(&self, _message: &[u8]) -> io::Result<()> {
        Ok(())
    }

    /// What the other gateways announced since the last call, oldest first. Asked when the
    /// plane has [`Plane::news`].
    fn announced(&self) -> Vec<Vec<u8>> {
        Vec::new()
    }

    /// The store's new capacity in bytes, once, after something outside stint resized it (an
    /// RBD image's `rbd resize`); `None` while it keeps its size. Asked when the plane has
    /// [`Plane::news`].
    fn resized(&self) -> Option<u64> {
        None
    }

    /// Change the store's capacity on request (`stint ctl lun resize`): with `Some(bytes)`,
    /// make it that many bytes, grown (the new bytes read as zeros) or cut (the bytes past
    /// the new end are gone); with `None`, adopt the size its medium has now (a file or block
    /// device grown outside stint, an RBD image resized). Returns the new capacity. Changes
    /// in flight to bytes that are cut off end before the cut or fail after it; none lands
    /// past the new end. A store whose size cannot change answers `Unsupported`, saying why.
    fn resize(&self, _bytes: Option<u64>) -> io::Result<u64> {
        Err(io::Error::new(
            io::ErrorKind::Unsupported,
            "this logical unit's data plane cannot change its store's size",
        ))
    }

    /// Read `buf.len()` bytes at `offset` now, on the caller's thread, seeing every atomic
    /// write whole: the source side of another unit's [`Op::Copy`].
    fn read_now(&self, offset: u64, buf: &mut [u8]) -> io::Result<()>;

    /// Write `buf` at `offset` now, on the caller's thread, holding its range while it does
    /// (on stable storage before returning when `durable`): the destination side of another
    /// unit's [`Op::Copy`].
    fn write_now(&self, offset: u64, buf: &[u8], durable: bool) -> io::Result<()>;

    /// The contents of a kept state file, as the last run left it (`None`: there is none).
    fn load(&self, _file: KeptFile) -> io::Result<Option<Vec<u8>>> {
        Ok(None)
    }

    /// Where several gateways share `file` (docs/gateways.md): its contents and version now,
    /// read from the cluster (a blocking call, never on a command's path but after a peer's
    /// announcement); `None` when this server alone keeps it.
    fn load_shared(&self, _file: KeptFile) -> Option<io::Result<SharedState>> {
        None
    }

    /// Where several gateways share `file`: whether it changed in the cluster since this
    /// plane last read or wrote it, though no announcement said so (a gateway that died
    /// between its write and its notify). Taken once; the logical unit then reads it again.
    /// Asked when the plane has [`Plane::news`].
    fn shared_changed(&self, _file: KeptFile) -> bool {
        false
    }

    /// [`Op::Share`] on the caller's thread (blocking): at start, before any command.
    fn share_now(&self, file: KeptFile, _contents: &[u8], _version: u64) -> io::Result<Done> {
        Err(io::Error::new(
            io::ErrorKind::Unsupported,
            format!("this logical unit's data plane shares no {file:?} state"),
        ))
    }
}

/// How an asynchronous plane runs (a `stint.toml` LUN's knobs, later).
#[derive(Clone, Debug)]
pub struct Options {
    /// Which engine moves the bytes of reads and writes.
    pub engine: Engine,
    /// Threads of the pool that runs what io_uring does not (and everything, without it).
    pub threads: usize,
    /// Hold every completion back until this long after its submission: a store slower than
    /// the CPU, deterministically, for tests and benchmarks.
    pub delay: Option<Duration>,
    /// Where the logical unit's state files are kept.
    pub kept: crate::KeptFiles,
}

/// The engine of a [`crate::FilePlane`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Engine {
    /// io_uring where the kernel offers and allows it, else the pool.
    Auto,
    /// io_uring or an error.
    Uring,
    /// The thread pool of positional I/O.
    Pool,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            engine: Engine::Auto,
            kept: crate::KeptFiles::default(),
            threads: 16,
            delay: None,
        }
    }
}

/// The `InvalidInput` error of an operation that does not fit its store or its buffers.
pub(crate) fn invalid(what: String) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidInput, what)
}

/// A failure of `op` before it reached the store, as the step it would have failed in.
pub(crate) fn refused(op: &Op, error: io::Error) -> Failure {
    match op {
        Op::Read { .. } | Op::Compare { .. } | Op::Extents { .. } | Op::Usage => {
            Failure::Read { at: None, error }
        }
        _ => Failure::Write { at: None, error },
    }
}
