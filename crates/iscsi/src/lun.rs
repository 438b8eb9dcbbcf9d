//! LUN field of the BHS (RFC 7143 §11.2.1.6): the SAM-5 §4.7 eight-byte format as a `u64`,
//! through the same codec REPORT LUNS uses.

use scsi::report_luns::{decode_lun, encode_lun};

/// The logical unit number for the device: single-level peripheral (00b) and flat space
/// (01b) addressing map to the 14-bit number (SAM-5 §4.7.7, §4.7.10). Any other field maps to
/// a number no logical unit has, so the device answers LOGICAL UNIT NOT SUPPORTED.
pub fn decode(raw: u64) -> u64 {
    decode_lun(raw.to_be_bytes())
}

/// Encode a LUN: peripheral addressing below 256, flat space addressing above
/// (as REPORT LUNS does, SAM-5 §4.7).
pub fn encode(lun: u64) -> u64 {
    u64::from_be_bytes(encode_lun(lun))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips() {
        for lun in [0, 1, 255, 256, 0x3FFF] {
            assert_eq!(decode(encode(lun)), lun);
        }
        assert_eq!(encode(1), 0x0001_0000_0000_0000);
        assert_eq!(encode(300), 0x412C_0000_0000_0000);
    }

    /// Other addressing methods and second levels never read as a LUN that exists (a BHS LUN
    /// of 00 00 .. 01 was taken as LUN 1).
    #[test]
    fn other_fields_reach_no_logical_unit() {
        for raw in [
            0xC000_0000_0000_0001,
            0x0001_0001_0000_0000,
            0x0000_0000_0000_0001,
        ] {
            assert!(decode(raw) >= 1 << 63, "{raw:#x}");
        }
    }
}
