//! The command table (DESIGN.md rule 1; modelled on FreeBSD CTL's ctl_cmd_table.c): every
//! supported operation code / service action with its CDB usage mask, data direction, CDL page
//! and decoder. Decoding, REPORT SUPPORTED OPERATION CODES and reserved-bit checks all read it.

use crate::command::Command;
use crate::decode as d;
use crate::sense::{Asc, Sense, SenseKey};

/// Direction of the data phase (SAM-5 §5.4).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Direction {
    None,
    In,
    Out,
}

/// One supported command.
pub struct CommandInfo {
    pub name: &'static str,
    /// CDB USAGE DATA (SPC-5 table 258): byte 0 is the opcode, byte 1 of a service-action
    /// command carries the service action; every other set bit is a bit the device evaluates.
    /// Its length is the CDB length.
    pub usage: &'static [u8],
    pub service_action: Option<u16>,
    pub direction: Direction,
    /// CDLP (spec/cdl.md §1.4): which CDL mode page applies; 0 until CDL pages exist.
    pub cdlp: u8,
    /// Byte 1 bits 7:5 are RDPROTECT/WRPROTECT/VRPROTECT, which must be 0 without protection
    /// information (SBC-4 §4.22.2, PROTECT = 0 in standard INQUIRY data).
    pub protect_field: bool,
    /// Nominal and recommended command timeouts in seconds (SPC-5 table 260).
    pub nominal_timeout: u32,
    pub recommended_timeout: u32,
    pub decode: fn(&[u8]) -> Result<Command, Sense>,
}

impl CommandInfo {
    pub fn opcode(&self) -> u8 {
        self.usage[0]
    }

    pub fn cdb_length(&self) -> usize {
        self.usage.len()
    }
}

const NACA: u8 = 0x04;

macro_rules! entry {
    ($name:expr, $dir:ident, $sa:expr, $protect:expr, $to:expr, $decode:path, [$($u:expr),+ $(,)?]) => {
        CommandInfo {
            name: $name,
            usage: &[$($u),+],
            service_action: $sa,
            direction: Direction::$dir,
            cdlp: 0,
            protect_field: $protect,
            nominal_timeout: $to,
            recommended_timeout: $to * 2,
            decode: $decode,
        }
    };
}

const F: u8 = 0xFF;

/// Every supported command, sorted by opcode then service action (the RSOC all-commands order).
pub static COMMANDS: &[CommandInfo] = &[
    entry!(
        "TEST UNIT READY",
        None,
        None,
        false,
        1,
        d::test_unit_ready,
        [0x00, 0, 0, 0, 0, NACA]
    ),
    entry!(
        "REQUEST SENSE",
        In,
        None,
        false,
        1,
        d::request_sense,
        [0x03, 0x01, 0, 0, F, NACA]
    ),
    entry!(
        "READ(6)",
        In,
        None,
        false,
        30,
        d::read6,
        [0x08, 0x1F, F, F, F, NACA]
    ),
    entry!(
        "WRITE(6)",
        Out,
        None,
        false,
        30,
        d::write6,
        [0x0A, 0x1F, F, F, F, NACA]
    ),
    entry!(
        "INQUIRY",
        In,
        None,
        false,
        1,
        d::inquiry,
        [0x12, 0x01, F, F, F, NACA]
    ),
    entry!(
        "MODE SELECT(6)",
        Out,
        None,
        false,
        1,
        d::mode_select6,
        [0x15, 0x10, 0, 0, F, NACA]
    ),
    entry!(
        "RESERVE(6)",
        None,
        None,
        false,
        1,
        d::reserve6,
        [0x16, 0, 0, 0, 0, NACA]
    ),
    entry!(
        "RELEASE(6)",
        None,
        None,
        false,
        1,
        d::release6,
        [0x17, 0, 0, 0, 0, NACA]
    ),
    entry!(
        "MODE SENSE(6)",
        In,
        None,
        false,
        1,
        d::mode_sense6,
        [0x1A, 0x08, F, F, F, NACA]
    ),
    entry!(
        "START STOP UNIT",
        None,
        None,
        false,
        30,
        d::start_stop_unit,
        [0x1B, 0x01, 0, 0x0F, 0xF7, NACA]
    ),
    entry!(
        "PREVENT ALLOW MEDIUM REMOVAL",
        None,
        None,
        false,
        1,
        d::prevent_allow_medium_removal,
        [0x1E, 0, 0, 0, 0x01, NACA]
    ),
    entry!(
        "READ CAPACITY(10)",
        In,
        None,
        false,
        1,
        d::read_capacity_10,
        [0x25, 0, F, F, F, F, 0, 0, 0x01, NACA]
    ),
    entry!(
        "READ(10)",
        In,
        None,
        true,
        30,
        d::read10,
        [0x28, 0x1E, F, F, F, F, 0x3F, F, F, NACA]
    ),
    entry!(
        "WRITE(10)",
        Out,
        None,
        true,
        30,
        d::write10,
        [0x2A, 0x1A, F, F, F, F, 0x3F, F, F, NACA]
    ),
    entry!(
        "WRITE AND VERIFY(10)",
        Out,
        None,
        true,
        30,
        d::write_and_verify10,
        [0x2E, 0x12, F, F, F, F, 0x3F, F, F, NACA]
    ),
    entry!(
        "VERIFY(10)",
        Out,
        None,
        true,
        30,
        d::verify10,
        [0x2F, 0x16, F, F, F, F, 0x3F, F, F, NACA]
    ),
    entry!(
        "PRE-FETCH(10)",
        None,
        None,
        false,
        30,
        d::pre_fetch10,
        [0x34, 0x02, F, F, F, F, 0x3F, F, F, NACA]
    ),
    entry!(
        "SYNCHRONIZE CACHE(10)",
        None,
        None,
        false,
        60,
        d::synchronize_cache10,
        [0x35, 0x06, F, F, F, F, 0x3F, F, F, NACA]
    ),
    entry!(
        "READ DEFECT DATA(10)",
        In,
        None,
        false,
        1,
        d::read_defect_data10,
        [0x37, 0, 0x1F, 0, 0, 0, 0, F, F, NACA]
    ),
    entry!(
        "WRITE SAME(10)",
        Out,
        None,
        true,
        60,
        d::write_same10,
        [0x41, 0x08, F, F, F, F, 0x3F, F, F, NACA]
    ),
    entry!(
        "MODE SELECT(10)",
        Out,
        None,
        false,
        1,
        d::mode_select10,
        [0x55, 0x10, 0, 0, 0, 0, 0, F, F, NACA]
    ),
    entry!(
        "MODE SENSE(10)",
        In,
        None,
        false,
        1,
        d::mode_sense10,
        [0x5A, 0x18, F, F, 0, 0, 0, F, F, NACA]
    ),
    entry!(
        "READ(16)",
        In,
        None,
        true,
        30,
        d::read16,
        [0x88, 0x1F, F, F, F, F, F, F, F, F, F, F, F, F, F, NACA]
    ),
    entry!(
        "COMPARE AND WRITE",
        Out,
        None,
        true,
        30,
        d::compare_and_write,
        [0x89, 0x1A, F, F, F, F, F, F, F, F, 0, 0, 0, F, 0x3F, NACA]
    ),
    entry!(
        "WRITE(16)",
        Out,
        None,
        true,
        30,
        d::write16,
        [0x8A, 0x1B, F, F, F, F, F, F, F, F, F, F, F, F, F, NACA]
    ),
    entry!(
        "ORWRITE(16)",
        Out,
        None,
        true,
        30,
        d::orwrite16,
        [0x8B, 0x1A, F, F, F, F, F, F, F, F, F, F, F, F, 0x1F, NACA]
    ),
    entry!(
        "WRITE AND VERIFY(16)",
        Out,
        None,
        true,
        30,
        d::write_and_verify16,
        [0x8E, 0x12, F, F, F, F, F, F, F, F, F, F, F, F, 0x3F, NACA]
    ),
    entry!(
        "VERIFY(16)",
        Out,
        None,
        true,
        30,
        d::verify16,
        [0x8F, 0x16, F, F, F, F, F, F, F, F, F, F, F, F, 0x3F, NACA]
    ),
    entry!(
        "PRE-FETCH(16)",
        None,
        None,
        false,
        30,
        d::pre_fetch16,
        [0x90, 0x02, F, F, F, F, F, F, F, F, F, F, F, F, 0x3F, NACA]
    ),
    entry!(
        "SYNCHRONIZE CACHE(16)",
        None,
        None,
        false,
        60,
        d::synchronize_cache16,
        [0x91, 0x06, F, F, F, F, F, F, F, F, F, F, F, F, 0x3F, NACA]
    ),
    entry!(
        "WRITE SAME(16)",
        Out,
        None,
        true,
        60,
        d::write_same16,
        [0x93, 0x08, F, F, F, F, F, F, F, F, F, F, F, F, 0x3F, NACA]
    ),
    entry!(
        "READ CAPACITY(16)",
        In,
        Some(0x10),
        false,
        1,
        d::read_capacity_16,
        [0x9E, 0x10, 0, 0, 0, 0, 0, 0, 0, 0, F, F, F, F, 0, NACA]
    ),
    entry!(
        "REPORT LUNS",
        In,
        None,
        false,
        1,
        d::report_luns,
        [0xA0, 0, F, 0, 0, 0, F, F, F, F, 0, NACA]
    ),
    entry!(
        "REPORT SUPPORTED OPERATION CODES",
        In,
        Some(0x0C),
        false,
        1,
        d::report_supported_operation_codes,
        [0xA3, 0x0C, 0x87, F, F, F, F, F, F, F, 0, NACA]
    ),
    entry!(
        "REPORT SUPPORTED TASK MANAGEMENT FUNCTIONS",
        In,
        Some(0x0D),
        false,
        1,
        d::report_supported_tmf,
        [0xA3, 0x0D, 0x80, 0, 0, 0, F, F, F, F, 0, NACA]
    ),
    entry!(
        "READ(12)",
        In,
        None,
        true,
        30,
        d::read12,
        [0xA8, 0x1E, F, F, F, F, F, F, F, F, 0x3F, NACA]
    ),
    entry!(
        "WRITE(12)",
        Out,
        None,
        true,
        30,
        d::write12,
        [0xAA, 0x1A, F, F, F, F, F, F, F, F, 0x3F, NACA]
    ),
    entry!(
        "WRITE AND VERIFY(12)",
        Out,
        None,
        true,
        30,
        d::write_and_verify12,
        [0xAE, 0x12, F, F, F, F, F, F, F, F, 0x3F, NACA]
    ),
    entry!(
        "VERIFY(12)",
        Out,
        None,
        true,
        30,
        d::verify12,
        [0xAF, 0x16, F, F, F, F, F, F, F, F, 0x3F, NACA]
    ),
    entry!(
        "READ DEFECT DATA(12)",
        In,
        None,
        false,
        1,
        d::read_defect_data12,
        [0xB7, 0x1F, F, F, F, F, F, F, F, F, 0, NACA]
    ),
];

/// Operation codes whose byte 1 bits 4:0 select a service action (SPC-5 §4.2.5.1).
pub fn has_service_actions(opcode: u8) -> bool {
    matches!(opcode, 0x9E | 0x9F | 0xA3 | 0xA4 | 0x7F)
}

/// The entry for an opcode (and service action, for opcodes that have them).
pub fn lookup(opcode: u8, service_action: u16) -> Option<&'static CommandInfo> {
    COMMANDS.iter().find(|c| {
        c.opcode() == opcode
            && (c.service_action.is_none() || c.service_action == Some(service_action))
    })
}

/// Decode a CDB through the table. `cdb` may be longer than the command (iSCSI carries 16
/// bytes); extra bytes are ignored.
pub fn decode(cdb: &[u8]) -> Result<(&'static CommandInfo, Command), Sense> {
    let invalid_opcode = || {
        Sense::new(
            SenseKey::IllegalRequest,
            Asc::INVALID_COMMAND_OPERATION_CODE,
        )
    };
    let Some(&opcode) = cdb.first() else {
        return Err(invalid_opcode());
    };
    let info = if has_service_actions(opcode) {
        let known = COMMANDS.iter().any(|c| c.opcode() == opcode);
        let Some(&byte1) = cdb.get(1) else {
            return Err(if known {
                Sense::invalid_field_in_cdb(0, None)
            } else {
                invalid_opcode()
            });
        };
        match lookup(opcode, (byte1 & 0x1F).into()) {
            Some(info) => info,
            None if known => return Err(Sense::invalid_field_in_cdb(1, Some(4))),
            None => return Err(invalid_opcode()),
        }
    } else {
        lookup(opcode, 0).ok_or_else(invalid_opcode)?
    };
    let Some(cdb) = cdb.get(..info.cdb_length()) else {
        // The transport delivered fewer bytes than the opcode's CDB length.
        return Err(Sense::invalid_field_in_cdb(0, None));
    };
    check_reserved(info, cdb)?;
    (info.decode)(cdb).map(|cmd| (info, cmd))
}

/// The generic checks every entry gets: protection field, bits outside the usage mask, NACA
/// (NormACA = 0 in standard INQUIRY data, so NACA = 1 is invalid: SAM-5 §5.11).
fn check_reserved(info: &CommandInfo, cdb: &[u8]) -> Result<(), Sense> {
    if info.protect_field && cdb.get(1).is_some_and(|b| b & 0xE0 != 0) {
        return Err(Sense::invalid_field_in_cdb(1, Some(7)));
    }
    let last = cdb.len() - 1;
    for (i, (&byte, &mask)) in cdb.iter().zip(info.usage).enumerate().skip(1) {
        let allowed = if i == 1 && info.service_action.is_some() {
            mask | 0x1F
        } else {
            mask
        };
        let bad = byte & !allowed;
        if bad != 0 {
            return Err(Sense::invalid_field_in_cdb(
                i as u16,
                Some(7 - bad.leading_zeros() as u8),
            ));
        }
        if i == last && byte & NACA != 0 {
            return Err(Sense::invalid_field_in_cdb(i as u16, Some(2)));
        }
    }
    Ok(())
}
