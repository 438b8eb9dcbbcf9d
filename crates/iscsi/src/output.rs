//! Outgoing PDUs of one batch, laid out for a single vectored write: headers (and small
//! data segments, padding, digests) in one reused byte buffer, Data-In payloads as ranges of
//! pooled data buffers — no copy of read data into the header buffer.

use std::io::IoSlice;
use std::ops::Range;

use crate::bhs::{padding, Bhs};
use crate::digest;

/// Most iovecs passed to one `writev` (Linux IOV_MAX).
pub const MAX_IOVECS: usize = 1024;

/// Batch size after which the connection stops handling PDUs until the batch is written.
pub const SOFT_LIMIT: usize = 8 << 20;

#[derive(Clone, Debug, PartialEq, Eq)]
enum Chunk {
    Headers(Range<usize>),
    Buffer(usize, Range<usize>),
}

/// Free data buffers, reused across commands (no per-command allocation: docs/architecture.md).
#[derive(Debug, Default)]
pub struct BufferPool {
    free: Vec<Vec<u8>>,
    /// Capacity of the buffers in `free`, bytes.
    kept: usize,
}

impl BufferPool {
    /// Buffers kept for reuse; more are dropped.
    const KEEP: usize = 256;
    /// Buffers grown beyond this are not kept (a rare huge transfer must not pin memory).
    const KEEP_CAPACITY: usize = 4 << 20;
    /// Most bytes a connection keeps in free buffers (issue 11: 128 freed 4 MiB buffers per
    /// connection held 1 GB). 16 MiB holds a QD32 of 512 KiB transfers.
    const KEEP_BYTES: usize = 16 << 20;

    pub fn get(&mut self) -> Vec<u8> {
        let buf = self.free.pop().unwrap_or_default();
        self.kept -= buf.capacity();
        buf
    }

    /// Frees every kept buffer: a connection that has gone idle holds no memory for data.
    pub fn release(&mut self) {
        self.free = Vec::new();
        self.kept = 0;
    }

    pub fn put(&mut self, mut buf: Vec<u8>) {
        let capacity = buf.capacity();
        if capacity > 0
            && self.free.len() < Self::KEEP
            && capacity <= Self::KEEP_CAPACITY
            && self.kept + capacity <= Self::KEEP_BYTES
        {
            buf.clear();
            self.kept += capacity;
            self.free.push(buf);
        }
    }
}

/// One batch of outgoing PDUs.
#[derive(Debug, Default)]
pub struct Output {
    headers: Vec<u8>,
    chunks: Vec<Chunk>,
    buffers: Vec<Vec<u8>>,
    /// Bytes of `buffers` referenced by chunks.
    buffer_bytes: usize,
    header_digest: bool,
    data_digest: bool,
    /// Close the connection once this batch is written.
    pub close: bool,
}

impl Output {
    pub fn new() -> Output {
        Output::default()
    }

    /// Digests negotiated for full feature phase PDUs.
    pub fn set_digests(&mut self, header: bool, data: bool) {
        self.header_digest = header;
        self.data_digest = data;
    }

    pub fn is_empty(&self) -> bool {
        self.chunks.is_empty()
    }

    /// Total bytes in the batch.
    pub fn len(&self) -> usize {
        self.headers.len() + self.buffer_bytes
    }

    /// True when the batch holds enough to be written before more PDUs are handled
    /// (bounds the memory a burst of large reads can pin).
    pub fn is_full(&self) -> bool {
        self.len() >= SOFT_LIMIT
    }

    fn mark_headers(&mut self, start: usize) {
        let end = self.headers.len();
        if start == end {
            return;
        }
        // Header bytes written back to back form one iovec.
        if let Some(Chunk::Headers(r)) = self.chunks.last_mut() {
            if r.end == start {
                r.end = end;
                return;
            }
        }
        self.chunks.push(Chunk::Headers(start..end));
    }

    fn push_bhs(&mut self, bhs: &Bhs, data_len: usize) {
        let mut bhs = *bhs;
        bhs.set_data_segment_len(data_len);
        self.headers.extend_from_slice(&bhs.0);
        if self.header_digest {
            self.headers
                .extend_from_slice(&digest::to_wire(digest::crc32c(&bhs.0)));
        }
    }

    /// A PDU whose (small) data segment is copied into the header buffer.
    pub fn pdu(&mut self, bhs: &Bhs, data: &[u8]) {
        let start = self.headers.len();
        crate::pdu::write_pdu(
            &mut self.headers,
            bhs,
            data,
            self.header_digest,
            self.data_digest,
        );
        self.mark_headers(start);
    }

    /// Take ownership of a data buffer for this batch; returns its index for [`Self::pdu_from_buffer`].
    pub fn add_buffer(&mut self, buf: Vec<u8>) -> usize {
        self.buffers.push(buf);
        self.buffers.len() - 1
    }

    /// A PDU whose data segment is `range` of buffer `index` (sent without copying).
    pub fn pdu_from_buffer(&mut self, bhs: &Bhs, index: usize, range: Range<usize>) {
        let Some(data) = self.buffers.get(index).and_then(|b| b.get(range.clone())) else {
            return;
        };
        let len = data.len();
        let pad = padding(len);
        let crc = self
            .data_digest
            .then(|| digest::crc32c_pieces(&[data, &[0u8; 3][..pad]]));
        let start = self.headers.len();
        self.push_bhs(bhs, len);
        self.mark_headers(start);
        if len > 0 {
            self.buffer_bytes += range.len();
            self.chunks.push(Chunk::Buffer(index, range));
            let start = self.headers.len();
            self.headers.extend_from_slice(&[0u8; 3][..pad]);
            if let Some(crc) = crc {
                self.headers.extend_from_slice(&digest::to_wire(crc));
            }
            self.mark_headers(start);
        }
    }

    /// IoSlices for the bytes after the first `skip`, at most [`MAX_IOVECS`] of them.
    pub fn io_slices(&self, mut skip: usize) -> Vec<IoSlice<'_>> {
        let mut v = Vec::with_capacity(self.chunks.len().min(MAX_IOVECS));
        for c in &self.chunks {
            let bytes: &[u8] = match c {
                Chunk::Headers(r) => self.headers.get(r.clone()).unwrap_or(&[]),
                Chunk::Buffer(i, r) => self
                    .buffers
                    .get(*i)
                    .and_then(|b| b.get(r.clone()))
                    .unwrap_or(&[]),
            };
            if skip >= bytes.len() {
                skip -= bytes.len();
                continue;
            }
            v.push(IoSlice::new(&bytes[skip..]));
            skip = 0;
            if v.len() == MAX_IOVECS {
                break;
            }
        }
        v
    }

    /// The whole batch as one byte vector (tests and the initiator's slow path).
    pub fn to_bytes(&self) -> Vec<u8> {
        self.io_slices(0)
            .iter()
            .flat_map(|s| s.iter().copied())
            .collect()
    }

    /// Empty the batch after it was written, returning data buffers to `pool`.
    pub fn clear(&mut self, pool: &mut BufferPool) {
        self.headers.clear();
        self.chunks.clear();
        self.buffer_bytes = 0;
        for b in self.buffers.drain(..) {
            pool.put(b);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_pool_keeps_a_bounded_number_of_bytes() {
        let mut pool = BufferPool::default();
        for _ in 0..128 {
            pool.put(Vec::with_capacity(4 << 20));
        }
        assert_eq!(pool.kept, BufferPool::KEEP_BYTES);
        assert_eq!(pool.free.len(), 4);
        let buf = pool.get();
        assert_eq!(pool.kept, BufferPool::KEEP_BYTES - buf.capacity());
        // Small buffers fill the rest, up to the count.
        for _ in 0..1000 {
            pool.put(Vec::with_capacity(4096));
        }
        assert_eq!(pool.free.len(), BufferPool::KEEP);
        assert!(pool.kept <= BufferPool::KEEP_BYTES);
        pool.release();
        assert_eq!((pool.kept, pool.free.capacity()), (0, 0));
        assert_eq!(pool.get().capacity(), 0);
    }
    use crate::bhs::Opcode;
    use crate::pdu::{frame, FrameLimits};

    #[test]
    fn buffer_pdus_frame_like_copied_ones() {
        for digests in [false, true] {
            let mut out = Output::new();
            out.set_digests(digests, digests);
            let idx = out.add_buffer((0u8..10).collect());
            let b = Bhs::new(Opcode::DataIn);
            out.pdu_from_buffer(&b, idx, 0..5);
            out.pdu_from_buffer(&b, idx, 5..10);
            out.pdu(&b, b"xyz");
            let bytes = out.to_bytes();
            assert_eq!(bytes.len(), out.len());
            let limits = FrameLimits {
                header_digest: digests,
                data_digest: digests,
                max_data_segment_length: 64,
            };
            let mut pos = 0;
            let mut datas = Vec::new();
            while pos < bytes.len() {
                let f = frame(&bytes[pos..], &limits).unwrap().unwrap();
                assert!(f.data_digest_ok);
                datas.push(bytes[pos + f.data.start..pos + f.data.end].to_vec());
                pos += f.len;
            }
            assert_eq!(
                datas,
                vec![vec![0, 1, 2, 3, 4], vec![5, 6, 7, 8, 9], b"xyz".to_vec()]
            );
        }
    }

    #[test]
    fn io_slices_skip_written_bytes() {
        let mut out = Output::new();
        let idx = out.add_buffer(vec![7u8; 100]);
        out.pdu_from_buffer(&Bhs::new(Opcode::DataIn), idx, 0..100);
        let all = out.to_bytes();
        for skip in [0, 1, 47, 48, 49, 147, 148] {
            let rest: Vec<u8> = out
                .io_slices(skip)
                .iter()
                .flat_map(|s| s.iter().copied())
                .collect();
            assert_eq!(rest, all[skip..]);
        }
        let mut pool = BufferPool::default();
        out.clear(&mut pool);
        assert!(out.is_empty());
        assert_eq!(pool.get().capacity(), 100);
    }
}
