//! REPORT SUPPORTED OPERATION CODES parameter data (SPC-5 §6.35.2–6.35.4), generated from the
//! command table so the device advertises exactly what it decodes.

use crate::command::ReportSupportedOperationCodes;
use crate::sense::Sense;
use crate::table::{has_service_actions, CommandInfo, COMMANDS};

/// SUPPORT field values (SPC-5 table 264).
const SUPPORT_NOT_SUPPORTED: u8 = 0b001;
const SUPPORT_STANDARD: u8 = 0b011;

/// Command timeouts descriptor (SPC-5 §6.35.4, table 265): 12 bytes, COMMAND TIMEOUTS
/// DESCRIPTOR LENGTH 0Ah.
fn command_timeouts_descriptor(info: &CommandInfo, out: &mut Vec<u8>) {
    out.extend_from_slice(&[0x00, 0x0A, 0, 0]);
    out.extend_from_slice(&info.nominal_timeout.to_be_bytes());
    out.extend_from_slice(&info.recommended_timeout.to_be_bytes());
}

/// All_commands parameter data (SPC-5 table 261) with command descriptors (table 262).
fn all_commands(rctd: bool, out: &mut Vec<u8>) {
    let start = out.len();
    out.extend_from_slice(&[0; 4]);
    for info in COMMANDS {
        let sa = info.service_action.unwrap_or(0);
        out.extend_from_slice(&[info.opcode(), 0]);
        out.extend_from_slice(&sa.to_be_bytes());
        // Byte 5: CDLP (3:2), CTDP (1), SERVACTV (0).
        let flags =
            (info.cdlp & 3) << 2 | u8::from(rctd) << 1 | u8::from(info.service_action.is_some());
        out.extend_from_slice(&[0, flags]);
        out.extend_from_slice(&(info.cdb_length() as u16).to_be_bytes());
        if rctd {
            command_timeouts_descriptor(info, out);
        }
    }
    let len = (out.len() - start - 4) as u32;
    out[start..start + 4].copy_from_slice(&len.to_be_bytes());
}

/// One_command parameter data (SPC-5 table 263; spec/cdl.md §1.3).
fn one_command(info: Option<&CommandInfo>, rctd: bool, out: &mut Vec<u8>) {
    match info {
        Some(info) => {
            let ctdp = u8::from(rctd) << 7;
            out.extend_from_slice(&[0, ctdp | (info.cdlp & 3) << 3 | SUPPORT_STANDARD]);
            out.extend_from_slice(&(info.cdb_length() as u16).to_be_bytes());
            out.extend_from_slice(info.usage);
            if rctd {
                command_timeouts_descriptor(info, out);
            }
        }
        None => out.extend_from_slice(&[0, SUPPORT_NOT_SUPPORTED, 0, 0]),
    }
}

fn find(opcode: u8, sa: Option<u16>) -> Option<&'static CommandInfo> {
    COMMANDS
        .iter()
        .find(|c| c.opcode() == opcode && c.service_action == sa)
}

/// Encode the parameter data for a REPORT SUPPORTED OPERATION CODES command (not truncated).
///
/// REPORTING OPTIONS (SPC-5 table 257): 000b all commands; 001b one opcode, which must not
/// have service actions; 010b opcode and service action, the opcode must have them; 011b
/// opcode and service action, where an opcode without service actions and SA 0 reports that
/// one command
/// (spec/cdl.md §1.2, as FreeBSD CTL and libata do).
pub fn report_supported_operation_codes(
    r: &ReportSupportedOperationCodes,
    out: &mut Vec<u8>,
) -> Result<(), Sense> {
    let opcode = r.requested_operation_code;
    let sa = r.requested_service_action;
    let with_sa = has_service_actions(opcode);
    match r.reporting_options {
        0 => all_commands(r.rctd, out),
        1 if with_sa => return Err(Sense::invalid_field_in_cdb(2, Some(2))),
        1 => one_command(find(opcode, None), r.rctd, out),
        2 if !with_sa => return Err(Sense::invalid_field_in_cdb(2, Some(2))),
        2 => one_command(find(opcode, Some(sa)), r.rctd, out),
        3 if with_sa => one_command(find(opcode, Some(sa)), r.rctd, out),
        3 if sa == 0 => one_command(find(opcode, None), r.rctd, out),
        3 => one_command(None, r.rctd, out),
        _ => return Err(Sense::invalid_field_in_cdb(2, Some(2))),
    }
    Ok(())
}

/// REPORT SUPPORTED TASK MANAGEMENT FUNCTIONS parameter data (SPC-5 §6.36, tables 260–261):
/// ABORT TASK, ABORT TASK SET, CLEAR TASK SET, LOGICAL UNIT RESET; with REPD the 16-byte
/// extended format (I_T NEXUS RESET and QUERY functions not supported).
pub fn report_supported_task_management_functions(repd: bool, out: &mut Vec<u8>) {
    // Byte 0: ATS (7), ATSS (6), CACAS (5), CTSS (4), LURS (3), QTS (2), TRS (1, obsolete).
    let b0 = 0x80 | 0x40 | 0x10 | 0x08;
    if repd {
        // Byte 3: REPORT SUPPORTED TASK MANAGEMENT FUNCTIONS ADDITIONAL DATA LENGTH = 0Ch.
        out.extend_from_slice(&[b0, 0, 0, 0x0C]);
        out.extend_from_slice(&[0; 12]);
    } else {
        out.extend_from_slice(&[b0, 0, 0, 0]);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rsoc(rctd: bool, reporting_options: u8, opcode: u8, sa: u16) -> Result<Vec<u8>, Sense> {
        let r = ReportSupportedOperationCodes {
            rctd,
            reporting_options,
            requested_operation_code: opcode,
            requested_service_action: sa,
            allocation_length: 0xFFFF,
        };
        let mut out = vec![];
        report_supported_operation_codes(&r, &mut out).map(|_| out)
    }

    #[test]
    fn all_commands_matches_table() {
        for rctd in [false, true] {
            let out = rsoc(rctd, 0, 0, 0).unwrap();
            let size = if rctd { 20 } else { 8 };
            assert_eq!(out.len(), 4 + size * COMMANDS.len());
            assert_eq!(
                u32::from_be_bytes([out[0], out[1], out[2], out[3]]) as usize,
                out.len() - 4
            );
            for (d, info) in out[4..].chunks(size).zip(COMMANDS) {
                assert_eq!(d[0], info.opcode());
                assert_eq!(
                    u16::from_be_bytes([d[2], d[3]]),
                    info.service_action.unwrap_or(0)
                );
                assert_eq!(
                    d[5] & 1,
                    u8::from(info.service_action.is_some()),
                    "SERVACTV {}",
                    info.name
                );
                assert_eq!(d[5] >> 1 & 1, u8::from(rctd), "CTDP");
                assert_eq!(
                    usize::from(u16::from_be_bytes([d[6], d[7]])),
                    info.cdb_length()
                );
                if rctd {
                    assert_eq!(&d[8..10], &[0, 0x0A]);
                    assert_eq!(&d[12..16], &info.nominal_timeout.to_be_bytes());
                }
            }
        }
    }

    #[test]
    fn one_command_by_opcode() {
        let out = rsoc(false, 1, 0x28, 0).unwrap();
        let info = find(0x28, None).unwrap();
        assert_eq!(out[1], SUPPORT_STANDARD);
        assert_eq!(u16::from_be_bytes([out[2], out[3]]), 10);
        assert_eq!(&out[4..], info.usage);
        // Unsupported opcode: SUPPORT 001b, no usage data.
        assert_eq!(rsoc(false, 1, 0x42, 0).unwrap(), vec![0, 1, 0, 0]);
        // Opcode with service actions needs option 2 or 3.
        assert_eq!(
            rsoc(false, 1, 0x9E, 0x10).unwrap_err(),
            Sense::invalid_field_in_cdb(2, Some(2))
        );
    }

    #[test]
    fn one_command_with_service_action() {
        let out = rsoc(true, 2, 0x9E, 0x10).unwrap();
        assert_eq!(out[1], 0x80 | SUPPORT_STANDARD);
        assert_eq!(&out[4..20], find(0x9E, Some(0x10)).unwrap().usage);
        assert_eq!(&out[20..22], &[0, 0x0A]);
        assert_eq!(out.len(), 4 + 16 + 12);
        assert_eq!(rsoc(false, 2, 0x9E, 0x11).unwrap(), vec![0, 1, 0, 0]);
        assert_eq!(
            rsoc(false, 2, 0x88, 0).unwrap_err(),
            Sense::invalid_field_in_cdb(2, Some(2))
        );
    }

    #[test]
    fn option_three_accepts_plain_opcodes() {
        let out = rsoc(false, 3, 0x88, 0).unwrap();
        assert_eq!(out[1] & 7, SUPPORT_STANDARD);
        assert_eq!(out[4], 0x88);
        assert_eq!(rsoc(false, 3, 0x88, 5).unwrap(), vec![0, 1, 0, 0]);
        let out = rsoc(false, 3, 0xA3, 0x0C).unwrap();
        assert_eq!(&out[4..6], &[0xA3, 0x0C]);
    }

    #[test]
    fn tmf_formats() {
        let mut out = vec![];
        report_supported_task_management_functions(false, &mut out);
        assert_eq!(out, vec![0xD8, 0, 0, 0]);
        out.clear();
        report_supported_task_management_functions(true, &mut out);
        assert_eq!(out.len(), 16);
        assert_eq!(out[3], 0x0C);
    }
}
