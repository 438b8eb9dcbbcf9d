//! Header and data digests: CRC32C (RFC 7143 §12.1, §13.1), sent least significant byte
//! first as in RFC 7143 appendix B.4's examples.

/// CRC32C of `bytes`.
pub fn crc32c(bytes: &[u8]) -> u32 {
    crc32c::crc32c(bytes)
}

/// CRC32C over several pieces as if they were one buffer (data segment plus its padding).
pub fn crc32c_pieces(pieces: &[&[u8]]) -> u32 {
    pieces
        .iter()
        .fold(0, |crc, p| crc32c::crc32c_append(crc, p))
}

/// The digest's wire bytes.
pub fn to_wire(crc: u32) -> [u8; 4] {
    crc.to_le_bytes()
}

/// Read a digest from its wire bytes; `None` when fewer than four bytes are given.
pub fn from_wire(bytes: &[u8]) -> Option<u32> {
    Some(u32::from_le_bytes(bytes.get(..4)?.try_into().ok()?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rfc_7143_appendix_b4_vectors() {
        assert_eq!(to_wire(crc32c(&[0u8; 32])), [0xaa, 0x36, 0x91, 0x8a]);
        assert_eq!(to_wire(crc32c(&[0xffu8; 32])), [0x43, 0xab, 0xa8, 0x62]);
        let inc: Vec<u8> = (0u8..32).collect();
        assert_eq!(to_wire(crc32c(&inc)), [0x4e, 0x79, 0xdd, 0x46]);
    }

    #[test]
    fn pieces_equal_whole() {
        let all: Vec<u8> = (0u8..=200).collect();
        assert_eq!(crc32c_pieces(&[&all[..77], &all[77..]]), crc32c(&all));
        assert_eq!(from_wire(&to_wire(0xdead_beef)), Some(0xdead_beef));
        assert_eq!(from_wire(&[1, 2, 3]), None);
    }
}
