//! The stamp of a verified block: MAGIC, its LBA, the generation of the write that put it
//! there, a CRC32C of the rest, then bytes drawn from LBA and generation. A block from another
//! place, another write or a torn write cannot pass for the one expected. Shared by `bench
//! --verify` and the crash test (crates/cli/tests/crash), which includes this file by path.

const MAGIC: &[u8; 8] = b"stintVfy";
/// MAGIC, LBA, generation, CRC32C of the rest: the smallest block that can carry a stamp.
pub const HEADER: usize = 28;

/// What a block holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Found {
    /// No stamp (never written by a stamping writer).
    Unstamped,
    /// A stamp whose checksum matches: the whole block of that write.
    Whole { lba: u64, generation: u64 },
    /// A stamp whose checksum does not match: torn or corrupt.
    Torn { lba: u64, generation: u64 },
}

/// Payload bytes of a block: a xorshift stream seeded by LBA and generation.
fn payload(lba: u64, generation: u64, out: &mut [u8]) {
    let mut x = (lba ^ generation.rotate_left(32)).wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    for chunk in out.chunks_mut(8) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let bytes = x.to_le_bytes();
        chunk.copy_from_slice(&bytes[..chunk.len()]);
    }
}

fn checksum(block: &[u8]) -> u32 {
    crc32c::crc32c_append(crc32c::crc32c(&block[8..24]), &block[HEADER..])
}

/// Fills `block` (at least [`HEADER`] bytes) with the stamp of `generation` at `lba`.
pub fn stamp(block: &mut [u8], lba: u64, generation: u64) {
    block[..8].copy_from_slice(MAGIC);
    block[8..16].copy_from_slice(&lba.to_le_bytes());
    block[16..24].copy_from_slice(&generation.to_le_bytes());
    payload(lba, generation, &mut block[HEADER..]);
    let crc = checksum(block);
    block[24..28].copy_from_slice(&crc.to_le_bytes());
}

/// Reads the stamp of `block`.
pub fn read(block: &[u8]) -> Found {
    let (Some(magic), Some(lba), Some(generation), Some(crc)) = (
        block.get(..8),
        block.get(8..16).and_then(|b| b.try_into().ok()),
        block.get(16..24).and_then(|b| b.try_into().ok()),
        block.get(24..28).and_then(|b| b.try_into().ok()),
    ) else {
        return Found::Unstamped;
    };
    if magic != MAGIC {
        return Found::Unstamped;
    }
    let (lba, generation) = (u64::from_le_bytes(lba), u64::from_le_bytes(generation));
    if u32::from_le_bytes(crc) == checksum(block) {
        Found::Whole { lba, generation }
    } else {
        Found::Torn { lba, generation }
    }
}
