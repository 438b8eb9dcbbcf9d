//! A store in a (sparse) file: positional I/O, `fdatasync` for stable storage; optionally
//! O_DIRECT, bypassing the page cache.

use crate::aligned::Aligned;
use crate::block::BlockDevice;
use crate::{check_range, Store};
use rustix::fs::{self, FallocateFlags, SeekFrom};
use std::cell::RefCell;
use std::fs::{File, OpenOptions};
use std::io;
use std::os::fd::{AsRawFd, RawFd};
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

/// A file-backed store. Writes go to the page cache (the drive's volatile write cache) unless
/// write-through is on; `flush` is `fdatasync`.
pub struct FileStore {
    file: File,
    /// The same file opened O_DSYNC: a write through it is on stable storage when it returns,
    /// with no flush of the file's other cached writes (FUA, write-through).
    dsync: File,
    path: PathBuf,
    /// Capacity in bytes; a resize changes it holding the range lock over the bytes that come
    /// or go.
    len: AtomicU64,
    /// An `fdatasync` failed: the kernel may have dropped the dirty pages and a later
    /// `fdatasync` reports success for what is left, so every later flush fails too (issue 11;
    /// the "fsyncgate" behaviour of Linux).
    sync_failed: parking_lot::Mutex<Option<io::ErrorKind>>,
    /// Opened for direct I/O: reads and writes go through these descriptors instead.
    direct: Option<Direct>,
    /// The file lives in memory (tmpfs, ramfs): an access never waits for a device.
    in_memory: bool,
    /// A block device (`store = "block"`, always direct), as the kernel described it, and
    /// what this LUN has deallocated on it.
    block: Option<(BlockDevice, crate::block::Holes)>,
}

/// `f_type` of the file systems whose files are memory (statfs(2)).
const TMPFS_MAGIC: i64 = 0x0102_1994;
const RAMFS_MAGIC: i64 = 0x8584_58f6;

/// The O_DIRECT side of a store: every access is a whole number of logical blocks at a
/// block boundary (the device guarantees it; others are refused), and moves through an
/// aligned bounce buffer, since the callers' buffers are plain `Vec<u8>`s.
struct Direct {
    file: File,
    /// O_DIRECT | O_DSYNC: direct I/O alone does not flush the drive's cache nor the
    /// metadata of a sparse file's newly allocated blocks.
    dsync: File,
    block: u32,
}

thread_local! {
    /// The bounce buffer of this thread's direct I/O through the `Store` methods.
    static BOUNCE: RefCell<Aligned> = RefCell::default();
}

impl FileStore {
    /// Open `path`, creating a sparse file of `size` bytes when it does not exist. An existing
    /// file keeps its contents; with `size` given, its length must match. Without `size` the
    /// file must exist and its length is the capacity.
    pub fn open(path: &Path, size: Option<u64>) -> io::Result<Self> {
        let context = |e: io::Error, what: &str| {
            io::Error::new(e.kind(), format!("{}: {what}: {e}", path.display()))
        };
        let exists = path.exists();
        if !exists && size.is_none() {
            return Err(io::Error::new(
                io::ErrorKind::NotFound,
                format!(
                    "{}: file does not exist and no size was given to create it",
                    path.display()
                ),
            ));
        }
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(!exists)
            .truncate(false)
            .open(path)
            .map_err(|e| context(e, "cannot open"))?;
        // One server per file: a second one would interleave writes with the first's cache.
        let started = std::time::Instant::now();
        loop {
            match file.try_lock() {
                Ok(()) => break,
                Err(std::fs::TryLockError::WouldBlock) => {
                    let holder = lock_holder(&file);
                    // A server that died with I/O in flight keeps its lock until the kernel
                    // has finished that I/O (io_uring tears down after the process): wait
                    // for it a while, but never for a live holder.
                    if holder.as_ref().is_none_or(|h| !h.alive) && started.elapsed() < LOCK_WAIT {
                        std::thread::sleep(std::time::Duration::from_millis(50));
                        continue;
                    }
                    return Err(io::Error::new(
                        io::ErrorKind::ResourceBusy,
                        format!(
                            "{}: in use by {} (it holds the file's lock); stop it or use another file",
                            path.display(),
                            holder.map_or_else(|| "another process".into(), |h| h.name)
                        ),
                    ));
                }
                Err(std::fs::TryLockError::Error(e)) => return Err(context(e, "cannot lock")),
            }
        }
        let meta = file.metadata().map_err(|e| context(e, "cannot stat"))?;
        if !meta.is_file() {
            use std::os::unix::fs::FileTypeExt;
            let hint = match meta.file_type().is_block_device() {
                true => " but a block device (store = \"block\" serves those)",
                false => "",
            };
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("{}: not a regular file{hint}", path.display()),
            ));
        }
        let len = match size {
            Some(size) if !exists => {
                // Sparse: no blocks are allocated until written.
                if let Err(e) = file.set_len(size) {
                    // Leave no empty file behind to fail the next open with a length mismatch.
                    drop(file);
                    let _ = std::fs::remove_file(path);
                    return Err(context(e, &format!("cannot set length to {size} bytes")));
                }
                // Its length and its name must survive a crash before any write is durable: a
                // durable write past a length the file system forgot would be cut off.
                if let Err(e) = file.sync_all().and_then(|()| sync_parent(path)) {
                    drop(file);
                    let _ = std::fs::remove_file(path);
                    return Err(context(e, "cannot sync it to stable storage"));
                }
                size
            }
            Some(size) if meta.len() != size => {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidInput,
                    format!(
                        "{}: file is {} bytes but the LUN is configured as {size} bytes",
                        path.display(),
                        meta.len()
                    ),
                ));
            }
            _ => meta.len(),
        };
        let dsync = OpenOptions::new()
            .write(true)
            .custom_flags(fs::OFlags::DSYNC.bits() as i32)
            .open(path)
            .map_err(|e| context(e, "cannot open for synchronous writes"))?;
        // `f_type` is an i64 on x86-64 and narrower on other targets.
        #[allow(clippy::unnecessary_cast)]
        let in_memory =
            fs::fstatfs(&file).is_ok_and(|f| matches!(f.f_type as i64, TMPFS_MAGIC | RAMFS_MAGIC));
        Ok(FileStore {
            file,
            dsync,
            path: path.to_owned(),
            len: AtomicU64::new(len),
            sync_failed: parking_lot::Mutex::new(None),
            direct: None,
            in_memory,
            block: None,
        })
    }

    /// A store on a block device opened by [`FileStore::open_block`]: `file` (the exclusive
    /// open) and `dsync` are both O_DIRECT, and serve as the direct descriptors too.
    pub(crate) fn on_device(
        file: File,
        dsync: File,
        path: &Path,
        len: u64,
        block: u32,
        device: BlockDevice,
    ) -> io::Result<Self> {
        let direct = Direct {
            file: file.try_clone()?,
            dsync: dsync.try_clone()?,
            block,
        };
        Ok(FileStore {
            file,
            dsync,
            path: path.to_owned(),
            len: AtomicU64::new(len),
            sync_failed: parking_lot::Mutex::new(None),
            direct: Some(direct),
            in_memory: false,
            block: Some((device, Default::default())),
        })
    }

    /// The store cut to its first `len` bytes at most (rounded down to whole blocks on a
    /// direct one): a LUN smaller than its device.
    pub fn at_most(mut self, len: u64) -> Self {
        let block = u64::from(self.direct_block().unwrap_or(1));
        let len = self.len().min(len / block * block);
        *self.len.get_mut() = len;
        self
    }

    /// The block device under a block store, as the kernel described it at the open.
    pub fn block_device(&self) -> Option<&BlockDevice> {
        self.block.as_ref().map(|(device, _)| device)
    }

    /// `len` bytes at `offset` are about to be written (holding their range): on a block
    /// store they are no longer deallocated.
    pub(crate) fn written(&self, offset: u64, len: usize) {
        if let Some((_, holes)) = &self.block {
            holes.remove(offset, offset.saturating_add(len as u64));
        }
    }

    /// [`Self::open`], then reads and writes with O_DIRECT, bypassing the page cache, for a
    /// logical unit of `block`-byte blocks. Fails when the file system refuses direct I/O
    /// (tmpfs before Linux 6.6, for one) or direct I/O of single blocks at block boundaries
    /// (a 512-byte block on a device of 4096-byte sectors).
    pub fn open_direct(path: &Path, size: Option<u64>, block: u32) -> io::Result<Self> {
        let mut store = Self::open(path, size)?;
        let context = |e: io::Error, what: &str| {
            io::Error::new(e.kind(), format!("{}: {what}: {e}", path.display()))
        };
        if block == 0 {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("{}: a block of 0 bytes", path.display()),
            ));
        }
        let open = |flags: fs::OFlags| {
            OpenOptions::new()
                .read(true)
                .write(true)
                .custom_flags(flags.bits() as i32)
                .open(path)
        };
        let file = open(fs::OFlags::DIRECT).map_err(|e| context(e, "cannot open with O_DIRECT"))?;
        let dsync = open(fs::OFlags::DIRECT | fs::OFlags::DSYNC)
            .map_err(|e| context(e, "cannot open with O_DIRECT and O_DSYNC"))?;
        // One block at a block boundary that is no larger power of two, where the file has
        // two blocks: what every access will be at least.
        let at = if store.len() >= 2 * u64::from(block) {
            u64::from(block)
        } else {
            0
        };
        let len = (block as usize).min(store.len() as usize);
        let mut probe = Aligned::default();
        if let Err(e) = file.read_exact_at(probe.get(len), at) {
            return Err(context(
                e,
                &format!(
                    "the file system refuses O_DIRECT reads of {block}-byte blocks; turn direct \
                     I/O off or use larger blocks"
                ),
            ));
        }
        store.direct = Some(Direct { file, dsync, block });
        Ok(store)
    }

    /// Whether the file lives in memory (tmpfs, ramfs) and is not opened O_DIRECT: its
    /// accesses never wait for a device, so they may run on the caller's thread.
    pub fn in_memory(&self) -> bool {
        self.in_memory && self.direct.is_none()
    }

    /// Appends the `len` bytes at `offset` to `out` if the page cache holds them all, without
    /// waiting for the device (`preadv2` with `RWF_NOWAIT`); false, with `out` as it was,
    /// when it does not (or the file system cannot say, or on any error: the caller then
    /// reads the usual way, which reports it).
    pub fn read_cached(&self, offset: u64, len: usize, out: &mut Vec<u8>) -> bool {
        if self.direct.is_some() || check_range(self.len(), offset, len).is_err() {
            return false;
        }
        let start = out.len();
        out.resize(start + len, 0);
        let mut done = 0;
        while done < len {
            let mut buf = [io::IoSliceMut::new(&mut out[start + done..])];
            let at = offset + done as u64;
            match rustix::io::preadv2(&self.file, &mut buf, at, rustix::io::ReadWriteFlags::NOWAIT)
            {
                Ok(n) if n > 0 => done += n,
                _ => {
                    out.truncate(start);
                    return false;
                }
            }
        }
        true
    }

    /// Whether reads and writes bypass the page cache (O_DIRECT), and with what block.
    pub fn direct_block(&self) -> Option<u32> {
        self.direct.as_ref().map(|d| d.block)
    }

    /// The descriptor reads and writes go through: the O_DIRECT one on a direct store; for a
    /// durable write, the one opened O_DSYNC.
    pub(crate) fn fd(&self, durable: bool) -> RawFd {
        match (&self.direct, durable) {
            (Some(d), false) => d.file.as_raw_fd(),
            (Some(d), true) => d.dsync.as_raw_fd(),
            (None, false) => self.file.as_raw_fd(),
            (None, true) => self.dsync.as_raw_fd(),
        }
    }

    /// Whether a durable write may start: not once syncing has failed.
    pub(crate) fn durable_ok(&self) -> io::Result<()> {
        match *self.sync_failed.lock() {
            Some(kind) => Err(self.sync_failed_error(kind)),
            None => Ok(()),
        }
    }

    /// A durable write failed: it is as sticky as a failed `fdatasync` (the kernel reports a
    /// lost writeback once).
    pub(crate) fn durable_failed(&self, e: &io::Error) {
        *self.sync_failed.lock() = Some(e.kind());
    }

    fn sync_failed_error(&self, kind: io::ErrorKind) -> io::Error {
        io::Error::new(
            kind,
            format!(
                "{}: an earlier fdatasync failed; data written since the LUN opened may be lost",
                self.path.display()
            ),
        )
    }

    /// Whether an access of `len` bytes at `offset` suits the store: on a direct one, whole
    /// blocks at block boundaries.
    pub(crate) fn direct_aligned(&self, offset: u64, len: usize) -> io::Result<()> {
        self.direct
            .as_ref()
            .map_or(Ok(()), |d| d.aligned(offset, len))
    }

    /// Read through the direct descriptor, by way of this thread's bounce buffer.
    fn read_direct(d: &Direct, offset: u64, buf: &mut [u8]) -> io::Result<()> {
        d.aligned(offset, buf.len())?;
        BOUNCE.with_borrow_mut(|bounce| {
            let bounce = bounce.get(buf.len());
            d.file.read_exact_at(bounce, offset)?;
            buf.copy_from_slice(bounce);
            Ok(())
        })
    }

    /// Write `buf` at `offset`, through the O_DSYNC descriptor when `durable`, by way of this
    /// thread's bounce buffer on a direct store.
    fn write_fd(&self, durable: bool, offset: u64, buf: &[u8]) -> io::Result<()> {
        self.written(offset, buf.len());
        let Some(d) = &self.direct else {
            let file = if durable { &self.dsync } else { &self.file };
            return file.write_all_at(buf, offset);
        };
        d.aligned(offset, buf.len())?;
        let file = if durable { &d.dsync } else { &d.file };
        BOUNCE.with_borrow_mut(|bounce| {
            let bounce = bounce.get(buf.len());
            bounce.copy_from_slice(buf);
            file.write_all_at(bounce, offset)
        })
    }

    /// `fdatasync`, failing for good once it has failed.
    fn sync(&self) -> io::Result<()> {
        let mut failed = self.sync_failed.lock();
        if let Some(kind) = *failed {
            return Err(self.sync_failed_error(kind));
        }
        let result = self.file.sync_data();
        if let Err(e) = &result {
            *failed = Some(e.kind());
        }
        result
    }

    /// A write through the O_DSYNC descriptor; its failure is as sticky as a failed
    /// `fdatasync`'s (the kernel reports a lost writeback once).
    fn write_sync(&self, offset: u64, buf: &[u8]) -> io::Result<()> {
        self.durable_ok()?;
        self.write_fd(true, offset, buf)
            .inspect_err(|e| self.durable_failed(e))
    }

    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Store for FileStore {
    fn len(&self) -> u64 {
        self.len.load(Ordering::Acquire)
    }

    fn read_at(&self, offset: u64, buf: &mut [u8]) -> io::Result<()> {
        check_range(self.len(), offset, buf.len())?;
        match &self.direct {
            Some(d) => Self::read_direct(d, offset, buf),
            None => self.file.read_exact_at(buf, offset),
        }
    }

    fn write_at(&self, offset: u64, buf: &[u8]) -> io::Result<()> {
        check_range(self.len(), offset, buf.len())?;
        self.write_fd(false, offset, buf)
    }

    fn write_durable(&self, offset: u64, buf: &[u8]) -> io::Result<()> {
        check_range(self.len(), offset, buf.len())?;
        self.write_sync(offset, buf)
    }

    fn flush(&self) -> io::Result<()> {
        self.sync()
    }

    /// Deallocate with `fallocate(PUNCH_HOLE | KEEP_SIZE)`; file systems without hole punching
    /// get zeroes written instead.
    fn punch_hole(&self, offset: u64, len: u64) -> io::Result<()> {
        check_range(
            self.len(),
            offset,
            usize::try_from(len).unwrap_or(usize::MAX),
        )?;
        if let Some((_, holes)) = &self.block {
            crate::block::zero(&self.file, offset, len)?;
            holes.insert(offset, offset + len);
            return Ok(());
        }
        let flags = FallocateFlags::PUNCH_HOLE | FallocateFlags::KEEP_SIZE;
        match fs::fallocate(&self.file, flags, offset, len) {
            Ok(()) => Ok(()),
            Err(e) if e == rustix::io::Errno::OPNOTSUPP => {
                // Whole blocks of zeros at a time on a direct store.
                let block = self.direct_block().unwrap_or(1) as usize;
                let zeros = vec![0; ((64 << 10) / block).max(1) * block];
                let mut done = 0;
                while done < len {
                    let n = (len - done).min(zeros.len() as u64) as usize;
                    self.write_fd(false, offset + done, &zeros[..n])?;
                    done += n as u64;
                }
                Ok(())
            }
            Err(e) => Err(e.into()),
        }
    }

    /// Runs of data and holes, by `lseek(SEEK_DATA)` and `lseek(SEEK_HOLE)`.
    fn extent(&self, offset: u64, len: u64) -> io::Result<(bool, u64)> {
        check_range(
            self.len(),
            offset,
            usize::try_from(len).unwrap_or(usize::MAX),
        )?;
        if let Some((_, holes)) = &self.block {
            // A block device's lseek(SEEK_DATA) finds data everywhere: the LUN's own record.
            return Ok(holes.run(offset, offset + len));
        }
        let end = offset + len;
        let data = match fs::seek(&self.file, SeekFrom::Data(offset)) {
            Ok(data) => data,
            // ENXIO: no data at or after `offset`.
            Err(e) if e == rustix::io::Errno::NXIO => end,
            Err(e) => return Err(e.into()),
        };
        if data > offset {
            return Ok((false, data.min(end) - offset));
        }
        let hole = fs::seek(&self.file, SeekFrom::Hole(offset))?;
        Ok((true, hole.min(end) - offset))
    }

    fn tells_allocation(&self) -> bool {
        true
    }

    /// The file system's block: what a punched hole deallocates; a block device's discard
    /// granularity.
    fn unmap_granularity(&self) -> u64 {
        use std::os::unix::fs::MetadataExt;
        if let Some((device, _)) = &self.block {
            return device.unmap_granularity();
        }
        self.file.metadata().map_or(0, |m| m.blksize())
    }

    /// The file's allocated blocks (`st_blocks`, in 512-byte units whatever the file system).
    fn allocated_bytes(&self) -> Option<u64> {
        use std::os::unix::fs::MetadataExt;
        if self.block.is_some() {
            return None;
        }
        self.file
            .metadata()
            .ok()
            .map(|m| m.blocks().saturating_mul(512))
    }

    /// The file's length (`fstat`); a block device's size (`BLKGETSIZE64`), in whole blocks.
    fn medium_len(&self) -> io::Result<u64> {
        let context = |e: io::Error, what: &str| {
            io::Error::new(e.kind(), format!("{}: {what}: {e}", self.path.display()))
        };
        if self.block.is_some() {
            let size = crate::block::blkgetsize64(&self.file)
                .map_err(|e| context(e.into(), "ioctl BLKGETSIZE64"))?;
            let block = u64::from(self.direct_block().unwrap_or(1));
            return Ok(size / block * block);
        }
        Ok(self
            .file
            .metadata()
            .map_err(|e| context(e, "cannot stat"))?
            .len())
    }

    /// `ftruncate`, then `fsync`: the new length must survive a crash before a durable write
    /// past the old end does, as at creation. A shrink stops accesses past the new end first.
    /// A block device's size is the device's: it is only adopted, as `BLKGETSIZE64` says.
    fn set_len(&self, len: u64) -> io::Result<()> {
        let path = self.path.display();
        if self.block.is_some() {
            let size = self.medium_len()?;
            if len != size {
                return Err(io::Error::new(
                    io::ErrorKind::Unsupported,
                    format!(
                        "{path}: a block device's size is the device's ({size} bytes), not \
                         {len}: resize the device (lvextend, losetup -c) and resize the LUN \
                         without a size"
                    ),
                ));
            }
            self.len.store(len, Ordering::Release);
            return Ok(());
        }
        if let Some(block) = self
            .direct_block()
            .filter(|&b| !len.is_multiple_of(b.into()))
        {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("{path}: {len} bytes is not a whole number of {block}-byte blocks"),
            ));
        }
        let old = self.len();
        if len < old {
            self.len.store(len, Ordering::Release);
        }
        let changed = self.file.set_len(len).and_then(|()| self.file.sync_all());
        if let Err(e) = changed {
            // What the file holds of the old length (a cut that only failed to sync is done).
            let kept = self.medium_len().map_or(old, |now| now.min(old));
            self.len.store(kept, Ordering::Release);
            return Err(io::Error::new(
                e.kind(),
                format!("{path}: cannot set the length to {len} bytes: {e}"),
            ));
        }
        self.len.store(len, Ordering::Release);
        Ok(())
    }

    /// Whether data (not a hole) starts before the end of the range, by `lseek(SEEK_DATA)`.
    fn is_mapped(&self, offset: u64, len: u64) -> bool {
        if let Some((_, holes)) = &self.block {
            return len == 0 || holes.run(offset, offset.saturating_add(len)) != (false, len);
        }
        match fs::seek(&self.file, SeekFrom::Data(offset)) {
            Ok(data) => data < offset.saturating_add(len),
            // ENXIO: no data at or after `offset`.
            Err(e) if e == rustix::io::Errno::NXIO => false,
            Err(_) => true,
        }
    }
}

impl Direct {
    /// Direct I/O moves whole blocks at block boundaries.
    fn aligned(&self, offset: u64, len: usize) -> io::Result<()> {
        let block = u64::from(self.block);
        if offset.is_multiple_of(block) && (len as u64).is_multiple_of(block) {
            return Ok(());
        }
        Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!(
                "direct I/O of {len} bytes at offset {offset} is not in whole {block}-byte blocks"
            ),
        ))
    }
}

/// The process holding the `flock` on `file`, as "pid N (command line)", from /proc/locks
/// (Linux's list of locks: "1: FLOCK ADVISORY WRITE <pid> <major>:<minor>:<inode> 0 EOF").
/// How long an open waits for the lock of a server that is gone.
const LOCK_WAIT: std::time::Duration = std::time::Duration::from_secs(10);

/// The process that holds a file's lock, as `/proc/locks` names it.
pub(crate) struct Holder {
    pub(crate) name: String,
    /// It still runs (else the lock outlives it while its in-flight I/O ends).
    alive: bool,
}

pub(crate) fn lock_holder(file: &File) -> Option<Holder> {
    use std::os::unix::fs::MetadataExt;
    let meta = file.metadata().ok()?;
    let (major, minor) = (fs::major(meta.dev()), fs::minor(meta.dev()));
    let locks = std::fs::read_to_string("/proc/locks").ok()?;
    let pid = locks.lines().find_map(|line| {
        let f: Vec<&str> = line.split_whitespace().collect();
        let (kind, pid, id) = (f.get(1)?, f.get(4)?, f.get(5)?);
        let mut id = id.split(':');
        let same = *kind == "FLOCK"
            && u32::from_str_radix(id.next()?, 16).ok()? == major
            && u32::from_str_radix(id.next()?, 16).ok()? == minor
            && id.next()?.parse::<u64>().ok()? == meta.ino();
        same.then(|| pid.to_string())
    })?;
    let cmdline = std::fs::read(format!("/proc/{pid}/cmdline"));
    let alive = cmdline.is_ok();
    let command = cmdline
        .map(|c| {
            String::from_utf8_lossy(&c)
                .replace('\0', " ")
                .trim()
                .to_owned()
        })
        .unwrap_or_default();
    let name = if command.is_empty() {
        format!("pid {pid}")
    } else {
        format!("pid {pid} ({command})")
    };
    Some(Holder { name, alive })
}

/// `fsync` of the directory that holds `path`, so a newly created entry is durable.
fn sync_parent(path: &Path) -> io::Result<()> {
    let parent = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    File::open(parent)?.sync_all()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failed_fdatasync_fails_every_later_flush() {
        let dir = tempfile::tempdir().unwrap();
        let s = FileStore::open(&dir.path().join("lun.img"), Some(1 << 20)).unwrap();
        s.write_at(0, &[1; 512]).unwrap();
        s.flush().unwrap();
        // As if writeback had failed: the next fdatasync would report EIO once, then succeed.
        *s.sync_failed.lock() = Some(io::ErrorKind::Other);
        let e = s.flush().unwrap_err();
        assert!(e.to_string().contains("an earlier fdatasync failed"), "{e}");
        assert!(s.flush().is_err(), "still failing");
        assert!(
            s.write_durable(0, &[2; 512]).is_err(),
            "durable writes cannot be durable"
        );
    }

    #[test]
    fn a_durable_write_lands_and_fails_once_syncing_has_failed() {
        let dir = tempfile::tempdir().unwrap();
        let s = FileStore::open(&dir.path().join("lun.img"), Some(1 << 20)).unwrap();
        s.write_durable(4096, &[7; 512]).unwrap();
        let mut back = [0; 512];
        s.read_at(4096, &mut back).unwrap();
        assert_eq!(back, [7; 512]);
        assert!(s.write_durable(1 << 20, &[0; 512]).is_err(), "past the end");
        *s.sync_failed.lock() = Some(io::ErrorKind::Other);
        assert!(s.write_durable(0, &[1; 512]).is_err());
    }

    #[test]
    fn a_second_open_names_the_holder_and_fails() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("lun.img");
        let first = FileStore::open(&path, Some(1 << 20)).unwrap();
        let e = FileStore::open(&path, None).err().expect("locked");
        assert_eq!(e.kind(), io::ErrorKind::ResourceBusy);
        let me = format!("pid {}", std::process::id());
        assert!(e.to_string().contains(&me), "{e}");
        drop(first);
        FileStore::open(&path, None).expect("free once the first store is gone");
    }

    #[test]
    fn creates_sparse_file_and_survives_reopen() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("lun0.img");
        {
            let s = FileStore::open(&path, Some(1 << 20)).unwrap();
            assert_eq!(s.len(), 1 << 20);
            let mut buf = [9u8; 512];
            s.read_at(4096, &mut buf).unwrap();
            assert!(buf.iter().all(|&b| b == 0));
            s.write_durable(4096, &[0x5A; 512]).unwrap();
            s.flush().unwrap();
        }
        let s = FileStore::open(&path, None).unwrap();
        assert_eq!(s.len(), 1 << 20);
        let mut buf = [0u8; 512];
        s.read_at(4096, &mut buf).unwrap();
        assert!(buf.iter().all(|&b| b == 0x5A));
        assert!(s.read_at((1 << 20) - 100, &mut buf).is_err());
    }

    #[test]
    fn punch_hole_reads_back_zeroes() {
        let dir = tempfile::tempdir().unwrap();
        let s = FileStore::open(&dir.path().join("thin.img"), Some(4 << 20)).unwrap();
        s.write_at(1 << 20, &vec![0xEE; 2 << 20]).unwrap();
        assert!(s.is_mapped(0, 2 << 20));
        s.punch_hole(1 << 20, 1 << 20).unwrap();
        let mut buf = vec![1u8; 2 << 20];
        s.read_at(1 << 20, &mut buf).unwrap();
        assert!(buf[..1 << 20].iter().all(|&b| b == 0));
        assert!(buf[1 << 20..].iter().all(|&b| b == 0xEE));
        assert!(s.punch_hole(4 << 20, 1).is_err());
        assert_eq!(s.extent(0, 4 << 20).unwrap(), (false, 2 << 20));
        assert_eq!(s.extent(2 << 20, 2 << 20).unwrap(), (true, 1 << 20));
        assert_eq!(s.extent(3 << 20, 1 << 20).unwrap(), (false, 1 << 20));
        assert!(s.unmap_granularity() >= 512);
    }

    #[test]
    fn allocated_bytes_follow_writes_and_holes() {
        let dir = tempfile::tempdir().unwrap();
        let s = FileStore::open(&dir.path().join("count.img"), Some(8 << 20)).unwrap();
        let before = s.allocated_bytes().unwrap();
        s.write_at(0, &vec![0xAB; 2 << 20]).unwrap();
        let written = s.allocated_bytes().unwrap();
        assert!(written >= before + (2 << 20), "{before} -> {written}");
        s.punch_hole(0, 2 << 20).unwrap();
        assert!(s.allocated_bytes().unwrap() < written);
    }

    /// A 22 TB LUN file is created sparse and opens at once. Tries `$STINT_SPARSE_TEST_DIR`, the
    /// temporary directory and `/dev/shm`: ext4, for one, refuses files above 16 TiB.
    #[test]
    fn file_of_22_tb_is_sparse_and_opens_quickly() {
        use std::os::unix::fs::MetadataExt;
        use std::time::{Duration, Instant};
        const TB22: u64 = 22_000_000_000_000;
        let mut dirs: Vec<PathBuf> = std::env::var_os("STINT_SPARSE_TEST_DIR")
            .map(PathBuf::from)
            .into_iter()
            .collect();
        dirs.push(std::env::temp_dir());
        dirs.push("/dev/shm".into());
        let mut refusals = Vec::new();
        for dir in dirs {
            let tmp = match tempfile::tempdir_in(&dir) {
                Ok(tmp) => tmp,
                Err(e) => {
                    refusals.push(format!("{}: {e}", dir.display()));
                    continue;
                }
            };
            let path = tmp.path().join("lun.img");
            let start = Instant::now();
            let s = match FileStore::open(&path, Some(TB22)) {
                Ok(s) => s,
                Err(e) => {
                    assert!(!path.exists(), "a failed create leaves no file behind");
                    refusals.push(e.to_string());
                    continue;
                }
            };
            let created = start.elapsed();
            let allocated = |p: &Path| std::fs::metadata(p).unwrap().blocks() * 512;
            assert_eq!(s.len(), TB22);
            assert_eq!(std::fs::metadata(&path).unwrap().len(), TB22);
            assert!(allocated(&path) <= 64 << 10, "{} bytes", allocated(&path));
            let mut buf = vec![0xA5u8; 4096];
            s.read_at(TB22 - 4096, &mut buf).unwrap();
            assert!(buf.iter().all(|&b| b == 0));
            assert!(!s.is_mapped(0, TB22));
            // Writes at both ends and past 16 TiB commit only their own blocks.
            let data: Vec<u8> = (0..4096u32).map(|i| (i % 253) as u8).collect();
            for offset in [0, 1 << 44, TB22 - 4096] {
                s.write_at(offset, &data).unwrap();
            }
            s.flush().unwrap();
            assert!(allocated(&path) <= 1 << 20, "{} bytes", allocated(&path));
            assert!(s.read_at(TB22 - 4095, &mut buf).is_err());
            drop(s);
            let start = Instant::now();
            let s = FileStore::open(&path, Some(TB22)).unwrap();
            let reopened = start.elapsed();
            s.read_at(1 << 44, &mut buf).unwrap();
            assert_eq!(buf, data);
            s.punch_hole(1 << 44, 4096).unwrap();
            s.read_at(1 << 44, &mut buf).unwrap();
            assert!(buf.iter().all(|&b| b == 0));
            // Generous bounds: both are a few system calls, whatever the size.
            assert!(created < Duration::from_secs(2), "{created:?}");
            assert!(reopened < Duration::from_secs(2), "{reopened:?}");
            println!(
                "22 TB file in {}: created in {created:?}, reopened in {reopened:?}, {} bytes allocated",
                dir.display(),
                allocated(&path)
            );
            return;
        }
        println!(
            "SKIPPED (not passed): no file system here holds a 22 TB sparse file: {}",
            refusals.join("; ")
        );
    }

    #[test]
    fn a_file_grows_and_shrinks_and_adopts_a_length_set_outside() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("lun.img");
        let s = FileStore::open(&path, Some(1 << 20)).unwrap();
        s.write_at((1 << 20) - 512, &[3; 512]).unwrap();
        s.set_len(4 << 20).unwrap();
        assert_eq!(s.len(), 4 << 20);
        assert_eq!(std::fs::metadata(&path).unwrap().len(), 4 << 20);
        let mut buf = [9u8; 1024];
        s.read_at((1 << 20) - 512, &mut buf).unwrap();
        assert_eq!(buf[..512], [3; 512]);
        assert_eq!(buf[512..], [0; 512]);
        s.write_at((4 << 20) - 512, &[4; 512]).unwrap();
        // Cut mid-way through the written block, then grown again: the cut bytes read zero.
        s.set_len((1 << 20) - 256).unwrap();
        assert!(s.read_at((1 << 20) - 512, &mut buf[..512]).is_err());
        assert!(s.write_at((1 << 20) - 256, &[1]).is_err());
        s.set_len(1 << 20).unwrap();
        s.read_at((1 << 20) - 512, &mut buf[..512]).unwrap();
        assert_eq!(buf[..256], [3; 256]);
        assert_eq!(buf[256..512], [0; 256]);
        // Grown outside stint: re-read, not changed.
        std::fs::OpenOptions::new()
            .write(true)
            .open(&path)
            .unwrap()
            .set_len(2 << 20)
            .unwrap();
        assert_eq!(s.len(), 1 << 20);
        assert_eq!(s.medium_len().unwrap(), 2 << 20);
        s.set_len(s.medium_len().unwrap()).unwrap();
        assert_eq!(s.len(), 2 << 20);
    }

    #[test]
    fn a_direct_file_takes_whole_blocks_only() {
        let dir = tempfile::tempdir().unwrap();
        let Ok(s) = FileStore::open_direct(&dir.path().join("lun.img"), Some(1 << 20), 4096) else {
            return eprintln!("SKIPPED: no O_DIRECT here");
        };
        let e = s.set_len((2 << 20) + 512).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::InvalidInput);
        assert!(e.to_string().contains("4096-byte blocks"), "{e}");
        assert_eq!(s.len(), 1 << 20);
        s.set_len(2 << 20).unwrap();
        assert_eq!(s.len(), 2 << 20);
    }

    #[test]
    fn size_mismatch_and_missing_file_are_errors() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("lun.img");
        let e = FileStore::open(&path, None).err().unwrap();
        assert_eq!(e.kind(), io::ErrorKind::NotFound);
        FileStore::open(&path, Some(8192)).unwrap();
        let e = FileStore::open(&path, Some(4096)).err().unwrap();
        assert!(e.to_string().contains("8192"), "{e}");
        let e = FileStore::open(dir.path(), Some(4096)).err().unwrap();
        assert!(e.to_string().contains(&dir.path().display().to_string()));
    }
}
