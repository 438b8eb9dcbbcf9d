//! Sense data (SPC-5 §4.4): sense keys, additional sense codes and the fixed (70h) and
//! descriptor (72h) formats.

/// Sense key (SPC-5 table 54).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[repr(u8)]
pub enum SenseKey {
    NoSense = 0x0,
    RecoveredError = 0x1,
    NotReady = 0x2,
    MediumError = 0x3,
    HardwareError = 0x4,
    IllegalRequest = 0x5,
    UnitAttention = 0x6,
    DataProtect = 0x7,
    BlankCheck = 0x8,
    VendorSpecific = 0x9,
    CopyAborted = 0xA,
    AbortedCommand = 0xB,
    VolumeOverflow = 0xD,
    Miscompare = 0xE,
    Completed = 0xF,
}

/// Additional sense code and qualifier (SPC-5 table 58), as one `(ASC, ASCQ)` pair.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Asc(pub u8, pub u8);

impl Asc {
    pub const NO_ADDITIONAL_SENSE: Asc = Asc(0x00, 0x00);
    pub const LOGICAL_UNIT_NOT_READY_INITIALIZING_REQUIRED: Asc = Asc(0x04, 0x02);
    pub const LOGICAL_UNIT_NOT_ACCESSIBLE_TARGET_PORT_IN_STANDBY_STATE: Asc = Asc(0x04, 0x0B);
    pub const LOGICAL_UNIT_NOT_ACCESSIBLE_TARGET_PORT_IN_UNAVAILABLE_STATE: Asc = Asc(0x04, 0x0C);
    pub const WRITE_ERROR: Asc = Asc(0x0C, 0x00);
    pub const UNRECOVERED_READ_ERROR: Asc = Asc(0x11, 0x00);
    pub const MISCOMPARE_DURING_VERIFY: Asc = Asc(0x1D, 0x00);
    pub const PARAMETER_LIST_LENGTH_ERROR: Asc = Asc(0x1A, 0x00);
    pub const INVALID_COMMAND_OPERATION_CODE: Asc = Asc(0x20, 0x00);
    pub const LBA_OUT_OF_RANGE: Asc = Asc(0x21, 0x00);
    pub const INVALID_FIELD_IN_CDB: Asc = Asc(0x24, 0x00);
    pub const LOGICAL_UNIT_NOT_SUPPORTED: Asc = Asc(0x25, 0x00);
    pub const INVALID_FIELD_IN_PARAMETER_LIST: Asc = Asc(0x26, 0x00);
    /// ACCESS DENIED - NO ACCESS RIGHTS (SPC-6 table of ASC/ASCQ assignments).
    pub const ACCESS_DENIED_NO_ACCESS_RIGHTS: Asc = Asc(0x20, 0x02);
    pub const SAVING_PARAMETERS_NOT_SUPPORTED: Asc = Asc(0x39, 0x00);
    pub const WRITE_PROTECTED: Asc = Asc(0x27, 0x00);
    pub const POWER_ON_RESET_OR_BUS_DEVICE_RESET: Asc = Asc(0x29, 0x00);
    pub const POWER_ON_OCCURRED: Asc = Asc(0x29, 0x01);
    pub const BUS_DEVICE_RESET_FUNCTION_OCCURRED: Asc = Asc(0x29, 0x03);
    pub const I_T_NEXUS_LOSS_OCCURRED: Asc = Asc(0x29, 0x07);
    pub const PARAMETERS_CHANGED: Asc = Asc(0x2A, 0x00);
    pub const MODE_PARAMETERS_CHANGED: Asc = Asc(0x2A, 0x01);
    pub const TIMESTAMP_CHANGED: Asc = Asc(0x2A, 0x10);
    pub const RESERVATIONS_PREEMPTED: Asc = Asc(0x2A, 0x03);
    pub const RESERVATIONS_RELEASED: Asc = Asc(0x2A, 0x04);
    pub const REGISTRATIONS_PREEMPTED: Asc = Asc(0x2A, 0x05);
    pub const INVALID_RELEASE_OF_PERSISTENT_RESERVATION: Asc = Asc(0x26, 0x04);
    pub const INSUFFICIENT_REGISTRATION_RESOURCES: Asc = Asc(0x55, 0x04);
    pub const COMMANDS_CLEARED_BY_ANOTHER_INITIATOR: Asc = Asc(0x2F, 0x00);
    pub const COMMAND_TIMEOUT_BEFORE_PROCESSING: Asc = Asc(0x2E, 0x01);
    pub const COMMAND_TIMEOUT_DURING_PROCESSING: Asc = Asc(0x2E, 0x02);
    pub const COMMAND_TIMEOUT_DURING_PROCESSING_DUE_TO_ERROR_RECOVERY: Asc = Asc(0x2E, 0x03);
    pub const MEDIUM_NOT_PRESENT: Asc = Asc(0x3A, 0x00);
    pub const THIN_PROVISIONING_SOFT_THRESHOLD_REACHED: Asc = Asc(0x38, 0x07);
    pub const INVALID_MESSAGE_ERROR: Asc = Asc(0x49, 0x00);
    pub const OVERLAPPED_COMMANDS_ATTEMPTED: Asc = Asc(0x4E, 0x00);
    pub const MEDIUM_REMOVAL_PREVENTED: Asc = Asc(0x53, 0x02);
    pub const REPORTED_LUNS_DATA_HAS_CHANGED: Asc = Asc(0x3F, 0x0E);
    pub const INTERNAL_TARGET_FAILURE: Asc = Asc(0x44, 0x00);
    pub const DATA_CURRENTLY_UNAVAILABLE: Asc = Asc(0x55, 0x0A);
    /// LOGICAL UNIT NOT READY, SANITIZE IN PROGRESS (SBC-4 §4.11).
    pub const SANITIZE_IN_PROGRESS: Asc = Asc(0x04, 0x1B);
    /// SANITIZE COMMAND FAILED: the logical unit is in sanitize failure mode (SBC-4 §4.11).
    pub const SANITIZE_COMMAND_FAILED: Asc = Asc(0x31, 0x03);
    /// MEDIUM FORMAT CORRUPTED: a FORMAT UNIT failed part-way.
    pub const MEDIUM_FORMAT_CORRUPTED: Asc = Asc(0x31, 0x00);
}

/// Sense key and additional sense code of sense data in fixed (70h/71h) or descriptor
/// (72h/73h) format (SPC-5 §4.4.2, §4.4.3), as an initiator reads them; `None` when the data
/// is too short or of another format.
pub fn parse_key_asc(data: &[u8]) -> Option<(u8, Asc)> {
    match data.first()? & 0x7F {
        0x70 | 0x71 => Some((data.get(2)? & 0x0F, Asc(*data.get(12)?, *data.get(13)?))),
        0x72 | 0x73 => Some((data.get(1)? & 0x0F, Asc(*data.get(2)?, *data.get(3)?))),
        _ => None,
    }
}

/// Sense-key specific field pointer (SPC-5 §4.4.2.3, table 63): which CDB or parameter-list
/// byte (and optionally bit) was bad.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct FieldPointer {
    /// true: the error is in the CDB (C/D = 1); false: in the parameter data.
    pub in_cdb: bool,
    pub byte: u16,
    /// Bit number 0..=7 when the bad field is narrower than a byte (BPV = 1).
    pub bit: Option<u8>,
}

/// Sense data to return with CHECK CONDITION (or, for CDL policy Dh, with GOOD).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Sense {
    pub key: SenseKey,
    pub asc: Asc,
    pub field: Option<FieldPointer>,
    /// INFORMATION field (e.g. the first bad LBA), reported with the VALID bit.
    pub information: Option<u64>,
    /// PROGRESS INDICATION (SPC-5 §4.4.2.3.4, table 65): the fraction of an operation done,
    /// in 65,536ths, in the sense-key specific field when there is no field pointer.
    pub progress: Option<u16>,
    /// ILI: the requested length did not match the logical block's (READ LONG, WRITE LONG;
    /// SBC-4); INFORMATION holds the requested length minus the block's.
    pub ili: bool,
}

impl Sense {
    pub fn new(key: SenseKey, asc: Asc) -> Self {
        Sense {
            key,
            asc,
            field: None,
            information: None,
            progress: None,
            ili: false,
        }
    }

    /// NOT READY, LOGICAL UNIT NOT READY, SANITIZE IN PROGRESS (04h/1Bh) with how far it is
    /// (SBC-4 §4.11.1).
    pub fn sanitize_in_progress(progress: u16) -> Self {
        let mut s = Sense::new(SenseKey::NotReady, Asc::SANITIZE_IN_PROGRESS);
        s.progress = Some(progress);
        s
    }

    /// ILLEGAL REQUEST, INVALID FIELD IN CDB, pointing at `byte` (and `bit`, if narrower).
    pub fn invalid_field_in_cdb(byte: u16, bit: Option<u8>) -> Self {
        Sense {
            key: SenseKey::IllegalRequest,
            asc: Asc::INVALID_FIELD_IN_CDB,
            field: Some(FieldPointer {
                in_cdb: true,
                byte,
                bit,
            }),
            information: None,
            progress: None,
            ili: false,
        }
    }

    /// ILLEGAL REQUEST, INVALID FIELD IN PARAMETER LIST, pointing into the data-out buffer.
    pub fn invalid_field_in_parameter_list(byte: u16, bit: Option<u8>) -> Self {
        Sense {
            key: SenseKey::IllegalRequest,
            asc: Asc::INVALID_FIELD_IN_PARAMETER_LIST,
            field: Some(FieldPointer {
                in_cdb: false,
                byte,
                bit,
            }),
            information: None,
            progress: None,
            ili: false,
        }
    }

    /// ILLEGAL REQUEST, INVALID COMMAND OPERATION CODE (05/20/00).
    pub fn invalid_command_operation_code() -> Self {
        Sense::new(
            SenseKey::IllegalRequest,
            Asc::INVALID_COMMAND_OPERATION_CODE,
        )
    }

    /// ILLEGAL REQUEST, LOGICAL BLOCK ADDRESS OUT OF RANGE (05/21/00).
    pub fn lba_out_of_range() -> Self {
        Sense::new(SenseKey::IllegalRequest, Asc::LBA_OUT_OF_RANGE)
    }

    /// Append the sense data in descriptor format (D_SENSE = 1) or fixed format.
    pub fn write(&self, descriptor: bool, out: &mut Vec<u8>) {
        if descriptor {
            self.write_descriptor(out)
        } else {
            self.write_fixed(out)
        }
    }

    /// Sense-key specific bytes (SPC-5 table 63): SKSV, C/D, BPV, bit pointer, field pointer;
    /// or SKSV and a progress indication (table 65).
    fn sense_key_specific(&self) -> Option<[u8; 3]> {
        let field = self.field.map(|f| {
            let mut b0 = 0x80 | if f.in_cdb { 0x40 } else { 0 };
            if let Some(bit) = f.bit {
                b0 |= 0x08 | (bit & 7);
            }
            let [hi, lo] = f.byte.to_be_bytes();
            [b0, hi, lo]
        });
        field.or_else(|| {
            self.progress.map(|p| {
                let [hi, lo] = p.to_be_bytes();
                [0x80, hi, lo]
            })
        })
    }

    /// Append fixed-format sense data (SPC-5 §4.4.3, table 67); 18 bytes.
    pub fn write_fixed(&self, out: &mut Vec<u8>) {
        let mut b = [0u8; 18];
        b[0] = 0x70;
        b[2] = self.key as u8 | if self.ili { 0x20 } else { 0 };
        if let Some(info) = self.information {
            // The fixed format has room for 32 bits of INFORMATION; with ILI it is a signed
            // length difference, whose low 32 bits are its two's complement.
            let info = if self.ili {
                Ok(info as u32)
            } else {
                u32::try_from(info)
            };
            if let Ok(info) = info {
                b[0] |= 0x80;
                b[3..7].copy_from_slice(&info.to_be_bytes());
            }
        }
        b[7] = 10; // ADDITIONAL SENSE LENGTH
        b[12] = self.asc.0;
        b[13] = self.asc.1;
        if let Some(sks) = self.sense_key_specific() {
            b[15..18].copy_from_slice(&sks);
        }
        out.extend_from_slice(&b);
    }

    /// Append descriptor-format sense data (SPC-5 §4.4.2, table 55) with an information
    /// descriptor (table 60) and a sense-key specific descriptor (table 61) when present.
    pub fn write_descriptor(&self, out: &mut Vec<u8>) {
        let start = out.len();
        out.extend_from_slice(&[0x72, self.key as u8, self.asc.0, self.asc.1, 0, 0, 0, 0]);
        if let Some(info) = self.information {
            out.extend_from_slice(&[0x00, 0x0A, 0x80, 0]);
            out.extend_from_slice(&info.to_be_bytes());
        }
        if let Some(sks) = self.sense_key_specific() {
            out.extend_from_slice(&[0x02, 0x06, 0, 0, sks[0], sks[1], sks[2], 0]);
        }
        if self.ili {
            // The block commands sense data descriptor (SBC-4): ILI in byte 3 bit 5.
            out.extend_from_slice(&[0x05, 0x02, 0, 0x20]);
        }
        out[start + 7] = (out.len() - start - 8) as u8;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_initiator_reads_key_and_asc_from_either_format() {
        let sense = Sense::new(
            SenseKey::AbortedCommand,
            Asc::COMMAND_TIMEOUT_DURING_PROCESSING,
        );
        for descriptor in [false, true] {
            let mut out = Vec::new();
            sense.write(descriptor, &mut out);
            assert_eq!(
                parse_key_asc(&out),
                Some((0x0B, Asc::COMMAND_TIMEOUT_DURING_PROCESSING))
            );
        }
        assert_eq!(parse_key_asc(&[0x70, 0, 0x0B]), None, "too short");
        assert_eq!(parse_key_asc(&[0x7F; 18]), None, "vendor format");
        assert_eq!(parse_key_asc(&[]), None);
    }

    #[test]
    fn fixed_format_carries_field_pointer() {
        let mut out = Vec::new();
        Sense::invalid_field_in_cdb(1, Some(3)).write_fixed(&mut out);
        assert_eq!(out.len(), 18);
        assert_eq!(out[0], 0x70);
        assert_eq!(out[2], 0x05);
        assert_eq!((out[12], out[13]), (0x24, 0x00));
        assert_eq!(&out[15..18], &[0xCB, 0x00, 0x01]);
    }

    #[test]
    fn progress_indication_rides_in_the_sense_key_specific_bytes() {
        let sense = Sense::sanitize_in_progress(0x8000);
        let mut fixed = Vec::new();
        sense.write_fixed(&mut fixed);
        assert_eq!((fixed[2], fixed[12], fixed[13]), (0x02, 0x04, 0x1B));
        assert_eq!(&fixed[15..18], &[0x80, 0x80, 0x00]);
        let mut desc = Vec::new();
        sense.write_descriptor(&mut desc);
        assert_eq!(&desc[8..16], &[0x02, 0x06, 0, 0, 0x80, 0x80, 0x00, 0]);
    }

    #[test]
    fn descriptor_format_lengths() {
        let mut out = Vec::new();
        let mut s = Sense::new(SenseKey::MediumError, Asc::UNRECOVERED_READ_ERROR);
        s.information = Some(0x1_0000_0000);
        s.write_descriptor(&mut out);
        assert_eq!(out[0], 0x72);
        assert_eq!(out[7] as usize, out.len() - 8);
        assert_eq!(&out[12..20], &0x1_0000_0000u64.to_be_bytes());
    }

    #[test]
    fn ili_and_a_negative_information_in_both_formats() {
        let mut sense = Sense::invalid_field_in_cdb(7, None);
        sense.ili = true;
        sense.information = Some((-8i64) as u64);
        let mut fixed = Vec::new();
        sense.write_fixed(&mut fixed);
        assert_eq!(fixed[0] & 0x80, 0x80, "VALID");
        assert_eq!(fixed[2], 0x20 | 0x05, "ILI, ILLEGAL REQUEST");
        assert_eq!(&fixed[3..7], &(-8i32).to_be_bytes());
        let mut desc = Vec::new();
        sense.write_descriptor(&mut desc);
        assert_eq!(&desc[8..12], &[0x00, 0x0A, 0x80, 0]);
        assert_eq!(&desc[12..20], &(-8i64).to_be_bytes());
        assert_eq!(&desc[desc.len() - 4..], &[0x05, 0x02, 0, 0x20]);
        assert_eq!(usize::from(desc[7]), desc.len() - 8);
    }
}
