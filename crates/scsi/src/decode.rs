//! CDB decoders, one per table entry. They run after the table's generic checks (length,
//! protection field, reserved bits against the CDB usage mask, NACA), so they only validate
//! field *values*. Field pointers cite the CDB byte and the most significant bit of the field.

use crate::cdb::{be16, be24, be32, be64, bit, u8_at};
use crate::command::*;
use crate::persistent_reserve::{PrInAction, PrOutAction, MAX_PARAMETER_LIST};
use crate::sanitize::SanitizeAction;
use crate::sense::{Asc, Sense, SenseKey};

type Decoded = Result<Command, Sense>;

pub(crate) fn test_unit_ready(_: &[u8]) -> Decoded {
    Ok(Command::TestUnitReady)
}

/// REQUEST SENSE (SPC-5 table 276).
pub(crate) fn request_sense(c: &[u8]) -> Decoded {
    Ok(Command::RequestSense {
        desc: bit(c, 1, 0),
        allocation_length: u8_at(c, 4),
    })
}

/// INQUIRY (SPC-5 table 145): a page code without EVPD is an error.
pub(crate) fn inquiry(c: &[u8]) -> Decoded {
    let evpd = bit(c, 1, 0);
    let page_code = u8_at(c, 2);
    if !evpd && page_code != 0 {
        return Err(Sense::invalid_field_in_cdb(2, None));
    }
    Ok(Command::Inquiry(Inquiry {
        evpd,
        page_code,
        allocation_length: be16(c, 3),
    }))
}

/// RESERVE (6)/(10) (SPC-2 §7.21, §7.22): the third-party, extent and LONGID fields are not
/// supported, so the table leaves them out of the usage mask.
pub(crate) fn reserve(_: &[u8]) -> Decoded {
    Ok(Command::Reserve)
}

/// RELEASE (6)/(10) (SPC-2 §7.16, §7.17).
pub(crate) fn release(_: &[u8]) -> Decoded {
    Ok(Command::Release)
}

/// PERSISTENT RESERVE IN (SPC-4 table 200); the table found the service action.
pub(crate) fn persistent_reserve_in(c: &[u8]) -> Decoded {
    let service_action = match u8_at(c, 1) & 0x1F {
        0x00 => PrInAction::ReadKeys,
        0x01 => PrInAction::ReadReservation,
        0x02 => PrInAction::ReportCapabilities,
        _ => PrInAction::ReadFullStatus,
    };
    Ok(Command::PersistentReserveIn(PersistentReserveIn {
        service_action,
        allocation_length: be16(c, 7),
    }))
}

/// PERSISTENT RESERVE OUT (SPC-4 table 212): a parameter list longer than any this device
/// takes is refused before its data is asked for (§6.16.1).
pub(crate) fn persistent_reserve_out(c: &[u8]) -> Decoded {
    let service_action = match u8_at(c, 1) & 0x1F {
        0x00 => PrOutAction::Register,
        0x01 => PrOutAction::Reserve,
        0x02 => PrOutAction::Release,
        0x03 => PrOutAction::Clear,
        0x04 => PrOutAction::Preempt,
        0x05 => PrOutAction::PreemptAndAbort,
        0x06 => PrOutAction::RegisterAndIgnoreExistingKey,
        _ => PrOutAction::RegisterAndMove,
    };
    let parameter_list_length = be32(c, 5);
    if parameter_list_length > MAX_PARAMETER_LIST {
        return Err(Sense::new(
            SenseKey::IllegalRequest,
            Asc::PARAMETER_LIST_LENGTH_ERROR,
        ));
    }
    Ok(Command::PersistentReserveOut(PersistentReserveOut {
        service_action,
        scope_type: u8_at(c, 2),
        parameter_list_length,
    }))
}

/// REPORT LUNS (SPC-5 table 262).
pub(crate) fn report_luns(c: &[u8]) -> Decoded {
    Ok(Command::ReportLuns {
        select_report: u8_at(c, 2),
        allocation_length: be32(c, 6),
    })
}

/// READ CAPACITY (10) (SBC-4 table 63): PMI = 0 requires LOGICAL BLOCK ADDRESS = 0.
pub(crate) fn read_capacity_10(c: &[u8]) -> Decoded {
    if !bit(c, 8, 0) && be32(c, 2) != 0 {
        return Err(Sense::invalid_field_in_cdb(2, None));
    }
    Ok(Command::ReadCapacity10)
}

/// READ CAPACITY (16) (SBC-4 table 65).
pub(crate) fn read_capacity_16(c: &[u8]) -> Decoded {
    Ok(Command::ReadCapacity16 {
        allocation_length: be32(c, 10),
    })
}

fn rw(lba: u64, transfer_length: u32, c: &[u8], group_byte: usize) -> ReadWrite {
    ReadWrite {
        lba,
        transfer_length,
        dpo: bit(c, 1, 4),
        fua: bit(c, 1, 3),
        group_number: u8_at(c, group_byte) & 0x3F,
        dld: 0,
    }
}

/// READ (6)/WRITE (6) (SBC-4 tables 80, 121): 21-bit LBA; TRANSFER LENGTH 0 means 256.
fn rw6(c: &[u8]) -> ReadWrite {
    let lba = u64::from(be24(c, 1) & 0x1F_FFFF);
    let len = match u8_at(c, 4) {
        0 => 256,
        n => u32::from(n),
    };
    ReadWrite {
        lba,
        transfer_length: len,
        dpo: false,
        fua: false,
        group_number: 0,
        dld: 0,
    }
}

/// (10)-byte layout (SBC-4 tables 81, 122): LBA 2..6, GROUP 6, TRANSFER LENGTH 7..9.
fn rw10(c: &[u8]) -> ReadWrite {
    rw(be32(c, 2).into(), be16(c, 7).into(), c, 6)
}

/// (12)-byte layout (SBC-4 tables 82, 123): LBA 2..6, TRANSFER LENGTH 6..10, GROUP 10.
fn rw12(c: &[u8]) -> ReadWrite {
    rw(be32(c, 2).into(), be32(c, 6), c, 10)
}

/// (16)-byte layout (SBC-5 tables for READ(16)/WRITE(16)): LBA 2..10, TRANSFER LENGTH 10..14,
/// DLD2 in byte 1 bit 0, DLD1:DLD0 in byte 14 bits 7:6, GROUP 14 bits 5:0.
fn rw16(c: &[u8]) -> ReadWrite {
    let mut r = rw(be64(c, 2), be32(c, 10), c, 14);
    r.dld = (u8_at(c, 1) & 1) << 2 | u8_at(c, 14) >> 6;
    r
}

/// READ(32)/WRITE(32) (SBC-4 READ(32) and WRITE(32) tables): GROUP NUMBER in byte 6, DPO and
/// FUA in byte 10, DLD2:DLD0 in byte 11 bits 2:0 (SBC-5; where Linux sd puts them), LBA 12..20,
/// TRANSFER LENGTH 28..32. The expected tags (bytes 20–27) only matter with protection
/// information, which RDPROTECT/WRPROTECT = 0 rules out.
fn rw32(c: &[u8]) -> ReadWrite {
    ReadWrite {
        lba: be64(c, 12),
        transfer_length: be32(c, 28),
        dpo: bit(c, 10, 4),
        fua: bit(c, 10, 3),
        group_number: u8_at(c, 6) & 0x3F,
        dld: u8_at(c, 11) & 0x07,
    }
}

pub(crate) fn read6(c: &[u8]) -> Decoded {
    Ok(Command::Read(rw6(c)))
}
pub(crate) fn read10(c: &[u8]) -> Decoded {
    Ok(Command::Read(rw10(c)))
}
pub(crate) fn read12(c: &[u8]) -> Decoded {
    Ok(Command::Read(rw12(c)))
}
pub(crate) fn read16(c: &[u8]) -> Decoded {
    Ok(Command::Read(rw16(c)))
}
pub(crate) fn read32(c: &[u8]) -> Decoded {
    Ok(Command::Read(rw32(c)))
}
pub(crate) fn write6(c: &[u8]) -> Decoded {
    Ok(Command::Write(rw6(c)))
}
pub(crate) fn write10(c: &[u8]) -> Decoded {
    Ok(Command::Write(rw10(c)))
}
pub(crate) fn write12(c: &[u8]) -> Decoded {
    Ok(Command::Write(rw12(c)))
}
pub(crate) fn write16(c: &[u8]) -> Decoded {
    Ok(Command::Write(rw16(c)))
}
pub(crate) fn write32(c: &[u8]) -> Decoded {
    Ok(Command::Write(rw32(c)))
}

/// ORWRITE (16) (SBC-4 §5.8, table 75): the (16) layout without DLD bits.
pub(crate) fn orwrite16(c: &[u8]) -> Decoded {
    Ok(Command::OrWrite(rw(be64(c, 2), be32(c, 10), c, 14)))
}

/// COMPARE AND WRITE (SBC-4 §5.3, table 42): NUMBER OF LOGICAL BLOCKS in byte 13.
pub(crate) fn compare_and_write(c: &[u8]) -> Decoded {
    Ok(Command::CompareAndWrite(ReadWrite {
        lba: be64(c, 2),
        transfer_length: u8_at(c, 13).into(),
        dpo: bit(c, 1, 4),
        fua: bit(c, 1, 3),
        group_number: u8_at(c, 14) & 0x3F,
        dld: 0,
    }))
}

/// READ DEFECT DATA (10) (SBC-4 §5.12, table 44): REQ_PLIST, REQ_GLIST and the DEFECT LIST
/// FORMAT in byte 2.
pub(crate) fn read_defect_data10(c: &[u8]) -> Decoded {
    Ok(Command::ReadDefectData(ReadDefectData {
        long: false,
        req_plist: bit(c, 2, 4),
        req_glist: bit(c, 2, 3),
        defect_list_format: u8_at(c, 2) & 7,
        allocation_length: be16(c, 7).into(),
    }))
}

/// READ DEFECT DATA (12) (SBC-4 §5.13, table 47): the same fields in byte 1; ADDRESS
/// DESCRIPTOR INDEX (bytes 2–5) is ignored, every list being empty.
pub(crate) fn read_defect_data12(c: &[u8]) -> Decoded {
    Ok(Command::ReadDefectData(ReadDefectData {
        long: true,
        req_plist: bit(c, 1, 4),
        req_glist: bit(c, 1, 3),
        defect_list_format: u8_at(c, 1) & 7,
        allocation_length: be32(c, 6),
    }))
}

/// WRITE SAME (10) (SBC-4 §5.46, table 124). ANCHOR and the obsolete PBDATA/LBDATA are
/// outside the usage mask, so setting them is an invalid field: with ANC_SUP = 0 in the
/// Logical Block Provisioning VPD page, SBC-4 requires INVALID FIELD IN CDB for ANCHOR = 1. UNMAP is decoded so that a
/// write-protected LU can answer WRITE PROTECTED first; the LU refuses it while LBPWS10 = 0.
pub(crate) fn write_same10(c: &[u8]) -> Decoded {
    Ok(Command::WriteSame(WriteSame {
        unmap: bit(c, 1, 3),
        ndob: false,
        lba: be32(c, 2).into(),
        number_of_logical_blocks: be16(c, 7).into(),
        group_number: u8_at(c, 6) & 0x3F,
    }))
}

/// WRITE SAME (16) (SBC-4 §5.47, table 125), with NDOB.
pub(crate) fn write_same16(c: &[u8]) -> Decoded {
    Ok(Command::WriteSame(WriteSame {
        unmap: bit(c, 1, 3),
        ndob: bit(c, 1, 0),
        lba: be64(c, 2),
        number_of_logical_blocks: be32(c, 10),
        group_number: u8_at(c, 14) & 0x3F,
    }))
}

/// WRITE SAME (32) (SBC-4): the fields of WRITE SAME (16) at the variable length
/// CDB's offsets (UNMAP and NDOB in byte 10, LBA in bytes 12–19, NUMBER OF LOGICAL BLOCKS in
/// bytes 28–31); ANCHOR is outside the usage mask as in the (10) and (16) forms.
pub(crate) fn write_same32(c: &[u8]) -> Decoded {
    Ok(Command::WriteSame(WriteSame {
        unmap: bit(c, 10, 3),
        ndob: bit(c, 10, 0),
        lba: be64(c, 12),
        number_of_logical_blocks: be32(c, 28),
        group_number: u8_at(c, 6) & 0x3F,
    }))
}

/// UNMAP (SBC-4 §5.30, table 120); ANCHOR is outside the usage mask (ANC_SUP = 0).
pub(crate) fn unmap(c: &[u8]) -> Decoded {
    Ok(Command::Unmap(Unmap {
        group_number: u8_at(c, 6) & 0x3F,
        parameter_list_length: be16(c, 7),
    }))
}

/// GET LBA STATUS (SBC-4 §5.8, table 69); REPORT TYPE is outside the usage mask (all LBAs).
pub(crate) fn get_lba_status(c: &[u8]) -> Decoded {
    Ok(Command::GetLbaStatus {
        lba: be64(c, 2),
        allocation_length: be32(c, 10),
    })
}

/// BYTCHK in byte 1 bits 2:1 (SBC-4 table 89): 10b is reserved.
fn bytchk(c: &[u8]) -> Result<ByteCheck, Sense> {
    match (u8_at(c, 1) >> 1) & 3 {
        0 => Ok(ByteCheck::None),
        1 => Ok(ByteCheck::Compare),
        3 => Ok(ByteCheck::CompareOneBlock),
        _ => Err(Sense::invalid_field_in_cdb(1, Some(2))),
    }
}

fn verify(r: ReadWrite, c: &[u8]) -> Decoded {
    Ok(Command::Verify(Verify {
        lba: r.lba,
        verification_length: r.transfer_length,
        dpo: r.dpo,
        bytchk: bytchk(c)?,
        group_number: r.group_number,
    }))
}
pub(crate) fn verify10(c: &[u8]) -> Decoded {
    verify(rw10(c), c)
}
pub(crate) fn verify12(c: &[u8]) -> Decoded {
    verify(rw12(c), c)
}
pub(crate) fn verify16(c: &[u8]) -> Decoded {
    verify(rw(be64(c, 2), be32(c, 10), c, 14), c)
}

/// WRITE AND VERIFY: BYTCHK 11b is reserved too (SBC-4 table 118).
fn write_and_verify(r: ReadWrite, c: &[u8]) -> Decoded {
    let bytchk = match bytchk(c)? {
        ByteCheck::CompareOneBlock => return Err(Sense::invalid_field_in_cdb(1, Some(2))),
        b => b,
    };
    Ok(Command::WriteAndVerify(WriteAndVerify {
        lba: r.lba,
        transfer_length: r.transfer_length,
        dpo: r.dpo,
        bytchk,
        group_number: r.group_number,
    }))
}
pub(crate) fn write_and_verify10(c: &[u8]) -> Decoded {
    write_and_verify(rw10(c), c)
}
pub(crate) fn write_and_verify12(c: &[u8]) -> Decoded {
    write_and_verify(rw12(c), c)
}
pub(crate) fn write_and_verify16(c: &[u8]) -> Decoded {
    write_and_verify(rw(be64(c, 2), be32(c, 10), c, 14), c)
}

fn cache_range(lba: u64, blocks: u32, c: &[u8]) -> CacheRange {
    CacheRange {
        lba,
        number_of_logical_blocks: blocks,
        immed: bit(c, 1, 1),
    }
}
pub(crate) fn synchronize_cache10(c: &[u8]) -> Decoded {
    Ok(Command::SynchronizeCache(cache_range(
        be32(c, 2).into(),
        be16(c, 7).into(),
        c,
    )))
}
pub(crate) fn synchronize_cache16(c: &[u8]) -> Decoded {
    Ok(Command::SynchronizeCache(cache_range(
        be64(c, 2),
        be32(c, 10),
        c,
    )))
}
pub(crate) fn pre_fetch10(c: &[u8]) -> Decoded {
    Ok(Command::PreFetch(cache_range(
        be32(c, 2).into(),
        be16(c, 7).into(),
        c,
    )))
}
pub(crate) fn pre_fetch16(c: &[u8]) -> Decoded {
    Ok(Command::PreFetch(cache_range(be64(c, 2), be32(c, 10), c)))
}

/// PC (byte 2 bits 7:6, SPC-5 table 165). Whether saved values exist depends on the logical
/// unit, so MODE SENSE answers PC = 11b, not the decoder.
fn mode_sense(c: &[u8], ten: bool, allocation_length: u16) -> Decoded {
    let pc = match u8_at(c, 2) >> 6 {
        0 => PageControl::Current,
        1 => PageControl::Changeable,
        2 => PageControl::Default,
        _ => PageControl::Saved,
    };
    Ok(Command::ModeSense(ModeSense {
        ten,
        dbd: bit(c, 1, 3),
        llbaa: ten && bit(c, 1, 4),
        pc,
        page_code: u8_at(c, 2) & 0x3F,
        subpage_code: u8_at(c, 3),
        allocation_length,
    }))
}
/// MODE SENSE (6) (SPC-5 table 167).
pub(crate) fn mode_sense6(c: &[u8]) -> Decoded {
    mode_sense(c, false, u8_at(c, 4).into())
}
/// MODE SENSE (10) (SPC-5 table 169).
pub(crate) fn mode_sense10(c: &[u8]) -> Decoded {
    mode_sense(c, true, be16(c, 7))
}

/// SP (byte 1 bit 0) is decoded; MODE SELECT refuses it on a logical unit that cannot save
/// (SPC-5 §6.12).
fn mode_select(c: &[u8], ten: bool, parameter_list_length: u16) -> Decoded {
    Ok(Command::ModeSelect(ModeSelect {
        ten,
        pf: bit(c, 1, 4),
        sp: bit(c, 1, 0),
        parameter_list_length,
    }))
}
/// MODE SELECT (6) (SPC-5 table 161).
pub(crate) fn mode_select6(c: &[u8]) -> Decoded {
    mode_select(c, false, u8_at(c, 4).into())
}
/// MODE SELECT (10) (SPC-5 table 163).
pub(crate) fn mode_select10(c: &[u8]) -> Decoded {
    mode_select(c, true, be16(c, 7))
}

/// LOG SENSE (SPC-5 LOG SENSE command table). SP (byte 1 bit 0) and the obsolete PPC (bit 1)
/// are outside the usage mask: no log parameters are saved, so SP = 1 fails the generic
/// reserved-bit check with the pointer at byte 1 bit 0.
pub(crate) fn log_sense(c: &[u8]) -> Decoded {
    Ok(Command::LogSense(LogSense {
        pc: log_page_control(c),
        page_code: u8_at(c, 2) & 0x3F,
        subpage_code: u8_at(c, 3),
        parameter_pointer: be16(c, 5),
        allocation_length: be16(c, 7),
    }))
}

/// PC field, byte 2 bits 7:6, of LOG SENSE and LOG SELECT.
fn log_page_control(c: &[u8]) -> LogPageControl {
    match u8_at(c, 2) >> 6 {
        0 => LogPageControl::ThresholdValues,
        1 => LogPageControl::CumulativeValues,
        2 => LogPageControl::DefaultThresholdValues,
        _ => LogPageControl::DefaultCumulativeValues,
    }
}

/// LOG SELECT (SPC-5 LOG SELECT command table). SP (byte 1 bit 0) and PARAMETER LIST LENGTH
/// are outside the usage mask: no log parameter is saved or changeable.
pub(crate) fn log_select(c: &[u8]) -> Decoded {
    Ok(Command::LogSelect(LogSelect {
        pcr: bit(c, 1, 1),
        pc: log_page_control(c),
        page_code: u8_at(c, 2) & 0x3F,
        subpage_code: u8_at(c, 3),
    }))
}

/// START STOP UNIT (SBC-4 table 95). Every POWER CONDITION value is accepted: the device
/// models no power states, so each is a no-op (libiscsi's PwrCnd test expects GOOD for 1h–Fh).
pub(crate) fn start_stop_unit(c: &[u8]) -> Decoded {
    Ok(Command::StartStopUnit(StartStopUnit {
        immed: bit(c, 1, 0),
        power_condition_modifier: u8_at(c, 3) & 0x0F,
        power_condition: u8_at(c, 4) >> 4,
        no_flush: bit(c, 4, 2),
        loej: bit(c, 4, 1),
        start: bit(c, 4, 0),
    }))
}

/// PREVENT ALLOW MEDIUM REMOVAL (SBC-4 table 71): PREVENT 10b and 11b are obsolete, so bit 1
/// is outside the usage mask.
pub(crate) fn prevent_allow_medium_removal(c: &[u8]) -> Decoded {
    Ok(Command::PreventAllowMediumRemoval {
        prevent: bit(c, 4, 0),
    })
}

/// REPORT SUPPORTED OPERATION CODES (SPC-5 table 256): REPORTING OPTIONS 000b–011b.
pub(crate) fn report_supported_operation_codes(c: &[u8]) -> Decoded {
    let reporting_options = u8_at(c, 2) & 7;
    if reporting_options > 3 {
        return Err(Sense::invalid_field_in_cdb(2, Some(2)));
    }
    Ok(Command::ReportSupportedOperationCodes(
        ReportSupportedOperationCodes {
            rctd: bit(c, 2, 7),
            reporting_options,
            requested_operation_code: u8_at(c, 3),
            requested_service_action: be16(c, 4),
            allocation_length: be32(c, 6),
        },
    ))
}

/// REPORT SUPPORTED TASK MANAGEMENT FUNCTIONS (SPC-5 table 259).
pub(crate) fn report_supported_tmf(c: &[u8]) -> Decoded {
    Ok(Command::ReportSupportedTaskManagementFunctions {
        repd: bit(c, 2, 7),
        allocation_length: be32(c, 6),
    })
}

/// FORMAT UNIT (SBC-4 table 34): LONGLIST, FMTDATA; CMPLST and the DEFECT LIST FORMAT matter
/// only with a defect list, which the parameter list header check refuses.
pub(crate) fn format_unit(c: &[u8]) -> Decoded {
    let fmtdata = bit(c, 1, 4);
    if !fmtdata && bit(c, 1, 5) {
        // LONGLIST without a parameter list names a header that is not there.
        return Err(Sense::invalid_field_in_cdb(1, Some(5)));
    }
    Ok(Command::FormatUnit(FormatUnit {
        longlist: bit(c, 1, 5),
        fmtdata,
    }))
}

/// SANITIZE (SBC-4 table 102); the table found the service action.
pub(crate) fn sanitize(c: &[u8]) -> Decoded {
    let action = SanitizeAction::of(u8_at(c, 1) & 0x1F)
        .ok_or_else(|| Sense::invalid_field_in_cdb(1, Some(4)))?;
    Ok(Command::Sanitize(Sanitize {
        immed: bit(c, 1, 7),
        ause: bit(c, 1, 5),
        action,
        parameter_list_length: be16(c, 7),
    }))
}

/// WRITE ATOMIC (16) (SBC-4 table 130): LBA 2..10, ATOMIC BOUNDARY 10..12, TRANSFER LENGTH
/// 12..14, GROUP NUMBER in byte 14.
pub(crate) fn write_atomic16(c: &[u8]) -> Decoded {
    Ok(Command::WriteAtomic {
        rw: rw(be64(c, 2), be16(c, 12).into(), c, 14),
        atomic_boundary: be16(c, 10),
    })
}

/// WRITE ATOMIC (32) (SBC-4): ATOMIC BOUNDARY in bytes 4–5, the 32-bit TRANSFER
/// LENGTH in bytes 28–31, the rest as WRITE (32) without DLD.
pub(crate) fn write_atomic32(c: &[u8]) -> Decoded {
    Ok(Command::WriteAtomic {
        rw: ReadWrite { dld: 0, ..rw32(c) },
        atomic_boundary: be16(c, 4),
    })
}

/// READ LONG (10) (SBC-4): LBA in bytes 2–5, BYTE TRANSFER LENGTH in bytes 7–8.
pub(crate) fn read_long10(c: &[u8]) -> Decoded {
    Ok(Command::ReadLong {
        lba: be32(c, 2).into(),
        byte_transfer_length: be16(c, 7),
    })
}

/// READ LONG (16) (SBC-4, SERVICE ACTION IN (16) 11h): LBA in bytes 2–9, BYTE TRANSFER
/// LENGTH in bytes 12–13.
pub(crate) fn read_long16(c: &[u8]) -> Decoded {
    Ok(Command::ReadLong {
        lba: be64(c, 2),
        byte_transfer_length: be16(c, 12),
    })
}

/// WRITE LONG (10) (SBC-4): WR_UNCOR in byte 1 bit 6, LBA in bytes 2–5, BYTE TRANSFER
/// LENGTH in bytes 7–8.
pub(crate) fn write_long10(c: &[u8]) -> Decoded {
    Ok(Command::WriteLong {
        lba: be32(c, 2).into(),
        byte_transfer_length: be16(c, 7),
        wr_uncor: bit(c, 1, 6),
    })
}

/// WRITE LONG (16) (SBC-4, SERVICE ACTION OUT (16) 11h): WR_UNCOR in byte 1 bit 6, LBA in
/// bytes 2–9, BYTE TRANSFER LENGTH in bytes 12–13.
pub(crate) fn write_long16(c: &[u8]) -> Decoded {
    Ok(Command::WriteLong {
        lba: be64(c, 2),
        byte_transfer_length: be16(c, 12),
        wr_uncor: bit(c, 1, 6),
    })
}

/// REPORT TIMESTAMP (SPC-5 table 269).
pub(crate) fn report_timestamp(c: &[u8]) -> Decoded {
    Ok(Command::ReportTimestamp {
        allocation_length: be32(c, 6),
    })
}

/// SET TIMESTAMP (SPC-5 table 301).
pub(crate) fn set_timestamp(c: &[u8]) -> Decoded {
    Ok(Command::SetTimestamp {
        parameter_list_length: be32(c, 6),
    })
}
/// SET TARGET PORT GROUPS (SPC-4 §6.45, table 327). The parameter list is a 4-byte header and
/// 4-byte descriptors, each naming another of at most 65536 groups, or nothing: another
/// PARAMETER LIST LENGTH is INVALID FIELD IN CDB, as SPC-4 says of a length that violates
/// the device's requirements.
pub(crate) fn set_target_port_groups(c: &[u8]) -> Decoded {
    const LONGEST: u32 = 4 + 4 * 65536;
    let parameter_list_length = be32(c, 6);
    if parameter_list_length != 0
        && (parameter_list_length < 4
            || !parameter_list_length.is_multiple_of(4)
            || parameter_list_length > LONGEST)
    {
        return Err(Sense::invalid_field_in_cdb(6, None));
    }
    Ok(Command::SetTargetPortGroups {
        parameter_list_length,
    })
}

/// REPORT TARGET PORT GROUPS (SPC-5 §6.37): PARAMETER DATA FORMAT (byte 1 bits 7:5) 000b or
/// 001b.
pub(crate) fn report_target_port_groups(c: &[u8]) -> Decoded {
    let extended = match u8_at(c, 1) >> 5 {
        0 => false,
        1 => true,
        _ => return Err(Sense::invalid_field_in_cdb(1, Some(7))),
    };
    Ok(Command::ReportTargetPortGroups {
        extended,
        allocation_length: be32(c, 6),
    })
}
