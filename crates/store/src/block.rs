//! A store on a block device (`store = "block"`): what is particular to one, kept here (the
//! exclusive open, the ioctls that size it, how a range is made to read back as zeros). Reads,
//! writes, flushes and the io_uring path are [`FileStore`]'s and `FilePlane`'s, unchanged: a
//! block device is a file that is always opened `O_DIRECT`.

use crate::FileStore;
use parking_lot::Mutex;
use rustix::fs::{self, FallocateFlags};
use std::collections::BTreeMap;
use std::fs::{File, OpenOptions};
use std::io;
use std::os::fd::AsFd;
use std::os::unix::fs::{FileExt, FileTypeExt, MetadataExt, OpenOptionsExt};
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};

/// What the kernel says of a block device when it is opened.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BlockDevice {
    /// Bytes (`BLKGETSIZE64`).
    pub size: u64,
    /// The logical block (`BLKSSZGET`): the unit of its addresses, and of every `O_DIRECT`
    /// access.
    pub logical_block: u32,
    /// The physical block (`BLKPBSZGET`): the unit it writes without a read-modify-write.
    pub physical_block: u32,
    /// It takes WRITE ZEROES (`queue/write_zeroes_max_bytes` > 0), which may deallocate
    /// (`fallocate(FALLOC_FL_PUNCH_HOLE)` sends it with unmapping allowed). Without it a range
    /// is zeroed by writing zeros: correct, but neither thin nor fast.
    pub write_zeroes: bool,
    /// What it deallocates in one piece (`queue/discard_granularity`); 0 when unknown.
    pub discard_granularity: u32,
}

/// The ranges of a block store this LUN has deallocated (UNMAP, WRITE SAME with UNMAP,
/// SANITIZE) and not written since: what GET LBA STATUS reports deallocated (SBC-4 §5.7). Linux
/// offers no way to ask a block device what it holds allocated, so the record is the LUN's own
/// and lasts while it runs; after a restart every block is "mapped or unknown" (provisioning
/// status 0h), which SBC-4 allows. Each change happens while the plane's range lock holds the
/// range, so a record and the device's contents agree.
#[derive(Default)]
pub(crate) struct Holes {
    /// Any range recorded: a write to a store without holes takes no lock.
    any: AtomicBool,
    /// Start to end (exclusive) of disjoint, non-adjacent ranges.
    ranges: Mutex<BTreeMap<u64, u64>>,
}

impl Holes {
    /// `[start, end)` is deallocated.
    pub(crate) fn insert(&self, mut start: u64, mut end: u64) {
        if start >= end {
            return;
        }
        let mut ranges = self.ranges.lock();
        // Those that overlap or touch it, latest first: sorted and disjoint, so their ends
        // fall too, and the first that ends before `start` ends the run.
        let touching: Vec<(u64, u64)> = ranges
            .range(..=end)
            .rev()
            .take_while(|(_, &e)| e >= start)
            .map(|(&s, &e)| (s, e))
            .collect();
        for (s, e) in touching {
            ranges.remove(&s);
            (start, end) = (start.min(s), end.max(e));
        }
        ranges.insert(start, end);
        self.any.store(true, Ordering::Release);
    }

    /// `[start, end)` is being written: no longer deallocated.
    pub(crate) fn remove(&self, start: u64, end: u64) {
        // A range lock orders this load after any insert into the same range.
        if !self.any.load(Ordering::Acquire) || start >= end {
            return;
        }
        let mut ranges = self.ranges.lock();
        let overlapping: Vec<(u64, u64)> = ranges
            .range(..end)
            .rev()
            .take_while(|(_, &e)| e > start)
            .map(|(&s, &e)| (s, e))
            .collect();
        for (s, e) in overlapping {
            ranges.remove(&s);
            if s < start {
                ranges.insert(s, start);
            }
            if e > end {
                ranges.insert(end, e);
            }
        }
        self.any.store(!ranges.is_empty(), Ordering::Release);
    }

    /// The first run of `[offset, end)` that is all mapped or all deallocated: whether it is
    /// mapped, and its length.
    pub(crate) fn run(&self, offset: u64, end: u64) -> (bool, u64) {
        if !self.any.load(Ordering::Acquire) {
            return (true, end - offset);
        }
        let ranges = self.ranges.lock();
        if let Some((_, &e)) = ranges.range(..=offset).next_back() {
            if e > offset {
                return (false, e.min(end) - offset);
            }
        }
        let next = ranges.range(offset..).next().map_or(end, |(&s, _)| s);
        (true, next.min(end) - offset)
    }
}

impl BlockDevice {
    /// The size, and alignment, of what a zeroing may deallocate: the discard granularity,
    /// else the physical block; 0 when the device cannot deallocate at all.
    pub(crate) fn unmap_granularity(&self) -> u64 {
        match (self.write_zeroes, self.discard_granularity) {
            (false, _) => 0,
            (true, 0) => u64::from(self.physical_block),
            (true, g) => u64::from(g),
        }
    }
}

impl FileStore {
    /// Opens the block device at `path` for a logical unit of `block`-byte logical blocks
    /// (default: the device's logical block; it must be a multiple of it) and `size` bytes
    /// (default: the whole device rounded down to whole blocks; more than the device is an
    /// error). Always `O_DIRECT`, and `O_EXCL`: the kernel then refuses the device to any
    /// other exclusive opener (a second server, a mount, device mapper, md), and refuses this
    /// open while one of them holds it (EBUSY).
    pub fn open_block(path: &Path, size: Option<u64>, block: Option<u32>) -> io::Result<Self> {
        let shown = path.display();
        let err =
            |kind: io::ErrorKind, what: String| io::Error::new(kind, format!("{shown}: {what}"));
        let meta = std::fs::metadata(path).map_err(|e| match e.kind() {
            io::ErrorKind::NotFound => err(e.kind(), "no such device".into()),
            _ => err(e.kind(), format!("cannot stat: {e}")),
        })?;
        let kind = meta.file_type();
        if !kind.is_block_device() {
            let what = if kind.is_file() {
                "a regular file (store = \"file\" serves files)"
            } else if kind.is_dir() {
                "a directory"
            } else if kind.is_char_device() {
                "a character device"
            } else {
                "not a device"
            };
            return Err(err(
                io::ErrorKind::InvalidInput,
                format!("not a block device: {what}"),
            ));
        }
        let open = |flags: fs::OFlags| {
            OpenOptions::new()
                .read(true)
                .write(true)
                .custom_flags((fs::OFlags::DIRECT | flags).bits() as i32)
                .open(path)
        };
        let file = open(fs::OFlags::EXCL).map_err(|e| match e.raw_os_error() {
            Some(n) if n == rustix::io::Errno::BUSY.raw_os_error() => err(
                io::ErrorKind::ResourceBusy,
                format!("device in use: {}", user_of(path, meta.rdev())),
            ),
            _ if e.kind() == io::ErrorKind::PermissionDenied
                || e.raw_os_error() == Some(rustix::io::Errno::ROFS.raw_os_error()) =>
            {
                err(
                    io::ErrorKind::PermissionDenied,
                    format!(
                        "cannot open for reading and writing ({e}): a read-only device, or a \
                         user without write access to it (root, or the disk group)"
                    ),
                )
            }
            _ => err(
                e.kind(),
                format!("cannot open with O_DIRECT and O_EXCL: {e}"),
            ),
        })?;
        // What a second stint finds in /proc/locks to name this one (FileStore::open's lock),
        // and what tells udev not to probe the device while it is served (systemd's "locking
        // block device access"). O_EXCL is the guard; udev's own brief shared lock is waited
        // out.
        for attempt in 0.. {
            match file.try_lock() {
                Ok(()) => break,
                Err(std::fs::TryLockError::WouldBlock) if attempt < 20 => {
                    std::thread::sleep(std::time::Duration::from_millis(50))
                }
                Err(e) => {
                    tracing::warn!(device = %shown, error = %e, "no flock on the device");
                    break;
                }
            }
        }
        let ioctl = |e: rustix::io::Errno, name: &str| {
            err(io::Error::from(e).kind(), format!("ioctl {name}: {e}"))
        };
        let device_size = blkgetsize64(&file).map_err(|e| ioctl(e, "BLKGETSIZE64"))?;
        let logical_block = fs::ioctl_blksszget(&file).map_err(|e| ioctl(e, "BLKSSZGET"))?;
        let physical_block = fs::ioctl_blkpbszget(&file).map_err(|e| ioctl(e, "BLKPBSZGET"))?;
        let queue = |name: &str| queue_attribute(meta.rdev(), name);
        let device = BlockDevice {
            size: device_size,
            logical_block,
            physical_block: physical_block.max(logical_block),
            write_zeroes: queue("write_zeroes_max_bytes").is_some_and(|n| n > 0),
            discard_granularity: queue("discard_granularity").map_or(0, |n| n as u32),
        };
        let block = block.unwrap_or(logical_block);
        if block == 0 || logical_block == 0 || !block.is_multiple_of(logical_block) {
            return Err(err(
                io::ErrorKind::InvalidInput,
                format!(
                    "block_size {block} is not a multiple of the device's {logical_block}-byte \
                     logical blocks (BLKSSZGET): every direct access must be whole ones"
                ),
            ));
        }
        let len = match size {
            Some(size) if size > device_size => {
                return Err(err(
                    io::ErrorKind::InvalidInput,
                    format!(
                        "the device has {device_size} bytes, less than the LUN's configured size \
                         of {size} bytes; give a smaller size, or none to take the device's"
                    ),
                ))
            }
            Some(size) => size,
            None => device_size / u64::from(block) * u64::from(block),
        };
        if len == 0 {
            return Err(err(
                io::ErrorKind::InvalidInput,
                format!(
                    "the device has {device_size} bytes, not one {block}-byte block (a loop \
                     device with no file attached?)"
                ),
            ));
        }
        // FUA and write-through writes: O_DIRECT | O_DSYNC becomes a write with FUA (or one
        // followed by a cache flush, on a device without FUA). A second, non-exclusive open
        // of a device this process holds exclusively is allowed.
        let dsync = open(fs::OFlags::DSYNC).map_err(|e| {
            err(
                e.kind(),
                format!("cannot open with O_DIRECT and O_DSYNC: {e}"),
            )
        })?;
        // One block read back, so a device that takes the open but not the I/O fails here.
        let mut probe = crate::aligned::Aligned::default();
        file.read_exact_at(probe.get(block as usize), 0)
            .map_err(|e| err(e.kind(), format!("cannot read its first block: {e}")))?;
        FileStore::on_device(file, dsync, path, len, block, device)
    }
}

/// `ioctl(BLKGETSIZE64)`: the device's size in bytes.
#[allow(unsafe_code)]
pub(crate) fn blkgetsize64(fd: impl AsFd) -> rustix::io::Result<u64> {
    use rustix::ioctl::{ioctl, opcode, Getter, Opcode};
    // <linux/fs.h>: #define BLKGETSIZE64 _IOR(0x12, 114, size_t). The opcode encodes the size
    // of `size_t`, but the kernel always writes a u64 (`put_u64` in block/ioctl.c).
    const BLKGETSIZE64: Opcode = opcode::read::<usize>(0x12, 114);
    // SAFETY: BLKGETSIZE64 is a valid opcode on any file (ENOTTY where it does not apply), and
    // for it the kernel writes exactly one u64 through the pointer, which `Getter<_, u64>`
    // points at a `MaybeUninit<u64>` it owns and reads only after a successful call.
    unsafe { ioctl(fd, Getter::<BLKGETSIZE64, u64>::new()) }
}

/// A number from the device's request queue in sysfs (`/sys/dev/block/MAJ:MIN/queue/NAME`; a
/// partition's is its disk's, one directory up).
fn queue_attribute(rdev: u64, name: &str) -> Option<u64> {
    let dev = format!("/sys/dev/block/{}:{}", fs::major(rdev), fs::minor(rdev));
    [
        format!("{dev}/queue/{name}"),
        format!("{dev}/../queue/{name}"),
    ]
    .iter()
    .find_map(|p| std::fs::read_to_string(p).ok())
    .and_then(|text| text.trim().parse().ok())
}

/// Who holds a device this open found busy: a stint (its flock), a mount, or another
/// exclusive opener the kernel lists as a holder.
fn user_of(path: &Path, rdev: u64) -> String {
    if let Some(holder) = File::open(path)
        .ok()
        .and_then(|f| crate::file::lock_holder(&f))
    {
        return format!(
            "exported by {} (it holds the device open exclusively); stop it or use another device",
            holder.name
        );
    }
    let id = format!("{}:{}", fs::major(rdev), fs::minor(rdev));
    // /proc/self/mountinfo: "36 35 98:0 /mnt1 /mnt2 rw ..." (field 3 the device, 5 the mount point).
    let mounted = std::fs::read_to_string("/proc/self/mountinfo")
        .ok()
        .and_then(|info| {
            info.lines().find_map(|line| {
                let f: Vec<&str> = line.split_whitespace().collect();
                (f.get(2) == Some(&id.as_str())).then(|| f.get(4).unwrap_or(&"?").to_string())
            })
        });
    if let Some(at) = mounted {
        return format!("a file system on it is mounted at {at}; unmount it first");
    }
    let holders = std::fs::read_dir(format!("/sys/dev/block/{id}/holders"))
        .map(|d| {
            d.flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect::<Vec<_>>()
        })
        .unwrap_or_default();
    if !holders.is_empty() {
        return format!(
            "held by {} (its holders in sysfs); release it first",
            holders.join(", ")
        );
    }
    "another program holds it open exclusively (O_EXCL: a target, a file system, swap, or a \
     volume manager)"
        .into()
}

/// Makes `[offset, offset + len)` of the device read back as zeros, as SBC-4's LBPRZ promises
/// for unmapped blocks. `fallocate(FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE)` on a block
/// device is WRITE ZEROES with unmapping allowed (Linux's `blkdev_fallocate`, no fallback: the
/// device deallocates if it can, and reads return zeros either way); where the device has no
/// WRITE ZEROES (EOPNOTSUPP), `FALLOC_FL_ZERO_RANGE` has the kernel write zeros. BLKDISCARD
/// is not used: a discard's blocks may read back as anything (`discard_zeroes_data` is gone
/// from Linux since 4.12).
pub(crate) fn zero(file: &File, offset: u64, len: u64) -> io::Result<()> {
    let punch = FallocateFlags::PUNCH_HOLE | FallocateFlags::KEEP_SIZE;
    match fs::fallocate(file, punch, offset, len) {
        Err(e) if e == rustix::io::Errno::OPNOTSUPP => {
            let zero_range = FallocateFlags::ZERO_RANGE | FallocateFlags::KEEP_SIZE;
            Ok(fs::fallocate(file, zero_range, offset, len)?)
        }
        other => Ok(other?),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Store;
    use std::path::PathBuf;
    use std::process::Command;

    /// A loop device over a sparse file, detached (by the device `losetup` returned) when
    /// dropped. `None`, with the reason printed, where loop devices cannot be set up (not
    /// root, no loop driver).
    struct Loop {
        dev: PathBuf,
        /// The backing file.
        file: PathBuf,
        _dir: tempfile::TempDir,
        /// Held until detached: two `losetup -f` at once may pick the same free device.
        _one: parking_lot::MutexGuard<'static, ()>,
    }

    static ONE_LOOP: parking_lot::Mutex<()> = parking_lot::Mutex::new(());

    impl Loop {
        fn new(size: u64, sector: u32) -> Option<Loop> {
            let one = ONE_LOOP.lock();
            let dir = tempfile::tempdir().unwrap();
            let file = dir.path().join("backing.img");
            File::create(&file).unwrap().set_len(size).unwrap();
            let out = Command::new("losetup")
                .args(["-f", "--show", "--sector-size", &sector.to_string()])
                .arg(&file)
                .output();
            match out {
                Ok(out) if out.status.success() => Some(Loop {
                    dev: String::from_utf8_lossy(&out.stdout).trim().into(),
                    file,
                    _dir: dir,
                    _one: one,
                }),
                Ok(out) => {
                    let why = String::from_utf8_lossy(&out.stderr);
                    println!("SKIPPED (not passed): losetup failed: {}", why.trim());
                    None
                }
                Err(e) => {
                    println!("SKIPPED (not passed): no losetup: {e}");
                    None
                }
            }
        }
    }

    impl Drop for Loop {
        fn drop(&mut self) {
            let _ = Command::new("losetup").arg("-d").arg(&self.dev).status();
        }
    }

    #[test]
    fn a_loop_device_is_sized_by_the_kernel_and_held_exclusively() {
        let Some(dev) = Loop::new(8 << 20, 4096) else {
            return;
        };
        let s = FileStore::open_block(&dev.dev, None, None).unwrap();
        let d = s.block_device().unwrap().clone();
        assert_eq!((d.size, d.logical_block), (8 << 20, 4096));
        assert!(d.physical_block >= 4096, "{d:?}");
        assert_eq!((s.len(), s.direct_block()), (8 << 20, Some(4096)));
        assert!(s.tells_allocation() && s.allocated_bytes().is_none());
        assert_eq!(s.extent(0, 8 << 20).unwrap(), (true, 8 << 20));

        // A second open, as a second server's, is refused and names the holder.
        let e = FileStore::open_block(&dev.dev, None, None).err().unwrap();
        assert_eq!(e.kind(), io::ErrorKind::ResourceBusy, "{e}");
        let me = format!("pid {}", std::process::id());
        assert!(e.to_string().contains(&me), "{e}");
        assert!(e.to_string().contains("device in use"), "{e}");

        // Data lands, durable or not, and a zeroed range reads back as zeros.
        let data: Vec<u8> = (0..3 * 4096u32).map(|i| (i % 251) as u8).collect();
        s.write_at(4096, &data).unwrap();
        s.write_durable(1 << 20, &data).unwrap();
        s.flush().unwrap();
        let mut back = vec![0; data.len()];
        s.read_at(1 << 20, &mut back).unwrap();
        assert_eq!(back, data);
        s.punch_hole(8192, 4096).unwrap();
        s.read_at(4096, &mut back).unwrap();
        assert_eq!(back[..4096], data[..4096]);
        assert!(back[4096..8192].iter().all(|&b| b == 0));
        assert_eq!(back[8192..], data[8192..]);
        // What this LUN deallocated reads as such until written again.
        assert_eq!(s.extent(4096, 1 << 20).unwrap(), (true, 4096));
        assert_eq!(s.extent(8192, 1 << 20).unwrap(), (false, 4096));
        assert!(!s.is_mapped(8192, 4096) && s.is_mapped(8192, 8192));
        s.write_at(8192, &data[..4096]).unwrap();
        assert_eq!(s.extent(4096, 1 << 20).unwrap(), (true, 1 << 20));
        assert!(s.write_at(100, &[1; 4096]).is_err(), "not block-aligned");
        assert!(s.read_at(8 << 20, &mut back).is_err(), "past the end");
        drop(s);

        // The open was the only holder: free again; a smaller size is a prefix of it.
        let s = FileStore::open_block(&dev.dev, Some(4 << 20), Some(8192)).unwrap();
        assert_eq!((s.len(), s.direct_block()), (4 << 20, Some(8192)));
    }

    #[test]
    fn a_block_device_is_resized_by_its_owner_and_adopted() {
        let Some(dev) = Loop::new(8 << 20, 512) else {
            return;
        };
        let s = FileStore::open_block(&dev.dev, None, None).unwrap();
        let e = s.set_len(16 << 20).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::Unsupported);
        assert!(e.to_string().contains("losetup -c"), "{e}");
        assert_eq!(s.len(), 8 << 20);
        // Grown as `losetup -c` after growing the file does (what `lvextend` is to an LV).
        File::options()
            .write(true)
            .open(&dev.file)
            .unwrap()
            .set_len(16 << 20)
            .unwrap();
        let status = Command::new("losetup").arg("-c").arg(&dev.dev).status();
        assert!(status.is_ok_and(|s| s.success()));
        assert_eq!(s.medium_len().unwrap(), 16 << 20);
        s.set_len(16 << 20).unwrap();
        assert_eq!(s.len(), 16 << 20);
        s.write_at((16 << 20) - 512, &[5; 512]).unwrap();
    }

    #[test]
    fn holes_merge_split_and_report_runs() {
        let h = Holes::default();
        assert_eq!(h.run(0, 100), (true, 100));
        h.insert(10, 20);
        h.insert(30, 40);
        h.insert(20, 30); // joins both
        assert_eq!(*h.ranges.lock(), BTreeMap::from([(10, 40)]));
        assert_eq!(h.run(0, 100), (true, 10));
        assert_eq!(h.run(10, 100), (false, 30));
        assert_eq!(h.run(15, 25), (false, 10));
        h.remove(20, 25);
        assert_eq!(*h.ranges.lock(), BTreeMap::from([(10, 20), (25, 40)]));
        assert_eq!(h.run(20, 100), (true, 5));
        h.insert(5, 50); // covers both
        assert_eq!(*h.ranges.lock(), BTreeMap::from([(5, 50)]));
        h.remove(0, 5); // touches, overlaps nothing
        h.remove(49, 60);
        assert_eq!(*h.ranges.lock(), BTreeMap::from([(5, 49)]));
        h.remove(0, 100);
        assert!(h.ranges.lock().is_empty() && !h.any.load(Ordering::Relaxed));
        assert_eq!(h.run(7, 9), (true, 2));
    }

    #[test]
    fn bad_block_devices_are_named() {
        let Some(dev) = Loop::new(4 << 20, 4096) else {
            return;
        };
        let msg = |r: io::Result<FileStore>| r.err().expect("refused").to_string();
        let e = msg(FileStore::open_block(&dev.dev, Some(8 << 20), None));
        assert!(
            e.contains("has 4194304 bytes, less than the LUN's configured size of 8388608"),
            "{e}"
        );
        let e = msg(FileStore::open_block(&dev.dev, None, Some(512)));
        assert!(
            e.contains("block_size 512 is not a multiple of the device's 4096-byte"),
            "{e}"
        );
        let file = dev._dir.path().join("backing.img");
        let e = msg(FileStore::open_block(&file, None, None));
        assert!(e.contains("not a block device: a regular file"), "{e}");
        let e = msg(FileStore::open_block(
            Path::new("/dev/stint-no-such-disk"),
            None,
            None,
        ));
        assert!(e.contains("/dev/stint-no-such-disk: no such device"), "{e}");
        let e = msg(FileStore::open(&dev.dev, None));
        assert!(e.contains("store = \"block\""), "{e}");
    }
}
