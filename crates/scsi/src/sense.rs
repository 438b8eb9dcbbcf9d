//! Sense data (SPC-5 §4.4): sense keys, additional sense codes and the fixed (70h) and
//! descriptor (72h) formats, written by the device and parsed back by an initiator.

use crate::cdb::{be16, be32, be64, u8_at};

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

impl SenseKey {
    /// The key of a SENSE KEY field; `None` for 0Ch, which SPC-5 made obsolete.
    pub fn from_code(code: u8) -> Option<SenseKey> {
        use SenseKey::*;
        Some(match code & 0x0F {
            0x0 => NoSense,
            0x1 => RecoveredError,
            0x2 => NotReady,
            0x3 => MediumError,
            0x4 => HardwareError,
            0x5 => IllegalRequest,
            0x6 => UnitAttention,
            0x7 => DataProtect,
            0x8 => BlankCheck,
            0x9 => VendorSpecific,
            0xA => CopyAborted,
            0xB => AbortedCommand,
            0xD => VolumeOverflow,
            0xE => Miscompare,
            0xF => Completed,
            _ => return None,
        })
    }

    /// Its SPC-5 table 54 name.
    pub fn name(self) -> &'static str {
        use SenseKey::*;
        match self {
            NoSense => "NO SENSE",
            RecoveredError => "RECOVERED ERROR",
            NotReady => "NOT READY",
            MediumError => "MEDIUM ERROR",
            HardwareError => "HARDWARE ERROR",
            IllegalRequest => "ILLEGAL REQUEST",
            UnitAttention => "UNIT ATTENTION",
            DataProtect => "DATA PROTECT",
            BlankCheck => "BLANK CHECK",
            VendorSpecific => "VENDOR SPECIFIC",
            CopyAborted => "COPY ABORTED",
            AbortedCommand => "ABORTED COMMAND",
            VolumeOverflow => "VOLUME OVERFLOW",
            Miscompare => "MISCOMPARE",
            Completed => "COMPLETED",
        }
    }
}

/// Additional sense code and qualifier (SPC-5 table 58), as one `(ASC, ASCQ)` pair.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Asc(pub u8, pub u8);

/// The additional sense codes stint uses, named as in SPC-5 table 58, in code order.
macro_rules! asc {
    ($($(#[$doc:meta])* $name:ident = ($asc:literal, $ascq:literal) $text:literal;)+) => {
        impl Asc {
            $($(#[$doc])* pub const $name: Asc = Asc($asc, $ascq);)+

            /// Its SPC-5 table 58 description, for the codes above.
            pub fn name(self) -> Option<&'static str> {
                match (self.0, self.1) {
                    $(($asc, $ascq) => Some($text),)+
                    _ => None,
                }
            }
        }
    };
}

asc! {
    NO_ADDITIONAL_SENSE = (0x00, 0x00) "NO ADDITIONAL SENSE INFORMATION";
    LOGICAL_UNIT_NOT_READY_INITIALIZING_REQUIRED = (0x04, 0x02) "LOGICAL UNIT NOT READY, INITIALIZING COMMAND REQUIRED";
    /// The store refuses this server for good (a Ceph client blocklisted: `-ESHUTDOWN`).
    LOGICAL_UNIT_NOT_READY_MANUAL_INTERVENTION_REQUIRED = (0x04, 0x03) "LOGICAL UNIT NOT READY, MANUAL INTERVENTION REQUIRED";
    LOGICAL_UNIT_NOT_ACCESSIBLE_TARGET_PORT_IN_STANDBY_STATE = (0x04, 0x0B) "LOGICAL UNIT NOT ACCESSIBLE, TARGET PORT IN STANDBY STATE";
    LOGICAL_UNIT_NOT_ACCESSIBLE_TARGET_PORT_IN_UNAVAILABLE_STATE = (0x04, 0x0C) "LOGICAL UNIT NOT ACCESSIBLE, TARGET PORT IN UNAVAILABLE STATE";
    /// SBC-4 §4.11.
    SANITIZE_IN_PROGRESS = (0x04, 0x1B) "LOGICAL UNIT NOT READY, SANITIZE IN PROGRESS";
    /// The store did not answer in time (`-ETIMEDOUT`), with ABORTED COMMAND: retryable.
    LOGICAL_UNIT_COMMUNICATION_TIME_OUT = (0x08, 0x01) "LOGICAL UNIT COMMUNICATION TIME-OUT";
    WRITE_ERROR = (0x0C, 0x00) "WRITE ERROR";
    UNRECOVERED_READ_ERROR = (0x11, 0x00) "UNRECOVERED READ ERROR";
    PARAMETER_LIST_LENGTH_ERROR = (0x1A, 0x00) "PARAMETER LIST LENGTH ERROR";
    MISCOMPARE_DURING_VERIFY = (0x1D, 0x00) "MISCOMPARE DURING VERIFY OPERATION";
    INVALID_COMMAND_OPERATION_CODE = (0x20, 0x00) "INVALID COMMAND OPERATION CODE";
    ACCESS_DENIED_NO_ACCESS_RIGHTS = (0x20, 0x02) "ACCESS DENIED - NO ACCESS RIGHTS";
    LBA_OUT_OF_RANGE = (0x21, 0x00) "LOGICAL BLOCK ADDRESS OUT OF RANGE";
    INVALID_FIELD_IN_CDB = (0x24, 0x00) "INVALID FIELD IN CDB";
    LOGICAL_UNIT_NOT_SUPPORTED = (0x25, 0x00) "LOGICAL UNIT NOT SUPPORTED";
    INVALID_FIELD_IN_PARAMETER_LIST = (0x26, 0x00) "INVALID FIELD IN PARAMETER LIST";
    INVALID_RELEASE_OF_PERSISTENT_RESERVATION = (0x26, 0x04) "INVALID RELEASE OF PERSISTENT RESERVATION";
    WRITE_PROTECTED = (0x27, 0x00) "WRITE PROTECTED";
    /// A write the store has no space for (`-ENOSPC`, `-EDQUOT`): thin provisioning's
    /// resource exhaustion (SBC-4 §4.7.3), with DATA PROTECT.
    SPACE_ALLOCATION_FAILED_WRITE_PROTECT = (0x27, 0x07) "SPACE ALLOCATION FAILED WRITE PROTECT";
    POWER_ON_RESET_OR_BUS_DEVICE_RESET = (0x29, 0x00) "POWER ON, RESET, OR BUS DEVICE RESET OCCURRED";
    POWER_ON_OCCURRED = (0x29, 0x01) "POWER ON OCCURRED";
    BUS_DEVICE_RESET_FUNCTION_OCCURRED = (0x29, 0x03) "BUS DEVICE RESET FUNCTION OCCURRED";
    I_T_NEXUS_LOSS_OCCURRED = (0x29, 0x07) "I_T NEXUS LOSS OCCURRED";
    PARAMETERS_CHANGED = (0x2A, 0x00) "PARAMETERS CHANGED";
    MODE_PARAMETERS_CHANGED = (0x2A, 0x01) "MODE PARAMETERS CHANGED";
    RESERVATIONS_PREEMPTED = (0x2A, 0x03) "RESERVATIONS PREEMPTED";
    RESERVATIONS_RELEASED = (0x2A, 0x04) "RESERVATIONS RELEASED";
    REGISTRATIONS_PREEMPTED = (0x2A, 0x05) "REGISTRATIONS PREEMPTED";
    /// A target port group's ALUA state changed (SPC-4 §5.16.2.3): the host reads REPORT
    /// TARGET PORT GROUPS again.
    ASYMMETRIC_ACCESS_STATE_CHANGED = (0x2A, 0x06) "ASYMMETRIC ACCESS STATE CHANGED";
    /// The capacity changed (SBC-4 §4.6: READ CAPACITY answers differently from now on).
    CAPACITY_DATA_HAS_CHANGED = (0x2A, 0x09) "CAPACITY DATA HAS CHANGED";
    TIMESTAMP_CHANGED = (0x2A, 0x10) "TIMESTAMP CHANGED";
    COMMAND_TIMEOUT_BEFORE_PROCESSING = (0x2E, 0x01) "COMMAND TIMEOUT BEFORE PROCESSING";
    COMMAND_TIMEOUT_DURING_PROCESSING = (0x2E, 0x02) "COMMAND TIMEOUT DURING PROCESSING";
    COMMAND_TIMEOUT_DURING_PROCESSING_DUE_TO_ERROR_RECOVERY = (0x2E, 0x03) "COMMAND TIMEOUT DURING PROCESSING DUE TO ERROR RECOVERY";
    COMMANDS_CLEARED_BY_ANOTHER_INITIATOR = (0x2F, 0x00) "COMMANDS CLEARED BY ANOTHER INITIATOR";
    /// A FORMAT UNIT failed part-way.
    MEDIUM_FORMAT_CORRUPTED = (0x31, 0x00) "MEDIUM FORMAT CORRUPTED";
    /// The logical unit is in sanitize failure mode (SBC-4 §4.11).
    SANITIZE_COMMAND_FAILED = (0x31, 0x03) "SANITIZE COMMAND FAILED";
    THIN_PROVISIONING_SOFT_THRESHOLD_REACHED = (0x38, 0x07) "THIN PROVISIONING SOFT THRESHOLD REACHED";
    SAVING_PARAMETERS_NOT_SUPPORTED = (0x39, 0x00) "SAVING PARAMETERS NOT SUPPORTED";
    MEDIUM_NOT_PRESENT = (0x3A, 0x00) "MEDIUM NOT PRESENT";
    REPORTED_LUNS_DATA_HAS_CHANGED = (0x3F, 0x0E) "REPORTED LUNS DATA HAS CHANGED";
    INTERNAL_TARGET_FAILURE = (0x44, 0x00) "INTERNAL TARGET FAILURE";
    INVALID_MESSAGE_ERROR = (0x49, 0x00) "INVALID MESSAGE ERROR";
    OVERLAPPED_COMMANDS_ATTEMPTED = (0x4E, 0x00) "OVERLAPPED COMMANDS ATTEMPTED";
    MEDIUM_REMOVAL_PREVENTED = (0x53, 0x02) "MEDIUM REMOVAL PREVENTED";
    INSUFFICIENT_REGISTRATION_RESOURCES = (0x55, 0x04) "INSUFFICIENT REGISTRATION RESOURCES";
    DATA_CURRENTLY_UNAVAILABLE = (0x55, 0x0A) "DATA CURRENTLY UNAVAILABLE";
    /// An explicit transition failed (SPC-4 §5.16.2.5), with HARDWARE ERROR.
    SET_TARGET_PORT_GROUPS_COMMAND_FAILED = (0x67, 0x0A) "SET TARGET PORT GROUPS COMMAND FAILED";
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

    /// Sense data in fixed (70h/71h, SPC-5 §4.4.3) or descriptor (72h/73h, §4.4.2) format, as
    /// an initiator reads it: the inverse of [`Sense::write`]. Bytes past the ADDITIONAL SENSE
    /// LENGTH or the buffer read as zeros. The sense-key specific bytes are read as SPC-5
    /// table 62 assigns them by sense key: a field pointer under ILLEGAL REQUEST (table 63)
    /// and COPY ABORTED (the segment pointer of table 66, whose SD bit is not kept), a
    /// progress indication under NO SENSE and NOT READY (table 65), nothing under the others.
    /// Of the descriptors, the information (00h), sense key specific (02h) and block commands
    /// (05h: ILI) ones are read. `None`: too short, another format, or the obsolete key 0Ch.
    pub fn parse(data: &[u8]) -> Option<Sense> {
        let end = data.len().min(8 + usize::from(u8_at(data, 7)));
        let d = &data[..end];
        match *data.first()? & 0x7F {
            // Through ASC and ASCQ (bytes 12–13).
            0x70 | 0x71 if data.len() >= 14 => {
                let key = SenseKey::from_code(u8_at(d, 2))?;
                let ili = u8_at(d, 2) & 0x20 != 0;
                let information = (u8_at(d, 0) & 0x80 != 0).then(|| {
                    let info = be32(d, 3);
                    // With ILI a signed length difference (as written).
                    if ili {
                        info as i32 as i64 as u64
                    } else {
                        u64::from(info)
                    }
                });
                let (field, progress) =
                    sense_key_specific(key, [u8_at(d, 15), u8_at(d, 16), u8_at(d, 17)]);
                Some(Sense {
                    key,
                    asc: Asc(u8_at(d, 12), u8_at(d, 13)),
                    field,
                    information,
                    progress,
                    ili,
                })
            }
            0x72 | 0x73 if data.len() >= 4 => {
                let key = SenseKey::from_code(u8_at(d, 1))?;
                let mut sense = Sense::new(key, Asc(u8_at(d, 2), u8_at(d, 3)));
                let mut at = 8;
                while let Some(&[kind, len]) = d.get(at..at + 2) {
                    let next = at + 2 + usize::from(len);
                    let desc = &d[at..next.min(d.len())];
                    match kind {
                        0x00 if u8_at(desc, 2) & 0x80 != 0 => {
                            sense.information = Some(be64(desc, 4));
                        }
                        0x02 => {
                            (sense.field, sense.progress) = sense_key_specific(
                                key,
                                [u8_at(desc, 4), u8_at(desc, 5), u8_at(desc, 6)],
                            );
                        }
                        0x05 => sense.ili = u8_at(desc, 3) & 0x20 != 0,
                        _ => {}
                    }
                    at = next;
                }
                Some(sense)
            }
            _ => None,
        }
    }
}

/// "ILLEGAL REQUEST, INVALID FIELD IN CDB (24h/00h) at CDB byte 1 bit 0": the key, the
/// additional sense code by name where it has one here, and the field pointer.
impl std::fmt::Display for Sense {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let Asc(asc, ascq) = self.asc;
        match self.asc.name() {
            Some(name) => write!(f, "{}, {name} ({asc:02X}h/{ascq:02X}h)", self.key.name())?,
            None => write!(f, "{}, ASC/ASCQ {asc:02X}h/{ascq:02X}h", self.key.name())?,
        }
        if let Some(field) = self.field {
            let within = if field.in_cdb {
                "CDB"
            } else {
                "parameter list"
            };
            write!(f, " at {within} byte {}", field.byte)?;
            if let Some(bit) = field.bit {
                write!(f, " bit {bit}")?;
            }
        }
        Ok(())
    }
}

/// The sense-key specific bytes under `key` (SPC-5 table 62): a field pointer or a progress
/// indication, when SKSV is set.
fn sense_key_specific(key: SenseKey, sks: [u8; 3]) -> (Option<FieldPointer>, Option<u16>) {
    if sks[0] & 0x80 == 0 {
        return (None, None);
    }
    let value = be16(&sks, 1);
    match key {
        SenseKey::IllegalRequest | SenseKey::CopyAborted => {
            let field = FieldPointer {
                in_cdb: sks[0] & 0x40 != 0,
                byte: value,
                bit: (sks[0] & 0x08 != 0).then_some(sks[0] & 0x07),
            };
            (Some(field), None)
        }
        SenseKey::NoSense | SenseKey::NotReady => (None, Some(value)),
        _ => (None, None),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `sense` written in both formats and parsed back.
    fn both_ways(sense: &Sense) {
        for descriptor in [false, true] {
            let mut out = Vec::new();
            sense.write(descriptor, &mut out);
            assert_eq!(Sense::parse(&out).as_ref(), Some(sense), "{out:02x?}");
        }
    }

    #[test]
    fn an_initiator_parses_back_what_the_device_wrote() {
        both_ways(&Sense::new(
            SenseKey::AbortedCommand,
            Asc::COMMAND_TIMEOUT_DURING_PROCESSING,
        ));
        both_ways(&Sense::invalid_field_in_cdb(14, Some(7)));
        both_ways(&Sense::invalid_field_in_parameter_list(300, None));
        both_ways(&Sense::sanitize_in_progress(0x8000));
        let mut medium = Sense::new(SenseKey::MediumError, Asc::UNRECOVERED_READ_ERROR);
        medium.information = Some(0xFFFF_FFFF);
        both_ways(&medium);
        let mut long = Sense::invalid_field_in_cdb(7, None);
        long.ili = true;
        long.information = Some((-8i64) as u64);
        both_ways(&long);
        let mut copy = Sense::new(SenseKey::CopyAborted, Asc(0x26, 0x09));
        copy.field = Some(FieldPointer {
            in_cdb: false,
            byte: 48,
            bit: None,
        });
        both_ways(&copy);
    }

    #[test]
    fn sense_reads_as_the_standard_names_it() {
        assert_eq!(
            Sense::invalid_field_in_cdb(1, Some(0)).to_string(),
            "ILLEGAL REQUEST, INVALID FIELD IN CDB (24h/00h) at CDB byte 1 bit 0"
        );
        assert_eq!(
            Sense::new(SenseKey::UnitAttention, Asc(0x29, 0x02)).to_string(),
            "UNIT ATTENTION, ASC/ASCQ 29h/02h"
        );
    }

    #[test]
    fn what_only_one_format_holds() {
        // INFORMATION above 32 bits: descriptor format only (fixed leaves VALID clear).
        let mut sense = Sense::new(SenseKey::MediumError, Asc::UNRECOVERED_READ_ERROR);
        sense.information = Some(1 << 40);
        let mut fixed = Vec::new();
        sense.write_fixed(&mut fixed);
        assert_eq!(Sense::parse(&fixed).and_then(|s| s.information), None);
        let mut desc = Vec::new();
        sense.write_descriptor(&mut desc);
        assert_eq!(Sense::parse(&desc), Some(sense));
    }

    #[test]
    fn sense_of_other_targets_and_what_is_none() {
        // Deferred fixed sense, 14 bytes: UNIT ATTENTION, POWER ON OCCURRED.
        let deferred = [0x71, 0, 0x06, 0, 0, 0, 0, 6, 0, 0, 0, 0, 0x29, 0x01];
        let s = Sense::parse(&deferred).unwrap();
        assert_eq!(
            (s.key, s.asc),
            (SenseKey::UnitAttention, Asc::POWER_ON_OCCURRED)
        );
        // An unknown descriptor is skipped; one cut short by the buffer is read as far as it goes.
        let desc = [
            0x72, 0x05, 0x24, 0x00, 0, 0, 0, 12, 0x80, 2, 0xAA, 0xBB, 0x02, 6, 0, 0, 0xC8,
        ];
        let s = Sense::parse(&desc).unwrap();
        assert_eq!(s.field.map(|f| (f.in_cdb, f.bit)), Some((true, Some(0))));
        assert_eq!(Sense::parse(&[0x70, 0, 0x0B]), None, "too short");
        assert_eq!(Sense::parse(&[0x7F; 18]), None, "vendor format");
        assert_eq!(Sense::parse(&[0x72, 0x0C, 0, 0]), None, "sense key 0Ch");
        assert_eq!(Sense::parse(&[]), None);
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
