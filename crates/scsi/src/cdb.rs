//! Big-endian field access on CDBs and parameter data that never panics: a missing byte reads
//! as zero (callers check lengths first; this keeps a bad length from becoming a panic).

pub(crate) fn u8_at(b: &[u8], i: usize) -> u8 {
    b.get(i).copied().unwrap_or(0)
}

pub(crate) fn be16(b: &[u8], i: usize) -> u16 {
    u16::from_be_bytes([u8_at(b, i), u8_at(b, i + 1)])
}

pub(crate) fn be24(b: &[u8], i: usize) -> u32 {
    u32::from_be_bytes([0, u8_at(b, i), u8_at(b, i + 1), u8_at(b, i + 2)])
}

pub(crate) fn be32(b: &[u8], i: usize) -> u32 {
    u32::from_be_bytes([
        u8_at(b, i),
        u8_at(b, i + 1),
        u8_at(b, i + 2),
        u8_at(b, i + 3),
    ])
}

pub(crate) fn be64(b: &[u8], i: usize) -> u64 {
    (u64::from(be32(b, i)) << 32) | u64::from(be32(b, i + 4))
}

pub(crate) fn bit(b: &[u8], i: usize, n: u8) -> bool {
    u8_at(b, i) & (1 << n) != 0
}
