//! LUN field of the BHS (RFC 7143 §11.2.1.6) in the SAM-5 §4.7 eight-byte format.

/// The logical unit number for the device: single-level peripheral (00b) and flat space
/// (01b) addressing map to the 14-bit number (SAM-5 §4.7.7, §4.7.10). Other addressing
/// methods are passed through unchanged (they have a method bit set, so they never
/// collide with a small LUN and the device answers LOGICAL UNIT NOT SUPPORTED).
pub fn decode(raw: u64) -> u64 {
    let b = raw.to_be_bytes();
    let rest_zero = b[2..].iter().all(|&x| x == 0);
    match b[0] >> 6 {
        0b00 | 0b01 if rest_zero => (u64::from(b[0] & 0x3F) << 8) | u64::from(b[1]),
        _ => raw,
    }
}

/// Encode a LUN: peripheral addressing below 256, flat space addressing above
/// (as REPORT LUNS does, SAM-5 §4.7).
pub fn encode(lun: u64) -> u64 {
    if lun < 256 {
        lun << 48
    } else if lun < 0x4000 {
        (0x4000 | lun) << 48
    } else {
        lun
    }
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

    #[test]
    fn other_methods_pass_through() {
        let extended = 0xC000_0000_0000_0001;
        assert_eq!(decode(extended), extended);
        // Second-level addressing is not a flat LUN either.
        assert_eq!(decode(0x0001_0001_0000_0000), 0x0001_0001_0000_0000);
    }
}
