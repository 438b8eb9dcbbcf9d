//! REPORT SUPPORTED OPERATION CODES parameter data (SPC-5 §6.35.2–6.35.4), generated from the
//! command table so the device advertises exactly what it decodes.

use crate::cdl::CdlPageKind;
use crate::command::ReportSupportedOperationCodes;
use crate::sense::Sense;
use crate::table::{has_service_actions, lookup, CommandInfo, COMMANDS};

/// What a logical unit supports beyond the common command set: which table entries it reports
/// and how.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Features {
    /// Command duration limits: READ/WRITE(16)/(32) report their CDL page.
    pub cdl: bool,
    /// Thin provisioning: UNMAP is supported.
    pub thin_provisioning: bool,
    /// Explicit ALUA (gateways, docs/gateways.md): SET TARGET PORT GROUPS is supported.
    pub explicit_alua: bool,
}

impl Features {
    /// Whether the logical unit runs the table entry `info`.
    pub fn supports(&self, info: &CommandInfo) -> bool {
        (!info.thin_provisioning || self.thin_provisioning)
            && (!info.explicit_alua || self.explicit_alua)
    }
}

/// SUPPORT field values (SPC-5 table 264).
const SUPPORT_NOT_SUPPORTED: u8 = 0b001;
const SUPPORT_STANDARD: u8 = 0b011;

/// RWCDLP and CDLP of a command (SPC-6 one_command and command descriptor formats): with
/// RWCDLP = 1, CDLP 01b names the T2A and 10b the T2B mode page. Both are 0 for a command
/// without a CDL page or on a logical unit without CDL.
fn duration_limit_page(info: &CommandInfo, cdl: bool) -> (u8, u8) {
    match info.cdl_page.filter(|_| cdl) {
        Some(CdlPageKind::T2A) => (1, 0b01),
        Some(CdlPageKind::T2B) => (1, 0b10),
        None => (0, 0),
    }
}

/// Command timeouts descriptor (SPC-5 §6.35.4, table 265): 12 bytes, COMMAND TIMEOUTS
/// DESCRIPTOR LENGTH 0Ah.
fn command_timeouts_descriptor(info: &CommandInfo, out: &mut Vec<u8>) {
    out.extend_from_slice(&[0x00, 0x0A, 0, 0]);
    out.extend_from_slice(&info.nominal_timeout.to_be_bytes());
    out.extend_from_slice(&info.recommended_timeout.to_be_bytes());
}

/// All_commands parameter data (SPC-5 table 261) with command descriptors (SPC-6 command
/// descriptor format: byte 5 holds RWCDLP, MLU, CDLP, CTDP and SERVACTV).
fn all_commands(rctd: bool, features: Features, out: &mut Vec<u8>) {
    let start = out.len();
    out.extend_from_slice(&[0; 4]);
    let cdl = features.cdl;
    for info in COMMANDS.iter().filter(|i| features.supports(i)) {
        let sa = info.service_action.unwrap_or(0);
        out.extend_from_slice(&[info.opcode(), 0]);
        out.extend_from_slice(&sa.to_be_bytes());
        // Byte 5: RWCDLP (6), MLU (5:4) = 00b not reported, CDLP (3:2), CTDP (1), SERVACTV (0).
        let (rwcdlp, cdlp) = duration_limit_page(info, cdl);
        let flags =
            rwcdlp << 6 | cdlp << 2 | u8::from(rctd) << 1 | u8::from(info.service_action.is_some());
        out.extend_from_slice(&[0, flags]);
        out.extend_from_slice(&(info.cdb_length() as u16).to_be_bytes());
        if rctd {
            command_timeouts_descriptor(info, out);
        }
    }
    let len = (out.len() - start - 4) as u32;
    out[start..start + 4].copy_from_slice(&len.to_be_bytes());
}

/// One_command parameter data (SPC-6 one_command format): byte 0 bit 0 RWCDLP; byte 1 CTDP
/// (7), MLU (6:5) = 00b not reported, CDLP (4:3), SUPPORT (2:0).
fn one_command(info: Option<&CommandInfo>, rctd: bool, cdl: bool, out: &mut Vec<u8>) {
    match info {
        Some(info) => {
            let (rwcdlp, cdlp) = duration_limit_page(info, cdl);
            let ctdp = u8::from(rctd) << 7;
            out.extend_from_slice(&[rwcdlp, ctdp | cdlp << 3 | SUPPORT_STANDARD]);
            out.extend_from_slice(&(info.cdb_length() as u16).to_be_bytes());
            out.extend_from_slice(info.usage);
            if rctd {
                command_timeouts_descriptor(info, out);
            }
        }
        None => out.extend_from_slice(&[0, SUPPORT_NOT_SUPPORTED, 0, 0]),
    }
}

/// Encode the parameter data for a REPORT SUPPORTED OPERATION CODES command (not truncated).
/// `features` says what the logical unit supports: only with CDL do READ/WRITE(16)/(32) report
/// their CDL page, and only a thin-provisioned unit reports UNMAP.
///
/// REPORTING OPTIONS (SPC-5 table 257): 000b all commands; 001b one opcode, which must not
/// have service actions; 010b opcode and service action, the opcode must have them; 011b
/// opcode and service action, where an opcode without service actions and SA 0 reports that
/// one command (as FreeBSD CTL and Linux libata do; Linux probes READ(16) that way).
pub fn report_supported_operation_codes(
    r: &ReportSupportedOperationCodes,
    features: Features,
    out: &mut Vec<u8>,
) -> Result<(), Sense> {
    let opcode = r.requested_operation_code;
    let sa = r.requested_service_action;
    let with_sa = has_service_actions(opcode);
    let one = |info: Option<&CommandInfo>, out: &mut Vec<u8>| {
        one_command(
            info.filter(|i| features.supports(i)),
            r.rctd,
            features.cdl,
            out,
        )
    };
    match r.reporting_options {
        0 => all_commands(r.rctd, features, out),
        1 if with_sa => return Err(Sense::invalid_field_in_cdb(2, Some(2))),
        1 => one(lookup(opcode, None), out),
        2 if !with_sa => return Err(Sense::invalid_field_in_cdb(2, Some(2))),
        2 => one(lookup(opcode, Some(sa)), out),
        3 if with_sa => one(lookup(opcode, Some(sa)), out),
        3 if sa == 0 => one(lookup(opcode, None), out),
        3 => one(None, out),
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
        rsoc_lu(false, rctd, reporting_options, opcode, sa)
    }

    /// REPORT SUPPORTED OPERATION CODES of a unit with `features`, for `opcode`/`sa`.
    fn with(features: Features, options: u8, opcode: u8, sa: u16) -> Vec<u8> {
        let r = ReportSupportedOperationCodes {
            rctd: false,
            reporting_options: options,
            requested_operation_code: opcode,
            requested_service_action: sa,
            allocation_length: 0xFFFF,
        };
        let mut out = vec![];
        report_supported_operation_codes(&r, features, &mut out).unwrap();
        out
    }

    /// UNMAP is reported by a thin-provisioned logical unit only.
    #[test]
    fn unmap_only_with_thin_provisioning() {
        let r = |thin_provisioning, options| {
            let features = Features {
                thin_provisioning,
                ..Features::default()
            };
            with(features, options, 0x42, 0)
        };
        assert_eq!(r(true, 1)[1], SUPPORT_STANDARD);
        assert_eq!(r(false, 1), vec![0, SUPPORT_NOT_SUPPORTED, 0, 0]);
        let all = |thin| r(thin, 0)[4..].chunks(8).any(|d| d[0] == 0x42);
        assert!(all(true));
        assert!(!all(false));
    }

    /// SET TARGET PORT GROUPS is reported by a logical unit with explicit ALUA only.
    #[test]
    fn set_target_port_groups_only_with_explicit_alua() {
        let r = |explicit_alua, options| {
            let features = Features {
                explicit_alua,
                ..Features::default()
            };
            with(features, options, 0xA4, 0x0A)
        };
        let one = r(true, 2);
        assert_eq!(one[1], SUPPORT_STANDARD);
        assert_eq!(
            &one[4..],
            &[0xA4, 0x0A, 0, 0, 0, 0, 0xFF, 0xFF, 0xFF, 0xFF, 0, 0x04]
        );
        assert_eq!(r(false, 2), vec![0, SUPPORT_NOT_SUPPORTED, 0, 0]);
        let all = |explicit| {
            r(explicit, 0)[4..]
                .chunks(8)
                .any(|d| d[..4] == [0xA4, 0, 0, 0x0A])
        };
        assert!(all(true));
        assert!(!all(false));
    }

    fn rsoc_lu(
        cdl: bool,
        rctd: bool,
        reporting_options: u8,
        opcode: u8,
        sa: u16,
    ) -> Result<Vec<u8>, Sense> {
        let r = ReportSupportedOperationCodes {
            rctd,
            reporting_options,
            requested_operation_code: opcode,
            requested_service_action: sa,
            allocation_length: 0xFFFF,
        };
        let mut out = vec![];
        let features = Features {
            cdl,
            thin_provisioning: true,
            explicit_alua: true,
        };
        report_supported_operation_codes(&r, features, &mut out).map(|_| out)
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
        let info = lookup(0x28, None).unwrap();
        assert_eq!(out[1], SUPPORT_STANDARD);
        assert_eq!(u16::from_be_bytes([out[2], out[3]]), 10);
        assert_eq!(&out[4..], info.usage);
        // Unsupported opcode: SUPPORT 001b, no usage data.
        assert_eq!(rsoc(false, 1, 0x44, 0).unwrap(), vec![0, 1, 0, 0]);
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
        assert_eq!(&out[4..20], lookup(0x9E, Some(0x10)).unwrap().usage);
        assert_eq!(&out[20..22], &[0, 0x0A]);
        assert_eq!(out.len(), 4 + 16 + 12);
        assert_eq!(rsoc(false, 2, 0x9E, 0x1F).unwrap(), vec![0, 1, 0, 0]);
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

    /// What Linux's scsi_cdl_check_cmd concludes: RSOC with REPORTING OPTIONS 01h (SA 0) or
    /// 03h, data cut to 4 + COMMAND_SIZE(opcode) bytes (16 for 88h/8Ah, 12 for 7Fh); an
    /// ILLEGAL REQUEST means "no", else SUPPORT must be 011b and CDLP 1 or 2 (RWCDLP ignored).
    fn linux_cdl_check_cmd(cdl: bool, opcode: u8, sa: u16) -> bool {
        let options = if sa == 0 { 1 } else { 3 };
        let Ok(mut buf) = rsoc_lu(cdl, false, options, opcode, sa) else {
            return false;
        };
        buf.truncate(4 + if opcode == 0x7F { 12 } else { 16 });
        let cdlp = (buf[1] & 0x18) >> 3;
        buf[1] & 0x03 == 0x03 && (cdlp == 1 || cdlp == 2)
    }

    /// sg_opcodes' list_one() reading of one_command data: (RWCDLP, CDLP, MLU, SUPPORT).
    fn sg_opcodes_one(buf: &[u8]) -> (u8, u8, u8, u8) {
        (buf[0] & 1, (buf[1] >> 3) & 3, (buf[1] >> 5) & 3, buf[1] & 7)
    }

    const PROBES: [(u8, u16, u8); 4] = [
        (0x88, 0, 0b01),
        (0x8A, 0, 0b10),
        (0x7F, 0x0009, 0b01),
        (0x7F, 0x000B, 0b10),
    ];

    #[test]
    fn linux_detects_cdl_only_on_a_cdl_logical_unit() {
        for (opcode, sa, _) in PROBES {
            assert!(
                linux_cdl_check_cmd(true, opcode, sa),
                "{opcode:02X}h/{sa:04X}h"
            );
            assert!(
                !linux_cdl_check_cmd(false, opcode, sa),
                "{opcode:02X}h/{sa:04X}h"
            );
        }
        // The four commands are still supported without CDL, with RWCDLP = CDLP = 0.
        for (opcode, sa, _) in PROBES {
            let options = if sa == 0 { 1 } else { 3 };
            let buf = rsoc_lu(false, false, options, opcode, sa).unwrap();
            assert_eq!(sg_opcodes_one(&buf), (0, 0, 0, SUPPORT_STANDARD));
        }
        // No other command names a CDL page.
        let out = rsoc_lu(true, false, 1, 0x28, 0).unwrap();
        assert_eq!(sg_opcodes_one(&out), (0, 0, 0, SUPPORT_STANDARD));
    }

    #[test]
    fn one_command_reports_the_cdl_page_and_dld_bits() {
        // cdl-tools asks with REPORTING OPTIONS 03h for all four, 512 bytes; sg_opcodes shows
        // "Command duration limit T2A mode page" for RWCDLP = 1, CDLP = 01b, T2B for 10b.
        for (opcode, sa, cdlp) in PROBES {
            let buf = rsoc_lu(true, false, 3, opcode, sa).unwrap();
            assert_eq!(sg_opcodes_one(&buf), (1, cdlp, 0, SUPPORT_STANDARD));
            let size = usize::from(u16::from_be_bytes([buf[2], buf[3]]));
            assert_eq!(buf.len(), 4 + size);
            let usage = &buf[4..];
            assert_eq!(usage[0], opcode);
            if opcode == 0x7F {
                // READ(32)/WRITE(32): 32 bytes, ADDITIONAL CDB LENGTH and SA in place, DLD2:0
                // in byte 11 bits 2:0.
                assert_eq!(size, 32);
                assert_eq!(&usage[7..10], &[0x18, 0x00, sa as u8]);
                assert_eq!(usage[11] & 0x07, 0x07);
            } else {
                // READ(16)/WRITE(16): DLD2 in byte 1 bit 0, DLD1:DLD0 in byte 14 bits 7:6.
                assert_eq!(size, 16);
                assert_eq!(usage[1] & 0x01, 0x01);
                assert_eq!(usage[14] & 0xC0, 0xC0);
            }
        }
        // With RCTD the timeouts descriptor follows the usage data and CTDP is set.
        let buf = rsoc_lu(true, true, 2, 0x7F, 0x000B).unwrap();
        assert_eq!(buf[1], 0x80 | 0b10 << 3 | SUPPORT_STANDARD);
        assert_eq!(buf.len(), 4 + 32 + 12);
        assert_eq!(&buf[36..38], &[0x00, 0x0A]);
    }

    #[test]
    fn variable_length_opcode_reporting_options() {
        // 7Fh has service actions (bytes 8–9): option 1 is refused, 2 and 3 look the SA up.
        assert_eq!(
            rsoc(false, 1, 0x7F, 0).unwrap_err(),
            Sense::invalid_field_in_cdb(2, Some(2))
        );
        let out = rsoc(false, 2, 0x7F, 0x0009).unwrap();
        assert_eq!(&out[4..], lookup(0x7F, Some(0x0009)).unwrap().usage);
        assert_eq!(rsoc(false, 3, 0x7F, 0x0000).unwrap(), vec![0, 1, 0, 0]);
        assert_eq!(rsoc(false, 2, 0x7F, 0x000A).unwrap(), vec![0, 1, 0, 0]);
    }

    #[test]
    fn all_commands_cdl_fields() {
        // sg_opcodes' all-commands decoding of byte 5: RWCDLP (6), MLU (5:4), CDLP (3:2),
        // CTDP (1), SERVACTV (0).
        for cdl in [false, true] {
            let out = rsoc_lu(cdl, false, 0, 0, 0).unwrap();
            let mut limited = vec![];
            for (d, info) in out[4..].chunks(8).zip(COMMANDS) {
                let (rwcdlp, mlu, cdlp) = ((d[5] >> 6) & 1, (d[5] >> 4) & 3, (d[5] >> 2) & 3);
                assert_eq!(mlu, 0, "{}", info.name);
                assert_eq!(d[5] & 0x80, 0, "{} reserved bit 7", info.name);
                if rwcdlp != 0 || cdlp != 0 {
                    let sa = u16::from_be_bytes([d[2], d[3]]);
                    limited.push((d[0], sa, rwcdlp, cdlp, d[5] & 1));
                }
            }
            let expected = if cdl {
                vec![
                    (0x7F, 0x0009, 1, 0b01, 1),
                    (0x7F, 0x000B, 1, 0b10, 1),
                    (0x88, 0, 1, 0b01, 0),
                    (0x8A, 0, 1, 0b10, 0),
                ]
            } else {
                vec![]
            };
            assert_eq!(limited, expected, "cdl {cdl}");
        }
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
