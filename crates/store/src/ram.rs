//! A sparse in-memory store whose memory grows only with the data written.
//!
//! The bytes live in 1 MiB chunks, allocated on first write. Chunks are found through a two-level
//! table: a top-level array with one [`OnceLock`] per 16 GiB region (16 bytes each, the only
//! allocation made up front: 20 KiB for 22 TB, 1 MiB for 1 PiB), each pointing, once the region
//! is first written, to a second-level table of 16 384 chunk slots (256 KiB). A slot is a
//! reader-writer lock around the chunk, so I/O to different chunks never contends, and a 4 KiB
//! access costs two atomic loads (its segment's and its region's `OnceLock`, below) and one
//! chunk lock.
//!
//! The store can be resized while served ([`Store::set_len`]). The top-level array is made of
//! segments that never move: the first covers the capacity the store was made with; each one
//! made later, when the store grows past what the earlier ones cover, holds as many regions as
//! all before it together. So a grown store's top-level array is at most twice what its
//! capacity needs, and no access ever waits for a resize or finds its entry moved.

use crate::{check_range, check_span, Store};
use parking_lot::RwLock;
use std::io;
use std::mem::size_of;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;

/// log2 of the chunk size.
const CHUNK_SHIFT: u32 = 20;
/// Bytes per chunk: big enough that a typical I/O touches one or two chunk locks, small enough
/// that concurrent writers to different regions rarely meet.
const CHUNK: usize = 1 << CHUNK_SHIFT;
/// log2 of the chunks per second-level table.
const TABLE_SHIFT: u32 = 14;
/// Chunk slots per second-level table (16 GiB of capacity, 256 KiB of slots).
const TABLE_CHUNKS: usize = 1 << TABLE_SHIFT;
/// Bytes of capacity covered by one second-level table.
const TABLE_SPAN: u64 = 1 << (CHUNK_SHIFT + TABLE_SHIFT);
/// Segments of the top-level array: with a first segment of at least one region, 21 cover
/// the 2^20 regions of [`RamStore::MAX_LEN`].
const SEGMENTS: usize = 21;

type Chunk = Box<[u8; CHUNK]>;
/// One chunk: `None` until first written and after a hole is punched over all of it.
type Slot = RwLock<Option<Chunk>>;
type Table = [Slot; TABLE_CHUNKS];
/// A top-level entry: the region's second-level table, created on the region's first write.
type Region = OnceLock<Box<Table>>;

/// The top-level array, in segments made as the capacity first needs them.
struct Regions {
    /// Regions of the first segment (at least one); segment `k > 0` holds `first << (k - 1)`.
    first: u64,
    segments: [OnceLock<Box<[Region]>>; SEGMENTS],
}

impl Regions {
    /// Regions for `len` bytes of capacity.
    fn needed(len: u64) -> u64 {
        len.div_ceil(TABLE_SPAN)
    }

    /// The segment of region `region`, and its index there.
    fn locate(&self, region: u64) -> (usize, usize) {
        if region < self.first {
            return (0, region as usize);
        }
        // Segments 0..=k hold `first << k` regions together.
        let k = 64 - (region / self.first).leading_zeros();
        (k as usize, (region - (self.first << (k - 1))) as usize)
    }

    /// Regions segment `k` holds.
    fn size(&self, k: usize) -> u64 {
        match k {
            0 => self.first,
            k => self.first << (k - 1),
        }
    }

    /// The top-level entry of region `region`, `None` when its segment is not made: it lies
    /// beyond every capacity the store has had.
    fn get(&self, region: u64) -> Option<&Region> {
        let (k, i) = self.locate(region);
        self.segments.get(k)?.get()?.get(i)
    }

    /// The top-level entry of region `region`, making its segment if needed. `None` only for
    /// a region beyond [`RamStore::MAX_LEN`].
    fn get_or_make(&self, region: u64) -> Option<&Region> {
        let (k, i) = self.locate(region);
        let segment = self.segments.get(k)?.get_or_init(|| {
            (0..self.size(k))
                .map(|_| OnceLock::new())
                .collect::<Vec<_>>()
                .into_boxed_slice()
        });
        segment.get(i)
    }

    /// Make the segments that cover `len` bytes, failing (not aborting) when memory runs out.
    fn cover(&self, len: u64) -> io::Result<()> {
        let needed = Self::needed(len);
        let mut covered = 0;
        for (k, segment) in self.segments.iter().enumerate() {
            if covered >= needed {
                break;
            }
            let size = self.size(k);
            if segment.get().is_none() {
                let mut regions = Vec::new();
                regions.try_reserve_exact(size as usize).map_err(|e| {
                    io::Error::new(
                        io::ErrorKind::OutOfMemory,
                        format!("cannot allocate the table of a RAM store of {len} bytes: {e}"),
                    )
                })?;
                regions.resize_with(size as usize, OnceLock::new);
                // Made by a racing access meanwhile: either is as good.
                let _ = segment.set(regions.into_boxed_slice());
            }
            covered += size;
        }
        Ok(())
    }

    /// Bytes of the segments made.
    fn bytes(&self) -> u64 {
        let entries: usize = self
            .segments
            .iter()
            .filter_map(|s| s.get())
            .map(|s| s.len())
            .sum();
        (entries * size_of::<Region>()) as u64
    }
}

/// A RAM store; unwritten chunks read as zeroes and cost no memory.
pub struct RamStore {
    /// Capacity in bytes; a resize changes it holding the range lock over the bytes that
    /// come or go.
    len: AtomicU64,
    regions: Regions,
    /// Chunks currently allocated.
    chunks: AtomicU64,
    /// Second-level tables created so far (they live as long as the store).
    tables: AtomicU64,
}

impl RamStore {
    /// The largest capacity: 16 PiB, whose top-level table is 16 MiB.
    pub const MAX_LEN: u64 = 1 << 54;

    /// A store of `len` bytes. Only the top-level table (16 bytes per 16 GiB) is allocated now.
    /// A length above [`RamStore::MAX_LEN`] is an `InvalidInput` error, a top-level table that
    /// cannot be allocated an `OutOfMemory` one.
    pub fn new(len: u64) -> io::Result<Self> {
        Self::fits(len)?;
        let regions = Regions {
            first: Regions::needed(len).max(1),
            segments: Default::default(),
        };
        regions.cover(len)?;
        Ok(RamStore {
            len: AtomicU64::new(len),
            regions,
            chunks: AtomicU64::new(0),
            tables: AtomicU64::new(0),
        })
    }

    /// Whether a RAM store can be `len` bytes.
    fn fits(len: u64) -> io::Result<()> {
        if len <= Self::MAX_LEN {
            return Ok(());
        }
        Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!(
                "a RAM store of {len} bytes ({:.1} PiB) is larger than the {} PiB it can address",
                len as f64 / (1u64 << 50) as f64,
                Self::MAX_LEN >> 50
            ),
        ))
    }

    /// Bytes of memory committed to written chunks (a multiple of the 1 MiB chunk size).
    pub fn allocated(&self) -> u64 {
        self.chunks.load(Ordering::Relaxed) * CHUNK as u64
    }

    /// Bytes of the chunk table: the top-level array plus every second-level table created so
    /// far. Second-level tables are kept until the store is dropped, even when holes are punched
    /// over their whole region.
    pub fn table_bytes(&self) -> u64 {
        self.regions.bytes() + self.tables.load(Ordering::Relaxed) * size_of::<Table>() as u64
    }

    /// The slot of chunk number `chunk`, or `None` when its region has never been written.
    fn slot(&self, chunk: u64) -> Option<&Slot> {
        let table = self.regions.get(chunk >> TABLE_SHIFT)?.get()?;
        Some(&table[chunk as usize & (TABLE_CHUNKS - 1)])
    }

    /// The slot of chunk number `chunk`, creating its second-level table if needed. `chunk`
    /// must lie below [`RamStore::MAX_LEN`].
    fn slot_or_create(&self, chunk: u64) -> io::Result<&Slot> {
        let region = self
            .regions
            .get_or_make(chunk >> TABLE_SHIFT)
            .ok_or_else(|| {
                io::Error::new(
                    io::ErrorKind::InvalidInput,
                    format!("chunk {chunk} lies beyond what a RAM store can address"),
                )
            })?;
        let table = region.get_or_init(|| {
            self.tables.fetch_add(1, Ordering::Relaxed);
            let slots: Vec<Slot> = (0..TABLE_CHUNKS).map(|_| RwLock::new(None)).collect();
            match slots.into_boxed_slice().try_into() {
                Ok(table) => table,
                Err(_) => unreachable!("a table has TABLE_CHUNKS slots"),
            }
        });
        Ok(&table[chunk as usize & (TABLE_CHUNKS - 1)])
    }
    /// Split `[offset, offset + len)` into (chunk number, offset in chunk, length) pieces.
    /// The range must lie within the store.
    fn pieces(offset: u64, len: u64) -> impl Iterator<Item = (u64, usize, usize)> {
        let mut pos = offset;
        let end = offset + len;
        std::iter::from_fn(move || {
            if pos >= end {
                return None;
            }
            let chunk = pos >> CHUNK_SHIFT;
            let within = (pos & (CHUNK as u64 - 1)) as usize;
            let n = (end - pos).min((CHUNK - within) as u64) as usize;
            pos += n as u64;
            Some((chunk, within, n))
        })
    }

    /// Frees the chunk in `slot` when `whole`, else zeroes `n` bytes of it from `within`.
    fn clear(&self, slot: &Slot, whole: bool, within: usize, n: usize) {
        let mut guard = slot.write();
        if whole {
            if guard.take().is_some() {
                self.chunks.fetch_sub(1, Ordering::Relaxed);
            }
        } else if let Some(data) = guard.as_deref_mut() {
            data[within..within + n].fill(0);
        }
    }

    /// Call `f(slot, chunk number, offset in chunk, length)` for each chunk of
    /// `[offset, offset + len)` whose region has a table, skipping regions without one at once;
    /// stop when `f` returns true. Returns whether `f` did. The range must lie within the store.
    fn for_each_present(
        &self,
        offset: u64,
        len: u64,
        mut f: impl FnMut(&Slot, u64, usize, usize) -> bool,
    ) -> bool {
        let end = offset + len;
        let mut pos = offset;
        while pos < end {
            let region = pos / TABLE_SPAN;
            let region_end = ((region + 1) * TABLE_SPAN).min(end);
            if let Some(table) = self.regions.get(region).and_then(|r| r.get()) {
                for (chunk, within, n) in Self::pieces(pos, region_end - pos) {
                    if f(
                        &table[chunk as usize & (TABLE_CHUNKS - 1)],
                        chunk,
                        within,
                        n,
                    ) {
                        return true;
                    }
                }
            }
            pos = region_end;
        }
        false
    }
}

impl Store for RamStore {
    fn len(&self) -> u64 {
        self.len.load(Ordering::Acquire)
    }

    fn read_at(&self, offset: u64, buf: &mut [u8]) -> io::Result<()> {
        check_range(self.len(), offset, buf.len())?;
        let mut done = 0;
        for (chunk, within, n) in Self::pieces(offset, buf.len() as u64) {
            let dst = &mut buf[done..done + n];
            match self.slot(chunk) {
                Some(slot) => match &*slot.read() {
                    Some(data) => dst.copy_from_slice(&data[within..within + n]),
                    None => dst.fill(0),
                },
                None => dst.fill(0),
            }
            done += n;
        }
        Ok(())
    }

    fn read_append(&self, offset: u64, len: usize, out: &mut Vec<u8>) -> io::Result<()> {
        check_range(self.len(), offset, len)?;
        out.reserve(len);
        for (chunk, within, n) in Self::pieces(offset, len as u64) {
            match self.slot(chunk) {
                Some(slot) => match &*slot.read() {
                    Some(data) => out.extend_from_slice(&data[within..within + n]),
                    None => out.resize(out.len() + n, 0),
                },
                None => out.resize(out.len() + n, 0),
            }
        }
        Ok(())
    }

    fn write_at(&self, offset: u64, buf: &[u8]) -> io::Result<()> {
        check_range(self.len(), offset, buf.len())?;
        let mut done = 0;
        for (chunk, within, n) in Self::pieces(offset, buf.len() as u64) {
            let mut guard = self.slot_or_create(chunk)?.write();
            let data = guard.get_or_insert_with(|| {
                self.chunks.fetch_add(1, Ordering::Relaxed);
                // Zeroed allocation: the pages are committed as they are touched.
                match vec![0u8; CHUNK].into_boxed_slice().try_into() {
                    Ok(data) => data,
                    Err(_) => unreachable!("a chunk has CHUNK bytes"),
                }
            });
            data[within..within + n].copy_from_slice(&buf[done..done + n]);
            done += n;
        }
        Ok(())
    }

    fn flush(&self) -> io::Result<()> {
        Ok(())
    }

    /// Frees the chunks the range covers entirely (the last one, partial when the length is not
    /// a multiple of 1 MiB, included) and zeroes the rest of it.
    fn punch_hole(&self, offset: u64, len: u64) -> io::Result<()> {
        check_span(self.len(), offset, len)?;
        self.for_each_present(offset, len, |slot, chunk, within, n| {
            let whole =
                within == 0 && (n == CHUNK || (chunk << CHUNK_SHIFT) + n as u64 == self.len());
            self.clear(slot, whole, within, n);
            false
        });
        Ok(())
    }

    /// Runs of chunks: a chunk is allocated from its first write until a hole covers it.
    fn extent(&self, offset: u64, len: u64) -> io::Result<(bool, u64)> {
        check_span(self.len(), offset, len)?;
        let end = offset + len;
        let allocated = |chunk: u64| self.slot(chunk).is_some_and(|slot| slot.read().is_some());
        let mapped = allocated(offset >> CHUNK_SHIFT);
        let mut pos = offset;
        while pos < end {
            let chunk = pos >> CHUNK_SHIFT;
            // A region without a table is deallocated as a whole.
            let region_has_table = self
                .regions
                .get(chunk >> TABLE_SHIFT)
                .is_some_and(|r| r.get().is_some());
            if !region_has_table && !mapped {
                pos = ((chunk >> TABLE_SHIFT) + 1) * TABLE_SPAN;
                continue;
            }
            if allocated(chunk) != mapped {
                break;
            }
            pos = (chunk + 1) << CHUNK_SHIFT;
        }
        Ok((mapped, pos.min(end) - offset))
    }

    fn tells_allocation(&self) -> bool {
        true
    }

    fn unmap_granularity(&self) -> u64 {
        CHUNK as u64
    }

    fn allocated_bytes(&self) -> Option<u64> {
        Some(self.allocated())
    }

    /// Grows by making the top-level segments the new capacity needs (the new bytes were
    /// never written, or were freed or zeroed when a shrink cut them); shrinks by freeing the
    /// chunks past the new end and zeroing the rest of the last one, so that growing again
    /// reads zeros there.
    fn set_len(&self, len: u64) -> io::Result<()> {
        Self::fits(len)?;
        let old = self.len();
        if len >= old {
            self.regions.cover(len)?;
            self.len.store(len, Ordering::Release);
            return Ok(());
        }
        self.len.store(len, Ordering::Release);
        self.for_each_present(len, old - len, |slot, _, within, n| {
            self.clear(slot, within == 0, within, n);
            false
        });
        Ok(())
    }

    /// Whether a chunk the range touches is allocated; `false` for a range beyond the end.
    fn is_mapped(&self, offset: u64, len: u64) -> bool {
        if check_span(self.len(), offset, len).is_err() {
            return false;
        }
        self.for_each_present(offset, len, |slot, _, _, _| slot.read().is_some())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    const TB22: u64 = 22_000_000_000_000;
    const PIB: u64 = 1 << 50;

    fn pattern(seed: u64, len: usize) -> Vec<u8> {
        (0..len as u64)
            .map(|i| (i.wrapping_mul(31).wrapping_add(seed.wrapping_mul(97)) % 251) as u8)
            .collect()
    }

    fn read(s: &RamStore, offset: u64, len: usize) -> Vec<u8> {
        let mut buf = vec![0xA5u8; len];
        s.read_at(offset, &mut buf).unwrap();
        buf
    }

    #[test]
    fn layout_is_compact() {
        // 16 bytes per top-level entry and per chunk slot.
        assert_eq!(size_of::<Region>(), 16);
        assert_eq!(size_of::<Slot>(), 16);
        assert_eq!(size_of::<Table>(), 256 << 10);
        assert_eq!(TABLE_SPAN, 16 << 30);
    }

    #[test]
    fn large_store_commits_nothing_up_front() {
        let s = RamStore::new(1 << 30).unwrap();
        assert_eq!(s.allocated(), 0);
        assert_eq!(s.table_bytes(), 16);
        assert!(read(&s, (1 << 30) - 512, 512).iter().all(|&b| b == 0));
        assert_eq!(s.allocated(), 0);
        assert_eq!(s.table_bytes(), 16);
    }

    #[test]
    fn store_of_22_tb_costs_20_kib_until_written() {
        let s = RamStore::new(TB22).unwrap();
        let top = TB22.div_ceil(TABLE_SPAN) * size_of::<Region>() as u64;
        assert_eq!(top, 1281 * 16);
        assert_eq!(s.table_bytes(), top);
        assert_eq!(s.allocated(), 0);
        // Reads anywhere, the last byte included, allocate nothing.
        for offset in [0, TB22 / 3, TB22 - 4096] {
            assert!(read(&s, offset, 4096).iter().all(|&b| b == 0));
        }
        assert!(read(&s, TB22 - 1, 1) == [0]);
        assert!(!s.is_mapped(0, TB22));
        assert_eq!(s.allocated(), 0);
        assert_eq!(s.table_bytes(), top);
        // One 4 KiB write: one chunk and one second-level table.
        let data = pattern(1, 4096);
        s.write_at(TB22 - 4096, &data).unwrap();
        assert_eq!(read(&s, TB22 - 4096, 4096), data);
        assert_eq!(s.allocated(), CHUNK as u64);
        assert_eq!(s.table_bytes(), top + size_of::<Table>() as u64);
        assert!(s.is_mapped(0, TB22));
        assert!(!s.is_mapped(0, TB22 - (1 << 20)));
    }

    #[test]
    fn store_of_1_pib_is_fine() {
        let s = RamStore::new(PIB).unwrap();
        assert_eq!(s.table_bytes(), 1 << 20);
        let data = pattern(2, 8192);
        s.write_at(PIB - 8192, &data).unwrap();
        s.write_at(0, &data).unwrap();
        assert_eq!(read(&s, PIB - 8192, 8192), data);
        assert_eq!(read(&s, 0, 8192), data);
        assert!(read(&s, PIB / 2, 8192).iter().all(|&b| b == 0));
        assert_eq!(s.allocated(), 2 * CHUNK as u64);
        assert_eq!(s.table_bytes(), (1 << 20) + 2 * size_of::<Table>() as u64);
        // Punching the whole 1 PiB skips the 65 534 regions without a table.
        s.punch_hole(0, PIB).unwrap();
        assert_eq!(s.allocated(), 0);
        assert!(!s.is_mapped(0, PIB));
        assert!(read(&s, PIB - 8192, 8192).iter().all(|&b| b == 0));
    }

    #[test]
    fn extents_follow_the_chunks() {
        const M: u64 = CHUNK as u64;
        let s = RamStore::new(TB22).unwrap();
        assert_eq!(s.extent(5, TB22 - 5).unwrap(), (false, TB22 - 5));
        s.write_at(3 * M + 10, &[1]).unwrap();
        s.write_at(4 * M, &[1]).unwrap();
        s.write_at(20 * TABLE_SPAN, &[1]).unwrap();
        assert_eq!(s.extent(0, TB22).unwrap(), (false, 3 * M));
        assert_eq!(
            s.extent(3 * M + 7, TB22 - 3 * M - 7).unwrap(),
            (true, 2 * M - 7)
        );
        assert_eq!(s.extent(5 * M, 100 * M).unwrap(), (false, 100 * M));
        assert_eq!(
            s.extent(5 * M, TB22 - 5 * M).unwrap(),
            (false, 20 * TABLE_SPAN - 5 * M)
        );
        assert_eq!(s.extent(20 * TABLE_SPAN, 4096).unwrap(), (true, 4096));
        // A hole over a whole chunk deallocates it; over part of one, zeroes it.
        s.punch_hole(3 * M, M + 512).unwrap();
        assert_eq!(s.extent(3 * M, 2 * M).unwrap(), (false, M));
        assert_eq!(s.extent(4 * M, 2 * M).unwrap(), (true, M));
        assert!(s.extent(TB22 - 1, 2).is_err());
    }

    #[test]
    fn capacities_up_to_the_limit_and_no_further() {
        let s = RamStore::new(RamStore::MAX_LEN).unwrap();
        assert_eq!(s.table_bytes(), 16 << 20);
        s.write_at(RamStore::MAX_LEN - 1, &[9]).unwrap();
        assert_eq!(read(&s, RamStore::MAX_LEN - 1, 1), [9]);
        drop(s);
        for len in [RamStore::MAX_LEN + 1, 1 << 60, u64::MAX] {
            let e = RamStore::new(len).err().unwrap();
            assert_eq!(e.kind(), io::ErrorKind::InvalidInput);
            assert!(e.to_string().contains(&len.to_string()), "{e}");
        }
        let s = RamStore::new(0).unwrap();
        assert!(s.is_empty());
        assert_eq!(s.table_bytes(), 0);
        s.read_at(0, &mut []).unwrap();
        s.write_at(0, &[]).unwrap();
        assert!(s.read_at(0, &mut [0]).is_err());
        assert!(s.write_at(0, &[0]).is_err());
    }

    #[test]
    fn round_trip_across_chunk_boundary() {
        let s = RamStore::new(4 << 20).unwrap();
        let data = pattern(3, 10_000);
        let offset = CHUNK as u64 - 5000;
        s.write_at(offset, &data).unwrap();
        assert_eq!(read(&s, offset, data.len()), data);
        assert_eq!(s.allocated(), 2 * CHUNK as u64);
        assert!(s.is_mapped(offset, 1));
        assert!(!s.is_mapped(3 * CHUNK as u64, 512));
    }

    #[test]
    fn an_appended_read_is_a_read() {
        let s = RamStore::new(4 << 20).unwrap();
        let data = pattern(5, 10_000);
        s.write_at(CHUNK as u64 - 5000, &data).unwrap();
        // Across a hole, two written chunks and a hole again, after what `out` held.
        let (offset, len) = (CHUNK as u64 - 9000, 2 * CHUNK + 100);
        let mut out = vec![7u8; 3];
        s.read_append(offset, len, &mut out).unwrap();
        assert_eq!(out[..3], [7, 7, 7]);
        assert_eq!(out[3..], read(&s, offset, len));
        assert!(s.read_append(4 << 20, 1, &mut out).is_err());
    }

    #[test]
    fn round_trip_across_table_boundary() {
        let s = RamStore::new(3 * TABLE_SPAN).unwrap();
        let top = 3 * size_of::<Region>() as u64;
        // 3 MiB + 2 straddling the first region boundary: 5 chunks in 2 tables.
        let data = pattern(4, 3 * CHUNK + 2);
        let offset = TABLE_SPAN - 2 * CHUNK as u64 - 1;
        s.write_at(offset, &data).unwrap();
        assert_eq!(read(&s, offset, data.len()), data);
        assert_eq!(s.allocated(), 5 * CHUNK as u64);
        assert_eq!(s.table_bytes(), top + 2 * size_of::<Table>() as u64);
        // A read straddling the second boundary, half in an absent region.
        let data = pattern(5, 4096);
        s.write_at(2 * TABLE_SPAN - 4096, &data).unwrap();
        let back = read(&s, 2 * TABLE_SPAN - 4096, 8192);
        assert_eq!(back[..4096], data[..]);
        assert!(back[4096..].iter().all(|&b| b == 0));
        assert_eq!(s.table_bytes(), top + 2 * size_of::<Table>() as u64);
        // Bytes just around the written range stay zero.
        assert_eq!(read(&s, offset - 1, 1), [0]);
        assert_eq!(read(&s, offset + 3 * CHUNK as u64 + 2, 1), [0]);
        assert!(!s.is_mapped(0, TABLE_SPAN - 3 * CHUNK as u64));
        assert!(s.is_mapped(TABLE_SPAN, 1));
        assert!(!s.is_mapped(2 * TABLE_SPAN, TABLE_SPAN));
    }

    #[test]
    fn out_of_range_is_an_error() {
        let s = RamStore::new(4096).unwrap();
        let mut buf = [0u8; 512];
        assert!(s.read_at(4096 - 511, &mut buf).is_err());
        assert!(s.write_at(u64::MAX - 10, &buf).is_err());
        assert!(s.write_at(3584, &buf).is_ok());
        assert!(s.punch_hole(4096, 1).is_err());
        assert!(s.punch_hole(1, u64::MAX).is_err());
        assert!(!s.is_mapped(4096, 1));
        assert!(!s.is_mapped(0, u64::MAX));

        let s = RamStore::new(TB22).unwrap();
        let e = s.read_at(TB22 - 511, &mut buf).err().unwrap();
        assert_eq!(e.kind(), io::ErrorKind::InvalidInput);
        assert!(s.write_at(TB22, &buf).is_err());
        assert!(s.write_at(u64::MAX - 10, &buf).is_err());
        assert!(s.read_at(u64::MAX, &mut buf).is_err());
        assert!(s.punch_hole(TB22 - 1, 2).is_err());
        assert!(s.punch_hole(u64::MAX, u64::MAX).is_err());
        assert_eq!(s.allocated(), 0);
        assert_eq!(s.table_bytes(), 1281 * 16);
    }

    #[test]
    fn punch_hole_zeroes_and_frees() {
        let s = RamStore::new(3 << 20).unwrap();
        s.write_at(0, &vec![7u8; 3 << 20]).unwrap();
        s.punch_hole(100, (2 << 20) - 100).unwrap();
        let buf = read(&s, 0, 3 << 20);
        assert!(buf[..100].iter().all(|&b| b == 7));
        assert!(buf[100..2 << 20].iter().all(|&b| b == 0));
        assert!(buf[2 << 20..].iter().all(|&b| b == 7));
        assert_eq!(s.allocated(), 2 * CHUNK as u64);
        assert!(!s.is_mapped(1 << 20, 1 << 20));
        s.punch_hole(0, 3 << 20).unwrap();
        assert_eq!(s.allocated(), 0);
        assert!(!s.is_mapped(0, 3 << 20));

        // A partial last chunk is freed by a hole from its start to the end of the store.
        let len = (3 << 20) + 4096;
        let s = RamStore::new(len).unwrap();
        s.write_at(len - 4096, &[5u8; 4096]).unwrap();
        s.punch_hole(len - 4096, 2048).unwrap();
        assert_eq!(s.allocated(), CHUNK as u64);
        assert_eq!(read(&s, len - 4096, 4096)[2047..2049], [0, 5]);
        s.punch_hole(3 << 20, 4096).unwrap();
        assert_eq!(s.allocated(), 0);
        assert!(!s.is_mapped(0, len));
    }

    #[test]
    fn punch_hole_across_table_boundary() {
        let s = RamStore::new(TB22).unwrap();
        let start = TABLE_SPAN - 2 * CHUNK as u64;
        s.write_at(start, &vec![3u8; 4 * CHUNK]).unwrap();
        // The last chunk is partial (22 TB is not a multiple of 1 MiB).
        assert_ne!(TB22 % CHUNK as u64, 0);
        s.write_at(TB22 - 4096, &[4u8; 4096]).unwrap();
        assert_eq!(s.allocated(), 5 * CHUNK as u64);
        // Frees the two middle chunks whole, zeroes part of the outer two.
        s.punch_hole(start + 10, 4 * CHUNK as u64 - 20).unwrap();
        assert_eq!(s.allocated(), 3 * CHUNK as u64);
        let back = read(&s, start, 4 * CHUNK);
        assert!(back[..10].iter().all(|&b| b == 3));
        assert!(back[10..4 * CHUNK - 10].iter().all(|&b| b == 0));
        assert!(back[4 * CHUNK - 10..].iter().all(|&b| b == 3));
        assert!(!s.is_mapped(start + CHUNK as u64, 2 * CHUNK as u64));
        // A hole over the whole 22 TB frees everything.
        s.punch_hole(0, TB22).unwrap();
        assert_eq!(s.allocated(), 0);
        assert!(!s.is_mapped(0, TB22));
        assert!(read(&s, TB22 - 4096, 4096).iter().all(|&b| b == 0));
        // Tables stay; chunk memory is what was given back.
        assert_eq!(s.table_bytes(), 1281 * 16 + 3 * size_of::<Table>() as u64);
    }

    #[test]
    fn growing_keeps_the_data_and_the_new_bytes_read_zero() {
        let old = 3 * TABLE_SPAN + 4096;
        let s = RamStore::new(old).unwrap();
        assert_eq!(s.table_bytes(), 4 * 16);
        let data = pattern(6, 8192);
        s.write_at(old - 8192, &data).unwrap();
        // Past the first segment's 4 regions: two more segments, of 4 and 8.
        let new = 9 * TABLE_SPAN;
        s.set_len(new).unwrap();
        assert_eq!(s.len(), new);
        // The write straddles regions 2 and 3: two second-level tables.
        assert_eq!(s.table_bytes(), 16 * 16 + 2 * size_of::<Table>() as u64);
        assert_eq!(read(&s, old - 8192, 8192), data);
        assert!(read(&s, old, 1 << 20).iter().all(|&b| b == 0));
        s.write_at(new - 4096, &data[..4096]).unwrap();
        assert_eq!(read(&s, new - 4096, 4096), data[..4096]);
        assert!(s.write_at(new, &[1]).is_err());
        // From nothing, and up to the limit.
        let s = RamStore::new(0).unwrap();
        s.set_len(RamStore::MAX_LEN).unwrap();
        s.write_at(RamStore::MAX_LEN - 1, &[9]).unwrap();
        assert_eq!(read(&s, RamStore::MAX_LEN - 1, 1), [9]);
        let e = s.set_len(RamStore::MAX_LEN + 1).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::InvalidInput);
        assert_eq!(s.len(), RamStore::MAX_LEN);
    }

    #[test]
    fn shrinking_frees_the_cut_bytes_and_growing_again_reads_zeros() {
        const M: u64 = CHUNK as u64;
        let s = RamStore::new(8 * M).unwrap();
        s.write_at(0, &vec![7u8; 8 * CHUNK]).unwrap();
        // Mid-chunk: the chunks past it are freed, the rest of its own zeroed.
        let cut = 2 * M + 4096;
        s.set_len(cut).unwrap();
        assert_eq!(s.len(), cut);
        assert_eq!(s.allocated(), 3 * M);
        assert!(s.read_at(cut, &mut [0]).is_err());
        assert!(s.write_at(cut - 1, &[1, 1]).is_err());
        assert!(read(&s, 0, cut as usize).iter().all(|&b| b == 7));
        s.set_len(8 * M).unwrap();
        let back = read(&s, 0, 8 * CHUNK);
        assert!(back[..cut as usize].iter().all(|&b| b == 7));
        assert!(back[cut as usize..].iter().all(|&b| b == 0));
        assert_eq!(s.allocated(), 3 * M);
        // To nothing.
        s.set_len(0).unwrap();
        assert_eq!(s.allocated(), 0);
        assert!(s.is_empty());
    }

    #[test]
    fn growing_under_writes_keeps_every_write() {
        let s = Arc::new(RamStore::new(3 * TABLE_SPAN).unwrap());
        // Each writer in a region of its own below the first end, across chunks.
        let writers: Vec<_> = (0..3u64)
            .map(|t| {
                let s = s.clone();
                std::thread::spawn(move || {
                    for i in 0..64 {
                        let at = t * TABLE_SPAN + i * (CHUNK as u64 + 4096);
                        s.write_at(at, &pattern(t * 64 + i, 4096)).unwrap();
                    }
                })
            })
            .collect();
        // Meanwhile, through seven more segments, each grown end written at once.
        for k in 1..=7 {
            let len = (3 << k) * TABLE_SPAN;
            s.set_len(len).unwrap();
            s.write_at(len - 4096, &pattern(k, 4096)).unwrap();
        }
        for w in writers {
            w.join().unwrap();
        }
        for t in 0..3u64 {
            for i in 0..64 {
                let at = t * TABLE_SPAN + i * (CHUNK as u64 + 4096);
                assert_eq!(read(&s, at, 4096), pattern(t * 64 + i, 4096));
            }
        }
        for k in 1..=7u64 {
            let len = (3 << k) * TABLE_SPAN;
            assert_eq!(read(&s, len - 4096, 4096), pattern(k, 4096));
        }
        assert_eq!(s.table_bytes() % size_of::<Table>() as u64, 3 * 128 * 16);
    }

    #[test]
    fn concurrent_writers_and_readers() {
        const THREADS: u64 = 8;
        const BLOCK: usize = 4096;
        const BLOCKS: u64 = 1024; // per thread
        let s = Arc::new(RamStore::new(TB22).unwrap());
        // Interleaved 4 KiB blocks in a 32 MiB band straddling a region boundary, so threads
        // share chunks, race to create the same chunks and the same second-level table.
        const BASE: u64 = TABLE_SPAN - (16 << 20);
        let offset = |t: u64, i: u64| BASE + (i * THREADS + t) * BLOCK as u64;
        let writers: Vec<_> = (0..THREADS)
            .map(|t| {
                let s = s.clone();
                std::thread::spawn(move || {
                    for i in 0..BLOCKS {
                        s.write_at(offset(t, i), &pattern(t * BLOCKS + i, BLOCK))
                            .unwrap();
                    }
                })
            })
            .collect();
        // A reader during the writes sees each block either unwritten or whole.
        let reader = {
            let s = s.clone();
            std::thread::spawn(move || {
                for round in 0..4 {
                    for i in (round..BLOCKS).step_by(7) {
                        let t = i % THREADS;
                        let back = read(&s, offset(t, i), BLOCK);
                        assert!(
                            back.iter().all(|&b| b == 0) || back == pattern(t * BLOCKS + i, BLOCK)
                        );
                    }
                }
            })
        };
        for w in writers {
            w.join().unwrap();
        }
        reader.join().unwrap();
        for t in 0..THREADS {
            for i in 0..BLOCKS {
                assert_eq!(
                    read(&s, offset(t, i), BLOCK),
                    pattern(t * BLOCKS + i, BLOCK)
                );
            }
        }
        let band = THREADS * BLOCKS * BLOCK as u64;
        assert_eq!(band, 32 << 20);
        assert_eq!(s.allocated(), band);
        assert_eq!(s.table_bytes(), 1281 * 16 + 2 * size_of::<Table>() as u64);
    }
}
