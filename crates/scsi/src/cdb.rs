//! Big-endian field access on CDBs and parameter data that never panics: a missing byte reads
//! as zero (callers check lengths first; this keeps a bad length from becoming a panic).

pub(crate) fn u8_at(b: &[u8], i: usize) -> u8 {
    b.get(i).copied().unwrap_or(0)
}

/// The `N` bytes at `i`, when all are there (one load instead of `N` checked ones).
fn chunk<const N: usize>(b: &[u8], i: usize) -> Option<[u8; N]> {
    b.get(i..)?.first_chunk::<N>().copied()
}

pub(crate) fn be16(b: &[u8], i: usize) -> u16 {
    match chunk(b, i) {
        Some(a) => u16::from_be_bytes(a),
        None => u16::from_be_bytes([u8_at(b, i), u8_at(b, i + 1)]),
    }
}

pub(crate) fn be24(b: &[u8], i: usize) -> u32 {
    u32::from_be_bytes([0, u8_at(b, i), u8_at(b, i + 1), u8_at(b, i + 2)])
}

pub(crate) fn be32(b: &[u8], i: usize) -> u32 {
    match chunk(b, i) {
        Some(a) => u32::from_be_bytes(a),
        None => u32::from_be_bytes([
            u8_at(b, i),
            u8_at(b, i + 1),
            u8_at(b, i + 2),
            u8_at(b, i + 3),
        ]),
    }
}

pub(crate) fn be64(b: &[u8], i: usize) -> u64 {
    match chunk(b, i) {
        Some(a) => u64::from_be_bytes(a),
        None => (u64::from(be32(b, i)) << 32) | u64::from(be32(b, i + 4)),
    }
}

pub(crate) fn bit(b: &[u8], i: usize, n: u8) -> bool {
    u8_at(b, i) & (1 << n) != 0
}

/// The writers the encoders use. They write into the form's whole CDB, so a field is always
/// inside it; a field past the end is dropped rather than a panic.
fn put<const N: usize>(b: &mut [u8], i: usize, v: [u8; N]) {
    if let Some(at) = b.get_mut(i..i + N) {
        at.copy_from_slice(&v);
    }
}

/// ORs `v` into byte `i`: a byte may hold several fields (and byte 1 the service action).
pub(crate) fn or8(b: &mut [u8], i: usize, v: u8) {
    if let Some(at) = b.get_mut(i) {
        *at |= v;
    }
}

pub(crate) fn put16(b: &mut [u8], i: usize, v: u16) {
    put(b, i, v.to_be_bytes());
}

pub(crate) fn put32(b: &mut [u8], i: usize, v: u32) {
    put(b, i, v.to_be_bytes());
}

pub(crate) fn put64(b: &mut [u8], i: usize, v: u64) {
    put(b, i, v.to_be_bytes());
}

/// Sets bit `n` of byte `i` when `on` (the CDB starts zeroed).
pub(crate) fn set_bit(b: &mut [u8], i: usize, n: u8, on: bool) {
    or8(b, i, u8::from(on) << n);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_read_whole_or_with_missing_bytes_as_zero() {
        let b = [1, 2, 3, 4, 5, 6, 7, 8, 9];
        assert_eq!(be16(&b, 1), 0x0203);
        assert_eq!(be32(&b, 5), 0x0607_0809);
        assert_eq!(be64(&b, 1), 0x0203_0405_0607_0809);
        // Past the end: the missing bytes are zeros.
        assert_eq!(be16(&b, 8), 0x0900);
        assert_eq!(be32(&b, 7), 0x0809_0000);
        assert_eq!(be64(&b, 2), 0x0304_0506_0708_0900);
        assert_eq!(be64(&b, 20), 0);
    }
}
