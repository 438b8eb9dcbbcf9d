//! Buffers for O_DIRECT, whose memory must start at an aligned address: the device's buffers
//! are plain `Vec<u8>`s, so direct I/O goes through one of these (a bounce buffer) and is
//! copied once more. No `unsafe`: a `Vec` with room to spare, used from its first aligned
//! byte on (moving the `Vec` does not move its heap bytes).

/// The alignment of every buffer: a page, which satisfies any file system's O_DIRECT rule.
pub(crate) const ALIGN: usize = 4096;

#[derive(Default)]
pub(crate) struct Aligned {
    raw: Vec<u8>,
    start: usize,
}

impl Aligned {
    /// The first `len` bytes, at an aligned address; reallocated when too small (their
    /// contents are then zeros, else whatever was there).
    pub(crate) fn get(&mut self, len: usize) -> &mut [u8] {
        if self.raw.len() - self.start < len {
            self.raw = vec![0; len + ALIGN];
            let address = self.raw.as_ptr() as usize;
            self.start = address.next_multiple_of(ALIGN) - address;
        }
        &mut self.raw[self.start..self.start + len]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buffers_start_aligned_and_grow() {
        let mut a = Aligned::default();
        assert!(a.get(0).is_empty());
        for len in [1, 512, 4096, 100_000, 10] {
            let buf = a.get(len);
            assert_eq!(buf.len(), len);
            assert_eq!(buf.as_ptr() as usize % ALIGN, 0);
        }
        let moved = a;
        let mut again = moved;
        assert_eq!(again.get(10).as_ptr() as usize % ALIGN, 0);
    }
}
