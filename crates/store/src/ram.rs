//! A sparse in-memory store: memory is committed per chunk on first write, so a large LUN costs
//! nothing until it is written.

use crate::{check_range, Store};
use parking_lot::RwLock;
use std::io;

/// Bytes per chunk: big enough that a typical I/O touches one or two chunk locks, small enough
/// that concurrent writers to different regions rarely meet.
const CHUNK: usize = 1 << 20;

/// A RAM store of fixed length; unwritten chunks read as zeroes.
pub struct RamStore {
    len: u64,
    chunks: Vec<RwLock<Option<Box<[u8]>>>>,
}

impl RamStore {
    /// A store of `len` bytes. Only the chunk table (one lock per MiB) is allocated now.
    pub fn new(len: u64) -> Self {
        let count = len.div_ceil(CHUNK as u64);
        let chunks = (0..count).map(|_| RwLock::new(None)).collect();
        RamStore { len, chunks }
    }

    /// Bytes of memory committed to written chunks.
    pub fn allocated(&self) -> u64 {
        self.chunks.iter().filter(|c| c.read().is_some()).count() as u64 * CHUNK as u64
    }

    /// Split `[offset, offset + len)` into (chunk index, offset in chunk, length) pieces.
    fn pieces(offset: u64, len: usize) -> impl Iterator<Item = (usize, usize, usize)> {
        let mut pos = offset;
        let end = offset + len as u64;
        std::iter::from_fn(move || {
            if pos >= end {
                return None;
            }
            let index = (pos / CHUNK as u64) as usize;
            let within = (pos % CHUNK as u64) as usize;
            let n = ((end - pos) as usize).min(CHUNK - within);
            pos += n as u64;
            Some((index, within, n))
        })
    }
}

impl Store for RamStore {
    fn len(&self) -> u64 {
        self.len
    }

    fn read_at(&self, offset: u64, buf: &mut [u8]) -> io::Result<()> {
        check_range(self.len, offset, buf.len())?;
        let mut done = 0;
        for (index, within, n) in Self::pieces(offset, buf.len()) {
            let dst = &mut buf[done..done + n];
            match self.chunks.get(index).map(|c| c.read()) {
                Some(guard) => match guard.as_deref() {
                    Some(chunk) => dst.copy_from_slice(&chunk[within..within + n]),
                    None => dst.fill(0),
                },
                None => dst.fill(0),
            }
            done += n;
        }
        Ok(())
    }

    fn write_at(&self, offset: u64, buf: &[u8]) -> io::Result<()> {
        check_range(self.len, offset, buf.len())?;
        let mut done = 0;
        for (index, within, n) in Self::pieces(offset, buf.len()) {
            let Some(lock) = self.chunks.get(index) else {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidInput,
                    "chunk index out of range",
                ));
            };
            let mut guard = lock.write();
            let chunk = guard.get_or_insert_with(|| vec![0u8; CHUNK].into_boxed_slice());
            chunk[within..within + n].copy_from_slice(&buf[done..done + n]);
            done += n;
        }
        Ok(())
    }

    fn flush(&self) -> io::Result<()> {
        Ok(())
    }

    fn punch_hole(&self, offset: u64, len: u64) -> io::Result<()> {
        let len = usize::try_from(len)
            .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "hole too large"))?;
        check_range(self.len, offset, len)?;
        for (index, within, n) in Self::pieces(offset, len) {
            if let Some(lock) = self.chunks.get(index) {
                let mut guard = lock.write();
                if within == 0 && n == CHUNK {
                    *guard = None;
                } else if let Some(chunk) = guard.as_deref_mut() {
                    chunk[within..within + n].fill(0);
                }
            }
        }
        Ok(())
    }

    fn is_mapped(&self, offset: u64, len: u64) -> bool {
        let Ok(len) = usize::try_from(len) else {
            return true;
        };
        if check_range(self.len, offset, len).is_err() {
            return false;
        }
        Self::pieces(offset, len)
            .any(|(index, _, _)| self.chunks.get(index).is_some_and(|c| c.read().is_some()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn large_store_commits_nothing_up_front() {
        let s = RamStore::new(1 << 30);
        assert_eq!(s.allocated(), 0);
        let mut buf = [0xAAu8; 512];
        s.read_at((1 << 30) - 512, &mut buf).unwrap();
        assert!(buf.iter().all(|&b| b == 0));
        assert_eq!(s.allocated(), 0);
    }

    #[test]
    fn round_trip_across_chunk_boundary() {
        let s = RamStore::new(4 << 20);
        let data: Vec<u8> = (0..10_000u32).map(|i| (i % 251) as u8).collect();
        let offset = CHUNK as u64 - 5000;
        s.write_at(offset, &data).unwrap();
        let mut back = vec![0u8; data.len()];
        s.read_at(offset, &mut back).unwrap();
        assert_eq!(back, data);
        assert_eq!(s.allocated(), 2 * CHUNK as u64);
        assert!(s.is_mapped(offset, 1));
        assert!(!s.is_mapped(3 * CHUNK as u64, 512));
    }

    #[test]
    fn out_of_range_is_an_error() {
        let s = RamStore::new(4096);
        let mut buf = [0u8; 512];
        assert!(s.read_at(4096 - 511, &mut buf).is_err());
        assert!(s.write_at(u64::MAX - 10, &buf).is_err());
        assert!(s.write_at(3584, &buf).is_ok());
    }

    #[test]
    fn punch_hole_zeroes_and_frees() {
        let s = RamStore::new(3 << 20);
        s.write_at(0, &vec![7u8; 3 << 20]).unwrap();
        s.punch_hole(100, (2 << 20) - 100).unwrap();
        let mut buf = vec![1u8; 3 << 20];
        s.read_at(0, &mut buf).unwrap();
        assert!(buf[..100].iter().all(|&b| b == 7));
        assert!(buf[100..2 << 20].iter().all(|&b| b == 0));
        assert!(buf[2 << 20..].iter().all(|&b| b == 7));
        assert_eq!(s.allocated(), 2 * CHUNK as u64);
    }
}
