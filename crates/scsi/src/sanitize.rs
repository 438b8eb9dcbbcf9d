//! SANITIZE (SBC-4 §5.30) and FORMAT UNIT (SBC-4 §5.4) parameter data.

use crate::cdb::{be16, be32, bit, u8_at};
use crate::sense::Sense;

/// SANITIZE service actions (SBC-4 table 103).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SanitizeAction {
    /// 01h: write a pattern to every block.
    Overwrite,
    /// 02h: erase every block (here: deallocate).
    BlockErase,
    /// 03h: change the media encryption key (here: deallocate, so nothing old reads back).
    CryptographicErase,
    /// 1Fh: leave sanitize failure mode without sanitizing.
    ExitFailureMode,
}

impl SanitizeAction {
    pub fn of(service_action: u8) -> Option<Self> {
        match service_action {
            0x01 => Some(Self::Overwrite),
            0x02 => Some(Self::BlockErase),
            0x03 => Some(Self::CryptographicErase),
            0x1F => Some(Self::ExitFailureMode),
            _ => None,
        }
    }

    /// The SERVICE ACTION code: the inverse of [`SanitizeAction::of`].
    pub fn code(self) -> u8 {
        match self {
            Self::Overwrite => 0x01,
            Self::BlockErase => 0x02,
            Self::CryptographicErase => 0x03,
            Self::ExitFailureMode => 0x1F,
        }
    }
}

/// The OVERWRITE parameter list (SBC-4 table 105), checked against the logical block length.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Overwrite {
    /// INVERT: every other pass writes the pattern's complement.
    pub invert: bool,
    /// OVERWRITE COUNT: passes over the medium, 1–31.
    pub count: u8,
    /// INITIALIZATION PATTERN, repeated to fill each block.
    pub pattern: Vec<u8>,
}

impl Overwrite {
    /// Parse `list` (PARAMETER LIST LENGTH bytes; the CDB check below already bounded it).
    /// TEST (byte 0 bits 6:5) is only for testing the device and is refused.
    pub fn parse(list: &[u8], block_length: u32) -> Result<Self, Sense> {
        let count = u8_at(list, 0) & 0x1F;
        if u8_at(list, 0) & 0x60 != 0 {
            return Err(Sense::invalid_field_in_parameter_list(0, Some(6)));
        }
        if count == 0 {
            return Err(Sense::invalid_field_in_parameter_list(0, Some(4)));
        }
        let length = usize::from(be16(list, 2));
        if length == 0 || length > block_length as usize || length + 4 > list.len() {
            return Err(Sense::invalid_field_in_parameter_list(2, None));
        }
        Ok(Overwrite {
            invert: bit(list, 0, 7),
            count,
            pattern: list[4..4 + length].to_vec(),
        })
    }

    /// The block written in pass `pass` (0-based): the pattern repeated, complemented on odd
    /// passes with INVERT.
    pub fn block(&self, pass: u8, block_length: usize) -> Vec<u8> {
        let flip = if self.invert && pass % 2 == 1 {
            0xFF
        } else {
            0
        };
        self.pattern
            .iter()
            .cycle()
            .take(block_length)
            .map(|b| b ^ flip)
            .collect()
    }
}

/// The PARAMETER LIST LENGTH of an OVERWRITE must cover a 4-byte header and at most one block
/// of pattern (SBC-4 §5.30.2); other service actions take no parameter list.
pub fn check_parameter_list_length(
    action: SanitizeAction,
    length: u16,
    block_length: u32,
) -> Result<(), Sense> {
    let ok = match action {
        SanitizeAction::Overwrite => (5..=block_length + 4).contains(&u32::from(length)),
        _ => length == 0,
    };
    if ok {
        Ok(())
    } else {
        Err(Sense::invalid_field_in_cdb(7, None))
    }
}

/// The FORMAT UNIT parameter list header (SBC-4 tables 36 and 37), of which only the defaults
/// are supported: no defect list, no initialization pattern, no protection information.
pub fn check_format_header(header: &[u8], long: bool) -> Result<(), Sense> {
    // FOV (byte 1 bit 7) = 0 asks for the defaults, and then DPRY, DCRT, STPF and IP must be
    // 0; with FOV = 1 each must still ask for what this device does (nothing to keep, check
    // or initialize). IMMED (bit 1) is fine: formatting here is immediate anyway.
    let flags = u8_at(header, 1);
    if flags & 0x78 != 0 {
        let bit = 7 - (flags & 0x78).leading_zeros() as u8;
        return Err(Sense::invalid_field_in_parameter_list(1, Some(bit)));
    }
    if flags & 0x01 != 0 {
        return Err(Sense::invalid_field_in_parameter_list(1, Some(0)));
    }
    if long {
        // P_I_INFORMATION and PROTECTION INTERVAL EXPONENT need protection information.
        if u8_at(header, 3) != 0 {
            return Err(Sense::invalid_field_in_parameter_list(3, None));
        }
        if be32(header, 4) != 0 {
            return Err(Sense::invalid_field_in_parameter_list(4, None));
        }
    } else if be16(header, 2) != 0 {
        return Err(Sense::invalid_field_in_parameter_list(2, None));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sense::Asc;

    #[test]
    fn overwrite_list_fields() {
        let o = Overwrite::parse(&[0x82, 0, 0, 2, 0xAA, 0x55], 512).unwrap();
        assert_eq!(
            (o.invert, o.count, o.pattern.as_slice()),
            (true, 2, &[0xAA, 0x55][..])
        );
        assert_eq!(o.block(0, 4), vec![0xAA, 0x55, 0xAA, 0x55]);
        assert_eq!(o.block(1, 3), vec![0x55, 0xAA, 0x55]);
        for bad in [
            &[0x00, 0, 0, 1, 0][..], // count 0
            &[0x01, 0, 0, 0, 0],     // pattern length 0
            &[0x01, 0, 0, 9, 0],     // pattern longer than the list
            &[0x21, 0, 0, 1, 0],     // TEST
        ] {
            let e = Overwrite::parse(bad, 512).unwrap_err();
            assert_eq!(e.asc, Asc::INVALID_FIELD_IN_PARAMETER_LIST, "{bad:?}");
        }
        let long = [&[1u8, 0, 2, 4][..], &[0; 516]].concat();
        assert!(
            Overwrite::parse(&long, 512).is_err(),
            "pattern beyond a block"
        );
    }

    #[test]
    fn parameter_list_lengths() {
        use SanitizeAction::*;
        assert!(check_parameter_list_length(Overwrite, 5, 512).is_ok());
        assert!(check_parameter_list_length(Overwrite, 516, 512).is_ok());
        assert!(check_parameter_list_length(Overwrite, 4, 512).is_err());
        assert!(check_parameter_list_length(Overwrite, 517, 512).is_err());
        assert!(check_parameter_list_length(BlockErase, 0, 512).is_ok());
        let e = check_parameter_list_length(ExitFailureMode, 8, 512).unwrap_err();
        assert_eq!(e, Sense::invalid_field_in_cdb(7, None));
    }

    #[test]
    fn format_header_defaults_only() {
        assert!(check_format_header(&[0, 0, 0, 0], false).is_ok());
        assert!(
            check_format_header(&[0, 0x82, 0, 0], false).is_ok(),
            "FOV, IMMED"
        );
        assert_eq!(
            check_format_header(&[0, 0x08, 0, 0], false),
            Err(Sense::invalid_field_in_parameter_list(1, Some(3))),
            "IP"
        );
        assert_eq!(
            check_format_header(&[0, 0, 0, 8], false),
            Err(Sense::invalid_field_in_parameter_list(2, None)),
            "a defect list"
        );
        assert!(check_format_header(&[0, 0, 0, 0, 0, 0, 0, 0], true).is_ok());
        assert!(check_format_header(&[0, 0, 0, 0, 0, 0, 0, 8], true).is_err());
    }
}
