//! Simulated power loss: a store that keeps, beside the LUN file, a "stable image" holding
//! exactly what stable storage would hold if power failed now, as CrashMonkey and ALICE model
//! a disk for file systems. A durable write (FUA, or any write in write-through mode) reaches
//! the image at once; a cached write only marks its range dirty; a completed flush
//! (`fdatasync`) copies every dirty range; and, as the kernel writes back dirty pages when it
//! likes, now and then one dirty range is copied at random. After SIGKILL the image is what
//! power loss would have left: the test restarts the server on it.
//!
//! Only this test builds it. The real store underneath does everything it does in `stint
//! serve`; [`Weaken`] changes only what the image believes, to show the checker catches a
//! store that skips a durability step.

use rand_core::{RngCore, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;
use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::sync::{Mutex, RwLock};
use store::{FileStore, Store};

/// The durability step a weakened build leaves out (the negative check).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Weaken {
    /// The store as shipped.
    None,
    /// A durable write (FUA, or any write with the write cache off) is a plain cached write
    /// (as if its O_DSYNC were removed).
    Durable,
    /// A flush puts nothing on stable storage (as if its fdatasync were removed).
    Flush,
}

impl Weaken {
    pub fn name(self) -> &'static str {
        match self {
            Weaken::None => "none",
            Weaken::Durable => "durable-write",
            Weaken::Flush => "flush",
        }
    }

    pub fn parse(name: &str) -> Option<Weaken> {
        [Weaken::None, Weaken::Durable, Weaken::Flush]
            .into_iter()
            .find(|w| w.name() == name)
    }
}

/// One chance in this many, after a cached write, that one dirty range is written back.
const WRITEBACK_ODDS: u64 = 8;

pub struct PowerLossStore {
    inner: FileStore,
    stable: File,
    /// Byte ranges written to the cache and not yet copied to the image.
    dirty: Mutex<Vec<(u64, usize)>>,
    /// Writes hold it shared, copies to the image exclusive: a copy never sees half a write,
    /// as a disk writes a sector whole, and a flush covers every write completed before it.
    gate: RwLock<()>,
    weaken: Weaken,
    /// Drives the random writeback; `None`: nothing is written back unasked.
    writeback: Option<Mutex<Xoshiro256PlusPlus>>,
}

impl PowerLossStore {
    /// Opens (or creates) the LUN file `path` as `stint serve` does, and starts its stable
    /// image at `stable` as a copy of it: whatever the file holds at start is taken as stable.
    pub fn open(
        path: &Path,
        size: u64,
        stable: &Path,
        weaken: Weaken,
        writeback_seed: Option<u64>,
    ) -> io::Result<PowerLossStore> {
        let inner = FileStore::open(path, Some(size))?;
        std::fs::copy(path, stable)?;
        let stable = OpenOptions::new().read(true).write(true).open(stable)?;
        Ok(PowerLossStore {
            inner,
            stable,
            dirty: Mutex::new(Vec::new()),
            gate: RwLock::new(()),
            weaken,
            writeback: writeback_seed.map(|s| Mutex::new(Xoshiro256PlusPlus::seed_from_u64(s))),
        })
    }

    /// What a completed durable write leaves on stable storage.
    fn land(&self, offset: u64, buf: &[u8]) -> io::Result<()> {
        self.stable.write_all_at(buf, offset)
    }

    fn mark_dirty(&self, offset: u64, len: usize) {
        self.dirty.lock().unwrap().push((offset, len));
    }

    /// Copies a range of the LUN file, as its cache now holds it, to the image.
    fn copy(&self, (offset, len): (u64, usize)) -> io::Result<()> {
        let mut buf = vec![0; len];
        self.inner.read_at(offset, &mut buf)?;
        self.land(offset, &buf)
    }

    /// Background writeback of one random dirty range, now and then.
    fn maybe_write_back(&self) -> io::Result<()> {
        let Some(rng) = &self.writeback else {
            return Ok(());
        };
        let pick = {
            let mut rng = rng.lock().unwrap();
            (rng.next_u64() % WRITEBACK_ODDS == 0).then(|| rng.next_u64())
        };
        let Some(pick) = pick else { return Ok(()) };
        let _exclusive = self.gate.write().unwrap();
        let range = {
            let mut dirty = self.dirty.lock().unwrap();
            if dirty.is_empty() {
                return Ok(());
            }
            let at = (pick % dirty.len() as u64) as usize;
            dirty.swap_remove(at)
        };
        self.copy(range)
    }
}

impl Store for PowerLossStore {
    fn len(&self) -> u64 {
        self.inner.len()
    }

    fn read_at(&self, offset: u64, buf: &mut [u8]) -> io::Result<()> {
        self.inner.read_at(offset, buf)
    }

    fn write_at(&self, offset: u64, buf: &[u8]) -> io::Result<()> {
        {
            let _shared = self.gate.read().unwrap();
            self.inner.write_at(offset, buf)?;
            self.mark_dirty(offset, buf.len());
        }
        self.maybe_write_back()
    }

    fn write_durable(&self, offset: u64, buf: &[u8]) -> io::Result<()> {
        let _shared = self.gate.read().unwrap();
        self.inner.write_durable(offset, buf)?;
        if self.weaken == Weaken::Durable {
            self.mark_dirty(offset, buf.len());
            return Ok(());
        }
        self.land(offset, buf)
    }

    fn flush(&self) -> io::Result<()> {
        let _exclusive = self.gate.write().unwrap();
        self.inner.flush()?;
        if self.weaken == Weaken::Flush {
            return Ok(());
        }
        let dirty = std::mem::take(&mut *self.dirty.lock().unwrap());
        dirty.into_iter().try_for_each(|range| self.copy(range))
    }
}

/// The image holds what each step makes durable and nothing else, and a weakened store's
/// image misses what its weakness leaves out. Panics otherwise.
pub fn self_check(dir: &Path) {
    let image_at = |image: &Path, offset: usize| std::fs::read(image).unwrap()[offset];
    for weaken in [Weaken::None, Weaken::Durable, Weaken::Flush] {
        let file = dir.join(format!("check-{}.img", weaken.name()));
        let image = dir.join(format!("check-{}.stable", weaken.name()));
        let s = PowerLossStore::open(&file, 1 << 16, &image, weaken, None).unwrap();
        s.write_at(0, &[1; 512]).unwrap();
        assert_eq!(image_at(&image, 0), 0, "a cached write is not stable");
        s.write_durable(512, &[2; 512]).unwrap();
        let durable = weaken != Weaken::Durable;
        assert_eq!(
            image_at(&image, 512) == 2,
            durable,
            "a durable write, weakened: {weaken:?}"
        );
        s.flush().unwrap();
        let flushed = weaken != Weaken::Flush;
        assert_eq!(
            image_at(&image, 0) == 1,
            flushed,
            "flush, weakened: {weaken:?}"
        );
        s.write_at(1024, &[3; 512]).unwrap();
        let mut back = [0; 512];
        s.read_at(1024, &mut back).unwrap();
        assert_eq!(back, [3; 512], "the LUN file itself holds every write");
    }
}
