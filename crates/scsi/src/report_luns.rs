//! REPORT LUNS parameter data (SPC-5 §6.33, table 263) and LUN encoding (SAM-5 §4.7).

/// The 8-byte LUN field for `lun` (SAM-5 table 11/12): peripheral device addressing below 256,
/// flat space addressing (01b) up to 16383.
pub fn encode_lun(lun: u64) -> [u8; 8] {
    let mut b = [0u8; 8];
    if lun < 256 {
        b[1] = lun as u8;
    } else if lun < 0x4000 {
        b[0] = 0x40 | (lun >> 8) as u8;
        b[1] = lun as u8;
    } else {
        b = lun.to_be_bytes();
    }
    b
}

/// Decode an 8-byte LUN field as [`encode_lun`] writes it (single level, peripheral or flat
/// addressing, SAM-5 §4.7). Any other field (another format, or a second level) maps to a
/// number with bit 63 set, which no logical unit has, so it can never alias one that exists.
pub fn decode_lun(b: [u8; 8]) -> u64 {
    match b[0] >> 6 {
        0 if b[0] == 0 && b[2..] == [0; 6] => u64::from(b[1]),
        1 if b[2..] == [0; 6] => u64::from(b[0] & 0x3F) << 8 | u64::from(b[1]),
        _ => u64::from_be_bytes(b) | 1 << 63,
    }
}

/// REPORT LUNS parameter data: LUN LIST LENGTH, reserved, one 8-byte entry per LUN.
pub fn report_luns(luns: impl Iterator<Item = u64>, out: &mut Vec<u8>) {
    let start = out.len();
    out.extend_from_slice(&[0; 8]);
    for lun in luns {
        out.extend_from_slice(&encode_lun(lun));
    }
    let len = u32::try_from(out.len() - start - 8).unwrap_or(u32::MAX);
    out[start..start + 4].copy_from_slice(&len.to_be_bytes());
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A field of another format never reads as a LUN that exists (found by the connection
    /// fuzz target: 00 00 .. 01, a second-level LUN, read as LUN 1).
    #[test]
    fn other_formats_never_alias_a_lun() {
        for b in [
            [0, 0, 0, 0, 0, 0, 0, 1],
            [0, 1, 0, 0, 0, 0, 0, 1],
            [0x40, 5, 0, 1, 0, 0, 0, 0],
            [0x80, 0, 0, 0, 0, 0, 0, 1],
        ] {
            assert!(decode_lun(b) >= 1 << 63, "{b:02x?}");
        }
        assert_eq!(decode_lun([0, 1, 0, 0, 0, 0, 0, 0]), 1);
    }

    #[test]
    fn lun_round_trip() {
        for lun in [0, 1, 255, 256, 0x3FFF] {
            assert_eq!(decode_lun(encode_lun(lun)), lun);
        }
        assert_eq!(encode_lun(300), [0x41, 0x2C, 0, 0, 0, 0, 0, 0]);
    }

    #[test]
    fn list_length() {
        let mut out = vec![];
        report_luns([0, 1, 2].into_iter(), &mut out);
        assert_eq!(out.len(), 8 + 24);
        assert_eq!(&out[0..4], &24u32.to_be_bytes());
        assert_eq!(out[8 + 8 + 1], 1);
    }
}
